/*
 * small_float.cuh -- the device element types of the dtypes stored as a small float format's bit pattern
 * (engine/lists.h's format column: float16, bfloat16, float8_e4m3, float8_e5m2), so that no kernel reads
 * their bits as integers.
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
 *   float8_e5m2  float16's top byte: cvt.f32.f16 of the pattern shifted left by 8, exact.
 *   float8_e4m3  the hardware's cvt.rn.f16x2.e4m3x2 then cvt.f32.f16 on sm_89 and up, exact;
 *             small_floats.h's gr_e4m3_to_float (integer work, about ten instructions) elsewhere.
 * Vectors of elements are widened a word at a time (small_float_fold.cuh).
 * On the host side of nvcc (CUB and Thrust take identities there) both are small_floats.h's.
 */
#pragma once

#include "../../engine/base/small_floats.h"
#include "core.cuh"

namespace gr {

enum SmallFormat : int { kFloat16, kBfloat16, kE4M3, kE5M2 };

/* The storage of a format's pattern: 16 bits for float16 and bfloat16, 8 for the FP8 formats; the sign
 * is its top bit. */
template <SmallFormat F> struct SmallStorage { using type = u16; };
template <> struct SmallStorage<kE4M3> { using type = u8; };
template <> struct SmallStorage<kE5M2> { using type = u8; };

/* An element of a small float format: its pattern, read as the value it spells. */
template <SmallFormat F> struct alignas(sizeof(typename SmallStorage<F>::type)) SmallFloat {
    using bits_t = typename SmallStorage<F>::type;
    static constexpr unsigned kSign = 1u << (8 * sizeof(bits_t) - 1);      /* the sign bit's place */
    static constexpr SmallFormat kFormat = F;
    bits_t bits;
    SmallFloat() = default;     /* trivial: shared-memory arrays and unions of elements stay legal */
    /* x rounded once to nearest even (small_floats.h); a value beyond the format gives the pattern the
     * header leaves. For constants in kernels and generated sources, never for user data, which the host
     * stores with its range checked. */
    GR_HOSTDEV explicit SmallFloat(double x) : bits(bits_t(narrow(x))) {}
    static GR_HOSTDEV unsigned narrow(double x) {
        return F == kFloat16 ? gr_f16_from_double(x) : F == kBfloat16 ? gr_bf16_from_double(x)
             : F == kE4M3 ? gr_e4m3_from_double(x) : gr_e5m2_from_double(x);
    }
    static GR_HOSTDEV SmallFloat of_bits(unsigned p) {
        SmallFloat x;
        x.bits = bits_t(p);
        return x;
    }
    GR_HOSTDEV float widen() const;
    GR_HOSTDEV explicit operator float() const { return widen(); }
    GR_HOSTDEV explicit operator double() const { return double(widen()); }
    /* to an integer (an operator's integer accumulator over float16 data): the value truncated toward
     * zero, as a float converts */
    template <class I, class = typename enable_if<is_arithmetic_v<I> && !limits<I>::is_float>::type>
    GR_HOSTDEV explicit operator I() const { return I(widen()); }
    GR_HOSTDEV SmallFloat operator-() const { return of_bits(bits ^ kSign); }     /* exact: the sign bit */
};

/* Two float8_e4m3 patterns (the low 16 bits of w) as a float16 pair, exactly: the byte at bits 8..15
 * becomes the high half, a NaN float16's NaN. The hardware's cvt.rn.f16x2.e4m3x2 on sm_89 and later,
 * small_floats.h's conversions elsewhere. */
GR_DEV unsigned e4m3x2_to_f16x2(unsigned w) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
    unsigned r;
    asm("{\n\t.reg .b16 p;\n\tcvt.u16.u32 p, %1;\n\tcvt.rn.f16x2.e4m3x2 %0, p;\n\t}" : "=r"(r) : "r"(w));
    return r;
#else
    const unsigned lo = gr_f16_from_float(gr_e4m3_to_float(w & 0xffu)) & 0xffffu;   /* exact: no rounding */
    const unsigned hi = gr_f16_from_float(gr_e4m3_to_float((w >> 8) & 0xffu)) & 0xffffu;
    return lo | hi << 16;
#endif
}

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
/* float8_e4m3: on sm_89 and later the hardware's cvt.rn.f16x2.e4m3x2 (exact; a NaN becomes float16's
 * NaN), then cvt.f32.f16; elsewhere small_floats.h's integer widening (no infinity; S.1111.111 the NaN),
 * the host's text. The integer form took 40 registers where a warp_shuffle kernel's combines widen
 * (absmax's NaN tests), which held its 1024-thread blocks to one per SM on an H100: 50% occupancy and
 * 89% of the read kernel, against 30 registers and 95% for float8_e5m2 (ncu). */
template <> GR_HOSTDEV float SmallFloat<kE4M3>::widen() const {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
    return SmallFloat<kFloat16>::of_bits(e4m3x2_to_f16x2(bits) & 0xffffu).widen();
#else
    return gr_e4m3_to_float(bits);
#endif
}
/* float8_e5m2 is float16's top byte: the same value as the float16 pattern bits << 8 (subnormals, the
 * infinities and the NaNs included), so the hardware's cvt.f32.f16 widens it in one instruction */
template <> GR_HOSTDEV float SmallFloat<kE5M2>::widen() const {
    return SmallFloat<kFloat16>::of_bits(unsigned(bits) << 8).widen();
}

using f16 = SmallFloat<kFloat16>;
using bf16 = SmallFloat<kBfloat16>;
using e4m3 = SmallFloat<kE4M3>;
using e5m2 = SmallFloat<kE5M2>;

template <SmallFormat F> GR_HOSTDEV bool operator<(SmallFloat<F> a, SmallFloat<F> b) { return a.widen() < b.widen(); }
template <SmallFormat F> GR_HOSTDEV bool operator>(SmallFloat<F> a, SmallFloat<F> b) { return a.widen() > b.widen(); }
template <SmallFormat F> GR_HOSTDEV bool operator==(SmallFloat<F> a, SmallFloat<F> b) { return a.widen() == b.widen(); }
template <SmallFormat F> GR_HOSTDEV bool operator!=(SmallFloat<F> a, SmallFloat<F> b) { return a.widen() != b.widen(); }

/* The patterns of small_floats.h's table: largest finite, infinity, the NaN the header makes.
 * float8_e4m3 has no infinity: min and max start from its largest finite values (+-448), as the host's
 * limits in lists.h do. */
template <SmallFormat F> struct limits<SmallFloat<F>> {
    using T = SmallFloat<F>;
    static constexpr bool is_signed = true, is_float = true, has_infinity = F != kE4M3;
    static GR_HOSTDEV T lowest() {
        return T::of_bits(F == kFloat16 ? 0xfbffu : F == kBfloat16 ? 0xff7fu : F == kE4M3 ? 0xfeu : 0xfbu);
    }
    static GR_HOSTDEV T max() {
        return T::of_bits(F == kFloat16 ? 0x7bffu : F == kBfloat16 ? 0x7f7fu : F == kE4M3 ? 0x7eu : 0x7bu);
    }
    static GR_HOSTDEV T infinity() {
        static_assert(F != kE4M3, "float8_e4m3 has no infinity");
        return T::of_bits(F == kFloat16 ? 0x7c00u : F == kBfloat16 ? 0x7f80u : 0x7cu);
    }
    static GR_HOSTDEV T quiet_nan() {
        return T::of_bits(F == kFloat16 ? 0x7e00u : F == kBfloat16 ? 0x7fc0u : F == kE4M3 ? 0x7fu : 0x7eu);
    }
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
    if constexpr (is_small_float_v<T>) return (x.bits & (T::kSign - 1u)) != 0;
    else return x != T(0);
}

}  // namespace gr

/* A dtype's element type in a kernel, by engine/lists.h's format column. */
#define GR_DEVICE_TYPE_C(ctype) ctype
#define GR_DEVICE_TYPE_f16(ctype) ::gr::f16
#define GR_DEVICE_TYPE_bf16(ctype) ::gr::bf16
#define GR_DEVICE_TYPE_e4m3(ctype) ::gr::e4m3
#define GR_DEVICE_TYPE_e5m2(ctype) ::gr::e5m2
#define GR_DEVICE_TYPE(format, ctype) GR_DEVICE_TYPE_##format(ctype)
