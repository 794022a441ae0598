/*
 * runs_fixup.cuh -- the second kernel of the pass over runs (runs.cuh): each run that crossed its head
 * tile's end gets its result, its head tile's tail folded with the leads of the tiles it covers up to the
 * next tile with a head (that tile's lead is the run's last part) or to the last tile; and the count of
 * runs, the largest inclusive count a tile published (every tile with a head publishes one; the others
 * publish none).
 *
 * A block takes kRunThreads tiles, one a thread. A run that ends within kWalkShort tiles of its head tile
 * (every run but those of some 16 tiles' elements and more) is folded by its head tile's thread alone,
 * left to right, with its loads batched; the longer ones, at most kRunThreads / kWalkShort a block, by
 * the whole block in turn, kRunThreads * 8 tiles a round: each thread folds its 8 tiles in order, the
 * block combines the threads in a fixed tree, the rounds left to right. Which of the two folds a run
 * depends on where its heads are alone, so the results are the same bits every run. Leads that are
 * empty (a tile whose first element is a head) are left out, so no fold starts from the op's identity.
 */
#pragma once

#include "runs.cuh"

namespace gr {

constexpr int kWalkShort = 16, kWalkBatch = 4, kWalkPer = 8;

/* A fold that knows whether it holds anything. */
template <class Acc> struct Folded {
    Acc acc;
    int has;
};

template <class Op> GR_DEV Folded<typename Op::acc_t> join_folded(const Folded<typename Op::acc_t> &a,
                                                                   const Folded<typename Op::acc_t> &b) {
    if (!b.has) return a;
    if (!a.has) return b;
    return {Op::combine(a.acc, b.acc), 1};
}

/* Thread 0 ends with the block's fold, lower threads first, in a fixed tree. */
template <class Op> __device__ Folded<typename Op::acc_t> block_folded(Folded<typename Op::acc_t> f) {
    using F = Folded<typename Op::acc_t>;
    __shared__ F warp_folds[kRunWarps];
    const unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
    for (unsigned d = 16; d > 0; d >>= 1) f = join_folded<Op>(f, F{shfl_down(f.acc, d), __shfl_down_sync(kFullMask, f.has, d)});
    __syncthreads();                    /* the slots of a call before are read */
    if (lane == 0) warp_folds[warp] = f;
    __syncthreads();
    if (warp == 0) {
        f = lane < kRunWarps ? warp_folds[lane] : F{Op::identity(), 0};
#pragma unroll
        for (unsigned d = 16; d > 0; d >>= 1) f = join_folded<Op>(f, F{shfl_down(f.acc, d), __shfl_down_sync(kFullMask, f.has, d)});
    }
    return f;
}

/* The result of the run that crosses tile t's end, over acc, ending before element `end`. */
template <class W, class Acc> GR_DEV void write_crossing(const RunArgs &a, const RunScratch<Acc> &sc, u64 t,
                                                        const Acc &acc, u64 end) {
    W::write(acc, end - u64(sc.tail_start[t]), a.ddof, a.out0, a.out1, size_t(sc.tail_rank[t]));
}

/* Tile t's crossing run by this thread alone, where it ends within kWalkShort tiles: false if it does not. */
template <class W, class Op, int Items>
GR_DEV bool walk_short(const RunArgs &a, const RunScratch<typename Op::acc_t> &sc, u64 t, u64 tiles) {
    using Acc = typename Op::acc_t;
    constexpr u64 kTile = u64(kRunThreads) * Items;
    Acc acc = sc.tail[t];
    for (int b = 1; b <= kWalkShort; b += kWalkBatch) {
        long long fh[kWalkBatch];
        Acc ld[kWalkBatch];
#pragma unroll
        for (int i = 0; i < kWalkBatch; i++) {
            const u64 u = t + b + i;
            fh[i] = u < tiles ? sc.first_head[u] : -1;
            ld[i] = u < tiles ? sc.lead[u] : Op::identity();
        }
#pragma unroll
        for (int i = 0; i < kWalkBatch; i++) {
            const u64 u = t + b + i;
            if (u >= tiles) {           /* no head after tile t: the run ends with the input */
                write_crossing<W>(a, sc, t, acc, a.n);
                return true;
            }
            if (fh[i] != (long long)(u * kTile)) acc = Op::combine(acc, ld[i]);
            if (fh[i] >= 0) {
                write_crossing<W>(a, sc, t, acc, u64(fh[i]));
                return true;
            }
        }
    }
    return false;
}

/* Tile t's crossing run by the whole block (t the same in every thread). */
template <class W, class Op, int Items>
__device__ void walk_long(const RunArgs &a, const RunScratch<typename Op::acc_t> &sc, u64 t, u64 tiles) {
    using Acc = typename Op::acc_t;
    using F = Folded<Acc>;
    constexpr u64 kTile = u64(kRunThreads) * Items, kNone = ~0ull;
    constexpr int kChunk = kRunThreads * kWalkPer;
    __shared__ u64 first_s[kRunWarps];
    const unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    Acc total = sc.tail[t];             /* thread 0's */
    for (u64 from = t + 1;; from += kChunk) {
        const u64 mine = from + u64(threadIdx.x) * kWalkPer;
        long long fh[kWalkPer];
        Acc ld[kWalkPer];
        u64 found = kNone;
#pragma unroll
        for (int i = 0; i < kWalkPer; i++) {
            const u64 u = mine + i;
            fh[i] = u < tiles ? sc.first_head[u] : -1;
            ld[i] = u < tiles ? sc.lead[u] : Op::identity();
        }
#pragma unroll
        for (int i = kWalkPer - 1; i >= 0; i--)
            if (fh[i] >= 0) found = mine + i;
        /* the first tile with a head in this round, if any */
#pragma unroll
        for (unsigned d = 16; d > 0; d >>= 1) {
            const u64 other = __shfl_xor_sync(kFullMask, found, d);
            found = other < found ? other : found;
        }
        if (lane == 0) first_s[warp] = found;
        __syncthreads();
        u64 e = kNone;
#pragma unroll
        for (int k = 0; k < kRunWarps; k++) e = first_s[k] < e ? first_s[k] : e;
        F f = {Op::identity(), 0};
#pragma unroll
        for (int i = 0; i < kWalkPer; i++) {
            const u64 u = mine + i;
            if (u < tiles && u <= e && fh[i] != (long long)(u * kTile)) f = join_folded<Op>(f, F{ld[i], 1});
        }
        f = block_folded<Op>(f);        /* its barriers keep first_s until every thread has read it */
        if (threadIdx.x == 0 && f.has) total = Op::combine(total, f.acc);
        if (e != kNone || from + kChunk >= tiles) {
            if (threadIdx.x == 0) write_crossing<W>(a, sc, t, total, e != kNone ? u64(sc.first_head[e]) : a.n);
            return;
        }
    }
}

/* The crossing runs of every tile, and *runs. */
template <class W, class Op, int Items> __device__ void runs_fixup_body(const RunArgs &a) {
    using Acc = typename Op::acc_t;
    constexpr u64 kTile = u64(kRunThreads) * Items;
    const u64 n = a.n, tiles = (n + kTile - 1) / kTile;
    const RunScratch<Acc> sc = run_scratch<Acc>(a.scratch, tiles, a.acc_bytes);
    __shared__ unsigned long_count;
    __shared__ unsigned short longs[kRunThreads];
    const unsigned lane = threadIdx.x & 31;
    for (u64 base = u64(blockIdx.x) * kRunThreads; base < tiles; base += u64(gridDim.x) * kRunThreads) {
        if (threadIdx.x == 0) long_count = 0;
        __syncthreads();
        const u64 t = base + threadIdx.x;
        u64 most = 0;
        if (t < tiles) {
            const u64 s = sc.status[1 + t];
            if (s & kRunPrefix) most = s & kRunCount;
            const long long rank = sc.tail_rank[t];
            if (rank >= 0 && u64(rank) < a.capacity && !walk_short<W, Op, Items>(a, sc, t, tiles))
                longs[atomicAdd(&long_count, 1u)] = (unsigned short)threadIdx.x;
        }
#pragma unroll
        for (unsigned d = 16; d > 0; d >>= 1) {
            const u64 other = __shfl_xor_sync(kFullMask, most, d);
            most = other > most ? other : most;
        }
        if (lane == 0 && most) atomicMax(reinterpret_cast<unsigned long long *>(a.runs), (unsigned long long)most);
        __syncthreads();
        const unsigned count = long_count;
        for (unsigned o = 0; o < count; o++) walk_long<W, Op, Items>(a, sc, base + longs[o], tiles);
        __syncthreads();
    }
}

}  // namespace gr
