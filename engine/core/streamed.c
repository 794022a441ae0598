/*
 * streamed.c -- reducing host data as it streams to the device.
 *
 * The host buffer is cut into chunks. Chunk i goes to stream i % k: a copy into that stream's device
 * staging area, then a single-pass kernel that leaves the chunk's value in slot i of a device array.
 * Work on one stream runs in order, so a staging area is never overwritten while its kernel still
 * reads it; across streams the copy engine moves chunk i+1 while the SMs reduce chunk i. At the end the
 * chunk values come back in one copy and the CPU combines them in chunk order, so the result does not
 * depend on which stream finished first (a user operator's chunk values are combined in the same order by
 * one block of its own kernel: the host cannot run its expressions). Each chunk's pass is planned by the planner like any
 * reduction (the single finish of the policy's chunk variant), and its scratch laid out the same way.
 */
#include "core/plan.h"
#include "ops/cpu_backend.h"
#include "base/device.h"
#include "core/context.h"
#include "base/error.h"
#include "core/exact_run.h"
#include "base/memory.h"
#include "ops/ops.h"
#include "core/policy.h"
#include "core/pool.h"
#include "core/image.h"
#include "core/operator_cpu.h"
#include "core/registry.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The source and the chunking of a streamed reduction, gpu_to_gpu's too. */
static gr_status check_source(gr_context *ctx, const gr_buffer *h, size_t chunk, int streams) {
    if (gr_buffer_where(h) != GR_HOST)
        return gr_fail_arg(ctx, GR_EINVAL, "streamed", "needs host data (a buffer in pinned host memory); "
                           "this buffer is on the device");
    if (chunk && chunk < 4096)
        return gr_fail_arg(ctx, GR_EINVAL, "chunk", "must be at least 4096 bytes (got %zu)", chunk);
    if (streams < 0 || streams > GR_MAX_AUX_STREAMS)
        return gr_fail_arg(ctx, GR_EINVAL, "streams", "must be 1 to %d (got %d)", GR_MAX_AUX_STREAMS, streams);
    return GR_OK;
}

/* The options of a streamed reduction, checked the same way on every backend (a script gets the same
 * errors with or without a GPU). Returns the variant that reduces each chunk on the device. */
static gr_status check_streamed(gr_context *ctx, const gr_buffer *h, const gr_options *o, int *variant) {
    if (o->finish != GR_FINISH_AUTO && o->finish != GR_FINISH_SINGLE)
        return gr_fail_arg(ctx, GR_EINVAL, "finish", "streamed reductions finish each chunk in one kernel "
                           "(accepted: auto, single)");
    if (o->user) {                      /* the operator's own shape: plan_user checks the rest per chunk */
        *variant = o->variant;
        return GR_OK;
    }
    if (!gr_op_desc_get(o->op))
        return gr_fail_arg(ctx, GR_EINVAL, "op", "unknown op (accepted: %s)", gr_op_names());
    int vi = o->variant < 0 ? gr_policy_streamed_variant(h->dtype, o->op) : o->variant;
    const gr_variant *v = gr_variant_get(vi);
    if (!v) return gr_fail_arg(ctx, GR_EINVAL, "variant", "unknown variant (accepted: %s)", gr_variant_names());
    if (!(v->needs & GR_NEEDS_CUDA) || !(v->finishes & (1u << GR_FINISH_SINGLE)))
        return gr_fail_arg(ctx, GR_EINVAL, "variant", "streamed reductions need a device variant with the "
                           "'single' finish ('%s' has none)", v->name);
    if (o->variant >= 0 && ctx->backend != GR_BACKEND_CUDA)
        return gr_fail_arg(ctx, GR_ENODEV, "variant", "'%s' needs a CUDA device (backend is cpu)", v->name);
    gr_status dst = gr_check_determinism(ctx, v, o->determinism);
    if (dst != GR_OK) return dst;
    gr_status st = gr_check_block(ctx, v, o->block ? o->block : v->block_default);
    if (st != GR_OK) return st;
    if (gr_op_acc_dtype(ctx, o->op, h->dtype, o->acc) < 0) return GR_EINVAL;
    *variant = vi;
    return GR_OK;
}

/* ---- user operators -------------------------------------------------------------------------------- */

/* A user operator's chunk values, in chunk order at slot->dev, combined by one block of its partials
 * kernel on the context's stream (the host cannot run its reduce expression); then its post. */
static gr_status combine_on_device(gr_context *ctx, const gr_image *img, gr_slot *slot, size_t chunks,
                                   size_t aes, size_t n, gr_result *out) {
    gr_launch L = {
        .in = slot->dev, .n = chunks, .partials_in = 1, .out = (char *)slot->dev + (chunks * aes + 255) / 256 * 256,
        .grid = 1, .block = 256, .stream = ctx->stream, .counter = slot->counter, .final_out = slot->result,
    };
    int rc = gr_fault_hit(ctx, GR_FAULT_LAUNCH);
    if (rc == 0) rc = gr_image_launch(&L, img);
    if (rc == 0) rc = gr_dev_stream_sync(ctx->stream);
    if (rc) return gr_fail_dev_at(ctx, rc, "streamed reduction: combining the chunks", L.site);
    return gr_image_result(ctx, img, slot->result, n, gr_slot_post_out(slot), ctx->stream, out);
}

/* No element: the operator's identity (and post of it), from one block over nothing, as gr.reduce gives. */
static gr_status user_empty(gr_context *ctx, const gr_options *o, gr_dtype t, gr_result *out) {
    gr_options eo = *o;
    eo.finish = GR_FINISH_SINGLE;
    gr_plan plan;
    gr_slot *slot;
    gr_status st = gr_plan_for(ctx, 0, t, GR_DEVICE, &eo, &plan);
    if (st == GR_OK) st = gr_slot_acquire(ctx, plan.dev_bytes, plan.host_bytes, &slot);
    if (st != GR_OK) return st;
    st = gr_exec_start(ctx, NULL, &plan, slot, ctx->stream, 1);
    if (st == GR_OK) st = gr_exec_finish(ctx, &plan, slot, out);
    else gr_dev_stream_sync(ctx->stream);
    gr_slot_release(ctx, slot);
    return st;
}

/* ---- entry point --------------------------------------------------------------------------------- */

gr_status gr_reduce_streamed(gr_context *ctx, gr_buffer *h, const gr_options *o, size_t chunk_bytes,
                             int streams, gr_result *out) {
    ctx = gr_ctx_for(ctx, h);
    gr_status st = check_source(ctx, h, chunk_bytes, streams);
    if (st != GR_OK) return st;
    /* an operator's functions reduce host data where it is (its kernels, where prepared, stream it) */
    if (o->cpu && (!o->user || ctx->backend != GR_BACKEND_CUDA)) return gr_operator_cpu_reduce(ctx, o, &h, 1, out);
    if (o->determinism == GR_DET_GPU_TO_GPU) return gr_exact_streamed(ctx, h, o, chunk_bytes, streams, out);
    int vi = -1;
    if ((st = check_streamed(ctx, h, o, &vi)) != GR_OK) return st;
    if (ctx->backend != GR_BACKEND_CUDA) {           /* the data is already where the CPU reduces it */
        static int cpu_variant = -1;
        gr_options cpu = *o;
        cpu.variant = gr_catalogue_index("cpu", &cpu_variant);
        cpu.finish = GR_FINISH_AUTO;
        cpu.block = 0;
        return gr_reduce(ctx, h, &cpu, out);
    }
    size_t n = h->n, es = gr_dtype_size(h->dtype);
    if (n == 0 && o->user) return user_empty(ctx, o, h->dtype, out);
    if (n == 0) {                                    /* the identity, or the empty min/max error */
        int acc = gr_op_acc_dtype(ctx, o->op, h->dtype, o->acc);
        return gr_op_empty_result(ctx, o->op, h->dtype, (gr_dtype)acc, out);
    }

    /* whole 16-byte vectors per chunk keep every chunk's start aligned for the kernel's wide loads */
    size_t per = gr_policy_chunk_bytes(chunk_bytes) / 16 * 16 / es;
    if (per == 0) per = 16 / es;
    if (per > n) per = n;
    size_t chunks = (n + per - 1) / per, tail = n - (chunks - 1) * per;
    int k = gr_policy_streams(streams);
    if ((size_t)k > chunks) k = (int)chunks;
    /* a plan for a whole chunk and one for the last, shorter one */
    gr_options co = *o;
    co.variant = vi;
    co.finish = GR_FINISH_SINGLE;
    co.grid = 0;
    gr_plan whole, last;
    st = gr_plan_for(ctx, per, h->dtype, GR_DEVICE, &co, &whole);
    if (st == GR_OK) st = gr_plan_for(ctx, tail, h->dtype, GR_DEVICE, &co, &last);
    if (st != GR_OK) return st;
    size_t aes = whole.acc_size;
    size_t staging = (per * es + 255) / 256 * 256;

    gr_slot *slot[GR_MAX_AUX_STREAMS + 1] = {0};
    int got = 0;
    void *stream[GR_MAX_AUX_STREAMS];
    /* slot k holds the chunk values; slots 0..k-1 a staging area, the pass's scratch and a counter each */
    st = gr_slot_acquire(ctx, (chunks * aes + 255) / 256 * 256 + (o->user ? 256 : 0), chunks * aes, &slot[k]);
    for (int s = 0; s < k && st == GR_OK; s++) {
        st = gr_slot_acquire(ctx, staging + whole.dev_bytes, 0, &slot[s]);
        if (st == GR_OK) st = gr_aux_stream(ctx, s, &stream[s]);
        if (st == GR_OK) got++;         /* only the streams whose slot and stream exist are waited for */
    }
    int rc = 0;
    for (size_t c = 0; c < chunks && st == GR_OK; c++) {
        int s = (int)(c % (size_t)k);
        const gr_plan *plan = c + 1 < chunks ? &whole : &last;
        char *stage = slot[s]->dev;
        rc = gr_copy(ctx, stage, (const char *)gr_buffer_data(h) + c * per * es, plan->n * es, stream[s]);
        if (rc) { st = gr_fail_dev(ctx, rc, "streamed copy to the device"); break; }
        st = gr_exec_single_to(ctx, stage, c * per, plan, stage + staging, slot[s]->counter,
                               (char *)slot[k]->dev + c * aes, stream[s]);
    }
    /* the context's stream waits for every chunk, then brings the chunk values back */
    for (int s = 0; s < got && rc == 0; s++) {
        rc = gr_dev_event_record(slot[s]->done, stream[s]);
        if (rc == 0) rc = gr_dev_stream_wait_event(ctx->stream, slot[s]->done);
    }
    if (o->user && rc == 0 && st == GR_OK) {
        st = combine_on_device(ctx, o->user, slot[k], chunks, aes, n, out);
    } else {
        if (rc == 0 && st == GR_OK) rc = gr_copy(ctx, slot[k]->host, slot[k]->dev, chunks * aes, ctx->stream);
        if (rc == 0) rc = gr_dev_stream_sync(ctx->stream);
        if (rc && st == GR_OK) st = gr_fail_dev(ctx, rc, "streamed reduction");
        if (st == GR_OK) st = gr_cpu_finish(ctx, slot[k]->host, chunks, whole.acc, o->op, h->dtype, n, o->ddof, out);
    }
    if (st == GR_OK) {
    } else {
        for (int s = 0; s < got; s++) gr_dev_stream_sync(stream[s]);
    }
    for (int s = 0; s <= k; s++) gr_slot_release(ctx, slot[s]);
    return st;
}
