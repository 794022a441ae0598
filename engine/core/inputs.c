/*
 * inputs.c -- a user operator of several inputs (gr.operator's `inputs`) over as many buffers: whole,
 * started on the device, per segment, along axes. The buffers have one shape (dtypes may differ) and are
 * read as compact handles -- strided views through compact copies, in their row-major order -- so the
 * kernels see contiguous 1-D inputs element for element. On the device the operator's image for their
 * dtypes runs the passes (its gr_op_main reads every input, cuda/device/inputs.cuh; the passes after it,
 * the finishes and post are any operator's); on the host its cpu functions (core/operator_cpu.c).
 */
#include "gr.h"
#include "base/device.h"
#include "base/error.h"
#include "core/buffer.h"
#include "core/context.h"
#include "core/exec.h"
#include "core/layout.h"
#include "core/operator_cpu.h"
#include "core/pending.h"
#include "core/pool.h"
#include "core/segments.h"

#include <stdlib.h>
#include <string.h>

/* ---- checks -------------------------------------------------------------------------------------- */

/* bufs[0..count): 1 to GR_OPERATOR_INPUTS buffers of one shape, on one side and device. */
static gr_status check_bufs(gr_context *ctx, gr_buffer *const *bufs, int count) {
    if (count < 1 || count > GR_OPERATOR_INPUTS)
        return gr_fail_arg(ctx, GR_EINVAL, "bufs", "an operator reads 1 to %d inputs (%d buffers given)",
                           GR_OPERATOR_INPUTS, count);
    for (int k = 0; k < count; k++)
        if (!bufs[k]) return gr_fail_arg(ctx, GR_EINVAL, "bufs", "buffer %d is NULL", k + 1);
    const gr_buffer *a = bufs[0];
    for (int k = 1; k < count; k++) {
        const gr_buffer *b = bufs[k];
        int same = a->ndim == b->ndim && a->n == b->n;
        for (int d = 0; same && d < a->ndim; d++) same = a->shape[d] == b->shape[d];
        char sa[200], sb[200];
        if (!same)
            return gr_fail_arg(ctx, GR_EINVAL, "bufs", "the inputs of an operator have one shape (buffer 1 is %s, "
                               "buffer %d is %s)", gr_buffer_shape_text(a, sa, sizeof sa), k + 1, gr_buffer_shape_text(b, sb, sizeof sb));
        if (gr_buffer_where(a) != gr_buffer_where(b))
            return gr_fail_arg(ctx, GR_EINVAL, "bufs", "the inputs of an operator are on one side (buffer 1 is in %s "
                               "memory, buffer %d in %s)", gr_buffer_where(a) == GR_DEVICE ? "device" : "host", k + 1,
                               gr_buffer_where(b) == GR_DEVICE ? "device" : "host");
        gr_status st = gr_same_device(ctx, a, b, "bufs");
        if (st != GR_OK) return st;
    }
    return GR_OK;
}

/* The context of the inputs' device (where there is a first buffer to say it), then the inputs checked. */
static gr_status enter(gr_context **ctx, gr_buffer *const *bufs, int count) {
    if (count >= 1 && count <= GR_OPERATOR_INPUTS && bufs[0]) *ctx = gr_ctx_for(*ctx, bufs[0]);
    return check_bufs(*ctx, bufs, count);
}

/* o with the reduction's input count, which the planner matches against the operator's. */
static gr_options with_count(const gr_options *o, int count) {
    gr_options c = *o;
    c.ninputs = count;
    return c;
}

/* Compact handles on every input (new handles on their memory, or compact copies of strided views),
 * all freed by free_all. */
static gr_status compact_all(gr_context *ctx, gr_buffer *const *bufs, int count, gr_buffer **out) {
    for (int k = 0; k < count; k++) out[k] = NULL;
    for (int k = 0; k < count; k++) {
        gr_status st = gr_buffer_contiguous(ctx, bufs[k], &out[k]);
        if (st != GR_OK) {
            for (int j = 0; j < k; j++) {
                gr_buffer_free(ctx, out[j]);
                out[j] = NULL;
            }
            return st;
        }
    }
    return GR_OK;
}

static void free_all(gr_context *ctx, gr_buffer **bufs, int count) {
    for (int k = 0; k < count; k++) gr_buffer_free(ctx, bufs[k]);
}

static void *stream_of(gr_context *ctx, const gr_options *o) {
    return o->stream && o->stream->handle ? o->stream->handle : ctx->stream;
}

/* The operator's run over n elements whose first input is b (its image's passes), checked. */
static gr_status plan(gr_context *ctx, const gr_buffer *b, const gr_options *o, gr_run *run) {
    if (o->stream && o->stream->device != ctx->device) return gr_stream_misplaced(ctx, o->stream);
    if (!o->user) return gr_fail_arg(ctx, GR_EINVAL, "op", "an operator of several inputs needs its kernels "
                                     "(gr_operator_prepare_inputs) or its cpu functions");
    return gr_plan_run(ctx, b->n, b->dtype, gr_buffer_where(b), o, run);
}

/* ---- whole buffers ----------------------------------------------------------------------------------- */

gr_status gr_reduce_inputs(gr_context *ctx, gr_buffer *const *bufs, int count, const gr_options *o,
                           gr_result *out) {
    memset(out, 0, sizeof *out);
    gr_status st = enter(&ctx, bufs, count);
    if (st != GR_OK) return st;
    gr_options c = with_count(o, count);
    gr_buffer *compact[GR_OPERATOR_INPUTS];
    int by_cpu = gr_operator_cpu_takes(ctx, &c, bufs[0]);
    gr_run run;
    if (!by_cpu && (st = plan(ctx, bufs[0], &c, &run)) != GR_OK) return st;
    if ((st = compact_all(ctx, bufs, count, compact)) != GR_OK) return st;
    if (by_cpu) {
        st = gr_operator_cpu_inputs_reduce(ctx, &c, compact, count, out);
    } else {
        gr_inputs in;
        gr_buffer_inputs(&in, compact, count);
        st = gr_exec(ctx, &in, &run, stream_of(ctx, &c), out);
    }
    free_all(ctx, compact, count);
    return st;
}

gr_status gr_reduce_inputs_async(gr_context *ctx, gr_buffer *const *bufs, int count, const gr_options *o,
                                 gr_pending **out) {
    *out = NULL;
    gr_status st = enter(&ctx, bufs, count);
    if (st != GR_OK) return st;
    gr_options c = with_count(o, count);
    if (gr_operator_cpu_takes(ctx, &c, bufs[0]))
        return gr_fail_arg(ctx, GR_EINVAL, "async", "a user operator's cpu functions run synchronously");
    gr_pending *p = calloc(1, sizeof *p);
    if (!p) return gr_fail(ctx, GR_ENOMEM, "out of host memory");
    p->ctx = ctx;
    st = plan(ctx, bufs[0], &c, &p->run);
    if (st == GR_OK && p->run.fold)
        st = gr_fail_arg(ctx, GR_EINVAL, "finish", "'%s' runs the operator's cpu.reduce, synchronously (leave out "
                         "opts.async, or finish on the device)", gr_finish_name(p->run.plan.finish));
    gr_buffer *compact[GR_OPERATOR_INPUTS];
    if (st == GR_OK && (st = compact_all(ctx, bufs, count, compact)) == GR_OK) {
        p->b = compact[0];                  /* the pending holds them until the passes are done */
        for (int k = 1; k < count; k++) p->more[k - 1] = compact[k];
    }
    if (st == GR_OK) {
        void *stream = stream_of(ctx, &c);
        st = gr_slot_acquire(ctx, p->run.plan.dev_bytes, p->run.plan.host_bytes, &p->slot);
        if (st == GR_OK) {
            gr_inputs in;
            gr_buffer_inputs(&in, compact, count);
            st = gr_exec_start(ctx, &in, 0, &p->run, p->slot, stream, 0);
            for (int k = 0; k < count && st == GR_OK; k++) st = gr_storage_mark_read(ctx, compact[k]->st, stream);
            if (st != GR_OK) gr_dev_stream_sync(stream);    /* queued passes end before the slot goes back */
        }
    }
    if (st != GR_OK) {
        gr_pending_free(ctx, p);
        return st;
    }
    *out = p;
    return GR_OK;
}

/* ---- per segment, along axes ---------------------------------------------------------------------------- */

/* The segments (rows of seg->size with axis_rows) of compact inputs, by the operator's segments kernel or
 * its cpu functions. */
static gr_status segments(gr_context *ctx, gr_buffer *const *bufs, int count, const gr_options *o,
                          const gr_segments *seg, int axis_rows, gr_buffer *out[2]) {
    if (o->stream)
        return gr_fail_arg(ctx, GR_EINVAL, "stream", "an operator's segments and rows run on the context's stream, "
                           "synchronously (leave opts.stream out)");
    gr_status st = out[0] ? gr_buffer_check_compact(ctx, out[0], "out") : GR_OK;
    return st == GR_OK ? gr_segments_inputs(ctx, bufs, count, NULL, o, seg, axis_rows, out) : st;
}

gr_status gr_reduce_inputs_segments(gr_context *ctx, gr_buffer *const *bufs, int count, const gr_options *o,
                                    const gr_segments *seg, gr_buffer *out[2]) {
    gr_status st = enter(&ctx, bufs, count);
    if (st != GR_OK) return st;
    for (int k = 0; k < count && st == GR_OK; k++) st = gr_buffer_check_compact(ctx, bufs[k], "bufs");
    gr_options c = with_count(o, count);
    return st == GR_OK ? segments(ctx, bufs, count, &c, seg, 0, out) : st;
}

gr_status gr_reduce_inputs_axes(gr_context *ctx, gr_buffer *const *bufs, int count, const gr_options *o,
                                unsigned axes, gr_buffer *out[2]) {
    gr_status st = enter(&ctx, bufs, count);
    if (st != GR_OK) return st;
    const gr_buffer *a = bufs[0];
    if (!axes || axes >> a->ndim)
        return gr_fail_arg(ctx, GR_EINVAL, "axis", "axes 1..%d of a view of %d axes", a->ndim, a->ndim);
    gr_options c = with_count(o, count);
    int perm[GR_MAX_DIMS];
    size_t row, results;
    gr_layout_reduced_last(a, axes, perm, &row, &results);
    gr_buffer *permuted[GR_OPERATOR_INPUTS] = {NULL}, *compact[GR_OPERATOR_INPUTS] = {NULL};
    if (row == 0) {
        /* every result an empty segment's: the operator's of nothing, from k + 1 zero boundaries */
        gr_buffer *bounds = NULL;
        for (int k = 0; k < count && st == GR_OK; k++)
            st = gr_buffer_new(ctx, 0, gr_buffer_dtype(bufs[k]), gr_buffer_where(bufs[k]), &compact[k]);
        if (st == GR_OK) st = gr_buffer_new(ctx, results + 1, GR_INT64, gr_buffer_where(a), &bounds);
        if (st == GR_OK) st = gr_buffer_fill(ctx, bounds, (gr_scalar){.kind = GR_SCALAR_INT, .v.i = 0});
        gr_segments seg = {0, bounds};
        if (st == GR_OK) st = segments(ctx, compact, count, &c, &seg, 0, out);
        gr_buffer_free(ctx, bounds);
        free_all(ctx, compact, count);
        return st;
    }
    for (int k = 0; k < count && st == GR_OK; k++) st = gr_buffer_permute(ctx, bufs[k], perm, &permuted[k]);
    if (st == GR_OK) st = compact_all(ctx, permuted, count, compact);
    gr_segments seg = {row, NULL};
    if (st == GR_OK) st = segments(ctx, compact, count, &c, &seg, 1, out);
    free_all(ctx, permuted, count);
    free_all(ctx, compact, count);
    return st;
}
