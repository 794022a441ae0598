/*
 * axes_parts.h -- reductions along axes whose parts (shards of a sharded buffer, ranks of a communicator)
 * were reduced apart: the reductions of each part whose results rebuild the op's accumulator per output,
 * and that accumulator rebuilt from them, for the parts' accumulators to be combined in order
 * (axes_parts.c; used by sharded_axes.c and comm_axes.c).
 */
#ifndef GR_AXES_PARTS_H
#define GR_AXES_PARTS_H

#include "core/handles.h"

#include <stdint.h>

/* What each part reduces for op o of dtype t along the axes: part[p] (p < nparts), each with nres[p] results
 * of dtypes dt[p][0..nres[p]); the op's accumulator dtype and size. */
typedef struct gr_axes_parts {
    int nparts;
    gr_op part[2];
    gr_dtype t, acc;
    size_t as;
    gr_dtype dt[2][2];
    int nres[2];
} gr_axes_parts;

/* The parts' reductions for o on dtype t, or 0 where their results cannot rebuild o's accumulators: a one-value
 * op (its own results, a mean its sums), argmin/argmax/minmax, var/std of floats (each part's mean and
 * population variance); not norm, nanmean, var/std of integers, user operators or gpu_to_gpu. */
int gr_axes_partial_ops(const gr_options *o, gr_dtype t, gr_op part[2]);
/* P filled for o on dtype t (P->nparts from gr_axes_partial_ops, non-zero): the accumulator and the results'
 * dtypes; GR_EINVAL with the reason in ctx where o cannot be reduced so. */
gr_status gr_axes_parts_init(gr_context *ctx, const gr_options *o, gr_dtype t, gr_axes_parts *P);
/* Whether a one-value op's result is its accumulator's value, bit for bit (its results rebuild it). */
int gr_axes_parts_exact_value(const gr_axes_parts *P);
/* A part's accumulator for output c from its results (host[p][r]: the arrays of results from output 0): n the
 * elements each of its outputs covers, index0 the index of its first element among the whole's (an argmin's
 * index is moved by it). */
void gr_axes_parts_rebuild(const gr_axes_parts *P, uint64_t n, uint64_t index0, size_t c, char *const host[2][2],
                           void *acc);

#endif
