/*
 * op_math.h -- the arithmetic of the built-in ops, written once for host and device: the accumulators of
 * several values (their layouts), how two of them merge, and how a combined one becomes a result; the
 * NaN and tie rules of the extremes.
 *
 * Included by the host (engine/ops/host_ops.c, and the cpu loops that repeat a step of it: C) and by the
 * kernels (cuda/device/ops.cuh's functors and results.cuh's results: CUDA C++ under nvcc and NVRTC), as
 * exact_acc.h and gen_element.h are. The two sides must agree to the bit: every host finish combines
 * partials the kernels wrote (the hybrid and host modes, streamed chunks, the segments of a sharded buffer
 * that span its shards), and the segments the device finishes must equal those the host finishes.
 *
 * Roundings. Written with plain operators, an expression here rounds after every operation on the host:
 * the cpu loops compile with -ffp-contract=off, host_ops.c as ISO C (-std=c11), where GCC does not
 * contract, and clang is told so below. On the device nvcc may fuse a product into the sum that follows
 * (one fma): the functors' merges have always allowed that, for speed. Where the device's result must
 * equal the host's bit for bit -- var, std and norm of integers, formed once from exact sums that both
 * sides hold -- the steps are GR_DMUL_RN, GR_DADD_RN and GR_DSUB_RN: the device's _rn intrinsics, which
 * nothing fuses, and plain operators on the host.
 *
 * The float functions are written once for F = float (suffix f32) and double (f64) by GR_OP_MATH_FLOATS.
 * In C their names carry the suffix (gr_welford_merge_f32); C++ overloads the plain name
 * (gr_welford_merge), so that a functor's template calls one name whatever F is.
 *
 * NVRTC-clean: under CUDA it includes only engine/base/hostdev.h (GR_HD; NVRTC has no standard headers),
 * and the module embeds both with cuda/device/'s headers (the Makefile's NVRTC_HEADERS), for operators
 * compiled at run time.
 */
#ifndef GR_OP_MATH_H
#define GR_OP_MATH_H

#include "../../engine/base/hostdev.h"

#ifndef __CUDACC__
#include <math.h>
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif
#endif

/* What differs by side, each the way that side has always computed it:
 *   GR_D*_RN      double steps that must not be fused (see above);
 *   GR_COUNT(F)   a count as F: the device converts once, the host through double (the same value below
 *                 2^53 elements);
 *   GR_FABS(F)    |x|: the device's compare-and-negate, the host's fabs (they differ only in the sign of
 *                 a zero, which squaring takes off, and of a NaN, which the device makes canonical);
 *   GR_NAN_F/D    a result with no degrees of freedom: the device's inf - inf, the host's NAN. */
#ifdef __CUDA_ARCH__
#define GR_DMUL_RN(a, b) __dmul_rn(a, b)
#define GR_DADD_RN(a, b) __dadd_rn(a, b)
#define GR_DSUB_RN(a, b) __dsub_rn(a, b)
#define GR_COUNT(F, n) ((F)(n))
#define GR_FABS(F, x) ((x) < (F)0 ? -(x) : (x))
#else
#define GR_DMUL_RN(a, b) ((a) * (b))
#define GR_DADD_RN(a, b) ((a) + (b))
#define GR_DSUB_RN(a, b) ((a) - (b))
#define GR_COUNT(F, n) ((F)(double)(n))
#define GR_FABS(F, x) ((F)fabs(x))
#endif
#ifdef __cplusplus
#define GR_TRUTH bool
#else
#define GR_TRUTH _Bool
#endif
#if defined(__CUDACC_RTC__)
#define GR_NAN_F (__int_as_float(0x7f800000) - __int_as_float(0x7f800000))
#define GR_NAN_D (__longlong_as_double(0x7ff0000000000000ll) - __longlong_as_double(0x7ff0000000000000ll))
#elif defined(__CUDACC__)
#define GR_NAN_F (__builtin_huge_valf() - __builtin_huge_valf())
#define GR_NAN_D (__builtin_huge_val() - __builtin_huge_val())
#else
#define GR_NAN_F ((float)NAN)
#define GR_NAN_D ((double)NAN)
#endif

/* ---- the extremes: NaN and tie rules ------------------------------------------------------------- */

/* The extreme of a and b, where B_BEYOND says that b is beyond a (b < a for a minimum, b > a for a
 * maximum). min and max (and minmax's halves): a NaN wins, so that once one is in it stays. nanmin and
 * nanmax: a NaN loses to any number (their identity is NaN, so all-NaN gives NaN). For integers the NaN
 * tests are constant 0, and both are the plain comparison. Macros, so that each side's values (the
 * kernels' typed ones, the host's of any dtype) go in as they are; the arguments are read more than once
 * and must have no side effects. The nan rule returns from the function it is written in: that shape,
 * not a conditional expression, is what the kernels were measured with (nvcc lays out their loops
 * differently for the two). */
#define GR_EXTREME(a, b, A_NAN, B_NAN, B_BEYOND) ((A_NAN) ? (a) : (B_NAN) ? (b) : (B_BEYOND) ? (b) : (a))
#define GR_RETURN_NANEXTREME(a, b, A_NAN, B_NAN, B_BEYOND)                                              \
    do {                                                                                                \
        if (A_NAN) return (b);                                                                          \
        if (B_NAN) return (a);                                                                          \
        return (B_BEYOND) ? (b) : (a);                                                                  \
    } while (0)

/* argmin/argmax: the index of no element, which loses every tie (the identity's, an empty input's). */
#define GR_NO_INDEX 0xffffffffffffffffull

/* Returns a or b, accumulators of argmin/argmax: the more extreme value wins (B_BETTER: b's is; B_WORSE:
 * a's is), a NaN is the most extreme of all (the first of two NaNs), and ties go to the lower index
 * (AI, BI), so the first occurrence wins. A returning macro, as GR_RETURN_NANEXTREME is. */
#define GR_RETURN_ARG(a, b, A_NAN, B_NAN, B_BETTER, B_WORSE, AI, BI)                                   \
    do {                                                                                                \
        const GR_TRUTH an_ = (A_NAN), bn_ = (B_NAN);                                                     \
        if (an_ || bn_) return (an_ && bn_) ? ((BI) < (AI) ? (b) : (a)) : (bn_ ? (b) : (a));            \
        const GR_TRUTH better_ = (B_BETTER), worse_ = (B_WORSE);                                         \
        return (better_ || (!worse_ && (BI) < (AI))) ? (b) : (a);                                       \
    } while (0)

/* The 1-based position that argmin/argmax return for a 0-based index: 0 for none. */
GR_HD long long gr_arg_position(unsigned long long index) {
    return index == GR_NO_INDEX ? 0 : (long long)(index + 1);
}

/* ---- exact sums of integers of up to 32 bits: var, std and norm ----------------------------------- */

/* 128 bits in two words, the low one first (little-endian, as unsigned __int128 on the host). */
typedef struct gr_u128 {
    unsigned long long lo, hi;
} gr_u128;

GR_HD gr_u128 gr_u128_add(gr_u128 a, gr_u128 b) {
    const unsigned long long lo = a.lo + b.lo;
    gr_u128 r = {lo, a.hi + b.hi + (lo < a.lo)};
    return r;
}
GR_HD gr_u128 gr_u128_sub(gr_u128 a, gr_u128 b) {
    gr_u128 r = {a.lo - b.lo, a.hi - b.hi - (a.lo < b.lo)};
    return r;
}
/* a * b, exactly */
GR_HD gr_u128 gr_u128_mul(unsigned long long a, unsigned long long b) {
#ifdef __CUDA_ARCH__
    gr_u128 r = {a * b, __umul64hi(a, b)};
#else
    gr_u128 r = {a * b, (unsigned long long)((unsigned __int128)a * b >> 64)};
#endif
    return r;
}
/* Rounded once: the high word's part is exact while it is below 2^53. */
GR_HD double gr_u128_double(gr_u128 v) { return GR_DADD_RN(GR_DMUL_RN((double)v.hi, 0x1p64), (double)v.lo); }

/* x^2 of an integer of up to 32 bits, exactly (below 2^64). */
GR_HD unsigned long long gr_square_signed(long long x) { return (unsigned long long)(x * x); }
GR_HD unsigned long long gr_square_unsigned(unsigned long long x) { return x * x; }

/* var/std: the count, the wrapping 64-bit sum (two's complement when the input is signed) and the sum of
 * squares; norm: the sum of squares alone. Exact, so any order gives the same bits. 32 and 16 bytes. */
typedef struct gr_moments {
    unsigned long long n, sum;
    gr_u128 sumsq;
} gr_moments;
typedef struct gr_squares {
    gr_u128 sumsq;
} gr_squares;

GR_HD gr_moments gr_moments_merge(gr_moments a, gr_moments b) {
    gr_moments r = {a.n + b.n, a.sum + b.sum, gr_u128_add(a.sumsq, b.sumsq)};
    return r;
}
GR_HD gr_squares gr_squares_merge(gr_squares a, gr_squares b) {
    gr_squares r = {gr_u128_add(a.sumsq, b.sumsq)};
    return r;
}

/* The sum of squared deviations of n integers from their exact sums. With q the floor of the mean and
 * r = sum - q n (0 <= r < n), sum (x - q)^2 = s2 - n q^2 - 2 q r is an exact integer (computed modulo
 * 2^128, where it fits), and sum (x - mean)^2 is that less r^2 / n: one rounding of a large value, and no
 * cancellation beyond r^2 / n < n. uq is |q|, neg whether q < 0. */
GR_HD double gr_moments_dev(gr_moments a, unsigned long long uq, unsigned long long r, GR_TRUTH neg) {
    gr_u128 m = gr_u128_sub(a.sumsq, gr_u128_mul(a.n, uq * uq));
    const gr_u128 qr = gr_u128_mul(uq, r), twice_qr = {qr.lo << 1, qr.hi << 1 | qr.lo >> 63};
    m = neg ? gr_u128_add(m, twice_qr) : gr_u128_sub(m, twice_qr);
    const double dev = GR_DSUB_RN(gr_u128_double(m), GR_DMUL_RN((double)r, (double)r / (double)a.n));
    return dev > 0 ? dev : 0.0;
}
/* q and r of a sum of signed integers (two's complement bits), and of unsigned ones. Two functions, not
 * one with a test of the sign: the kernels pass the signedness as a constant, and with the test inside
 * one function nvcc ordered the 128-bit steps differently from the kernels as they were measured. */
GR_HD double gr_moments_m2_signed(gr_moments a) {
    const long long s = (long long)a.sum;
    long long q = s / (long long)a.n, rr = s % (long long)a.n;
    if (rr < 0) {
        q -= 1;
        rr += (long long)a.n;
    }
    const GR_TRUTH neg = q < 0;
    return gr_moments_dev(a, neg ? 0ull - (unsigned long long)q : (unsigned long long)q, (unsigned long long)rr, neg);
}
GR_HD double gr_moments_m2_unsigned(gr_moments a) {
    const unsigned long long uq = a.sum / a.n, r = a.sum % a.n;
    return gr_moments_dev(a, uq, r, 0);
}

/* The variance over n - ddof degrees of freedom (NaN where there are none), and its square root. */
GR_HD double gr_moments_var(gr_moments a, int ddof, int is_signed) {
    const double dof = (double)a.n - (double)ddof;
    return dof > 0 ? (is_signed ? gr_moments_m2_signed(a) : gr_moments_m2_unsigned(a)) / dof : GR_NAN_D;
}
GR_HD double gr_moments_std(gr_moments a, int ddof, int is_signed) { return sqrt(gr_moments_var(a, ddof, is_signed)); }
GR_HD double gr_squares_norm(gr_squares a) { return sqrt(gr_u128_double(a.sumsq)); }

/* mean of integers: their exact 64-bit sum (by its bits), divided once. */
GR_HD double gr_int_mean(unsigned long long sum, int is_signed, unsigned long long n) {
    return (is_signed ? (double)(long long)sum : (double)sum) / (double)n;
}

/* ---- the float accumulators: var/std (Welford), norm (Blue), nanmean ------------------------------ */

/* Blue's thresholds and scales (LAPACK's nrm2 since 3.10) for base 2, a mantissa of t bits and exponents
 * emin..emax: tsml = 2^ceil((emin - 1) / 2), tbig = 2^floor((emax - t + 1) / 2), ssml = 2^-floor((emin -
 * t) / 2), sbig = 2^-ceil((emax + t - 1) / 2). Magnitudes above tbig are scaled down by sbig and those
 * below tsml up by ssml before they are squared, so that no square overflows or underflows. */
#define GR_BLUE_TSML_f32 0x1p-63f
#define GR_BLUE_TBIG_f32 0x1p52f
#define GR_BLUE_SSML_f32 0x1p75f
#define GR_BLUE_SBIG_f32 0x1p-76f
#define GR_BLUE_TSML_f64 0x1p-511
#define GR_BLUE_TBIG_f64 0x1p486
#define GR_BLUE_SSML_f64 0x1p537
#define GR_BLUE_SBIG_f64 0x1p-538

#ifdef __cplusplus
#define GR_FLOAT_FN(name, S) name
#else
#define GR_FLOAT_FN(name, S) name##_##S
#endif

/* The layouts and functions of one float type F (suffix S, square root SQRT). */
#define GR_OP_MATH_FLOATS(S, F, SQRT)                                                                     \
    /* var/std: Welford's count, mean and sum of squared deviations */                                    \
    typedef struct gr_welford_##S {                                                                       \
        unsigned long long n;                                                                             \
        F mean, m2;                                                                                       \
    } gr_welford_##S;                                                                                     \
    /* norm: Blue's sums of the squares of the small, middle and big magnitudes, each scaled */           \
    typedef struct gr_norm_##S {                                                                          \
        F small, medium, big;                                                                             \
    } gr_norm_##S;                                                                                        \
    /* nanmean: the sum of the elements that are not NaN, and how many they are */                       \
    typedef struct gr_counted_##S {                                                                       \
        unsigned long long n;                                                                             \
        F sum;                                                                                            \
    } gr_counted_##S;                                                                                     \
                                                                                                          \
    /* One element: m2 = x - x is 0 for a finite x, NaN for NaN or +-inf (a lone one makes var NaN). */   \
    GR_HD gr_welford_##S GR_FLOAT_FN(gr_welford_load, S)(F x) {                                           \
        gr_welford_##S w = {1, x, x - x};                                                                 \
        return w;                                                                                         \
    }                                                                                                     \
    /* Chan's merge: delta = mb - ma, mean = ma + delta nb / n, m2 = m2a + m2b + delta^2 na nb / n. */     \
    GR_HD gr_welford_##S GR_FLOAT_FN(gr_welford_merge, S)(gr_welford_##S a, gr_welford_##S b) {           \
        if (b.n == 0) return a;                                                                           \
        if (a.n == 0) return b;                                                                           \
        const unsigned long long n = a.n + b.n;                                                           \
        const F delta = b.mean - a.mean, wb = GR_COUNT(F, b.n) / GR_COUNT(F, n), wab = GR_COUNT(F, a.n) * wb; \
        gr_welford_##S r = {n, a.mean + delta * wb, (a.m2 + b.m2) + (delta * delta) * wab};               \
        return r;                                                                                         \
    }                                                                                                     \
    GR_HD F GR_FLOAT_FN(gr_welford_var, S)(gr_welford_##S a, int ddof) {                                  \
        const double dof = (double)a.n - (double)ddof;                                                    \
        return dof > 0 ? (F)(a.m2 / (F)dof) : (F)GR_NAN_##S;                                              \
    }                                                                                                     \
    GR_HD F GR_FLOAT_FN(gr_welford_std, S)(gr_welford_##S a, int ddof) {                                  \
        return SQRT(GR_FLOAT_FN(gr_welford_var, S)(a, ddof));                                             \
    }                                                                                                     \
                                                                                                          \
    /* One element into the sum its magnitude belongs to. */                                              \
    GR_HD gr_norm_##S GR_FLOAT_FN(gr_norm_load, S)(F v) {                                                 \
        const F ax = GR_FABS(F, v);                                                                       \
        if (ax > GR_BLUE_TBIG_##S) {                                                                      \
            const F s = ax * GR_BLUE_SBIG_##S;                                                            \
            gr_norm_##S r = {(F)0, (F)0, s * s};                                                          \
            return r;                                                                                     \
        }                                                                                                 \
        if (ax < GR_BLUE_TSML_##S) {                                                                      \
            const F s = ax * GR_BLUE_SSML_##S;                                                            \
            gr_norm_##S r = {s * s, (F)0, (F)0};                                                          \
            return r;                                                                                     \
        }                                                                                                 \
        gr_norm_##S r = {(F)0, ax * ax, (F)0};                                                            \
        return r;                                                                                         \
    }                                                                                                     \
    GR_HD gr_norm_##S GR_FLOAT_FN(gr_norm_merge, S)(gr_norm_##S a, gr_norm_##S b) {                       \
        gr_norm_##S r = {a.small + b.small, a.medium + b.medium, a.big + b.big};                          \
        return r;                                                                                         \
    }                                                                                                     \
    /* The three sums joined into the norm: the big one with the middle one scaled down, or the small     \
     * one with the middle one by their square roots, or one sum alone. */                                \
    GR_HD F GR_FLOAT_FN(gr_norm_join, S)(gr_norm_##S a) {                                                 \
        const F sbig = GR_BLUE_SBIG_##S, ssml = GR_BLUE_SSML_##S;                                         \
        F scale, sumsq;                                                                                   \
        if (a.big > (F)0 || a.big != a.big) {                                                             \
            if (a.medium > (F)0 || a.medium != a.medium) a.big = a.big + (a.medium * sbig) * sbig;        \
            scale = (F)1 / sbig;                                                                          \
            sumsq = a.big;                                                                                \
        } else if (a.small > (F)0) {                                                                      \
            if (a.medium > (F)0 || a.medium != a.medium) {                                                \
                const F m = SQRT(a.medium), s = SQRT(a.small) / ssml;                                     \
                const F lo = s > m ? m : s, hi = s > m ? s : m;                                           \
                scale = (F)1;                                                                             \
                sumsq = (hi * hi) * ((F)1 + (lo / hi) * (lo / hi));                                       \
            } else {                                                                                      \
                scale = (F)1 / ssml;                                                                      \
                sumsq = a.small;                                                                          \
            }                                                                                             \
        } else {                                                                                          \
            scale = (F)1;                                                                                 \
            sumsq = a.medium;                                                                             \
        }                                                                                                 \
        return scale * SQRT(sumsq);                                                                       \
    }                                                                                                     \
                                                                                                          \
    GR_HD gr_counted_##S GR_FLOAT_FN(gr_counted_merge, S)(gr_counted_##S a, gr_counted_##S b) {           \
        gr_counted_##S r = {a.n + b.n, a.sum + b.sum};                                                    \
        return r;                                                                                         \
    }                                                                                                     \
    /* nanmean: NaN when every element was NaN. */                                                        \
    GR_HD F GR_FLOAT_FN(gr_nanmean, S)(gr_counted_##S a) {                                                \
        return a.n ? (F)((double)a.sum / (double)a.n) : (F)GR_NAN_##S;                                    \
    }                                                                                                     \
    /* mean of a float sum: divided in double, rounded once to F. */                                      \
    GR_HD F GR_FLOAT_FN(gr_mean, S)(F sum, unsigned long long n) { return (F)((double)sum / (double)n); }

#define GR_NAN_f32 GR_NAN_F
#define GR_NAN_f64 GR_NAN_D
GR_OP_MATH_FLOATS(f32, float, sqrtf)
GR_OP_MATH_FLOATS(f64, double, sqrt)

#endif
