/*
 * primitives.cuh -- what every kernel variant shares, written once:
 *   - the op functors with their identities (the only definition of sum, prod, min, max, and, or);
 *   - warp and block reductions built on __shfl_down_sync;
 *   - the grid-stride, 16-byte-vector accumulation of a thread's share of the input;
 *   - the last-block-done finish of the "single" mode.
 *
 * An op functor has an accumulator type acc_t, identity(), load(x) (one input element into the
 * accumulator: a widening, or x != 0 for and/or) and combine(a, b). The same functor serves the first
 * pass (In = the buffer's dtype) and later passes (In = acc_t), because load() of an accumulator value
 * is the value itself.
 */
#pragma once

#include <cuda_runtime.h>
#include <cuda/std/limits>
#include <stdint.h>

#include "../engine/internal.h"

#define GR_DEV __device__ __forceinline__
#define GR_HOSTDEV __host__ __device__ __forceinline__

namespace gr {

constexpr unsigned kFullMask = 0xffffffffu;

/* ---- op functors ------------------------------------------------------------------------------- */

/* Integer sums and products use unsigned 64-bit accumulators: wrapping is defined there, and the bits
 * equal those of the signed result (two's complement), so one instantiation serves both signs. */
template <class Acc> struct Sum {
    using acc_t = Acc;
    static GR_HOSTDEV Acc identity() { return Acc(0); }
    template <class T> static GR_HOSTDEV Acc load(T x) { return Acc(x); }
    static GR_HOSTDEV Acc combine(Acc a, Acc b) { return a + b; }
};

template <class Acc> struct Prod {
    using acc_t = Acc;
    static GR_HOSTDEV Acc identity() { return Acc(1); }
    template <class T> static GR_HOSTDEV Acc load(T x) { return Acc(x); }
    static GR_HOSTDEV Acc combine(Acc a, Acc b) { return a * b; }
};

/* Min and max stay in the input type. A NaN wins: once one is in, it propagates (x != x is false for
 * integers, and the compiler drops the tests). */
template <class T> struct Min {
    using acc_t = T;
    static GR_HOSTDEV T identity() {
        return cuda::std::numeric_limits<T>::has_infinity ? cuda::std::numeric_limits<T>::infinity()
                                                          : cuda::std::numeric_limits<T>::max();
    }
    template <class U> static GR_HOSTDEV T load(U x) { return T(x); }
    static GR_HOSTDEV T combine(T a, T b) { return a != a ? a : b != b ? b : (b < a ? b : a); }
};

template <class T> struct Max {
    using acc_t = T;
    static GR_HOSTDEV T identity() {
        return cuda::std::numeric_limits<T>::has_infinity ? -cuda::std::numeric_limits<T>::infinity()
                                                          : cuda::std::numeric_limits<T>::lowest();
    }
    template <class U> static GR_HOSTDEV T load(U x) { return T(x); }
    static GR_HOSTDEV T combine(T a, T b) { return a != a ? a : b != b ? b : (b > a ? b : a); }
};

/* Logical and/or over "x != 0" flags, kept as bytes. NaN is not zero, so it counts as true. */
struct And {
    using acc_t = uint8_t;
    static GR_HOSTDEV uint8_t identity() { return 1; }
    template <class T> static GR_HOSTDEV uint8_t load(T x) { return x != T(0); }
    static GR_HOSTDEV uint8_t combine(uint8_t a, uint8_t b) { return a & b; }
};

struct Or {
    using acc_t = uint8_t;
    static GR_HOSTDEV uint8_t identity() { return 0; }
    template <class T> static GR_HOSTDEV uint8_t load(T x) { return x != T(0); }
    static GR_HOSTDEV uint8_t combine(uint8_t a, uint8_t b) { return a | b; }
};

/* ---- warp and block ---------------------------------------------------------------------------- */

/* __shfl_down_sync has no overloads below 32 bits: bytes travel widened. */
template <class T> GR_DEV T shfl_down(T v, unsigned delta) {
    if constexpr (sizeof(T) < 4) return T(__shfl_down_sync(kFullMask, int(v), delta));
    else return __shfl_down_sync(kFullMask, v, delta);
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

/* ---- a thread's share of the input -------------------------------------------------------------- */

template <class T> struct alignas(16) Vec16 {
    static constexpr int kCount = 16 / sizeof(T);
    T v[kCount];
};

/* Folds one 16-byte vector into the accumulator. The generic form loads element by element; the
 * overloads below do 1-byte sums and logic four bytes at a time, where the per-element instructions
 * would otherwise outrun memory. */
template <class Op, class In> GR_DEV typename Op::acc_t fold_vec(typename Op::acc_t acc, const Vec16<In> &r) {
#pragma unroll
    for (int k = 0; k < Vec16<In>::kCount; k++) acc = Op::combine(acc, Op::load(r.v[k]));
    return acc;
}

template <class In> GR_DEV unsigned word_of(const Vec16<In> &r, int w) {
    return reinterpret_cast<const unsigned *>(r.v)[w];
}

/* int8/uint8 sums: __dp4a adds four bytes in one instruction into a 32-bit partial (16 bytes can't
 * overflow it), widened to the 64-bit accumulator once per vector. */
template <> GR_DEV unsigned long long fold_vec<Sum<unsigned long long>, int8_t>(unsigned long long acc,
                                                                             const Vec16<int8_t> &r) {
    int s = 0;
#pragma unroll
    for (int w = 0; w < 4; w++) s = __dp4a(int(word_of(r, w)), 0x01010101, s);
    return acc + (unsigned long long)(long long)s;
}
template <> GR_DEV unsigned long long fold_vec<Sum<unsigned long long>, uint8_t>(unsigned long long acc,
                                                                              const Vec16<uint8_t> &r) {
    unsigned s = 0;
#pragma unroll
    for (int w = 0; w < 4; w++) s = __dp4a(word_of(r, w), 0x01010101u, s);
    return acc + s;
}

/* A word has a zero byte iff this is non-zero (the classic bit trick). */
GR_DEV unsigned has_zero_byte(unsigned w) { return (w - 0x01010101u) & ~w & 0x80808080u; }

template <> GR_DEV uint8_t fold_vec<And, int8_t>(uint8_t acc, const Vec16<int8_t> &r) {
    unsigned z = 0;
#pragma unroll
    for (int w = 0; w < 4; w++) z |= has_zero_byte(word_of(r, w));
    return acc & uint8_t(z == 0);
}
template <> GR_DEV uint8_t fold_vec<And, uint8_t>(uint8_t acc, const Vec16<uint8_t> &r) {
    unsigned z = 0;
#pragma unroll
    for (int w = 0; w < 4; w++) z |= has_zero_byte(word_of(r, w));
    return acc & uint8_t(z == 0);
}
template <> GR_DEV uint8_t fold_vec<Or, int8_t>(uint8_t acc, const Vec16<int8_t> &r) {
    unsigned any = word_of(r, 0) | word_of(r, 1) | word_of(r, 2) | word_of(r, 3);
    return acc | uint8_t(any != 0);
}
template <> GR_DEV uint8_t fold_vec<Or, uint8_t>(uint8_t acc, const Vec16<uint8_t> &r) {
    unsigned any = word_of(r, 0) | word_of(r, 1) | word_of(r, 2) | word_of(r, 3);
    return acc | uint8_t(any != 0);
}

/* Grid-stride accumulation of this thread's share of in[0, n), UNROLL independent 16-byte loads in
 * flight per thread. The elements before the first 16-byte boundary (a slice may start anywhere) and
 * after the last whole vector are taken one by one by the first threads: no tail is ever dropped. */
template <class Op, class In, int UNROLL>
GR_DEV typename Op::acc_t thread_accumulate(const In *__restrict__ in, size_t n) {
    using Acc = typename Op::acc_t;
    using V = Vec16<In>;
    constexpr int kV = V::kCount;
    const size_t tid = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
    const size_t threads = size_t(gridDim.x) * blockDim.x;
    Acc acc = Op::identity();

    size_t head = ((16 - (reinterpret_cast<uintptr_t>(in) & 15)) & 15) / sizeof(In);
    if (head > n) head = n;
    if (tid < head) acc = Op::combine(acc, Op::load(in[tid]));

    const V *vin = reinterpret_cast<const V *>(in + head);
    const size_t nvec = (n - head) / kV;
    size_t i = tid;
    for (; i + (UNROLL - 1) * threads < nvec; i += UNROLL * threads) {
        V r[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; u++) r[u] = vin[i + u * threads];
#pragma unroll
        for (int u = 0; u < UNROLL; u++) acc = fold_vec<Op, In>(acc, r[u]);
    }
    for (; i < nvec; i += threads) acc = fold_vec<Op, In>(acc, vin[i]);

    const size_t tail = head + nvec * kV;
    if (tid < n - tail) acc = Op::combine(acc, Op::load(in[tail + tid]));
    return acc;
}

/* ---- the "single" finish ------------------------------------------------------------------------ */

/* Every block stores its value; the last block to arrive (a ticket from an atomic counter, after a
 * fence that publishes the store) combines all of them in block order -- so the result does not
 * depend on which block came last -- and writes it to final_out (pinned, mapped host memory). It
 * resets the counter for the next reduction that uses this scratch slot. */
template <class Op>
__device__ void finish_last_block(typename Op::acc_t block_value, typename Op::acc_t *partials,
                                  unsigned *counter, typename Op::acc_t *final_out) {
    using Acc = typename Op::acc_t;
    __shared__ bool is_last;
    if (threadIdx.x == 0) {
        partials[blockIdx.x] = block_value;
        __threadfence();
        is_last = atomicAdd(counter, 1u) == gridDim.x - 1;
    }
    __syncthreads();
    if (!is_last) return;
    __threadfence();
    Acc v = Op::identity();
    for (unsigned i = threadIdx.x; i < gridDim.x; i += blockDim.x)
        v = Op::combine(v, *reinterpret_cast<volatile const Acc *>(partials + i));
    v = block_reduce<Op>(v);
    if (threadIdx.x == 0) {
        *final_out = v;
        *counter = 0;
    }
}

}  // namespace gr
