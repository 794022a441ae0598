/*
 * exact_run.c -- opts.determinism = "gpu_to_gpu": every path of a reduction (synchronous, async and
 * streams through exec.c, streamed host data, segments) computes the exact sums of exact_acc.h and
 * rounds them with its code, on the device (cuda/kernels/exact.cu) or on the host (exact.c) -- the same digits
 * either way, so the same bits whatever the path, the launch shape, the GPU or the backend.
 *
 * The plans and the entry points; the passes themselves (the kernel's launches, the host's sums, the
 * rounding of a result) are exact_pass.c's, which exec.c also calls. A launch takes at most 2^30 blocks
 * (the global words then cannot overflow).
 */
#include "core/exact_run.h"
#include "core/exact_pass.h"
#include "ops/cpu_backend.h"
#include "base/device.h"
#include "base/error.h"
#include "ops/exact.h"
#include "base/launch.h"
#include "base/memory.h"
#include "ops/ops.h"
#include "core/policy.h"
#include "core/pool.h"
#include "core/registry.h"
#include "core/segments.h"

#include <stdlib.h>
#include <string.h>

#define EXACT_BLOCK 512                         /* the default block (cuda/kernels/exact.cu keeps 8 per SM) */
#define MOST_BLOCKS ((size_t)1 << 30)

static int resident(const gr_context *ctx, gr_where where) {
    return ctx->base.backend != GR_BACKEND_CUDA || where == GR_HOST;
}

static gr_status check_op(gr_context *ctx, const gr_options *o, gr_dtype t) {
    if (o->user)
        return gr_fail_arg(ctx, GR_EINVAL, "determinism", "'gpu_to_gpu' has no form for a user operator (its "
                           "combine is the user's) (accepted with operators: not_guaranteed, run_to_run)");
    if (!gr_x_sums_of(o->op) || !gr_exact_takes(t))
        return gr_fail_arg(ctx, GR_EINVAL, "determinism", "'gpu_to_gpu' is available for sum, nansum, mean, "
                           "nanmean, sumsq, norm, var and std of float32 and float64 (not %s of %s) (accepted "
                           "here: not_guaranteed, run_to_run)", gr_op_name(o->op), gr_dtype_name(t));
    return GR_OK;
}

/* Blocks for n elements: enough for 16 elements per thread, at most a full device, at least one. */
static size_t default_grid(const gr_context *ctx, size_t n, int block) {
    size_t want = (n + (size_t)block * 16 - 1) / ((size_t)block * 16);
    size_t full = (size_t)ctx->info.sms * (size_t)(ctx->info.max_threads_per_sm / block);
    if (full < 1) full = 1;
    return want < 1 ? 1 : want < full ? want : full;
}

gr_status gr_exact_plan(gr_context *ctx, size_t n, gr_dtype t, gr_where where, const gr_options *o, gr_plan *plan) {
    memset(plan, 0, sizeof *plan);
    gr_status st = check_op(ctx, o, t);
    if (st != GR_OK) return st;
    int acc = gr_op_acc_dtype(ctx, o->op, t, o->acc);
    if (acc < 0) return GR_EINVAL;
    int block = o->block ? o->block : EXACT_BLOCK;
    if (block < 32 || block > 1024 || (block & (block - 1)))
        return gr_fail_arg(ctx, GR_EINVAL, "block", "the exact kernel of 'gpu_to_gpu' takes 32, 64, 128, 256, "
                           "512 or 1024 threads (got %d)", block);
    if (o->grid > MOST_BLOCKS)
        return gr_fail_arg(ctx, GR_EINVAL, "grid", "the exact kernel of 'gpu_to_gpu' takes at most 2^30 blocks "
                           "(got %zu)", o->grid);
    int on_host = resident(ctx, where);
    if (!on_host && (!&gr_exact_gpu || !gr_exact_gpu.launch))
        return gr_fail(ctx, GR_ENODEV, "'gpu_to_gpu' of device data needs the CUDA kernels (this build has none)");
    plan->variant = o->variant >= 0 ? o->variant : gr_policy_variant(ctx, where, t, o->op, n);
    plan->op = o->op;
    plan->finish = GR_FINISH_SINGLE;
    plan->in_dtype = t;
    plan->acc = (gr_dtype)acc;
    plan->n = n;
    plan->ddof = o->ddof;
    plan->acc_size = sizeof(gr_xsum);
    plan->exact = 1;
    if (n == 0) return GR_OK;
    plan->npasses = 1;
    plan->pass[0] = (gr_pass){.elements = n, .blocks = on_host ? 0 : o->grid ? o->grid : default_grid(ctx, n, block),
                              .block = block, .in_dtype = t, .on_host = on_host};
    plan->dev_bytes = plan->host_bytes = on_host ? 0 : sizeof(gr_xsum);
    return GR_OK;
}

gr_status gr_exact_reduce(gr_context *ctx, gr_buffer *b, const gr_options *o, gr_result *out) {
    gr_plan plan;
    gr_status st = gr_exact_plan(ctx, b->n, b->dtype, gr_buffer_where(b), o, &plan);
    if (st != GR_OK) return st;
    if (plan.npasses == 0) return gr_op_empty_result(ctx, plan.op, b->dtype, plan.acc, out);
    if (plan.pass[0].on_host) return gr_exact_host(ctx, gr_buffer_data(b), &plan, out);
    void *stream = o->stream && o->stream->handle ? o->stream->handle : ctx->stream;
    gr_slot *slot;
    if ((st = gr_slot_acquire(ctx, plan.dev_bytes, plan.host_bytes, &slot)) != GR_OK) return st;
    st = gr_exact_start(ctx, gr_buffer_data(b), &plan, slot, stream);
    if (st == GR_OK) st = gr_exact_collect(ctx, &plan, slot, out);
    else gr_dev_stream_sync(stream);            /* let anything queued drain before the slot is reused */
    gr_slot_release(ctx, slot);
    return st;
}

/* ---- streamed host data ----------------------------------------------------------------------------- */

gr_status gr_exact_streamed(gr_context *ctx, gr_buffer *h, const gr_options *o, size_t chunk_bytes, int streams,
                            gr_result *out) {
    gr_plan plan;
    /* planned as device data: the chunks are reduced on the device */
    gr_status st = gr_exact_plan(ctx, h->n, h->dtype, resident(ctx, GR_DEVICE) ? GR_HOST : GR_DEVICE, o, &plan);
    if (st != GR_OK) return st;
    if (plan.npasses == 0) return gr_op_empty_result(ctx, plan.op, h->dtype, plan.acc, out);
    if (plan.pass[0].on_host) return gr_exact_host(ctx, gr_buffer_data(h), &plan, out);

    size_t n = h->n, es = gr_dtype_size(h->dtype);
    size_t per = gr_policy_chunk_bytes(chunk_bytes) / 16 * 16 / es;   /* chunks start 16-byte aligned */
    if (per == 0) per = 16 / es;
    if (per > n) per = n;
    size_t chunks = (n + per - 1) / per;
    int k = gr_policy_streams(streams);
    if ((size_t)k > chunks) k = (int)chunks;
    size_t staging = (per * es + 255) / 256 * 256;
    gr_slot *slot[GR_MAX_AUX_STREAMS + 1] = {0};
    void *stream[GR_MAX_AUX_STREAMS];
    int got = 0;
    /* slot k: the sums (zeroed on the context's stream, which the chunks' streams wait for); 0..k-1: staging */
    st = gr_slot_acquire(ctx, sizeof(gr_xsum), sizeof(gr_xsum), &slot[k]);
    int rc = st == GR_OK ? gr_dev_memset(slot[k]->dev, 0, sizeof(gr_xsum), ctx->stream) : 0;
    if (rc == 0 && st == GR_OK) rc = gr_dev_event_record(slot[k]->done, ctx->stream);
    for (int s = 0; s < k && st == GR_OK && rc == 0; s++) {
        st = gr_slot_acquire(ctx, staging, 0, &slot[s]);
        if (st == GR_OK) st = gr_aux_stream(ctx, s, &stream[s]);
        if (st == GR_OK) got++;
        if (st == GR_OK) rc = gr_dev_stream_wait_event(stream[s], slot[k]->done);
    }
    for (size_t c = 0; c < chunks && st == GR_OK && rc == 0; c++) {
        int s = (int)(c % (size_t)k);
        size_t len = c + 1 < chunks ? per : n - c * per;
        rc = gr_copy(ctx, slot[s]->dev, (const char *)gr_buffer_data(h) + c * per * es, len * es, stream[s]);
        if (rc == 0)
            st = gr_exact_launch_into(ctx, slot[s]->dev, len, &plan, default_grid(ctx, len, plan.pass[0].block), slot[k]->dev,
                             stream[s]);
    }
    for (int s = 0; s < got && rc == 0; s++) {      /* the context's stream waits for every chunk */
        rc = gr_dev_event_record(slot[s]->done, stream[s]);
        if (rc == 0) rc = gr_dev_stream_wait_event(ctx->stream, slot[s]->done);
    }
    if (rc == 0 && st == GR_OK) rc = gr_copy(ctx, slot[k]->host, slot[k]->dev, sizeof(gr_xsum), ctx->stream);
    int sync = gr_dev_stream_sync(ctx->stream);
    if (rc == 0) rc = sync;
    if (rc && st == GR_OK) st = gr_fail_dev(ctx, rc, "streamed gpu_to_gpu reduction");
    if (st == GR_OK) gr_exact_result((const gr_xsum *)slot[k]->host, &plan, out);
    else
        for (int s = 0; s < got; s++) gr_dev_stream_sync(stream[s]);
    for (int s = 0; s <= k; s++)
        if (slot[s]) gr_slot_release(ctx, slot[s]);
    return st;
}

/* ---- segments --------------------------------------------------------------------------------------- */

gr_status gr_exact_segments(gr_context *ctx, gr_buffer *b, const gr_options *o, size_t size, const gr_buffer *offsets,
                            const int64_t *bounds, size_t k, gr_buffer *out, gr_seg_wait *w) {
    gr_dtype t = gr_buffer_dtype(b);
    gr_status st = check_op(ctx, o, t);
    if (st != GR_OK) return st;
    int acc = gr_op_acc_dtype(ctx, o->op, t, o->acc);
    if (acc < 0) return GR_EINVAL;
    if (k == 0) return GR_OK;
    if (!resident(ctx, gr_buffer_where(b))) {
        if (!&gr_exact_gpu || !gr_exact_gpu.segments)
            return gr_fail(ctx, GR_ENODEV, "'gpu_to_gpu' of device data needs the CUDA kernels (this build has none)");
        gr_exact_launch L = {
            .in = gr_buffer_data(b), .n = gr_buffer_size(b), .in_dtype = t, .op = o->op, .block = 256,
            .stream = ctx->stream, .k = k, .size = size, .offsets = size ? NULL : gr_buffer_data(offsets),
            .out = gr_buffer_data(out), .out_dtype = (gr_dtype)acc, .ddof = o->ddof,
        };
        /* GPUREDUCE_EXACT_ROUND (a multiple of 16, read with the context) makes the kernel's rounds
         * short, for a spec to reach the carry steps of segments longer than 2^30 elements with small ones */
        L.round = gr_ctx_root(ctx)->exact_round ? gr_ctx_root(ctx)->exact_round : GR_EXACT_MOST_PER_BLOCK;
        size_t full = (size_t)ctx->info.sms * (size_t)(ctx->info.max_threads_per_sm / L.block);
        L.grid = k < full ? k : full;
        int rc = gr_fault_hit(ctx, GR_FAULT_LAUNCH);
        if (rc == 0) rc = gr_exact_gpu.segments(&L);
        if (w) {                            /* the caller waits (a failure too: drained first) */
            *w = (gr_seg_wait){ctx, NULL, rc, "gpu_to_gpu segmented reduction", L.site};
            return GR_OK;
        }
        int sync = gr_dev_stream_sync(ctx->stream);
        if (rc == 0) rc = sync;
        return rc ? gr_fail_dev_at(ctx, rc, "gpu_to_gpu segmented reduction", L.site) : GR_OK;
    }
    gr_xsum *a = malloc(sizeof *a);
    if (!a) return gr_fail(ctx, GR_ENOMEM, "out of host memory");
    const char *base = gr_buffer_data(b);
    size_t es = gr_dtype_size(t);
    for (size_t s = 0; s < k; s++) {
        size_t lo = size ? s * size : (size_t)bounds[s], hi = size ? lo + size : (size_t)bounds[s + 1];
        memset(a, 0, sizeof *a);
        gr_exact_add_values(a, base + lo * es, hi - lo, t, o->op);
        double v = gr_x_finish(a, o->op, hi - lo, o->ddof, acc == GR_FLOAT32);
        if (acc == GR_FLOAT32) ((float *)gr_buffer_data(out))[s] = (float)v;
        else ((double *)gr_buffer_data(out))[s] = v;
    }
    free(a);
    return GR_OK;
}
