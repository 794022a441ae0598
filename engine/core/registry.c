/*
 * registry.c -- the variant registry: the single source of truth for what gpureduce can run.
 *
 * gr.variants(), the specs, the sweep and the README's table are generated from these rows. Each kernel
 * variant has three names (as in llm.c): its kernel and its gr_kernel in cuda/vNN_name.cu, and its row
 * here, which names that gr_kernel. The kernels are weak references: a CPU-only build has none, and
 * the rows that need them report that a CUDA device is needed. A variant's finishing modes come from
 * its shape through the finish table (finish.c).
 *
 * User kernels (gr.kernel, kernel.c) add rows after the catalogue's, for the life of the process: index
 * NVARIANTS + k is the k-th registered. They are never changed or removed, so an index, a plan or a
 * pointer to a row stays valid; a reader sees a row once user_count says it is there.
 */
#include "core/registry.h"
#include "base/error.h"
#include "ops/cpu_backend.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DECLARE(name) extern const gr_kernel gr_kernel_##name __attribute__((weak));
GR_CATALOGUE_KERNELS(DECLARE)
#undef DECLARE

static gr_status host_cpu(gr_context *ctx, const void *p, size_t n, uint64_t first, gr_dtype t, gr_op op,
                          gr_dtype acc, void *acc_out) {
    return gr_cpu_reduce(ctx, p, n, first, t, op, acc, 0, acc_out);
}

static gr_status host_cpu_pairwise(gr_context *ctx, const void *p, size_t n, uint64_t first, gr_dtype t, gr_op op,
                                   gr_dtype acc, void *acc_out) {
    return gr_cpu_reduce(ctx, p, n, first, t, op, acc, 1, acc_out);
}

/* the last fields of a catalogue row: its kernel or host function; every finish of its shape; no user
 * kernel; the dtypes it takes (a host function takes every dtype). A kernel takes the small floats
 * (float16, bfloat16: a 2-byte struct on the device, cuda/device/small_float.cuh) unless its shape
 * cannot: atomics on a 2-byte value (atomic_shared, grid_stride_atomic), the textbook's volatile last
 * warp (unroll_warps8, complete_unroll8, template_unroll8), pipelined's path for 1-byte types, and CUB
 * and Thrust, whose calls with these element types have not been built and run yet. */
#define DEVICE(name, dtypes) &gr_kernel_##name, NULL, 0, NULL, dtypes
#define HOST(fn) NULL, fn, 0, NULL, GR_DTYPES_ALL
#define ALL GR_DTYPES_ALL
#define ARITH GR_DTYPES_ARITHMETIC
#define CLASSIC (GR_SHAPE_PARTIALS | GR_SHAPE_EPILOGUE)
#define GPU_POW2 (GR_NEEDS_CUDA | GR_NEEDS_POW2_BLOCK)

/* Determinism (gr.h): the atomic variants' float results depend on the order in which atomics land;
 * every other variant combines in an order fixed by n and the launch shape (the single-pass finish
 * combines the partials in block order, whichever block came last). */
#define RUN_TO_RUN GR_DET_RUN_TO_RUN
#define NOT_GUARANTEED GR_DET_NOT_GUARANTEED

static const gr_variant_row rows[] = {
    {"cpu", 0, "the host backend (typed loops on every core)",
     "threaded host reduction: subtrees of numpy's pairwise order per core, in the accumulator type",
     GR_SHAPE_HOST, GR_FINISH_HOST, 1, 1, 1, 0, GR_OPS_ALL, RUN_TO_RUN, HOST(host_cpu)},
    {"cpu_pairwise", 1, "recursiveReduce: the textbook's recursive interleaved-pair host reduction",
     "host reduction by interleaved pairs with halving strides, recursively, in the accumulator type",
     GR_SHAPE_HOST, GR_FINISH_HOST, 1, 1, 1, 0, GR_OPS_ALL, RUN_TO_RUN, HOST(host_cpu_pairwise)},
    {"neighbored", 2, "reduceNeighbored / Reduce v0: neighbored pairs picked by tid % (2 * stride)",
     "one element per thread into shared memory; neighbored-pair tree picked by tid % (2 * stride)",
     CLASSIC, GR_FINISH_DEVICE, 32, 1024, 512, GPU_POW2, GR_OPS_CLASSIC, RUN_TO_RUN, DEVICE(neighbored, ALL)},
    {"neighbored_less", 3, "reduceNeighboredLess / Reduce v1: index = 2 * stride * tid (bank conflicts)",
     "neighbored-pair tree with the pair remapped to 2 * stride * tid: whole warps idle, banks conflict",
     CLASSIC, GR_FINISH_DEVICE, 32, 1024, 512, GPU_POW2, GR_OPS_CLASSIC, RUN_TO_RUN, DEVICE(neighbored_less, ALL)},
    {"interleaved", 4, "reduceInterleaved / Reduce v2: stride halving from blockDim / 2",
     "interleaved-pair tree, tid < stride with the stride halving: no divergence, no bank conflicts",
     CLASSIC, GR_FINISH_DEVICE, 32, 1024, 512, GPU_POW2, GR_OPS_CLASSIC, RUN_TO_RUN, DEVICE(interleaved, ALL)},
    {"atomic_shared", 5, "the naive shared-memory atomic reduction (atomicAdd to one __shared__ sum)",
     "every thread atomically combines its element into one shared slot; float sums not repeatable",
     CLASSIC, GR_FINISH_DEVICE, 32, 1024, 512, GPU_POW2, GR_OPS_CLASSIC, NOT_GUARANTEED, DEVICE(atomic_shared, ARITH)},
    {"unroll2", 6, "reduceUnrolling2 / Reduce v3: add during load, 2 tiles per block",
     "each thread combines 2 elements while loading, then the interleaved tree in shared memory",
     CLASSIC, GR_FINISH_DEVICE, 32, 1024, 512, GPU_POW2, GR_OPS_CLASSIC, RUN_TO_RUN, DEVICE(unroll2, ALL)},
    {"unroll4", 7, "reduceUnrolling4 / Reduce v3: add during load, 4 tiles per block",
     "each thread combines 4 elements while loading, then the interleaved tree in shared memory",
     CLASSIC, GR_FINISH_DEVICE, 32, 1024, 512, GPU_POW2, GR_OPS_CLASSIC, RUN_TO_RUN, DEVICE(unroll4, ALL)},
    {"unroll8", 8, "reduceUnrolling8 / Reduce v3: add during load, 8 tiles per block",
     "each thread combines 8 elements while loading, then the interleaved tree in shared memory",
     CLASSIC, GR_FINISH_DEVICE, 32, 1024, 512, GPU_POW2, GR_OPS_CLASSIC, RUN_TO_RUN, DEVICE(unroll8, ALL)},
    {"unroll_warps8", 9, "reduceUnrollWarps8 / Reduce v4: unroll 8 + the last warp unrolled",
     "unroll 8, tree down to 64 values, last warp unrolled without __syncthreads (volatile + __syncwarp)",
     CLASSIC, GR_FINISH_DEVICE, 64, 1024, 512, GPU_POW2, GR_OPS_CLASSIC, RUN_TO_RUN, DEVICE(unroll_warps8, ARITH)},
    {"complete_unroll8", 10, "reduceCompleteUnrollWarps8 / Reduce v5: the whole tree unrolled",
     "unroll 8, every tree step written out behind a run-time blockDim.x test, last warp unrolled",
     CLASSIC, GR_FINISH_DEVICE, 64, 1024, 512, GPU_POW2, GR_OPS_CLASSIC, RUN_TO_RUN, DEVICE(complete_unroll8, ARITH)},
    {"template_unroll8", 11, "reduceCompleteUnroll<iBlockSize>: the unrolled tree, block size a template",
     "unroll 8, the unrolled tree with the block size a template parameter dispatched at run time",
     CLASSIC, GR_FINISH_DEVICE, 64, 1024, 512, GPU_POW2, GR_OPS_CLASSIC, RUN_TO_RUN, DEVICE(template_unroll8, ARITH)},
    {"warp_shuffle", 12, "v7 shuffle: the optimised tutorial kernel (grid-stride loads, __shfl_down_sync)",
     "grid-stride 16-byte loads, several per thread in flight, shuffles in warps, shared memory across warps",
     CLASSIC, GR_FINISH_DEVICE, 32, 1024, 256, GPU_POW2, GR_OPS_ALL, RUN_TO_RUN, DEVICE(warp_shuffle, ALL)},
    {"grid_stride_atomic", 13, "deviceReduceBlockAtomicKernel: grid-stride loop + one atomicAdd per block",
     "v12's loads and block reduce, then one atomic per block into one value; float sums not repeatable",
     GR_SHAPE_ONE_VALUE, GR_FINISH_SINGLE, 32, 1024, 256, GPU_POW2, GR_OPS_CLASSIC, NOT_GUARANTEED, DEVICE(grid_stride_atomic, ARITH)},
    {"pipelined", 14, "v12 with its loads copied ahead into a shared-memory ring (cp.async, 3 stages)",
     "v12's kernel; each thread's loads go through its own cp.async ring, so they stay in flight while it folds",
     CLASSIC, GR_FINISH_DEVICE, 32, 1024, 256, GPU_POW2, GR_OPS_PIPELINED, RUN_TO_RUN, DEVICE(pipelined, GR_DTYPES_PIPELINED)},
    {"cub", 15, "NVIDIA CUB cub::DeviceReduce (the yardstick)",
     "DeviceReduce::Sum for float sums in the input's own type, else TransformReduce with our functors",
     GR_SHAPE_ONE_VALUE, GR_FINISH_SINGLE, 1, 1, 1, GR_NEEDS_CUDA, GR_OPS_CLASSIC, RUN_TO_RUN, DEVICE(cub, ARITH)},
    {"thrust", 16, "thrust::reduce / thrust::transform_reduce with thrust::cuda::par.on(stream)",
     "one Thrust call with our functors, as application code would write it; synchronous, allocates temp",
     GR_SHAPE_ONE_VALUE, GR_FINISH_SINGLE, 1, 1, 1, GR_NEEDS_CUDA, GR_OPS_CLASSIC, RUN_TO_RUN, DEVICE(thrust, ARITH)},
};

#define NVARIANTS ((int)(sizeof rows / sizeof rows[0]))

/* The public view of a row (gr.h's gr_variant), with the finishing modes derived. */
static gr_variant view_of(const gr_variant_row *r) {
    return (gr_variant){r->name, r->ordinal, r->origin, r->summary, r->finishes ? r->finishes : gr_finishes_of(r->shape),
                        r->default_finish, r->block_min, r->block_max, r->block_default, r->needs, r->ops,
                        r->determinism, r->user != NULL, r->dtypes};
}

static gr_variant views[NVARIANTS];
static pthread_once_t views_once = PTHREAD_ONCE_INIT;

static void make_views(void) {
    for (int i = 0; i < NVARIANTS; i++) views[i] = view_of(&rows[i]);
}

/* The user kernels' rows and views; user_count is raised (release) after a row is written whole. */
static gr_variant_row user_rows[GR_MAX_USER_VARIANTS];
static gr_variant user_views[GR_MAX_USER_VARIANTS];
static int user_count;
static pthread_mutex_t user_lock = PTHREAD_MUTEX_INITIALIZER;

static int users(void) { return __atomic_load_n(&user_count, __ATOMIC_ACQUIRE); }

int gr_variant_count(void) { return NVARIANTS + users(); }

const gr_variant *gr_variant_get(int i) {
    pthread_once(&views_once, make_views);
    if (i >= 0 && i < NVARIANTS) return &views[i];
    return i >= NVARIANTS && i < NVARIANTS + users() ? &user_views[i - NVARIANTS] : NULL;
}

const gr_variant_row *gr_variant_row_get(int i) {
    if (i >= 0 && i < NVARIANTS) return &rows[i];
    return i >= NVARIANTS && i < NVARIANTS + users() ? &user_rows[i - NVARIANTS] : NULL;
}

int gr_variant_find(const char *name) {
    for (int i = 0, count = gr_variant_count(); i < count; i++)
        if (strcmp(gr_variant_row_get(i)->name, name) == 0) return i;
    return -1;
}

gr_status gr_registry_add(gr_context *ctx, const gr_variant_row *row, int *index) {
    pthread_mutex_lock(&user_lock);
    gr_status st = GR_OK;
    int at = gr_variant_find(row->name);
    if (at >= 0 || strcmp(row->name, "auto") == 0)
        st = gr_fail_arg(ctx, GR_EINVAL, "name", "'%s' is %s (a user kernel needs a name of its own)", row->name,
                         at < 0 ? "what opts.variant calls the automatic choice" :
                         at < NVARIANTS ? "a catalogue variant" : "a user kernel already");
    else if (user_count == GR_MAX_USER_VARIANTS)
        st = gr_fail_arg(ctx, GR_EINVAL, "name", "the registry holds %d user kernels, its most: '%s' is one too "
                         "many for this process", GR_MAX_USER_VARIANTS, row->name);
    if (st == GR_OK) {
        user_rows[user_count] = *row;
        user_rows[user_count].ordinal = 100 + user_count;     /* after any the catalogue may take */
        user_views[user_count] = view_of(&user_rows[user_count]);
        *index = NVARIANTS + user_count;
        __atomic_store_n(&user_count, user_count + 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&user_lock);
    return st;
}

/* "auto, cpu, ..., <user kernels>": one text per count of user kernels, kept for the process (a caller
 * may hold the one it got while another thread registers a kernel), given back when the module goes. */
static char *names_texts[GR_MAX_USER_VARIANTS + 1];

__attribute__((destructor)) static void forget_names(void) {
    for (int i = 0; i <= GR_MAX_USER_VARIANTS; i++) free(names_texts[i]);
}

const char *gr_variant_names(void) {
    char **texts = names_texts;
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    int count = gr_variant_count();
    pthread_mutex_lock(&lock);
    char *text = texts[count - NVARIANTS];
    if (!text) {
        size_t len = 8;
        for (int i = 0; i < count; i++) len += strlen(gr_variant_row_get(i)->name) + 2;
        if ((text = malloc(len)) != NULL) {
            size_t used = (size_t)snprintf(text, len, "auto");
            for (int i = 0; i < count; i++)
                used += (size_t)snprintf(text + used, len - used, ", %s", gr_variant_row_get(i)->name);
            texts[count - NVARIANTS] = text;
        }
    }
    pthread_mutex_unlock(&lock);
    return text ? text : "auto, ... (out of host memory)";
}

const char *const gr_determinism_names[GR_DET_COUNT + 1] = {"not_guaranteed", "run_to_run", "gpu_to_gpu", NULL};

const char *gr_determinism_name(gr_determinism d) {
    return (unsigned)d < GR_DET_COUNT ? gr_determinism_names[d] : "?";
}

gr_status gr_check_determinism(gr_context *ctx, const gr_variant *v, int asked) {
    /* gpu_to_gpu is no variant's: the planner hands it to the exact kernel (exact_pass.c) first */
    if (asked < 0 || asked == GR_DET_NOT_GUARANTEED || asked == GR_DET_GPU_TO_GPU) return GR_OK;
    if (v && (int)v->determinism < asked)
        return gr_fail_arg(ctx, GR_EINVAL, "determinism", "variant '%s' gives %s (its float results depend on the "
                           "order in which atomics land), not %s: ask it for not_guaranteed, or take another "
                           "variant", v->name, gr_determinism_name(v->determinism),
                           gr_determinism_name((gr_determinism)asked));
    return GR_OK;
}
