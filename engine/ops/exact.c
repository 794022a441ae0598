/*
 * exact.c -- the exact sums of float elements on the host (opts.determinism = "gpu_to_gpu"): each
 * element, or its exact square, added digit by digit into exact_acc.h's long accumulator, which the
 * kernels of cuda/kernels/exact.cu fill with the same digits. Words are normalised before any could overflow
 * (every 2^30 elements: each adds at most one digit to a word); the results are gr_x_finish's. asum adds
 * each element's absolute value (gr_x_takes_abs), as the kernels do.
 */
#include "ops/exact.h"
#include "base/small_floats.h"

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

/* How the exact sums read the elements of a dtype: as doubles, exactly. Integer dtypes take no long
 * accumulator (their sums are exact in 64 bits on every path); a new dtype is refused until it says how
 * it reads here. */
typedef enum { READ_NONE, READ_FLOAT, READ_DOUBLE, READ_F16, READ_BF16, READ_E4M3, READ_E5M2 } element_read;

static element_read read_of(gr_dtype t) {
    switch (t) {
    case GR_FLOAT32: return READ_FLOAT;
    case GR_FLOAT64: return READ_DOUBLE;
    case GR_FLOAT16: return READ_F16;           /* widened exactly (small_floats.h) */
    case GR_BFLOAT16: return READ_BF16;
    case GR_FLOAT8_E4M3: return READ_E4M3;
    case GR_FLOAT8_E5M2: return READ_E5M2;
    case GR_INT8: case GR_UINT8: case GR_INT16: case GR_UINT16: case GR_INT32: case GR_UINT32: case GR_INT64:
    case GR_UINT64: case GR_BOOL:
    case GR_DTYPE_COUNT: return READ_NONE;
    }
    return READ_NONE;
}

int gr_exact_takes(gr_dtype t) { return read_of(t) != READ_NONE; }

/* Element i of p, of a dtype read as r, as the double it is exactly. */
static double element(const void *p, size_t i, element_read r) {
    return r == READ_FLOAT ? (double)((const float *)p)[i]
         : r == READ_DOUBLE ? ((const double *)p)[i]
         : r == READ_F16 ? gr_f16_to_double(((const uint16_t *)p)[i])
         : r == READ_BF16 ? gr_bf16_to_double(((const uint16_t *)p)[i])
         : r == READ_E4M3 ? gr_e4m3_to_double(((const uint8_t *)p)[i])
                          : gr_e5m2_to_double(((const uint8_t *)p)[i]);
}

void gr_exact_add_values(gr_xsum *a, const void *p, size_t n, gr_dtype t, gr_op op) {
    int sums = gr_x_sums_of(op), skip = gr_x_skips_nan(op), absolute = gr_x_takes_abs(op);
    element_read r = read_of(t);
    if (r == READ_NONE) return;
    const size_t every = (size_t)1 << 30;
    for (size_t i = 0; i < n; i++) {
        double x = element(p, i, r);
        if (absolute) x = fabs(x);
        add_one(a, x, sums, skip);
        if ((i + 1) % every == 0) {
            gr_x_normalise(a->w[0], GR_XDIGITS);
            gr_x_normalise(a->w[1], GR_XDIGITS);
        }
    }
    gr_x_normalise(a->w[0], GR_XDIGITS);
    gr_x_normalise(a->w[1], GR_XDIGITS);
}

/* One product into S, as cuda/kernels/exact.cu's ExactThread::product adds it: a product of two finite
 * values exactly (two halves, each a term at scale 2^e2), one with a NaN or an infinity as the flag of
 * its IEEE value (inf * 0 is NaN). A zero product keeps the sum's -0.0 rule: it is -0.0 when the signs
 * differ. */
static void add_product(gr_xsum *a, double x, double y) {
    double p = x * y;
    if (x - x != 0 || y - y != 0) {
        a->flags |= gr_x_flag_of(p);
        return;
    }
    if (x == 0 || y == 0) {
        if (!(gr_x_bits(p) >> 63)) a->flags |= GR_X_NOT_NEG_ZERO;
        return;
    }
    double hi, lo;
    int e2;
    gr_x_product(x, y, &hi, &lo, &e2);
    a->flags |= GR_X_NOT_NEG_ZERO;
    gr_x_add(a->w[0], hi, e2);
    gr_x_add(a->w[0], lo, e2);
}

void gr_exact_add_products(gr_xsum *a, const void *x, const void *y, size_t n, gr_dtype t) {
    element_read r = read_of(t);
    if (r == READ_NONE) return;
    const size_t every = (size_t)1 << 29;       /* two terms per product */
    for (size_t i = 0; i < n; i++) {
        add_product(a, element(x, i, r), element(y, i, r));
        if ((i + 1) % every == 0) gr_x_normalise(a->w[0], GR_XDIGITS);
    }
    gr_x_normalise(a->w[0], GR_XDIGITS);
}
