/*
 * warp_block.cuh -- values combined across a warp (__shfl_down_sync) and across a block (a slot of
 * shared memory per warp). NVRTC-clean (core.cuh).
 */
#pragma once

#include "core.cuh"

namespace gr {

/* __shfl_*_sync have overloads for 4- and 8-byte arithmetic types only: bytes and shorts travel widened,
 * a 1- or 2-byte element of a small float format (small_float.cuh) as its bits widened, anything else (an
 * accumulator struct) one 32-bit word at a time. `move` is one shuffle of a word. */
template <class T, class Move> GR_DEV T shuffle(T v, Move move) {
    if constexpr (is_arithmetic_v<T> && sizeof(T) < 4) {
        return T(move(int(v)));
    } else if constexpr (is_arithmetic_v<T>) {
        return move(v);
    } else if constexpr (sizeof(T) < 4) {           /* a small float element: its bits */
        using B = conditional_t<sizeof(T) == 1, u8, u16>;
        return bit_cast<T>(B(move(unsigned(bit_cast<B>(v)))));
    } else {
        static_assert(sizeof(T) % 4 == 0, "shuffle: an accumulator struct must be whole 32-bit words");
        unsigned w[sizeof(T) / 4];
        memcpy(w, &v, sizeof(T));
#pragma unroll
        for (unsigned k = 0; k < sizeof(T) / 4; k++) w[k] = move(w[k]);
        memcpy(&v, w, sizeof(T));
        return v;
    }
}

/* The three shuffles as function objects (NVRTC takes no lambda in device code without annotations). */
struct ShflDown {
    unsigned delta;
    template <class X> GR_DEV X operator()(X x) const { return __shfl_down_sync(kFullMask, x, delta); }
};
struct ShflXor {
    unsigned mask;
    template <class X> GR_DEV X operator()(X x) const { return __shfl_xor_sync(kFullMask, x, mask); }
};
struct ShflUp {
    unsigned delta;
    template <class X> GR_DEV X operator()(X x) const { return __shfl_up_sync(kFullMask, x, delta); }
};

template <class T> GR_DEV T shfl_down(T v, unsigned delta) { return shuffle(v, ShflDown{delta}); }

/* The value of the lane whose index is this one's XOR mask. */
template <class T> GR_DEV T shfl_xor(T v, unsigned mask) { return shuffle(v, ShflXor{mask}); }

/* The value of the lane `delta` below this one (this lane's own where there is none). */
template <class T> GR_DEV T shfl_up(T v, unsigned delta) { return shuffle(v, ShflUp{delta}); }

/* Every lane of each group of G consecutive lanes (G a power of two, at most 32) ends with its group's
 * value; the whole warp takes part. The butterfly combines in the same order in every group, so a
 * result depends only on the group's values. */
template <class Op, int G> GR_DEV typename Op::acc_t group_reduce(typename Op::acc_t v) {
#pragma unroll
    for (int d = G / 2; d > 0; d >>= 1) v = Op::combine(v, shfl_xor(v, unsigned(d)));
    return v;
}

/* Lane 0 ends with the warp's value. Needs all 32 lanes active. */
template <class Op> GR_DEV typename Op::acc_t warp_reduce(typename Op::acc_t v) {
#pragma unroll
    for (unsigned d = 16; d > 0; d >>= 1) v = Op::combine(v, shfl_down(v, d));
    return v;
}

/* Thread 0 ends with the block's value. blockDim.x must be a multiple of 32. Safe to call more than
 * once per kernel: the first barrier keeps a new call from overwriting slots still being read. */
template <class Op> __device__ typename Op::acc_t block_reduce(typename Op::acc_t v) {
    using Acc = typename Op::acc_t;
    __shared__ Acc warp_values[32];
    const unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    v = warp_reduce<Op>(v);
    __syncthreads();
    if (lane == 0) warp_values[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < warps ? warp_values[lane] : Op::identity();
        v = warp_reduce<Op>(v);
    }
    return v;
}

}  // namespace gr
