/*
 * memory.c -- every allocation of device and pinned memory the context makes, in one place.
 *
 * Buffers and the scratch pool allocate through here, so the context knows what it holds (live bytes
 * and allocations per kind, for gr_pool_stats and leak checks), can refuse to go past a limit
 * (GPUREDUCE_MEMORY_LIMIT or gr_context_set_memory_limit: a test can make a small device of a large
 * one), and can be made to fail its k-th allocation (faults.c). On the cpu backend, host memory stands
 * in for both kinds. Copies between the kinds go through gr_copy, which injected faults reach too.
 *
 * Device memory comes from the runtime's caching pool (cuda/runtime/runtime.cu: why reuse is safe across
 * streams) unless GPUREDUCE_BUFFER_POOL=0: a free hands the memory back to it, ordered after the work that
 * may still use it, and the live bytes drop at once. The counts, the limit and the faults see only what
 * the context asked for and holds; what the pool keeps idle is reported apart (gr_buffer_pool_stats_get).
 */
#include "base/memory.h"
#include "base/device.h"
#include "base/env.h"
#include "base/error.h"

#include <stdatomic.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* GPUREDUCE_BUFFER_POOL (default 1), read at the first device allocation of the process: the pool is the
 * process's, and the runtime fixes each device's choice at its first allocation anyway. */
static atomic_int pool_switch = -1;

static int pool_wanted(void) {
    int on = atomic_load_explicit(&pool_switch, memory_order_relaxed);
    if (on < 0) {
        on = gr_env_number_or(GR_ENV_BUFFER_POOL, 1) != 0;
        atomic_store_explicit(&pool_switch, on, memory_order_relaxed);
    }
    return on;
}

static const char *const kind_names[GR_MEM_KINDS] = {"device", "pinned host"};

/* The CUDA runtime's code for an allocation that failed (cudaErrorMemoryAllocation). */
enum { OOM_CODE = 2 };

static gr_status out_of_memory(gr_context *ctx, gr_mem_kind kind, size_t bytes, const char *why) {
    if (gr_base_of(ctx)->backend == GR_BACKEND_CUDA) {
        char what[160];
        snprintf(what, sizeof what, "allocation of %zu bytes (%s memory)%s", bytes, kind_names[kind], why);
        return gr_fail_dev(ctx, OOM_CODE, what);
    }
    return gr_fail(ctx, GR_ENOMEM, "allocation of %zu bytes: out of host memory%s", bytes, why);
}

gr_status gr_mem_alloc(gr_context *ctx, gr_mem_kind kind, size_t bytes, void **out) {
    gr_base *base = gr_base_of(ctx);
    *out = NULL;
    size_t alloc = bytes ? bytes : 1;
    if (gr_fault_hit(ctx, GR_FAULT_ALLOC)) {
        base->fault.injected = 0;       /* said in the message instead */
        return out_of_memory(ctx, kind, bytes, " (injected fault)");
    }
    size_t held = base->mem.live_bytes[GR_MEM_DEVICE] + base->mem.live_bytes[GR_MEM_PINNED];
    if (base->mem.limit && (alloc > base->mem.limit || held > base->mem.limit - alloc)) {
        char why[96];
        snprintf(why, sizeof why, " (over the context's memory limit of %zu bytes, %zu held)", base->mem.limit,
                 held);
        return out_of_memory(ctx, kind, bytes, why);
    }
    int rc = 0;
    if (base->backend != GR_BACKEND_CUDA) {
        if (alloc > SIZE_MAX - 63) return out_of_memory(ctx, kind, bytes, "");
        *out = aligned_alloc(64, (alloc + 63) / 64 * 64);
        if (!*out) return out_of_memory(ctx, kind, bytes, "");
    } else {
        /* device memory in whole 16-byte blocks: the segmented kernel reads a span off a 16-byte boundary
         * as the aligned vectors around it (cuda/device/segmented.cuh's span_run), up to the end of the
         * block that holds its last byte; the counts below stay the bytes asked for */
        rc = kind == GR_MEM_PINNED ? gr_dev_host_alloc(out, alloc)
                                   : gr_dev_malloc(out, alloc > SIZE_MAX - 15 ? alloc : (alloc + 15) / 16 * 16,
                                                   pool_wanted());
        if (rc) {
            *out = NULL;
            if (gr_dev_error_is_oom(rc)) return out_of_memory(ctx, kind, bytes, "");
            char what[96];
            snprintf(what, sizeof what, "allocation of %zu bytes (%s memory)", bytes, kind_names[kind]);
            return gr_fail_dev(ctx, rc, what);
        }
    }
    base->mem.live_bytes[kind] += alloc;
    base->mem.live_count[kind]++;
    return GR_OK;
}

void gr_mem_free_after(gr_context *ctx, gr_mem_kind kind, void *p, size_t bytes, void *stream, void *after) {
    if (!p) return;
    gr_base *base = gr_base_of(ctx);
    size_t alloc = bytes ? bytes : 1;
    if (base->backend != GR_BACKEND_CUDA) free(p);
    else if (kind == GR_MEM_PINNED) gr_dev_host_free(p);
    else gr_dev_free(p, stream, after);
    base->mem.live_bytes[kind] -= alloc;
    base->mem.live_count[kind]--;
}

void gr_mem_free(gr_context *ctx, gr_mem_kind kind, void *p, size_t bytes) {
    gr_mem_free_after(ctx, kind, p, bytes, NULL, NULL);
}

void gr_mem_trim(gr_context *ctx) {
    if (gr_base_of(ctx)->backend == GR_BACKEND_CUDA) gr_dev_pool_trim();
}

void gr_buffer_pool_stats_get(const gr_context *ctx, gr_buffer_pool_stats *out) {
    *out = (gr_buffer_pool_stats){0, 0, 0, 0, 0, 0};
    if (gr_base_of(ctx)->backend != GR_BACKEND_CUDA) return;
    gr_dev_pool_stats d;
    gr_dev_pool_info(&d);
    out->enabled = pool_wanted() && d.plain_devices == 0;
    out->cached_bytes = d.reserved;
    out->used_bytes = d.used;
    out->idle_bytes = d.reserved > d.used ? d.reserved - d.used : 0;
    out->hits = (size_t)d.hits;
    out->misses = (size_t)d.misses;
}

void gr_context_set_memory_limit(gr_context *ctx, size_t bytes) { gr_base_of(ctx)->mem.limit = bytes; }

int gr_copy(gr_context *ctx, void *dst, const void *src, size_t bytes, void *stream) {
    int code = gr_fault_hit(ctx, GR_FAULT_COPY);
    if (code) return code;
    if (gr_base_of(ctx)->backend != GR_BACKEND_CUDA) {
        memmove(dst, src, bytes);
        return 0;
    }
    return gr_dev_copy(dst, src, bytes, stream);
}
