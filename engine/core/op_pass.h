/*
 * op_pass.h -- the kernel of a built-in op (op_pass.c): a catalogue row's gr_kernel or host function for
 * whole buffers, the policy's segmented kernel (cuda/kernels/segmented.cu) for segments and items, and
 * the host's loops and CPU finish. plan.h says the interface; the planner chooses it.
 */
#ifndef GR_OP_PASS_H
#define GR_OP_PASS_H

#include "core/plan.h"

extern const gr_pass_kernel gr_op_pass;

/* A result value v stored as element i of p, a result buffer's memory of dtype t (a bool as 0 / 1): how
 * the host writes the results of segments. */
gr_status gr_segment_result_store(gr_context *ctx, void *p, size_t i, gr_dtype t, gr_scalar v);

/* cuda/kernels/segmented.cu's launcher; absent (NULL) in a build without kernels. */
extern const gr_seg_kernel gr_segmented __attribute__((weak));

#endif
