/*
 * exact_run.h -- opts.determinism = "gpu_to_gpu" run (exact_run.c): the plan of the exact kernel, whole
 * buffers, streamed chunks and segments (the pass itself is exact_pass.h's). The entry points (reduce.c,
 * plan.c, streamed.c, segments.c) hand such calls over here.
 */
#ifndef GR_EXACT_RUN_H
#define GR_EXACT_RUN_H

#include "core/handles.h"

struct gr_seg_wait;     /* segments.h */

/* The plan of a gpu_to_gpu reduction of n elements of dtype t in memory of kind `where`: one pass of
 * the exact kernel (opts.block and opts.grid shape it; opts.variant, finish and threshold change
 * nothing), or on the host where the data is (the cpu backend, host buffers); plan->exact is set.
 * Refuses user operators, ops and dtypes without an exact form, naming the option. */
gr_status gr_exact_plan(gr_context *ctx, size_t n, gr_dtype t, gr_where where, const gr_options *o, gr_plan *plan);
/* A synchronous whole-buffer reduction. */
gr_status gr_exact_reduce(gr_context *ctx, gr_buffer *b, const gr_options *o, gr_result *out);
/* Streamed host data (h a host buffer, chunk and streams checked by streamed.c): every chunk's kernel adds
 * into the one accumulator (the chunk size changes no bit). */
gr_status gr_exact_streamed(gr_context *ctx, gr_buffer *h, const gr_options *o, size_t chunk_bytes, int streams,
                            gr_result *out);
/* k segments of b (size, or the offsets buffer, already checked), each one's result into element s of
 * out, a buffer of the accumulator's dtype on b's side. Where the host reduces, bounds are the offsets
 * the caller read and checked (NULL with size); the device reads the buffer's. On the device with w
 * the kernel is only queued (segments.h: gr_segments_wait finishes it); without w it is waited for. */
gr_status gr_exact_segments(gr_context *ctx, gr_buffer *b, const gr_options *o, size_t size, const gr_buffer *offsets,
                            const int64_t *bounds, size_t k, gr_buffer *out, struct gr_seg_wait *w);

#endif
