/*
 * exact.c -- the exact sums of float elements on the host (opts.determinism = "gpu_to_gpu"): each
 * element, or its exact square, added digit by digit into exact_acc.h's long accumulator, which the
 * kernels of cuda/kernels/exact.cu fill with the same digits. Words are normalised before any could overflow
 * (every 2^30 elements: each adds at most one digit to a word); the results are gr_x_finish's.
 */
#include "ops/exact.h"

/* One element into the sums: S and/or Q; a NaN or an infinity only sets its flag. */
static void add_one(gr_xsum *a, double x, int sums, int skip_nan) {
    if (x - x != 0) {                           /* not finite */
        if (x != x && skip_nan) a->nans++;
        else a->flags |= gr_x_flag_of(x);
        return;
    }
    if (!(x == 0 && gr_x_bits(x) >> 63)) a->flags |= GR_X_NOT_NEG_ZERO;
    if (sums & 1) gr_x_add(a->w[0], x, 0);
    if (sums & 2) {
        double hi, lo;
        int e2;
        gr_x_square(x, &hi, &lo, &e2);
        gr_x_add(a->w[1], hi, e2);
        gr_x_add(a->w[1], lo, e2);
    }
}

void gr_exact_add_values(gr_xsum *a, const void *p, size_t n, gr_dtype t, gr_op op) {
    int sums = gr_x_sums_of(op), skip = gr_x_skips_nan(op);
    const size_t every = (size_t)1 << 30;
    for (size_t i = 0; i < n; i++) {
        double x = t == GR_FLOAT32 ? (double)((const float *)p)[i] : ((const double *)p)[i];
        add_one(a, x, sums, skip);
        if ((i + 1) % every == 0) {
            gr_x_normalise(a->w[0], GR_XDIGITS);
            gr_x_normalise(a->w[1], GR_XDIGITS);
        }
    }
    gr_x_normalise(a->w[0], GR_XDIGITS);
    gr_x_normalise(a->w[1], GR_XDIGITS);
}
