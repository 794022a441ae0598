/*
 * atomics.cuh -- one atomic combine per op, in global or shared memory: native where the hardware has
 * the exact operation, a compare-and-swap loop otherwise. NVRTC-clean (core.cuh).
 */
#pragma once

#include "core.cuh"
#include "ops.cuh"

namespace gr {

/* *addr = Op::combine(*addr, v) atomically, in global or shared memory. Native atomics where one does
 * exactly this, a compare-and-swap loop otherwise:
 *   sum      float, double, u64 accumulators: atomicAdd. Float sums then depend on the order in which
 *            blocks (or threads) arrive: not reproducible run to run. atom.add.f32 also flushes
 *            subnormal inputs and results to zero (PTX ISA); f64 and integers are exact.
 *   prod     every type: CAS loop (32-bit word for float, 64-bit for double and u64).
 *   min/max  int32, uint32, int64, uint64: atomicMin/atomicMax (as int, unsigned, long long, unsigned
 *            long long: same width and signedness). float, double: CAS loop, so a NaN propagates as in
 *            Op::combine. int8, uint8, int16, uint16: CAS loop on the aligned 32-bit word holding the
 *            value.
 *   and/or   1-byte flags: atomicAnd / atomicOr on the aligned 32-bit word holding the byte, with the
 *            other bytes masked to leave them as they are (and: ...ff v ff..., or: ...00 v 00...).
 * The CAS loops read the word, combine, and swap only if nobody changed it meanwhile; a failed swap
 * returns the current word and the loop combines again. They compare bits, not values, so a NaN in the
 * word can't make them spin. The other bytes of the word that holds a 1- or 2-byte value are compared
 * and written back as they are. */
namespace detail {

/* The aligned 32-bit word holding a byte (or a 2-aligned 2-byte value), and where it sits in it
 * (little-endian: byte k of the word is bits 8k..8k+7). */
GR_DEV unsigned *word_holding(void *addr, unsigned *shift) {
    const uptr at = reinterpret_cast<uptr>(addr);
    *shift = unsigned(at & 3) * 8;
    return reinterpret_cast<unsigned *>(at & ~uptr(3));
}

template <class Op> GR_DEV void atomic_combine_cas(typename Op::acc_t *addr, typename Op::acc_t v) {
    using Acc = typename Op::acc_t;
    if constexpr (sizeof(Acc) < 4) {
        /* a 1- or 2-byte value (2-byte ones are 2-aligned, so they never straddle two words) */
        using B = conditional_t<sizeof(Acc) == 1, u8, u16>;
        constexpr unsigned mask = sizeof(Acc) == 1 ? 0xffu : 0xffffu;
        unsigned shift;
        unsigned *word = word_holding(addr, &shift);
        unsigned old = *word, assumed;
        do {
            assumed = old;
            const Acc cur = bit_cast<Acc>(B(assumed >> shift));
            const unsigned bits = bit_cast<B>(Op::combine(cur, v));
            old = atomicCAS(word, assumed, (assumed & ~(mask << shift)) | (bits << shift));
        } while (old != assumed);
    } else {
        static_assert(sizeof(Acc) == 4 || sizeof(Acc) == 8, "atomic_combine: 1, 2, 4 or 8-byte values");
        using W = conditional_t<sizeof(Acc) == 4, unsigned, unsigned long long>;
        W *word = reinterpret_cast<W *>(addr);
        W old = *word, assumed;
        do {
            assumed = old;
            const W next = bit_cast<W>(Op::combine(bit_cast<Acc>(assumed), v));
            old = atomicCAS(word, assumed, next);
        } while (old != assumed);
    }
}

/* The CUDA atomicMin/atomicMax overload for a 4- or 8-byte integer type (int64_t is long on LP64, not
 * long long, so it needs the cast). */
template <class T>
using native_int_t =
    conditional_t<sizeof(T) == 4, conditional_t<is_signed_v<T>, int, unsigned>,
                       conditional_t<is_signed_v<T>, long long, unsigned long long>>;
template <class T>
constexpr bool native_minmax_v = (is_arithmetic_v<T> && !is_float_v<T>) && (sizeof(T) == 4 || sizeof(T) == 8);

template <class T> GR_DEV void atomic_op(Sum<T>, T *addr, T v) {
    if constexpr (is_same_v<T, float> || is_same_v<T, double> ||
                  is_same_v<T, unsigned long long>)
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

GR_DEV void atomic_op(And, u8 *addr, u8 v) {
    unsigned shift;
    unsigned *word = word_holding(addr, &shift);
    atomicAnd(word, ~(0xffu << shift) | (unsigned(v) << shift));
}
GR_DEV void atomic_op(Or, u8 *addr, u8 v) {
    unsigned shift;
    unsigned *word = word_holding(addr, &shift);
    atomicOr(word, unsigned(v) << shift);
}

}  // namespace detail

template <class Op> GR_DEV void atomic_combine(typename Op::acc_t *addr, typename Op::acc_t v) {
    detail::atomic_op(Op{}, addr, v);
}

}  // namespace gr
