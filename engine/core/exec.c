/*
 * exec.c -- running a run: its device passes, then the CPU finish or the value the kernel wrote, through
 * the kernel the planner chose (plan.h); nothing here tells the kinds of kernel apart.
 */
#include "core/exec.h"
#include "base/device.h"
#include "base/error.h"
#include "base/memory.h"
#include "core/pool.h"
#include "core/registry.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- device part and finish ---------------------------------------------------------------------- */

/* Queues one pass; on failure names the variant, the pass and the launch site. */
static gr_status launch_pass(gr_context *ctx, const gr_run *run, int k, gr_launch *L) {
    int rc = gr_fault_hit(ctx, GR_FAULT_LAUNCH);
    if (rc == 0) rc = run->kernel->launch(run, L);
    if (rc == 0) return GR_OK;
    /* a single-pass kernel that failed part-way may have left its ticket raised: words [0..1] only, the
     * completion flag's address lives in [2..3] (pool.c) */
    gr_dev_memset(L->counter, 0, 2 * sizeof(unsigned), L->stream);
    char name[96], what[160];
    snprintf(name, sizeof name, run->kernel->what, gr_variant_get(run->plan.variant)->name);
    snprintf(what, sizeof what, "%s, pass %d (%zu blocks of %d)", name, k + 1, L->grid, L->block);
    return gr_fail_dev_at(ctx, rc, what, L->site);
}

gr_status gr_exec_start(gr_context *ctx, const gr_inputs *in, uint64_t first, const gr_run *run, gr_slot *slot,
                        void *stream, int flag) {
    const gr_plan *plan = &run->plan;
    if (flag) gr_slot_lower(slot);      /* lowered before the launch that raises it */
    char *half[2] = {slot->dev, (char *)slot->dev + run->half_offset};
    size_t es = plan->acc_size;
    gr_inputs partials;             /* what the passes after the first read: the one before's partials */
    const void *last = NULL;
    int rc = 0, k;
    for (k = 0; k < plan->npasses && !plan->pass[k].on_host; k++) {
        const gr_pass *ps = &plan->pass[k];
        if (k) gr_inputs_one(&partials, last, plan->acc, ps->elements);
        gr_launch L = {
            .in = k ? &partials : in, .n = ps->elements, .in_dtype = plan->in_dtype, .partials_in = k > 0,
            .first = k ? 0 : first, .op = plan->op, .acc = plan->acc, .out = half[k & 1], .grid = ps->blocks,
            .block = ps->block, .stream = stream, .counter = slot->counter,
            .final_out = run->epilogue ? slot->result : NULL, .scratch = (char *)slot->dev + run->extra_offset,
            .scratch_bytes = run->scratch,
        };
        gr_status st = launch_pass(ctx, run, k, &L);
        if (st != GR_OK) return st;
        last = L.out;
    }
    if (k < plan->npasses)          /* the CPU finishes: bring its partials back */
        rc = gr_copy(ctx, slot->host, last, plan->pass[k].elements * es, stream);
    else if (!run->epilogue)
        rc = gr_copy(ctx, gr_run_value(run, slot), last, es, stream);
    if (rc) return gr_fail_dev(ctx, rc, "copying partials back");
    slot->stream = stream;
    /* a single pass through the device epilogue raises the slot's flag itself (cuda/device/epilogue.cuh); other
     * runs have the stream raise it after their work, where the driver can */
    slot->flagged = flag && (run->raises_flag || gr_dev_write_flag(stream, gr_slot_flag(slot), 1) == 0);
    if (!slot->flagged && (rc = gr_dev_event_record(slot->done, stream)) != 0)
        return gr_fail_dev(ctx, rc, "event record");
    return GR_OK;
}

gr_status gr_exec_single_to(gr_context *ctx, const gr_inputs *in, uint64_t first, const gr_run *run, void *scratch,
                            unsigned *counter, void *final_out, void *stream) {
    const gr_plan *plan = &run->plan;
    const gr_pass *ps = &plan->pass[0];
    gr_launch L = {
        .in = in, .n = ps->elements, .in_dtype = plan->in_dtype, .first = first, .op = plan->op, .acc = plan->acc,
        .out = scratch, .grid = ps->blocks, .block = ps->block, .stream = stream, .counter = counter,
        .final_out = final_out, .scratch = (char *)scratch + run->extra_offset, .scratch_bytes = run->scratch,
    };
    return launch_pass(ctx, run, 0, &L);
}

/* 1 when the kernel's reply (cuda/device/epilogue.cuh) is all there, its result then copied to the slot's
 * result area where the flag's readers find it: word 0 says how many words there are, and each word
 * carries that count beside its 4 bytes, so a word of an earlier reply (lowered to 0) is never taken. */
static int replied(gr_slot *slot) {
    volatile unsigned long long *reply = gr_slot_reply(slot);
    unsigned words = (unsigned)(reply[0] >> 32);
    if (words == 0 || words > GR_REPLY_WORDS) return 0;
    unsigned bits[GR_REPLY_WORDS];
    for (unsigned k = 0; k < words; k++) {
        unsigned long long w = reply[k];
        if ((unsigned)(w >> 32) != words) return 0;
        bits[k] = (unsigned)w;
    }
    memcpy(slot->result, bits, words * sizeof bits[0]);
    return 1;
}

/* Spins until the kernel has replied or the stream has written the slot's flag; every few thousand turns
 * asks the driver whether the stream failed (a kernel fault would never do either). */
static gr_status wait_flag(gr_context *ctx, gr_slot *slot) {
    volatile unsigned *f = gr_slot_flag(slot);
    for (unsigned spins = 1; *f == 0 && !replied(slot); spins++) {
        if ((spins & 4095) == 0) {
            int q = gr_dev_stream_query(slot->stream);
            if (q > 1) return gr_fail_dev(ctx, q, "reduction");
            if (q == 0 && *f == 0 && !replied(slot))
                return gr_fail(ctx, GR_ECUDA, "reduction: the completion flag was lost");
        }
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
    }
    return GR_OK;
}

gr_status gr_exec_wait_single(gr_context *ctx, gr_slot *slot, void *stream, const void **value) {
    slot->stream = stream;
    gr_status st = wait_flag(ctx, slot);
    /* the flag follows the fenced store to final_out; a reply is in the result area now (replied) */
    *value = *gr_slot_flag(slot) ? slot->host : slot->result;
    return st;
}

gr_status gr_exec_finish(gr_context *ctx, const gr_run *run, gr_slot *slot, gr_result *out) {
    if (slot->flagged) {
        gr_status st = wait_flag(ctx, slot);
        if (st != GR_OK) return st;
    } else {
        int rc = gr_dev_event_sync(slot->done);
        if (rc) return gr_fail_dev(ctx, rc, "reduction");
    }
    const gr_plan *plan = &run->plan;
    const gr_pass *last = &plan->pass[plan->npasses - 1];
    if (last->on_host) return run->kernel->finish(ctx, run, slot, slot->host, last->elements, plan->n, out);
    return run->kernel->result(ctx, run, slot, gr_run_value(run, slot), plan->n, out);
}

gr_status gr_exec(gr_context *ctx, const gr_inputs *in, const gr_run *run, void *stream, gr_result *out) {
    gr_slot *slot;
    gr_status st = gr_slot_acquire(ctx, run->plan.dev_bytes, run->plan.host_bytes, &slot);
    if (st != GR_OK) return st;
    st = gr_exec_start(ctx, in, 0, run, slot, stream, 1);
    if (st == GR_OK) st = gr_exec_finish(ctx, run, slot, out);
    else gr_dev_stream_sync(stream);    /* let anything queued drain before reuse */
    gr_slot_release(ctx, slot);
    return st;
}

gr_status gr_exec_combine(gr_context *ctx, const gr_run *run, gr_slot *slot, size_t count, size_t n, const char *what,
                          gr_result *out) {
    size_t aes = run->plan.acc_size;
    slot->stream = ctx->stream;
    int rc;
    if (run->device_combine) {      /* one block of the kernel's own, over the accumulators */
        gr_inputs accs;
        gr_inputs_one(&accs, slot->dev, run->plan.acc, count);
        gr_launch L = {
            .in = &accs, .n = count, .in_dtype = run->plan.in_dtype, .partials_in = 1, .op = run->plan.op,
            .acc = run->plan.acc, .out = (char *)slot->dev + (count * aes + 255) / 256 * 256, .grid = 1, .block = 256,
            .stream = ctx->stream, .counter = slot->counter, .final_out = slot->result,
        };
        rc = gr_fault_hit(ctx, GR_FAULT_LAUNCH);
        if (rc == 0) rc = run->kernel->combine(run, &L);
        if (rc == 0) rc = gr_dev_stream_sync(ctx->stream);
        if (rc) {
            char said[160];
            snprintf(said, sizeof said, "%s: combining the partial values", what);
            return gr_fail_dev_at(ctx, rc, said, L.site);
        }
        return run->kernel->result(ctx, run, slot, slot->result, n, out);
    }
    rc = gr_copy(ctx, slot->host, slot->dev, count * aes, ctx->stream);
    if (rc == 0) rc = gr_dev_stream_sync(ctx->stream);
    if (rc) return gr_fail_dev(ctx, rc, what);
    return run->kernel->finish(ctx, run, slot, slot->host, count, n, out);
}
