/*
 * comm_axes.h -- c:reduce along axes of the ops whose ranks' results one all-reduce cannot combine: for
 * mean, var and std of floats, argmin, argmax and minmax each rank's partial results along the axes, merged
 * in rank order here; for the others (norm, nanmean, var and std of integers, every op at gpu_to_gpu) every
 * rank's elements, put one after another and reduced as one buffer. Either way a head that says what each
 * rank reduced is gathered from every rank first (comm.c) and checked here (comm_axes.c).
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
    int32_t det;                        /* the determinism level */
    uint64_t K, R, lead, inner;         /* results; elements each covers; the first reduced axis; the others */
    uint64_t shape[GR_MAX_DIMS];
} gr_axes_head;

/* A rank's part: its head and, where it has results (K > 0), its partial results along the axes (buffers
 * of K elements of M's dtypes on b's side; unset where R = 0). */
typedef struct gr_axes_rank {
    gr_axes_head head;
    gr_buffer *res[2][2];
} gr_axes_rank;

/* The parts o takes along axes on dtype t (M), for the ops comm_parts.h's gr_part_gathered names: mean,
 * argmin, argmax, minmax and var/std of floats have parts (M->nparts > 0); for the others M->nparts is 0
 * and the ranks' elements are gathered whole. GR_EINVAL with its reason where o's accumulator does not take
 * the dtype. */
gr_status gr_axes_rank_plan(gr_context *ctx, const gr_options *o, gr_dtype t, gr_axes_parts *M);
/* b reduced into this rank's part (me): a failure goes into its head too, and is returned with its message. */
gr_status gr_axes_rank_make(gr_context *ctx, gr_buffer *b, const gr_options *o, unsigned axes, const gr_axes_parts *M,
                            gr_axes_rank *me);
void gr_axes_rank_free(gr_context *ctx, gr_axes_rank *me);
/* GR_OK when every rank reduced what rank 0 did, to results of one shape (and, where the elements are gathered
 * whole -- `whole` --, the reduced axes past the first of one shape too, among the ranks that hold elements
 * along the axes); else the first difference, named. *total: the elements every result covers over all the
 * ranks. */
gr_status gr_axes_heads_check(gr_context *ctx, const gr_axes_head *heads, int count, int whole, uint64_t *total);
/* The array one buffer holding every rank's elements would be: src[r], rank r's array (of heads[r]'s shape;
 * unread where heads[r].R is 0), put one after another along the first reduced axis in rank order, into a
 * new buffer on like's side and device (*cat, a view of that shape). Some rank holds elements (total > 0). */
gr_status gr_axes_concat(gr_context *ctx, const gr_axes_head *heads, int count, gr_buffer *const *src,
                         const gr_buffer *like, gr_buffer **cat);
/* The results from every rank's partial results read to the host (all[p][r]: count ranks' K elements of
 * M->dt[p][r] each, rank 0's first), combined in rank order, written into out. */
gr_status gr_axes_ranks_merge(gr_context *ctx, const gr_options *o, const gr_axes_parts *M, const gr_axes_head *heads,
                              int count, char *const all[2][2], gr_buffer *out[2]);

#endif
