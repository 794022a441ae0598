/*
 * thread_load.cuh -- a thread's share of the input: 16-byte vector loads in a grid-stride loop, each
 * vector folded into the thread's running value, with the byte tricks that keep 1-byte types at
 * memory speed. NVRTC-clean (core.cuh).
 */
#pragma once

#include "core.cuh"
#include "ops.cuh"

namespace gr {

/* ---- a thread's share of the input -------------------------------------------------------------- */

template <class T> struct alignas(16) Vec16 {
    static constexpr int kCount = 16 / sizeof(T);
    T v[kCount];
};

/* Whether a thread's share of In can travel in 16-byte vectors (elements that divide 16 bytes). */
template <class In> constexpr bool vectorizable_v = sizeof(In) <= 16 && 16 % sizeof(In) == 0;

/* A thread's running value over its share of the input (defined below; small_float_fold.cuh gives the
 * small floats' forms). */
template <class Op, class In> struct ThreadAcc;

}  // namespace gr

#include "small_float_fold.cuh"

namespace gr {

/* Folds one 16-byte vector, whose first element has the 0-based index `i`, into the accumulator. The
 * generic form loads element by element -- the small floats widened a word at a time first, for the ops
 * that load their float value (small_float_fold.cuh); the overloads below do 1-byte sums and logic four
 * bytes at a time, where the per-element instructions would otherwise outrun memory (they take no index). */
template <class Op, class In>
GR_DEV typename Op::acc_t fold_vec(typename Op::acc_t acc, const Vec16<In> &r, u64 i) {
    if constexpr (is_small_float_v<In> && widened_load_v<Op>) {
        float f[Vec16<In>::kCount];
        widen_vec(r, f);
#pragma unroll
        for (int k = 0; k < Vec16<In>::kCount; k++) acc = Op::combine(acc, Op::load(f[k]));
    } else {
#pragma unroll
        for (int k = 0; k < Vec16<In>::kCount; k++) acc = Op::combine(acc, load_at<Op>(r.v[k], i + k));
    }
    return acc;
}

template <class In> GR_DEV unsigned word_of(const Vec16<In> &r, int w) {
    return reinterpret_cast<const unsigned *>(r.v)[w];
}

/* int8/uint8 sums: __dp4a adds four bytes in one instruction into a 32-bit partial (16 bytes can't
 * overflow it), widened to the 64-bit accumulator once per vector. */
template <> GR_DEV unsigned long long fold_vec<Sum<unsigned long long>, i8>(unsigned long long acc,
                                                                             const Vec16<i8> &r, u64) {
    int s = 0;
#pragma unroll
    for (int w = 0; w < 4; w++) s = __dp4a(int(word_of(r, w)), 0x01010101, s);
    return acc + (unsigned long long)(long long)s;
}
template <> GR_DEV unsigned long long fold_vec<Sum<unsigned long long>, u8>(unsigned long long acc,
                                                                              const Vec16<u8> &r, u64) {
    unsigned s = 0;
#pragma unroll
    for (int w = 0; w < 4; w++) s = __dp4a(word_of(r, w), 0x01010101u, s);
    return acc + s;
}

/* Byte k of w, sign- or zero-extended to 32 bits in one PRMT (the selector's msb per nibble replicates
 * the sign of the byte it names; selectors 4..7 pick bytes of the zero second operand). */
template <class B, int k> GR_DEV int byte_at(unsigned w) {
    constexpr unsigned s = is_signed_v<B> ? (k | (8 | k) << 4 | (8 | k) << 8 | (8 | k) << 12) : (k | 0x4440);
    unsigned r;
    asm("prmt.b32 %0, %1, 0, %2;" : "=r"(r) : "r"(w), "n"(s));
    return int(r);
}

/* int8/uint8 products: four bytes multiply exactly in 32 bits (|x| <= 128 for int8, so |product| <=
 * 2^28; 255^4 < 2^32 for uint8), two such words exactly into 64 bits with one widening multiply, so a
 * vector costs two full 64-bit multiplies instead of sixteen. The same product modulo 2^64. */
template <class B> GR_DEV unsigned long long byte_vector_product(unsigned long long acc, const Vec16<B> &r) {
    using W = conditional_t<is_signed_v<B>, int, unsigned>;
    using D = conditional_t<is_signed_v<B>, long long, unsigned long long>;
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
template <> GR_DEV unsigned long long fold_vec<Prod<unsigned long long>, i8>(unsigned long long acc,
                                                                              const Vec16<i8> &r, u64) {
    return byte_vector_product<i8>(acc, r);
}
template <> GR_DEV unsigned long long fold_vec<Prod<unsigned long long>, u8>(unsigned long long acc,
                                                                               const Vec16<u8> &r, u64) {
    return byte_vector_product<u8>(acc, r);
}

/* A word has a zero byte iff this is non-zero (the classic bit trick). */
GR_DEV unsigned has_zero_byte(unsigned w) { return (w - 0x01010101u) & ~w & 0x80808080u; }

template <> GR_DEV u8 fold_vec<And, i8>(u8 acc, const Vec16<i8> &r, u64) {
    unsigned z = 0;
#pragma unroll
    for (int w = 0; w < 4; w++) z |= has_zero_byte(word_of(r, w));
    return acc & u8(z == 0);
}
template <> GR_DEV u8 fold_vec<And, u8>(u8 acc, const Vec16<u8> &r, u64) {
    unsigned z = 0;
#pragma unroll
    for (int w = 0; w < 4; w++) z |= has_zero_byte(word_of(r, w));
    return acc & u8(z == 0);
}
template <> GR_DEV u8 fold_vec<Or, i8>(u8 acc, const Vec16<i8> &r, u64) {
    unsigned any = word_of(r, 0) | word_of(r, 1) | word_of(r, 2) | word_of(r, 3);
    return acc | u8(any != 0);
}
template <> GR_DEV u8 fold_vec<Or, u8>(u8 acc, const Vec16<u8> &r, u64) {
    unsigned any = word_of(r, 0) | word_of(r, 1) | word_of(r, 2) | word_of(r, 3);
    return acc | u8(any != 0);
}

/* The running value of one thread over its share of the input: the op's accumulator, folded a 16-byte
 * vector at a time (fold_vec), except where a packed form carried across vectors is faster. */
template <class Op, class In> struct ThreadAcc {
    using type = typename Op::acc_t;
    static GR_DEV type init() { return Op::identity(); }
    static GR_DEV type fold(type a, const Vec16<In> &r, u64 i) { return fold_vec<Op, In>(a, r, i); }
    static GR_DEV type fold1(type a, In x, u64 i) { return Op::combine(a, load_at<Op>(x, i)); }
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
    constexpr unsigned s = is_signed_v<B> ? (odd ? 0xb391u : 0xa280u) : (odd ? 0x4341u : 0x4240u);
    unsigned r;
    asm("prmt.b32 %0, %1, 0, %2;" : "=r"(r) : "r"(w), "n"(s));
    return r;
}

template <class Op, class B> struct PackedByteMinMax {
    using type = unsigned;
    static GR_DEV unsigned both(int v) { return (unsigned(v) & 0xffffu) * 0x00010001u; }
    static GR_DEV unsigned m3(unsigned a, unsigned b, unsigned c) {
        constexpr bool is_min = is_same_v<Op, Min<B>>;
        if constexpr (is_signed_v<B>) return is_min ? __vimin3_s16x2(a, b, c) : __vimax3_s16x2(a, b, c);
        else return is_min ? __vimin3_u16x2(a, b, c) : __vimax3_u16x2(a, b, c);
    }
    static GR_DEV type init() { return both(Op::identity()); }
    static GR_DEV type fold(type a, const Vec16<B> &r, u64) {
#pragma unroll
        for (int w = 0; w < 4; w++) a = m3(a, byte_pairs<B, 0>(word_of(r, w)), byte_pairs<B, 1>(word_of(r, w)));
        return a;
    }
    static GR_DEV type fold1(type a, B x, u64) { return m3(a, both(x), both(x)); }
    static GR_DEV type merge(type a, type b) { return m3(a, b, b); }
    static GR_DEV B value(type a) { return Op::combine(B(i16(a & 0xffffu)), B(i16(a >> 16))); }
};
template <> struct ThreadAcc<Min<i8>, i8> : PackedByteMinMax<Min<i8>, i8> {};
template <> struct ThreadAcc<Max<i8>, i8> : PackedByteMinMax<Max<i8>, i8> {};
template <> struct ThreadAcc<Min<u8>, u8> : PackedByteMinMax<Min<u8>, u8> {};
template <> struct ThreadAcc<Max<u8>, u8> : PackedByteMinMax<Max<u8>, u8> {};

/* int8/uint8 argmin/argmax: each vector's extreme first (the DPX folds above, a few instructions for 16
 * bytes), and only a vector whose extreme beats the thread's best is kept -- its four words and its
 * first element's index; the position inside it is found once, at the end. The per-element compare and
 * select of value and index ran at 38% of the read kernel on an H100 (make bench, the ops table).
 * A thread sees its elements in increasing index order, so a strictly better value replaces the best
 * and an equal one does not: the first byte equal to the best in the kept vector is the first
 * occurrence. An accumulator still at the identity (index 2^64 - 1) takes the first element it meets,
 * equal or not, as ArgExtreme's combine would. */
template <class B, bool kMin> struct ByteArg {
    using Op = ArgExtreme<B, kMin>;
    using P = PackedByteMinMax<conditional_t<kMin, Min<B>, Max<B>>, B>;
    struct type {
        u64 base;               /* the kept vector's first index (vec), or the best element's (!vec) */
        unsigned w[4];
        int best, vec;
    };
    static GR_DEV bool takes(const type &a, int x) { return a.base == ~0ull || (kMin ? x < a.best : x > a.best); }
    static GR_DEV type init() { return {~0ull, {0u, 0u, 0u, 0u}, int(Op::identity().value), 0}; }
    static GR_DEV type fold(type a, const Vec16<B> &r, u64 i) {
        const int m = int(P::value(P::fold(P::init(), r, i)));
        if (takes(a, m)) {
            a.base = i;
            a.best = m;
            a.vec = 1;
#pragma unroll
            for (int w = 0; w < 4; w++) a.w[w] = word_of(r, w);
        }
        return a;
    }
    static GR_DEV type fold1(type a, B x, u64 i) {
        if (takes(a, int(x))) {
            a.base = i;
            a.best = int(x);
            a.vec = 0;
        }
        return a;
    }
    static GR_DEV typename Op::acc_t value(const type &a) {
        u64 index = a.base;
        if (a.vec) {
            int k = 15;
#pragma unroll
            for (int j = 15; j >= 0; j--)
                if (int(B((a.w[j / 4] >> (8 * (j % 4))) & 0xffu)) == a.best) k = j;
            index += u64(k);
        }
        return {index, B(a.best)};
    }
    static GR_DEV type merge(const type &a, const type &b) {
        const typename Op::acc_t c = Op::combine(value(a), value(b));
        return {c.index, {0u, 0u, 0u, 0u}, int(c.value), 0};
    }
};
template <> struct ThreadAcc<ArgExtreme<i8, true>, i8> : ByteArg<i8, true> {};
template <> struct ThreadAcc<ArgExtreme<i8, false>, i8> : ByteArg<i8, false> {};
template <> struct ThreadAcc<ArgExtreme<u8, true>, u8> : ByteArg<u8, true> {};
template <> struct ThreadAcc<ArgExtreme<u8, false>, u8> : ByteArg<u8, false> {};

/* var / std over floats (and 64-bit integers): Welford's update costs a division per element, which
 * held float32 at 78% of the read kernel on an H100. A vector is folded as a batch instead: its mean
 * and its sum of squared deviations from that mean, in registers (two passes over a few values), then
 * one Chan merge into the thread's running value -- one division per vector, and every step still a
 * Welford/Chan step, with the deviations taken from a nearby mean. */
template <class F, class In> struct ThreadAcc<Welford<F>, In> {
    using Op = Welford<F>;
    using type = typename Op::acc_t;
    static GR_DEV type init() { return Op::identity(); }
    static GR_DEV type fold(type a, const Vec16<In> &r, u64) {
        constexpr int k = Vec16<In>::kCount;
        F x[k];
        if constexpr (is_small_float_v<In>) {       /* widened a word at a time (small_float_fold.cuh) */
            float f[k];
            widen_vec(r, f);
#pragma unroll
            for (int j = 0; j < k; j++) x[j] = F(f[j]);
        } else {
#pragma unroll
            for (int j = 0; j < k; j++) x[j] = F(r.v[j]);
        }
        F sum = F(0);
#pragma unroll
        for (int j = 0; j < k; j++) sum += x[j];
        const F mean = sum * (F(1) / F(k));          /* k is a power of two: exact */
        F m2 = F(0);
#pragma unroll
        for (int j = 0; j < k; j++) {
            const F d = x[j] - mean;
            m2 += d * d;
        }
        return Op::combine(a, {u64(k), mean, m2});
    }
    static GR_DEV type fold1(type a, In x, u64) { return Op::combine(a, Op::load(x)); }
    static GR_DEV type merge(type a, type b) { return Op::combine(a, b); }
    static GR_DEV type value(type a) { return a; }
};

/* var / std / norm of int8 and uint8: the exact sum and sum of squares of a vector are eight __dp4a
 * (four with ones, four of each word with itself); a thread's sum of squares stays in 64 bits (2^20 per
 * vector at most) and widens to 128 once, at the end. */
template <class B> GR_DEV int byte_dot(unsigned a, unsigned b, int c) {
    if constexpr (is_signed_v<B>) return __dp4a(int(a), int(b), c);
    else return int(__dp4a(a, b, unsigned(c)));
}

template <class Op, class B> struct ByteSquares {
    struct type {
        u64 n;
        long long sum;
        u64 sumsq;
    };
    static GR_DEV type init() { return {0, 0, 0}; }
    static GR_DEV type fold(type a, const Vec16<B> &r, u64) {
        int s = 0, q = 0;
#pragma unroll
        for (int w = 0; w < 4; w++) {
            s = byte_dot<B>(word_of(r, w), 0x01010101u, s);
            q = byte_dot<B>(word_of(r, w), word_of(r, w), q);
        }
        return {a.n + 16, a.sum + s, a.sumsq + u64(unsigned(q))};
    }
    static GR_DEV type fold1(type a, B x, u64) { return {a.n + 1, a.sum + x, a.sumsq + square_of(x)}; }
    static GR_DEV type merge(type a, type b) { return {a.n + b.n, a.sum + b.sum, a.sumsq + b.sumsq}; }
    static GR_DEV typename Op::acc_t value(type a) {
        if constexpr (is_same_v<typename Op::acc_t, MomentsAcc>) return {a.n, u64(a.sum), {a.sumsq, 0}};
        else return {{a.sumsq, 0}};
    }
};
template <> struct ThreadAcc<Moments<i8>, i8> : ByteSquares<Moments<i8>, i8> {};
template <> struct ThreadAcc<Moments<u8>, u8> : ByteSquares<Moments<u8>, u8> {};
template <> struct ThreadAcc<Squares<i8>, i8> : ByteSquares<Squares<i8>, i8> {};
template <> struct ThreadAcc<Squares<u8>, u8> : ByteSquares<Squares<u8>, u8> {};

/* Grid-stride accumulation of this thread's share of in[0, n): UNROLL independent 16-byte loads in
 * flight per iteration, each folded into its own accumulator (independent dependency chains), the
 * accumulators merged at the end. UNROLL = 2 measured best on an H200 (experiments/tuning/tune.cu):
 * more loads per iteration pushed the kernel past 32 registers, which costs occupancy, while one
 * accumulator serialised the folds. The elements before the first 16-byte boundary (a slice may start
 * anywhere) and after the last whole vector are taken one by one by the first threads: no tail is ever
 * dropped. `first` is the index of in[0] among the reduction's elements (ops that return an index
 * see first + k); a thread visits its elements in increasing index order. Elements that do not divide
 * 16 bytes (accumulators of three or more values, in passes over partials) are taken one at a time.
 * The combination order depends only on n and the launch shape: results are reproducible. */
template <class Op, class In, int UNROLL>
GR_DEV typename Op::acc_t thread_accumulate(const In *__restrict__ in, size_t n, u64 first = 0) {
    using T = ThreadAcc<Op, In>;
    const size_t tid = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
    const size_t threads = size_t(gridDim.x) * blockDim.x;
    if constexpr (!vectorizable_v<In>) {
        typename T::type acc = T::init();
        for (size_t i = tid; i < n; i += threads) acc = T::fold1(acc, in[i], first + i);
        return T::value(acc);
    } else {
        using V = Vec16<In>;
        constexpr int kV = V::kCount;
        typename T::type acc[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; u++) acc[u] = T::init();

        size_t head = ((16 - (reinterpret_cast<uptr>(in) & 15)) & 15) / sizeof(In);
        if (head > n) head = n;
        if (tid < head) acc[0] = T::fold1(acc[0], in[tid], first + tid);

        const V *vin = reinterpret_cast<const V *>(in + head);
        const size_t nvec = (n - head) / kV;
        const u64 at = first + head;         /* the index of vin[0]'s first element */
        size_t i = tid;
        for (; i + (UNROLL - 1) * threads < nvec; i += UNROLL * threads) {
            V r[UNROLL];
#pragma unroll
            for (int u = 0; u < UNROLL; u++) r[u] = vin[i + u * threads];
#pragma unroll
            for (int u = 0; u < UNROLL; u++) acc[u] = T::fold(acc[u], r[u], at + (i + u * threads) * kV);
        }
        for (; i < nvec; i += threads) acc[0] = T::fold(acc[0], vin[i], at + i * kV);

        const size_t tail = head + nvec * kV;
        if (tid < n - tail) acc[0] = T::fold1(acc[0], in[tail + tid], first + tail + tid);
        /* the unrolled accumulators saw interleaved elements: merged in order of their first element, an
         * argmin's ties still go to the lower index because its combine compares indices */
#pragma unroll
        for (int u = 1; u < UNROLL; u++) acc[0] = T::merge(acc[0], acc[u]);
        return T::value(acc[0]);
    }
}

}  // namespace gr
