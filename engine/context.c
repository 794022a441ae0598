/*
 * context.c -- the context: backend choice, error messages, the scratch pool, streams.
 */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

gr_status gr_fail(gr_context *ctx, gr_status st, const char *fmt, ...) {
    if (ctx) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(ctx->err, sizeof ctx->err, fmt, ap);
        va_end(ap);
    }
    return st;
}

gr_status gr_fail_dev(gr_context *ctx, int code, const char *what) {
    gr_status st = gr_dev_error_is_oom(code) ? GR_ENOMEM : GR_ECUDA;
    return gr_fail(ctx, st, "%s: %s (%s)", what, gr_dev_error_name(code), gr_dev_error_string(code));
}

const char *gr_errmsg(const gr_context *ctx) { return ctx ? ctx->err : "no context"; }

gr_status gr_context_create(gr_context **out) {
    *out = NULL;
    gr_context *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return GR_ENOMEM;
    ctx->backend = GR_BACKEND_CPU;
    ctx->cpu_threads = gr_cpu_default_threads();
    const char *want = getenv("GPUREDUCE_BACKEND");
    int cpu_only = want && strcmp(want, "cpu") == 0;
    if (!cpu_only && gr_dev_present() && gr_dev_init(&ctx->info) == 0 &&
        gr_dev_stream_create(&ctx->stream) == 0)
        ctx->backend = GR_BACKEND_CUDA;
    *out = ctx;
    return GR_OK;
}

void gr_context_destroy(gr_context *ctx) {
    if (!ctx) return;
    if (ctx->backend == GR_BACKEND_CUDA) gr_dev_stream_sync(ctx->stream);
    gr_pool_destroy(ctx);
    if (ctx->stream) gr_dev_stream_destroy(ctx->stream);
    free(ctx);
}

gr_backend gr_context_backend(const gr_context *ctx) { return ctx->backend; }

gr_status gr_device_info_get(gr_context *ctx, gr_device_info *info) {
    if (ctx->backend != GR_BACKEND_CUDA) return gr_fail(ctx, GR_ENODEV, "no CUDA device (backend is cpu)");
    *info = ctx->info;
    return GR_OK;
}

/* ---- the scratch pool ---------------------------------------------------------------------------- */

static void slot_free_memory(gr_slot *s) {
    if (s->dev) gr_dev_free(s->dev);
    if (s->counter) gr_dev_free(s->counter);
    if (s->host) gr_dev_host_free(s->host);
    if (s->result) gr_dev_host_free(s->result);
    if (s->done) gr_dev_event_destroy(s->done);
}

/* Grows one region to at least `need` bytes, rounding up to a power of two so that a sweep over growing
 * n settles after a few calls. The old contents are not kept: a slot is idle when it grows. */
static int grow(void **p, size_t *have, size_t need, int (*alloc)(void **, size_t), int (*release)(void *)) {
    if (need <= *have) return 0;
    size_t want = 4096;
    while (want < need) want *= 2;
    if (*p) release(*p);
    *p = NULL;
    *have = 0;
    int rc = alloc(p, want);
    if (rc == 0) *have = want;
    return rc;
}

static gr_status slot_grow(gr_context *ctx, gr_slot *s, size_t dev_bytes, size_t host_bytes) {
    if (dev_bytes > s->dev_bytes) ctx->stats.device_allocs++;
    int rc = grow(&s->dev, &s->dev_bytes, dev_bytes, gr_dev_malloc, gr_dev_free);
    if (rc) return gr_fail_dev(ctx, rc, "scratch allocation");
    if (host_bytes > s->host_bytes) ctx->stats.host_allocs++;
    rc = grow(&s->host, &s->host_bytes, host_bytes, gr_dev_host_alloc, gr_dev_host_free);
    if (rc) return gr_fail_dev(ctx, rc, "pinned scratch allocation");
    return GR_OK;
}

static gr_status slot_create(gr_context *ctx, gr_slot **out) {
    gr_slot *s = calloc(1, sizeof *s);
    if (!s) return gr_fail(ctx, GR_ENOMEM, "out of host memory");
    int rc = gr_dev_malloc((void **)&s->counter, 64);
    if (rc == 0) rc = gr_dev_memset(s->counter, 0, 64, ctx->stream);
    if (rc == 0) rc = gr_dev_stream_sync(ctx->stream);
    if (rc == 0) rc = gr_dev_host_alloc(&s->result, 64);
    if (rc == 0) rc = gr_dev_event_create(&s->done, 0);
    if (rc != 0) {
        slot_free_memory(s);
        free(s);
        return gr_fail_dev(ctx, rc, "scratch slot");
    }
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
        ctx->stats.device_allocs++;     /* its counter */
        ctx->stats.host_allocs++;       /* its result */
        ctx->stats.slots = ctx->nslots;
    }
    gr_status st = slot_grow(ctx, s, dev_bytes, host_bytes);
    if (st != GR_OK) return st;
    s->busy = 1;
    *out = s;
    return GR_OK;
}

void gr_slot_release(gr_context *ctx, gr_slot *s) {
    (void)ctx;
    if (s) s->busy = 0;
}

void gr_pool_stats_get(const gr_context *ctx, gr_pool_stats *out) { *out = ctx->stats; }

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
        slot_free_memory(ctx->slots[i]);
        free(ctx->slots[i]);
    }
    ctx->nslots = 0;
}

/* ---- streams ------------------------------------------------------------------------------------- */

gr_status gr_stream_new(gr_context *ctx, gr_stream **out) {
    *out = NULL;
    gr_stream *s = calloc(1, sizeof *s);
    if (!s) return gr_fail(ctx, GR_ENOMEM, "out of host memory");
    if (ctx->backend == GR_BACKEND_CUDA) {
        int rc = gr_dev_stream_create(&s->handle);
        if (rc != 0) {
            free(s);
            return gr_fail_dev(ctx, rc, "stream creation");
        }
    }
    *out = s;
    return GR_OK;
}

gr_status gr_stream_sync(gr_context *ctx, gr_stream *s) {
    if (!s || !s->handle) return GR_OK;
    int rc = gr_dev_stream_sync(s->handle);
    return rc ? gr_fail_dev(ctx, rc, "stream sync") : GR_OK;
}

/* Safe with work still queued: the runtime releases the stream once that work is done. */
void gr_stream_free(gr_context *ctx, gr_stream *s) {
    (void)ctx;
    if (!s) return;
    if (s->handle) gr_dev_stream_destroy(s->handle);
    free(s);
}
