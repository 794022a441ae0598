/*
 * sharded.c -- one reduction over the shards of a logical buffer, each on its own device.
 *
 * A sharded buffer (gr.sharded) is a list of plain buffers that hold consecutive pieces of one array:
 * shard i's first element has the index of the elements before it. Every shard is reduced on its own
 * device, at once: a single-pass kernel per shard, queued on that device's stream with the shard's
 * first index (so argmin/argmax report indices of the whole array), leaves its accumulator in the
 * shard's pinned result area. The host then waits for each device and combines the accumulators in
 * shard order with the CPU finish (cpu_backend.c), which merges every op's accumulators -- sums, means,
 * variances (Chan), arg indices. The order never depends on which device finished first, so a float
 * result is the same on every run; integer results and min/max equal one device's exactly.
 *
 * On the cpu backend (and for shards in host memory) each shard is reduced by the host backend with
 * its first index, then combined the same way.
 */
#include "plan.h"
#include "cpu.h"
#include "device.h"
#include "devices.h"
#include "error.h"
#include "ops.h"
#include "policy.h"
#include "pool.h"

#include <stdlib.h>
#include <string.h>

/* What a sharded reduction refuses (each one names its option). */
static gr_status check_shards(gr_context *ctx, gr_buffer *const *shards, size_t count, const gr_options *o) {
    if (count == 0 || count > GR_MAX_SLOTS)
        return gr_fail_arg(ctx, GR_EINVAL, "shards", "expected 1 to %d shards (got %zu)", GR_MAX_SLOTS, count);
    for (size_t i = 1; i < count; i++)
        if (shards[i]->dtype != shards[0]->dtype)
            return gr_fail_arg(ctx, GR_EINVAL, "shards", "shard %zu is %s, shard 1 %s (a sharded buffer has one "
                               "dtype)", i + 1, gr_dtype_name(shards[i]->dtype), gr_dtype_name(shards[0]->dtype));
    if (o->user)
        return gr_fail_arg(ctx, GR_EINVAL, "op", "a user operator reduces plain buffers only, not sharded ones (yet)");
    if (o->determinism == GR_DET_GPU_TO_GPU)
        return gr_fail_arg(ctx, GR_EINVAL, "determinism", "'gpu_to_gpu' of a sharded buffer is not built yet "
                           "(accepted here: not_guaranteed, run_to_run)");
    if (o->stream)
        return gr_fail_arg(ctx, GR_EINVAL, "stream", "a sharded reduction runs on the stream of each shard's "
                           "device: it takes no stream");
    if (o->finish != GR_FINISH_AUTO && o->finish != GR_FINISH_SINGLE)
        return gr_fail_arg(ctx, GR_EINVAL, "finish", "each shard is finished in one kernel and the shards on the "
                           "host (accepted: auto, single)");
    if (!gr_op_desc_get(o->op))
        return gr_fail_arg(ctx, GR_EINVAL, "op", "unknown op (accepted: %s)", gr_op_names());
    return GR_OK;
}

/* Every shard reduced on the host into its accumulator (cpu backend, host memory). */
static gr_status shards_on_host(gr_context *ctx, gr_buffer *const *shards, size_t count, const gr_options *o,
                                gr_dtype acc, size_t as, char *accs, size_t *used) {
    uint64_t first = 0;
    for (size_t i = 0; i < count; i++) {
        gr_buffer *s = shards[i];
        if (s->n) {
            gr_status st = gr_cpu_reduce(ctx, gr_buffer_data(s), s->n, first, s->dtype, o->op, acc, 0,
                                         accs + *used * as);
            if (st != GR_OK) return st;
            ++*used;
        }
        first += s->n;
    }
    return GR_OK;
}

/* Every shard's kernel queued on its device's stream, then each waited for in shard order. */
static gr_status shards_on_devices(gr_context *ctx, gr_buffer *const *shards, size_t count, const gr_options *o,
                                   size_t as, char *accs, size_t *used) {
    gr_options co = *o;
    co.finish = GR_FINISH_SINGLE;
    if (co.variant < 0) co.variant = gr_policy_streamed_variant(shards[0]->dtype, o->op);
    gr_slot **slot = calloc(count, sizeof *slot);
    gr_context **on = calloc(count, sizeof *on);
    if (!slot || !on) {
        free(slot);
        free(on);
        return gr_fail(ctx, GR_ENOMEM, "out of host memory");
    }
    gr_status st = GR_OK;
    uint64_t first = 0;
    for (size_t i = 0; i < count && st == GR_OK; first += shards[i]->n, i++) {
        gr_buffer *s = shards[i];
        if (s->n == 0) continue;
        gr_context *c = gr_ctx_for(ctx, s);
        gr_plan plan;
        st = gr_plan_make(c, s, &co, &plan);
        if (st == GR_OK && (plan.npasses != 1 || plan.pass[0].on_host))
            st = gr_fail_arg(c, GR_EINVAL, "variant", "sharded reductions need a device variant with the 'single' "
                             "finish");
        if (st == GR_OK) st = gr_slot_acquire(c, plan.dev_bytes, plan.host_bytes, &slot[i]);
        if (st != GR_OK) break;
        on[i] = c;
        st = gr_exec_single_to(c, gr_buffer_data(s), first, &plan, slot[i]->dev, slot[i]->counter, slot[i]->result,
                               c->stream);
        int rc = st == GR_OK ? gr_dev_event_record(slot[i]->done, c->stream) : 0;
        if (rc) st = gr_fail_dev(c, rc, "event record");
    }
    /* every queued shard is waited for, also after a failure: its slot is reused next */
    for (size_t i = 0; i < count; i++) {
        if (!on[i]) continue;
        gr_context *c = gr_ctx_enter(on[i]);
        int rc = st == GR_OK ? gr_dev_event_sync(slot[i]->done) : gr_dev_stream_sync(c->stream);
        if (rc && st == GR_OK) st = gr_fail_dev(c, rc, "sharded reduction");
        if (st == GR_OK) memcpy(accs + (*used)++ * as, slot[i]->result, as);
        gr_slot_release(c, slot[i]);
    }
    gr_ctx_enter(ctx);
    free(slot);
    free(on);
    return st;
}

gr_status gr_reduce_shards(gr_context *ctx, gr_buffer *const *shards, size_t count, const gr_options *o,
                           gr_result *out) {
    gr_status st = check_shards(ctx, shards, count, o);
    if (st != GR_OK) return st;
    gr_dtype t = shards[0]->dtype;
    int acc = gr_op_acc_dtype(ctx, o->op, t, o->acc);
    if (acc < 0) return GR_EINVAL;
    size_t n = 0;
    int on_host = ctx->backend != GR_BACKEND_CUDA;
    for (size_t i = 0; i < count; i++) {
        n += shards[i]->n;
        if (gr_buffer_where(shards[i]) == GR_HOST) on_host = 1;
    }
    if (on_host) {
        /* the options are checked as a plain buffer's would be (a device variant on the cpu backend) */
        gr_plan plan;
        if ((st = gr_plan_make(ctx, shards[0], o, &plan)) != GR_OK) return st;
    }
    if (n == 0) return gr_op_empty_result(ctx, o->op, t, (gr_dtype)acc, out);
    size_t as = gr_op_acc_size(o->op, t, (gr_dtype)acc), used = 0;
    char *accs = malloc(count * as);
    if (!accs) return gr_fail(ctx, GR_ENOMEM, "out of host memory");
    st = on_host ? shards_on_host(ctx, shards, count, o, (gr_dtype)acc, as, accs, &used)
                 : shards_on_devices(ctx, shards, count, o, as, accs, &used);
    if (st == GR_OK) st = gr_cpu_finish(ctx, accs, used, (gr_dtype)acc, o->op, t, n, o->ddof, out);
    free(accs);
    return st;
}
