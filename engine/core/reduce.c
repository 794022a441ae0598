/*
 * reduce.c -- the entry points of a whole-buffer reduction: synchronous (through a kept graph where one
 * serves), asynchronous with its Pending, and host variants over device memory.
 */
#include "gr.h"
#include "base/device.h"
#include "base/error.h"
#include "base/memory.h"
#include "core/buffer.h"
#include "core/context.h"
#include "core/exec.h"
#include "core/graphs.h"
#include "core/operator_cpu.h"
#include "core/pending.h"
#include "core/policy.h"
#include "core/pool.h"
#include "ops/exact.h"
#include "ops/ops.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- reductions the host runs ------------------------------------------------------------------- */

/* A run whose first pass is on the host (a host variant, or the host's exact sums): over the data where
 * the host reads it; over device memory staged through pinned memory in pieces, each piece's value kept
 * as an accumulator and the pieces' values combined the same way at the end. */
static gr_status run_on_host(gr_context *ctx, const gr_buffer *b, const gr_run *run, gr_result *out) {
    const gr_pass_kernel *k = run->kernel;
    size_t aes = run->plan.acc_size;
    int resident = ctx->base.backend == GR_BACKEND_CPU || gr_buffer_where(b) == GR_HOST;
    if (resident) {
        /* one accumulator: the op's, or the exact sums (2.3 KB) */
        union { unsigned char bytes[GR_ACC_MAX]; gr_xsum sums; } v;
        gr_status st = k->host(ctx, run, gr_buffer_data(b), b->n, 0, &v);
        return st == GR_OK ? k->result(ctx, run, NULL, &v, b->n, out) : st;
    }

    size_t es = gr_dtype_size(b->dtype);
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
        st = k->host(ctx, run, slot->host, len, lo, values + c * aes);
    }
    if (st == GR_OK) st = k->finish(ctx, run, NULL, values, chunks, b->n, out);
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
    gr_status cs = gr_buffer_check_compact(ctx, b, "b");
    if (cs != GR_OK) return cs;
    if (gr_operator_cpu_takes(ctx, o, b)) return gr_operator_cpu_reduce(ctx, o, &b, 1, out);
    if (o->stream && o->stream->device != ctx->device) return gr_stream_misplaced(ctx, o->stream);
    gr_run run;
    gr_status st = gr_plan_run(ctx, b->n, b->dtype, gr_buffer_where(b), o, &run);
    if (st != GR_OK) return st;
    if (run.plan.npasses == 0) return gr_op_empty_result(ctx, run.plan.op, b->dtype, run.plan.acc, out);
    if (run.plan.pass[0].on_host) return run_on_host(ctx, b, &run, out);
    gr_inputs in;
    gr_inputs_one(&in, gr_buffer_data(b), b->dtype, b->n);
    int handled;
    st = gr_graph_reduce(ctx, &in, &run, stream_of(ctx, o), out, &handled);
    if (handled) return st;
    return gr_exec(ctx, &in, &run, stream_of(ctx, o), out);
}

gr_status gr_reduce_async(gr_context *ctx, gr_buffer *b, const gr_options *o, gr_pending **out) {
    *out = NULL;
    ctx = gr_ctx_for(ctx, b);
    gr_status cs = gr_buffer_check_compact(ctx, b, "b");
    if (cs != GR_OK) return cs;
    if (gr_operator_cpu_takes(ctx, o, b))
        return gr_fail_arg(ctx, GR_EINVAL, "async", "a user operator's cpu functions run synchronously");
    if (o->stream && o->stream->device != ctx->device) return gr_stream_misplaced(ctx, o->stream);
    gr_pending *p = calloc(1, sizeof *p);
    if (!p) return gr_fail(ctx, GR_ENOMEM, "out of host memory");
    p->ctx = ctx;
    const gr_plan *plan = &p->run.plan;
    gr_status st = gr_plan_run(ctx, b->n, b->dtype, gr_buffer_where(b), o, &p->run);
    if (st == GR_OK && p->run.fold)
        st = gr_fail_arg(ctx, GR_EINVAL, "finish", "'%s' runs the operator's cpu.reduce, synchronously (leave out "
                         "opts.async, or finish on the device)", gr_finish_name(plan->finish));
    if (st == GR_OK && (plan->npasses == 0 || plan->pass[0].on_host)) {
        /* nothing to queue: the value is known now */
        p->status = plan->npasses == 0 ? gr_op_empty_result(ctx, plan->op, b->dtype, plan->acc, &p->value)
                                       : run_on_host(ctx, b, &p->run, &p->value);
        p->finished = 1;
        if (p->status != GR_OK) st = p->status;   /* reported now, like a synchronous call */
    } else if (st == GR_OK) {
        void *stream = stream_of(ctx, o);
        st = gr_buffer_slice(ctx, b, 0, b->n, &p->b);
        if (st == GR_OK) st = gr_slot_acquire(ctx, plan->dev_bytes, plan->host_bytes, &p->slot);
        if (st == GR_OK) {
            gr_inputs in;
            gr_inputs_one(&in, gr_buffer_data(b), b->dtype, b->n);
            st = gr_exec_start(ctx, &in, 0, &p->run, p->slot, stream, 0);
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

gr_pending *gr_pending_new_queued(gr_context *ctx, const char *what) {
    gr_pending *p = calloc(1, sizeof *p);
    if (!p) {
        gr_fail(ctx, GR_ENOMEM, "out of host memory");
        return NULL;
    }
    p->ctx = ctx;
    p->settle = gr_pending_settle_queued;
    p->what = what;
    p->finished = 1;                        /* until something is queued */
    return p;
}

gr_status gr_pending_start_queued(gr_context *ctx, gr_pending *p, gr_status launched, gr_buffer *whole,
                                  gr_buffer *const *read, int nread, const char *end) {
    p->finished = 0;
    gr_status st = launched;
    if (st == GR_OK && whole) st = gr_buffer_slice(ctx, whole, 0, whole->n, &p->b);
    int rc = st == GR_OK ? gr_dev_event_create(&p->done, 0) : 0;
    if (rc == 0 && st == GR_OK) rc = gr_dev_event_record(p->done, ctx->stream);
    if (rc) st = gr_fail_dev(ctx, rc, end);
    for (int i = 0; i < nread && st == GR_OK; i++)
        if (read[i]) st = gr_storage_mark_read(ctx, read[i]->st, ctx->stream);
    if (st != GR_OK) gr_dev_stream_sync(ctx->stream);      /* nothing given back while a kernel runs */
    return st;
}

void gr_pending_settle_queued(gr_context *ctx, gr_pending *p) {
    int rc = p->done ? gr_dev_event_sync(p->done) : 0;
    for (int i = 0; i < 2; i++) {
        if (p->held[i]) gr_slot_release(ctx, p->held[i]);
        gr_buffer_free(ctx, p->temps[i]);
        p->held[i] = NULL;
        p->temps[i] = NULL;
    }
    if (p->done) gr_dev_event_destroy(p->done);
    p->done = NULL;
    p->finished = 1;
    p->status = rc ? gr_fail_dev(ctx, rc, p->what ? p->what : "reduction") : GR_OK;
    if (rc) snprintf(p->err, sizeof p->err, "%s", gr_errmsg(ctx));
}

static void settle(gr_context *ctx, gr_pending *p) {
    if (p->settle) {
        p->settle(ctx, p);
        return;
    }
    p->status = gr_exec_finish(ctx, &p->run, p->slot, &p->value);
    gr_slot_release(ctx, p->slot);
    p->slot = NULL;
    p->finished = 1;
    if (p->status != GR_OK) snprintf(p->err, sizeof p->err, "%s", gr_errmsg(ctx));
}

int gr_pending_ready(gr_context *ctx, gr_pending *p) {
    if (p->finished) return 1;
    ctx = gr_ctx_enter(p->ctx);
    if (gr_dev_event_query(p->settle ? p->done : p->slot->done) == 1) return 0;
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
    if (p->settle && !p->finished) settle(ctx, p);     /* an axis one's scratch and copies go once it is done */
    if (p->slot) {
        gr_dev_event_sync(p->slot->done);       /* never release scratch a kernel still writes */
        gr_slot_release(ctx, p->slot);
    }
    gr_buffer_free(ctx, p->b);
    for (int k = 0; k < GR_MAX_INPUTS - 1; k++) gr_buffer_free(ctx, p->more[k]);
    free(p);
}
