/*
 * launch.h -- the contract between the engine and a kernel variant: all a file under cuda/ sees of the
 * engine (with gr.h for the dtype and op names).
 *
 * A kernel variant (cuda/vNN_name.cu) defines one `gr_kernel` named gr_kernel_<name>: its launcher,
 * the grid it wants for n inputs, and the scratch it needs. The registry (engine/core/registry.c) names
 * that symbol in the variant's row; a CPU-only build has no such symbols and the rows say so.
 *
 * Every launch names what it reads with an input descriptor (gr_inputs): a list of inputs, each with
 * its address, dtype, shape and strides in elements. Today every launch has one contiguous 1-D input,
 * and every kernel takes only that (gr_inputs_contiguous): a kernel reads the first input's address once,
 * on the host, and keeps its contiguous loads. A reduction of two inputs (dot) or along an axis adds the
 * kernels that read more of the descriptor, and the planner sends such inputs only to them.
 */
#ifndef GR_LAUNCH_H
#define GR_LAUNCH_H

#include "gr.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The catalogue's kernels, in no particular order: variant <name> is `const gr_kernel gr_kernel_<name>`
 * (registry.c's rows name the one each runs). The engine refers to them weakly, as it does to
 * gr_segmented and gr_exact_gpu below, so that a CPU-only build links without them; cuda/runtime/runtime.cu
 * refers to every one strongly, so that a static link of libgpureduce.a takes them all. */
#define GR_CATALOGUE_KERNELS(X)                                                                             \
    X(neighbored) X(neighbored_less) X(interleaved) X(atomic_shared) X(unroll2) X(unroll4) X(unroll8)      \
    X(unroll_warps8) X(complete_unroll8) X(template_unroll8) X(warp_shuffle) X(grid_stride_atomic)         \
    X(pipelined) X(cub) X(thrust)

/* ---- inputs ------------------------------------------------------------------------------------------ */

#define GR_MAX_INPUTS 8
#define GR_MAX_DIMS 8

/* One input: its elements at `data`, of `dtype`; element (i0, ..., i[ndim-1]) is at data + sum of
 * i[d] * strides[d] elements, 0 <= i[d] < shape[d]. */
typedef struct gr_input {
    const void *data;
    gr_dtype dtype;
    int ndim;
    int64_t shape[GR_MAX_DIMS];
    int64_t strides[GR_MAX_DIMS];
} gr_input;

/* The inputs of a launch, in order (at[0] the reduced elements; a second for a two-input reduction). */
typedef struct gr_inputs {
    int count;
    gr_input at[GR_MAX_INPUTS];
} gr_inputs;

/* in as one contiguous 1-D input: n elements of dtype t at data. Sets only the fields such an input
 * uses: the engine fills one per launch, and the rest of the descriptor's kilobyte is never cleared. */
static inline void gr_inputs_one(gr_inputs *in, const void *data, gr_dtype t, size_t n) {
    in->count = 1;
    in->at[0].data = data;
    in->at[0].dtype = t;
    in->at[0].ndim = 1;
    in->at[0].shape[0] = (int64_t)n;
    in->at[0].strides[0] = 1;
}

/* Whether in is one contiguous 1-D input: what every kernel of today takes (its launcher refuses any
 * other descriptor with an invalid value, before it reads the address). */
static inline int gr_inputs_contiguous(const gr_inputs *in) {
    return in->count == 1 && in->at[0].ndim == 1 && in->at[0].strides[0] == 1;
}

/* ---- one pass of a variant ----------------------------------------------------------------------------- */

/* One pass of a variant: n inputs of in_dtype -> `grid` partials of the accumulator in `out`. When
 * `final_out` is set the pass finishes in the same kernel (finish "single"): the device epilogue of the
 * last block combines the partials and writes one accumulator value to final_out, leaving *counter
 * zero. */
typedef struct gr_launch {
    const gr_inputs *in;    /* what the pass reads: at[0] the elements, or the accumulators of a pass over
                             * partials (then of dtype acc) */
    size_t n;               /* the elements (or accumulators) the pass reduces */
    gr_dtype in_dtype;      /* the reduction's input dtype (also in a pass over partials) */
    int partials_in;        /* 1: `in` holds accumulators of the op (a pass over partials), not elements */
    uint64_t first;         /* the index of in[0] among the reduction's elements (argmin, argmax) */
    gr_op op;
    gr_dtype acc;
    void *out;
    size_t grid;
    int block;
    void *stream;
    unsigned *counter;
    void *final_out;
    void *scratch;          /* device scratch for variants that ask for it (CUB's temporary storage) */
    size_t smem;            /* a user operator's pass: dynamic shared memory (exec.c sets it from gr_kernel.smem) */
    size_t scratch_bytes;
    const char *site;       /* set by a launcher whose launch failed: "file:line" of the launch */
} gr_launch;

/* ---- segmented reductions (cuda/kernels/segmented.cu) ----------------------------------------------------- */

/* One run of a segmented reduction's input in the `items` form: a pointer and a length (reduce_many). */
typedef struct gr_seg_item {
    const void *ptr;
    uint64_t n;
} gr_seg_item;

/* Every segment of one input, reduced and its result(s) written: segment s is elements
 * [s * size, (s + 1) * size) of `in` (size > 0), or [offsets[s], offsets[s + 1]) (offsets set), or the
 * items[s] run (items set; then in->at[0].data is NULL). `group` lanes share a segment (1..32, a power
 * of two), or, with group 0, blocks do: `splits` of them per segment, their partial accumulators in
 * `partials` and a counter per segment in `counters` (zero before, left zero after) when splits > 1. */
typedef struct gr_seg_launch {
    const gr_inputs *in;
    gr_dtype in_dtype, acc;
    gr_op op;
    int ddof;
    size_t k;
    size_t size;
    size_t pitch;           /* with size: segment s starts at s * pitch (0: at s * size) -- rows of a view */
    const int64_t *offsets;
    const gr_seg_item *items;
    void *out[2];
    int group, block, splits;
    size_t grid;
    void *partials;
    unsigned *counters;
    void *stream;
    const char *site;
} gr_seg_launch;

typedef struct gr_seg_kernel {
    int (*launch)(gr_seg_launch *L);
    /* checks k + 1 CSR boundaries on the device: leaves *bad at 2^64 - 1 when none is negative, none
     * decreases and none passes n; otherwise 1 + the index of the first boundary at fault. In the same
     * pass *longest (device memory: every block raises it) gets the longest segment, the largest
     * offsets[s + 1] - offsets[s] (0 for k == 0; meaningful only when no boundary is at fault) */
    int (*check_offsets)(const int64_t *offsets, size_t k, size_t n, unsigned long long *bad,
                         unsigned long long *longest, void *stream);
} gr_seg_kernel;

/* ---- reductions along an outer axis (cuda/kernels/columns.cu) ----------------------------------------- */

/* The input as A x R x C: element (a, r, c) at in + a * sa + r * sr + c * sc elements; output (a, c)
 * reduces its column's R elements, written as element a * oa + c * oc of out[0] (and out[1]) in the
 * dtypes of a segmented reduction's results. `pack` columns a thread (1; 16 bytes of them, 8 for 1-byte
 * types, or C when a vector holds several rows, with sc == 1 -- the kernel makes a row of two vectors one
 * pack where it stages it; 0: one column with sr == 1, read along it: see cuda/device/columns.cuh); the
 * kernel lays its blocks out from R, C and pack. Passes after the first reduce the groups' accumulators in
 * `scratch` (gr_columns_scratch bytes), at most `grid` blocks each. */
typedef struct gr_col_launch {
    const void *in;
    gr_dtype in_dtype, acc;
    gr_op op;
    int ddof;
    size_t A, R, C;
    int64_t sa, sr, sc;
    void *out[2];
    int64_t oa, oc;
    int pack;
    size_t grid;
    void *scratch;
    void *stream;
    const char *site;
} gr_col_launch;

typedef struct gr_col_kernel {
    int (*launch)(gr_col_launch *L);
} gr_col_kernel;

/* The rows one pass of the column kernel folds into one value per column (its R shrinks by this much). */
#define GR_COLUMN_GROUP_ROWS 512

/* ---- the exact sums of opts.determinism = "gpu_to_gpu" (cuda/kernels/exact.cu) ------------------------------ */

/* A launch of the exact kernels over n elements of in_dtype (float32 or float64) for op. The whole-buffer
 * kernel adds every block's exact sums into `sums`, a device gr_xsum (engine/ops/exact_acc.h) zeroed before,
 * in `grid` blocks of `block` threads (at most 2^30 elements per block per launch: the caller splits
 * longer inputs). The segmented kernel reduces k segments -- [s * size, (s + 1) * size), or
 * [offsets[s], offsets[s + 1]) -- and writes each one's result, rounded on the device, as element s of
 * `out` (out_dtype, float32 or float64, which says where the result is rounded to). */
typedef struct gr_exact_launch {
    const gr_inputs *in;
    size_t n;
    gr_dtype in_dtype;
    gr_op op;
    void *sums;
    size_t grid;
    int block;
    void *stream;
    size_t k, size;
    const int64_t *offsets;
    void *out;
    gr_dtype out_dtype;
    int ddof;
    size_t round;           /* segments: the elements a block folds between two carry steps of its words */
    const char *site;
} gr_exact_launch;

typedef struct gr_exact_kernel {
    int (*launch)(gr_exact_launch *L);
    int (*segments)(gr_exact_launch *L);
} gr_exact_kernel;

/* ---- the steps of a reduction by key (cuda/kernels/by_key.cu) ------------------------------------------ */

/* One pass over n keys whose equal words are consecutive and n values (cuda/device/runs.cuh): the key word
 * of each run, at its rank, in keys_out (unless NULL), and op's result over the run's values in out[0] (and out[1]), as a
 * segment's result. `scratch` is gr_runs_scratch_bytes(n, acc_bytes) bytes, 8-byte aligned, that start with
 * the pass's answer (gr_runs_header: the number of runs, and disorder != 0 where a run's key is below the
 * one before, the words' order made the keys' by flip, the signed dtypes' sign bit); the launcher clears
 * that header and the look-back words after it in one memset, so the caller copies the header back
 * and needs nothing else of the scratch. acc_bytes is the op's accumulator's size, a multiple of 8. Not for the
 * ops that want an element's index (argmin, argmax). `aligned`: keys and values start on 16 bytes.
 * `items`: elements a thread, 8 or 16 (tiles of 256 threads); GR_RUN_TILE is the smaller tile. */
#define GR_RUN_TILE 2048
typedef struct gr_runs_header {
    unsigned long long runs;
    unsigned disorder, pad;
} gr_runs_header;
typedef struct gr_runs_launch {
    const void *keys;
    int kbytes;
    unsigned long long flip;
    const void *values;
    gr_dtype in_dtype, acc;
    gr_op op;
    int ddof;
    size_t n;
    int aligned;
    int items;
    void *keys_out;
    void *out[2];
    size_t capacity;        /* keys_out and out hold this many; runs of a rank at or past it are not written */
    void *scratch;
    size_t acc_bytes;
    void *stream;
    const char *site;
} gr_runs_launch;

/* The scratch of a pass over runs: the header, the tiles' look-back words (one more: the tile counter),
 * then three int64 and two accumulators per tile. */
static inline size_t gr_runs_scratch_bytes(size_t n, size_t acc_bytes) {
    size_t tiles = (n + GR_RUN_TILE - 1) / GR_RUN_TILE;
    return sizeof(gr_runs_header) + (tiles + 1) * 8 + tiles * (3 * 8 + 2 * acc_bytes);
}

/* Keys travel as ordered words: unsigned words of the key's width (1, 2, 4 or 8 bytes) whose unsigned order
 * is the key's (signed dtypes: the sign bit flipped). Each step queues on `stream` and returns 0 or a CUDA
 * error code; the CUB steps with temp NULL only set *temp_bytes. */
typedef struct gr_by_key_kernel {
    /* to[i] = from[i]'s ordered word less base (n keys of dtype t), or with back the key of word from[i] + base */
    int (*order_bits)(const void *from, void *to, size_t n, gr_dtype t, unsigned long long base, int back,
                      void *stream);
    int (*iota)(unsigned *idx, size_t n, void *stream);                     /* idx[i] = i */
    /* a stable radix sort of n (key word of kbytes, value word of vbytes) pairs by the words' low `bits` bits
     * (0: all of them) */
    int (*sort_pairs)(void *temp, size_t *temp_bytes, const void *keys_in, void *keys_out, const void *vals_in,
                      void *vals_out, size_t n, int kbytes, int vbytes, int bits, void *stream);
    /* the runs of equal words among n (n < 2^31): one word each, their lengths, their count at *nruns */
    int (*runs)(void *temp, size_t *temp_bytes, const void *keys, void *unique, unsigned *counts,
                unsigned long long *nruns, size_t n, int kbytes, void *stream);
    /* offsets[0..k] (int64) of k run lengths: their exclusive sum, offsets[k] = n */
    int (*offsets)(void *temp, size_t *temp_bytes, const unsigned *counts, long long *offsets, size_t k, size_t n,
                   void *stream);
    /* out[i] = in[perm[i]], elements of ebytes */
    int (*gather)(const void *in, const unsigned *perm, void *out, size_t n, int ebytes, void *stream);
    /* *flag |= 1 where words[0..k) are not strictly ascending */
    int (*ascending)(const void *words, size_t k, int kbytes, unsigned *flag, void *stream);
    /* idx[s] (1-based within run s) -> the 1-based position in the input: perm[offsets[s] + idx - 1] + 1, or
     * without perm offsets[s] + idx */
    int (*global_index)(long long *idx, const long long *offsets, const unsigned *perm, size_t k, void *stream);
    /* *out = the largest of k run lengths */
    int (*longest)(const unsigned *counts, size_t k, unsigned *out, void *stream);
    /* one pass over grouped keys and their values (cuda/device/runs.cuh): each run's key word and result */
    int (*reduce_runs)(gr_runs_launch *L);
} gr_by_key_kernel;

/* What the planner tells a grid function about the device. */
typedef struct gr_launch_device {
    int sms;
    int max_threads_per_sm;
} gr_launch_device;

/* ---- dot products (cuda/kernels/dot.cu) ------------------------------------------------------------- */

/* The first pass of gr.dot: `in` holds two contiguous 1-D inputs of in_dtype, n elements each; their
 * products, summed in the sum's accumulator `acc`, become `grid` partials of the sum at `out` (or, with
 * final_out set, the sum's single finish). op is GR_SUM; the passes after it, and the grid of this one
 * (any grid and block of whole warps up to 1024), are the sum's. */
typedef struct gr_dot_kernel {
    int (*launch)(gr_launch *L);
    /* A dot product per segment: L->in holds both inputs (the segments of the second at the same
     * offsets as the first's), op GR_SUM, each result the sum's accumulator written as element s of
     * out[0]; shaped as the segmented kernel's launch is (group, block, splits, grid). */
    int (*segments)(gr_seg_launch *L);
} gr_dot_kernel;

typedef struct gr_kernel {
    /* queues the pass; returns a CUDA error code, 0 = success (and sets L->site on failure) */
    int (*launch)(gr_launch *L);
    /* blocks of a pass over n elements of elem_bytes each at `block` threads; 0 when n == 0 */
    size_t (*grid)(size_t n, int block, size_t elem_bytes, const gr_launch_device *dev);
    /* device scratch one pass needs, bytes (NULL: none) */
    size_t (*scratch)(size_t n, gr_dtype in, gr_op op, gr_dtype acc);
    /* dynamic shared memory a pass over elements takes at `block` threads, for a user operator's kernel
     * of this variant's shape (NULL: none) */
    size_t (*smem)(int block);
} gr_kernel;

#ifdef __cplusplus
}
#endif
#endif
