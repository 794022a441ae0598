/*
 * graphs.h -- small synchronous reductions replayed from CUDA graphs (graphs.c).
 */
#ifndef GR_GRAPHS_H
#define GR_GRAPHS_H

#include "core/plan.h"

/* Runs a synchronous single-pass run over `in` (one contiguous input) from a graph kept for it, the
 * second time the same reduction is asked for (same memory, size, op, kernel, shape and stream) and
 * after; *handled is 0 when the run is not one a graph serves, or the context has stopped using graphs
 * (the caller runs it as usual). */
gr_status gr_graph_reduce(gr_context *ctx, const gr_inputs *in, const gr_run *run, void *stream, gr_result *out,
                          int *handled);
/* Destroys every kept graph and gives back its slot (gr_pool_trim, the context's end). */
void gr_graphs_clear(gr_context *ctx);

#endif
