/*
 * exact_acc.h -- the exact sums of opts.determinism = "gpu_to_gpu", written once for host and device.
 *
 * Included by the host (engine/ops/exact.c, engine/core/exact_pass.c: C) and by the kernels (cuda/kernels/exact.cu:
 * CUDA C++), so that both hold the same digits for the same input and round them with the same code:
 * the same bits by construction, whatever the backend, the launch shape or the order of the additions.
 *
 * The accumulator is a long fixed-point integer (Kulisch's): 142 digits of 32 bits, digit k weighing
 * 2^(32 k - 2336), each kept in a 64-bit word (carry-save: a word absorbs 2^31 additions of a digit
 * before its carries must be moved up). That spans 2^-2336 .. 2^2208: every finite double and every
 * exact square of one (2^-2148 .. 2^2048) times up to 2^64 terms, so sums and sums of squares of float32
 * and float64 neither overflow nor underflow inside it. A term v 2^e2 (v a double, e2 an extra exponent
 * for squares whose exponent a double cannot hold) touches at most three digits (gr_x_split), which are
 * added to their words with the term's sign -- by plain additions on the host, by 64-bit atomics on the
 * device. The results (gr_x_finish) are formed from the exact sums with integer arithmetic: a quotient
 * with a sticky bit for means and variances, one rounding to nearest, ties to even.
 */
#ifndef GR_EXACT_ACC_H
#define GR_EXACT_ACC_H

#include "gr.h"

#include "../../engine/base/hostdev.h"

#ifndef __CUDACC__
#include <math.h>
#include <string.h>
#endif

#define GR_XDIGITS 142              /* 32-bit digits of one accumulator */
#define GR_XUNIT (-2336)            /* digit 0's lowest bit weighs 2^GR_XUNIT */
#define GR_XBIG (2 * GR_XDIGITS + 4)   /* digits of the products the variance forms */

/* What the values met say beside their sum (bits of gr_xsum.flags). */
enum { GR_X_NAN = 1, GR_X_PINF = 2, GR_X_NINF = 4, GR_X_NOT_NEG_ZERO = 8 };

/* The exact sums of one reduction: w[0] the sum S of the elements, w[1] the sum Q of their squares (the
 * ops use one or both), the flags, and how many NaN elements the nan ops skipped. The device keeps one
 * in the slot's scratch (zeroed before the launch) and the host reads it back as it is. */
typedef struct gr_xsum {
    int64_t w[2][GR_XDIGITS];
    uint64_t flags;
    uint64_t nans;
} gr_xsum;

/* Which sums an op needs: bit 0 S, bit 1 Q; 0 for an op gpu_to_gpu does not take. */
GR_HD int gr_x_sums_of(int op) {
    return op == GR_SUM || op == GR_NANSUM || op == GR_MEAN || op == GR_NANMEAN || op == GR_ASUM ? 1
         : op == GR_SUMSQ || op == GR_NORM ? 2 : op == GR_VAR || op == GR_STD ? 3 : 0;
}
GR_HD int gr_x_skips_nan(int op) { return op == GR_NANSUM || op == GR_NANMEAN; }
/* Whether the op sums the elements' absolute values (asum): each element's sign is cleared before it is
 * added, so -0.0 adds +0.0 and -inf +inf; the rest is sum's. */
GR_HD int gr_x_takes_abs(int op) { return op == GR_ASUM; }

GR_HD uint64_t gr_x_bits(double v) {
#ifdef __CUDA_ARCH__
    return (uint64_t)__double_as_longlong(v);
#else
    uint64_t b;
    memcpy(&b, &v, sizeof b);
    return b;
#endif
}

GR_HD double gr_x_double(uint64_t b) {
#ifdef __CUDA_ARCH__
    return __longlong_as_double((long long)b);
#else
    double v;
    memcpy(&v, &b, sizeof v);
    return v;
#endif
}

/* ---- terms into digits ------------------------------------------------------------------------------- */

/* The three digits of v 2^e2 (v finite and non-zero): v is an integer m < 2^53 times 2^E; its lowest
 * bit lands at bit s of digit k, so m 2^s (below 2^85) spans digits k, k + 1, k + 2 (d[0..2], each in
 * [0, 2^32), to be added with v's sign: returned as -1 or 1). */
GR_HD int gr_x_split(double v, int e2, int *k, int64_t d[3]) {
    uint64_t bits = gr_x_bits(v), m = bits & ((1ull << 52) - 1);
    int biased = (int)(bits >> 52 & 0x7ff), E = -1074;
    if (biased) {
        m |= 1ull << 52;
        E = biased - 1075;
    }
    int pos = E + e2 - GR_XUNIT, s = pos & 31;
    *k = pos >> 5;
    uint64_t low = m << s;
    d[0] = (int64_t)(low & 0xffffffffu);
    d[1] = (int64_t)(low >> 32);
    d[2] = s ? (int64_t)(m >> (64 - s)) : 0;
    return bits >> 63 ? -1 : 1;
}

/* x as f 2^e with |f| in [1, 2), f of x's sign (x finite and non-zero; subnormals normalised). */
GR_HD double gr_x_unit(double x, int *e) {
    uint64_t bits = gr_x_bits(x), m = bits & ((1ull << 52) - 1);
    int biased = (int)(bits >> 52 & 0x7ff);
    *e = biased - 1023;
    if (!biased) {                          /* subnormal: m 2^-1074, normalised to m's top bit */
        int top = 63;
        while (!(m >> top)) top--;
        m = (m << (52 - top)) & ((1ull << 52) - 1);
        *e = top - 1074;
    }
    return gr_x_double((bits & (1ull << 63)) | 1023ull << 52 | m);
}

/* x y as (hi + lo) 2^e2, exactly, for any finite x and y: each scaled to [1, 2) first, so that the
 * product's rounding error is a double (nothing underflows), e2 the sum of their exponents. */
GR_HD void gr_x_product(double x, double y, double *hi, double *lo, int *e2) {
    if (x == 0 || y == 0) {
        *hi = *lo = 0.0;
        *e2 = 0;
        return;
    }
    int ex, ey;
    double f = gr_x_unit(x, &ex), g = gr_x_unit(y, &ey);
#ifdef __CUDA_ARCH__
    *hi = __dmul_rn(f, g);
    *lo = __fma_rn(f, g, -*hi);
#else
    *hi = f * g;                            /* ISO C: no contraction into an fma */
    *lo = fma(f, g, -*hi);
#endif
    *e2 = ex + ey;
}

/* x squared as (hi + lo) 2^e2, exactly, for any finite x (gr_x_product). */
GR_HD void gr_x_square(double x, double *hi, double *lo, int *e2) { gr_x_product(x, x, hi, lo, e2); }

/* A term added to the words with plain additions (the host's way; the device's is atomic). */
GR_HD void gr_x_add(int64_t *w, double v, int e2) {
    if (v == 0) return;
    int k;
    int64_t d[3];
    int64_t sign = gr_x_split(v, e2, &k, d);
    w[k] += sign * d[0];
    w[k + 1] += sign * d[1];
    w[k + 2] += sign * d[2];
}

/* The flags of one element that is not finite (a NaN, an infinity). */
GR_HD uint64_t gr_x_flag_of(double x) {
    return x != x ? GR_X_NAN : x > 0 ? GR_X_PINF : GR_X_NINF;
}

/* Carries moved up: words 0 .. n-2 in [0, 2^32), the top word signed (the sum's sign). */
GR_HD void gr_x_normalise(int64_t *w, int n) {
    for (int k = 0; k < n - 1; k++) {
        int64_t carry = w[k] >> 32;             /* floor division: a negative word borrows */
        w[k] -= carry * ((int64_t)1 << 32);
        w[k + 1] += carry;
    }
}

/* The sums of more elements added into a (the shards of one buffer, the pieces of a segment): exact, so
 * the order of the merges changes no digit. b's words are normalised first (a device's may be large),
 * then a's after the additions, so any number of merges stays far from overflow. */
GR_HD void gr_x_merge(gr_xsum *a, gr_xsum *b) {
    for (int s = 0; s < 2; s++) {
        gr_x_normalise(b->w[s], GR_XDIGITS);
        for (int k = 0; k < GR_XDIGITS; k++) a->w[s][k] += b->w[s][k];
        gr_x_normalise(a->w[s], GR_XDIGITS);
    }
    a->flags |= b->flags;
    a->nans += b->nans;
}

/* ---- big magnitudes ------------------------------------------------------------------------------------ */

/* A non-negative integer in 32-bit digits, least significant first; digits from len on are zero. */
typedef struct gr_xbig {
    uint32_t d[GR_XBIG];
    int len;
} gr_xbig;

GR_HD void gr_xbig_trim(gr_xbig *a) {
    while (a->len > 0 && a->d[a->len - 1] == 0) a->len--;
}

/* The magnitude of an accumulator's words into a; returns 1 when the sum is negative. */
GR_HD int gr_xbig_of(gr_xbig *a, const int64_t *words) {
    int64_t w[GR_XDIGITS];
    for (int k = 0; k < GR_XDIGITS; k++) w[k] = words[k];
    gr_x_normalise(w, GR_XDIGITS);
    int negative = w[GR_XDIGITS - 1] < 0;
    if (negative) {                             /* the magnitude: every word negated, carried again */
        for (int k = 0; k < GR_XDIGITS; k++) w[k] = -w[k];
        gr_x_normalise(w, GR_XDIGITS);
    }
    for (int k = 0; k < GR_XDIGITS; k++) a->d[k] = (uint32_t)w[k];
    uint64_t carry = (uint64_t)w[GR_XDIGITS - 1] >> 32;     /* the top word may exceed a digit */
    a->len = GR_XDIGITS;
    for (int k = GR_XDIGITS; carry && k < GR_XBIG; k++, a->len++) {
        a->d[k] = (uint32_t)carry;
        carry >>= 32;
    }
    gr_xbig_trim(a);
    return negative;
}

/* a *= m */
GR_HD void gr_xbig_mul_u64(gr_xbig *a, uint64_t m) {
    uint32_t ml = (uint32_t)m, mh = (uint32_t)(m >> 32);
    uint64_t c0 = 0, c1 = 0;
    gr_xbig r;
    r.len = a->len + 2 < GR_XBIG ? a->len + 2 : GR_XBIG;
    for (int k = 0; k < r.len; k++) r.d[k] = 0;
    for (int k = 0; k < a->len; k++) {          /* the two 32-bit halves of m, one row each */
        uint64_t t = (uint64_t)a->d[k] * ml + r.d[k] + c0;
        r.d[k] = (uint32_t)t;
        c0 = t >> 32;
    }
    if (a->len < r.len) r.d[a->len] = (uint32_t)c0;
    for (int k = 0; k < a->len; k++) {
        uint64_t t = (uint64_t)a->d[k] * mh + r.d[k + 1] + c1;
        r.d[k + 1] = (uint32_t)t;
        c1 = t >> 32;
    }
    if (a->len + 1 < r.len) r.d[a->len + 1] = (uint32_t)c1;
    *a = r;
    gr_xbig_trim(a);
}

/* c = a * b (c distinct from both; a->len + b->len <= GR_XBIG) */
GR_HD void gr_xbig_mul(gr_xbig *c, const gr_xbig *a, const gr_xbig *b) {
    c->len = a->len + b->len;
    for (int k = 0; k < c->len; k++) c->d[k] = 0;
    for (int i = 0; i < a->len; i++) {
        uint64_t carry = 0;
        for (int j = 0; j < b->len; j++) {      /* (2^32-1)^2 + 2 (2^32-1) fits in 64 bits */
            uint64_t t = (uint64_t)a->d[i] * b->d[j] + c->d[i + j] + carry;
            c->d[i + j] = (uint32_t)t;
            carry = t >> 32;
        }
        c->d[i + b->len] = (uint32_t)carry;
    }
    gr_xbig_trim(c);
}

/* a *= 2^(32 digits) */
GR_HD void gr_xbig_shift_digits(gr_xbig *a, int digits) {
    if (a->len == 0) return;
    for (int k = a->len - 1; k >= 0; k--) a->d[k + digits] = a->d[k];
    for (int k = 0; k < digits; k++) a->d[k] = 0;
    a->len += digits;
}

/* -1, 0, 1 as a < b, a == b, a > b (both trimmed) */
GR_HD int gr_xbig_cmp(const gr_xbig *a, const gr_xbig *b) {
    if (a->len != b->len) return a->len < b->len ? -1 : 1;
    for (int k = a->len - 1; k >= 0; k--)
        if (a->d[k] != b->d[k]) return a->d[k] < b->d[k] ? -1 : 1;
    return 0;
}

/* a -= b, for a >= b */
GR_HD void gr_xbig_sub(gr_xbig *a, const gr_xbig *b) {
    int64_t borrow = 0;
    for (int k = 0; k < a->len; k++) {
        int64_t t = (int64_t)a->d[k] - (k < b->len ? (int64_t)b->d[k] : 0) - borrow;
        borrow = t < 0;
        a->d[k] = (uint32_t)(t + (borrow << 32));
    }
    gr_xbig_trim(a);
}

/* a = floor(a / m) for m >= 1; returns 1 when the remainder is not zero (the quotient's sticky bit). */
GR_HD int gr_xbig_div_u64(gr_xbig *a, uint64_t m) {
    unsigned __int128 r = 0;
    for (int k = a->len - 1; k >= 0; k--) {
        unsigned __int128 cur = r << 32 | a->d[k];
        a->d[k] = (uint32_t)(cur / m);
        r = cur % m;
    }
    gr_xbig_trim(a);
    return r != 0;
}

/* ---- rounding -------------------------------------------------------------------------------------- */

/* The formats a result is rounded to: p bits of precision, the exponent of the smallest subnormal. */
#define GR_X_NO_FLOOR (-100000)
GR_HD int gr_x_precision(int to_float32) { return to_float32 ? 24 : 53; }
GR_HD int gr_x_floor(int to_float32) { return to_float32 ? -149 : -1074; }

/* (M + a sticky fraction of its last bit) 2^e, M > 0, rounded to nearest, ties to even, to p bits whose
 * lowest may not weigh less than 2^floor: q 2^E, with q at most 2^p (a carry into a new bit). */
GR_HD void gr_x_round_u64(uint64_t M, int e, int sticky, int p, int floor, uint64_t *q, int *E) {
    int top = 63;
    while (!(M >> top)) top--;
    int low = top + e - p + 1;
    if (low < floor) low = floor;
    int d = low - e;                            /* bits of M below the kept ones */
    if (d <= 0) {                               /* M is short: kept whole (sticky is then 0 by use) */
        *q = M;
        *E = e;
        return;
    }
    uint64_t kept = d >= 64 ? 0 : M >> d;
    int half = d > 64 ? 0 : (int)(M >> (d - 1) & 1u);
    uint64_t below = d > 64 ? M : d >= 2 ? M & ((1ull << (d - 1)) - 1) : 0;   /* under the half bit */
    int rest = sticky || below != 0;
    if (half && (rest || (kept & 1u))) kept++;
    *q = kept;
    *E = low;
}

/* A non-zero big magnitude a (plus a sticky fraction) whose bit 0 weighs 2^unit, rounded: its top 64 bits
 * and whether any below them is set carry all the rounding needs (p <= 53). */
GR_HD void gr_xbig_round(const gr_xbig *a, int sticky, int unit, int p, int floor, uint64_t *q, int *E) {
    int top = a->len - 1, bit = 31;
    while (!(a->d[top] >> bit)) bit--;
    int t = 32 * top + bit;                     /* the top set bit */
    int from = t >= 63 ? t - 63 : 0;            /* the window's lowest bit */
    uint64_t M = 0;
    for (int i = t; i >= from; i--) M = M << 1 | (uint64_t)(a->d[i >> 5] >> (i & 31) & 1u);
    for (int k = 0; k < (from >> 5) && !sticky; k++) sticky = a->d[k] != 0;
    if (!sticky && (from & 31)) sticky = (a->d[from >> 5] & ((1u << (from & 31)) - 1)) != 0;
    gr_x_round_u64(M, from + unit, sticky, p, floor, q, E);
}

/* q 2^E as a double: exact when representable (a subnormal's dropped bits are zero by construction),
 * infinity past the largest finite value. */
GR_HD double gr_x_make(uint64_t q, int E) {
    if (q == 0) return 0.0;
    while (q < (1ull << 52)) {
        q <<= 1;
        E--;
    }
    while (q >= (1ull << 53)) {
        q >>= 1;
        E++;
    }
    int biased = E + 52 + 1023;
    if (biased >= 2047) return gr_x_double(0x7ffull << 52);
    if (biased <= 0) return gr_x_double(biased > -53 ? q >> (1 - biased) : 0);
    return gr_x_double((uint64_t)biased << 52 | (q & ((1ull << 52) - 1)));
}

/* q 2^E in the result's format: float32 values (24 bits, already rounded) past its range are infinite. */
GR_HD double gr_x_result(uint64_t q, int E, int to_float32, int negative) {
    double r = gr_x_make(q, E);
    if (to_float32 && r >= 340282356779733661637539395458142568448.0) r = gr_x_double(0x7ffull << 52);
    return negative ? -r : r;
}

/* sqrt(q 2^E) in the result's format: the exponent made even, the root of the integer (at most 54 bits,
 * exact in a double) correctly rounded by the hardware, then rounded once more to the format. */
GR_HD double gr_x_sqrt(uint64_t q, int E, int to_float32) {
    if (E & 1) {
        q <<= 1;
        E--;
    }
#ifdef __CUDA_ARCH__
    double r = __dsqrt_rn((double)q);
#else
    double r = sqrt((double)q);
#endif
    uint64_t bits = gr_x_bits(r), M = (bits & ((1ull << 52) - 1)) | 1ull << 52;
    int e = (int)(bits >> 52) - 1075 + E / 2;
    uint64_t q2;
    int E2;
    gr_x_round_u64(M, e, 0, gr_x_precision(to_float32), gr_x_floor(to_float32), &q2, &E2);
    return gr_x_result(q2, E2, to_float32, 0);
}

/* ---- results ----------------------------------------------------------------------------------------- */

/* The op's value from the exact sums of n elements (n > 0): in float64, or the float32 value as a double.
 *   sum, nansum    S rounded once (asum: S of the absolute values);
 *   mean, nanmean  S / count rounded once (count: the elements, less the NaN ones nanmean skipped);
 *   sumsq          Q rounded once;
 *   norm           sqrt of Q rounded to 53 bits, then rounded to the format;
 *   var            (count Q - S^2) / (count (count - ddof)) rounded once, std its root as norm's.
 * The IEEE edges: NaN if a NaN was met (not by the nan ops) or both infinities (var and std: any
 * infinity); an infinity otherwise if one was met; a sum of only -0.0 is -0.0. */
GR_HD double gr_x_finish(const gr_xsum *a, int op, uint64_t n, int ddof, int to_float32) {
    const double inf = gr_x_double(0x7ffull << 52), nan = gr_x_double(0x7ff8ull << 48);
    uint64_t f = a->flags, count = n - a->nans;
    int sums = gr_x_sums_of(op), p = gr_x_precision(to_float32), floor = gr_x_floor(to_float32);
    if (f & GR_X_NAN) return nan;
    if (sums == 3 && (f & (GR_X_PINF | GR_X_NINF))) return nan;
    if (sums == 2 && (f & (GR_X_PINF | GR_X_NINF))) return inf;
    if ((f & GR_X_PINF) && (f & GR_X_NINF)) return nan;
    if (f & (GR_X_PINF | GR_X_NINF)) return f & GR_X_PINF ? inf : -inf;
    if ((op == GR_MEAN || op == GR_NANMEAN || sums == 3) && count == 0) return nan;
    if (sums == 3 && (double)count - (double)ddof <= 0) return nan;

    gr_xbig s, t;
    uint64_t q;
    int E;
    if (sums != 3) {
        int negative = gr_xbig_of(&s, a->w[sums == 2]);
        if (s.len == 0) return count && !(f & GR_X_NOT_NEG_ZERO) && sums == 1 ? -0.0 : 0.0;
        int sticky = op == GR_MEAN || op == GR_NANMEAN ? gr_xbig_div_u64(&s, count) : 0;
        if (s.len == 0) return negative ? -0.0 : 0.0;   /* a quotient below 2^GR_XUNIT: under every floor */
        if (op == GR_NORM) {
            gr_xbig_round(&s, 0, GR_XUNIT, 53, GR_X_NO_FLOOR, &q, &E);
            return gr_x_sqrt(q, E, to_float32);
        }
        gr_xbig_round(&s, sticky, GR_XUNIT, p, floor, &q, &E);
        return gr_x_result(q, E, to_float32, negative);
    }
    /* var: N = count Q 2^-GR_XUNIT - S^2, in units of 2^(2 GR_XUNIT); N >= 0 (Cauchy-Schwarz) */
    gr_xbig n2;
    gr_xbig_of(&s, a->w[0]);
    gr_xbig_of(&t, a->w[1]);
    gr_xbig_mul(&n2, &s, &s);
    gr_xbig_mul_u64(&t, count);
    gr_xbig_shift_digits(&t, -GR_XUNIT / 32);
    if (gr_xbig_cmp(&t, &n2) <= 0) return 0.0;
    gr_xbig_sub(&t, &n2);
    /* floor(floor(N / count) / (count - ddof)) is floor(N / (count (count - ddof))), and the quotient is
     * exact only when both remainders are zero */
    int sticky = gr_xbig_div_u64(&t, count);
    sticky |= gr_xbig_div_u64(&t, count - (uint64_t)ddof);
    if (t.len == 0) return 0.0;                 /* cannot happen for N > 0: N >= 2^2524 in these units */
    if (op == GR_STD) {
        gr_xbig_round(&t, sticky, 2 * GR_XUNIT, 53, GR_X_NO_FLOOR, &q, &E);
        return gr_x_sqrt(q, E, to_float32);
    }
    gr_xbig_round(&t, sticky, 2 * GR_XUNIT, p, floor, &q, &E);
    return gr_x_result(q, E, to_float32, 0);
}

#endif
