/*
 * ops.cuh -- the op functors: the only device definition of sum, prod, min, max, and, or.
 *
 * An op functor has an accumulator type acc_t, identity(), load(x) (one input element into the
 * accumulator: a widening, or x != 0 for and/or) and combine(a, b). The same functor serves the first
 * pass (In = the buffer's dtype) and later passes (In = acc_t), because load() of an accumulator value
 * is the value itself. OpOf<op, In, Acc> names the functor of a built-in op (gr.h's GR_OP_LIST) for an
 * input and an accumulator dtype; the dispatch (launch.cuh) goes through it, so a new op is a functor
 * and an OpOf here, and a descriptor in engine/ops.c. NVRTC-clean (core.cuh): operators compiled at
 * run time use the same functors' shape.
 */
#pragma once

#include "core.cuh"

namespace gr {

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
        if constexpr (limits<T>::has_infinity) return limits<T>::infinity();
        else return limits<T>::max();
    }
    template <class U> static GR_HOSTDEV T load(U x) { return T(x); }
    static GR_HOSTDEV T combine(T a, T b) { return a != a ? a : b != b ? b : (b < a ? b : a); }
};

template <class T> struct Max {
    using acc_t = T;
    static GR_HOSTDEV T identity() {
        if constexpr (limits<T>::has_infinity) return -limits<T>::infinity();
        else return limits<T>::lowest();
    }
    template <class U> static GR_HOSTDEV T load(U x) { return T(x); }
    static GR_HOSTDEV T combine(T a, T b) { return a != a ? a : b != b ? b : (b > a ? b : a); }
};

/* Logical and/or over "x != 0" flags, kept as bytes. NaN is not zero, so it counts as true. */
struct And {
    using acc_t = u8;
    static GR_HOSTDEV u8 identity() { return 1; }
    template <class T> static GR_HOSTDEV u8 load(T x) { return x != T(0); }
    static GR_HOSTDEV u8 combine(u8 a, u8 b) { return a & b; }
};

struct Or {
    using acc_t = u8;
    static GR_HOSTDEV u8 identity() { return 0; }
    template <class T> static GR_HOSTDEV u8 load(T x) { return x != T(0); }
    static GR_HOSTDEV u8 combine(u8 a, u8 b) { return a | b; }
};

/* Whether load() is the identity for inputs of type In (Thrust can then skip the transform). */
template <class Op, class In> constexpr bool plain_load_v =
    is_same_v<In, typename Op::acc_t> && !is_same_v<Op, And> && !is_same_v<Op, Or>;

/* ---- the functor of each built-in op, by its id ---------------------------------------------------
 * OpOf<id, In, Acc>::type is the functor for inputs In with the accumulator dtype's C type Acc;
 * `valid` is false for pairs the engine never asks for (the dispatch then reports an invalid value
 * instead of instantiating them). Ids are gr.h's GR_SUM ... GR_OR. */
template <int Id, class In, class Acc> struct OpOf { static constexpr bool valid = false; using type = void; };

/* Sums and products: 64-bit wrapping for integers; a float's own type, or double (float32 data). */
template <class In, class Acc> constexpr bool wide_ok_v =
    is_float_v<In> ? (is_same_v<Acc, double> || is_same_v<Acc, In>)
                   : sizeof(Acc) == 8 && !is_signed_v<Acc>;     /* uint64_t, whichever its spelling */

template <class In, class Acc> struct OpOf<0, In, Acc> {
    static constexpr bool valid = wide_ok_v<In, Acc>;
    using type = Sum<conditional_t<is_float_v<In>, Acc, u64>>;
};
template <class In, class Acc> struct OpOf<1, In, Acc> {
    static constexpr bool valid = wide_ok_v<In, Acc>;
    using type = Prod<conditional_t<is_float_v<In>, Acc, u64>>;
};
template <class In, class Acc> struct OpOf<2, In, Acc> {
    static constexpr bool valid = is_same_v<Acc, In>;
    using type = Min<In>;
};
template <class In, class Acc> struct OpOf<3, In, Acc> {
    static constexpr bool valid = is_same_v<Acc, In>;
    using type = Max<In>;
};
template <class In, class Acc> struct OpOf<4, In, Acc> {
    static constexpr bool valid = is_same_v<Acc, u8>;
    using type = And;
};
template <class In, class Acc> struct OpOf<5, In, Acc> {
    static constexpr bool valid = is_same_v<Acc, u8>;
    using type = Or;
};

}  // namespace gr
