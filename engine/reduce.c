/*
 * reduce.c -- running a plan: device passes, the CPU finish, synchronous and asynchronous reductions.
 */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- device part and finish ---------------------------------------------------------------------- */

/* The completion flag: a word of the slot's pinned result area, after the value. */
static unsigned *flag_word(gr_slot *slot) { return (unsigned *)((char *)slot->result + 32); }

gr_status gr_exec_start(gr_context *ctx, const gr_buffer *b, const gr_plan *plan, gr_op op, gr_slot *slot,
                        void *stream, int flag) {
    const gr_variant_impl *impl = gr_variant_impl_get(plan->variant);
    const gr_variant *v = gr_variant_get(plan->variant);
    char *half[2] = {slot->dev, (char *)slot->dev + gr_plan_half_offset(plan)};
    const void *in = gr_buffer_data(b);
    size_t es = gr_dtype_size(plan->acc);
    int rc = 0, k;
    for (k = 0; k < plan->npasses && !plan->pass[k].on_host; k++) {
        const gr_pass *ps = &plan->pass[k];
        gr_launch L = {
            .in = in, .n = ps->elements, .in_dtype = ps->in_dtype, .op = op, .acc = plan->acc,
            .out = half[k & 1], .grid = ps->blocks, .block = ps->block, .stream = stream,
            .counter = slot->counter,
            .final_out = plan->finish == GR_FINISH_SINGLE ? slot->result : NULL,
            .scratch = (char *)slot->dev + gr_plan_extra_offset(plan), .scratch_bytes = plan->scratch,
        };
        if ((rc = gr_fault_hit(ctx, GR_FAULT_LAUNCH)) != 0 || (rc = impl->launch(&L)) != 0) {
            /* a single-pass kernel that failed part-way may have left its counter raised */
            gr_dev_memset(slot->counter, 0, 64, stream);
            char what[128];
            snprintf(what, sizeof what, "variant '%s', pass %d (%zu blocks of %d)", v->name, k + 1,
                     ps->blocks, ps->block);
            return gr_fail_dev(ctx, rc, what);
        }
        in = L.out;
    }
    if (k < plan->npasses)          /* the CPU finishes: bring its partials back */
        rc = gr_copy(ctx, slot->host, in, plan->pass[k].elements * es, stream);
    else if (plan->finish != GR_FINISH_SINGLE)
        rc = gr_copy(ctx, slot->result, in, es, stream);
    if (rc) return gr_fail_dev(ctx, rc, "copying partials back");
    slot->stream = stream;
    slot->flagged = flag && gr_dev_write_flag(stream, flag_word(slot), slot->seq + 1) == 0;
    if (slot->flagged) slot->seq++;
    else if ((rc = gr_dev_event_record(slot->done, stream)) != 0) return gr_fail_dev(ctx, rc, "event record");
    return GR_OK;
}

/* Spins until the stream has written the slot's flag; every few thousand turns asks the driver whether
 * the stream failed (a kernel fault would never write the flag). */
static gr_status wait_flag(gr_context *ctx, gr_slot *slot) {
    volatile unsigned *f = flag_word(slot);
    for (unsigned spins = 1; *f != slot->seq; spins++) {
        if ((spins & 4095) == 0) {
            int q = gr_dev_stream_query(slot->stream);
            if (q > 1) return gr_fail_dev(ctx, q, "reduction");
            if (q == 0 && *f != slot->seq) return gr_fail(ctx, GR_ECUDA, "reduction: the completion flag was lost");
        }
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
    }
    return GR_OK;
}

gr_status gr_launch_single(gr_context *ctx, int vi, const void *in, size_t n, gr_dtype t, gr_op op, gr_dtype acc,
                           int block, gr_slot *slot, void *partials, void *final_out, void *stream) {
    const gr_variant_impl *impl = gr_variant_impl_get(vi);
    size_t grid = impl->grid(n, block, t, &ctx->info);
    gr_launch L = {
        .in = in, .n = n, .in_dtype = t, .op = op, .acc = acc, .out = partials,
        .grid = grid, .block = block, .stream = stream, .counter = slot->counter, .final_out = final_out,
        /* the variant's own scratch follows the partials */
        .scratch = (char *)partials + (grid * gr_dtype_size(acc) + 255) / 256 * 256,
        .scratch_bytes = impl->scratch ? impl->scratch(n, t, op, acc) : 0,
    };
    int rc = gr_fault_hit(ctx, GR_FAULT_LAUNCH);
    if (rc == 0) rc = impl->launch(&L);
    if (rc) {
        gr_dev_memset(slot->counter, 0, 64, stream);
        char what[96];
        snprintf(what, sizeof what, "variant '%s' (%zu blocks of %d)", gr_variant_get(vi)->name, L.grid, block);
        return gr_fail_dev(ctx, rc, what);
    }
    return GR_OK;
}

gr_status gr_exec_finish(gr_context *ctx, const gr_buffer *b, const gr_plan *plan, gr_op op, gr_slot *slot,
                         gr_scalar *out) {
    if (slot->flagged) {
        gr_status st = wait_flag(ctx, slot);
        if (st != GR_OK) return st;
    } else {
        int rc = gr_dev_event_sync(slot->done);
        if (rc) return gr_fail_dev(ctx, rc, "reduction");
    }
    const gr_pass *last = &plan->pass[plan->npasses - 1];
    if (last->on_host) return gr_cpu_finish(ctx, slot->host, last->elements, plan->acc, op, b->dtype, out);
    *out = gr_acc_to_scalar(slot->result, plan->acc, b->dtype, op);
    return GR_OK;
}

/* ---- host variants ------------------------------------------------------------------------------- */

#define STAGE_BYTES ((size_t)64 << 20)

/* A host variant over device memory stages it through pinned memory in chunks; each chunk's value is
 * kept in the accumulator type and the chunk values are combined the same way at the end. */
static gr_status run_host_variant(gr_context *ctx, const gr_buffer *b, const gr_plan *plan, gr_op op,
                                  gr_scalar *out) {
    const gr_variant_impl *impl = gr_variant_impl_get(plan->variant);
    int resident = ctx->backend == GR_BACKEND_CPU || gr_buffer_where(b) == GR_HOST;
    if (resident) {
        union { uint64_t u; double f; } v;
        gr_status st = impl->host(ctx, gr_buffer_data(b), b->n, b->dtype, op, plan->acc, &v);
        if (st == GR_OK) *out = gr_acc_to_scalar(&v, plan->acc, b->dtype, op);
        return st;
    }

    size_t es = gr_dtype_size(b->dtype), aes = gr_dtype_size(plan->acc);
    size_t per = STAGE_BYTES / es, chunks = (b->n + per - 1) / per;
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
        st = impl->host(ctx, slot->host, len, b->dtype, op, plan->acc, values + c * aes);
    }
    if (st == GR_OK) st = gr_cpu_finish(ctx, values, chunks, plan->acc, op, b->dtype, out);
    free(values);
    gr_slot_release(ctx, slot);
    return st;
}

/* ---- entry points -------------------------------------------------------------------------------- */

static gr_status empty_result(gr_context *ctx, const gr_buffer *b, const gr_options *o, const gr_plan *p,
                              gr_scalar *out) {
    if (o->op == GR_MIN || o->op == GR_MAX)
        return gr_fail(ctx, GR_EEMPTY, "%s of an empty buffer is undefined (it has no identity)",
                       gr_op_name(o->op));
    *out = gr_identity_scalar(o->op, b->dtype, p->acc);
    return GR_OK;
}

static void *stream_of(gr_context *ctx, const gr_options *o) {
    return o->stream && o->stream->handle ? o->stream->handle : ctx->stream;
}

gr_status gr_reduce(gr_context *ctx, gr_buffer *b, const gr_options *o, gr_scalar *out) {
    gr_plan plan;
    gr_status st = gr_plan_make(ctx, b, o, &plan);
    if (st != GR_OK) return st;
    if (plan.npasses == 0) return empty_result(ctx, b, o, &plan, out);
    if (plan.pass[0].on_host) return run_host_variant(ctx, b, &plan, o->op, out);
    gr_slot *slot;
    st = gr_slot_acquire(ctx, gr_plan_scratch_bytes(&plan), gr_plan_host_bytes(&plan), &slot);
    if (st != GR_OK) return st;
    st = gr_exec_start(ctx, b, &plan, o->op, slot, stream_of(ctx, o), 1);
    if (st == GR_OK) st = gr_exec_finish(ctx, b, &plan, o->op, slot, out);
    else gr_dev_stream_sync(stream_of(ctx, o));    /* let anything queued drain before reuse */
    gr_slot_release(ctx, slot);
    return st;
}

/* Marks the storage as read by work queued on `stream`. If an earlier reduction on another stream
 * still reads it, the new event is made to follow that one too, so one event covers both. */
static gr_status mark_read(gr_context *ctx, gr_storage *st, void *stream) {
    int rc = 0;
    if (!st->last_read) rc = gr_dev_event_create(&st->last_read, 0);
    else rc = gr_dev_stream_wait_event(stream, st->last_read);
    if (rc == 0) rc = gr_dev_event_record(st->last_read, stream);
    return rc ? gr_fail_dev(ctx, rc, "recording the buffer's use") : GR_OK;
}

gr_status gr_reduce_async(gr_context *ctx, gr_buffer *b, const gr_options *o, gr_pending **out) {
    *out = NULL;
    gr_pending *p = calloc(1, sizeof *p);
    if (!p) return gr_fail(ctx, GR_ENOMEM, "out of host memory");
    p->op = o->op;
    p->in_dtype = b->dtype;
    gr_status st = gr_plan_make(ctx, b, o, &p->plan);
    if (st == GR_OK && (p->plan.npasses == 0 || p->plan.pass[0].on_host)) {
        /* nothing to queue: the value is known now */
        p->status = p->plan.npasses == 0 ? empty_result(ctx, b, o, &p->plan, &p->value)
                                         : run_host_variant(ctx, b, &p->plan, o->op, &p->value);
        p->finished = 1;
        if (p->status != GR_OK) st = p->status;   /* reported now, like a synchronous call */
    } else if (st == GR_OK) {
        void *stream = stream_of(ctx, o);
        st = gr_buffer_slice(ctx, b, 0, b->n, &p->b);
        if (st == GR_OK)
            st = gr_slot_acquire(ctx, gr_plan_scratch_bytes(&p->plan), gr_plan_host_bytes(&p->plan), &p->slot);
        if (st == GR_OK) {
            st = gr_exec_start(ctx, b, &p->plan, o->op, p->slot, stream, 0);
            if (st == GR_OK) st = mark_read(ctx, b->st, stream);
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
    p->status = gr_exec_finish(ctx, p->b, &p->plan, p->op, p->slot, &p->value);
    gr_slot_release(ctx, p->slot);
    p->slot = NULL;
    p->finished = 1;
    if (p->status != GR_OK) snprintf(p->err, sizeof p->err, "%s", ctx->err);
}

int gr_pending_ready(gr_context *ctx, gr_pending *p) {
    if (p->finished) return 1;
    if (gr_dev_event_query(p->slot->done) == 1) return 0;
    settle(ctx, p);
    return 1;
}

gr_status gr_pending_wait(gr_context *ctx, gr_pending *p, gr_scalar *out) {
    if (!p->finished) settle(ctx, p);
    if (p->status == GR_OK) *out = p->value;
    else gr_fail(ctx, p->status, "%s", p->err);
    return p->status;
}

void gr_pending_free(gr_context *ctx, gr_pending *p) {
    if (!p) return;
    if (p->slot) {
        if (!p->finished) gr_dev_event_sync(p->slot->done);   /* never release scratch a kernel still writes */
        gr_slot_release(ctx, p->slot);
    }
    gr_buffer_free(ctx, p->b);
    free(p);
}
