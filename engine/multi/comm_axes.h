/*
 * comm_axes.h -- c:reduce along axes of the ops whose ranks' results one all-reduce cannot combine (mean,
 * var and std of floats, argmin, argmax, minmax): each rank's partial results along the axes and a head
 * that says what it reduced, gathered from every rank by comm.c, and merged in rank order here
 * (comm_axes.c).
 */
#ifndef GR_COMM_AXES_H
#define GR_COMM_AXES_H

#include "core/handles.h"
#include "multi/axes_parts.h"

#include <stdint.h>

/* What a rank reduced along the axes, gathered before its results: every rank checks every head the same
 * way, so all fail, or none, before the results are gathered. */
typedef struct gr_axes_head {
    int32_t status, op, dtype, acc, ddof, ndim;
    uint32_t axes;
    int32_t pad;
    uint64_t K, R, lead, inner;         /* results; elements each covers; the first reduced axis; the others */
    uint64_t shape[GR_MAX_DIMS];
} gr_axes_head;

/* A rank's part: its head and, where it has results (K > 0), its partial results along the axes (buffers
 * of K elements of M's dtypes on b's side; unset where R = 0). */
typedef struct gr_axes_rank {
    gr_axes_head head;
    gr_buffer *res[2][2];
} gr_axes_rank;

/* The parts o takes along axes on dtype t (M), for the ops whose parts are gathered (comm_parts.h's
 * gr_part_gathered: mean, argmin, argmax, minmax and var/std of floats of them), or GR_EINVAL naming "op" for the ops it cannot gather. */
gr_status gr_axes_rank_plan(gr_context *ctx, const gr_options *o, gr_dtype t, gr_axes_parts *M);
/* b reduced into this rank's part (me): a failure goes into its head too, and is returned with its message. */
gr_status gr_axes_rank_make(gr_context *ctx, gr_buffer *b, const gr_options *o, unsigned axes, const gr_axes_parts *M,
                            gr_axes_rank *me);
void gr_axes_rank_free(gr_context *ctx, gr_axes_rank *me);
/* GR_OK when every rank reduced what rank 0 did, to results of one shape; else the first difference, named.
 * *total: the elements every result covers over all the ranks. */
gr_status gr_axes_heads_check(gr_context *ctx, const gr_axes_head *heads, int count, uint64_t *total);
/* The results from every rank's partial results read to the host (all[p][r]: count ranks' K elements of
 * M->dt[p][r] each, rank 0's first), combined in rank order, written into out. */
gr_status gr_axes_ranks_merge(gr_context *ctx, const gr_options *o, const gr_axes_parts *M, const gr_axes_head *heads,
                              int count, char *const all[2][2], gr_buffer *out[2]);

#endif
