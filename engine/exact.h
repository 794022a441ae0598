/*
 * exact.h -- the exact sum of floats, rounded once (exact.c): what opts.determinism = "gpu_to_gpu" asks
 * for. The exactly rounded sum is the same for every order of the additions, so every variant, launch
 * shape, GPU and backend that computes it gives the same bits; today the host computes it.
 */
#ifndef GR_EXACT_H
#define GR_EXACT_H

#include "gr.h"

/* A long accumulator: every finite double is an integer multiple of 2^-1074 below 2^1024, so the exact
 * sum of any n < 2^64 of them is an integer of at most 1024 + 1074 + 64 bits, kept here as 32-bit
 * digits in 64-bit words (carry-save: a word absorbs 2^31 additions before it must be normalised). */
#define GR_EXACT_DIGITS 68
typedef struct gr_exact {
    int64_t d[GR_EXACT_DIGITS];     /* digit k weighs 2^(32 k - 1074) */
    uint64_t since_norm;            /* additions since the last normalisation */
    int nan, pinf, ninf;            /* NaN met, +inf met, -inf met */
    int all_neg_zero;               /* every value so far was -0.0 (the sum is then -0.0) */
    uint64_t count;
} gr_exact;

void gr_exact_init(gr_exact *a);
void gr_exact_add(gr_exact *a, double x);
/* The exact sum rounded once to nearest, ties to even: to float32 when to_float32, else float64. */
double gr_exact_round(const gr_exact *a, int to_float32);

#endif
