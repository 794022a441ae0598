/*
 * pool.h -- scratch for reductions in flight (pool.c), and the context's auxiliary streams.
 */
#ifndef GR_POOL_H
#define GR_POOL_H

#include "handles.h"

gr_status gr_slot_acquire(gr_context *ctx, size_t dev_bytes, size_t host_bytes, gr_slot **out);
void gr_slot_release(gr_context *ctx, gr_slot *s);
void gr_pool_destroy(gr_context *ctx);
/* Frees every slot that is not busy (gr_pool_trim, after the graphs have given theirs back). */
void gr_pool_release_idle(gr_context *ctx);
/* The context's auxiliary stream i (0 <= i < GR_MAX_AUX_STREAMS), created on first use. */
gr_status gr_aux_stream(gr_context *ctx, int i, void **out);

#endif
