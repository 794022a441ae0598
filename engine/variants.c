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
#define GR_KERNEL_VARIANTS(X)                                                                     \
    X(neighbored) X(neighbored_less) X(interleaved) X(atomic_shared) X(unroll2) X(unroll4) X(unroll8) \
    X(unroll_warps8) X(complete_unroll8) X(template_unroll8) X(warp_shuffle) X(grid_stride_atomic)    \
    X(pipelined) X(cub) X(thrust)

#define DECLARE(name)                                                           \
    extern int gr_launch_##name(const gr_launch *L) __attribute__((weak));      \
    extern size_t gr_grid_##name(size_t n, int block, gr_dtype t, const gr_device_info *dev) \
        __attribute__((weak));                                                  \
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
    {"neighbored", 2, "reduceNeighbored / Reduce v0: neighbored pairs picked by tid % (2 * stride)",
     "one element per thread into shared memory; neighbored-pair tree picked by tid % (2 * stride)",
     DEVICE_FINISHES | F(SINGLE), GR_FINISH_DEVICE, 32, 1024, 512, GR_NEEDS_CUDA | GR_NEEDS_POW2_BLOCK},
    {"neighbored_less", 3, "reduceNeighboredLess / Reduce v1: index = 2 * stride * tid (bank conflicts)",
     "neighbored-pair tree with the pair remapped to 2 * stride * tid: whole warps idle, banks conflict",
     DEVICE_FINISHES | F(SINGLE), GR_FINISH_DEVICE, 32, 1024, 512, GR_NEEDS_CUDA | GR_NEEDS_POW2_BLOCK},
    {"interleaved", 4, "reduceInterleaved / Reduce v2: stride halving from blockDim / 2",
     "interleaved-pair tree, tid < stride with the stride halving: no divergence, no bank conflicts",
     DEVICE_FINISHES | F(SINGLE), GR_FINISH_DEVICE, 32, 1024, 512, GR_NEEDS_CUDA | GR_NEEDS_POW2_BLOCK},
    {"atomic_shared", 5, "the naive shared-memory atomic reduction (atomicAdd to one __shared__ sum)",
     "every thread atomically combines its element into one shared slot; float sums not repeatable",
     DEVICE_FINISHES | F(SINGLE), GR_FINISH_DEVICE, 32, 1024, 512, GR_NEEDS_CUDA | GR_NEEDS_POW2_BLOCK},
    {"unroll2", 6, "reduceUnrolling2 / Reduce v3: add during load, 2 tiles per block",
     "each thread combines 2 elements while loading, then the interleaved tree in shared memory",
     DEVICE_FINISHES | F(SINGLE), GR_FINISH_DEVICE, 32, 1024, 512, GR_NEEDS_CUDA | GR_NEEDS_POW2_BLOCK},
    {"unroll4", 7, "reduceUnrolling4 / Reduce v3: add during load, 4 tiles per block",
     "each thread combines 4 elements while loading, then the interleaved tree in shared memory",
     DEVICE_FINISHES | F(SINGLE), GR_FINISH_DEVICE, 32, 1024, 512, GR_NEEDS_CUDA | GR_NEEDS_POW2_BLOCK},
    {"unroll8", 8, "reduceUnrolling8 / Reduce v3: add during load, 8 tiles per block",
     "each thread combines 8 elements while loading, then the interleaved tree in shared memory",
     DEVICE_FINISHES | F(SINGLE), GR_FINISH_DEVICE, 32, 1024, 512, GR_NEEDS_CUDA | GR_NEEDS_POW2_BLOCK},
    {"unroll_warps8", 9, "reduceUnrollWarps8 / Reduce v4: unroll 8 + the last warp unrolled",
     "unroll 8, tree down to 64 values, last warp unrolled without __syncthreads (volatile + __syncwarp)",
     DEVICE_FINISHES | F(SINGLE), GR_FINISH_DEVICE, 64, 1024, 512, GR_NEEDS_CUDA | GR_NEEDS_POW2_BLOCK},
    {"complete_unroll8", 10, "reduceCompleteUnrollWarps8 / Reduce v5: the whole tree unrolled",
     "unroll 8, every tree step written out behind a run-time blockDim.x test, last warp unrolled",
     DEVICE_FINISHES | F(SINGLE), GR_FINISH_DEVICE, 64, 1024, 512, GR_NEEDS_CUDA | GR_NEEDS_POW2_BLOCK},
    {"template_unroll8", 11, "reduceCompleteUnroll<iBlockSize>: the unrolled tree, block size a template",
     "unroll 8, the unrolled tree with the block size a template parameter dispatched at run time",
     DEVICE_FINISHES | F(SINGLE), GR_FINISH_DEVICE, 64, 1024, 512, GR_NEEDS_CUDA | GR_NEEDS_POW2_BLOCK},
    {"warp_shuffle", 12, "v7 shuffle: the optimised tutorial kernel (grid-stride loads, __shfl_down_sync)",
     "grid-stride 16-byte loads, several per thread in flight, shuffles in warps, shared memory across warps",
     DEVICE_FINISHES | F(SINGLE), GR_FINISH_DEVICE, 32, 1024, 256, GR_NEEDS_CUDA | GR_NEEDS_POW2_BLOCK},
    {"grid_stride_atomic", 13, "deviceReduceBlockAtomicKernel: grid-stride loop + one atomicAdd per block",
     "v12's loads and block reduce, then one atomic per block into one value; float sums not repeatable",
     F(SINGLE), GR_FINISH_SINGLE, 32, 1024, 256, GR_NEEDS_CUDA | GR_NEEDS_POW2_BLOCK},
    {"pipelined", 14, "v12 with its loads copied ahead into a shared-memory ring (cp.async, 3 stages)",
     "v12's kernel; each thread's loads go through its own cp.async ring, so they stay in flight while it folds",
     DEVICE_FINISHES | F(SINGLE), GR_FINISH_DEVICE, 32, 1024, 256, GR_NEEDS_CUDA | GR_NEEDS_POW2_BLOCK},
    {"cub", 15, "NVIDIA CUB cub::DeviceReduce (the yardstick)",
     "DeviceReduce::Sum for float sums in the input's own type, else TransformReduce with our functors",
     F(SINGLE), GR_FINISH_SINGLE, 1, 1, 1, GR_NEEDS_CUDA},
    {"thrust", 16, "thrust::reduce / thrust::transform_reduce with thrust::cuda::par.on(stream)",
     "one Thrust call with our functors, as application code would write it; synchronous, allocates temp",
     F(SINGLE), GR_FINISH_SINGLE, 1, 1, 1, GR_NEEDS_CUDA},
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
 * data is reduced where it already is). 1-byte types take pipelined: their folds are dear enough (an
 * int8 product: about 40 instructions per 16 bytes) that warp_shuffle's loads stall behind them: 75-95%
 * of the read kernel at 2^28 against pipelined's 94-96% (experiments/tuning/pipelined_probe.lua, H200).
 * Wider types fold cheaply: there the two are level at 2^28 and warp_shuffle is ahead below 2^24. */
int gr_variant_auto(const gr_context *ctx, const gr_buffer *b, gr_op op) {
    (void)op;
    if (ctx->backend == GR_BACKEND_CUDA && gr_buffer_where(b) == GR_DEVICE)
        return gr_variant_find(gr_dtype_size(b->dtype) == 1 ? "pipelined" : "warp_shuffle");
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
