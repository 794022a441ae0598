/*
 * primitives.cuh -- what every kernel variant shares, written once:
 *   - the op functors with their identities (the only definition of sum, prod, min, max, and, or);
 *   - warp and block reductions built on __shfl_down_sync;
 *   - the grid-stride, 16-byte-vector accumulation of a thread's share of the input;
 *   - the last-block-done finish of the "single" mode;
 *   - the pieces of the classic shared-memory kernels (v02-v11): add-during-load of a tile, the in-block
 *     trees, the last-warp unrolling, the end of a block;
 *   - one atomic combine per op: native where the hardware has the exact operation, else a CAS loop;
 *   - the op functors as function objects, for CUB and Thrust.
 *
 * An op functor has an accumulator type acc_t, identity(), load(x) (one input element into the
 * accumulator: a widening, or x != 0 for and/or) and combine(a, b). The same functor serves the first
 * pass (In = the buffer's dtype) and later passes (In = acc_t), because load() of an accumulator value
 * is the value itself.
 */
#pragma once

#include <cuda_runtime.h>
#include <cuda/std/bit>
#include <cuda/std/limits>
#include <stdint.h>
#include <type_traits>

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

/* Byte k of w, sign- or zero-extended to 32 bits in one PRMT (the selector's msb per nibble replicates
 * the sign of the byte it names; selectors 4..7 pick bytes of the zero second operand). */
template <class B, int k> GR_DEV int byte_at(unsigned w) {
    constexpr unsigned s = std::is_signed_v<B> ? (k | (8 | k) << 4 | (8 | k) << 8 | (8 | k) << 12) : (k | 0x4440);
    unsigned r;
    asm("prmt.b32 %0, %1, 0, %2;" : "=r"(r) : "r"(w), "n"(s));
    return int(r);
}

/* int8/uint8 products: four bytes multiply exactly in 32 bits (|x| <= 128 for int8, so |product| <=
 * 2^28; 255^4 < 2^32 for uint8), two such words exactly into 64 bits with one widening multiply, so a
 * vector costs two full 64-bit multiplies instead of sixteen. The same product modulo 2^64. */
template <class B> GR_DEV unsigned long long byte_vector_product(unsigned long long acc, const Vec16<B> &r) {
    using W = std::conditional_t<std::is_signed_v<B>, int, unsigned>;
    using D = std::conditional_t<std::is_signed_v<B>, long long, unsigned long long>;
    W p[4];
#pragma unroll
    for (int w = 0; w < 4; w++) {
        const unsigned x = word_of(r, w);
        p[w] = (W(byte_at<B, 0>(x)) * W(byte_at<B, 1>(x))) * (W(byte_at<B, 2>(x)) * W(byte_at<B, 3>(x)));
    }
    const unsigned long long a = (unsigned long long)(D(p[0]) * D(p[1]));    /* mul.wide: exact */
    const unsigned long long b = (unsigned long long)(D(p[2]) * D(p[3]));
    return acc * (a * b);
}
template <> GR_DEV unsigned long long fold_vec<Prod<unsigned long long>, int8_t>(unsigned long long acc,
                                                                              const Vec16<int8_t> &r) {
    return byte_vector_product<int8_t>(acc, r);
}
template <> GR_DEV unsigned long long fold_vec<Prod<unsigned long long>, uint8_t>(unsigned long long acc,
                                                                               const Vec16<uint8_t> &r) {
    return byte_vector_product<uint8_t>(acc, r);
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

/* The running value of one thread over its share of the input: the op's accumulator, folded a 16-byte
 * vector at a time (fold_vec), except where a packed form carried across vectors is faster. */
template <class Op, class In> struct ThreadAcc {
    using type = typename Op::acc_t;
    static GR_DEV type init() { return Op::identity(); }
    static GR_DEV type fold(type a, const Vec16<In> &r) { return fold_vec<Op, In>(a, r); }
    static GR_DEV type fold1(type a, In x) { return Op::combine(a, Op::load(x)); }
    static GR_DEV type merge(type a, type b) { return Op::combine(a, b); }
    static GR_DEV typename Op::acc_t value(type a) { return a; }
};

/* int8/uint8 min and max: two 16-bit lanes in a word, carried from vector to vector. One PRMT spreads a
 * word's even bytes into the two lanes (sign- or zero-extended), one its odd bytes, and Hopper's DPX
 * three-way 16x2 min/max (__vimin3_s16x2 and kin) folds two of them into the lanes at once; the lanes
 * meet once, at the end. 90% of the read kernel against 84% for the byte loop, where the SIMD byte
 * intrinsics (__vmins4, emulated on sm_90) and a per-vector lane fold were slower still
 * (experiments/tuning/bytes.cu). */
template <class B, int odd> GR_DEV unsigned byte_pairs(unsigned w) {
    constexpr unsigned s = std::is_signed_v<B> ? (odd ? 0xb391u : 0xa280u) : (odd ? 0x4341u : 0x4240u);
    unsigned r;
    asm("prmt.b32 %0, %1, 0, %2;" : "=r"(r) : "r"(w), "n"(s));
    return r;
}

template <class Op, class B> struct PackedByteMinMax {
    using type = unsigned;
    static GR_DEV unsigned both(int v) { return (unsigned(v) & 0xffffu) * 0x00010001u; }
    static GR_DEV unsigned m3(unsigned a, unsigned b, unsigned c) {
        constexpr bool is_min = std::is_same_v<Op, Min<B>>;
        if constexpr (std::is_signed_v<B>) return is_min ? __vimin3_s16x2(a, b, c) : __vimax3_s16x2(a, b, c);
        else return is_min ? __vimin3_u16x2(a, b, c) : __vimax3_u16x2(a, b, c);
    }
    static GR_DEV type init() { return both(Op::identity()); }
    static GR_DEV type fold(type a, const Vec16<B> &r) {
#pragma unroll
        for (int w = 0; w < 4; w++) a = m3(a, byte_pairs<B, 0>(word_of(r, w)), byte_pairs<B, 1>(word_of(r, w)));
        return a;
    }
    static GR_DEV type fold1(type a, B x) { return m3(a, both(x), both(x)); }
    static GR_DEV type merge(type a, type b) { return m3(a, b, b); }
    static GR_DEV B value(type a) { return Op::combine(B(int16_t(a & 0xffffu)), B(int16_t(a >> 16))); }
};
template <> struct ThreadAcc<Min<int8_t>, int8_t> : PackedByteMinMax<Min<int8_t>, int8_t> {};
template <> struct ThreadAcc<Max<int8_t>, int8_t> : PackedByteMinMax<Max<int8_t>, int8_t> {};
template <> struct ThreadAcc<Min<uint8_t>, uint8_t> : PackedByteMinMax<Min<uint8_t>, uint8_t> {};
template <> struct ThreadAcc<Max<uint8_t>, uint8_t> : PackedByteMinMax<Max<uint8_t>, uint8_t> {};

/* Grid-stride accumulation of this thread's share of in[0, n): UNROLL independent 16-byte loads in
 * flight per iteration, each folded into its own accumulator (independent dependency chains), the
 * accumulators merged at the end. UNROLL = 2 measured best on an H200 (experiments/tuning/tune.cu):
 * more loads per iteration pushed the kernel past 32 registers, which costs occupancy, while one
 * accumulator serialised the folds. The elements before the first 16-byte boundary (a slice may start
 * anywhere) and after the last whole vector are taken one by one by the first threads: no tail is ever
 * dropped. The combination order depends only on n and the launch shape: results are reproducible. */
template <class Op, class In, int UNROLL>
GR_DEV typename Op::acc_t thread_accumulate(const In *__restrict__ in, size_t n) {
    using T = ThreadAcc<Op, In>;
    using V = Vec16<In>;
    constexpr int kV = V::kCount;
    const size_t tid = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
    const size_t threads = size_t(gridDim.x) * blockDim.x;
    typename T::type acc[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; u++) acc[u] = T::init();

    size_t head = ((16 - (reinterpret_cast<uintptr_t>(in) & 15)) & 15) / sizeof(In);
    if (head > n) head = n;
    if (tid < head) acc[0] = T::fold1(acc[0], in[tid]);

    const V *vin = reinterpret_cast<const V *>(in + head);
    const size_t nvec = (n - head) / kV;
    size_t i = tid;
    for (; i + (UNROLL - 1) * threads < nvec; i += UNROLL * threads) {
        V r[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; u++) r[u] = vin[i + u * threads];
#pragma unroll
        for (int u = 0; u < UNROLL; u++) acc[u] = T::fold(acc[u], r[u]);
    }
    for (; i < nvec; i += threads) acc[0] = T::fold(acc[0], vin[i]);

    const size_t tail = head + nvec * kV;
    if (tid < n - tail) acc[0] = T::fold1(acc[0], in[tail + tid]);
#pragma unroll
    for (int u = 1; u < UNROLL; u++) acc[0] = T::merge(acc[0], acc[u]);
    return T::value(acc[0]);
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

/* ---- the classic shared-memory kernels (v02-v11) ----------------------------------------------- */

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

/* Blocks of a classic kernel for n elements, per_block = blockDim.x * F of them per block:
 * ceil(n / per_block) (0 for n = 0), at most gridDim.x's limit 2^31 - 1 (tile_load takes the tiles
 * beyond it in a second round). */
inline size_t grid_for_tiles(size_t n, size_t per_block) {
    const size_t most = 0x7fffffff;
    const size_t want = n / per_block + (n % per_block != 0);
    return want < most ? want : most;
}

/* A grid the launchers can pass to <<<>>> as it is (a caller may ask for any grid). */
inline bool grid_fits(size_t grid) { return grid >= 1 && grid <= 0x7fffffff; }

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

/* The end of a block: thread 0's value becomes partials[blockIdx.x], or, when the reduction finishes in
 * this launch (final_out set), goes through finish_last_block. Every thread must call it (it syncs). */
template <class Op>
__device__ void store_partial(typename Op::acc_t v, typename Op::acc_t *partials, unsigned *counter,
                              typename Op::acc_t *final_out) {
    if (final_out) finish_last_block<Op>(v, partials, counter, final_out);
    else if (threadIdx.x == 0) partials[blockIdx.x] = v;
}

/* ---- atomic combine ----------------------------------------------------------------------------- */

/* *addr = Op::combine(*addr, v) atomically, in global or shared memory. Native atomics where one does
 * exactly this, a compare-and-swap loop otherwise:
 *   sum      float, double, u64 accumulators: atomicAdd. Float sums then depend on the order in which
 *            blocks (or threads) arrive: not reproducible run to run. atom.add.f32 also flushes
 *            subnormal inputs and results to zero (PTX ISA); f64 and integers are exact.
 *   prod     every type: CAS loop (32-bit word for float, 64-bit for double and u64).
 *   min/max  int32, uint32, int64, uint64: atomicMin/atomicMax (as int, unsigned, long long, unsigned
 *            long long: same width and signedness). float, double: CAS loop, so a NaN propagates as in
 *            Op::combine. int8, uint8: CAS loop on the aligned 32-bit word holding the byte.
 *   and/or   1-byte flags: atomicAnd / atomicOr on the aligned 32-bit word holding the byte, with the
 *            other bytes masked to leave them as they are (and: ...ff v ff..., or: ...00 v 00...).
 * The CAS loops read the word, combine, and swap only if nobody changed it meanwhile; a failed swap
 * returns the current word and the loop combines again. They compare bits, not values, so a NaN in the
 * word can't make them spin. The other bytes of the word that holds a 1-byte value are compared and
 * written back as they are. */
namespace detail {

/* The aligned 32-bit word holding a byte, and where the byte sits in it (little-endian: byte k of the
 * word is bits 8k..8k+7). */
GR_DEV unsigned *word_holding(void *addr, unsigned *shift) {
    const uintptr_t at = reinterpret_cast<uintptr_t>(addr);
    *shift = unsigned(at & 3) * 8;
    return reinterpret_cast<unsigned *>(at & ~uintptr_t(3));
}

template <class Op> GR_DEV void atomic_combine_cas(typename Op::acc_t *addr, typename Op::acc_t v) {
    using Acc = typename Op::acc_t;
    if constexpr (sizeof(Acc) == 1) {
        unsigned shift;
        unsigned *word = word_holding(addr, &shift);
        unsigned old = *word, assumed;
        do {
            assumed = old;
            const Acc cur = cuda::std::bit_cast<Acc>(uint8_t(assumed >> shift));
            const unsigned byte = cuda::std::bit_cast<uint8_t>(Op::combine(cur, v));
            old = atomicCAS(word, assumed, (assumed & ~(0xffu << shift)) | (byte << shift));
        } while (old != assumed);
    } else {
        static_assert(sizeof(Acc) == 4 || sizeof(Acc) == 8, "atomic_combine: 1, 4 or 8-byte values");
        using W = std::conditional_t<sizeof(Acc) == 4, unsigned, unsigned long long>;
        W *word = reinterpret_cast<W *>(addr);
        W old = *word, assumed;
        do {
            assumed = old;
            const W next = cuda::std::bit_cast<W>(Op::combine(cuda::std::bit_cast<Acc>(assumed), v));
            old = atomicCAS(word, assumed, next);
        } while (old != assumed);
    }
}

/* The CUDA atomicMin/atomicMax overload for a 4- or 8-byte integer type (int64_t is long on LP64, not
 * long long, so it needs the cast). */
template <class T>
using native_int_t =
    std::conditional_t<sizeof(T) == 4, std::conditional_t<std::is_signed_v<T>, int, unsigned>,
                       std::conditional_t<std::is_signed_v<T>, long long, unsigned long long>>;
template <class T>
constexpr bool native_minmax_v = std::is_integral_v<T> && (sizeof(T) == 4 || sizeof(T) == 8);

template <class T> GR_DEV void atomic_op(Sum<T>, T *addr, T v) {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> ||
                  std::is_same_v<T, unsigned long long>)
        atomicAdd(addr, v);
    else
        atomic_combine_cas<Sum<T>>(addr, v);
}
template <class T> GR_DEV void atomic_op(Prod<T>, T *addr, T v) { atomic_combine_cas<Prod<T>>(addr, v); }
template <class T> GR_DEV void atomic_op(Min<T>, T *addr, T v) {
    using N = native_int_t<T>;
    if constexpr (native_minmax_v<T>) atomicMin(reinterpret_cast<N *>(addr), N(v));
    else atomic_combine_cas<Min<T>>(addr, v);
}
template <class T> GR_DEV void atomic_op(Max<T>, T *addr, T v) {
    using N = native_int_t<T>;
    if constexpr (native_minmax_v<T>) atomicMax(reinterpret_cast<N *>(addr), N(v));
    else atomic_combine_cas<Max<T>>(addr, v);
}

GR_DEV void atomic_op(And, uint8_t *addr, uint8_t v) {
    unsigned shift;
    unsigned *word = word_holding(addr, &shift);
    atomicAnd(word, ~(0xffu << shift) | (unsigned(v) << shift));
}
GR_DEV void atomic_op(Or, uint8_t *addr, uint8_t v) {
    unsigned shift;
    unsigned *word = word_holding(addr, &shift);
    atomicOr(word, unsigned(v) << shift);
}

}  // namespace detail

template <class Op> GR_DEV void atomic_combine(typename Op::acc_t *addr, typename Op::acc_t v) {
    detail::atomic_op(Op{}, addr, v);
}

/* ---- the op functors as function objects (CUB, Thrust) ------------------------------------------ */

template <class Op> struct CombineFn {
    GR_HOSTDEV typename Op::acc_t operator()(typename Op::acc_t a, typename Op::acc_t b) const {
        return Op::combine(a, b);
    }
};

template <class Op, class In> struct LoadFn {
    GR_HOSTDEV typename Op::acc_t operator()(In x) const { return Op::load(x); }
};

}  // namespace gr
