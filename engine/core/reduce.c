/*
 * reduce.c -- the entry points of a whole-buffer reduction: synchronous (through a kept graph where one
 * serves), asynchronous with its Pending, and host variants over device memory.
 */
#include "gr.h"
#include "ops/cpu_backend.h"
#include "base/device.h"
#include "core/context.h"
#include "base/error.h"
#include "core/exact_pass.h"
#include "core/exact_run.h"
#include "core/graphs.h"
#include "base/memory.h"
#include "core/operator_cpu.h"
#include "ops/ops.h"
#include "core/plan.h"
#include "core/policy.h"
#include "core/pool.h"
#include "core/registry.h"
#include "core/buffer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- host variants ------------------------------------------------------------------------------- */

/* A host variant over device memory stages it through pinned memory in pieces; each piece's value is
 * kept in the accumulator type and the pieces' values are combined the same way at the end. */
static gr_status run_host_variant(gr_context *ctx, const gr_buffer *b, const gr_plan *plan, gr_result *out) {
    if (plan->exact) return gr_exact_host(ctx, gr_buffer_data(b), plan, out);
    const gr_variant_row *row = gr_variant_row_get(plan->variant);
    int resident = ctx->base.backend == GR_BACKEND_CPU || gr_buffer_where(b) == GR_HOST;
    if (resident) {
        unsigned char v[GR_ACC_MAX];
        gr_status st = row->host(ctx, gr_buffer_data(b), b->n, 0, b->dtype, plan->op, plan->acc, v);
        if (st == GR_OK) *out = gr_op_result(plan->op, v, plan->acc, b->dtype, b->n, plan->ddof);
        return st;
    }

    size_t es = gr_dtype_size(b->dtype), aes = gr_op_acc_size(plan->op, b->dtype, plan->acc);
    size_t per = gr_policy_stage_bytes() / es, chunks = (b->n + per - 1) / per;
    gr_slot *slot;
    gr_status st = gr_slot_acquire(ctx, 0, (b->n < per ? b->n : per) * es, &slot);
    if (st != GR_OK) return st;
    char *values = malloc(chunks * aes);
    if (!values) {
        gr_slot_release(ctx, slot);
        return gr_fail(ctx, GR_ENOMEM, "out of host memory");
    }
    for (size_t c = 0; c < chunks && st == GR_OK; c++) {
        size_t lo = c * per, len = b->n - lo < per ? b->n - lo : per;
        int rc = gr_copy(ctx, slot->host, (const char *)gr_buffer_data(b) + lo * es, len * es, ctx->stream);
        if (rc == 0) rc = gr_dev_stream_sync(ctx->stream);
        if (rc) { st = gr_fail_dev(ctx, rc, "copy to the host"); break; }
        st = row->host(ctx, slot->host, len, lo, b->dtype, plan->op, plan->acc, values + c * aes);
    }
    if (st == GR_OK) st = gr_cpu_finish(ctx, values, chunks, plan->acc, plan->op, b->dtype, b->n, plan->ddof, out);
    free(values);
    gr_slot_release(ctx, slot);
    return st;
}

/* ---- entry points -------------------------------------------------------------------------------- */

static void *stream_of(gr_context *ctx, const gr_options *o) {
    return o->stream && o->stream->handle ? o->stream->handle : ctx->stream;
}

gr_status gr_reduce(gr_context *ctx, gr_buffer *b, const gr_options *o, gr_result *out) {
    ctx = gr_ctx_for(ctx, b);
    if (gr_operator_cpu_takes(ctx, o, b)) return gr_operator_cpu_reduce(ctx, o, &b, 1, out);
    if (o->stream && o->stream->device != ctx->device) return gr_stream_misplaced(ctx, o->stream);
    if (o->determinism == GR_DET_GPU_TO_GPU) return gr_exact_reduce(ctx, b, o, out);
    gr_plan plan;
    gr_status st = gr_plan_make(ctx, b, o, &plan);
    if (st != GR_OK) return st;
    if (plan.npasses == 0) return gr_op_empty_result(ctx, plan.op, b->dtype, plan.acc, out);
    if (plan.pass[0].on_host) return run_host_variant(ctx, b, &plan, out);
    int handled;
    st = gr_graph_reduce(ctx, gr_buffer_data(b), &plan, stream_of(ctx, o), out, &handled);
    if (handled) return st;
    gr_slot *slot;
    st = gr_slot_acquire(ctx, plan.dev_bytes, plan.host_bytes, &slot);
    if (st != GR_OK) return st;
    st = gr_exec_start(ctx, gr_buffer_data(b), &plan, slot, stream_of(ctx, o), 1);
    if (st == GR_OK) st = gr_exec_finish(ctx, &plan, slot, out);
    else gr_dev_stream_sync(stream_of(ctx, o));    /* let anything queued drain before reuse */
    gr_slot_release(ctx, slot);
    return st;
}

gr_status gr_reduce_async(gr_context *ctx, gr_buffer *b, const gr_options *o, gr_pending **out) {
    *out = NULL;
    ctx = gr_ctx_for(ctx, b);
    if (gr_operator_cpu_takes(ctx, o, b))
        return gr_fail_arg(ctx, GR_EINVAL, "async", "a user operator's cpu functions run synchronously");
    if (o->stream && o->stream->device != ctx->device) return gr_stream_misplaced(ctx, o->stream);
    gr_pending *p = calloc(1, sizeof *p);
    if (!p) return gr_fail(ctx, GR_ENOMEM, "out of host memory");
    p->ctx = ctx;
    gr_status st = gr_plan_make(ctx, b, o, &p->plan);
    if (st == GR_OK && p->plan.fold)
        st = gr_fail_arg(ctx, GR_EINVAL, "finish", "'%s' runs the operator's cpu.reduce, synchronously (leave out "
                         "opts.async, or finish on the device)", gr_finish_name(p->plan.finish));
    if (st == GR_OK && (p->plan.npasses == 0 || p->plan.pass[0].on_host)) {
        /* nothing to queue: the value is known now */
        p->status = p->plan.npasses == 0 ? gr_op_empty_result(ctx, p->plan.op, b->dtype, p->plan.acc, &p->value)
                                         : run_host_variant(ctx, b, &p->plan, &p->value);
        p->finished = 1;
        if (p->status != GR_OK) st = p->status;   /* reported now, like a synchronous call */
    } else if (st == GR_OK) {
        void *stream = stream_of(ctx, o);
        st = gr_buffer_slice(ctx, b, 0, b->n, &p->b);
        if (st == GR_OK) st = gr_slot_acquire(ctx, p->plan.dev_bytes, p->plan.host_bytes, &p->slot);
        if (st == GR_OK) {
            st = gr_exec_start(ctx, gr_buffer_data(b), &p->plan, p->slot, stream, 0);
            if (st == GR_OK) st = gr_storage_mark_read(ctx, b->st, stream);
            /* passes queued before the failure must end before the slot is given back */
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

static void settle(gr_context *ctx, gr_pending *p) {
    p->status = gr_exec_finish(ctx, &p->plan, p->slot, &p->value);
    gr_slot_release(ctx, p->slot);
    p->slot = NULL;
    p->finished = 1;
    if (p->status != GR_OK) snprintf(p->err, sizeof p->err, "%s", gr_errmsg(ctx));
}

int gr_pending_ready(gr_context *ctx, gr_pending *p) {
    if (p->finished) return 1;
    ctx = gr_ctx_enter(p->ctx);
    if (gr_dev_event_query(p->slot->done) == 1) return 0;
    settle(ctx, p);
    return 1;
}

gr_status gr_pending_wait(gr_context *ctx, gr_pending *p, gr_result *out) {
    if (p->ctx) ctx = gr_ctx_enter(p->ctx);
    if (!p->finished) settle(ctx, p);
    if (p->status == GR_OK) *out = p->value;
    else gr_fail(ctx, p->status, "%s", p->err);
    return p->status;
}

void gr_pending_free(gr_context *ctx, gr_pending *p) {
    if (!p) return;
    if (p->ctx) ctx = gr_ctx_enter(p->ctx);
    if (p->slot) {
        gr_dev_event_sync(p->slot->done);       /* never release scratch a kernel still writes */
        gr_slot_release(ctx, p->slot);
    }
    gr_buffer_free(ctx, p->b);
    free(p);
}
