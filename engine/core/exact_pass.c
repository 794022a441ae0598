/*
 * exact_pass.c -- opts.determinism = "gpu_to_gpu" behind the planner's interface: every path of a
 * reduction (synchronous, async, streams, streamed chunks, shards, segments) computes the exact sums of
 * exact_acc.h and rounds them with its code, on the device (cuda/kernels/exact.cu) or on the host
 * (ops/exact.c) -- the same digits either way, so the same bits whatever the path, the launch shape, the
 * GPU or the backend.
 *
 * A pass zeroes one gr_xsum in device memory and launches the kernel into it; a block folds at most 2^30
 * elements per launch (its shared words then cannot overflow), so longer inputs take several launches
 * into the same sums. The sums come back to pinned memory (2.3 KB) and are rounded here; several (streamed
 * chunks, shards) are merged first, which changes no bit.
 */
#include "core/exact_pass.h"
#include "base/device.h"
#include "base/error.h"
#include "core/policy.h"
#include "ops/exact.h"

#include <string.h>

/* The input in launches of at most 2^30 terms per block: an element adds one, a product of gr.dot's two
 * inputs (L->in->count == 2, one dtype) two. */
static int launch(const gr_run *run, gr_launch *L) {
    void *sums = L->final_out ? L->final_out : L->out;
    int rc = gr_dev_memset(sums, 0, sizeof(gr_xsum), L->stream);
    int count = L->in->count;
    size_t es = gr_dtype_size(run->plan.in_dtype), per = L->grid * (GR_EXACT_MOST_PER_BLOCK / (size_t)count);
    for (size_t lo = 0; lo < L->n && rc == 0; lo += per) {
        gr_inputs piece;
        gr_inputs_one(&piece, (const char *)L->in->at[0].data + lo * es, run->plan.in_dtype,
                      L->n - lo < per ? L->n - lo : per);
        piece.count = count;
        for (int k = 1; k < count; k++) {
            piece.at[k] = piece.at[0];
            piece.at[k].data = (const char *)L->in->at[k].data + lo * es;
        }
        gr_exact_launch X = {
            .in = &piece, .n = (size_t)piece.at[0].shape[0], .in_dtype = run->plan.in_dtype, .op = run->plan.op,
            .sums = sums, .grid = L->grid, .block = L->block, .stream = L->stream,
        };
        rc = gr_exact_gpu.launch(&X);
        if (rc) L->site = X.site;
    }
    return rc;
}

/* Blocks for n elements: enough for 16 elements per thread, at most a full device, at least one. */
static size_t grid(const gr_run *run, size_t n, int block, size_t elem_bytes, const gr_launch_device *dev) {
    (void)run, (void)elem_bytes;
    size_t want = (n + (size_t)block * 16 - 1) / ((size_t)block * 16);
    size_t full = (size_t)dev->sms * (size_t)(dev->max_threads_per_sm / block);
    if (full < 1) full = 1;
    return want < 1 ? 1 : want < full ? want : full;
}

static gr_status host(gr_context *ctx, const gr_run *run, const void *in, size_t n, uint64_t first, void *acc) {
    (void)ctx, (void)first;
    memset(acc, 0, sizeof(gr_xsum));
    gr_exact_add_values(acc, in, n, run->plan.in_dtype, run->plan.op);
    return GR_OK;
}

/* The op's value of the sums, rounded once (exact_acc.h). */
static gr_status result(gr_context *ctx, const gr_run *run, gr_slot *slot, const void *acc, size_t n,
                        gr_result *out) {
    (void)ctx, (void)slot;
    const gr_plan *p = &run->plan;
    memset(out, 0, sizeof *out);
    out->count = 1;
    out->value[0].kind = GR_SCALAR_FLOAT;
    out->value[0].v.f = gr_x_finish(acc, p->op, n, p->ddof, p->acc == GR_FLOAT32);
    return GR_OK;
}

static gr_status finish(gr_context *ctx, const gr_run *run, gr_slot *slot, const void *accs, size_t count, size_t n,
                        gr_result *out) {
    gr_xsum sum, one;
    memset(&sum, 0, sizeof sum);
    for (size_t i = 0; i < count; i++) {
        memcpy(&one, (const char *)accs + i * sizeof one, sizeof one);
        gr_x_merge(&sum, &one);
    }
    return result(ctx, run, slot, &sum, n, out);
}

/* One block of 256 per segment in turn, at most a full device of them. */
static gr_seg_shape shape(const gr_context *ctx, const gr_run *run, size_t n, size_t k) {
    (void)run, (void)n;
    size_t full = (size_t)ctx->info.sms * (size_t)(ctx->info.max_threads_per_sm / 256);
    return (gr_seg_shape){.group = 0, .block = 256, .splits = 1, .grid = k < full ? k : full};
}

/* Each segment's result rounded on the device into element s of out[0], of the accumulator's dtype. */
static int segments(gr_context *ctx, const gr_run *run, gr_seg_launch *L) {
    gr_exact_launch X = {
        .in = L->in, .n = (size_t)L->in->at[0].shape[0], .in_dtype = run->plan.in_dtype, .op = run->plan.op,
        .block = L->block, .grid = L->grid, .stream = L->stream, .k = L->k, .size = L->size, .offsets = L->offsets, .out = L->out[0],
        .out_dtype = run->plan.acc, .ddof = run->plan.ddof,
    };
    /* GPUREDUCE_EXACT_ROUND (a multiple of 16, read with the context) makes the kernel's rounds short, for
     * a spec to reach the carry steps of segments longer than 2^30 elements with small ones */
    X.round = gr_ctx_root(ctx)->exact_round ? gr_ctx_root(ctx)->exact_round : GR_EXACT_MOST_PER_BLOCK;
    int rc = gr_exact_gpu.segments(&X);
    if (rc) L->site = X.site;
    return rc;
}

static gr_status segments_host(gr_context *ctx, const gr_run *run, const void *in, size_t size, const int64_t *bounds,
                               size_t k, gr_buffer *out[2]) {
    (void)ctx;
    const gr_plan *p = &run->plan;
    gr_xsum a;
    size_t es = gr_dtype_size(p->in_dtype);
    for (size_t s = 0; s < k; s++) {
        size_t lo = size ? s * size : (size_t)bounds[s], hi = size ? lo + size : (size_t)bounds[s + 1];
        memset(&a, 0, sizeof a);
        gr_exact_add_values(&a, (const char *)in + lo * es, hi - lo, p->in_dtype, p->op);
        double v = gr_x_finish(&a, p->op, hi - lo, p->ddof, p->acc == GR_FLOAT32);
        if (p->acc == GR_FLOAT32) ((float *)gr_buffer_data(out[0]))[s] = (float)v;
        else ((double *)gr_buffer_data(out[0]))[s] = v;
    }
    return GR_OK;
}

const gr_pass_kernel gr_exact_pass = {
    .what = "the gpu_to_gpu exact kernel%.0s", .launch = launch, .grid = grid, .one_accumulator = 1, .host = host,
    .result = result, .finish = finish, .shape = shape, .segments = segments, .segments_host = segments_host,
};
