/*
 * comm_parts.h -- the parts of a one-value c:reduce whose ranks' results do not meet in one all-reduce
 * (comm_parts.c): each rank's accumulator and element count as a record of bytes, which comm.c gathers
 * from every rank, and the records merged in rank order into the result every rank gives.
 */
#ifndef GR_COMM_PARTS_H
#define GR_COMM_PARTS_H

#include "core/handles.h"

/* Whether c:reduce of one value with o gathers the ranks' parts: mean, nanmean, var, std, norm, argmin,
 * argmax, minmax, and every op at determinism gpu_to_gpu (the exact sums merge without a rounding). */
int gr_part_gathered(const gr_options *o);
/* Bytes of one rank's record for o: the same on every rank that makes the same call. */
size_t gr_part_bytes(const gr_options *o);
/* This rank's record (gr_part_bytes(o) bytes at rec): b reduced as gr_reduce reduces it, up to its
 * combined accumulator. A failure is written into the record too (the other ranks then fail at once)
 * and returned, with its message in ctx. */
gr_status gr_part_make(gr_context *ctx, gr_buffer *b, const gr_options *o, void *rec);
/* The result of `count` records of `bytes` each, rank 0's first: argmin/argmax indices counted in the
 * ranks' data concatenated in rank order, the accumulators merged in that order. Fails where a record
 * holds a rank's failure or the ranks did not make the same call. */
gr_status gr_part_merge(gr_context *ctx, const void *recs, size_t bytes, int count, gr_result *out);

#endif
