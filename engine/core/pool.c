/*
 * pool.c -- scratch for reductions in flight, allocated once and reused.
 *
 * A slot holds what one reduction needs besides its input: device ping-pong partials, a last-block-done
 * counter, pinned memory for partials the CPU finishes and for the result, an event marking the end of
 * its device work. Slots grow on demand (to a power of two, so a sweep over growing n settles after a
 * few calls) and are then reused: after warm-up no reduction allocates.
 */
#include "core/pool.h"
#include "base/device.h"
#include "base/error.h"
#include "base/memory.h"

#include <stdlib.h>

static void slot_free_memory(gr_context *ctx, gr_slot *s) {
    gr_mem_free(ctx, GR_MEM_DEVICE, s->dev, s->dev_bytes);
    gr_mem_free(ctx, GR_MEM_DEVICE, s->counter, 64);
    gr_mem_free(ctx, GR_MEM_PINNED, s->host, s->host_bytes);
    gr_mem_free(ctx, GR_MEM_PINNED, s->result, GR_SLOT_PINNED_BYTES);
    if (s->done) gr_dev_event_destroy(s->done);
}

/* Grows one region to at least `need` bytes. The old contents are not kept: a slot is idle when it
 * grows. On failure the region is left empty, never half-made. */
static gr_status grow(gr_context *ctx, gr_mem_kind kind, void **p, size_t *have, size_t need) {
    if (need <= *have) return GR_OK;
    size_t want = 4096;
    while (want < need) want *= 2;
    gr_mem_free(ctx, kind, *p, *have);
    *p = NULL;
    *have = 0;
    if (kind == GR_MEM_DEVICE) ctx->stats.device_allocs++;
    else ctx->stats.host_allocs++;
    gr_status st = gr_mem_alloc(ctx, kind, want, p);
    if (st == GR_OK) *have = want;
    return st;
}

static gr_status slot_create(gr_context *ctx, gr_slot **out) {
    gr_slot *s = calloc(1, sizeof *s);
    if (!s) return gr_fail(ctx, GR_ENOMEM, "out of host memory");
    gr_status st = gr_mem_alloc(ctx, GR_MEM_DEVICE, 64, (void **)&s->counter);
    if (st == GR_OK) st = gr_mem_alloc(ctx, GR_MEM_PINNED, GR_SLOT_PINNED_BYTES, &s->result);
    if (st == GR_OK && ctx->base.backend == GR_BACKEND_CUDA) {
        /* the counter's words (cuda/device/epilogue.cuh): [0] the last-block ticket, [2..3] the completion flag
         * and [4..5] the reply words the single-pass kernels write, both in the pinned result area */
        void *where[2] = {gr_slot_flag(s), (void *)gr_slot_reply(s)};
        int rc = gr_dev_memset(s->counter, 0, 64, ctx->stream);
        if (rc == 0) rc = gr_dev_copy(s->counter + 2, where, sizeof where, ctx->stream);
        if (rc == 0) rc = gr_dev_stream_sync(ctx->stream);
        if (rc == 0) rc = gr_dev_event_create(&s->done, 0);
        if (rc) st = gr_fail_dev(ctx, rc, "scratch slot");
    }
    if (st != GR_OK) {
        slot_free_memory(ctx, s);
        free(s);
        return st;
    }
    ctx->stats.device_allocs++;     /* its counter */
    ctx->stats.host_allocs++;       /* its result */
    *out = s;
    return GR_OK;
}

gr_status gr_slot_acquire(gr_context *ctx, size_t dev_bytes, size_t host_bytes, gr_slot **out) {
    gr_slot *s = NULL;
    for (int i = 0; i < ctx->nslots && !s; i++)
        if (!ctx->slots[i]->busy) s = ctx->slots[i];
    if (!s) {
        if (ctx->nslots == GR_MAX_SLOTS)
            return gr_fail(ctx, GR_EINVAL, "too many reductions in flight (at most %d): wait for some",
                           GR_MAX_SLOTS);
        gr_status st = slot_create(ctx, &s);
        if (st != GR_OK) return st;
        ctx->slots[ctx->nslots++] = s;
        ctx->stats.slots = ctx->nslots;
    }
    gr_status st = grow(ctx, GR_MEM_DEVICE, &s->dev, &s->dev_bytes, dev_bytes);
    if (st == GR_OK) st = grow(ctx, GR_MEM_PINNED, &s->host, &s->host_bytes, host_bytes);
    if (st != GR_OK) return st;
    s->busy = 1;
    *out = s;
    return GR_OK;
}

void gr_slot_release(gr_context *ctx, gr_slot *s) {
    (void)ctx;
    if (s) s->busy = 0;
}

void gr_pool_stats_get(const gr_context *ctx, gr_pool_stats *out) {
    *out = ctx->stats;
    out->live_device_bytes = ctx->base.mem.live_bytes[GR_MEM_DEVICE];
    out->live_pinned_bytes = ctx->base.mem.live_bytes[GR_MEM_PINNED];
    out->live_allocations = ctx->base.mem.live_count[GR_MEM_DEVICE] + ctx->base.mem.live_count[GR_MEM_PINNED];
}

void gr_pool_release_idle(gr_context *ctx) {
    int kept = 0;
    for (int i = 0; i < ctx->nslots; i++) {
        gr_slot *s = ctx->slots[i];
        if (s->busy) {
            ctx->slots[kept++] = s;
            continue;
        }
        slot_free_memory(ctx, s);
        free(s);
    }
    ctx->nslots = kept;
    ctx->stats.slots = kept;
    gr_mem_trim(ctx);           /* and what the buffer pool holds idle */
}

gr_status gr_aux_stream(gr_context *ctx, int i, void **out) {
    if (!ctx->aux_streams[i]) {
        int rc = gr_dev_stream_create(&ctx->aux_streams[i]);
        if (rc) return gr_fail_dev(ctx, rc, "stream creation");
    }
    *out = ctx->aux_streams[i];
    return GR_OK;
}

void gr_pool_destroy(gr_context *ctx) {
    for (int i = 0; i < GR_MAX_AUX_STREAMS; i++)
        if (ctx->aux_streams[i]) gr_dev_stream_destroy(ctx->aux_streams[i]);
    for (int i = 0; i < ctx->nslots; i++) {
        slot_free_memory(ctx, ctx->slots[i]);
        free(ctx->slots[i]);
    }
    ctx->nslots = 0;
}
