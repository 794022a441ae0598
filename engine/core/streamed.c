/*
 * streamed.c -- reducing host data as it streams to the device.
 *
 * The host buffer is cut into chunks. Chunk i goes to stream i % k: a copy into that stream's device
 * staging area, then a single-pass kernel that leaves the chunk's value in slot i of a device array.
 * Work on one stream runs in order, so a staging area is never overwritten while its kernel still
 * reads it; across streams the copy engine moves chunk i+1 while the SMs reduce chunk i. At the end the
 * chunk values come back in one copy and the CPU combines them in chunk order, so the result does not
 * depend on which stream finished first (a user operator's chunk values are combined in the same order by
 * one block of its own kernel: the host cannot run its expressions; gpu_to_gpu's exact sums are merged,
 * which changes no bit). Each chunk's pass is planned by the planner like any reduction (the single
 * finish of the policy's chunk variant, the operator's kernel or the exact kernel: gr_plan_chunks), and
 * its scratch laid out the same way.
 */
#include "gr.h"
#include "base/device.h"
#include "base/error.h"
#include "base/memory.h"
#include "core/buffer.h"
#include "core/context.h"
#include "core/exec.h"
#include "core/operator_cpu.h"
#include "core/policy.h"
#include "core/pool.h"
#include "core/registry.h"
#include "ops/ops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The source and the chunking of a streamed reduction. */
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

/* ---- entry point --------------------------------------------------------------------------------- */

gr_status gr_reduce_streamed(gr_context *ctx, gr_buffer *h, const gr_options *o, size_t chunk_bytes,
                             int streams, gr_result *out) {
    ctx = gr_ctx_for(ctx, h);
    gr_status st = gr_buffer_check_compact(ctx, h, "b");
    if (st == GR_OK) st = check_source(ctx, h, chunk_bytes, streams);
    if (st != GR_OK) return st;
    /* an operator's functions reduce host data where it is (its kernels, where prepared, stream it) */
    if (o->cpu && (!o->user || ctx->base.backend != GR_BACKEND_CUDA)) return gr_operator_cpu_reduce(ctx, o, &h, 1, out);
    gr_options co;
    if ((st = gr_plan_chunks(ctx, h->dtype, o, &co)) != GR_OK) return st;
    if (ctx->base.backend != GR_BACKEND_CUDA) {           /* the data is already where the CPU reduces it */
        static int cpu_variant = -1;
        gr_options cpu = *o;
        cpu.variant = gr_catalogue_index("cpu", &cpu_variant);
        cpu.finish = GR_FINISH_AUTO;
        cpu.block = 0;
        return gr_reduce(ctx, h, &cpu, out);
    }
    size_t n = h->n, es = gr_dtype_size(h->dtype);
    if (n == 0) {           /* the op's empty result; a user operator's identity (and post) from one block */
        gr_run none;
        st = gr_plan_run(ctx, 0, h->dtype, GR_DEVICE, &co, &none);
        if (st != GR_OK) return st;
        gr_inputs nothing;
        gr_inputs_one(&nothing, NULL, h->dtype, 0);
        return none.plan.npasses ? gr_exec(ctx, &nothing, &none, ctx->stream, out)
                                 : gr_op_empty_result(ctx, none.plan.op, h->dtype, none.plan.acc, out);
    }

    /* whole 16-byte vectors per chunk keep every chunk's start aligned for the kernel's wide loads */
    size_t per = gr_policy_chunk_bytes(chunk_bytes) / 16 * 16 / es;
    if (per == 0) per = 16 / es;
    if (per > n) per = n;
    size_t chunks = (n + per - 1) / per, tail = n - (chunks - 1) * per;
    int k = gr_policy_streams(streams);
    if ((size_t)k > chunks) k = (int)chunks;
    /* a run for a whole chunk and one for the last, shorter one */
    gr_run whole, last;
    st = gr_plan_run(ctx, per, h->dtype, GR_DEVICE, &co, &whole);
    if (st == GR_OK) st = gr_plan_run(ctx, tail, h->dtype, GR_DEVICE, &co, &last);
    if (st != GR_OK) return st;
    size_t aes = whole.plan.acc_size;
    size_t staging = (per * es + 255) / 256 * 256;

    gr_slot *slot[GR_MAX_AUX_STREAMS + 1] = {0};
    int got = 0;
    void *stream[GR_MAX_AUX_STREAMS];
    /* slot k holds the chunk values (and room for their combine on the device); slots 0..k-1 a staging
     * area, the pass's scratch and a counter each */
    st = gr_slot_acquire(ctx, (chunks * aes + 255) / 256 * 256 + 256, chunks * aes, &slot[k]);
    for (int s = 0; s < k && st == GR_OK; s++) {
        st = gr_slot_acquire(ctx, staging + whole.plan.dev_bytes, 0, &slot[s]);
        if (st == GR_OK) st = gr_aux_stream(ctx, s, &stream[s]);
        if (st == GR_OK) got++;         /* only the streams whose slot and stream exist are waited for */
    }
    int rc = 0;
    for (size_t c = 0; c < chunks && st == GR_OK; c++) {
        int s = (int)(c % (size_t)k);
        const gr_run *run = c + 1 < chunks ? &whole : &last;
        char *stage = slot[s]->dev;
        rc = gr_copy(ctx, stage, (const char *)gr_buffer_data(h) + c * per * es, run->plan.n * es, stream[s]);
        if (rc) { st = gr_fail_dev(ctx, rc, "streamed copy to the device"); break; }
        gr_inputs in;
        gr_inputs_one(&in, stage, h->dtype, run->plan.n);
        st = gr_exec_single_to(ctx, &in, c * per, run, stage + staging, slot[s]->counter,
                               (char *)slot[k]->dev + c * aes, stream[s]);
    }
    /* the context's stream waits for every chunk, then the chunk values are combined in chunk order */
    for (int s = 0; s < got && rc == 0; s++) {
        rc = gr_dev_event_record(slot[s]->done, stream[s]);
        if (rc == 0) rc = gr_dev_stream_wait_event(ctx->stream, slot[s]->done);
    }
    if (rc && st == GR_OK) st = gr_fail_dev(ctx, rc, "streamed reduction");
    if (st == GR_OK) st = gr_exec_combine(ctx, &whole, slot[k], chunks, n, "streamed reduction", out);
    else
        for (int s = 0; s < got; s++) gr_dev_stream_sync(stream[s]);
    for (int s = 0; s <= k; s++) gr_slot_release(ctx, slot[s]);
    return st;
}
