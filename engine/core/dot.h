/*
 * dot.h -- gr.dot's kernels and its plan for the bench (dot.c; the entry points gr_dot, gr_dot_async,
 * gr_dot_segments and gr_dot_axes are in gr.h).
 */
#ifndef GR_DOT_H
#define GR_DOT_H

#include "core/plan.h"

/* The dot product's kernels (cuda/kernels/dot.cu), a weak reference: a CPU-only build has none. */
extern const gr_dot_kernel gr_dot_gpu __attribute__((weak));

/* The run of gr_dot over compact a and b (GR_EINVAL naming a strided one), as gr_dot plans it; *host set
 * where the host reads the data (then run is not planned). */
gr_status gr_dot_plan(gr_context *ctx, const gr_buffer *a, const gr_buffer *b, const gr_options *o, gr_run *run,
                      int *host);

/* gr_dot's checks of a pair (one dtype, shape, side and device; a sum's options, no kernel options),
 * errors naming "b" or the option. */
gr_status gr_dot_check_pair(gr_context *ctx, const gr_buffer *a, const gr_buffer *b, const gr_options *o);

/* The run of n elements of t on ctx's device whose inputs are two spans: the sum's plan with o (a
 * sharded dot's pieces ask for the single finish, engine/multi/sharded.c), its first pass the dot kernel
 * (the exact one at gpu_to_gpu). */
gr_status gr_dot_piece_plan(gr_context *ctx, gr_dtype t, size_t n, const gr_options *o, gr_run *run);

/* The sum's accumulator (acc) of the n products of x and y on the host, as gr_op_result reads it. */
void gr_dot_host_acc(const void *x, const void *y, size_t n, gr_dtype t, gr_dtype acc, void *out);

#endif
