/*
 * exact_pass.h -- the pass of a gpu_to_gpu reduction (exact_pass.c): the exact kernel's launches and
 * the rounding of their sums, or the host's computation of the same sums. exec.c and exact_run.c call it.
 */
#ifndef GR_EXACT_PASS_H
#define GR_EXACT_PASS_H

#include "core/handles.h"
#include "ops/exact.h"
#include "base/launch.h"

/* The most elements a block folds before its shared words are carried: a word takes 2^31 additions of a
 * 32-bit digit before it could overflow (longer inputs take several launches, long segments rounds). */
#define GR_EXACT_MOST_PER_BLOCK ((size_t)1 << 30)

/* cuda/kernels/exact.cu's launcher; absent (NULL) in a build without kernels. */
extern const gr_exact_kernel gr_exact_gpu __attribute__((weak));

/* The plan's result from its sums: the op's value, rounded once (exact_acc.h). */
void gr_exact_result(const gr_xsum *a, const gr_plan *plan, gr_result *out);
/* A plan's host computation over the elements at `in`, its result in *out. */
gr_status gr_exact_host(gr_context *ctx, const void *in, const gr_plan *plan, gr_result *out);
/* The kernel over n elements at in, adding into the device sums at `sums` on `stream`. */
gr_status gr_exact_launch_into(gr_context *ctx, const void *in, size_t n, const gr_plan *plan, size_t grid,
                               void *sums, void *stream);
/* Queues the plan's kernel over `in` on `stream` (scratch zeroed first, the sums copied back to the
 * slot's pinned memory, the slot's event recorded); gr_exact_collect waits and rounds. */
gr_status gr_exact_start(gr_context *ctx, const void *in, const gr_plan *plan, gr_slot *slot, void *stream);
gr_status gr_exact_collect(gr_context *ctx, const gr_plan *plan, gr_slot *slot, gr_result *out);

#endif
