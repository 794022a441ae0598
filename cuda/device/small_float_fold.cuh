/*
 * small_float_fold.cuh -- a thread's 16-byte vectors of float16, bfloat16 and FP8 elements folded at
 * memory speed (thread_load.cuh's ThreadAcc and fold_vec take these forms for the small floats).
 * Included by thread_load.cuh, between its Vec16 and its fold_vec. NVRTC-clean (core.cuh, small_float.cuh).
 *
 * Widening an element at a time (small_float.cuh) costs too many instructions where a 16-byte load holds
 * eight or sixteen elements: on an H100 at 2^28, bfloat16 max, absmax and argmax ran at 65% of the read
 * kernel, float8_e4m3 absmax at 19% and its sum at 42% (make bench-types). Here a vector is taken a
 * 32-bit word at a time:
 *   - widen_vec: every element to float, exactly -- bfloat16 by a shift, float16 by cvt.f32.f16, FP8
 *     through float16 pairs: float8_e5m2 is float16's top byte (one PRMT makes a pair), float8_e4m3
 *     pairs are the hardware's cvt.rn.f16x2.e4m3x2 (sm_89 and up; small_floats.h's integer widening
 *     elsewhere). What the float-accumulating ops (sum, mean, var, asum, nansum, ...) load.
 *   - PackedExtreme: min and max, and their NaN-skipping forms, in two 16-bit lanes of a word with the
 *     hardware's min/max of f16x2 or bf16x2 pairs (the FP8 formats widened exactly to float16 pairs):
 *     one instruction per two elements; the lanes meet once, at the end.
 *   - SmallArg: argmin and argmax, each vector's extreme in those lanes before any index is looked at.
 *   - PackedAbsMax: absmax on the patterns' magnitudes as unsigned integers. In these sign-magnitude
 *     formats a larger magnitude pattern is a larger |x|, and the NaN patterns are the largest of all,
 *     so the integer maximum is absmax with NaN winning.
 *   - SmallNorm: norm with the vector's largest magnitude (the integer maximum above) deciding whether
 *     every square of the vector lies in Blue's middle band, whose sum needs no scaling.
 * A NaN these forms produce is the hardware's (or the format's) quiet NaN, not the element's own bits.
 */
#pragma once

#include "core.cuh"
#include "ops.cuh"
#include "small_float.cuh"

namespace gr {

/* ---- pairs of elements in a word ------------------------------------------------------------------- */

GR_DEV unsigned permute(unsigned w, unsigned selector) {
    unsigned r;
    asm("prmt.b32 %0, %1, 0, %2;" : "=r"(r) : "r"(w), "r"(selector));
    return r;
}

/* The two float16 halves of a word, widened exactly. */
GR_DEV void widen_f16x2(unsigned w, float &lo, float &hi) {
    asm("{\n\t.reg .f16 l, h;\n\tmov.b32 {l, h}, %2;\n\tcvt.f32.f16 %0, l;\n\tcvt.f32.f16 %1, h;\n\t}"
        : "=f"(lo), "=f"(hi) : "r"(w));
}

/* A float16 pattern whose value is a float8_e4m3 value (an element, or a NaN) back to that pattern. */
GR_DEV unsigned f16_to_e4m3(unsigned h) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
    unsigned short r;
    asm("cvt.rn.satfinite.e4m3x2.f16x2 %0, %1;" : "=h"(r) : "r"(h & 0xffffu));
    return r & 0xffu;
#else
    return gr_e4m3_from_float(gr_f16_to_float(h)) & 0xffu;
#endif
}

/* Word k of a vector of elements of 1 or 2 bytes as pairs in 16-bit lanes: the word itself for the
 * 2-byte formats; for the FP8 formats, `half` 0 or 1 of it, widened exactly to a float16 pair. */
template <SmallFormat F> GR_DEV unsigned lane_pair(unsigned w, int half) {
    if constexpr (F == kFloat16 || F == kBfloat16) return w;
    else if constexpr (F == kE5M2) return permute(w, half ? 0x3424u : 0x1404u);   /* bytes to the top */
    else return e4m3x2_to_f16x2(half ? w >> 16 : w);
}

/* The lane format a format's pairs are compared in: bfloat16 its own, the others float16. */
template <SmallFormat F> constexpr bool bf16_lanes_v = F == kBfloat16;

/* An element as a lane (its pattern, or the float16 pattern of its value), and back. */
template <SmallFormat F> GR_DEV unsigned to_lane(SmallFloat<F> x) {
    if constexpr (F == kFloat16 || F == kBfloat16) return x.bits;
    else if constexpr (F == kE5M2) return unsigned(x.bits) << 8;
    else return e4m3x2_to_f16x2(x.bits) & 0xffffu;
}
template <SmallFormat F> GR_DEV SmallFloat<F> from_lane(unsigned h) {
    if constexpr (F == kFloat16 || F == kBfloat16) return SmallFloat<F>::of_bits(h & 0xffffu);
    else if constexpr (F == kE5M2) return SmallFloat<F>::of_bits((h >> 8) & 0xffu);   /* a value of the format */
    else return SmallFloat<F>::of_bits(f16_to_e4m3(h));
}

/* ---- every element to float -------------------------------------------------------------------- */

template <SmallFormat F> GR_DEV void widen_vec(const Vec16<SmallFloat<F>> &r, float (&out)[Vec16<SmallFloat<F>>::kCount]) {
    const unsigned *w = reinterpret_cast<const unsigned *>(r.v);
#pragma unroll
    for (int k = 0; k < 4; k++) {
        if constexpr (F == kBfloat16) {
            out[2 * k] = __uint_as_float(w[k] << 16);        /* a NaN stays a NaN: its quiet bit aside */
            out[2 * k + 1] = __uint_as_float(w[k] & 0xffff0000u);
        } else if constexpr (F == kFloat16) {
            widen_f16x2(w[k], out[2 * k], out[2 * k + 1]);
        } else {
            widen_f16x2(lane_pair<F>(w[k], 0), out[4 * k], out[4 * k + 1]);
            widen_f16x2(lane_pair<F>(w[k], 1), out[4 * k + 2], out[4 * k + 3]);
        }
    }
}

/* The ops whose load takes an element's value as a float (or double) and does the same with the
 * widened float: they may take widen_vec's floats instead of the elements. */
template <class Op> constexpr bool widened_load_v = false;
template <class A> constexpr bool float_acc_v = is_same_v<A, float> || is_same_v<A, double>;
template <class A> constexpr bool widened_load_v<Sum<A>> = float_acc_v<A>;
template <class A> constexpr bool widened_load_v<Prod<A>> = float_acc_v<A>;
template <class A> constexpr bool widened_load_v<SumSq<A>> = float_acc_v<A>;
template <class A> constexpr bool widened_load_v<NanSum<A>> = float_acc_v<A>;
template <class A> constexpr bool widened_load_v<AbsSum<A>> = float_acc_v<A>;
template <class A> constexpr bool widened_load_v<NanMean<A>> = float_acc_v<A>;
template <class A> constexpr bool widened_load_v<Norm<A>> = float_acc_v<A>;
template <> constexpr bool widened_load_v<And> = true;
template <> constexpr bool widened_load_v<Or> = true;
template <> constexpr bool widened_load_v<Count> = true;

/* ---- min and max in packed lanes ------------------------------------------------------------------ */

/* The lane-wise min or max of a and b (f16x2 or bf16x2), NaN winning (kNan) or NaN skipped (a lane
 * NaN in both stays NaN). */
template <bool kBf16, bool kMin, bool kNan> GR_DEV unsigned lane_extreme(unsigned a, unsigned b) {
    unsigned r;
    if constexpr (kBf16) {
        if constexpr (kMin && kNan) asm("min.NaN.bf16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
        else if constexpr (kMin) asm("min.bf16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
        else if constexpr (kNan) asm("max.NaN.bf16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
        else asm("max.bf16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
    } else {
        if constexpr (kMin && kNan) asm("min.NaN.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
        else if constexpr (kMin) asm("min.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
        else if constexpr (kNan) asm("max.NaN.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
        else asm("max.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
    }
    return r;
}

/* Min, Max (NaN wins) and NanExtreme (NaN skipped) of a small float format, in two lanes. */
template <class Op, SmallFormat F, bool kMin, bool kNan> struct PackedExtreme {
    using E = SmallFloat<F>;
    using type = unsigned;
    static GR_DEV unsigned both(E x) { return to_lane<F>(x) * 0x00010001u; }
    static GR_DEV unsigned m(unsigned a, unsigned b) { return lane_extreme<bf16_lanes_v<F>, kMin, kNan>(a, b); }
    static GR_DEV type init() { return both(Op::identity()); }
    /* a tree over the vector's pairs, then one step into the running value: a chain of eight dependent
     * min/max per FP8 vector held float8_e4m3 max at 93% of the read kernel on an H100 */
    static GR_DEV type fold(type a, const Vec16<E> &r, u64) {
        const unsigned *w = reinterpret_cast<const unsigned *>(r.v);
        if constexpr (sizeof(E) == 2) {
            return m(a, m(m(w[0], w[1]), m(w[2], w[3])));
        } else {
            unsigned p[4];
#pragma unroll
            for (int k = 0; k < 4; k++) p[k] = m(lane_pair<F>(w[k], 0), lane_pair<F>(w[k], 1));
            return m(a, m(m(p[0], p[1]), m(p[2], p[3])));
        }
    }
    static GR_DEV type fold1(type a, E x, u64) { return m(a, both(x)); }
    static GR_DEV type merge(type a, type b) { return m(a, b); }
    static GR_DEV E value(type a) { return from_lane<F>(m(a, a >> 16 | a << 16)); }
};
template <SmallFormat F> struct ThreadAcc<Min<SmallFloat<F>>, SmallFloat<F>>
    : PackedExtreme<Min<SmallFloat<F>>, F, true, true> {};
template <SmallFormat F> struct ThreadAcc<Max<SmallFloat<F>>, SmallFloat<F>>
    : PackedExtreme<Max<SmallFloat<F>>, F, false, true> {};
template <SmallFormat F, bool kMin> struct ThreadAcc<NanExtreme<SmallFloat<F>, kMin>, SmallFloat<F>>
    : PackedExtreme<NanExtreme<SmallFloat<F>, kMin>, F, kMin, false> {};

/* argmin / argmax: each vector's extreme first (the lanes above, NaN winning), and only a vector whose
 * extreme beats the thread's best is kept -- its words and its first element's index; the position in
 * it is found once, at the end (thread_load.cuh's ByteArg does the same for bytes). A thread sees its
 * elements in increasing index order, so only a strictly better value (or a first NaN) replaces the
 * best, and the first element equal to the best in the kept vector is the first occurrence. An
 * accumulator still at the identity (index 2^64 - 1) takes the first element it meets. */
template <SmallFormat F, bool kMin> struct SmallArg {
    using E = SmallFloat<F>;
    using Op = ArgExtreme<E, kMin>;
    using P = PackedExtreme<conditional_t<kMin, Min<E>, Max<E>>, F, kMin, true>;
    struct type {
        u64 base;               /* the kept vector's first index (vec), or the best element's (!vec) */
        unsigned w[4];
        unsigned best;          /* the best value as a lane (low 16 bits) */
        unsigned elem;          /* the best element's pattern (!vec) */
        int vec;
    };
    static GR_DEV float lane_value(unsigned h) {
        if constexpr (F == kBfloat16) return __uint_as_float(h << 16);
        else return f16::of_bits(h & 0xffffu).widen();
    }
    static GR_DEV bool takes(const type &a, unsigned m) {
        if (a.base == ~0ull) return true;
        const float x = lane_value(m), b = lane_value(a.best);
        return b == b && (x != x || (kMin ? x < b : x > b));
    }
    static GR_DEV type init() {
        const E e = Op::identity().value;
        return {~0ull, {0u, 0u, 0u, 0u}, to_lane<F>(e), e.bits, 0};
    }
    static GR_DEV type fold(type a, const Vec16<E> &r, u64 i) {
        const unsigned v = P::fold(P::init(), r, i);
        const unsigned m = P::m(v, v >> 16 | v << 16) & 0xffffu;
        if (takes(a, m)) {
            a.base = i;
            a.best = m;
            a.vec = 1;
#pragma unroll
            for (int k = 0; k < 4; k++) a.w[k] = reinterpret_cast<const unsigned *>(r.v)[k];
        }
        return a;
    }
    static GR_DEV type fold1(type a, E x, u64 i) {
        const unsigned m = to_lane<F>(x);
        if (takes(a, m)) {
            a.base = i;
            a.best = m;
            a.elem = x.bits;
            a.vec = 0;
        }
        return a;
    }
    static GR_DEV typename Op::acc_t value(const type &a) {
        if (!a.vec) return {a.base, E::of_bits(a.elem)};
        constexpr int kCount = Vec16<E>::kCount, kPer = 4 / int(sizeof(E));
        const float b = lane_value(a.best);
        int k = kCount - 1;
        unsigned bits = 0;
#pragma unroll
        for (int j = kCount - 1; j >= 0; j--) {
            const unsigned p = (a.w[j / kPer] >> (8 * sizeof(E) * (j % kPer))) & (sizeof(E) == 2 ? 0xffffu : 0xffu);
            const float x = lane_value(to_lane<F>(E::of_bits(p)));
            if (x == b || (b != b && x != x)) {
                k = j;
                bits = p;
            }
        }
        return {a.base + u64(k), E::of_bits(bits)};
    }
    static GR_DEV type merge(const type &a, const type &b) {
        const typename Op::acc_t c = Op::combine(value(a), value(b));
        return {c.index, {0u, 0u, 0u, 0u}, to_lane<F>(c.value), c.value.bits, 0};
    }
};
template <SmallFormat F> struct ThreadAcc<ArgExtreme<SmallFloat<F>, true>, SmallFloat<F>> : SmallArg<F, true> {};
template <SmallFormat F> struct ThreadAcc<ArgExtreme<SmallFloat<F>, false>, SmallFloat<F>> : SmallArg<F, false> {};

/* ---- magnitudes as unsigned integers ---------------------------------------------------------------- */

/* The largest magnitude pattern of a vector's elements in two 16-bit lanes (their sign bits cleared;
 * FP8 bytes spread one to a lane). */
template <SmallFormat F> GR_DEV unsigned magnitude_lanes(unsigned a, const Vec16<SmallFloat<F>> &r) {
    const unsigned *w = reinterpret_cast<const unsigned *>(r.v);
    if constexpr (sizeof(SmallFloat<F>) == 2) {
        a = __vimax3_u16x2(a, w[0] & 0x7fff7fffu, w[1] & 0x7fff7fffu);
        return __vimax3_u16x2(a, w[2] & 0x7fff7fffu, w[3] & 0x7fff7fffu);
    } else {
        /* the bytes' magnitudes in the high and the low byte of each lane, masked apart rather than
         * spread (no PRMT), and a tree of three-way maxima, two deep (a chain of four held float8_e4m3
         * absmax at 93% of the read kernel on an H100); the high bytes' lane maxima are >> 8 at the end */
        const unsigned hi = __vimax3_u16x2(w[0] & 0x7f007f00u, w[1] & 0x7f007f00u, w[2] & 0x7f007f00u);
        const unsigned lo = __vimax3_u16x2(w[0] & 0x007f007fu, w[1] & 0x007f007fu, w[2] & 0x007f007fu);
        const unsigned h = __vimax3_u16x2(hi, w[3] & 0x7f007f00u, 0u) >> 8 & 0x00ff00ffu;
        return __vimax3_u16x2(a, h, __vimax3_u16x2(lo, w[3] & 0x007f007fu, 0u));
    }
}
GR_DEV unsigned larger_lane(unsigned a) { return (a & 0xffffu) > (a >> 16) ? a & 0xffffu : a >> 16; }

template <SmallFormat F> struct PackedAbsMax {
    using E = SmallFloat<F>;
    using type = unsigned;
    static GR_DEV type init() { return 0u; }      /* |x| >= 0: AbsMax's identity */
    static GR_DEV type fold(type a, const Vec16<E> &r, u64) { return magnitude_lanes<F>(a, r); }
    static GR_DEV type fold1(type a, E x, u64) { return __vmaxu2(a, (unsigned(x.bits) & (E::kSign - 1u)) * 0x00010001u); }
    static GR_DEV type merge(type a, type b) { return __vmaxu2(a, b); }
    static GR_DEV E value(type a) { return E::of_bits(larger_lane(a)); }
};
template <SmallFormat F> struct ThreadAcc<AbsMax<SmallFloat<F>>, SmallFloat<F>> : PackedAbsMax<F> {};

/* ---- norm ------------------------------------------------------------------------------------------ */

/* The largest magnitude pattern of a format whose value is finite and at most Blue's tbig for the
 * accumulator F, and the smallest one whose square makes the others' squares negligible beside it
 * (below it every element might belong to Blue's small band). Every finite float16 and FP8 value, and
 * every bfloat16 value in the float64 accumulator, lies in the middle band; bfloat16 in float32 needs
 * both bounds: 2^52 (tbig) and 2^-20 (2^-40 as a square, where squares below 2^-126 weigh less than
 * 2^-80 of it). */
template <SmallFormat F, class A> struct MiddleBand {
    static constexpr unsigned hi = F == kFloat16 ? 0x7bffu : F == kE4M3 ? 0x7eu : F == kE5M2 ? 0x7bu
                                 : is_same_v<A, float> ? 0x5980u : 0x7f7fu;
    static constexpr unsigned lo = F == kBfloat16 && is_same_v<A, float> ? 0x3580u : 0u;
};

template <class A, SmallFormat F> struct SmallNorm {
    using Op = Norm<A>;
    using E = SmallFloat<F>;
    using type = typename Op::acc_t;
    static GR_DEV type init() { return Op::identity(); }
    static GR_DEV type fold(type a, const Vec16<E> &r, u64 i) {
        const unsigned top = larger_lane(magnitude_lanes<F>(0u, r));
        if (top - MiddleBand<F, A>::lo <= MiddleBand<F, A>::hi - MiddleBand<F, A>::lo) {   /* lo <= top <= hi */
            float f[Vec16<E>::kCount];
            widen_vec<F>(r, f);
            A s = a.medium;
#pragma unroll
            for (int k = 0; k < Vec16<E>::kCount; k++) s += A(f[k]) * A(f[k]);
            a.medium = s;
            return a;
        }
#pragma unroll
        for (int k = 0; k < Vec16<E>::kCount; k++) a = Op::combine(a, Op::load(r.v[k]));
        return a;
    }
    static GR_DEV type fold1(type a, E x, u64) { return Op::combine(a, Op::load(x)); }
    static GR_DEV type merge(type a, type b) { return Op::combine(a, b); }
    static GR_DEV type value(type a) { return a; }
};
template <class A, SmallFormat F> struct ThreadAcc<Norm<A>, SmallFloat<F>> : SmallNorm<A, F> {};

}  // namespace gr
