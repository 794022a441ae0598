/*
 * small_float.cuh -- the device element types of the dtypes stored as a small float format's bit pattern
 * (engine/lists.h's format column: float16 and bfloat16), so that no kernel reads their bits as integers.
 * GR_DEVICE_TYPE(format, ctype) names a dtype's element type in a kernel: its C type for format C, else
 * the type here. NVRTC-clean (core.cuh, engine/base/small_floats.h).
 *
 * An element widens exactly to float -- every value of these formats is a float32 value -- and compares as
 * that value (a NaN unordered). Nothing here rounds: the ops accumulate in float32, or float64 with
 * acc = "float64" (ops.cuh's float_acc_t), and min/max keep the element itself, whose bits go back to the
 * host as they are. Widening, on the device:
 *   float16   the hardware's cvt.f32.f16 (what cuda_fp16.h's __half2float is), one instruction, exact.
 *             small_floats.h's gr_f16_to_float is about ten integer instructions and two branches; at
 *             eight elements per 16-byte load that is near an H100's integer issue rate at full read
 *             bandwidth, so a sum would stop being memory-bound. spec/small_floats_spec.lua checks
 *             __half2float against small_floats.h for every pattern (cuda/runtime/small_floats.cu).
 *   bfloat16  small_floats.h's gr_bf16_to_float: a shift and a NaN test, as cheap as the hardware's,
 *             and the text the host uses.
 * On the host side of nvcc (CUB and Thrust take identities there) both are small_floats.h's.
 */
#pragma once

#include "../../engine/base/small_floats.h"
#include "core.cuh"

namespace gr {

enum SmallFormat : int { kFloat16, kBfloat16 };

/* An element of a small float format: its pattern, read as the value it spells. */
template <SmallFormat F> struct alignas(2) SmallFloat {
    u16 bits;
    SmallFloat() = default;     /* trivial: shared-memory arrays and unions of elements stay legal */
    /* x rounded once to nearest even (small_floats.h); a value beyond the format gives the pattern the
     * header leaves (infinity). For constants in kernels and generated sources, never for user data,
     * which the host stores with its range checked. */
    GR_HOSTDEV explicit SmallFloat(double x) : bits(u16(F == kFloat16 ? gr_f16_from_double(x) : gr_bf16_from_double(x))) {}
    static GR_HOSTDEV SmallFloat of_bits(unsigned p) {
        SmallFloat x;
        x.bits = u16(p);
        return x;
    }
    GR_HOSTDEV float widen() const;
    GR_HOSTDEV explicit operator float() const { return widen(); }
    GR_HOSTDEV explicit operator double() const { return double(widen()); }
    GR_HOSTDEV SmallFloat operator-() const { return of_bits(bits ^ 0x8000u); }     /* exact: the sign bit */
};

template <> GR_HOSTDEV float SmallFloat<kFloat16>::widen() const {
#ifdef __CUDA_ARCH__
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(bits));
    return f;
#else
    return gr_f16_to_float(bits);
#endif
}
template <> GR_HOSTDEV float SmallFloat<kBfloat16>::widen() const { return gr_bf16_to_float(bits); }

using f16 = SmallFloat<kFloat16>;
using bf16 = SmallFloat<kBfloat16>;

template <SmallFormat F> GR_HOSTDEV bool operator<(SmallFloat<F> a, SmallFloat<F> b) { return a.widen() < b.widen(); }
template <SmallFormat F> GR_HOSTDEV bool operator>(SmallFloat<F> a, SmallFloat<F> b) { return a.widen() > b.widen(); }
template <SmallFormat F> GR_HOSTDEV bool operator==(SmallFloat<F> a, SmallFloat<F> b) { return a.widen() == b.widen(); }
template <SmallFormat F> GR_HOSTDEV bool operator!=(SmallFloat<F> a, SmallFloat<F> b) { return a.widen() != b.widen(); }

/* The patterns of small_floats.h's table: largest finite, infinity, the NaN the header makes. */
template <SmallFormat F> struct limits<SmallFloat<F>> {
    using T = SmallFloat<F>;
    static constexpr bool is_signed = true, is_float = true, has_infinity = true;
    static GR_HOSTDEV T lowest() { return T::of_bits(F == kFloat16 ? 0xfbffu : 0xff7fu); }
    static GR_HOSTDEV T max() { return T::of_bits(F == kFloat16 ? 0x7bffu : 0x7f7fu); }
    static GR_HOSTDEV T infinity() { return T::of_bits(F == kFloat16 ? 0x7c00u : 0x7f80u); }
    static GR_HOSTDEV T quiet_nan() { return T::of_bits(F == kFloat16 ? 0x7e00u : 0x7fc0u); }
};

template <class T> constexpr bool is_small_float_v = false;
template <SmallFormat F> constexpr bool is_small_float_v<SmallFloat<F>> = true;

/* The float type a float element accumulates in by default (lists.h's float_acc): its own, or float32
 * for a small float. */
template <class T> struct float_acc { using type = T; };
template <SmallFormat F> struct float_acc<SmallFloat<F>> { using type = float; };
template <class T> using float_acc_t = typename float_acc<T>::type;

/* Whether x is not zero (NaN is not zero; -0 is zero): the small floats by their bits. */
template <class T> GR_HOSTDEV bool nonzero(T x) {
    if constexpr (is_small_float_v<T>) return (x.bits & 0x7fffu) != 0;
    else return x != T(0);
}

}  // namespace gr

/* A dtype's element type in a kernel, by engine/lists.h's format column. */
#define GR_DEVICE_TYPE_C(ctype) ctype
#define GR_DEVICE_TYPE_f16(ctype) ::gr::f16
#define GR_DEVICE_TYPE_bf16(ctype) ::gr::bf16
#define GR_DEVICE_TYPE(format, ctype) GR_DEVICE_TYPE_##format(ctype)
