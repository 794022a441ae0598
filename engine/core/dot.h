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

#endif
