/*
 * policy.c -- what "auto" means, with the measurement behind each choice.
 *
 * Every automatic choice of the engine is made here, as CUB keeps one tuning policy per architecture;
 * the planner, the streamed path and the host staging ask this file rather than deciding themselves.
 * The probes named below are in the repository; their figures are in docs/performance.md.
 */
#include "core/policy.h"
#include "core/registry.h"

/* auto on the cuda backend, device data: 1-byte types take pipelined, whose folds are dear enough (an
 * int8 product: about 40 instructions per 16 bytes) that warp_shuffle's loads stall behind them: 75-95%
 * of the read kernel at 2^28 against pipelined's 94-96% (experiments/tuning/pipelined_probe.lua, H200).
 * Wider types fold cheaply: there the two are level at 2^28 and warp_shuffle is ahead below 2^24.
 * Pinned host data, and everything on the cpu backend, is reduced where it is, by the host backend. */
int gr_policy_variant(const gr_context *ctx, gr_where where, gr_dtype t, gr_op op, size_t n) {
    (void)n;
    static int cpu = -1;
    if (ctx->base.backend == GR_BACKEND_CUDA && where == GR_DEVICE) return gr_policy_streamed_variant(t, op);
    return gr_catalogue_index("cpu", &cpu);
}

/* Each chunk of streamed data is device memory reduced in one kernel: the same choice as above. An op
 * or a dtype that pipelined does not take (GR_OPS_PIPELINED; its row's dtypes, GR_DTYPES_PIPELINED)
 * runs on warp_shuffle, which takes every op and every dtype. bool is a byte of 0 or 1, which pipelined
 * takes as uint8; the FP8 formats take it since their folds went word-at-a-time (small_float_fold.cuh):
 * on an H200 warp_shuffle held them at 81-91% of the read kernel at 2^28. */
int gr_policy_streamed_variant(gr_dtype t, gr_op op) {
    static int pipelined = -1, warp_shuffle = -1;
    int p = gr_catalogue_index("pipelined", &pipelined);
    int bytes = gr_dtype_size(t) == 1 && (GR_OPS_PIPELINED & GR_OP_BIT(op)) &&
                (gr_variant_row_get(p)->dtypes & GR_DTYPE_BIT(t));
    return bytes ? p : gr_catalogue_index("warp_shuffle", &warp_shuffle);
}

/* A user operator's generated kernels (engine/user/operator_source.c) take the shape auto gives the
 * built-in sum (pipelined's for the 1-byte dtypes, warp_shuffle's for the others), so an operator equal
 * to sum adds in the same order. */
int gr_policy_operator_variant(gr_dtype t) { return gr_policy_streamed_variant(t, GR_SUM); }

/* auto on a buffer of 64 MiB or more: 1024-thread blocks (two per SM) measured best or level for every
 * dtype at 2^28 on an H200, and 4-6% better for 1-byte types, whose 256 MiB leave fixed costs more
 * weight (experiments/tuning/byte_finish_probe.lua); smaller buffers keep the variant's default. */
#define AUTO_LARGE_BYTES ((size_t)64 << 20)

int gr_policy_block(const gr_variant *v, int requested, int auto_variant, size_t bytes) {
    if (requested) return requested;
    if (auto_variant && (v->needs & GR_NEEDS_CUDA) && v->block_max >= 1024 && bytes >= AUTO_LARGE_BYTES)
        return 1024;
    return v->block_default;
}

/* auto takes the single-pass finish where the variant has it: one launch, the value written straight to
 * pinned memory -- fastest at every size (experiments/tuning/tune.cu); a named variant keeps its own. */
gr_finish gr_policy_finish(const gr_variant *v, gr_finish requested, int auto_variant) {
    if (requested != GR_FINISH_AUTO) return requested;
    if (auto_variant && (v->finishes & (1u << GR_FINISH_SINGLE))) return GR_FINISH_SINGLE;
    return v->default_finish;
}

/* hybrid: CPU-finishing up to 4K partials saves 3-6 us against another device pass, while 8K-20K
 * partials cost 13-34 us more (wall time of whole calls, experiments/multipass.lua, H200). */
#define HYBRID_THRESHOLD 4096

size_t gr_policy_hybrid_threshold(size_t requested) { return requested ? requested : HYBRID_THRESHOLD; }

/* Host variants over device memory: 64 MiB pieces through pinned memory, large enough that the copy
 * runs at full speed, small enough not to hold much pinned memory. */
size_t gr_policy_stage_bytes(void) { return (size_t)64 << 20; }

/* Segments: as many lanes as a segment has 16-byte vectors, up to a warp -- one thread for up to 16
 * bytes, 2 to 32 lanes for up to 512, a warp for up to 8 KiB -- then a block per segment, sized so that
 * the segments fill the device in one wave (every SM at 2048 threads, each thread one load in flight):
 * 256 threads from 4 segments per SM up, 512 or 1024 below that, and several 1024-thread blocks per
 * segment when even those leave SMs idle. The lab (experiments/segments.lua, float32 sum over 2^28
 * elements, H100, against CUB's DeviceSegmentedReduce in the same run): with 256-thread blocks
 * throughout, 512 segments of 2 MiB ran at 0.91x CUB and 256 of 4 MiB, split in two, at 0.94x, while
 * 1024 segments of 1 MiB -- one full wave -- ran level with it; a warp per 16 KiB segment ran at 0.94x,
 * a block per 16 KiB segment at 0.96x. Four loads in flight per thread instead closed the gap for the
 * large segments but raised the kernel past 32 registers, which cost the small segments a quarter of
 * their speed (one kernel serves every shape). */
#define SEG_BLOCK 256
#define SEG_BLOCK_MAX 1024
#define SEG_WARP_BYTES ((size_t)8 << 10)
#define SEG_THREADS_PER_SM 2048

/* Segments of up to SEG_WARP_BYTES of `bytes` each: as many lanes as a segment has 16-byte vectors
 * (1..32), k of them in blocks of SEG_BLOCK threads, at most `waves` blocks. */
static gr_seg_shape lanes_shape(size_t bytes, size_t k, size_t waves) {
    gr_seg_shape s = {1, SEG_BLOCK, 1, 1};
    while (s.group < 32 && (size_t)s.group * 16 < bytes) s.group *= 2;
    size_t groups_per_block = SEG_BLOCK / (size_t)s.group, want = (k + groups_per_block - 1) / groups_per_block;
    s.grid = want < waves ? (want ? want : 1) : waves;
    return s;
}

gr_seg_shape gr_policy_segments(const gr_context *ctx, size_t n, size_t k, size_t es) {
    gr_seg_shape s = {0, SEG_BLOCK, 1, 1};
    int sms = ctx->info.sms > 0 ? ctx->info.sms : 1;
    size_t mean_bytes = k ? n / k * es : 0, fill = (size_t)sms * SEG_THREADS_PER_SM;
    size_t waves = fill / SEG_BLOCK;
    if (mean_bytes <= SEG_WARP_BYTES) return lanes_shape(mean_bytes, k, waves);
    /* whole blocks: the largest block (256 .. 1024) with which the k segments still fit in one wave */
    while (s.block < SEG_BLOCK_MAX && k * (size_t)s.block * 2 <= fill) s.block *= 2;
    if (k * (size_t)s.block * 2 <= fill) {
        /* 1024-thread blocks and still less than half the device: several blocks per segment, as many
         * as fit in one wave, each with four vectors a thread at least */
        size_t per_block = (size_t)s.block * 16 * 4, parts = fill / s.block / k;
        size_t most = (mean_bytes + per_block - 1) / per_block;
        s.splits = (int)(parts < most ? parts : most);
        if (s.splits < 1) s.splits = 1;
    }
    size_t slots = fill / (size_t)s.block;
    s.grid = s.splits > 1 ? k * (size_t)s.splits : (k < slots * 4 ? k : slots * 4);
    if (s.grid < 1) s.grid = 1;
    return s;
}

/* Segments of very uneven lengths, whose longest is `longest` elements (a reduction by key over skewed keys):
 * the mean says little, and lanes sized by it would leave the longest to a few threads. A block of 1024
 * threads per segment instead, and where the longest is many MiB and the segments few enough, several blocks
 * per segment (one per 2 MiB of the longest), so that no segment waits on one block for long. Taken where
 * the longest is over 16 times the mean and over a warp's share. */
gr_seg_shape gr_policy_uneven_segments(const gr_context *ctx, size_t n, size_t k, size_t longest, size_t es,
                                       const gr_seg_shape *even) {
    size_t mean_bytes = k ? n / k * es : 0, long_bytes = longest * es;
    if (long_bytes <= 16 * mean_bytes || long_bytes <= SEG_WARP_BYTES) return *even;
    gr_seg_shape s = {0, SEG_BLOCK_MAX, 1, 1};
    int sms = ctx->info.sms > 0 ? ctx->info.sms : 1;
    size_t slots = (size_t)sms * SEG_THREADS_PER_SM / SEG_BLOCK_MAX;
    size_t parts = (long_bytes + ((size_t)2 << 20) - 1) / ((size_t)2 << 20);
    if (parts > 1 && k * parts <= slots * 8) s.splits = (int)parts;
    s.grid = s.splits > 1 ? k * (size_t)s.splits : (k < slots * 4 ? k : slots * 4);
    if (s.grid < 1) s.grid = 1;
    return s;
}

/* Every reduction by key the pass over runs takes (the built-in ops but argmin/argmax, short of gpu_to_gpu)
 * is one pass over the runs alone, whatever the groups: no run-length encoding, no scan, no offsets. Until
 * issue 25's round the pass read at a third of the memory speed and took only groups of 64 elements or
 * fewer on average (2^range_bits keys at least n / 64; Zipf keys over 2^20 and 2^24 values: 2.7 ms against
 * 3.6 and 4.3, uniform keys over 2^20: 2.8 against 2.5). Its tiles without a head now fold and leave
 * without waiting for the look-back, and its look-back reads 128 tiles' words a round: it is meant to cost
 * one read of keys and values for any grouping, where the segments read the keys twice and synchronise
 * between their steps. Measured on an H100 against the tree before (which sent groups over 64 elements to
 * the segments), 2^26 float32 values, int32 keys: sorted calls 1.15-2.9x faster at every grouping from 16
 * keys to 2^24, within 3% for all-distinct keys (docs/performance.md, "Reductions by key (issue 25)").
 * GPUREDUCE_BY_KEY_RUNS=0 sends every op to the segments, for comparisons. */
int gr_policy_by_runs_alone(size_t n, int range_bits) {
    (void)n;
    (void)range_bits;
    return 1;
}

/* Rows of an axis reduction (one segment per output): the same ways of sharing, but every choice that
 * shapes a row's order of combination -- lanes per row, threads per block, blocks per row -- taken from
 * the row's length alone, never from how many rows there are, so that a row's bits do not depend on the
 * batch it comes in (issue 23's batch invariance). Blocks of 256 threads up to 256 KiB rows, 1024 above,
 * and a block for every 2 MiB of a longer row; only the grid (which block walks which rows) follows k. */
#define AXIS_BLOCK_BYTES ((size_t)256 << 10)
#define AXIS_SPLIT_BYTES ((size_t)2 << 20)

gr_seg_shape gr_policy_axis_rows(const gr_context *ctx, size_t row, size_t k, size_t es) {
    gr_seg_shape s = {0, SEG_BLOCK, 1, 1};
    int sms = ctx->info.sms > 0 ? ctx->info.sms : 1;
    size_t bytes = row * es, fill = (size_t)sms * SEG_THREADS_PER_SM;
    if (bytes <= SEG_WARP_BYTES) return lanes_shape(bytes, k, fill / SEG_BLOCK);
    if (bytes > AXIS_BLOCK_BYTES) s.block = SEG_BLOCK_MAX;
    size_t parts = (bytes + AXIS_SPLIT_BYTES - 1) / AXIS_SPLIT_BYTES;
    s.splits = parts > 1 ? (int)(parts < 65536 ? parts : 65536) : 1;
    size_t slots = fill / (size_t)s.block;
    s.grid = s.splits > 1 ? k * (size_t)s.splits : (k < slots * 4 ? k : slots * 4);
    if (s.grid < 1) s.grid = 1;
    return s;
}

/* Rows along a contiguous axis, for the built-in ops on device data: the segmented kernel (as many lanes
 * as a row has vectors, a warp reading 512 bytes at a time) or the column kernel read along its rows (each
 * thread its own row). Float32 and bfloat16, 2^28 elements, H200 (experiments/tuning/rows_route_probe.lua):
 * the segmented kernel reads rows of 2^8 to 2^20 floats at 80-96% of the read kernel where the column kernel
 * reads them at 50-60%, and rows of up to 32 bytes at twice its speed; the column kernel wins at 64-byte
 * rows (a warp then reads 2 KiB in one go: 86% against 82% for sum) and, for argmin/argmax, up to 1 KiB
 * (62% against 29% at 256 bytes; 2 KiB of bfloat16: 24% against 54%). Decided from the row alone, never from
 * the number of rows, so that a row's bits do not depend on its batch. */
int gr_policy_rows_segmented(size_t row, size_t es, gr_op op) {
    size_t bytes = row * es;
    if (bytes <= 32) return 1;
    if (bytes <= 64) return 0;
    if (op == GR_ARGMIN || op == GR_ARGMAX) return bytes > 1024;
    return 1;
}

/* Columns of an axis reduction (cuda/kernels/columns.cu): at most this many resident blocks of 256 threads
 * walk the (batch, group, column tile) blocks: 8 per SM, a full wave. */
size_t gr_policy_column_grid(const gr_context *ctx) {
    int sms = ctx->info.sms > 0 ? ctx->info.sms : 1;
    return (size_t)sms * (SEG_THREADS_PER_SM / 256);
}

/* In reduce_many's one launch each buffer is one block's (or a few lanes'): past a few MiB one block
 * (~10-20 GB/s) takes longer than a reduction of its own (a few µs of launch, then the whole GPU). */
size_t gr_policy_many_item_bytes(void) { return (size_t)4 << 20; }

/* Streamed host data: 64 MiB chunks on 4 streams reached 98% of the pinned host-to-device copy with a
 * 1 GiB buffer (16 MiB / 2: 99%, 128 MiB / 4: 99%; make bench, H200). */
size_t gr_policy_chunk_bytes(size_t requested) { return requested ? requested : (size_t)64 << 20; }
int gr_policy_streams(int requested) { return requested ? requested : 4; }
