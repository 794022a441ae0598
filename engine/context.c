/*
 * context.c -- the context: backend choice, device facts, streams.
 */
#include "handles.h"
#include "cpu.h"
#include "graphs.h"
#include "device.h"
#include "error.h"
#include "memory.h"
#include "pool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    const char *limit = getenv("GPUREDUCE_MEMORY_LIMIT");
    if (limit && *limit) ctx->mem.limit = (size_t)strtoull(limit, NULL, 10);
    gr_fault_init_from_env(ctx);
    *out = ctx;
    return GR_OK;
}

void gr_context_destroy(gr_context *ctx) {
    if (!ctx) return;
    if (ctx->backend == GR_BACKEND_CUDA) gr_dev_stream_sync(ctx->stream);
    gr_graphs_clear(ctx);
    gr_pool_destroy(ctx);
    if (ctx->stream) gr_dev_stream_destroy(ctx->stream);
    free(ctx);
}

gr_backend gr_context_backend(const gr_context *ctx) { return ctx ? ctx->backend : GR_BACKEND_CPU; }

gr_status gr_device_info_get(gr_context *ctx, gr_device_info *info) {
    if (ctx->backend != GR_BACKEND_CUDA) return gr_fail(ctx, GR_ENODEV, "no CUDA device (backend is cpu)");
    *info = ctx->info;
    return GR_OK;
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
