/*
 * classic.cuh -- the pieces of the textbook's shared-memory kernels (v02-v11): add-during-load of a
 * tile, the in-block trees, the last warp unrolled. NVRTC-clean (core.cuh).
 */
#pragma once

#include "core.cuh"

namespace gr {

/* The block's dynamic shared memory as an array of T; its size is set at launch. One raw byte array
 * serves every instantiation: a typed extern __shared__ array can't take a different type in each. */
template <class T> GR_DEV T *dynamic_smem() {
    extern __shared__ __align__(16) unsigned char gr_dynamic_smem[];
    return reinterpret_cast<T *>(gr_dynamic_smem);
}

/* Add-during-load ("reduceUnrolling2/4/8"): block b's tile is the F * blockDim.x elements from
 * b * F * blockDim.x on; thread t combines elements t, t + blockDim.x, ..., t + (F - 1) * blockDim.x of
 * it, so each of the F steps is one coalesced row. A full run issues its F loads before combining any
 * (the textbook's a1..a8); a run that crosses n takes only the elements below n, so the identity stands
 * in for the rest and no tail is dropped. F = 1 is the plain load of v02-v05. With the planner's grid
 * (grid_for_tiles) every block takes exactly one tile, as in the textbook; a smaller grid (one given
 * by the caller, or clamped to gridDim.x's limit) makes a block go on to tile b + gridDim.x, and so on. */
template <class Op, class In, int F>
GR_DEV typename Op::acc_t tile_load(const In *__restrict__ in, size_t n) {
    using Acc = typename Op::acc_t;
    const size_t block = blockDim.x, step = size_t(gridDim.x) * block * F;
    Acc v = Op::identity();
    for (size_t i = size_t(blockIdx.x) * block * F + threadIdx.x; i < n; i += step) {
        if (i + (F - 1) * block < n) {
            Acc r[F];
#pragma unroll
            for (int k = 0; k < F; k++) r[k] = Op::load(in[i + k * block]);
#pragma unroll
            for (int k = 0; k < F; k++) v = Op::combine(v, r[k]);
        } else {
#pragma unroll
            for (int k = 0; k < F; k++)
                if (i + k * block < n) v = Op::combine(v, Op::load(in[i + k * block]));
        }
    }
    return v;
}

/* The interleaved-pair tree ("reduceInterleaved", "Reduce v2"): the upper half of the live values is
 * folded onto the lower half, the stride halving from blockDim.x / 2. The active threads are always the
 * first `stride`, so whole warps idle instead of diverging, and a warp reads 32 consecutive words: no
 * bank conflicts. Steps run while stride > stop: stop = 0 leaves the block's value in s[0]; stop = 32
 * leaves s[0..64) for last_warp_unrolled. Needs a power-of-two blockDim.x and s[0..blockDim.x) filled
 * and published by __syncthreads(). Every thread of the block must call it (it syncs). */
template <class Op> __device__ void interleaved_tree(typename Op::acc_t *s, unsigned stop) {
    const unsigned tid = threadIdx.x;
    for (unsigned stride = blockDim.x / 2; stride > stop; stride >>= 1) {
        if (tid < stride) s[tid] = Op::combine(s[tid], s[tid + stride]);
        __syncthreads();
    }
}

/* The last warp unrolled ("reduceUnrollWarps8", "Reduce v4"): once 64 values are left, warp 0 folds
 * them in six steps with no __syncthreads. The textbook counts on `volatile` alone, which held while a
 * warp ran in lockstep; since Volta the lanes of a warp are scheduled independently, so a lane may read
 * s[tid + d] before its owner has written the step before, or overwrite s[tid] before a lower lane has
 * read it: a race, and compute-sanitizer racecheck reports it. Each step here reads its partner into a
 * register, __syncwarp()s, writes, and __syncwarp()s again, so no read overlaps a write. volatile stays,
 * as in the textbook: every step is a real shared-memory access. Called by all 32 lanes of warp 0
 * (tid < 32) with s[0..64) published by __syncthreads() (so blockDim.x >= 64); lane 0 returns the
 * block's value. The other lanes compute values nobody uses, as in the textbook. */
template <class Op> GR_DEV typename Op::acc_t last_warp_unrolled(typename Op::acc_t *s) {
    using Acc = typename Op::acc_t;
    volatile Acc *vs = s;
    const unsigned tid = threadIdx.x;
    Acc v = vs[tid];
    auto step = [&](unsigned d) {
        v = Op::combine(v, vs[tid + d]);
        __syncwarp();
        vs[tid] = v;
        __syncwarp();
    };
    step(32);
    step(16);
    step(8);
    step(4);
    step(2);
    step(1);
    return v;
}

/* The whole tree unrolled ("reduceCompleteUnrollWarps8", "Reduce v5"): one step per possible block size
 * down to 64 values, then the last warp. With block = blockDim.x the tests are run-time ones; with a
 * template constant (v11) the compiler drops the steps the block doesn't have. Needs a power-of-two
 * block of 64..1024 equal to blockDim.x, s[0..block) published by __syncthreads(). Every thread must
 * call it; thread 0 gets the block's value (the others an unused one). */
template <class Op> GR_DEV typename Op::acc_t complete_unrolled_tree(typename Op::acc_t *s, unsigned block) {
    const unsigned tid = threadIdx.x;
    if (block >= 1024 && tid < 512) s[tid] = Op::combine(s[tid], s[tid + 512]);
    __syncthreads();
    if (block >= 512 && tid < 256) s[tid] = Op::combine(s[tid], s[tid + 256]);
    __syncthreads();
    if (block >= 256 && tid < 128) s[tid] = Op::combine(s[tid], s[tid + 128]);
    __syncthreads();
    if (block >= 128 && tid < 64) s[tid] = Op::combine(s[tid], s[tid + 64]);
    __syncthreads();
    typename Op::acc_t v = Op::identity();
    if (tid < 32) v = last_warp_unrolled<Op>(s);
    return v;
}

}  // namespace gr
