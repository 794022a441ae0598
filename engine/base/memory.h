/*
 * memory.h -- allocations and copies, counted and breakable (memory.c, faults.c).
 */
#ifndef GR_MEMORY_H
#define GR_MEMORY_H

#include "base/state.h"

gr_status gr_mem_alloc(gr_context *ctx, gr_mem_kind kind, size_t bytes, void **out);
/* Frees what gr_mem_alloc gave, counted at once. Device memory from the buffer pool is not waited for:
 * it returns to the pool after the work queued so far on `stream` and the work before the event `after`
 * (NULL: none), and no other work gets it before (cuda/runtime/runtime.cu says why). gr_mem_free is the
 * same with no stream: it waits for the device first, as cudaFree does. Pinned memory is freed at once:
 * its caller waits for its readers first. */
void gr_mem_free_after(gr_context *ctx, gr_mem_kind kind, void *p, size_t bytes, void *stream, void *after);
void gr_mem_free(gr_context *ctx, gr_mem_kind kind, void *p, size_t bytes);
/* Gives the buffer pool's idle device memory back to the driver (gr_pool_trim), after waiting for the
 * devices, so that queued frees are done; nothing on the cpu backend. */
void gr_mem_trim(gr_context *ctx);

/* An asynchronous copy in any direction (memmove on the cpu backend); a CUDA error code or 0. */
int gr_copy(gr_context *ctx, void *dst, const void *src, size_t bytes, void *stream);

/* Counts one event of the kind; returns the CUDA error code it must fail with when a test armed it. */
int gr_fault_hit(gr_context *ctx, gr_fault_kind kind);
void gr_fault_init_from_env(gr_context *ctx);

#endif
