/*
 * exact.c -- the exact sum of floats (a long fixed-point accumulator, as Kulisch's), rounded once.
 *
 * Each double is an integer m < 2^53 times 2^(e - 1074) with e >= 0 (read from its bits); its 53 bits,
 * shifted to their place, touch at most three 32-bit digits, which are added to their 64-bit words with
 * the value's sign. Words are normalised (carries moved up, every word but the top one back in
 * [0, 2^32)) before any word could overflow and before rounding. Rounding finds the top set bit of the
 * magnitude, keeps the format's precision from it (fewer below the format's smallest subnormal), and rounds on the next bit
 * and the sticky rest, ties to even. Special values follow IEEE sums: NaN if any NaN or both
 * infinities, an infinity if one; a sum of only -0.0 is -0.0, any other exact zero +0.0.
 */
#include "exact.h"

#include <math.h>
#include <string.h>

void gr_exact_init(gr_exact *a) {
    memset(a, 0, sizeof *a);
    a->all_neg_zero = 1;
}

/* Carries up, so that words 0 .. top-1 are in [0, 2^32) and the top word holds the sign. */
static void normalise(int64_t *d) {
    for (int k = 0; k < GR_EXACT_DIGITS - 1; k++) {
        int64_t carry = d[k] >> 32;             /* floor division: negative words borrow */
        d[k] -= carry * ((int64_t)1 << 32);
        d[k + 1] += carry;
    }
}

static void note_add(gr_exact *a) {
    if (++a->since_norm >= ((uint64_t)1 << 30)) {
        normalise(a->d);
        a->since_norm = 0;
    }
}

void gr_exact_add(gr_exact *a, double x) {
    a->count++;
    uint64_t bits;
    memcpy(&bits, &x, sizeof bits);
    int biased = (int)(bits >> 52 & 0x7ff), negative = (int)(bits >> 63);
    uint64_t m = bits & (((uint64_t)1 << 52) - 1);
    if (biased == 0x7ff) {                          /* inf or NaN */
        a->all_neg_zero = 0;
        if (m) a->nan = 1;
        else if (negative) a->ninf = 1;
        else a->pinf = 1;
        return;
    }
    if (biased == 0 && m == 0) {                    /* a zero: only -0.0 keeps the sum's sign negative */
        if (!negative) a->all_neg_zero = 0;
        return;
    }
    a->all_neg_zero = 0;
    /* a normal x is (2^52 + m) 2^(biased - 1075), a subnormal m 2^-1074: as a multiple of 2^-1074 its
     * lowest bit is at `shift` */
    int shift = 0;
    if (biased) {
        m |= (uint64_t)1 << 52;
        shift = biased - 1;
    }
    int k = shift / 32, s = shift % 32;
    /* m 2^s is below 2^85: three digits (the low 64 bits of m << s hold the first two exactly) */
    uint64_t lo = (m << s) & 0xffffffffu, mid = ((m << s) >> 32) & 0xffffffffu, hi = s ? m >> (64 - s) : 0;
    int64_t sign = negative ? -1 : 1;
    a->d[k] += sign * (int64_t)lo;
    a->d[k + 1] += sign * (int64_t)mid;
    a->d[k + 2] += sign * (int64_t)hi;
    note_add(a);
}

/* Bit `pos` (weight 2^(pos - 1074)) of the magnitude in u (normalised, non-negative digits). */
static int bit_at(const uint64_t *u, int pos) { return pos < 0 ? 0 : (int)((u[pos / 32] >> (pos % 32)) & 1u); }

double gr_exact_round(const gr_exact *a, int to_float32) {
    if (a->nan || (a->pinf && a->ninf)) return NAN;
    if (a->pinf) return INFINITY;
    if (a->ninf) return -INFINITY;
    int64_t d[GR_EXACT_DIGITS];
    memcpy(d, a->d, sizeof d);
    normalise(d);
    int negative = d[GR_EXACT_DIGITS - 1] < 0;
    uint64_t u[GR_EXACT_DIGITS];
    if (negative) {                                 /* the magnitude: two's complement, digit by digit */
        uint64_t borrow = 1;
        for (int k = 0; k < GR_EXACT_DIGITS; k++) {
            uint64_t v = (~(uint64_t)d[k] & 0xffffffffu) + borrow;
            u[k] = v & 0xffffffffu;
            borrow = v >> 32;
        }
    } else {
        for (int k = 0; k < GR_EXACT_DIGITS; k++) u[k] = (uint64_t)d[k] & 0xffffffffu;
    }
    int top = -1;
    for (int k = GR_EXACT_DIGITS - 1; k >= 0 && top < 0; k--)
        if (u[k])
            for (int b = 31; b >= 0; b--)
                if ((u[k] >> b) & 1u) { top = 32 * k + b; break; }
    if (top < 0) return a->all_neg_zero && a->count ? -0.0 : 0.0;

    /* the result's lowest kept bit: precision p below the top, but not below the format's smallest
     * subnormal (2^-1074 for float64 at position 0, 2^-149 for float32 at position 925) */
    int p = to_float32 ? 24 : 53, floor_pos = to_float32 ? 1074 - 149 : 0;
    int low = top - p + 1;
    if (low < floor_pos) low = floor_pos;
    uint64_t q = 0;
    for (int pos = top; pos >= low; pos--) q = q << 1 | (uint64_t)bit_at(u, pos);
    int half = bit_at(u, low - 1), sticky = 0;
    for (int pos = low - 2; pos >= 0 && !sticky; pos--) sticky = bit_at(u, pos);
    if (half && (sticky || (q & 1u))) q++;
    double r = ldexp((double)q, low - 1074);        /* exact, or an overflow to inf */
    if (to_float32) r = (double)(float)r;           /* exact: r has at most 24 significant bits */
    return negative ? -r : r;
}
