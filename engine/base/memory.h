/*
 * memory.h -- allocations and copies, counted and breakable (memory.c, faults.c).
 */
#ifndef GR_MEMORY_H
#define GR_MEMORY_H

#include "base/state.h"

gr_status gr_mem_alloc(gr_context *ctx, gr_mem_kind kind, size_t bytes, void **out);
void gr_mem_free(gr_context *ctx, gr_mem_kind kind, void *p, size_t bytes);
/* An asynchronous copy in any direction (memmove on the cpu backend); a CUDA error code or 0. */
int gr_copy(gr_context *ctx, void *dst, const void *src, size_t bytes, void *stream);

/* Counts one event of the kind; returns the CUDA error code it must fail with when a test armed it. */
int gr_fault_hit(gr_context *ctx, gr_fault_kind kind);
void gr_fault_init_from_env(gr_context *ctx);

#endif
