/*
 * convert_element.h -- one element of any dtype converted to any other (b:astype, gr.copy between
 * dtypes), written once for host and device: the cpu loops (ops/cpu_convert.c) and the conversion kernel
 * (cuda/runtime/convert.cu) expand the same macros, so both backends give the same bits.
 *
 * An element is read as a value of its kind, a gr_cv_value: INT (int64), UINT (uint64; a bool's 0 or 1
 * too) or FLOAT (a double, which holds every value of every float format exactly). The value is then
 * written by the destination's kind and format, with `bad` set where it does not fit:
 *   to an integer  from an integer: exact; bad outside the range (conversions never wrap). From a float:
 *                  truncated toward zero; bad outside the range, for NaN and for the infinities;
 *   to bool        value != 0 (NaN is true, -0.0 false), stored 0 or 1; never bad;
 *   to a float     rounded once, to nearest with ties to even, from the exact value: an integer beyond
 *                  2^53 is first rounded to odd at 53 bits (gr_cv_odd_double: exact for any later
 *                  rounding to at most 51 bits, where a plain (double) would round twice), float64 by the
 *                  C conversion (one rounding). Bad where a finite value rounds past the largest finite
 *                  one (IEEE overflow, with the exponent range unbounded: small_floats.h's rule, and
 *                  float32's in base/dtype.c), and for an infinity into a format without one
 *                  (float8_e4m3). A NaN becomes the format's quiet NaN with the NaN's sign, payload
 *                  dropped, built from bits (a device's float conversions need not keep a NaN's sign).
 * Subnormals are kept on both sides: nothing here flushes to zero.
 *
 * The macros are keyed by engine/lists.h's columns, so a new dtype line needs nothing here:
 *   GR_CV_READ_<kind>(format, e)                               the value of element e
 *   GR_CV_WRITE_<kind>(format, ctype, bytes, is_signed, v, e, bad)  value v into element e
 * and a float format's own, for format C (float32 and float64, told apart by bytes) and for every prefix
 * of small_floats.h (f16, bf16, e4m3, e5m2):
 *   GR_CV_WIDEN_<format>(e)                                    the element's double
 *   GR_CV_NARROW_<format>(ctype, bytes, v, e, bad)             v rounded once into e
 *   GR_CV_LARGEST_<format>(bytes)                              the largest finite value, a double
 *
 * Included by the engine's C (ops/ and above) and by nvcc (cuda/runtime/convert.cu): it includes gr.h,
 * hostdev.h and small_floats.h, and <math.h> in C (nvcc has trunc built in).
 */
#ifndef GR_CONVERT_ELEMENT_H
#define GR_CONVERT_ELEMENT_H

#include "gr.h"

#include "../../engine/base/hostdev.h"
#include "../../engine/base/small_floats.h"

#ifndef __CUDACC__
#include <math.h>
#endif

/* What a conversion pass does (gr_cpu_convert, gr_dev_convert): CHECK finds the first element that does
 * not fit, WRITE stores the converted elements; both: a fresh destination, written whole while checked. */
#define GR_CV_CHECK 1
#define GR_CV_WRITE 2

/* ---- the value of an element ----------------------------------------------------------------------- */

enum { GR_CV_INT, GR_CV_UINT, GR_CV_FLOAT };
typedef struct gr_cv_value {
    int kind;
    union { int64_t i; uint64_t u; double f; } v;
} gr_cv_value;

GR_HD gr_cv_value gr_cv_of_int(int64_t i) {
    gr_cv_value x;
    x.kind = GR_CV_INT;
    x.v.i = i;
    return x;
}
GR_HD gr_cv_value gr_cv_of_uint(uint64_t u) {
    gr_cv_value x;
    x.kind = GR_CV_UINT;
    x.v.u = u;
    return x;
}
GR_HD gr_cv_value gr_cv_of_float(double f) {
    gr_cv_value x;
    x.kind = GR_CV_FLOAT;
    x.v.f = f;
    return x;
}

/* Reading, by the kind column (a bool reads as the unsigned 0 or 1, whatever its byte holds). */
#define GR_CV_READ_INT(format, e) gr_cv_of_int((int64_t)(e))
#define GR_CV_READ_UINT(format, e) gr_cv_of_uint((uint64_t)(e))
#define GR_CV_READ_BOOL(format, e) gr_cv_of_uint((e) != 0)
#define GR_CV_READ_FLOAT(format, e) gr_cv_of_float(GR_CV_WIDEN_##format(e))

/* A float element's double. float32 by its bits, so that a NaN keeps its sign on the device too. */
#define GR_CV_WIDEN_C(e) \
    (sizeof(e) == 4 ? gr_sf_double_of_float_bits(GR_SF_FLOAT_BITS((float)(e))) : (double)(e))
#define GR_CV_WIDEN_f16(e) gr_f16_to_double(e)
#define GR_CV_WIDEN_bf16(e) gr_bf16_to_double(e)
#define GR_CV_WIDEN_e4m3(e) gr_e4m3_to_double(e)
#define GR_CV_WIDEN_e5m2(e) gr_e5m2_to_double(e)

/* The largest finite value of a float format, as a double (what gr_convert_can_fail probes). */
#define GR_CV_LARGEST_C(bytes) ((bytes) == 8 ? 0x1.fffffffffffffp1023 : 0x1.fffffep127)
#define GR_CV_LARGEST_f16(bytes) 65504.0
#define GR_CV_LARGEST_bf16(bytes) 0x1.fep127
#define GR_CV_LARGEST_e4m3(bytes) 448.0
#define GR_CV_LARGEST_e5m2(bytes) 57344.0

/* ---- values into integers and bool --------------------------------------------------------------------- */

/* 2^k as a double, 0 <= k <= 1023, exactly. */
GR_HD double gr_cv_pow2(int k) { return GR_SF_DOUBLE_OF((unsigned long long)(1023 + k) << 52); }

/* v as an integer of `bits` bits (8 to 64), signed or not: 1 and its two's-complement bits in *w where it
 * fits (a float truncated toward zero first), else 0. */
GR_HD int gr_cv_to_bits(gr_cv_value v, int bits, int is_signed, uint64_t *w) {
    const uint64_t umax = bits == 64 ? ~0ull : (1ull << bits) - 1u;     /* unsigned */
    const uint64_t smax = umax >> 1;                                    /* signed: 2^(bits-1) - 1 */
    *w = 0;
    if (v.kind == GR_CV_INT) {
        const int64_t i = v.v.i;
        const int fits = is_signed ? (i < 0 ? (uint64_t)(-(i + 1)) <= smax : (uint64_t)i <= smax)
                                   : i >= 0 && (uint64_t)i <= umax;
        *w = (uint64_t)i;
        return fits;
    }
    if (v.kind == GR_CV_UINT) {
        *w = v.v.u;
        return v.v.u <= (is_signed ? smax : umax);
    }
    /* a float: -2^(bits-1) <= t < 2^(bits-1) signed, 0 <= t < 2^bits unsigned (-0.0 is 0); NaN fails both */
    const double t = trunc(v.v.f);
    const double lo = is_signed ? -gr_cv_pow2(bits - 1) : 0.0, hi = gr_cv_pow2(bits - (is_signed ? 1 : 0));
    if (!(t >= lo && t < hi)) return 0;
    *w = is_signed ? (uint64_t)(int64_t)t : (uint64_t)t;
    return 1;
}

GR_HD int gr_cv_nonzero(gr_cv_value v) {
    return v.kind == GR_CV_INT ? v.v.i != 0 : v.kind == GR_CV_UINT ? v.v.u != 0 : v.v.f != 0.0;
}

/* The element keeps the low `bytes` of the bits (a C conversion; only values that fit are kept). */
#define GR_CV_WRITE_INT(format, ctype, bytes, is_signed, v, e, bad)                                   \
    do {                                                                                              \
        uint64_t w_;                                                                                  \
        (bad) = !gr_cv_to_bits((v), 8 * (bytes), (is_signed), &w_);                                   \
        (e) = (ctype)w_;                                                                              \
    } while (0)
#define GR_CV_WRITE_UINT(...) GR_CV_WRITE_INT(__VA_ARGS__)
#define GR_CV_WRITE_BOOL(format, ctype, bytes, is_signed, v, e, bad)                                  \
    do {                                                                                              \
        (e) = (ctype)(gr_cv_nonzero(v) ? 1 : 0);                                                      \
        (bad) = 0;                                                                                    \
    } while (0)
#define GR_CV_WRITE_FLOAT(format, ctype, bytes, is_signed, v, e, bad) \
    GR_CV_NARROW_##format(ctype, bytes, v, e, bad)

/* ---- values into floats ---------------------------------------------------------------------------------- */

/* The magnitude m as a double rounded to odd at 53 bits: exact up to 2^53; above, the bits shifted out
 * leave a 1 in the last place when any of them is 1, so that a later rounding to nearest even at 51 bits or
 * fewer (float32 and narrower) gives what rounding m itself would. */
GR_HD double gr_cv_odd_double(uint64_t m) {
    if (m <= (1ull << 53)) return (double)m;
    int sh = 0;
    while ((m >> sh) >= (1ull << 53)) sh++;
    const uint64_t q = (m >> sh) | ((m & ((1ull << sh) - 1u)) != 0);
    return (double)q * gr_cv_pow2(sh);
}

/* v as the double that a format of at most 51 bits of precision rounds from (see above). */
GR_HD double gr_cv_narrowable(gr_cv_value v) {
    if (v.kind == GR_CV_INT)
        return v.v.i < 0 ? -gr_cv_odd_double((uint64_t)0 - (uint64_t)v.v.i) : gr_cv_odd_double((uint64_t)v.v.i);
    if (v.kind == GR_CV_UINT) return gr_cv_odd_double(v.v.u);
    return v.v.f;
}

/* The quiet NaN of float64 and float32 with the sign of the double d (a NaN). */
GR_HD double gr_cv_nan64(double d) {
    return GR_SF_DOUBLE_OF((GR_SF_DOUBLE_BITS(d) & 0x8000000000000000ull) | 0x7ff8000000000000ull);
}
GR_HD float gr_cv_nan32(double d) {
    return GR_SF_FLOAT_OF((unsigned)(GR_SF_DOUBLE_BITS(d) >> 63) << 31 | 0x7fc00000u);
}
GR_HD int gr_cv_isnan(double d) { return (GR_SF_DOUBLE_BITS(d) & 0x7fffffffffffffffull) > 0x7ff0000000000000ull; }

/* v in float64: integers by the C conversion (rounded once), a NaN made the quiet NaN of its sign. */
GR_HD double gr_cv_to_float64(gr_cv_value v) {
    if (v.kind == GR_CV_INT) return (double)v.v.i;
    if (v.kind == GR_CV_UINT) return (double)v.v.u;
    return gr_cv_isnan(v.v.f) ? gr_cv_nan64(v.v.f) : v.v.f;
}

/* d in float32, rounded once; *bad where a finite d rounds to an infinity. */
GR_HD float gr_cv_to_float32(double d, int *bad) {
    const unsigned long long u = GR_SF_DOUBLE_BITS(d);
    if (gr_cv_isnan(d)) {
        *bad = 0;
        return gr_cv_nan32(d);
    }
    const float f = (float)d;
    *bad = (GR_SF_FLOAT_BITS(f) & 0x7fffffffu) == 0x7f800000u && (u & 0x7ff0000000000000ull) != 0x7ff0000000000000ull;
    return f;
}

#define GR_CV_NARROW_C(ctype, bytes, v, e, bad)                                                       \
    do {                                                                                              \
        if ((bytes) == 8) {                                                                           \
            (e) = (ctype)gr_cv_to_float64(v);                                                         \
            (bad) = 0;                                                                                \
        } else {                                                                                      \
            int b_;                                                                                   \
            (e) = (ctype)gr_cv_to_float32(gr_cv_narrowable(v), &b_);                                  \
            (bad) = b_;                                                                               \
        }                                                                                             \
    } while (0)
/* A small float format: small_floats.h's narrowing, whose GR_SF_NOFIT says what does not fit. */
#define GR_CV_NARROW_SF_(pre, ctype, v, e, bad)                                                       \
    do {                                                                                              \
        const unsigned p_ = gr_##pre##_from_double(gr_cv_narrowable(v));                              \
        (e) = (ctype)(p_ & 0xffffu);                                                                  \
        (bad) = (p_ & GR_SF_NOFIT) != 0;                                                              \
    } while (0)
#define GR_CV_NARROW_f16(ctype, bytes, v, e, bad) GR_CV_NARROW_SF_(f16, ctype, v, e, bad)
#define GR_CV_NARROW_bf16(ctype, bytes, v, e, bad) GR_CV_NARROW_SF_(bf16, ctype, v, e, bad)
#define GR_CV_NARROW_e4m3(ctype, bytes, v, e, bad) GR_CV_NARROW_SF_(e4m3, ctype, v, e, bad)
#define GR_CV_NARROW_e5m2(ctype, bytes, v, e, bad) GR_CV_NARROW_SF_(e5m2, ctype, v, e, bad)

/* ---- a fast form of the commonest narrowing -------------------------------------------------------------- */

/* float32 bits u to a bfloat16 pattern, GR_SF_NOFIT added where a finite value rounds to an infinity: the
 * same pattern as gr_bf16_from_float for every input (bfloat16 is float32's top half, so rounding to
 * nearest even is an add on the bits; a NaN becomes the quiet NaN of its sign), in a few integer
 * operations, for the device's float32 -> bfloat16 pass. */
GR_HD unsigned gr_cv_bf16_of_float_bits(unsigned u) {
    const unsigned a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return ((u >> 16) & 0x8000u) | 0x7fc0u;
    const unsigned p = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    return p | ((a - 0x7f7f8000u < 0x8000u) ? GR_SF_NOFIT : 0u);
}

#endif
