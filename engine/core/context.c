/*
 * context.c -- the context: backend choice, device facts, streams; the inner contexts of the other
 * devices (devices.h says how they are reached).
 */
#include "core/handles.h"
#include "ops/cpu_backend.h"
#include "core/context.h"
#include "core/graphs.h"
#include "base/device.h"
#include "base/env.h"
#include "base/error.h"
#include "base/memory.h"
#include "core/pool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(GR_MAX_DEVICES == 16, "env.c's row of GPUREDUCE_DEVICE says ordinals 0 to 15");

/* The environment is checked before anything is set up: a value a variable does not accept leaves a
 * cpu context that only says so (gr.h). */
gr_status gr_context_create(gr_context **out) {
    *out = NULL;
    gr_context *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return GR_ENOMEM;
    ctx->base.backend = GR_BACKEND_CPU;
    ctx->base.root = &ctx->base;
    ctx->per_device[0] = ctx;
    *out = ctx;
    char why[256];
    gr_env_var bad = gr_env_check_all(why, sizeof why);
    if (bad != GR_ENV_VAR_COUNT) return gr_fail_arg(ctx, GR_EINVAL, gr_env_name(bad), "%s", why);

    gr_env_value v;
    ctx->base.cpu_threads = gr_cpu_default_threads();
    int cpu_only = gr_env_get(GR_ENV_BACKEND, &v, NULL, 0) == GR_ENV_SET && v.word == 1;
    if (!cpu_only && gr_dev_present()) {
        ctx->device = (int)gr_env_number_or(GR_ENV_DEVICE, 0);
        /* a device that cannot be used leaves the cpu backend, as no device does */
        if (ctx->device < gr_dev_count() && gr_dev_init_on(ctx->device, &ctx->info) == 0 &&
            gr_dev_stream_create(&ctx->stream) == 0)
            ctx->base.backend = GR_BACKEND_CUDA;
        else
            ctx->device = 0;
    }
    ctx->per_device[0] = NULL;
    ctx->per_device[ctx->device] = ctx;
    ctx->base.mem.limit = (size_t)gr_env_number_or(GR_ENV_MEMORY_LIMIT, 0);
    ctx->exact_round = (size_t)gr_env_number_or(GR_ENV_EXACT_ROUND, 0);
    ctx->by_key_segments = gr_env_number_or(GR_ENV_BY_KEY_RUNS, 1) == 0;
    ctx->runs_items = (int)gr_env_number_or(GR_ENV_RUNS_ITEMS, 0);
    gr_fault_init_from_env(ctx);
    return GR_OK;
}

/* One context's own state, on its device. */
static void release(gr_context *ctx) {
    if (ctx->base.backend == GR_BACKEND_CUDA) {
        gr_dev_use(ctx->device);
        gr_dev_stream_sync(ctx->stream);
    }
    gr_graphs_clear(ctx);
    gr_pool_destroy(ctx);
    if (ctx->stream) gr_dev_stream_destroy(ctx->stream);
}

void gr_context_destroy(gr_context *ctx) {
    if (!ctx) return;
    for (int d = 0; d < GR_MAX_DEVICES; d++) {
        gr_context *c = ctx->per_device[d];
        if (c && c != ctx) {
            release(c);
            free(c);
        }
    }
    release(ctx);
    free(ctx);
}

/* ---- several devices ----------------------------------------------------------------------------- */

int gr_device_count(gr_context *ctx) {
    if (ctx->base.backend != GR_BACKEND_CUDA) return 1;        /* the host */
    int n = gr_dev_count();
    return n < GR_MAX_DEVICES ? n : GR_MAX_DEVICES;
}

int gr_device_default(const gr_context *ctx) { return gr_ctx_root(ctx)->device + 1; }

gr_status gr_device_info_at(gr_context *ctx, int index, gr_device_info *info) {
    memset(info, 0, sizeof *info);
    int count = gr_device_count(ctx);
    if (index < 1 || index > count)
        return gr_fail_arg(ctx, GR_EINVAL, "device", "%d is out of range (devices: 1 to %d)", index, count);
    if (ctx->base.backend != GR_BACKEND_CUDA) {
        snprintf(info->name, sizeof info->name, "cpu");
        return GR_OK;
    }
    int rc = gr_dev_props(index - 1, info);
    return rc ? gr_fail_dev(ctx, rc, "device properties") : GR_OK;
}

gr_context *gr_ctx_switch(gr_context *root, int ordinal) {
    gr_dev_use(ordinal);    /* a device that was usable once stays so; a failure shows at the next call */
    return root->per_device[ordinal];
}

gr_status gr_context_on(gr_context *ctx, int ordinal, gr_context **out) {
    gr_context *root = gr_ctx_root(ctx);
    *out = NULL;
    int count = gr_device_count(root);
    if (ordinal < 0 || ordinal >= count)
        return gr_fail_arg(root, GR_EINVAL, "device", "%d is out of range (devices: 1 to %d%s)", ordinal + 1, count,
                           root->base.backend == GR_BACKEND_CUDA ? "" : "; backend is cpu: device 1 is the host");
    gr_context *c = root->per_device[ordinal];
    if (c) {
        *out = gr_ctx_enter(c);
        return GR_OK;
    }
    c = calloc(1, sizeof *c);
    if (!c) return gr_fail(root, GR_ENOMEM, "out of host memory");
    c->base.backend = root->base.backend;
    c->base.root = &root->base;
    c->device = ordinal;
    c->base.cpu_threads = root->base.cpu_threads;
    c->base.mem.limit = root->base.mem.limit;
    int rc = gr_dev_init_on(ordinal, &c->info);
    if (rc == 0) rc = gr_dev_stream_create(&c->stream);
    if (rc) {
        if (c->stream) gr_dev_stream_destroy(c->stream);
        free(c);
        gr_dev_use(root->device);
        char what[64];
        snprintf(what, sizeof what, "device %d", ordinal + 1);
        return gr_fail_dev(root, rc, what);
    }
    root->per_device[ordinal] = c;
    root->multi = 1;        /* from now on every entry point makes its buffer's device current */
    *out = c;
    return GR_OK;
}

gr_backend gr_context_backend(const gr_context *ctx) { return ctx ? ctx->base.backend : GR_BACKEND_CPU; }

gr_status gr_device_info_get(gr_context *ctx, gr_device_info *info) {
    if (ctx->base.backend != GR_BACKEND_CUDA) return gr_fail(ctx, GR_ENODEV, "no CUDA device (backend is cpu)");
    *info = ctx->info;
    return GR_OK;
}

/* ---- streams ------------------------------------------------------------------------------------- */

gr_status gr_stream_new(gr_context *ctx, gr_stream **out) {
    *out = NULL;
    ctx = gr_ctx_enter(ctx);
    gr_stream *s = calloc(1, sizeof *s);
    if (!s) return gr_fail(ctx, GR_ENOMEM, "out of host memory");
    if (ctx->base.backend == GR_BACKEND_CUDA) {
        s->device = ctx->device;
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

gr_status gr_stream_misplaced(gr_context *ctx, const gr_stream *s) {
    return gr_fail_arg(ctx, GR_EINVAL, "stream", "was made on device %d, the buffer is on device %d (a stream "
                       "serves the device that was current when gr.stream made it)", s->device + 1, ctx->device + 1);
}

gr_status gr_device_differs(gr_context *ctx, const gr_buffer *b, const gr_buffer *other, const char *arg) {
    return gr_fail_arg(ctx, GR_EINVAL, arg, "is on device %d, the buffer reduced on device %d (they must share a "
                       "device: gr.copy moves data between devices)", other->st->device + 1, b->st->device + 1);
}

/* Safe with work still queued: the runtime releases the stream once that work is done. */
void gr_stream_free(gr_context *ctx, gr_stream *s) {
    (void)ctx;
    if (!s) return;
    if (s->handle) gr_dev_stream_destroy(s->handle);
    free(s);
}
