/*
 * handles.h -- the structures behind the opaque handles of gr.h, shared by the engine's own files.
 *
 * Data only: the functions that work on these live in the module that owns each (buffer.c, pool.c,
 * graphs.c, context.c), declared in that module's header. A gr_pending is reduce.c's own.
 */
#ifndef GR_HANDLES_H
#define GR_HANDLES_H

#include "gr.h"
#include "base/state.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The memory behind one or more buffer handles (a buffer and its slices). Reference-counted: the
 * memory goes when the last handle and the last in-flight reduction reading it let go. */
typedef struct gr_storage {
    void *ptr;
    size_t bytes;
    gr_where where;
    int owned;              /* buffer.c's OWNED_*: 0 wrapped (the application's), 1 ours, 2 lent (a release runs) */
    int refs;
    void *last_read;        /* event recorded after the last queued reduction reading it, or NULL */
    int device;             /* the CUDA ordinal of the context that made it (devices.c) */
} gr_storage;

struct gr_buffer {
    gr_storage *st;
    size_t offset;          /* in elements: where element 0 of the view is */
    size_t n;               /* the element count, the product of shape */
    gr_dtype dtype;
    int ndim;               /* 1..GR_MAX_DIMS (core/layout.c) */
    size_t shape[GR_MAX_DIMS];
    size_t strides[GR_MAX_DIMS];    /* in elements; never negative */
};

struct gr_stream {
    void *handle;           /* cudaStream_t on cuda; NULL on cpu */
    int device;             /* the CUDA ordinal it was made on */
};

/* Scratch for one reduction in flight: device ping-pong partials, a last-block-done counter, pinned
 * host memory for partials the CPU finishes and for the result. Grown on demand, then reused: after
 * warm-up no reduction allocates. */
typedef struct gr_slot {
    void *dev;              /* device scratch: two halves for ping-pong passes */
    size_t dev_bytes;
    unsigned *counter;      /* device; zero between uses (kernels leave it zero) */
    void *host;             /* pinned, mapped; partials finished on the CPU */
    size_t host_bytes;
    void *result;           /* pinned, mapped, 128 bytes: the single-pass kernel writes the value here */
    void *done;             /* event marking the end of the reduction's device work */
    int busy;
    /* synchronous calls learn that the work is done from a flag at result + 32, lowered before the launch
     * and raised by the single-pass kernel itself or by the stream after the work */
    int flagged;            /* 1 when the current reduction ends by raising the flag, 0 with `done` */
    void *stream;           /* the stream the current reduction runs on */
} gr_slot;

#define GR_MAX_SLOTS 256
#define GR_MAX_AUX_STREAMS 16

/* A synchronous single-pass reduction kept as a CUDA graph (graphs.c): the key, the graph, and the slot
 * its kernel writes to (held while the graph lives). */
typedef struct gr_graph {
    const void *in;
    size_t n, grid;
    gr_dtype in_dtype, acc;
    gr_op op;
    const struct gr_image *image;           /* the compiled image its pass launches, or NULL */
    int variant, block;
    void *stream;
    void *exec;             /* cudaGraphExec_t, or NULL while the key has been seen only once */
    gr_slot *slot;
    unsigned long long used;
} gr_graph;

#define GR_MAX_GRAPHS 16

/* The devices one context can drive (devices.c): one inner context per device, made on first use. */
#define GR_MAX_DEVICES 16

struct gr_context {
    /* First: the base layer's state (backend, errors, memory counts, faults, cpu threads), which base/
     * and ops/ reach from a gr_context * by a cast (base/state.h). */
    gr_base base;
    /* Several devices (context.c). The context the caller made is the root: it drives the default
     * device and owns one inner context per other device used, each with its own stream, slots,
     * graphs, pools and memory counts. Inner contexts point at the root (base.root, gr_ctx_root); the
     * root at itself. */
    int device;             /* the CUDA ordinal this context drives (0 on cpu) */
    struct gr_context *per_device[GR_MAX_DEVICES];   /* root only: by ordinal; the root's own entry is itself */
    int multi;              /* root only: a device other than the default one has been used */
    void *stream;           /* the context's own stream (cuda) */
    gr_device_info info;
    gr_slot *slots[GR_MAX_SLOTS];
    int nslots;
    size_t exact_round;     /* GPUREDUCE_EXACT_ROUND (exact_pass.c), 0 when unset */
    int by_key_segments;    /* GPUREDUCE_BY_KEY_RUNS=0: no pass over runs (by_key.c) */
    int runs_items;         /* GPUREDUCE_RUNS_ITEMS: 8 or 16 for every dtype; 0: by the value's width */
    void *aux_streams[GR_MAX_AUX_STREAMS];   /* for streamed host data, made on first use */
    gr_pool_stats stats;
    struct {
        gr_graph entries[GR_MAX_GRAPHS];
        unsigned long long clock;       /* a use counter, for least-recently-used eviction */
        int off;                        /* capture failed once: no more graphs in this context */
    } graphs;
};

/* base/state.h: gr_base_of casts a context to its first member */
_Static_assert(offsetof(struct gr_context, base) == 0, "gr_base must come first in gr_context");

/* The root context of ctx: the one its caller made (itself, or the root of an inner context). */
static inline gr_context *gr_ctx_root(const gr_context *ctx) { return (gr_context *)(void *)ctx->base.root; }

#ifdef __cplusplus
}
#endif
#endif
