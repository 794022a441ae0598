/*
 * state.h -- the base layer's part of a context: the backend, the error state, the memory counts and
 * limit, the injected faults, the cpu backend's thread count.
 *
 * Data only, like core/handles.h above it. struct gr_context (core/handles.h) begins with a gr_base, and
 * C11 (6.7.2.1) makes a pointer to a structure, converted, a pointer to its first member: so the base and
 * ops layers take the gr_context * of gr.h, as everyone calls them, and reach their own fields through
 * gr_base_of -- a cast, no load -- without seeing the rest of the context. handles.h asserts the order.
 */
#ifndef GR_STATE_H
#define GR_STATE_H

#include "gr.h"

/* The kinds of memory the context allocates (memory.c); host memory stands in for both on cpu. */
typedef enum { GR_MEM_DEVICE, GR_MEM_PINNED, GR_MEM_KINDS } gr_mem_kind;

/* The kinds of event a test can make fail (faults.c). */
typedef enum { GR_FAULT_ALLOC, GR_FAULT_LAUNCH, GR_FAULT_COPY, GR_FAULT_KINDS } gr_fault_kind;

/* The bytes of a context's error message, its terminating zero included. */
#define GR_ERR_BYTES 512

typedef struct gr_base {
    gr_backend backend;
    /* Failures are written to the root's (error.c): one message per context the caller made. An inner
     * context (one per other device, core/context.c) points at its root's gr_base; the root at its own. */
    struct gr_base *root;
    char err[GR_ERR_BYTES];
    char err_arg[64];       /* the parameter the last misuse concerns, in C words ("block"), or "" */
    int cpu_threads;        /* the cpu backend's threads (ops/cpu_backend.c) */
    struct {                /* this context's own (memory.c): each device counts its own */
        size_t live_bytes[GR_MEM_KINDS], live_count[GR_MEM_KINDS];
        size_t limit;       /* bytes of device + pinned memory the context may hold; 0 = no limit */
    } mem;
    struct {                /* this context's own (faults.c) */
        size_t count[GR_FAULT_KINDS];   /* events so far */
        size_t at[GR_FAULT_KINDS];      /* the first event that fails (a count), 0 = none armed */
        int injected;                   /* the last failure was injected */
    } fault;
} gr_base;

/* The base state of a context (const for a const context). */
#define gr_base_of(ctx) _Generic((ctx), \
    gr_context *: (gr_base *)(void *)(ctx), \
    const gr_context *: (const gr_base *)(const void *)(ctx))

#endif
