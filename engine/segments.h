/*
 * segments.h -- what segments.c lends to the other segmented paths (the shards' segments,
 * sharded_segments.c): the check of the result buffers, a result stored as an element.
 */
#ifndef GR_SEGMENTS_H
#define GR_SEGMENTS_H

#include "handles.h"

/* out[0..count) checked for k results of the dtypes want[]: present, of that dtype and size, on b's
 * side (device or host memory, on the cuda backend), sharing no memory with b, the offsets or each
 * other; each failure names "out" or "out2". */
gr_status gr_segment_outs_check(gr_context *ctx, const gr_buffer *b, const gr_buffer *offsets, gr_buffer *out[2],
                                int count, const gr_dtype want[2], size_t k);
/* A result value v stored as element i of p, a result buffer's memory of dtype t (a bool as 0 / 1). */
gr_status gr_segment_result_store(gr_context *ctx, void *p, size_t i, gr_dtype t, gr_scalar v);

#endif
