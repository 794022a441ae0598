/*
 * exact.h -- the exact sums of opts.determinism = "gpu_to_gpu" computed on the host (exact.c), in the
 * accumulator the GPU keeps too (exact_acc.h): the same digits, rounded by the same code.
 */
#ifndef GR_EXACT_H
#define GR_EXACT_H

#include "ops/exact_acc.h"

/* Adds n elements of dtype t (float32 or float64) at p into the sums op needs (gr_x_sums_of): each
 * element, or its exact square, or both; NaN elements skipped and counted where the op skips them. */
void gr_exact_add_values(gr_xsum *a, const void *p, size_t n, gr_dtype t, gr_op op);

#endif
