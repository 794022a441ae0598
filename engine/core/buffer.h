/*
 * storage.h -- what the rest of the engine does with a buffer's memory (buffer.c).
 */
#ifndef GR_STORAGE_H
#define GR_STORAGE_H

#include "core/handles.h"

/* Waits for queued reductions that read the storage; called before anything writes or frees it. */
gr_status gr_storage_quiesce(gr_context *ctx, gr_storage *st);
/* Marks the storage as read by the work queued on `stream` until now. */
gr_status gr_storage_mark_read(gr_context *ctx, gr_storage *st, void *stream);

/* Handles of the engine's own on the memory of bufs[0..count) (the same views), for a reduction that
 * calls code which may free the caller's handles meanwhile (a user operator's functions): it reads and
 * writes through these, and the memory stays until gr_buffers_release. *out is malloc'd; a NULL entry
 * stays NULL. */
gr_status gr_buffers_hold(gr_context *ctx, gr_buffer *const *bufs, size_t count, gr_buffer ***out);
void gr_buffers_release(gr_context *ctx, gr_buffer **held, size_t count);

/* Memory another owner lends until it is released (an imported DLPack tensor, core/dlpack.c): one handle
 * on `bytes` at ptr, on `where` of ctx's device, n elements of t as a compact 1-D view (the caller may give
 * the handle another view of that memory). When the last handle and the last queued reduction reading it
 * let go, release(arg) runs once in place of a free. On failure release does not run. */
gr_status gr_buffer_adopt(gr_context *ctx, void *ptr, size_t bytes, gr_where where, size_t n, gr_dtype t,
                          void (*release)(void *arg), void *arg, gr_buffer **out);

/* gr_buffer_new without the zero fill: for a buffer the caller writes whole before anyone reads it (the
 * result of a conversion). */
gr_status gr_buffer_new_unset(gr_context *ctx, size_t n, gr_dtype t, gr_where where, gr_buffer **out);
/* src's bytes into dst, of the same dtype and size (checked), any sides and devices, overlapping views
 * as memmove: gr_buffer_copy's work when the dtypes agree (core/convert.c). */
gr_status gr_buffer_copy_bytes(gr_context *ctx, gr_buffer *dst, const gr_buffer *src);

/* The elements of strided view `view` in row-major order into compact dst (gather), or compact src's into
 * the view (scatter): the same dtype and size, on one side (host memory, or one device's memory), not
 * overlapping. Waited for. */
gr_status gr_buffer_gather(gr_context *ctx, gr_buffer *dst, const gr_buffer *view);
gr_status gr_buffer_scatter(gr_context *ctx, gr_buffer *view, const gr_buffer *src);

/* GR_EINVAL naming `arg` when b is a strided view: the reductions read compact buffers only (for now a
 * caller reduces a strided view's compact copy, gr_buffer_contiguous). */
gr_status gr_buffer_check_compact(gr_context *ctx, const gr_buffer *b, const char *arg);

/* The launch's input descriptor of compact buffers of one length, element for element, in order (gr.dot's
 * pair, an operator's inputs): bufs[0]'s shape, each its own data and dtype. */
struct gr_inputs;
void gr_buffer_inputs(struct gr_inputs *in, gr_buffer *const *bufs, int count);

/* b's shape as messages show it, "{2, 3}", into buf (cut short where size is); gr_shape_text: any nd
 * lengths so. */
const char *gr_buffer_shape_text(const gr_buffer *b, char *buf, size_t size);
const char *gr_shape_text(int nd, const size_t *shape, char *buf, size_t size);

#endif
