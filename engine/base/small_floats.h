/*
 * small_floats.h -- the element conversions of the float formats narrower than float32, written once for
 * host and device: float16 (IEEE binary16, CUDA's __half), bfloat16 (__nv_bfloat16), float8_e4m3 (OCP FP8
 * E4M3, __nv_fp8_e4m3) and float8_e5m2 (OCP FP8 E5M2, __nv_fp8_e5m2). An element is its bit pattern, in
 * the low bits of an unsigned.
 *
 *   format       bits  exponent  mantissa  bias  largest finite           infinity  NaN made here
 *   float16        16     5         10       15   65504       (0x7bff)     0x7c00    0x7e00
 *   bfloat16       16     8          7      127   0x1.fep127  (0x7f7f)     0x7f80    0x7fc0
 *   float8_e4m3     8     4          3        7   448         (0x7e)       none      0x7f
 *   float8_e5m2     8     5          2       15   57344       (0x7b)       0x7c      0x7e
 * (the sign is the top bit; NaN patterns: an exponent of all ones and a mantissa not zero, except in
 * float8_e4m3, whose only NaNs are S.1111.111 and whose other patterns of that exponent are numbers)
 *
 * Widening (gr_<f>_to_float, gr_<f>_to_double) is exact: every value of these formats is a float32 value,
 * subnormals included. A NaN pattern widens to a quiet NaN of its sign whose payload is the pattern's
 * mantissa at the top of the wider mantissa, quiet bit set (what x86's F16C and ARM's FCVT do); the
 * double is then exactly the float converted.
 *
 * Narrowing (gr_<f>_from_double, gr_<f>_from_float) rounds once, to nearest with ties to even, from the
 * value given -- a double is never rounded to float32 first, which would round twice -- with subnormals
 * kept and the sign of a zero kept. The result is the pattern, with GR_SF_NOFIT added where the value does
 * not fit the format:
 *   - a finite value fits where, rounded with the exponent range unbounded (the format's precision at
 *     every size), it is at most the largest finite value: as IEEE 754 defines overflow, and as the
 *     float32 store does (engine/base/dtype.c: a finite value that rounds to infinity does not fit). The
 *     thresholds: a magnitude >= 65520 does not fit float16 (the tie between 65504 and 65536 goes to
 *     the even 65536), >= 0x1.ffp127 bfloat16, >= 61440 float8_e5m2; float8_e4m3 fits up to 464
 *     included (the tie between 448 and 480 goes to the even 448, as CUDA's conversion rounds it) and
 *     nothing above;
 *   - an infinity fits where the format has one; in float8_e4m3 it does not fit;
 *   - a NaN fits: it becomes the format's quiet NaN above, with the NaN's sign (no payload is kept).
 * With GR_SF_NOFIT the pattern is what IEEE rounding gives -- the infinity of the value's sign, or in
 * float8_e4m3 the NaN, as CUDA's __NV_NOSAT conversion gives -- so an unchecked writer may keep the low
 * bits; a checked one (gr_scalar_store) refuses the value.
 *
 * Included by the engine's C (base and the layers above) and by CUDA code: nvcc and NVRTC (the module
 * embeds it, the Makefile's NVRTC_HEADERS), so it includes nothing but hostdev.h, on either side. The
 * work is integer arithmetic on the values' bits; the only floating-point operations are exact (a
 * subnormal's scaling by a power of two, all normal numbers; float to double), so no rounding mode can
 * touch them, and host and device give the same bits for every input (spec/small_floats_spec.lua checks
 * both against a reference written from the formats' definitions). Device code must be compiled without
 * -ftz=true (nvcc's and NVRTC's default), which would flush a float32 subnormal given to
 * gr_<f>_from_float to zero before it is narrowed (bfloat16 has subnormals that small).
 */
#ifndef GR_SMALL_FLOATS_H
#define GR_SMALL_FLOATS_H

#include "../../engine/base/hostdev.h"

/* The formats, in the order the testing hooks number them: X(name, prefix of their functions, bits). */
#define GR_SMALL_FLOAT_LIST(X) X(float16, f16, 16) X(bfloat16, bf16, 16) X(float8_e4m3, e4m3, 8) X(float8_e5m2, e5m2, 8)

/* Added to a narrowed pattern whose value does not fit the format (above the pattern bits of every format). */
#define GR_SF_NOFIT 0x10000u

/* ---- bits of float and double ------------------------------------------------------------------------ */

#ifdef __CUDA_ARCH__
#define GR_SF_FLOAT_BITS(x) __float_as_uint(x)
#define GR_SF_FLOAT_OF(u) __uint_as_float(u)
#define GR_SF_DOUBLE_BITS(x) ((unsigned long long)__double_as_longlong(x))
#define GR_SF_DOUBLE_OF(u) __longlong_as_double((long long)(u))
#else
/* A union reads the other member's bytes: defined in C, and a documented extension of the C++ host
 * compilers nvcc uses. */
GR_HD unsigned gr_sf_float_bits(float x) {
    union { float f; unsigned u; } c;
    c.f = x;
    return c.u;
}
GR_HD float gr_sf_float_of(unsigned u) {
    union { float f; unsigned u; } c;
    c.u = u;
    return c.f;
}
GR_HD unsigned long long gr_sf_double_bits(double x) {
    union { double d; unsigned long long u; } c;
    c.d = x;
    return c.u;
}
GR_HD double gr_sf_double_of(unsigned long long u) {
    union { double d; unsigned long long u; } c;
    c.u = u;
    return c.d;
}
#define GR_SF_FLOAT_BITS(x) gr_sf_float_bits(x)
#define GR_SF_FLOAT_OF(u) gr_sf_float_of(u)
#define GR_SF_DOUBLE_BITS(x) gr_sf_double_bits(x)
#define GR_SF_DOUBLE_OF(u) gr_sf_double_of(u)
#endif

/* ---- the two conversions of any of these formats ------------------------------------------------------ */

/* A format of e exponent bits and m mantissa bits, bias 2^(e-1) - 1; fn: the finite-with-NaN layout of
 * float8_e4m3 (no infinity; the top exponent holds numbers, its all-ones mantissa is the NaN). */

/* The float32 bits of pattern p, for a format whose exponent is narrower than float32's (float16 and the
 * two FP8 formats; bfloat16 is float32's top half, gr_bf16_to_float). */
GR_HD unsigned gr_sf_widen(unsigned p, int e, int m, int fn) {
    const unsigned emask = (1u << e) - 1u, mmask = (1u << m) - 1u;
    const int bias = (1 << (e - 1)) - 1;
    const unsigned sign = ((p >> (e + m)) & 1u) << 31;
    const unsigned ex = (p >> m) & emask, f = p & mmask;
    if (ex == emask && (fn ? f == mmask : 1)) {
        if (!fn && f == 0) return sign | 0x7f800000u;               /* infinity */
        return sign | 0x7fc00000u | (f << (23 - m));                /* NaN: quiet, the payload kept */
    }
    if (ex == 0) {
        /* zero or subnormal: f 2^(1 - bias - m), a normal float32 (or zero) for these formats, so one
         * exact product, which no flush to zero touches */
        const float scale = GR_SF_FLOAT_OF((unsigned)(127 + 1 - bias - m) << 23);
        return sign | GR_SF_FLOAT_BITS((float)f * scale);
    }
    return sign | ((ex + (unsigned)(127 - bias)) << 23) | (f << (23 - m));
}

/* The double of float32 bits u: the float itself, or for a NaN, the same quiet NaN with its sign and
 * payload spelled in double bits (a conversion's treatment of NaNs differs between hosts and devices). */
GR_HD double gr_sf_double_of_float_bits(unsigned u) {
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return GR_SF_DOUBLE_OF(((unsigned long long)(u >> 31) << 63) | 0x7ff8000000000000ull |
                               ((unsigned long long)(u & 0x3fffffu) << 29));
    return (double)GR_SF_FLOAT_OF(u);
}

/* The pattern of x rounded once to nearest even in the format, with GR_SF_NOFIT where it does not fit
 * (see the top of this file). */
GR_HD unsigned gr_sf_narrow(double x, int e, int m, int fn) {
    const unsigned emask = (1u << e) - 1u, mmask = (1u << m) - 1u;
    const int bias = (1 << (e - 1)) - 1, emin = 1 - bias;
    const unsigned nan = fn ? (emask << m) | mmask : (emask << m) | (1u << (m - 1));
    const unsigned inf = emask << m;                                /* (not a pattern of fn formats) */
    const unsigned largest = fn ? (emask << m) | (mmask - 1u) : ((emask - 1u) << m) | mmask;
    const unsigned long long u = GR_SF_DOUBLE_BITS(x), a = u & 0x7fffffffffffffffull;
    const unsigned sign = (unsigned)(u >> 63) << (e + m);
    if (a > 0x7ff0000000000000ull) return sign | nan;
    if (a == 0x7ff0000000000000ull) return fn ? sign | nan | GR_SF_NOFIT : sign | inf;
    /* a zero or a subnormal double: far below half the least subnormal of every format */
    if ((a >> 52) == 0) return sign;
    const int ex = (int)(a >> 52) - 1023;
    const unsigned long long sig = (a & 0xfffffffffffffull) | (1ull << 52);   /* x = sig 2^(ex - 52) */
    /* The result's quantum is 2^(max(ex, emin) - m): sig is shifted right by sh to count quanta. From
     * sh = 54 on, sig < 2^53 is less than half a quantum: the value rounds to zero. */
    const int sh = 52 - m + (ex < emin ? emin - ex : 0);
    if (sh > 53) return sign;
    unsigned long long q = sig >> sh;
    const unsigned long long rest = sig & ((1ull << sh) - 1ull), half = 1ull << (sh - 1);
    if (rest > half || (rest == half && (q & 1ull))) q++;
    /* q holds the leading bit at 2^m (a normal result) or not (a subnormal): adding it to the exponent
     * field minus one spells both, and a q rounded up to 2^(m+1) carries into the exponent */
    const unsigned bits = ((unsigned)((ex < emin ? emin : ex) + bias - 1) << m) + (unsigned)q;
    if (bits > largest) return sign | (fn ? nan : inf) | GR_SF_NOFIT;
    return sign | bits;
}

/* ---- each format -------------------------------------------------------------------------------------- */

GR_HD float gr_f16_to_float(unsigned p) { return GR_SF_FLOAT_OF(gr_sf_widen(p, 5, 10, 0)); }
GR_HD double gr_f16_to_double(unsigned p) { return gr_sf_double_of_float_bits(gr_sf_widen(p, 5, 10, 0)); }
GR_HD unsigned gr_f16_from_double(double x) { return gr_sf_narrow(x, 5, 10, 0); }
GR_HD unsigned gr_f16_from_float(float x) { return gr_sf_narrow((double)x, 5, 10, 0); }

/* bfloat16 is the top half of float32: widening is a shift (a NaN's quiet bit set) */
GR_HD unsigned gr_bf16_widen(unsigned p) {
    const unsigned u = (p & 0xffffu) << 16;
    return (u & 0x7fffffffu) > 0x7f800000u ? u | 0x00400000u : u;
}
GR_HD float gr_bf16_to_float(unsigned p) { return GR_SF_FLOAT_OF(gr_bf16_widen(p)); }
GR_HD double gr_bf16_to_double(unsigned p) { return gr_sf_double_of_float_bits(gr_bf16_widen(p)); }
GR_HD unsigned gr_bf16_from_double(double x) { return gr_sf_narrow(x, 8, 7, 0); }
GR_HD unsigned gr_bf16_from_float(float x) { return gr_sf_narrow((double)x, 8, 7, 0); }

GR_HD float gr_e4m3_to_float(unsigned p) { return GR_SF_FLOAT_OF(gr_sf_widen(p, 4, 3, 1)); }
GR_HD double gr_e4m3_to_double(unsigned p) { return gr_sf_double_of_float_bits(gr_sf_widen(p, 4, 3, 1)); }
GR_HD unsigned gr_e4m3_from_double(double x) { return gr_sf_narrow(x, 4, 3, 1); }
GR_HD unsigned gr_e4m3_from_float(float x) { return gr_sf_narrow((double)x, 4, 3, 1); }

GR_HD float gr_e5m2_to_float(unsigned p) { return GR_SF_FLOAT_OF(gr_sf_widen(p, 5, 2, 0)); }
GR_HD double gr_e5m2_to_double(unsigned p) { return gr_sf_double_of_float_bits(gr_sf_widen(p, 5, 2, 0)); }
GR_HD unsigned gr_e5m2_from_double(double x) { return gr_sf_narrow(x, 5, 2, 0); }
GR_HD unsigned gr_e5m2_from_float(float x) { return gr_sf_narrow((double)x, 5, 2, 0); }

#endif
