/*
 * dot.c -- gr_dot: the sum of the products of two buffers' elements. On the device it is planned as the
 * sum of the first buffer -- the sum's accumulator, block, grid, finish and passes over partials, so
 * that every finish and the result are the sum's -- with the first pass read by the dot kernel
 * (cuda/kernels/dot.cu) over both inputs, or at gpu_to_gpu by the exact kernel's products
 * (cuda/kernels/exact.cu). Where the host reads the data (the cpu backend, pinned host buffers) a loop
 * in the same accumulator, or exact.c's products.
 */
#include "gr.h"
#include "base/device.h"
#include "base/error.h"
#include "core/buffer.h"
#include "core/context.h"
#include "core/dot.h"
#include "core/layout.h"
#include "core/exact_pass.h"
#include "core/exec.h"
#include "core/op_pass.h"
#include "core/pending.h"
#include "core/pool.h"
#include "core/segments.h"
#include "ops/exact.h"
#include "ops/ops.h"
#include "base/small_floats.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* ---- the pass kernels: the sum's, with a first pass over both inputs ---------------------------------- */

static int op_launch(const gr_run *run, gr_launch *L) {
    return L->partials_in ? gr_op_pass.launch(run, L) : gr_dot_gpu.launch(L);
}

static gr_status op_result(gr_context *ctx, const gr_run *run, gr_slot *slot, const void *acc, size_t n,
                           gr_result *out) {
    return gr_op_pass.result(ctx, run, slot, acc, n, out);
}

static gr_status op_finish(gr_context *ctx, const gr_run *run, gr_slot *slot, const void *accs, size_t count,
                           size_t n, gr_result *out) {
    return gr_op_pass.finish(ctx, run, slot, accs, count, n, out);
}

static gr_seg_shape op_shape(const gr_context *ctx, const gr_run *run, size_t n, size_t k) {
    return gr_op_pass.shape(ctx, run, n, k);
}

/* The launch's inputs are both (segments.c's queue puts the second beside the first). */
static int op_segments(gr_context *ctx, const gr_run *run, gr_seg_launch *L) {
    (void)ctx, (void)run;
    return gr_dot_gpu.segments(L);
}

/* Each segment's products on the host, its value stored as the sum's result. */
static gr_status op_segments_host(gr_context *ctx, const gr_run *run, const void *in, size_t size,
                                  const int64_t *bounds, size_t k, gr_buffer *out[2]) {
    const gr_plan *p = &run->plan;
    size_t es = gr_dtype_size(p->in_dtype);
    for (size_t s = 0; s < k; s++) {
        size_t lo = size ? s * size : (size_t)bounds[s], hi = size ? lo + size : (size_t)bounds[s + 1];
        unsigned char value[8];
        gr_dot_host_acc((const char *)in + lo * es, (const char *)run->with[0] + lo * es, hi - lo, p->in_dtype, p->acc, value);
        gr_result r = gr_op_result(GR_SUM, value, p->acc, p->in_dtype, hi - lo, 0);
        gr_status st = gr_segment_result_store(ctx, gr_buffer_data(out[0]), s, gr_buffer_dtype(out[0]), r.value[0]);
        if (st != GR_OK) return st;
    }
    return GR_OK;
}

static const gr_pass_kernel dot_op_pass = {
    .what = "gr.dot's kernel%.0s", .launch = op_launch, .result = op_result, .finish = op_finish, .shape = op_shape,
    .segments = op_segments, .segments_host = op_segments_host,
};

/* The exact products into one gr_xsum: exact_pass.c's launches, which take both inputs (two terms a
 * pair). */
static int exact_launch(const gr_run *run, gr_launch *L) { return gr_exact_pass.launch(run, L); }

static gr_status exact_result(gr_context *ctx, const gr_run *run, gr_slot *slot, const void *acc, size_t n,
                              gr_result *out) {
    return gr_exact_pass.result(ctx, run, slot, acc, n, out);
}

static gr_status exact_finish(gr_context *ctx, const gr_run *run, gr_slot *slot, const void *accs, size_t count,
                              size_t n, gr_result *out) {
    return gr_exact_pass.finish(ctx, run, slot, accs, count, n, out);
}

static gr_seg_shape exact_shape(const gr_context *ctx, const gr_run *run, size_t n, size_t k) {
    return gr_exact_pass.shape(ctx, run, n, k);
}

/* Each segment's exact dot rounded on the device into element s of out[0] (exact.cu), as exact_pass.c's
 * segments are. */
static int exact_segments(gr_context *ctx, const gr_run *run, gr_seg_launch *L) {
    gr_exact_launch X = {
        .in = L->in, .n = (size_t)L->in->at[0].shape[0], .in_dtype = run->plan.in_dtype, .op = GR_SUM, .block = L->block,
        .grid = L->grid, .stream = L->stream, .k = L->k, .size = L->size, .offsets = L->offsets, .out = L->out[0],
        .out_dtype = run->plan.acc, .ddof = 0,
    };
    X.round = gr_ctx_root(ctx)->exact_round ? gr_ctx_root(ctx)->exact_round : GR_EXACT_MOST_PER_BLOCK;
    int rc = gr_exact_gpu.segments(&X);
    if (rc) L->site = X.site;
    return rc;
}

static gr_status exact_segments_host(gr_context *ctx, const gr_run *run, const void *in, size_t size,
                                     const int64_t *bounds, size_t k, gr_buffer *out[2]) {
    const gr_plan *p = &run->plan;
    size_t es = gr_dtype_size(p->in_dtype);
    gr_xsum *a = malloc(sizeof *a);
    if (!a) return gr_fail(ctx, GR_ENOMEM, "out of host memory");
    for (size_t s = 0; s < k; s++) {
        size_t lo = size ? s * size : (size_t)bounds[s], hi = size ? lo + size : (size_t)bounds[s + 1];
        memset(a, 0, sizeof *a);
        gr_exact_add_products(a, (const char *)in + lo * es, (const char *)run->with[0] + lo * es, hi - lo, p->in_dtype);
        double v = gr_x_finish(a, GR_SUM, hi - lo, 0, p->acc == GR_FLOAT32);
        if (p->acc == GR_FLOAT32) ((float *)gr_buffer_data(out[0]))[s] = (float)v;
        else ((double *)gr_buffer_data(out[0]))[s] = v;
    }
    free(a);
    return GR_OK;
}

static const gr_pass_kernel dot_exact_pass = {
    .what = "gr.dot's exact kernel%.0s", .launch = exact_launch, .one_accumulator = 1, .result = exact_result,
    .finish = exact_finish, .shape = exact_shape, .segments = exact_segments, .segments_host = exact_segments_host,
};

/* ---- the host's loop ------------------------------------------------------------------------------------ */

/* The sum's accumulator of the n products at x and y, into out (gr_op_result reads it): eight running
 * sums, element i into sum i % 8, added in order at the end. Integers multiply and add as 64-bit words
 * (sign- or zero-extended: wrapping, as the device does). Float products are exact in a double for
 * float32 and narrower elements; a float32 accumulator adds each one in double and rounds to float32. */
enum { LANES = 8 };

#define DOT_DECODE_C(e) (e)
#define DOT_DECODE_f16(e) gr_f16_to_double(e)
#define DOT_DECODE_bf16(e) gr_bf16_to_double(e)
#define DOT_DECODE_e4m3(e) gr_e4m3_to_double(e)
#define DOT_DECODE_e5m2(e) gr_e5m2_to_double(e)
#define DOT_CASE(E, name, ctype, bytes, is_float, is_signed, kind, lowest, highest, float_acc, nccl, format)      \
    case GR_##E: {                                                                                              \
        const ctype *x = xv, *y = yv;                                                                           \
        for (size_t i = 0; i < n; i++) {                                                                        \
            if (is_float && f32) {                                                                              \
                float *s = &fs[i % LANES];                                                                      \
                *s = (float)((double)DOT_DECODE_##format(x[i]) * (double)DOT_DECODE_##format(y[i]) + *s);       \
            } else if (is_float) {                                                                              \
                ds[i % LANES] += (double)DOT_DECODE_##format(x[i]) * (double)DOT_DECODE_##format(y[i]);         \
            } else {                                                                                            \
                uint64_t u = is_signed ? (uint64_t)(int64_t)x[i] : (uint64_t)x[i];                              \
                uint64_t v = is_signed ? (uint64_t)(int64_t)y[i] : (uint64_t)y[i];                              \
                ws[i % LANES] += u * v;                                                                         \
            }                                                                                                   \
        }                                                                                                       \
        break;                                                                                                  \
    }

void gr_dot_host_acc(const void *xv, const void *yv, size_t n, gr_dtype t, gr_dtype acc, void *out) {
    float fs[LANES] = {0};
    double ds[LANES] = {0};
    uint64_t ws[LANES] = {0};
    const int f32 = acc == GR_FLOAT32;
    switch (t) {
        GR_DTYPE_LIST(DOT_CASE)
    case GR_DTYPE_COUNT: break;
    }
    float f = 0;
    double d = 0;
    uint64_t w = 0;
    for (int k = 0; k < LANES; k++) f += fs[k], d += ds[k], w += ws[k];
    if (!gr_dtype_is_float(t)) memcpy(out, &w, sizeof w);
    else if (f32) memcpy(out, &f, sizeof f);
    else memcpy(out, &d, sizeof d);
}
#undef DOT_CASE

static gr_status dot_on_host(gr_context *ctx, const gr_buffer *a, const gr_buffer *b, const gr_options *o,
                             gr_dtype acc, gr_result *out) {
    (void)ctx;
    gr_dtype t = a->dtype;
    size_t n = a->n;
    memset(out, 0, sizeof *out);
    if (o->determinism == GR_DET_GPU_TO_GPU) {
        gr_xsum *sums = calloc(1, sizeof *sums);
        if (!sums) return gr_fail(ctx, GR_ENOMEM, "out of host memory");
        gr_exact_add_products(sums, gr_buffer_data(a), gr_buffer_data(b), n, t);
        out->count = 1;
        out->value[0].kind = GR_SCALAR_FLOAT;
        out->value[0].v.f = gr_x_finish(sums, GR_SUM, n, 0, acc == GR_FLOAT32);
        free(sums);
        return GR_OK;
    }
    unsigned char value[8];
    gr_dot_host_acc(gr_buffer_data(a), gr_buffer_data(b), n, t, acc, value);
    *out = gr_op_result(GR_SUM, value, acc, t, n, 0);
    return GR_OK;
}

/* ---- checks and plans ------------------------------------------------------------------------------------ */

/* gpu_to_gpu is for the float dtypes. */
static gr_status check_exact(gr_context *ctx, const gr_buffer *a, const gr_options *o) {
    if (o->determinism == GR_DET_GPU_TO_GPU && !gr_exact_takes(a->dtype))
        return gr_fail_arg(ctx, GR_EINVAL, "determinism", "'gpu_to_gpu' of gr.dot is for the float dtypes (the "
                           "integer dtypes' products sum exactly in 64 bits at every level: leave it out)");
    return GR_OK;
}

/* a and b: one dtype, one shape, one side and device; the options those of a sum of a. */
gr_status gr_dot_check_pair(gr_context *ctx, const gr_buffer *a, const gr_buffer *b, const gr_options *o) {
    if (a->dtype != b->dtype)
        return gr_fail_arg(ctx, GR_EINVAL, "b", "gr.dot takes two buffers of one dtype (a is %s, b is %s: convert "
                           "one with astype)", gr_dtype_name(a->dtype), gr_dtype_name(b->dtype));
    int same = a->ndim == b->ndim && a->n == b->n;
    for (int d = 0; same && d < a->ndim; d++) same = a->shape[d] == b->shape[d];
    char sa[200], sb[200];
    if (!same)
        return gr_fail_arg(ctx, GR_EINVAL, "b", "gr.dot takes two buffers of one shape (a is %s, b is %s)",
                           gr_buffer_shape_text(a, sa, sizeof sa), gr_buffer_shape_text(b, sb, sizeof sb));
    if (gr_buffer_where(a) != gr_buffer_where(b))
        return gr_fail_arg(ctx, GR_EINVAL, "b", "gr.dot takes two buffers on one side (a is in %s memory, b in %s)",
                           gr_buffer_where(a) == GR_DEVICE ? "device" : "host",
                           gr_buffer_where(b) == GR_DEVICE ? "device" : "host");
    gr_status st = gr_same_device(ctx, a, b, "b");
    if (st != GR_OK) return st;
    if (o->user || o->cpu)
        return gr_fail_arg(ctx, GR_EINVAL, "op", "gr.dot sums products; an operator of several inputs goes to "
                           "gr.reduce({a, b}, {op = ...})");
    if (o->op != GR_SUM) return gr_fail_arg(ctx, GR_EINVAL, "op", "gr.dot sums products (op is sum)");
    const char *way = gr_options_way(o);
    if (way)
        return gr_fail_arg(ctx, GR_EINVAL, way, "gr.dot chooses its own kernel and shape (the sum's plan over "
                           "both inputs); this option does not apply to it");
    return check_exact(ctx, a, o);
}

/* Compact handles on a's and b's elements: new handles on their memory, or compact copies of strided
 * views; both freed by the caller. */
static gr_status compact_pair(gr_context *ctx, gr_buffer *a, gr_buffer *b, gr_buffer **ca, gr_buffer **cb) {
    *ca = *cb = NULL;
    gr_status st = gr_buffer_contiguous(ctx, a, ca);
    if (st == GR_OK) st = gr_buffer_contiguous(ctx, b, cb);
    if (st != GR_OK) {
        gr_buffer_free(ctx, *ca);
        *ca = NULL;
    }
    return st;
}

/* The sum's plan of n elements of t with the dot's first pass; *host set where the host reads the data. */
static gr_status plan_dot(gr_context *ctx, const gr_buffer *a, const gr_options *o, gr_run *run, int *host,
                          gr_dtype *acc) {
    int k = gr_op_acc_dtype(ctx, GR_SUM, a->dtype, o->acc);
    if (k < 0) return GR_EINVAL;
    *acc = (gr_dtype)k;
    *host = ctx->base.backend != GR_BACKEND_CUDA || gr_buffer_where(a) == GR_HOST;
    if (*host) return GR_OK;
    if (!&gr_dot_gpu || !gr_dot_gpu.launch || (o->determinism == GR_DET_GPU_TO_GPU && !&gr_exact_gpu))
        return gr_fail(ctx, GR_ENODEV, "gr.dot of device data needs the CUDA kernels (this build has none)");
    if (o->stream && o->stream->device != ctx->device) return gr_stream_misplaced(ctx, o->stream);
    gr_status st = gr_plan_run(ctx, a->n, a->dtype, GR_DEVICE, o, run);
    if (st != GR_OK) return st;
    run->kernel = run->plan.exact ? &dot_exact_pass : &dot_op_pass;
    return GR_OK;
}

gr_status gr_dot_piece_plan(gr_context *ctx, gr_dtype t, size_t n, const gr_options *o, gr_run *run) {
    gr_status st = gr_plan_run(ctx, n, t, GR_DEVICE, o, run);
    if (st != GR_OK) return st;
    run->kernel = run->plan.exact ? &dot_exact_pass : &dot_op_pass;
    return GR_OK;
}

static void *stream_of(gr_context *ctx, const gr_options *o) {
    return o->stream && o->stream->handle ? o->stream->handle : ctx->stream;
}

gr_status gr_dot_plan(gr_context *ctx, const gr_buffer *a, const gr_buffer *b, const gr_options *o, gr_run *run,
                      int *host) {
    gr_status st = gr_dot_check_pair(ctx, a, b, o);
    gr_dtype acc;
    if (st == GR_OK) st = gr_buffer_check_compact(ctx, a, "a");
    if (st == GR_OK) st = gr_buffer_check_compact(ctx, b, "b");
    return st == GR_OK ? plan_dot(ctx, a, o, run, host, &acc) : st;
}

/* ---- entry points ------------------------------------------------------------------------------------ */

gr_status gr_dot(gr_context *ctx, gr_buffer *a, gr_buffer *b, const gr_options *o, gr_result *out) {
    ctx = gr_ctx_for(ctx, a);
    gr_status st = gr_dot_check_pair(ctx, a, b, o);
    if (st != GR_OK) return st;
    gr_run run;
    int host;
    gr_dtype acc;
    if ((st = plan_dot(ctx, a, o, &run, &host, &acc)) != GR_OK) return st;
    gr_buffer *ca, *cb;
    if ((st = compact_pair(ctx, a, b, &ca, &cb)) != GR_OK) return st;
    if (host) st = dot_on_host(ctx, ca, cb, o, acc, out);
    else if (run.plan.npasses == 0) st = gr_op_empty_result(ctx, GR_SUM, a->dtype, acc, out);
    else {
        gr_inputs in;
        gr_buffer *pair[2] = {ca, cb};
        gr_buffer_inputs(&in, pair, 2);
        st = gr_exec(ctx, &in, &run, stream_of(ctx, o), out);
    }
    gr_buffer_free(ctx, ca);
    gr_buffer_free(ctx, cb);
    return st;
}

gr_status gr_dot_async(gr_context *ctx, gr_buffer *a, gr_buffer *b, const gr_options *o, gr_pending **out) {
    *out = NULL;
    ctx = gr_ctx_for(ctx, a);
    gr_status st = gr_dot_check_pair(ctx, a, b, o);
    if (st != GR_OK) return st;
    gr_pending *p = calloc(1, sizeof *p);
    if (!p) return gr_fail(ctx, GR_ENOMEM, "out of host memory");
    p->ctx = ctx;
    int host;
    gr_dtype acc;
    st = plan_dot(ctx, a, o, &p->run, &host, &acc);
    if (st == GR_OK) st = compact_pair(ctx, a, b, &p->b, &p->more[0]);
    if (st == GR_OK && (host || p->run.plan.npasses == 0)) {
        /* nothing to queue: the value is known now */
        p->status = host ? dot_on_host(ctx, p->b, p->more[0], o, acc, &p->value)
                         : gr_op_empty_result(ctx, GR_SUM, a->dtype, acc, &p->value);
        p->finished = 1;
        st = p->status;
    } else if (st == GR_OK) {
        void *stream = stream_of(ctx, o);
        st = gr_slot_acquire(ctx, p->run.plan.dev_bytes, p->run.plan.host_bytes, &p->slot);
        if (st == GR_OK) {
            gr_inputs in;
            gr_buffer *pair[2] = {p->b, p->more[0]};
            gr_buffer_inputs(&in, pair, 2);
            st = gr_exec_start(ctx, &in, 0, &p->run, p->slot, stream, 0);
            if (st == GR_OK) st = gr_storage_mark_read(ctx, p->b->st, stream);
            if (st == GR_OK) st = gr_storage_mark_read(ctx, p->more[0]->st, stream);
            if (st != GR_OK) gr_dev_stream_sync(stream);
        }
    }
    if (st != GR_OK) {
        gr_pending_free(ctx, p);
        return st;
    }
    *out = p;
    return GR_OK;
}

/* ---- a dot product per segment, per row ------------------------------------------------------------- */

/* What a dot per segment or row checks beyond the segments' own checks. */
static gr_status many_ready(gr_context *ctx, const gr_buffer *a, const gr_options *o, gr_buffer *out[2]) {
    gr_status st = out[0] ? gr_buffer_check_compact(ctx, out[0], "out") : GR_OK;
    if (st != GR_OK) return st;
    int device = ctx->base.backend == GR_BACKEND_CUDA && gr_buffer_where(a) == GR_DEVICE;
    if (device && (!&gr_dot_gpu || !gr_dot_gpu.segments || (o->determinism == GR_DET_GPU_TO_GPU && !&gr_exact_gpu)))
        return gr_fail(ctx, GR_ENODEV, "gr.dot of device data needs the CUDA kernels (this build has none)");
    return GR_OK;
}

/* The pair as the segment kernels read it: compact handles *ca, *cb and their segments -- seg_in's, or
 * with seg_in NULL the rows of the reduced `axes` (the kept axes first, in order, then the reduced
 * ones, so that each row of the compact permuted pair is one result's products and the results come in
 * the kept axes' row-major order). *none: nothing to reduce, every result (filled here) the sum of
 * nothing. */
static gr_status many_pair(gr_context *ctx, gr_buffer *a, gr_buffer *b, const gr_segments *seg_in, unsigned axes,
                           gr_buffer *out[2], gr_buffer **ca, gr_buffer **cb, gr_segments *seg, int *axis_rows,
                           int *none) {
    *ca = *cb = NULL;
    *none = 0;
    gr_status st;
    if (seg_in) {
        st = gr_buffer_check_compact(ctx, a, "a");
        if (st == GR_OK) st = gr_buffer_check_compact(ctx, b, "b");
        if (st == GR_OK) st = compact_pair(ctx, a, b, ca, cb);
        *seg = *seg_in;
        *axis_rows = 0;
        return st;
    }
    if (!axes || axes >> a->ndim)
        return gr_fail_arg(ctx, GR_EINVAL, "axis", "axes 1..%d of a view of %d axes", a->ndim, a->ndim);
    int perm[GR_MAX_DIMS];
    size_t row, kept;
    gr_layout_reduced_last(a, axes, perm, &row, &kept);
    if (row == 0 || a->n == 0) {
        gr_scalar zero = {0};
        zero.kind = gr_dtype_is_float(gr_buffer_dtype(out[0])) ? GR_SCALAR_FLOAT : GR_SCALAR_INT;
        *none = 1;
        return gr_buffer_size(out[0]) ? gr_buffer_fill(ctx, out[0], zero) : GR_OK;
    }
    gr_buffer *pa = NULL, *pb = NULL;
    st = gr_buffer_permute(ctx, a, perm, &pa);
    if (st == GR_OK) st = gr_buffer_permute(ctx, b, perm, &pb);
    if (st == GR_OK) st = compact_pair(ctx, pa, pb, ca, cb);
    gr_buffer_free(ctx, pa);
    gr_buffer_free(ctx, pb);
    *seg = (gr_segments){row, NULL};
    *axis_rows = 1;
    return st;
}

/* The dot's segment kernels queued over the pair (gr_segments_inputs_queue's wait record in *w). */
static gr_status many_queue(gr_context *ctx, gr_buffer *ca, gr_buffer *cb, const gr_options *o,
                            const gr_segments *seg, int axis_rows, gr_buffer *out[2], gr_seg_wait *w) {
    gr_buffer *pair[2] = {ca, cb};
    return gr_segments_inputs_queue(ctx, pair, 2, o->determinism == GR_DET_GPU_TO_GPU ? &dot_exact_pass : &dot_op_pass,
                                    o, seg, axis_rows, out, w);
}

/* A dot per segment (seg_in) or along axes (seg_in NULL), synchronously on the context's stream. */
static gr_status dot_many(gr_context *ctx, gr_buffer *a, gr_buffer *b, const gr_options *o, const gr_segments *seg_in,
                          unsigned axes, gr_buffer *out[2]) {
    ctx = gr_ctx_for(ctx, a);
    gr_status st = gr_dot_check_pair(ctx, a, b, o);
    if (st != GR_OK) return st;
    if (o->stream)
        return gr_fail_arg(ctx, GR_EINVAL, "stream", "a dot product per segment or row runs on the context's "
                           "stream when synchronous (leave opts.stream out, or add async = true)");
    gr_buffer *ca, *cb;
    gr_segments seg;
    int rows, none;
    if ((st = many_ready(ctx, a, o, out)) != GR_OK) return st;
    if ((st = many_pair(ctx, a, b, seg_in, axes, out, &ca, &cb, &seg, &rows, &none)) == GR_OK && !none) {
        gr_seg_wait w;
        st = many_queue(ctx, ca, cb, o, &seg, rows, out, &w);
        gr_status done = gr_segments_wait(&w);
        if (st == GR_OK) st = done;
    }
    gr_buffer_free(ctx, ca);
    gr_buffer_free(ctx, cb);
    return st;
}

gr_status gr_dot_segments(gr_context *ctx, gr_buffer *a, gr_buffer *b, const gr_options *o, const gr_segments *seg,
                          gr_buffer *out[2]) {
    return dot_many(ctx, a, b, o, seg, 0, out);
}

gr_status gr_dot_axes(gr_context *ctx, gr_buffer *a, gr_buffer *b, const gr_options *o, unsigned axes,
                      gr_buffer *out[2]) {
    return dot_many(ctx, a, b, o, NULL, axes, out);
}

/* Asynchronously, as gr_reduce_axes_async: the kernels queued on o->stream (or the context's), an event
 * after them; the pending holds the pair as read (handles on a's and b's memory, or their compact
 * copies) and the scratch until the event has passed, and a's, b's and the results' storage record the
 * work, so that writing or freeing them (and reading a result) waits for it. */
gr_status gr_dot_many_async(gr_context *ctx, gr_buffer *a, gr_buffer *b, const gr_options *o, const gr_segments *seg_in,
                            unsigned axes, gr_buffer *out[2], gr_pending **out_p) {
    *out_p = NULL;
    ctx = gr_ctx_for(ctx, a);
    gr_status st = gr_dot_check_pair(ctx, a, b, o);
    if (st != GR_OK) return st;
    gr_pending *p = gr_pending_new_queued(ctx, "dot product");
    if (!p) return GR_ENOMEM;
    void *saved = ctx->stream;
    gr_options plain = *o;
    plain.stream = NULL;
    if (o->stream && o->stream->device != ctx->device) st = gr_stream_misplaced(ctx, o->stream);
    else if (o->stream && o->stream->handle) ctx->stream = o->stream->handle;
    gr_segments seg;
    int rows, none = 1;
    gr_seg_wait w = {0};
    if (st == GR_OK) st = many_ready(ctx, a, &plain, out);
    if (st == GR_OK) st = many_pair(ctx, a, b, seg_in, axes, out, &p->temps[0], &p->temps[1], &seg, &rows, &none);
    if (st == GR_OK && !none) st = many_queue(ctx, p->temps[0], p->temps[1], &plain, &seg, rows, out, &w);
    if (st == GR_OK && w.ctx) {             /* in flight; the pair is held as p->temps, not by a handle */
        p->held[0] = w.slot;
        gr_status launched = w.rc ? gr_fail_dev_at(ctx, w.rc, w.what, w.site) : GR_OK;   /* a failed launch */
        gr_buffer *read[] = {a, b, out[0]};
        st = gr_pending_start_queued(ctx, p, launched, NULL, read, 3, "recording a dot's end");
    }
    ctx->stream = saved;
    if (st != GR_OK || p->finished) {       /* failed, or done already (host data, nothing to reduce) */
        if (!p->finished) gr_pending_settle_queued(ctx, p);
        for (int i = 0; i < 2; i++) {
            gr_buffer_free(ctx, p->temps[i]);
            p->temps[i] = NULL;
        }
    }
    if (st != GR_OK) {
        free(p);
        return st;
    }
    *out_p = p;
    return GR_OK;
}
