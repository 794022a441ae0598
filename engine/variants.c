/*
 * variants.c -- the variant registry: the single source of truth for what gpureduce can run.
 *
 * gr.variants(), the specs, the sweep and the README's table are all generated from this table.
 * Each kernel variant has three names (as in llm.c): its kernel and its launcher in cuda/vNN_name.cu,
 * and its entry here. Launchers are weak references: a CPU-only build has none, and the entries that
 * need them report that a CUDA device is needed.
 */
#include "internal.h"

#include <stdio.h>
#include <string.h>

#define F(x) (1u << GR_FINISH_##x)
#define DEVICE_FINISHES (F(DEVICE) | F(HYBRID) | F(HOST))

/* Kernel variants, in teaching order: X(name). Adding one here declares its launcher and grid rule. */
#define GR_KERNEL_VARIANTS(X) X(warp_shuffle)

#define DECLARE(name)                                                           \
    extern int gr_launch_##name(const gr_launch *L) __attribute__((weak));      \
    extern size_t gr_grid_##name(size_t n, int block, gr_dtype t, const gr_device_info *dev) \
        __attribute__((weak));                                                  \
    extern size_t gr_scratch_##name(size_t n, gr_dtype t, gr_op op, gr_dtype acc) __attribute__((weak));                                                  \
    extern size_t gr_scratch_##name(size_t n, gr_dtype t, gr_op op, gr_dtype acc) __attribute__((weak));
GR_KERNEL_VARIANTS(DECLARE)
#undef DECLARE

static gr_status host_cpu(gr_context *ctx, const void *p, size_t n, gr_dtype t, gr_op op, gr_dtype acc,
                          void *acc_out);
static gr_status host_cpu_pairwise(gr_context *ctx, const void *p, size_t n, gr_dtype t, gr_op op,
                                   gr_dtype acc, void *acc_out);

static const gr_variant registry[] = {
    {"cpu", 0, "the host backend (a threaded loop per core)",
     "threaded host reduction: one contiguous run per core, runs combined in order; floats in float64",
     F(HOST), GR_FINISH_HOST, 1, 1, 1, 0},
    {"cpu_pairwise", 1, "recursiveReduce: the textbook's recursive interleaved-pair host reduction",
     "host reduction by interleaved pairs with halving strides, recursively, in the accumulator type",
     F(HOST), GR_FINISH_HOST, 1, 1, 1, 0},
    {"warp_shuffle", 12, "v7 shuffle: the optimised tutorial kernel (grid-stride loads, __shfl_down_sync)",
     "grid-stride 16-byte loads, several per thread in flight, shuffles in warps, shared memory across warps",
     DEVICE_FINISHES | F(SINGLE), GR_FINISH_DEVICE, 32, 1024, 256, GR_NEEDS_CUDA | GR_NEEDS_POW2_BLOCK},
};

#define NVARIANTS ((int)(sizeof registry / sizeof registry[0]))

static const gr_variant_impl impls[NVARIANTS] = {
    {NULL, NULL, NULL, host_cpu},
    {NULL, NULL, NULL, host_cpu_pairwise},
#define IMPL(name) {gr_launch_##name, gr_grid_##name, gr_scratch_##name, NULL},
    GR_KERNEL_VARIANTS(IMPL)
#undef IMPL
};

int gr_variant_count(void) { return NVARIANTS; }
const gr_variant *gr_variant_get(int i) { return i >= 0 && i < NVARIANTS ? &registry[i] : NULL; }
const gr_variant_impl *gr_variant_impl_get(int i) { return i >= 0 && i < NVARIANTS ? &impls[i] : NULL; }

int gr_variant_find(const char *name) {
    for (int i = 0; i < NVARIANTS; i++)
        if (strcmp(registry[i].name, name) == 0) return i;
    return -1;
}

const char *gr_variant_names(void) {
    static char buf[1024];
    if (!buf[0]) {
        size_t used = (size_t)snprintf(buf, sizeof buf, "auto");
        for (int i = 0; i < NVARIANTS && used < sizeof buf; i++)
            used += (size_t)snprintf(buf + used, sizeof buf - used, ", %s", registry[i].name);
    }
    return buf;
}

/* auto: the fastest kernel on cuda for device-resident data; the host backend otherwise (pinned host
 * data is reduced where it already is). */
int gr_variant_auto(const gr_context *ctx, const gr_buffer *b, gr_op op) {
    (void)op;
    if (ctx->backend == GR_BACKEND_CUDA && gr_buffer_where(b) == GR_DEVICE)
        return gr_variant_find("warp_shuffle");
    return gr_variant_find("cpu");
}

static gr_status host_cpu(gr_context *ctx, const void *p, size_t n, gr_dtype t, gr_op op, gr_dtype acc,
                          void *acc_out) {
    return gr_cpu_reduce(ctx, p, n, t, op, acc, 0, acc_out);
}

static gr_status host_cpu_pairwise(gr_context *ctx, const void *p, size_t n, gr_dtype t, gr_op op,
                                   gr_dtype acc, void *acc_out) {
    return gr_cpu_reduce(ctx, p, n, t, op, acc, 1, acc_out);
}
