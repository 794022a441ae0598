/*
 * storage.h -- what the rest of the engine does with a buffer's memory (buffer.c).
 */
#ifndef GR_STORAGE_H
#define GR_STORAGE_H

#include "handles.h"

/* Waits for queued reductions that read the storage; called before anything writes or frees it. */
gr_status gr_storage_quiesce(gr_context *ctx, gr_storage *st);
/* Marks the storage as read by the work queued on `stream` until now. */
gr_status gr_storage_mark_read(gr_context *ctx, gr_storage *st, void *stream);

#endif
