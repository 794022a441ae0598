/*
 * exact.h -- the exact sums of opts.determinism = "gpu_to_gpu" computed on the host (exact.c), in the
 * accumulator the GPU keeps too (exact_acc.h): the same digits, rounded by the same code.
 */
#ifndef GR_EXACT_H
#define GR_EXACT_H

#include "ops/exact_acc.h"

/* Whether the exact sums take elements of dtype t (float32, float64): the gate of every gpu_to_gpu path. */
int gr_exact_takes(gr_dtype t);
/* Adds n elements of dtype t (one gr_exact_takes accepts; others add nothing) at p into the sums op needs
 * (gr_x_sums_of): each element (asum: its absolute value), or its exact square, or both; NaN elements
 * skipped and counted where the op skips them. */
void gr_exact_add_values(gr_xsum *a, const void *p, size_t n, gr_dtype t, gr_op op);
/* Adds the exact products x[i] y[i] of n elements of dtype t (as above) at x and y into the sum S: the
 * exact dot product (gr.dot at gpu_to_gpu). A NaN or infinite product only sets its flag. */
void gr_exact_add_products(gr_xsum *a, const void *x, const void *y, size_t n, gr_dtype t);

#endif
