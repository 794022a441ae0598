/*
 * exec.c -- running a plan: its device passes, then the CPU finish or the value the kernel wrote.
 */
#include "core/plan.h"
#include "ops/cpu_backend.h"
#include "base/device.h"
#include "base/error.h"
#include "core/exact_pass.h"
#include "base/memory.h"
#include "core/image.h"
#include "ops/ops.h"
#include "core/policy.h"
#include "core/pool.h"
#include "core/registry.h"
#include "core/buffer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- device part and finish ---------------------------------------------------------------------- */

/* Queues one pass; on failure names the variant, the pass and the launch site. */
static gr_status launch_pass(gr_context *ctx, const gr_plan *plan, int k, gr_launch *L) {
    const gr_variant_row *row = gr_variant_row_get(plan->variant);
    int rc = gr_fault_hit(ctx, GR_FAULT_LAUNCH);
    /* a user kernel's image, or a user operator's (whose kernel has the variant's shape, and so its
     * dynamic shared memory; a user kernel's row asks for none) */
    const struct gr_image *img = plan->kernel ? plan->kernel : plan->user;
    if (rc == 0 && img) {
        L->smem = row->kernel->smem ? row->kernel->smem(L->block) : 0;
        rc = gr_image_launch(L, img);
    } else if (rc == 0) {
        rc = row->kernel->launch(L);
    }
    if (rc == 0) return GR_OK;
    /* a single-pass kernel that failed part-way may have left its ticket raised: words [0..1] only, the
     * completion flag's address lives in [2..3] (pool.c) */
    gr_dev_memset(L->counter, 0, 2 * sizeof(unsigned), L->stream);
    char what[128];
    snprintf(what, sizeof what, "variant '%s', pass %d (%zu blocks of %d)", row->name, k + 1, L->grid, L->block);
    return gr_fail_dev_at(ctx, rc, what, L->site);
}

/* Whether the plan is one pass that ends in the device epilogue (which raises the completion flag). */
static int single_epilogue(const gr_plan *plan) {
    return gr_finish_row_get(plan->finish)->epilogue && plan->npasses == 1 &&
           (gr_variant_row_get(plan->variant)->shape & GR_SHAPE_EPILOGUE);
}

gr_status gr_exec_start(gr_context *ctx, const void *in, const gr_plan *plan, gr_slot *slot, void *stream,
                        int flag) {
    if (plan->exact) return gr_exact_start(ctx, in, plan, slot, stream);
    if (flag) *(volatile unsigned *)gr_slot_flag(slot) = 0;     /* lowered before the launch that raises it */
    char *half[2] = {slot->dev, (char *)slot->dev + plan->half_offset};
    size_t es = plan->acc_size;
    int single = gr_finish_row_get(plan->finish)->epilogue;
    int rc = 0, k;
    for (k = 0; k < plan->npasses && !plan->pass[k].on_host; k++) {
        const gr_pass *ps = &plan->pass[k];
        gr_launch L = {
            .in = in, .n = ps->elements, .in_dtype = plan->in_dtype, .partials_in = k > 0, .first = 0,
            .op = plan->op, .acc = plan->acc, .out = half[k & 1], .grid = ps->blocks, .block = ps->block, .stream = stream,
            .counter = slot->counter, .final_out = single ? slot->result : NULL,
            .scratch = (char *)slot->dev + plan->extra_offset, .scratch_bytes = plan->scratch,
        };
        gr_status st = launch_pass(ctx, plan, k, &L);
        if (st != GR_OK) return st;
        in = L.out;
    }
    if (k < plan->npasses)          /* the CPU finishes: bring its partials back */
        rc = gr_copy(ctx, slot->host, in, plan->pass[k].elements * es, stream);
    else if (!single)
        rc = gr_copy(ctx, slot->result, in, es, stream);
    if (rc) return gr_fail_dev(ctx, rc, "copying partials back");
    slot->stream = stream;
    /* a single pass through the device epilogue raises the slot's flag itself (cuda/device/epilogue.cuh); other
     * plans have the stream raise it after their work, where the driver can */
    slot->flagged = flag && (single_epilogue(plan) || gr_dev_write_flag(stream, gr_slot_flag(slot), 1) == 0);
    if (!slot->flagged && (rc = gr_dev_event_record(slot->done, stream)) != 0)
        return gr_fail_dev(ctx, rc, "event record");
    return GR_OK;
}

gr_status gr_exec_single_to(gr_context *ctx, const void *in, uint64_t first, const gr_plan *plan, void *scratch,
                            unsigned *counter, void *final_out, void *stream) {
    const gr_pass *ps = &plan->pass[0];
    gr_launch L = {
        .in = in, .n = ps->elements, .in_dtype = plan->in_dtype, .first = first, .op = plan->op, .acc = plan->acc,
        .out = scratch, .grid = ps->blocks, .block = ps->block, .stream = stream, .counter = counter,
        .final_out = final_out, .scratch = (char *)scratch + plan->extra_offset, .scratch_bytes = plan->scratch,
    };
    return launch_pass(ctx, plan, 0, &L);
}

/* Spins until the stream has written the slot's flag; every few thousand turns asks the driver whether
 * the stream failed (a kernel fault would never write the flag). */
static gr_status wait_flag(gr_context *ctx, gr_slot *slot) {
    volatile unsigned *f = gr_slot_flag(slot);
    for (unsigned spins = 1; *f == 0; spins++) {
        if ((spins & 4095) == 0) {
            int q = gr_dev_stream_query(slot->stream);
            if (q > 1) return gr_fail_dev(ctx, q, "reduction");
            if (q == 0 && *f == 0) return gr_fail(ctx, GR_ECUDA, "reduction: the completion flag was lost");
        }
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
    }
    return GR_OK;
}

gr_status gr_exec_finish(gr_context *ctx, const gr_plan *plan, gr_slot *slot, gr_result *out) {
    if (plan->exact) return gr_exact_collect(ctx, plan, slot, out);
    if (slot->flagged) {
        gr_status st = wait_flag(ctx, slot);
        if (st != GR_OK) return st;
    } else {
        int rc = gr_dev_event_sync(slot->done);
        if (rc) return gr_fail_dev(ctx, rc, "reduction");
    }
    const gr_pass *last = &plan->pass[plan->npasses - 1];
    if (last->on_host && plan->user) {     /* the operator's cpu.reduce, then its post as ever */
        gr_status st = plan->fold(plan->fold_ud, slot->host, last->elements, slot->result);
        if (st != GR_OK) return st;
    } else if (last->on_host) {
        return gr_cpu_finish(ctx, slot->host, last->elements, plan->acc, plan->op, plan->in_dtype, plan->n, plan->ddof,
                             out);
    }
    if (plan->user)
        return gr_image_result(ctx, plan->user, slot->result, plan->n, gr_slot_post_out(slot), slot->stream, out);
    *out = gr_op_result(plan->op, slot->result, plan->acc, plan->in_dtype, plan->n, plan->ddof);
    return GR_OK;
}

