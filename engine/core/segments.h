/*
 * segments.h -- what segments.c lends to the other segmented paths (the shards' segments,
 * sharded_segments.c): the check of the result buffers, a segmented reduction queued.
 */
#ifndef GR_SEGMENTS_H
#define GR_SEGMENTS_H

#include "core/handles.h"

struct gr_pass_kernel;     /* core/plan.h */

/* out[0..count) checked for k results of the dtypes want[]: present, of that dtype and size, on b's
 * side (device or host memory, on the cuda backend), sharing no memory with b, the offsets or each
 * other; each failure names "out" or "out2". */
gr_status gr_segment_outs_check(gr_context *ctx, const gr_buffer *b, const gr_buffer *offsets, gr_buffer *out[2],
                                int count, const gr_dtype want[2], size_t k);

/* A segmented reduction queued on its device's stream and not yet waited for: the shards of a sharded
 * buffer queue theirs on every device before they wait for any. */
typedef struct gr_seg_wait {
    gr_context *ctx;        /* the context whose stream runs it; NULL: nothing in flight (done, or host) */
    gr_slot *slot;          /* scratch the kernel uses, released at the wait; or NULL */
    int rc;                 /* a launch's failure, reported at the wait */
    const char *what, *site;
} gr_seg_wait;

/* gr_reduce_segments less its wait: everything checked, the kernel queued (host data is reduced at once,
 * leaving nothing in flight). After GR_OK the caller must call gr_segments_wait. */
gr_status gr_segments_queue(gr_context *ctx, gr_buffer *b, const gr_options *o, const gr_segments *seg,
                            gr_buffer *out[2], gr_seg_wait *w);
/* The rows of an axis reduction (core/axes.c), synchronously: k = #b / row rows of `row` elements, row s
 * at element s * pitch of b's data (b may be a strided view then: only its data, dtype and size are
 * read; pitch is honoured on the device only), or, with row 0, the segments between `offsets`; the
 * launch shaped by the row's length alone (gr_policy_axis_rows), so a row's bits do not depend on k. */
gr_status gr_segments_rows(gr_context *ctx, gr_buffer *b, const gr_options *o, size_t row, size_t pitch,
                           const gr_buffer *offsets, gr_buffer *out[2]);
/* gr_segments_rows of `row` > 0 less its wait: after GR_OK the caller must call gr_segments_wait, or
 * wait for the stream and give w->slot back itself. */
gr_status gr_segments_rows_queue(gr_context *ctx, gr_buffer *b, const gr_options *o, size_t row, size_t pitch,
                                 gr_buffer *out[2], gr_seg_wait *w);
/* gr_reduce_segments where the caller knows the longest segment (`longest` elements): segments of very
 * uneven lengths are shared out by blocks (gr_policy_uneven_segments) rather than by their mean. Every
 * call over offsets does so already (the check of the offsets measures their longest); the larger of the
 * two shapes the launch. */
gr_status gr_segments_uneven(gr_context *ctx, gr_buffer *b, const gr_options *o, const gr_segments *seg, size_t longest,
                             gr_buffer *out[2]);

/* Several inputs per segment (gr.dot, core/dot.c; an operator of several inputs, core/inputs.c): the
 * segments of compact bufs[0..count) together -- or, with axis_rows, their rows of seg->size -- reduced
 * by `pair` (gr.dot's kernel, planned here as the sum: it reads the others' elements from run->with), or
 * with pair NULL by the planned kernel (an operator's image of count inputs, or its cpu functions), into
 * the results, which must share no memory with any input; synchronously. */
gr_status gr_segments_inputs(gr_context *ctx, gr_buffer *const *bufs, int count, const struct gr_pass_kernel *pair,
                             const gr_options *o, const gr_segments *seg, int axis_rows, gr_buffer *out[2]);
/* gr_segments_inputs less its wait (as gr_segments_queue): after GR_OK the caller must call
 * gr_segments_wait, or wait for the stream and give w->slot back itself. */
gr_status gr_segments_inputs_queue(gr_context *ctx, gr_buffer *const *bufs, int count,
                                   const struct gr_pass_kernel *pair, const gr_options *o, const gr_segments *seg,
                                   int axis_rows, gr_buffer *out[2], gr_seg_wait *w);
/* Waits for a queued segmented reduction (its stream), gives its scratch back; the launch's or the
 * kernel's failure, if any. Does nothing for a record with nothing in flight. */
gr_status gr_segments_wait(gr_seg_wait *w);

#endif
