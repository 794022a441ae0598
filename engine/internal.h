/*
 * internal.h -- what the engine's own files share and the public header does not promise.
 *
 * Three seams live here:
 *   1. the structures behind the opaque handles of gr.h;
 *   2. the device interface (gr_dev_*): every call the engine makes to the GPU goes through it. It is
 *      implemented by cuda/runtime.cu in a CUDA build and by engine/device_none.c in a CPU-only build,
 *      so no engine file includes a CUDA header;
 *   3. the launcher contract: one extern "C" launcher per kernel variant (cuda/vNN_*.cu).
 */
#ifndef GR_INTERNAL_H
#define GR_INTERNAL_H

#include "gr.h"
#include <stdarg.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- handles ----------------------------------------------------------------------------------- */

/* The memory behind one or more buffer handles (a buffer and its slices). Reference-counted: the
 * memory goes when the last handle and the last in-flight reduction reading it let go. */
typedef struct gr_storage {
    void *ptr;
    size_t bytes;
    gr_where where;
    int owned;              /* 0 for memory wrapped from the host application */
    int refs;
    void *last_read;        /* event recorded after the last queued reduction reading it, or NULL */
} gr_storage;

struct gr_buffer {
    gr_storage *st;
    size_t offset;          /* in elements */
    size_t n;
    gr_dtype dtype;
};

struct gr_stream {
    void *handle;           /* cudaStream_t on cuda; NULL on cpu */
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
    void *result;           /* pinned, mapped, 64 bytes: the single-pass kernel writes the value here */
    void *done;             /* event marking the end of the reduction's device work */
    int busy;
    /* synchronous calls learn that the work is done from a flag the stream writes into result + 32 */
    unsigned seq;           /* the value the last flag write carries */
    int flagged;            /* 1 when the current reduction ends with a flag write, 0 with `done` */
    void *stream;           /* the stream the current reduction runs on */
} gr_slot;

#define GR_MAX_SLOTS 256
#define GR_MAX_AUX_STREAMS 16

/* The kinds of memory the context allocates (memory.c); host memory stands in for both on cpu. */
typedef enum { GR_MEM_DEVICE, GR_MEM_PINNED, GR_MEM_KINDS } gr_mem_kind;

/* The kinds of event a test can make fail (faults.c). */
typedef enum { GR_FAULT_ALLOC, GR_FAULT_LAUNCH, GR_FAULT_COPY, GR_FAULT_KINDS } gr_fault_kind;

struct gr_context {
    gr_backend backend;
    char err[512];
    char err_arg[64];       /* the parameter the last misuse concerns, in C words ("block"), or "" */
    struct {
        size_t live_bytes[GR_MEM_KINDS], live_count[GR_MEM_KINDS];
        size_t limit;       /* bytes of device + pinned memory the context may hold; 0 = no limit */
    } mem;
    struct {
        size_t count[GR_FAULT_KINDS];   /* events so far */
        size_t at[GR_FAULT_KINDS];      /* the event that fails (a count), 0 = none armed */
        int injected;                   /* the last failure was injected */
    } fault;
    void *stream;           /* the context's own stream (cuda) */
    gr_device_info info;
    gr_slot *slots[GR_MAX_SLOTS];
    int nslots;
    int cpu_threads;
    void *aux_streams[GR_MAX_AUX_STREAMS];   /* for streamed host data, made on first use */
    gr_pool_stats stats;
};

struct gr_pending {
    gr_buffer *b;           /* a handle of our own on the buffer's memory */
    gr_slot *slot;
    gr_plan plan;
    gr_dtype in_dtype;
    gr_op op;
    int finished;
    gr_status status;
    gr_scalar value;
    char err[512];          /* the failure's message, kept for repeated waits */
};

/* ---- errors (error.c) ------------------------------------------------------------------------------ */

gr_status gr_fail(gr_context *ctx, gr_status st, const char *fmt, ...);
/* A failure that concerns one parameter, named in C words ("block"): the message starts with it and
 * gr_errarg returns it. */
gr_status gr_fail_arg(gr_context *ctx, gr_status st, const char *arg, const char *fmt, ...);
/* Wraps a CUDA error code into GR_ECUDA (GR_ENOMEM for allocation failures) with its name. */
gr_status gr_fail_dev(gr_context *ctx, int code, const char *what);
gr_status gr_fail_dev_at(gr_context *ctx, int code, const char *what, const char *site);

/* ---- memory (memory.c) and injected faults (faults.c) ------------------------------------------------ */

gr_status gr_mem_alloc(gr_context *ctx, gr_mem_kind kind, size_t bytes, void **out);
void gr_mem_free(gr_context *ctx, gr_mem_kind kind, void *p, size_t bytes);
/* An asynchronous copy in any direction (memmove on the cpu backend); a CUDA error code or 0. */
int gr_copy(gr_context *ctx, void *dst, const void *src, size_t bytes, void *stream);
/* Counts one event of the kind; returns the CUDA error code it must fail with when a test armed it. */
int gr_fault_hit(gr_context *ctx, gr_fault_kind kind);
/* 1 when the last failure was injected (and forgets it). */
int gr_fault_take_injected(gr_context *ctx);
void gr_fault_init_from_env(gr_context *ctx);

/* ---- the device interface --------------------------------------------------------------------- */

int gr_dev_present(void);                             /* 1 when a usable CUDA device exists */
int gr_dev_init(gr_device_info *info);                /* 0 or a CUDA error code */
const char *gr_dev_error_name(int code);
const char *gr_dev_error_string(int code);
int gr_dev_error_is_oom(int code);
int gr_dev_malloc(void **p, size_t bytes);
int gr_dev_free(void *p);
int gr_dev_host_alloc(void **p, size_t bytes);        /* pinned and mapped */
int gr_dev_host_free(void *p);
int gr_dev_memset(void *p, int v, size_t bytes, void *stream);
int gr_dev_copy(void *dst, const void *src, size_t bytes, void *stream);   /* any direction, async */
int gr_dev_stream_create(void **s);
int gr_dev_stream_destroy(void *s);
int gr_dev_stream_sync(void *s);
int gr_dev_event_create(void **e, int timing);
int gr_dev_event_destroy(void *e);
int gr_dev_event_record(void *e, void *stream);
int gr_dev_event_sync(void *e);
int gr_dev_event_query(void *e);                      /* 0 done, 1 not yet, else an error code */
int gr_dev_event_elapsed(float *ms, void *start, void *end);
int gr_dev_stream_wait_event(void *stream, void *e);
int gr_dev_stream_query(void *s);                     /* 0 done, 1 not yet, else an error code */
/* queues a write of value to *flag (pinned host memory) after the stream's earlier work */
int gr_dev_write_flag(void *stream, unsigned *flag, unsigned value);
/* the read-bandwidth ceiling kernel: reads n bytes at p, XOR-folds them into *sink */
int gr_dev_read_all(const void *p, size_t bytes, unsigned *sink, int sms, void *stream);
/* generators of buffer contents, on the device */
int gr_dev_fill(void *p, size_t n, gr_dtype t, gr_scalar v, void *stream);
int gr_dev_iota(void *p, size_t n, gr_dtype t, gr_scalar start, gr_scalar step, void *stream);
int gr_dev_random(void *p, size_t n, gr_dtype t, uint64_t seed, size_t first, gr_scalar lo,
                  gr_scalar hi, void *stream);

/* ---- kernel launchers ------------------------------------------------------------------------- */

/* One pass of a variant: n inputs of in_dtype -> `grid` partials of the accumulator type in `out`.
 * When `final_out` is set the variant finishes in the same kernel (finish "single"): the last block
 * combines the partials and writes one accumulator value to final_out, leaving *counter zero. */
typedef struct gr_launch {
    const void *in;
    size_t n;
    gr_dtype in_dtype;
    gr_op op;
    gr_dtype acc;
    void *out;
    size_t grid;
    int block;
    void *stream;
    unsigned *counter;
    void *final_out;
    void *scratch;          /* device scratch for variants that work on a copy of their input */
    size_t scratch_bytes;
} gr_launch;

typedef int (*gr_launch_fn)(const gr_launch *L);      /* returns a CUDA error code, 0 = success */
/* The planner's choice of the first pass's grid for n inputs: variants differ in how many elements
 * one block takes. Returns 0 when n == 0. */
typedef size_t (*gr_grid_fn)(size_t n, int block, gr_dtype in_dtype, const gr_device_info *dev);
/* Extra device scratch a variant needs for one pass (e.g. CUB's temporary storage), 0 for none. */
typedef size_t (*gr_scratch_fn)(size_t n, gr_dtype in_dtype, gr_op op, gr_dtype acc);

/* ---- registry internals ------------------------------------------------------------------------ */

typedef struct gr_variant_impl {
    gr_launch_fn launch;    /* NULL for host variants and in a CPU-only build */
    gr_grid_fn grid;
    gr_scratch_fn scratch;  /* optional */
    /* host variants: reduce n elements at p on the CPU into one accumulator value at acc_out */
    gr_status (*host)(gr_context *ctx, const void *p, size_t n, gr_dtype t, gr_op op, gr_dtype acc,
                      void *acc_out);
} gr_variant_impl;

const gr_variant_impl *gr_variant_impl_get(int i);
/* GR_OK when the variant takes `block` threads per block, else a message listing what it takes. */
gr_status gr_check_block(gr_context *ctx, const gr_variant *v, int block);
int gr_variant_auto(const gr_context *ctx, const gr_buffer *b, gr_op op);

/* ---- accumulator rules (one place) ------------------------------------------------------------- */

/* The accumulator dtype for op over dtype t, with an optional override (-1 = none). Returns -1 and
 * sets the context's message when the override is not accepted. */
int gr_acc_dtype(gr_context *ctx, gr_op op, gr_dtype t, int override);
/* Converts one accumulator value (acc bytes at p) into the caller's result. */
gr_scalar gr_acc_to_scalar(const void *p, gr_dtype acc, gr_dtype in_dtype, gr_op op);
/* The identity of op as a result, for empty sum/prod/and/or. */
gr_scalar gr_identity_scalar(gr_op op, gr_dtype in_dtype, gr_dtype acc);

/* ---- CPU backend ------------------------------------------------------------------------------- */

/* Reduces n elements of t at p into one accumulator value (written at acc_out) with the same semantics
 * as the kernels, threaded and deterministic for a given machine. pairwise = 1 uses the recursive
 * interleaved-pair order instead of per-thread runs. */
gr_status gr_cpu_reduce(gr_context *ctx, const void *p, size_t n, gr_dtype t, gr_op op, gr_dtype acc,
                        int pairwise, void *acc_out);
/* Combines `count` partials of the accumulator dtype (the CPU finish of every mode that has one) into
 * the caller's result for a reduction of in_dtype. */
gr_status gr_cpu_finish(gr_context *ctx, const void *partials, size_t count, gr_dtype acc, gr_op op,
                        gr_dtype in_dtype, gr_scalar *out);
void gr_cpu_fill(void *p, size_t n, gr_dtype t, const void *elem);
void gr_cpu_iota(void *p, size_t n, gr_dtype t, gr_scalar start, gr_scalar step);
void gr_cpu_random(void *p, size_t n, gr_dtype t, uint64_t seed, gr_scalar lo, gr_scalar hi);
int gr_cpu_default_threads(void);

/* ---- pool -------------------------------------------------------------------------------------- */

gr_status gr_slot_acquire(gr_context *ctx, size_t dev_bytes, size_t host_bytes, gr_slot **out);
void gr_slot_release(gr_context *ctx, gr_slot *s);
void gr_pool_destroy(gr_context *ctx);

/* ---- execution --------------------------------------------------------------------------------- */

/* Queues the device part of a plan on `stream`; the CPU part runs in gr_exec_finish. The end is marked
 * with the slot's event, or, with `flag` set (synchronous calls), with a flag write when the driver
 * offers one. */
gr_status gr_exec_start(gr_context *ctx, const gr_buffer *b, const gr_plan *plan, gr_op op,
                        gr_slot *slot, void *stream, int flag);
/* Waits for the device part and produces the value. */
gr_status gr_exec_finish(gr_context *ctx, const gr_buffer *b, const gr_plan *plan, gr_op op,
                         gr_slot *slot, gr_scalar *out);
size_t gr_plan_scratch_bytes(const gr_plan *plan);
size_t gr_plan_host_bytes(const gr_plan *plan);
size_t gr_plan_half_offset(const gr_plan *plan);   /* where the second ping-pong half starts */
size_t gr_plan_extra_offset(const gr_plan *plan);  /* where the variant's own scratch starts */

/* The context's auxiliary stream i (0 <= i < GR_MAX_AUX_STREAMS), created on first use. */
gr_status gr_aux_stream(gr_context *ctx, int i, void **out);
/* Queues one pass of variant `vi` over n elements at `in` with the single-pass finish writing one
 * accumulator value to final_out; `slot` gives the partials and the counter. */
gr_status gr_launch_single(gr_context *ctx, int vi, const void *in, size_t n, gr_dtype t, gr_op op, gr_dtype acc,
                           int block, gr_slot *slot, void *partials, void *final_out, void *stream);

/* Waits for queued reductions that read b's memory; called before anything writes or frees it. */
gr_status gr_storage_quiesce(gr_context *ctx, gr_storage *st);

#ifdef __cplusplus
}
#endif
#endif
