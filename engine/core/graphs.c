/*
 * graphs.c -- small synchronous reductions replayed from CUDA graphs.
 *
 * A small reduction's time is mostly fixed cost: the launch, then the wait. A CUDA graph launch of the
 * same kernel costs less than a launch through the runtime (5.8-6.7 us against 8.4-9.3 us with the
 * synchronisation on an H200, as measured for issue 11; a small gr.sum from Lua went from 12.0 to 8.6 us
 * on an H100 with this cache, docs/performance.md), so a synchronous single-pass reduction
 * asked for a second time with the same key -- the input's address and size, the op, the accumulator,
 * the variant, block, grid and stream -- is captured into a graph with a slot of its own, and replayed
 * from then on. The graph reads the input's memory when it runs, so a refilled buffer gives its new
 * value; a freed buffer's graph is replayed only if a live buffer has since taken the same memory and
 * size, and then reads that buffer, correctly. Up to GR_MAX_GRAPHS keys are kept, the least recently
 * used one evicted. The kernel raises the completion flag itself (cuda/device/epilogue.cuh), so the graph is
 * that one kernel node. A failure to capture turns graphs off for the context.
 */
#include "core/graphs.h"
#include "base/device.h"
#include "base/error.h"
#include "base/memory.h"
#include "ops/ops.h"
#include "core/exec.h"
#include "core/pool.h"

#include <string.h>

static int same_key(const gr_graph *g, const void *in, const gr_run *run, void *stream) {
    const gr_plan *p = &run->plan;
    return g->in == in && g->n == p->n && g->grid == p->pass[0].blocks && g->in_dtype == p->in_dtype &&
           g->acc == p->acc && g->op == p->op && g->image == run->image && g->variant == p->variant &&
           g->block == p->pass[0].block && g->stream == stream;
}

static void drop(gr_context *ctx, gr_graph *g) {
    if (g->exec) gr_dev_graph_destroy(g->exec);
    gr_slot_release(ctx, g->slot);
    memset(g, 0, sizeof *g);
}

void gr_graphs_clear(gr_context *ctx) {
    for (int i = 0; i < GR_MAX_GRAPHS; i++)
        if (ctx->graphs.entries[i].used) drop(ctx, &ctx->graphs.entries[i]);
}

/* The entry for the key: the one that has it, else a free one or the least recently used (emptied). */
static gr_graph *entry_for(gr_context *ctx, const void *in, const gr_run *run, void *stream, int *found) {
    gr_graph *free_one = NULL, *oldest = NULL;
    for (int i = 0; i < GR_MAX_GRAPHS; i++) {
        gr_graph *g = &ctx->graphs.entries[i];
        if (g->used && same_key(g, in, run, stream)) {
            *found = 1;
            return g;
        }
        if (!g->used && !free_one) free_one = g;
        if (g->used && (!oldest || g->used < oldest->used)) oldest = g;
    }
    *found = 0;
    if (free_one) return free_one;
    drop(ctx, oldest);
    return oldest;
}

/* GR_OK with g->exec set; GR_ENOMEM when the slot could not be had (try again another time); another
 * status when capture itself failed (graphs do not work here). */
static gr_status capture(gr_context *ctx, gr_graph *g, const gr_inputs *in, const gr_run *run, void *stream) {
    gr_status st = gr_slot_acquire(ctx, run->plan.dev_bytes, 0, &g->slot);
    if (st != GR_OK) {
        g->slot = NULL;
        return GR_ENOMEM;
    }
    int rc = gr_dev_capture_begin(stream);
    if (rc == 0) {
        st = gr_exec_single_to(ctx, in, 0, run, g->slot->dev, g->slot->counter, g->slot->result, stream);
        rc = gr_dev_capture_end(stream, &g->exec);
    }
    if (st == GR_OK && (rc || !g->exec)) st = gr_fail_dev(ctx, rc ? rc : 999, "capturing a graph");
    if (st != GR_OK) {
        gr_slot_release(ctx, g->slot);
        g->slot = NULL;
        g->exec = NULL;
    }
    return st;
}

gr_status gr_graph_reduce(gr_context *ctx, const gr_inputs *inputs, const gr_run *run, void *stream, gr_result *out,
                          int *handled) {
    *handled = 0;
    /* one pass that ends in the device epilogue, which raises the completion flag itself */
    if (ctx->base.backend != GR_BACKEND_CUDA || ctx->graphs.off || !run->raises_flag) return GR_OK;
    const gr_plan *p = &run->plan;
    const void *in = inputs->at[0].data;    /* one contiguous input: its address and n are the key */
    int found;
    gr_graph *g = entry_for(ctx, in, run, stream, &found);
    g->used = ++ctx->graphs.clock;
    if (!found) {                           /* the first time: remember the key, run as usual */
        g->in = in;
        g->n = p->n;
        g->grid = p->pass[0].blocks;
        g->in_dtype = p->in_dtype;
        g->acc = p->acc;
        g->op = p->op;
        g->image = run->image;
        g->variant = p->variant;
        g->block = p->pass[0].block;
        g->stream = stream;
        return GR_OK;
    }
    if (!g->exec) {
        gr_status st = capture(ctx, g, inputs, run, stream);
        if (st != GR_OK) {                  /* the caller runs it as usual; a failed capture ends graphs */
            if (st != GR_ENOMEM) ctx->graphs.off = 1;
            memset(g, 0, sizeof *g);
            return GR_OK;
        }
    }
    *handled = 1;
    gr_slot_lower(g->slot);
    int rc = gr_fault_hit(ctx, GR_FAULT_LAUNCH);
    if (rc == 0) rc = gr_dev_graph_launch(g->exec, stream);
    if (rc) {
        gr_dev_stream_sync(stream);
        return gr_fail_dev(ctx, rc, "graph launch");
    }
    g->slot->stream = stream;
    g->slot->flagged = 1;
    return gr_exec_finish(ctx, run, g->slot, out);
}

void gr_pool_trim(gr_context *ctx) {
    gr_graphs_clear(ctx);                   /* their slots are the pool's: give them back first */
    gr_pool_release_idle(ctx);
}
