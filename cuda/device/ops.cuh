/*
 * ops.cuh -- the op functors: the device definition of every built-in op.
 *
 * An op functor has an accumulator type acc_t, identity(), load(x) -- or load(x, i) where kIndexed is
 * set: the element's 0-based index is part of the value (argmin, argmax) -- and combine(a, b). The
 * accumulator layouts are the host's byte for byte, since host finishes combine device partials: the
 * structs of several values, their merges and the NaN and tie rules are engine/ops/op_math.h's, which the
 * host compiles too (engine/ops/host_ops.c). OpOf<id, In, Acc> names the functor of a built-in op
 * (engine/lists.h's GR_OP_LIST) for an input and an accumulator dtype; the dispatch (launch.cuh) goes
 * through it, so a new op is a functor and an OpOf here, and a descriptor in engine/ops/ops.c
 * (docs/extending.md). AccInput<Op> is the same op over its own accumulators, for the passes that
 * combine partials. NVRTC-clean (core.cuh; op_math.h includes nothing under CUDA).
 */
#pragma once

#include "../../engine/lists.h"
#include "../../engine/ops/op_math.h"
#include "core.cuh"
#include "small_float.cuh"

namespace gr {

/* The ids of the built-in ops, in gr.h's order: op_sum, op_prod, ... */
enum OpId : int {
#define GR_OPID_(E, name) op_##name,
    GR_OP_LIST(GR_OPID_)
#undef GR_OPID_
    op_count_of_ops
};

/* ---- one-value accumulators ------------------------------------------------------------------------ */

/* Integer sums and products use unsigned 64-bit accumulators: wrapping is defined there, and the bits
 * equal those of the signed result (two's complement), so one instantiation serves both signs. */
template <class Acc> struct Sum {
    using acc_t = Acc;
    static constexpr bool kIndexed = false;
    static GR_HOSTDEV Acc identity() { return Acc(0); }
    template <class T> static GR_HOSTDEV Acc load(T x) { return Acc(x); }
    static GR_HOSTDEV Acc combine(Acc a, Acc b) { return a + b; }
};

template <class Acc> struct Prod {
    using acc_t = Acc;
    static constexpr bool kIndexed = false;
    static GR_HOSTDEV Acc identity() { return Acc(1); }
    template <class T> static GR_HOSTDEV Acc load(T x) { return Acc(x); }
    static GR_HOSTDEV Acc combine(Acc a, Acc b) { return a * b; }
};

/* Min and max stay in the input type. A NaN wins: once one is in, it propagates (op_math.h's
 * GR_EXTREME; x != x is false for integers, and the compiler drops the tests). */
template <class T> struct Min {
    using acc_t = T;
    static constexpr bool kIndexed = false;
    static GR_HOSTDEV T identity() {
        if constexpr (limits<T>::has_infinity) return limits<T>::infinity();
        else return limits<T>::max();
    }
    template <class U> static GR_HOSTDEV T load(U x) { return T(x); }
    static GR_HOSTDEV T combine(T a, T b) { return GR_EXTREME(a, b, a != a, b != b, b < a); }
};

template <class T> struct Max {
    using acc_t = T;
    static constexpr bool kIndexed = false;
    static GR_HOSTDEV T identity() {
        if constexpr (limits<T>::has_infinity) return -limits<T>::infinity();
        else return limits<T>::lowest();
    }
    template <class U> static GR_HOSTDEV T load(U x) { return T(x); }
    static GR_HOSTDEV T combine(T a, T b) { return GR_EXTREME(a, b, a != a, b != b, b > a); }
};

/* Logical and/or over "x != 0" flags, kept as bytes. NaN is not zero, so it counts as true. */
struct And {
    using acc_t = u8;
    static constexpr bool kIndexed = false;
    static GR_HOSTDEV u8 identity() { return 1; }
    template <class T> static GR_HOSTDEV u8 load(T x) { return nonzero(x); }
    static GR_HOSTDEV u8 combine(u8 a, u8 b) { return a & b; }
};

struct Or {
    using acc_t = u8;
    static constexpr bool kIndexed = false;
    static GR_HOSTDEV u8 identity() { return 0; }
    template <class T> static GR_HOSTDEV u8 load(T x) { return nonzero(x); }
    static GR_HOSTDEV u8 combine(u8 a, u8 b) { return a | b; }
};

/* The number of non-zero elements (NaN is not zero). */
struct Count {
    using acc_t = u64;
    static constexpr bool kIndexed = false;
    static GR_HOSTDEV u64 identity() { return 0; }
    template <class T> static GR_HOSTDEV u64 load(T x) { return nonzero(x); }
    static GR_HOSTDEV u64 combine(u64 a, u64 b) { return a + b; }
};

/* The sum of squares, in the accumulator's type (64-bit wrapping for integers, like their sums). */
template <class Acc> struct SumSq {
    using acc_t = Acc;
    static constexpr bool kIndexed = false;
    static GR_HOSTDEV Acc identity() { return Acc(0); }
    template <class T> static GR_HOSTDEV Acc load(T x) {
        const Acc v = Acc(x);
        return v * v;
    }
    static GR_HOSTDEV Acc combine(Acc a, Acc b) { return a + b; }
};

/* The sum with NaN taken as zero. */
template <class Acc> struct NanSum {
    using acc_t = Acc;
    static constexpr bool kIndexed = false;
    static GR_HOSTDEV Acc identity() { return Acc(0); }
    template <class T> static GR_HOSTDEV Acc load(T x) { return x != x ? Acc(0) : Acc(x); }
    static GR_HOSTDEV Acc combine(Acc a, Acc b) { return a + b; }
};

/* Min and max that skip NaN: the identity is NaN, which loses to any number, so all-NaN gives NaN
 * (GR_RETURN_NANEXTREME). For integers these are Min and Max. */
template <class T, bool kMin> struct NanExtreme {
    using acc_t = T;
    static constexpr bool kIndexed = false;
    static GR_HOSTDEV T identity() {
        if constexpr (is_small_float_v<T>) return limits<T>::quiet_nan();
        else if constexpr (limits<T>::has_infinity) return T(limits<T>::infinity() - limits<T>::infinity());
        else return kMin ? Min<T>::identity() : Max<T>::identity();
    }
    template <class U> static GR_HOSTDEV T load(U x) { return T(x); }
    static GR_HOSTDEV T combine(T a, T b) { GR_RETURN_NANEXTREME(a, b, a != a, b != b, kMin ? b < a : b > a); }
};

/* |x| in the accumulator's type: a float with its sign cleared (x <= 0 catches -0.0, and 0 - x is exact:
 * |-0.0| = +0.0; NaN fails the test and stays NaN; op_math.h's GR_FABS keeps -0.0, which a square
 * forgives and absmax would not), an integer's magnitude by unsigned wrapping, which absmax's unsigned
 * accumulator of the input's width holds exactly (|-128| = 128 in a u8) and asum's 64 bits wrap like
 * Sum. host_ops.c's GR_MAP_ABS is the host's, the same steps. */
template <class Acc, class T> GR_HOSTDEV Acc magnitude(T x) {
    if constexpr (is_small_float_v<Acc>) {
        return Acc::of_bits(x.bits & (Acc::kSign - 1u));     /* absmax keeps a small float: its sign cleared */
    } else if constexpr (is_float_v<T>) {
        const Acc v = Acc(x);
        return v <= Acc(0) ? Acc(0) - v : v;
    } else if constexpr (is_signed_v<T>) {
        return x < T(0) ? Acc(Acc(0) - Acc(x)) : Acc(x);
    } else {
        return Acc(x);              /* nvcc warns of x < 0 for an unsigned T */
    }
}

/* absmax: the largest |x|. The accumulator is the input's float type, or for integers the unsigned
 * type of the input's width (engine/ops/ops.c's GR_ACC_MAGNITUDE); the identity is 0, below every |x|
 * (an empty absmax is 0); a NaN wins as in Max. */
template <class Acc> struct AbsMax {
    using acc_t = Acc;
    static constexpr bool kIndexed = false;
    static GR_HOSTDEV Acc identity() { return Acc(0); }
    template <class T> static GR_HOSTDEV Acc load(T x) { return magnitude<Acc>(x); }
    static GR_HOSTDEV Acc combine(Acc a, Acc b) { return GR_EXTREME(a, b, a != a, b != b, b > a); }
};

/* asum: the sum of |x|, in the accumulator's type (64-bit wrapping for integers, like Sum). */
template <class Acc> struct AbsSum {
    using acc_t = Acc;
    static constexpr bool kIndexed = false;
    static GR_HOSTDEV Acc identity() { return Acc(0); }
    template <class T> static GR_HOSTDEV Acc load(T x) { return magnitude<Acc>(x); }
    static GR_HOSTDEV Acc combine(Acc a, Acc b) { return a + b; }
};

/* ---- accumulators of several values ---------------------------------------------------------------- */

/* argmin / argmax: the value and the 0-based index of its first occurrence. */
template <class T> struct ArgAcc {
    u64 index;
    T value;
};

/* The more extreme value wins; a NaN is the most extreme of all; ties go to the lower index, so the
 * first occurrence wins and the identity (GR_NO_INDEX) loses every tie (GR_RETURN_ARG). */
template <class T, bool kMin> struct ArgExtreme {
    using acc_t = ArgAcc<T>;
    static constexpr bool kIndexed = true;
    static GR_HOSTDEV acc_t identity() { return {GR_NO_INDEX, kMin ? Min<T>::identity() : Max<T>::identity()}; }
    template <class U> static GR_HOSTDEV acc_t load(U x, u64 i) { return {i, T(x)}; }
    static GR_HOSTDEV acc_t combine(acc_t a, acc_t b) {
        GR_RETURN_ARG(a, b, a.value != a.value, b.value != b.value, kMin ? b.value < a.value : b.value > a.value,
                      kMin ? a.value < b.value : a.value > b.value, a.index, b.index);
    }
};

/* minmax: both extremes in one pass, each with Min's and Max's NaN rule. */
template <class T> struct alignas(sizeof(T) < 4 ? 4 : sizeof(T)) MinMaxAcc {
    T lo, hi;
};

template <class T> struct MinMax {
    using acc_t = MinMaxAcc<T>;
    static constexpr bool kIndexed = false;
    static GR_HOSTDEV acc_t identity() { return {Min<T>::identity(), Max<T>::identity()}; }
    template <class U> static GR_HOSTDEV acc_t load(U x) { return {T(x), T(x)}; }
    static GR_HOSTDEV acc_t combine(acc_t a, acc_t b) {
        return {Min<T>::combine(a.lo, b.lo), Max<T>::combine(a.hi, b.hi)};
    }
};

/* The accumulator structs of op_math.h that hold floats, by F (float or double). */
template <class F> struct FloatAccs;
template <> struct FloatAccs<float> {
    using welford = gr_welford_f32;
    using norm = gr_norm_f32;
    using counted = gr_counted_f32;
};
template <> struct FloatAccs<double> {
    using welford = gr_welford_f64;
    using norm = gr_norm_f64;
    using counted = gr_counted_f64;
};

/* var / std: Welford's running count, mean and sum of squared deviations, merged with Chan's formula
 * (op_math.h's gr_welford_merge). */
template <class F> using WelfordAcc = typename FloatAccs<F>::welford;

template <class F> struct Welford {
    using acc_t = WelfordAcc<F>;
    static constexpr bool kIndexed = false;
    static GR_HOSTDEV acc_t identity() { return {0, F(0), F(0)}; }
    template <class U> static GR_HOSTDEV acc_t load(U x) { return gr_welford_load(F(x)); }
    static GR_HOSTDEV acc_t combine(acc_t a, acc_t b) { return gr_welford_merge(a, b); }
};

/* var / std / norm of integers of up to 32 bits: exact sums instead, which need no division per
 * element, give the same bits in any order, and let 1-byte data use the dot-product instructions
 * (thread_load.cuh). The sum of squares is 128 bits wide (two words, low first): a square of a 32-bit
 * integer is below 2^64, so four of them can already carry. engine/ops/ops.c's gr_op_family chooses the
 * same way; both sides finish the result with op_math.h's gr_moments_m2. */
template <class In> constexpr bool exact_int_v = !is_float_v<In> && sizeof(In) <= 4;

/* x^2 of an integer of up to 32 bits, exactly. */
template <class In> GR_HOSTDEV u64 square_of(In x) {
    if constexpr (is_signed_v<In>) return gr_square_signed((long long)x);
    else return gr_square_unsigned(u64(x));
}

using MomentsAcc = gr_moments;      /* the sum's bits: two's complement when the input is signed */

template <class In> struct Moments {
    using acc_t = MomentsAcc;
    static constexpr bool kIndexed = false;
    static GR_HOSTDEV acc_t identity() { return {0, 0, {0, 0}}; }
    template <class U> static GR_HOSTDEV acc_t load(U x) { return {1, u64((long long)x), {square_of(x), 0}}; }
    static GR_HOSTDEV acc_t combine(acc_t a, acc_t b) { return gr_moments_merge(a, b); }
};

using SquaresAcc = gr_squares;

template <class In> struct Squares {
    using acc_t = SquaresAcc;
    static constexpr bool kIndexed = false;
    static GR_HOSTDEV acc_t identity() { return {{0, 0}}; }
    template <class U> static GR_HOSTDEV acc_t load(U x) { return {{square_of(x), 0}}; }
    static GR_HOSTDEV acc_t combine(acc_t a, acc_t b) { return gr_squares_merge(a, b); }
};

/* norm: Blue's three sums of squares (LAPACK's nrm2 since 3.10): elements above tbig scaled down by
 * sbig, below tsml up by ssml, before they are squared, so no square overflows or underflows; the three
 * sums are joined at the end (op_math.h, where the constants are derived). */
template <class F> using NormAcc = typename FloatAccs<F>::norm;

template <class F> struct Norm {
    using acc_t = NormAcc<F>;
    static constexpr bool kIndexed = false;
    static GR_HOSTDEV acc_t identity() { return {F(0), F(0), F(0)}; }
    template <class U> static GR_HOSTDEV acc_t load(U x) { return gr_norm_load(F(x)); }
    static GR_HOSTDEV acc_t combine(acc_t a, acc_t b) { return gr_norm_merge(a, b); }
};

/* nanmean: the sum of the elements that are not NaN, and how many they are. */
template <class F> using CountedAcc = typename FloatAccs<F>::counted;

template <class F> struct NanMean {
    using acc_t = CountedAcc<F>;
    static constexpr bool kIndexed = false;
    static GR_HOSTDEV acc_t identity() { return {0, F(0)}; }
    /* the NaN test on the element's own type, before it is converted */
    template <class U> static GR_HOSTDEV acc_t load(U x) {
        if (x != x) return {0, F(0)};
        return {1, F(x)};
    }
    static GR_HOSTDEV acc_t combine(acc_t a, acc_t b) { return gr_counted_merge(a, b); }
};

/* ---- passes over accumulators -------------------------------------------------------------------- */

/* The op over its own accumulators: what a pass over partials runs (the elements are accumulators
 * already, so loading one is taking it as it is). */
template <class Op> struct AccInput {
    using acc_t = typename Op::acc_t;
    static constexpr bool kIndexed = false;
    static GR_HOSTDEV acc_t identity() { return Op::identity(); }
    static GR_HOSTDEV acc_t load(acc_t x) { return x; }
    static GR_HOSTDEV acc_t combine(acc_t a, acc_t b) { return Op::combine(a, b); }
};

/* Whether load() is the identity on the op's own accumulator values: then a pass over partials can run
 * the op itself (the classic kernels do), and Thrust can skip the transform. */
template <class Op> constexpr bool load_keeps_acc_v = false;
template <class A> constexpr bool load_keeps_acc_v<Sum<A>> = true;
template <class A> constexpr bool load_keeps_acc_v<Prod<A>> = true;
template <class T> constexpr bool load_keeps_acc_v<Min<T>> = true;
template <class T> constexpr bool load_keeps_acc_v<Max<T>> = true;
template <> constexpr bool load_keeps_acc_v<And> = true;
template <> constexpr bool load_keeps_acc_v<Or> = true;

/* Whether load() is the identity for inputs of type In (Thrust can then skip the transform). */
template <class Op, class In> constexpr bool plain_load_v =
    is_same_v<In, typename Op::acc_t> && !is_same_v<Op, And> && !is_same_v<Op, Or>;

/* An element into an accumulator, with its index where the op wants one. */
template <class Op, class In> GR_HOSTDEV typename Op::acc_t load_at(In x, u64 i) {
    if constexpr (Op::kIndexed) return Op::load(x, i);
    else return Op::load(x);
}

/* ---- the functor of each built-in op, by its id ---------------------------------------------------
 * OpOf<id, In, Acc>::type is the functor for inputs In with the accumulator dtype's C type Acc;
 * `valid` is false for pairs the engine never asks for (the dispatch then reports an invalid value
 * instead of instantiating them). */
template <int Id, class In, class Acc> struct OpOf { static constexpr bool valid = false; using type = void; };

/* The accumulator rules of engine/ops/ops.c: wide (integers: 64-bit wrapping; floats: their float_acc
 * or float64), the input itself, or float (integers: float64; floats: their float_acc or float64). A
 * float's float_acc is its own type, float32 for the small floats (small_float.cuh). */
template <class In, class Acc> constexpr bool wide_ok_v =
    is_float_v<In> ? (is_same_v<Acc, double> || is_same_v<Acc, float_acc_t<In>>)
                   : sizeof(Acc) == 8 && !is_signed_v<Acc>;     /* uint64_t, whichever its spelling */
template <class In, class Acc> constexpr bool float_ok_v =
    is_float_v<In> ? (is_same_v<Acc, double> || is_same_v<Acc, float_acc_t<In>>) : is_same_v<Acc, double>;
template <class In, class Acc> using wide_t = conditional_t<is_float_v<In>, Acc, u64>;
/* absmax's rule: floats keep their type, integers take the unsigned type of their width. */
template <class In, class Acc> constexpr bool magnitude_ok_v =
    is_float_v<In> ? is_same_v<Acc, In> : !is_float_v<Acc> && !is_signed_v<Acc> && sizeof(Acc) == sizeof(In);

#define GR_OPOF(ID, VALID, ...)                                                                          \
    template <class In, class Acc> struct OpOf<ID, In, Acc> {                                            \
        static constexpr bool valid = VALID;                                                             \
        using type = __VA_ARGS__;                                                                        \
    };
GR_OPOF(op_sum, (wide_ok_v<In, Acc>), Sum<wide_t<In, Acc>>)
GR_OPOF(op_prod, (wide_ok_v<In, Acc>), Prod<wide_t<In, Acc>>)
GR_OPOF(op_min, (is_same_v<Acc, In>), Min<In>)
GR_OPOF(op_max, (is_same_v<Acc, In>), Max<In>)
GR_OPOF(op_and, (is_same_v<Acc, u8>), And)
GR_OPOF(op_or, (is_same_v<Acc, u8>), Or)
GR_OPOF(op_count, (sizeof(Acc) == 8 && !is_signed_v<Acc> && !is_float_v<Acc>), Count)
GR_OPOF(op_mean, (wide_ok_v<In, Acc>), Sum<wide_t<In, Acc>>)
template <class In, class Acc> using moments_t =
    conditional_t<exact_int_v<In>, Moments<In>, Welford<conditional_t<is_float_v<Acc>, Acc, double>>>;
GR_OPOF(op_var, (float_ok_v<In, Acc>), moments_t<In, Acc>)
GR_OPOF(op_std, (float_ok_v<In, Acc>), moments_t<In, Acc>)
GR_OPOF(op_argmin, (is_same_v<Acc, In>), ArgExtreme<In, true>)
GR_OPOF(op_argmax, (is_same_v<Acc, In>), ArgExtreme<In, false>)
GR_OPOF(op_minmax, (is_same_v<Acc, In>), MinMax<In>)
GR_OPOF(op_sumsq, (wide_ok_v<In, Acc>), SumSq<wide_t<In, Acc>>)
GR_OPOF(op_norm, (float_ok_v<In, Acc>), conditional_t<exact_int_v<In>, Squares<In>, Norm<conditional_t<is_float_v<Acc>, Acc, double>>>)
GR_OPOF(op_nansum, (wide_ok_v<In, Acc>), conditional_t<is_float_v<In>, NanSum<wide_t<In, Acc>>, Sum<wide_t<In, Acc>>>)
GR_OPOF(op_nanmin, (is_same_v<Acc, In>), conditional_t<is_float_v<In>, NanExtreme<In, true>, Min<In>>)
GR_OPOF(op_nanmax, (is_same_v<Acc, In>), conditional_t<is_float_v<In>, NanExtreme<In, false>, Max<In>>)
GR_OPOF(op_nanmean, (float_ok_v<In, Acc>), NanMean<conditional_t<is_float_v<Acc>, Acc, double>>)
GR_OPOF(op_absmax, (magnitude_ok_v<In, Acc>), AbsMax<Acc>)
GR_OPOF(op_asum, (wide_ok_v<In, Acc>), AbsSum<wide_t<In, Acc>>)
#undef GR_OPOF

}  // namespace gr
