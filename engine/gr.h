/*
 * gr.h -- the public C API of the gpureduce engine.
 *
 * Plain C, no Lua types and no CUDA types: a C or C++ host application can embed the engine directly,
 * and the Lua binding (lua/) is just one client of this header.
 *
 * Conventions:
 *   - every fallible function returns a gr_status; GR_OK is 0. On failure the context keeps a message
 *     (gr_errmsg) that names what went wrong; failures of the CUDA runtime carry the CUDA error name.
 *   - sizes and indices are size_t (64-bit): buffers of more than 2^31 elements are ordinary.
 *   - the engine never calls exit() or abort().
 */
#ifndef GR_H
#define GR_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GR_VERSION "0.1.0"

typedef enum gr_status {
    GR_OK = 0,
    GR_EINVAL,       /* misuse: bad argument, unknown name, size mismatch */
    GR_EFREED,       /* the buffer was freed */
    GR_ENOMEM,       /* out of host or device memory */
    GR_ENODEV,       /* the operation needs the cuda backend */
    GR_ECUDA,        /* any other failure reported by the CUDA runtime */
    GR_EEMPTY,       /* an op without an identity (min, max, mean, argmin, ...) over an empty buffer */
    GR_ETIMEOUT      /* another process did not answer in time (communicators) */
} gr_status;

#include "lists.h"

typedef enum gr_dtype {
#define GR_DTYPE_ENUM_(E, ...) GR_##E,
    GR_DTYPE_LIST(GR_DTYPE_ENUM_)
#undef GR_DTYPE_ENUM_
    GR_DTYPE_COUNT
} gr_dtype;

typedef enum gr_op {
#define GR_OP_ENUM_(E, name) GR_##E,
    GR_OP_LIST(GR_OP_ENUM_)
#undef GR_OP_ENUM_
    GR_OP_COUNT
} gr_op;

typedef enum gr_backend { GR_BACKEND_CPU, GR_BACKEND_CUDA } gr_backend;

typedef enum gr_where { GR_DEVICE, GR_HOST } gr_where;

/* What happens to the per-block partials (engine/core/finish.c, docs/api.md "Finishing modes"). */
typedef enum gr_finish {
    GR_FINISH_AUTO,      /* the variant's or the planner's choice */
    GR_FINISH_DEVICE,    /* more device passes until one value remains */
    GR_FINISH_HYBRID,    /* device passes until at most `threshold` partials remain, then the CPU */
    GR_FINISH_HOST,      /* one device pass, every partial finished on the CPU */
    GR_FINISH_SINGLE,    /* one kernel: the last block to finish combines the partials */
    GR_FINISH_COUNT
} gr_finish;

typedef struct gr_context gr_context;
typedef struct gr_buffer gr_buffer;
typedef struct gr_stream gr_stream;
typedef struct gr_pending gr_pending;

/* ---- names and tables -------------------------------------------------------------------------- */

const char *gr_dtype_name(gr_dtype t);
size_t gr_dtype_size(gr_dtype t);
int gr_dtype_is_float(gr_dtype t);
int gr_dtype_is_bool(gr_dtype t);
int gr_dtype_is_signed(gr_dtype t);
int gr_dtype_from_name(const char *name);        /* -1 when unknown */
const char *gr_op_name(gr_op op);
int gr_op_from_name(const char *name);           /* accepts "and"/"all", "or"/"any"; -1 when unknown */
int gr_op_arity(gr_op op);                       /* values in the op's result: 1, or 2 (value and index) */
const char *gr_op_alias(gr_op op);               /* a second name ("all" for and), or NULL */
const char *gr_finish_name(gr_finish f);
int gr_finish_from_name(const char *name);       /* -1 when unknown */
/* "int8, uint8, ..." -- for error messages that list what is accepted */
const char *gr_dtype_names(void);
const char *gr_op_names(void);
const char *gr_finish_names(void);

/* ---- context -------------------------------------------------------------------------------------- */

/* Creates a context on the first usable CUDA device, or a CPU-only context when there is none
 * (or when the environment variable GPUREDUCE_BACKEND is "cpu"). Never fails for lack of a GPU.
 * A GPUREDUCE_* variable set to a value it does not accept (docs/api.md lists them) fails with
 * GR_EINVAL; *out is then a context that serves only gr_errmsg (which names the variable and what it
 * accepts), gr_errarg (the variable) and gr_context_destroy. GR_ENOMEM leaves *out NULL. */
gr_status gr_context_create(gr_context **out);
void gr_context_destroy(gr_context *ctx);
gr_backend gr_context_backend(const gr_context *ctx);
const char *gr_errmsg(const gr_context *ctx);
/* The parameter the last GR_EINVAL concerns, in the C API's words ("block", "finish", "values"), or "":
 * a binding can name it in its own ("opts.block"). The message starts with it. */
const char *gr_errarg(const gr_context *ctx);
/* Records a failure as the engine's own are (message "arg: msg", gr_errarg arg; arg may be NULL) and
 * returns st: for code the engine calls back, such as gr_options.fold. */
gr_status gr_set_error(gr_context *ctx, gr_status st, const char *arg, const char *msg);
/* Caps the device and pinned memory the context holds (buffers and scratch); 0 = no cap. An allocation
 * past it fails as if the device were full. Also from GPUREDUCE_MEMORY_LIMIT (bytes) at creation. */
void gr_context_set_memory_limit(gr_context *ctx, size_t bytes);

typedef struct gr_device_info {
    char name[256];
    int sms;                    /* multiprocessor count */
    size_t memory;              /* total global memory, bytes */
    int cc_major, cc_minor;     /* compute capability */
    size_t l2;                  /* L2 cache, bytes */
    int clock_khz, mem_clock_khz, bus_width;
    int runtime_version, driver_version;
    int max_threads_per_sm;
} gr_device_info;
/* GR_ENODEV on the cpu backend. */
gr_status gr_device_info_get(gr_context *ctx, gr_device_info *info);

/* Several devices. Device k (1-based) is CUDA ordinal k - 1; the default device, where gr_buffer_new
 * puts buffers, is GPUREDUCE_DEVICE + 1 (else 1). A buffer remembers its device and every call that
 * takes it runs there. On the cpu backend there is one device, the host (index 1, named "cpu"). */
int gr_device_count(gr_context *ctx);
int gr_device_default(const gr_context *ctx);
/* The facts of device `index` without making it current; GR_EINVAL naming "device" out of range. */
gr_status gr_device_info_at(gr_context *ctx, int index, gr_device_info *info);

/* ---- buffers -------------------------------------------------------------------------------------- */

/* n elements of dtype, zero-filled. GR_HOST gives pinned host memory (plain memory on the cpu backend);
 * GR_DEVICE gives device memory (host memory standing in for it on the cpu backend). */
gr_status gr_buffer_new(gr_context *ctx, size_t n, gr_dtype dtype, gr_where where, gr_buffer **out);
/* The same on device `device` (1-based; GR_EINVAL naming "device" out of range). Pinned host memory
 * (GR_HOST) is visible to every device: its device only says which one's context made it. */
gr_status gr_buffer_new_on(gr_context *ctx, size_t n, gr_dtype dtype, gr_where where, int device,
                           gr_buffer **out);
/* gr_buffer_new_on without the zero fill, its contents unspecified until written: for a buffer the next
 * call writes whole (the results of segments and axes), which then costs no fill and no wait for one. */
gr_status gr_buffer_new_unset_on(gr_context *ctx, size_t n, gr_dtype dtype, gr_where where, int device,
                                 gr_buffer **out);
/* The device of a buffer, 1-based (slices and copies keep their storage's; wrapped memory: the
 * context's default device). */
int gr_buffer_device(const gr_buffer *b);
/* Wraps memory the caller owns (device memory on cuda, host memory on cpu); no copy, never freed by the
 * engine. The caller keeps it alive until gr_buffer_free of this buffer and of all its slices. */
gr_status gr_buffer_wrap(gr_context *ctx, void *ptr, size_t n, gr_dtype dtype, gr_where where,
                         gr_buffer **out);
/* A 1-D view of count elements starting at offset (in row-major order of a compact b; the whole of a
 * strided b, offset 0, keeps its shape); keeps the underlying memory alive. */
gr_status gr_buffer_slice(gr_context *ctx, gr_buffer *b, size_t offset, size_t count, gr_buffer **out);
/* Releases this handle (which must not be used again); the memory goes when the last view of it is
 * released and no queued work reads it. gr_buffer_free(NULL) is a no-op. */
void gr_buffer_free(gr_context *ctx, gr_buffer *b);

size_t gr_buffer_size(const gr_buffer *b);
gr_dtype gr_buffer_dtype(const gr_buffer *b);
gr_where gr_buffer_where(const gr_buffer *b);
void *gr_buffer_data(const gr_buffer *b);        /* first element of the view (device address on cuda) */

/* ---- shapes and views ----------------------------------------------------------------------------
 * Every buffer has a shape of 1 to GR_MAX_DIMS axes (a new one: {n}) and strides in elements (row-major
 * when compact: the last axis contiguous). gr_buffer_size is the element count, the product of the
 * shape. Views share the memory of their buffer and keep it alive, as slices do. Axes are 0-based here
 * (the binding speaks 1-based). Element i of a view, for read, write, fill, iota, random and copies, is
 * the i-th in row-major order of its shape. A compact view (its elements consecutive in row-major
 * order, from gr_buffer_data) reduces as a 1-D buffer; gr_reduce refuses a strided one, which
 * gr_buffer_contiguous makes compact or gr_buffer_dense reads as its memory lies. */
#define GR_MAX_DIMS 8
int gr_buffer_ndim(const gr_buffer *b);
/* shape[0..ndim) and strides[0..ndim) of b (either may be NULL) */
void gr_buffer_layout(const gr_buffer *b, size_t *shape, int64_t *strides);
/* 1 when b's elements are consecutive in row-major order (every empty buffer is) */
int gr_buffer_is_compact(const gr_buffer *b);
/* A view of compact b with the given shape (ndim 1..GR_MAX_DIMS; its product must be b's size):
 * GR_EINVAL naming "shape" otherwise, or naming "b" when b is strided. */
gr_status gr_buffer_view(gr_context *ctx, gr_buffer *b, int ndim, const size_t *shape, gr_buffer **out);
/* A view whose axis k is b's axis perm[k] (perm: a permutation of 0..ndim-1, else GR_EINVAL "perm"). */
gr_status gr_buffer_permute(gr_context *ctx, gr_buffer *b, const int *perm, gr_buffer **out);
/* A view of count positions from start along axis (GR_EINVAL naming "axis" or "start"/"count"). */
gr_status gr_buffer_narrow(gr_context *ctx, gr_buffer *b, int axis, size_t start, size_t count,
                           gr_buffer **out);
/* A compact buffer of b's shape and elements: a new handle on b's memory when b is compact, else a copy
 * on b's side and device. */
gr_status gr_buffer_contiguous(gr_context *ctx, gr_buffer *b, gr_buffer **out);
/* When strided view b's elements fill a range of memory exactly (a transposed or permuted compact
 * buffer, axes of length 1 aside): a compact 1-D buffer of that range (a new handle, no copy), which a
 * reduction whose result does not depend on the order of the elements may read instead; else *out NULL.
 * Compact and empty buffers give NULL too. */
gr_status gr_buffer_dense(gr_context *ctx, gr_buffer *b, gr_buffer **out);

/* ---- DLPack (engine/core/dlpack.c; docs/api.md "Interoperation") ----------------------------------
 * The exchange structures are DLPack 1.x's (dmlc/dlpack's dlpack.h), passed as void *. The address of
 * a buffer's first element is gr_buffer_data. */
/* *out gets a new DLManagedTensorVersioned (version 1.1, flags 0) describing b's view: kDLCUDA with the
 * CUDA ordinal for device memory, kDLCUDAHost for host memory on cuda, kDLCPU on the cpu backend; shape
 * and strides (in elements, always given) of b's view; data = gr_buffer_data(b), byte_offset 0. It holds
 * b's memory (as a slice does) until the consumer calls its deleter once, which may be after
 * gr_buffer_free(b) but must be before gr_context_destroy(ctx), on a thread that may call into ctx.
 * Waits for the work queued on b's memory first, so that the consumer may read it on any stream. */
gr_status gr_buffer_to_dlpack(gr_context *ctx, gr_buffer *b, void **out);
/* A buffer on a DLManagedTensorVersioned's memory, no copy: its view has the tensor's shape and strides
 * (ndim 0 as {1}), and the last gr_buffer_free of it and of its views calls the tensor's deleter once.
 * Accepted: major version 1; kDLCUDA on a device of ctx (a device buffer there), kDLCUDAHost and kDLCPU
 * (a host buffer; a device buffer on the cpu backend, which takes no kDLCUDA); the type codes and sizes of
 * gr_dtype's (int, uint, float 16/32/64, bfloat16, bool 8, float8 e4m3fn and e5m2) with 1 lane;
 * strides >= 0, the first element aligned to the element size; not read-only. Otherwise GR_EINVAL
 * naming "managed", and the caller keeps the tensor (its deleter is not called). */
gr_status gr_buffer_from_dlpack(gr_context *ctx, void *managed, gr_buffer **out);
/* The same for the DLManagedTensor of DLPack before 1.0 (no version, no flags). */
gr_status gr_buffer_from_dlpack_legacy(gr_context *ctx, void *managed, gr_buffer **out);

/* Writes from host memory: n elements of the buffer's dtype at element offset. */
gr_status gr_buffer_write(gr_context *ctx, gr_buffer *b, size_t offset, const void *src, size_t n);
/* Reads n elements from element offset into host memory. */
gr_status gr_buffer_read(gr_context *ctx, const gr_buffer *b, size_t offset, void *dst, size_t n);

/* A scalar in the widest form of its kind; which member is valid follows the dtype. */
typedef struct gr_scalar {
    enum { GR_SCALAR_INT, GR_SCALAR_UINT, GR_SCALAR_FLOAT, GR_SCALAR_BOOL } kind;
    union { int64_t i; uint64_t u; double f; int b; } v;
} gr_scalar;

/* The result of a reduction: one value, or two (a value and its 1-based index; a minimum and a
 * maximum), as the op's arity says. */
typedef struct gr_result {
    int count;
    gr_scalar value[2];
} gr_result;

/* Converts a scalar to one element of dtype t at out. GR_EINVAL, with a message that starts with
 * `what`, when it is not integral for an integer dtype or does not fit. */
gr_status gr_scalar_store(gr_context *ctx, gr_scalar s, gr_dtype t, void *out, const char *what);
/* One element of dtype t as a scalar: integers as INT or UINT by the dtype's sign, floats as FLOAT. */
gr_scalar gr_scalar_load(const void *p, gr_dtype t);
/* The smallest and largest values of dtype t (floats: -inf and inf), as scalars of its kind. */
void gr_dtype_limits(gr_dtype t, gr_scalar *lowest, gr_scalar *highest);

gr_status gr_buffer_fill(gr_context *ctx, gr_buffer *b, gr_scalar value);
/* b[i] = start + i * step, computed in double for floats and in 64-bit wrapping arithmetic for integers. */
gr_status gr_buffer_iota(gr_context *ctx, gr_buffer *b, gr_scalar start, gr_scalar step);
/* Reproducible by seed on both backends (a counter-based hash of seed and index): floats uniform in
 * [lo, hi), integers uniform in [lo, hi] inclusive. */
gr_status gr_buffer_random(gr_context *ctx, gr_buffer *b, uint64_t seed, gr_scalar lo, gr_scalar hi);
/* The same as if b began at index `first` of a larger buffer (the shards of gr.sharded): element i
 * gets the value of index first + i. */
gr_status gr_buffer_iota_at(gr_context *ctx, gr_buffer *b, uint64_t first, gr_scalar start, gr_scalar step);
gr_status gr_buffer_random_at(gr_context *ctx, gr_buffer *b, uint64_t first, uint64_t seed, gr_scalar lo,
                              gr_scalar hi);

/* ---- streams -------------------------------------------------------------------------------------- */

/* On the cpu backend a stream exists and syncs trivially. */
gr_status gr_stream_new(gr_context *ctx, gr_stream **out);
gr_status gr_stream_sync(gr_context *ctx, gr_stream *s);
void gr_stream_free(gr_context *ctx, gr_stream *s);

/* ---- reductions ----------------------------------------------------------------------------------- */

/* A user operator's combine on the CPU, for the finishes that end there (hybrid, host): folds `count`
 * accumulators at partials, in order, into one at out (the binding calls the operator's cpu.reduce).
 * GR_OK, or a status with the context's message set. */
typedef gr_status (*gr_user_fold)(void *ud, const void *partials, size_t count, void *out);

typedef struct gr_options {
    gr_op op;
    int ddof;               /* var and std: the divisor is n - ddof (0: the population's, 1: the sample's) */
    int variant;            /* index into the registry (gr_variant_find); -1 = auto */
    int block;              /* threads per block; 0 = the variant's default */
    gr_finish finish;
    size_t threshold;       /* hybrid: element count at or below which the CPU finishes; 0 = default */
    int acc;                /* accumulator dtype override (a gr_dtype), -1 = default */
    size_t grid;            /* blocks of the first pass; 0 = the planner's choice */
    gr_stream *stream;      /* NULL = the context's own stream */
    /* a user operator in place of op: its kernels for the buffer's dtype (gr_operator_prepare, below);
     * NULL = op. Reductions of device buffers on the GPU only */
    const struct gr_image *user;
    gr_user_fold fold;      /* with user: the CPU's combine, for finishes hybrid and host (synchronous calls) */
    void *fold_ud;
    /* a user operator's functions on the host (gr_operator_cpu, below), in place of op where the host
     * reads the data: the cpu backend and host buffers (with user set too, device buffers take the
     * kernels); NULL = none */
    const struct gr_operator_cpu *cpu;
    int determinism;        /* a gr_determinism asked for; -1 = the variant's own (run_to_run but for atomics) */
    /* when variant is a user kernel (gr_kernel_register): its kernels for this op, dtype and accumulator
     * (gr_kernel_prepare), which the passes run; NULL otherwise */
    const struct gr_image *kernel;
    /* the inputs the reduction reads: 0 or 1 for one buffer; gr_reduce_inputs sets its count, which an
     * operator's (user, cpu) must match */
    int ninputs;
} gr_options;

void gr_options_init(gr_options *o, gr_op op);

/* The result's values are tagged scalars: integers exact (sum and product of integer types wrap in 64
 * bits; unsigned results are returned bit-for-bit in v.u), floats as double, and/or as bool. */
gr_status gr_reduce(gr_context *ctx, gr_buffer *b, const gr_options *o, gr_result *result);

/* Starts the reduction and returns at once; gr_pending_wait gives the value. The pending holds the
 * buffer's memory until it is done. */
gr_status gr_reduce_async(gr_context *ctx, gr_buffer *b, const gr_options *o, gr_pending **out);
int gr_pending_ready(gr_context *ctx, gr_pending *p);              /* 1 done, 0 not yet */
gr_status gr_pending_wait(gr_context *ctx, gr_pending *p, gr_result *result);   /* may be called again */
void gr_pending_free(gr_context *ctx, gr_pending *p);              /* waits for unfinished work first */

/* The dot product of a and b: the sum of a[i] b[i] over their elements, in the sum's accumulator of their
 * dtype (opts.acc as for sum: float32 for float32 and the small floats, float64 for float64, 64 bits
 * wrapping for the integers and bool). a and b have one dtype and one shape, on one side and device;
 * strided views are read through compact copies. o->op must be GR_SUM; the kernel options (variant,
 * block, grid, finish, threshold) are refused; determinism and stream are taken (gpu_to_gpu: the exactly
 * rounded sum of the exact products, the same bits on every GPU and the cpu backend). */
gr_status gr_dot(gr_context *ctx, gr_buffer *a, gr_buffer *b, const gr_options *o, gr_result *result);
/* The same started on the device; gr_pending_wait gives the value (the pending holds both inputs). */
gr_status gr_dot_async(gr_context *ctx, gr_buffer *a, gr_buffer *b, const gr_options *o, gr_pending **out);

/* A dot product along axes (a bit per 0-based axis) of views a and b of one shape: out[0] holds one result
 * per position of the kept axes, compact, in their row-major order (keepdims or not: the same elements).
 * The pair is read as compact copies with the reduced axes last where it is not already so; each result's
 * bits depend only on the reduced axes' length (the rows' launch shape), not on how many results there are. */
gr_status gr_dot_axes(gr_context *ctx, gr_buffer *a, gr_buffer *b, const gr_options *o, unsigned axes,
                      gr_buffer *out[2]);

/* A user operator of several inputs (spec.ninputs of them) over bufs[0..count): count is the operator's,
 * the buffers have one shape, one side and device, any dtypes. o->user is the image gr_operator_prepare_inputs
 * made for their dtypes (device buffers; with segments for the segments and axes below), or o->cpu the
 * operator's functions (host buffers, the cpu backend; map_inputs required). Strided views are read
 * through compact copies, in their row-major order (map's i). The options are an operator's (no acc,
 * no gpu_to_gpu). Errors name "bufs" (count, shape, side) or the option at fault. */
gr_status gr_reduce_inputs(gr_context *ctx, gr_buffer *const *bufs, int count, const gr_options *o,
                           gr_result *result);
/* The same started on the device; gr_pending_wait gives the value (the pending holds every input). */
gr_status gr_reduce_inputs_async(gr_context *ctx, gr_buffer *const *bufs, int count, const gr_options *o,
                                 gr_pending **out);

/* Streamed host data: a host buffer (pinned for full speed) is copied to the device in chunks of
 * chunk_bytes on `streams` streams, each chunk reduced by a single-pass kernel as soon as it has landed,
 * so copies overlap with the reduction of the chunks before them; the chunk values are combined in
 * chunk order (deterministic). chunk_bytes 0 and streams 0 take the defaults (64 MiB, 4). On the cpu
 * backend the data is reduced where it is. */
gr_status gr_reduce_streamed(gr_context *ctx, gr_buffer *h, const gr_options *o, size_t chunk_bytes,
                             int streams, gr_result *result);

/* ---- many reductions in one call ------------------------------------------------------------------ */

/* Segments of a buffer: consecutive runs of `size` elements (n divisible by size), or, with size 0,
 * the runs between CSR boundaries in `offsets` (an int64 buffer of k + 1 non-decreasing 0-based element
 * offsets, the last at most n). An empty segment gives the op's identity (min/max: the result type's
 * largest / smallest value; mean, var and the like: NaN; argmin/argmax: the identity and index 0). */
typedef struct gr_segments {
    size_t size;
    const gr_buffer *offsets;
} gr_segments;

/* A dot product per segment of a and b (compact, one dtype and shape): segment s of each is the same
 * elements (gr_segments as for gr_reduce_segments); the results, the sum's dtype (gr_segment_result_dtypes
 * of GR_SUM), into out[0] on a's side. Synchronous, on the context's stream; no o->stream. */
gr_status gr_dot_segments(gr_context *ctx, gr_buffer *a, gr_buffer *b, const gr_options *o, const gr_segments *seg,
                          gr_buffer *out[2]);
/* gr_dot_segments (seg given) or gr_dot_axes (seg NULL: the axes' mask) that returns once the work is
 * queued, on o->stream or the context's stream, as gr_reduce_axes_async does: gr_pending_wait reports its
 * end (the results are in out); until then writing or freeing a, b or out, or reading out, waits for it.
 * Host data and the cpu backend are reduced before it returns. */
gr_status gr_dot_many_async(gr_context *ctx, gr_buffer *a, gr_buffer *b, const gr_options *o, const gr_segments *seg,
                            unsigned axes, gr_buffer *out[2], gr_pending **p);

/* An operator of several inputs (gr_reduce_inputs) per segment of 1-D inputs (gr_segments as for gr_reduce_segments; i counts within the segment), and
 * along axes (as gr_reduce_axes; i counts within the row of reduced elements): the operator's results
 * (gr_operator_segment_dtype) into out[0], on the inputs' side. Synchronous, on the context's stream. */
gr_status gr_reduce_inputs_segments(gr_context *ctx, gr_buffer *const *bufs, int count, const gr_options *o,
                                    const gr_segments *seg, gr_buffer *out[2]);
gr_status gr_reduce_inputs_axes(gr_context *ctx, gr_buffer *const *bufs, int count, const gr_options *o,
                                unsigned axes, gr_buffer *out[2]);

/* The dtypes of a segmented reduction's results: *count buffers (1, or 2 for argmin, argmax, minmax). */
gr_status gr_segment_result_dtypes(gr_context *ctx, const gr_options *o, gr_dtype in, gr_dtype out[2], int *count);
/* Reduces every segment of b: result i of segment s goes to element s of out[i], a buffer on b's side
 * (device or host) of k elements of the dtype gr_segment_result_dtypes gives; indices (argmin, argmax)
 * are 1-based within their segment, 0 for an empty one. */
gr_status gr_reduce_segments(gr_context *ctx, gr_buffer *b, const gr_options *o, const gr_segments *seg,
                             gr_buffer *out[2]);
/* Reduces view b along the axes in the bit mask `axes` (bit d: 0-based axis d; at least one, all below
 * b's ndim): out[0] (and out[1] for argmin, argmax, minmax) get one result per element of the kept axes,
 * in their row-major order, of the dtypes gr_segment_result_dtypes gives -- compact buffers of that many
 * elements on b's side. Each result is that of the segment of the elements it covers (row-major over the
 * reduced axes; an index is 1-based there; an empty reduced axis gives an empty segment's result). A
 * result's bits do not depend on how many other results the call has, nor on where it sits. */
gr_status gr_reduce_axes(gr_context *ctx, gr_buffer *b, const gr_options *o, unsigned axes, gr_buffer *out[2]);
/* gr_reduce_axes that returns once the work is queued (on o->stream, or the context's stream):
 * gr_pending_wait then reports its end (the value it gives is unused: the results are in out). Until then
 * writing or freeing b or out, or reading out, waits for it. Host data is reduced before it returns. */
gr_status gr_reduce_axes_async(gr_context *ctx, gr_buffer *b, const gr_options *o, unsigned axes, gr_buffer *out[2],
                               gr_pending **p);
/* The checks gr_reduce_segments (seg given) or gr_reduce_axes (seg NULL: the axes' mask) makes before it writes
 * a result -- o's op and options for segments, the segments or axes, and the result buffers out (dtype, size,
 * side, device; for axes compact; no memory shared with b, the offsets or each other) -- with the same
 * failures ("out", "out2"), nothing reduced: for a caller that makes several such calls, so that a bad
 * buffer of the last one fails before the first writes (several ops, each with buffers of its own). */
gr_status gr_segment_outs_ready(gr_context *ctx, gr_buffer *b, const gr_options *o, const gr_segments *seg,
                                unsigned axes, gr_buffer *out[2]);
/* The number of segments seg describes over b (checked: size divides n; offsets an int64 buffer of at
 * least one boundary). */
gr_status gr_segment_count(gr_context *ctx, const gr_buffer *b, const gr_segments *seg, size_t *k);
/* The k + 1 boundaries of seg->offsets in host memory (*out malloc'd: the caller frees it), checked:
 * non-decreasing, from 0 up to b's size. For reductions of segments done by the caller. */
gr_status gr_segment_offsets_read(gr_context *ctx, const gr_buffer *b, const gr_segments *seg, int64_t **out);
/* The same for n elements (the buffer of seg->offsets may be on any device): a sharded buffer's. */
gr_status gr_segment_bounds_read(gr_context *ctx, size_t n, const gr_segments *seg, int64_t **out);

/* Reductions by key (engine/core/by_key.c): the values grouped by their keys -- keys a 1-D buffer of an
 * integer dtype or bool, values one of any dtype of the same length, on one side and device -- each group's
 * values in their order reduced as a segment is (every op, o->user's segments image or o->cpu's functions,
 * every determinism level), the groups in ascending key order. With `sorted` the caller says equal keys are
 * consecutive already (no sort; GR_EINVAL naming "sorted" where they are not). ops[0..nops) built-in ops
 * reduced over the same groups (nops 0: o->op, or the operator); results[k] takes op k's one or two result
 * buffers. *keys_out and each results[k][i]: NULL for a new buffer of exactly *count elements on the
 * values' side, or a buffer of the caller's whose first *count elements take them (GR_EINVAL naming "out"
 * where it is too small). argmin/argmax indices are 1-based positions in `values`. Synchronous. */
gr_status gr_reduce_by_key(gr_context *ctx, gr_buffer *keys, gr_buffer *values, const gr_options *o, int sorted,
                           const gr_op *ops, int nops, gr_buffer **keys_out, gr_buffer *(*results)[2], size_t *count);

/* Many buffers at once: results[i] is the reduction of bufs[i] by the same options, in one launch per
 * dtype on the GPU. */
gr_status gr_reduce_many(gr_context *ctx, gr_buffer *const *bufs, size_t count, const gr_options *o,
                         gr_result *results);

/* The shards of one logical buffer (engine/multi/sharded.c): consecutive pieces of one array, each on its own
 * device (shard i's first element has the index of the elements before it), reduced at once on every
 * device and combined in shard order: built-in ops on the host (integer results and min/max equal one
 * device's, float results the same on every run), gpu_to_gpu's exact sums merged (one device's bits),
 * a user operator (o->user, prepared on any device) by its own combine on the first shard's device. One
 * dtype; no stream; the finish is each shard's single kernel. */
gr_status gr_reduce_shards(gr_context *ctx, gr_buffer *const *shards, size_t count, const gr_options *o,
                           gr_result *out);
/* The segments of a sharded buffer (engine/multi/sharded_segments.c), as gr_reduce_segments': segments inside
 * one shard by that shard's segmented reduction, those that span shards piece by piece, combined as
 * gr_reduce_shards combines. seg->offsets may be on any device or in host memory; out[i] are buffers on
 * the first shard's device (host memory on the cpu backend). */
gr_status gr_reduce_shards_segments(gr_context *ctx, gr_buffer *const *shards, size_t count, const gr_options *o,
                                    const gr_segments *seg, gr_buffer *out[2]);
/* gr_dot over two sharded buffers of one split (shard i of a and of b: one length, dtype and device): each
 * pair of shards on its device at once, the pieces' sums combined in shard order as gr_reduce_shards
 * combines a sum's (gpu_to_gpu: the exactly rounded sum of every product, one device's bits). Errors
 * naming "b" where the splits differ; gr_dot's options. */
gr_status gr_dot_shards(gr_context *ctx, gr_buffer *const *a, gr_buffer *const *b, size_t count, const gr_options *o,
                        gr_result *out);
/* gr_reduce_ops over the shards of one logical buffer: results[k] what gr_reduce_shards gives with op
 * ops[k], bit for bit. The ops `fused` covers (gr_fused_prepare's image, or NULL) in one read of every
 * shard on the GPU below gpu_to_gpu with no kernel option; every other op by a reduction of its own. */
gr_status gr_reduce_shards_ops(gr_context *ctx, gr_buffer *const *shards, size_t count, const gr_options *o,
                               const gr_op *ops, int nops, const struct gr_image *fused, gr_result *results);
/* Reductions along axes of the shards of one logical array split along its first axis (the rows; engine/
 * multi/sharded_axes.c): shard i is a compact view of rows_i rows, every shard of one shape past the rows
 * (else GR_EINVAL naming "shards"); the axes a bit mask over the logical array's as gr_reduce_axes takes.
 * out[0] (and out[1]) are compact buffers of the results gr_reduce_axes gives for the logical array, on
 * the first shard's device. Rows kept: each shard's results computed on its device, one buffer's bits.
 * Rows reduced: the built-in ops that combine, each shard at once on its device and the accumulators
 * combined per result in shard order (one-value ops folded on the first shard's device, the others on
 * the host; integer results, min/max, count, and/or and the indices one buffer's; float results the same
 * on every run); gpu_to_gpu, user operators, nanmean, norm and var/std of integers by one reduction of
 * the rows gathered onto the first shard's device (one buffer's bits). Every axis: gr_reduce_shards'
 * value as the one result. Synchronous. */
gr_status gr_reduce_shards_axes(gr_context *ctx, gr_buffer *const *shards, size_t count, const gr_options *o,
                                unsigned axes, gr_buffer *out[2]);
/* gr_dot_axes over two sharded arrays of one split (shard i of a and of b of one shape), as
 * gr_reduce_shards_axes reduces a sum; each pair's dot queued on its device before any is waited for. */
gr_status gr_dot_shards_axes(gr_context *ctx, gr_buffer *const *a, gr_buffer *const *b, size_t count,
                             const gr_options *o, unsigned axes, gr_buffer *out[2]);
/* The checks gr_reduce_shards_axes makes before it writes (the shards, the axes, the result buffers), nothing
 * reduced: for a caller of several such calls whose last one must fail before the first writes. */
gr_status gr_shards_axes_outs_ready(gr_context *ctx, gr_buffer *const *shards, size_t count, const gr_options *o,
                                    unsigned axes, gr_buffer *out[2]);
/* The number of segments seg describes over n elements (gr_segment_count's checks). */
gr_status gr_segment_count_of(gr_context *ctx, size_t n, const gr_segments *seg, size_t *k);

/* ---- communicators across processes (engine/multi/comm.c; docs/api.md "Several GPUs") ------------------ */

/* NCCL is opened on first use (GPUREDUCE_NCCL, else the toolkit's, else the loader's libnccl.so.2);
 * without it every call below is GR_ENODEV saying where it looked. */
typedef struct gr_comm gr_comm;
#define GR_COMM_ID_CHARS 256        /* a communicator id as text: NCCL's 128-byte unique id in hex */
typedef struct gr_comm_spec {
    int rank, size;                 /* 0 <= rank < size */
    const char *id;                 /* GR_COMM_ID_CHARS hex digits (gr_comm_id), or a file path: rank 0
                                     * writes a new id there, the others wait for it; rank 0 removes it
                                     * once every rank has joined */
    double timeout;                 /* seconds any one wait may take (the others joining, a collective) */
    int device;                     /* 1-based; 0: the default device */
} gr_comm_spec;
/* A new id, in hex; the process that makes it must be one of the ranks (NCCL's bootstrap runs there). */
gr_status gr_comm_id(gr_context *ctx, char hex[GR_COMM_ID_CHARS + 1]);
/* Joins the communicator: GR_ETIMEOUT, naming the rank, when the id file does not appear or the others do
 * not join within the timeout (the half-made communicator is aborted, never left hanging). */
gr_status gr_comm_create(gr_context *ctx, const gr_comm_spec *spec, gr_comm **out);
/* Finalizes and frees it (NULL is a no-op). */
void gr_comm_destroy(gr_context *ctx, gr_comm *c);
int gr_comm_rank(const gr_comm *c);
int gr_comm_size(const gr_comm *c);
int gr_comm_device(const gr_comm *c);       /* 1-based */
typedef enum { GR_COMM_SUM, GR_COMM_PROD, GR_COMM_MIN, GR_COMM_MAX, GR_COMM_AVG, GR_COMM_OP_COUNT } gr_comm_op;
extern const char *const gr_comm_op_names[GR_COMM_OP_COUNT + 1];
/* Element-wise over the ranks, in place: b (a device buffer of the communicator's device) holds the
 * result on every rank when this returns. A collective that does not end within the timeout aborts the
 * communicator (later calls fail, saying so). */
gr_status gr_comm_allreduce(gr_context *ctx, gr_comm *c, gr_buffer *b, gr_comm_op op);
/* b reduced here by gr_reduce, then the values combined across ranks: the same result on every rank.
 * sum, prod, min, max, and, or, count, sumsq, nansum, nanmin, nanmax, absmax, asum: the value combined
 * by one all-reduce in float64, int64, uint64 or (and, or) uint8; a device buffer of the communicator's
 * device, reduced by a kernel whose passes end on the device, is waited for once (its value stays there
 * until the combined one comes back, the same bits as through the host). mean, nanmean, var, std, norm,
 * argmin, argmax, minmax, and every op at gpu_to_gpu: each rank's accumulator and element count gathered
 * to every rank (ncclAllGather) and merged in rank order on the host -- float32 accumulators in float64,
 * argmin/argmax indices into the ranks' data concatenated in rank order, gpu_to_gpu's exact sums merged
 * exactly (one buffer's bits); one rank, or one rank holding every element, gives gr_reduce's result. */
gr_status gr_comm_reduce(gr_context *ctx, gr_comm *c, gr_buffer *b, const gr_options *o, gr_result *out);
/* What gr_comm_reduce gives every rank of a job whose rank i holds parts[i], for the ops whose accumulators
 * are gathered, merged in this process with no communicator (any backend): a check of a job's result, and
 * the tests' way to reach the merge without several GPUs. GR_EINVAL naming "op" for the ops NCCL combines. */
gr_status gr_comm_combine_parts(gr_context *ctx, gr_buffer *const *parts, size_t count, const gr_options *o,
                                gr_result *out);
/* What gr_comm_reduce_axes gives every rank of a job whose rank i holds parts[i], for the ops whose partial
 * results are gathered (mean, argmin, argmax, minmax, var and std of floats), merged in this process with no
 * communicator (any backend); out as for gr_reduce_axes of parts[0]. GR_EINVAL naming "op" for the ops NCCL
 * combines. */
gr_status gr_comm_combine_axes(gr_context *ctx, gr_buffer *const *parts, size_t count, const gr_options *o,
                               unsigned axes, gr_buffer *out[2]);
/* b (a device buffer of the communicator's device) reduced here along the axes in the mask `axes` into
 * out (as gr_reduce_axes: one result buffer of the op's segment dtype, on that device), then out combined
 * across the ranks in place, element by element, by NCCL (the ops one all-reduce combines; their result
 * dtypes without an NCCL type -- bool, int16, uint16, the FP8 formats -- combined exactly through a wider
 * copy; waited for once). mean, argmin, argmax, minmax, and var and std of floats: each rank's partial
 * results gathered to every rank and merged in rank order on the host, the ranks' elements one after another
 * along the first reduced axis (gr_comm_combine_axes). Every rank must give out the same shape. No
 * o->stream: it runs on the communicator's stream. */
gr_status gr_comm_reduce_axes(gr_context *ctx, gr_comm *c, gr_buffer *b, const gr_options *o, unsigned axes,
                              gr_buffer *out[2]);
gr_status gr_comm_barrier(gr_context *ctx, gr_comm *c);
/* For benchmarks: `reps` bare ncclAllReduce calls in place on b, waited for after each (sync_each) or
 * after the last; the mean seconds per call. */
gr_status gr_comm_bench_raw(gr_context *ctx, gr_comm *c, gr_buffer *b, gr_comm_op op, int reps, int sync_each,
                            double *seconds);
/* How c:reduce combines one value across the ranks (comm_oneshot.h): 1 through the ranks' mailboxes (every
 * rank on one host, every GPU reaching the others' memory), 0 with ncclAllReduce, -1 not decided yet (the
 * ranks decide together at the first one-value c:reduce). For specs and benchmarks. */
int gr_comm_oneshot(const gr_comm *c);
/* NCCL's version code (e.g. 22809), or 0 when it cannot be opened. */
int gr_nccl_version(void);

/* ---- communicators from a launcher, and borrowed ones (engine/multi/comm_env.c, comm.c; docs/api.md
 * "Launchers") ------------------------------------------------------------------------------------------- */

/* Joins the communicator a launcher describes in the environment: rank, size and local rank from the
 * first family set of torchrun's (RANK, WORLD_SIZE, LOCAL_RANK), mpirun's (OMPI_COMM_WORLD_RANK, _SIZE,
 * _LOCAL_RANK) and Slurm's (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID); device local rank + 1; the
 * rendezvous through NCCL's bootstrap at NCCL_COMM_ID, else the id file GPUREDUCE_COMM_ID, else
 * MASTER_ADDR:MASTER_PORT. Missing or contradictory variables fail with GR_EINVAL naming them, on every
 * backend, before NCCL is opened; then as gr_comm_create. */
gr_status gr_comm_from_env(gr_context *ctx, double timeout, gr_comm **out);
/* Wraps an ncclComm_t the caller owns (waiting up to timeout for one still joining): its rank, size and
 * device are read from NCCL, collectives run as on one of ours, and gr_comm_destroy frees only the
 * wrapper -- the communicator is never finalized, destroyed or aborted here (a collective that times out
 * leaves it to its owner, who must keep it alive as long as the wrapper). */
gr_status gr_comm_borrow(gr_context *ctx, void *handle, double timeout, gr_comm **out);
/* The ncclComm_t behind c (its own or a borrowed one); NULL once it was given up after a failure. */
void *gr_comm_handle(const gr_comm *c);

/* Copies src into dst (same size; any mix of host and device buffers, on any devices), converting when
 * the dtypes differ, as gr_buffer_astype does. An element that does not fit dst's dtype fails with
 * GR_EINVAL naming "src" (the element counted from 1, its value, both dtypes) and leaves dst as it was. */
gr_status gr_buffer_copy(gr_context *ctx, gr_buffer *dst, const gr_buffer *src);
/* A new buffer of src's elements converted to dtype, on src's side (device memory of its device, or
 * pinned host memory; host memory on the cpu backend): rounded to nearest even into a float format, a
 * float truncated toward zero into an integer; a value that does not fit -- out of an integer's range,
 * NaN or an infinity into an integer, a finite value that rounds past a float format's largest, an
 * infinity into float8_e4m3 -- fails with GR_EINVAL naming "src", and *out stays NULL (docs/api.md,
 * "Conversions"). The same dtype gives a copy. */
gr_status gr_buffer_astype(gr_context *ctx, const gr_buffer *src, gr_dtype dtype, gr_buffer **out);

/* What the scratch pool has allocated so far (after warm-up a reduction allocates nothing), and what the
 * context holds now, buffers included (a failed call must leave these as they were). */
typedef struct gr_pool_stats {
    size_t device_allocs;       /* device allocations made by the pool */
    size_t host_allocs;         /* pinned allocations made by the pool */
    int slots;                  /* scratch slots (one per reduction in flight at once) */
    size_t live_device_bytes, live_pinned_bytes;   /* held now by buffers and the pool */
    size_t live_allocations;
} gr_pool_stats;
void gr_pool_stats_get(const gr_context *ctx, gr_pool_stats *out);
/* The caching pool device buffers come from (GPUREDUCE_BUFFER_POOL=0: none). It is the process's,
 * shared by every context and device: these are every device's figures added together. Cached bytes are
 * not live bytes: gr_pool_stats' live_device_bytes counts what the context holds, and the memory limit
 * applies to that alone. All zero on the cpu backend. */
typedef struct gr_buffer_pool_stats {
    int enabled;                /* device buffers come from the pool */
    size_t cached_bytes;        /* device memory the pool holds from the driver: in use and idle */
    size_t idle_bytes;          /* of those, free for the next allocation (gr_pool_trim gives them back) */
    size_t used_bytes;          /* of those, handed out (a free still queued behind work counts here) */
    size_t hits;                /* allocations served from memory the pool held */
    size_t misses;              /* allocations that took more memory from the driver */
} gr_buffer_pool_stats;
void gr_buffer_pool_stats_get(const gr_context *ctx, gr_buffer_pool_stats *out);
/* Gives back the scratch of every idle slot (the next reductions allocate it again) and the buffer pool's
 * idle memory. */
void gr_pool_trim(gr_context *ctx);

/* ---- user operators (engine/user/operator.c; docs/api.md "User operators") ---------------------------- */

/* An operator written as C expressions, compiled at run time with NVRTC for each input dtype. */
typedef struct gr_operator gr_operator;
#define GR_OPERATOR_INPUTS 8     /* the most inputs an operator names (engine/base/launch.h's GR_MAX_INPUTS) */
typedef struct gr_operator_spec {
    const char *name;       /* a word of letters, digits and '_' that does not start with a digit */
    const char *map;        /* an element into an accumulator: over x (the element, as acc when acc is a
                             * dtype) and i (its 0-based index) */
    const char *reduce;     /* two accumulators a and b into one; associative and commutative */
    const char *post;       /* NULL, or the result from the combined accumulator a and the element count n */
    const char *identity;   /* the accumulator's neutral value: a C initializer */
    const char *acc;        /* a dtype name, or a struct declared in the preamble (then post is required) */
    const char *preamble;   /* NULL, or declarations the expressions use (device functions, the struct) */
    /* the names map gives the inputs' elements, in order: 0 names = one input named x (the default);
     * up to GR_OPERATOR_INPUTS C names, distinct, none of them i; gr_reduce_inputs reduces such an operator
     * over as many buffers */
    int ninputs;
    const char *inputs[GR_OPERATOR_INPUTS];
} gr_operator_spec;

/* The dtypes of an operator's inputs, in order: the key of its images (one per tuple). */
typedef struct gr_input_dtypes {
    int count;
    gr_dtype at[GR_OPERATOR_INPUTS];
} gr_input_dtypes;

/* Checks the spec (GR_EINVAL naming the field: "map", "acc", ...) and copies its strings; nothing is
 * compiled yet. */
gr_status gr_operator_create(gr_context *ctx, const gr_operator_spec *spec, gr_operator **out);
/* Releases the caller's handle (NULL is a no-op); a reduction running the operator's functions
 * (gr_operator_cpu) keeps it until it returns. */
void gr_operator_free(gr_operator *op);
/* The operator's own copies of the fields (post and preamble NULL when not given). */
const gr_operator_spec *gr_operator_get_spec(const gr_operator *op);
/* 1 when map uses the index i. */
int gr_operator_indexed(const gr_operator *op);
/* How many inputs map takes (1 for an operator that names none). */
int gr_operator_inputs(const gr_operator *op);
/* The accumulator's dtype, or -1 for a struct of the preamble. */
int gr_operator_acc_dtype(const gr_operator *op);
/* The identity as a number when acc is a dtype and the identity is a literal the host can read (an
 * integer, decimal or hex; a float; INFINITY or NAN; with a sign): 1 and *out in acc's kind; else 0. */
int gr_operator_identity_value(const gr_operator *op, gr_scalar *out);
/* The dtype of a user operator's results of segments: its accumulator's without post, float64 with post
 * (post's value converted); -1, with a message naming "op", for a struct accumulator without post, which
 * no buffer holds. has_post and acc_dtype as the operator (or its prepared image) says. */
int gr_operator_segment_dtype(gr_context *ctx, int has_post, int acc_dtype);
/* The CUDA source generated for elements of dtype in, NUL-terminated, in *out (malloc'd: the caller
 * frees it). */
gr_status gr_operator_source(gr_context *ctx, const gr_operator *op, gr_dtype in, char **out);

/* Where compiled images are kept in memory (key: the generated source, the compile options, the
 * architecture, NVRTC's version and the embedded headers), with NVRTC's log of the last compile it ran.
 * Images are shared by every operator with the same source. */
typedef struct gr_operator_cache gr_operator_cache;
gr_status gr_operator_cache_create(gr_context *ctx, gr_operator_cache **out);
/* Unloads and frees every image; NULL is a no-op. Before the context that loaded them goes. */
void gr_operator_cache_destroy(gr_operator_cache *c);

typedef enum gr_operator_origin {
    GR_ORIGIN_NONE,         /* nothing compiled yet */
    GR_ORIGIN_MEMORY,       /* the image was in the in-memory cache */
    GR_ORIGIN_DISK,         /* read from the disk cache (GPUREDUCE_CACHE) */
    GR_ORIGIN_NVRTC         /* compiled by NVRTC now (and stored in both caches) */
} gr_operator_origin;
const char *gr_operator_origin_name(gr_operator_origin o);    /* "none", "memory", "disk", "nvrtc" */

typedef struct gr_operator_compile_info {
    gr_operator_origin origin;
    gr_dtype in;            /* the input dtype compiled for */
    int arch;               /* the architecture of the image (lower than asked for PTX) */
    int ptx;                /* 1: PTX the driver finishes; 0: CUBIN */
    size_t image_bytes;
    double nvrtc_ms;        /* NVRTC's compile time; 0 unless origin is GR_ORIGIN_NVRTC */
    double total_ms;        /* the whole call: source, key, caches, NVRTC */
    size_t acc_size, acc_align;     /* sizeof and alignof the accumulator, read from the image */
    int result_kind;        /* the kind of post's value (a gr_scalar kind: GR_SCALAR_INT, ...) */
} gr_operator_compile_info;

/* The kernels compiled from one generated source -- a user operator's, or a user kernel's -- for one input
 * dtype and architecture; owned by the cache. gr_operator_image is its former name. */
typedef struct gr_image gr_image;
typedef gr_image gr_operator_image;

/* The image of op over elements of dtype in for compute capability arch (90 for 9.0): from the cache's
 * memory, else the disk cache, else NVRTC (then stored in both); the compile's facts in *info (NULL:
 * not wanted). A compile error is GR_EINVAL with the first error said in the user's terms, "map: 1:5:
 * identifier "y" is undefined" (gr_errarg: the field); the whole NVRTC log is gr_operator_cache_log's.
 * GR_ENODEV without NVRTC. */
gr_status gr_operator_compile(gr_context *ctx, gr_operator_cache *cache, gr_operator *op, gr_dtype in, int arch,
                              gr_image **out, gr_operator_compile_info *info);
/* NVRTC's whole log of the last compile it ran for this cache ("" when it said nothing). */
const char *gr_operator_cache_log(const gr_operator_cache *c);
/* The disk cache's one warning (a directory that cannot be made or written), once per process: later
 * calls return NULL. The engine prints nothing; a binding shows it. */
const char *gr_operator_cache_warning(void);

/* On the GPU: compiles op for dtype in (the device's architecture), loads it and runs its identity check:
 * reduce(identity, map(v)) and reduce(map(v), identity) must equal map(v) byte for byte for a few values
 * v of the dtype (0, 1, 2, 3, its largest, and for floats -1.5 and 1e-3). GR_EINVAL naming "identity"
 * when one differs; GR_ENODEV on the cpu backend. */
gr_status gr_operator_check(gr_context *ctx, gr_operator_cache *cache, gr_operator *op, gr_dtype in);
/* The operator's image for input dtype `in` on this context's device, compiled (through the caches)
 * and loaded on first use, then remembered on the operator (a second call costs a lookup): what
 * gr_options.user takes. GR_ENODEV without a device or NVRTC; GR_EINVAL, naming "acc", for an
 * accumulator over the 32 bytes a reduction keeps. */
gr_status gr_operator_prepare(gr_context *ctx, gr_operator_cache *cache, gr_operator *op, gr_dtype in,
                              const gr_image **out);
/* The same with the kernel of segments and reduce_many's items too (a second image per dtype, compiled
 * on the first segmented use, so that whole-buffer reductions do not pay its compile). */
gr_status gr_operator_prepare_segments(gr_context *ctx, gr_operator_cache *cache, gr_operator *op, gr_dtype in,
                                       const gr_image **out);
/* The same for an operator's inputs of the dtypes `in` (in->count must be gr_operator_inputs): the
 * functions above take one dtype for every input. An operator of several inputs has the shape of
 * warp_shuffle: 16-byte runs of every input read side by side (cuda/device/inputs.cuh). */
gr_status gr_operator_source_inputs(gr_context *ctx, const gr_operator *op, const gr_input_dtypes *in, char **out);
gr_status gr_operator_compile_inputs(gr_context *ctx, gr_operator_cache *cache, gr_operator *op,
                                     const gr_input_dtypes *in, int arch, gr_image **out,
                                     gr_operator_compile_info *info);
gr_status gr_operator_check_inputs(gr_context *ctx, gr_operator_cache *cache, gr_operator *op,
                                   const gr_input_dtypes *in);
gr_status gr_operator_prepare_inputs(gr_context *ctx, gr_operator_cache *cache, gr_operator *op,
                                     const gr_input_dtypes *in, int segments, const gr_image **out);
/* The values the check tries for dtype t, as scalars of its kind (floats rounded to t): returns how
 * many (at most 8). */
int gr_operator_check_values(gr_dtype t, gr_scalar values[8]);

/* ---- several built-in ops in one read (engine/user/fused_source.c, engine/core/reduce_ops.c) ----------- */

/* The image of one kernel that folds ops[0..count) together over elements of dtype `in` (acc: the
 * accumulator override each op takes, -1 for each op's own), compiled through the cache like an operator's
 * and loaded on this context's device. Only the ops whose automatic plan for `in` has the operator shape go
 * in (all of them for elements of 2 bytes or more); *out is NULL when fewer than two do. GR_ENODEV without
 * a device or NVRTC; GR_EINVAL naming "ops" or "acc" for an op or accumulator a single call would refuse. */
gr_status gr_fused_prepare(gr_context *ctx, gr_operator_cache *cache, const gr_op *ops, int count, gr_dtype in,
                           int acc, const gr_image **out);
/* The results of ops[0..count) (distinct built-in ops) over compact b, results[k] what gr_reduce gives
 * with o and op ops[k], bit for bit: the ops `fused` covers (gr_fused_prepare's image, or NULL) in one
 * pass on the device with o's determinism below gpu_to_gpu and no kernel option; every other op by a
 * gr_reduce call of its own. o->op is not read. */
gr_status gr_reduce_ops(gr_context *ctx, gr_buffer *b, const gr_options *o, const gr_op *ops, int count,
                        const gr_image *fused, gr_result *results);
/* Every op of ops[0..count) started as gr_reduce_ops would run it: out[k] (a pending of gr.h's, waited for
 * and freed as gr_reduce_async's) gives what gr_reduce gives with o and op ops[k], bit for bit. The ops
 * that `fused` covers share one pass of its kernel, queued on o's stream (or the context's), which reads
 * b once; every other op is a gr_reduce_async call of its own. On failure nothing is left started and
 * out[0..count) are NULL. */
gr_status gr_reduce_ops_async(gr_context *ctx, gr_buffer *b, const gr_options *o, const gr_op *ops, int count,
                              const gr_image *fused, gr_pending **out);
/* gr_fused_prepare's image for segments and rows (gr_reduce_ops_segments): its kernel reduces each segment
 * once and writes every op's results; it runs no pass over a whole buffer. */
gr_status gr_fused_prepare_segments(gr_context *ctx, gr_operator_cache *cache, const gr_op *ops, int count,
                                    gr_dtype in, int acc, const gr_image **out);
/* ops[0..count) along b's segments (seg set, as gr_reduce_segments takes them) or along `axes` (seg NULL,
 * the mask of gr_reduce_axes): the ops that `fused` (gr_fused_prepare_segments's image, or NULL) answers
 * here reduced by one launch of its kernel, op k's results into out[k] (checked as its own call checks
 * them; out[k][1] for the two-result ops), done[k] set, bit for bit what that call writes. Every other op
 * is left to the caller, a call of its own: all of them off the GPU, at gpu_to_gpu, with a kernel option,
 * where fewer than two fuse, and along axes wherever the op's own call would not reduce b's rows with
 * the segmented kernel (columns, a regrouped copy: core/ops_rows.c). With p (axes only) the launch is
 * queued on o->stream or the context's, and *p is a pending of it (NULL where nothing was launched);
 * else it is waited for (segments run on the context's stream, as their single calls do). */
gr_status gr_reduce_ops_segments(gr_context *ctx, gr_buffer *b, const gr_options *o, const gr_op *ops, int count,
                                 const gr_image *fused, const gr_segments *seg, unsigned axes, gr_buffer *(*out)[2],
                                 int *done, gr_pending **p);
/* Whether gr_reduce_ops_segments could fuse two or more of ops[0..count) in this call, its image aside (the
 * backend, the data's side, the options, b's layout along `axes`, the ops that fuse over b's dtype): when
 * not, the image need not be made. */
int gr_reduce_ops_segments_fusable(gr_context *ctx, gr_buffer *b, const gr_options *o, const gr_op *ops, int count,
                                   const gr_segments *seg, unsigned axes);

/* ---- a user operator's functions on the host (engine/core/operator_cpu.c) ------------------------------ */

/* The cpu backend and host memory cannot run an operator's kernels: the host application gives the
 * operator as functions (the Lua binding: gr.operator's cpu table), set as gr_options.cpu, and the
 * engine runs them where the kernels would run the expressions -- every reduction path, in element
 * order, each fold from the identity, with the kernels' conversions:
 *   - where acc is a dtype, each element is converted to it before map, and every value that map,
 *     reduce or identity gives is stored in it as the generated CUDA stores it: an integer wraps to the
 *     accumulator's width (two's complement), a float rounds to its precision, a float becomes an
 *     integer by truncation toward zero. NaN, or a float that truncates outside an integer
 *     accumulator's range, is an error (the device's conversion is undefined there);
 *   - post, where the operator has one, makes the result of the combined accumulator and the element
 *     count: a number or a bool, kept in its kind (segments' float64 results take it converted);
 *     without post the result is the accumulator.
 *
 * Accumulators. Where acc is a dtype the engine holds them: gr_cpu_acc.value is a number of the acc
 * dtype's kind (GR_SCALAR_INT, _UINT or _FLOAT) going in; coming out the function writes any number
 * there (_INT, _UINT or _FLOAT; _BOOL is refused) and the engine converts it. Where acc is a struct
 * only the host can hold one: the engine names a slot, gr_cpu_acc.slot (below GR_CPU_ACC_SLOTS), which
 * the host keeps for the duration of the call; a function reads its inputs from their slots and writes
 * its value into out's slot (which may be an input's: read the inputs first). `value` is then unused.
 *
 * Each function returns GR_OK, or a failure with the context's message set (gr_set_error, naming the
 * function: "the operator's cpu.map failed: ..."), which ends the reduction with that status; it must
 * return, never jump out of the engine's frames. The engine calls them on the caller's thread, one at
 * a time, and they may call the engine. They may free the operator and any buffer the reduction reads
 * or writes (the input, its shards, the other buffers of a reduce_many list, the offsets, the results):
 * the engine holds references of its own until the call returns, when the memory goes. */
#define GR_CPU_ACC_SLOTS 2
typedef struct gr_cpu_acc {
    gr_scalar value;
    unsigned slot;
} gr_cpu_acc;

typedef struct gr_operator_cpu {
    gr_operator *op;        /* whose functions these are: its acc, identity and post say what is needed */
    /* x: an element, converted to acc where acc is a dtype (for a struct, of its own dtype); i: its
     * 0-based index in the buffer (in its segment, for segments) */
    gr_status (*map)(void *ud, gr_scalar x, uint64_t i, gr_cpu_acc *out);
    gr_status (*reduce)(void *ud, const gr_cpu_acc *a, const gr_cpu_acc *b, gr_cpu_acc *out);
    /* required where the operator has post, else never called: its value of a and n into *out */
    gr_status (*post)(void *ud, const gr_cpu_acc *a, uint64_t n, gr_scalar *out);
    /* required where the host cannot read the operator's identity (gr_operator_identity_value: a struct,
     * an expression), else never called */
    gr_status (*identity)(void *ud, gr_cpu_acc *out);
    void *ud;
    /* required for an operator of several inputs, which map does not serve: xs[0..count) the inputs'
     * elements at one position, each converted as map's x is; i their 0-based index */
    gr_status (*map_inputs)(void *ud, const gr_scalar *xs, int count, uint64_t i, gr_cpu_acc *out);
} gr_operator_cpu;

/* gr_options.fold by these functions, for the finishes hybrid and host of an operator whose acc is the
 * dtype `acc` (cpu->op is not read): count accumulators at partials folded in order by cpu->reduce, each
 * value converted as above, into out. */
gr_status gr_operator_cpu_fold(gr_context *ctx, const gr_operator_cpu *cpu, gr_dtype acc, const void *partials,
                               size_t count, void *out);

/* ---- user kernel variants (engine/user/kernel.c; docs/api.md "User kernels") --------------------------- */

/* A kernel variant written by the user: a device function template that reduces a block's share of the
 * input to one value,
 *     template <class Op, class In> __device__ typename Op::acc_t ENTRY(const In *in, size_t n,
 *                                                                       unsigned long long first);
 * (cuda/device/user_kernel.cuh says the contract and the helpers it may use), wrapped by the engine in kernels
 * of the catalogue's shape: one partial per block, the last block finishing in the single mode. */
typedef struct gr_kernel_spec {
    const char *name;       /* a word of at most 64 letters, digits and '_': the variant's name */
    const char *source;     /* CUDA C++ that defines the entry point (NVRTC, C++17, no standard library) */
    const char *entry;      /* the entry point's name; NULL = name */
    const char *summary;    /* one line for the registry; NULL = a default */
    int block_min, block_max, block_default;    /* powers of two in 32..1024; 0 = 32, 1024, 256 */
    unsigned finishes;      /* bits 1u << gr_finish of the modes it allows (not auto); 0 = every mode of
                             * its shape: device, hybrid, host, single */
    unsigned ops;           /* GR_OP_BIT(op) of the ops it takes; 0 = every op, and user operators */
    int determinism;        /* a gr_determinism it promises (not gpu_to_gpu); -1 = run_to_run */
} gr_kernel_spec;

/* Checks the spec (GR_EINVAL naming the field: "block", "finishes", ...), compiles one instantiation
 * with NVRTC when a cache is given and NVRTC is there -- the first op it takes over float32, for the
 * device's architecture (sm_90 without one) -- so that a source that does not compile fails here, said
 * in its own lines ("source: 3:12: ..."; the whole log is gr_operator_cache_log's), and appends the
 * variant to the registry for the life of the process: its index in *variant. The same name and spec
 * again gives the same index; the same name with another spec is GR_EINVAL, as is a catalogue name. */
gr_status gr_kernel_register(gr_context *ctx, gr_operator_cache *cache, const gr_kernel_spec *spec, int *variant);
/* The checks of gr_kernel_register without the compile and the registration: after it passes, a
 * GR_EINVAL of gr_kernel_register is a compile error (or a name another thread took meanwhile). */
gr_status gr_kernel_check(gr_context *ctx, const gr_kernel_spec *spec);
/* The spec (with its defaults filled in) of a user kernel; NULL for any other index. */
const gr_kernel_spec *gr_kernel_get_spec(int variant);
/* The CUDA source generated for user kernel `variant` reducing elements of dtype in with op (acc: its
 * accumulator dtype, -1 = the op's), or with user_op in place of op when it is not NULL; malloc'd. */
gr_status gr_kernel_source(gr_context *ctx, int variant, gr_op op, int acc, const gr_operator *user_op, gr_dtype in,
                           char **out);
/* That source compiled through the caches for this context's device (sm_90 without one), not loaded:
 * the compile's facts in *info. Needs NVRTC only, not a GPU. */
gr_status gr_kernel_compile(gr_context *ctx, gr_operator_cache *cache, int variant, gr_op op, int acc,
                            const gr_operator *user_op, gr_dtype in, gr_operator_compile_info *info);
/* The kernels of that source on this context's device, compiled through the caches and loaded on first
 * use and remembered in the cache (a second call for a built-in op costs a lookup): what
 * gr_options.kernel takes. *out stays NULL (GR_OK) when the kernel does not take the op (the plan then
 * says so). GR_ENODEV without a device or NVRTC. */
gr_status gr_kernel_prepare(gr_context *ctx, gr_operator_cache *cache, int variant, gr_op op, int acc,
                            gr_operator *user_op, gr_dtype in, const gr_image **out);

/* ---- testing hooks -------------------------------------------------------------------------------- */

/* Makes the k-th event of a kind from now, and every one after it, fail as the CUDA runtime would
 * report it ("alloc": a device or pinned allocation, "launch": a kernel launch, "copy": a copy), until
 * k = 0 disarms it. Also from GPUREDUCE_FAULT=kind:k at creation. */
gr_status gr_debug_fault(gr_context *ctx, const char *kind, long k);
/* Events of each kind so far: [0] allocations, [1] launches, [2] copies. */
void gr_debug_events(const gr_context *ctx, size_t counts[3]);
/* The element conversions of the float formats narrower than float32 (engine/base/small_floats.h: its
 * opening comment says what they do), for the specs until those formats are dtypes. format: "float16",
 * "bfloat16", "float8_e4m3" or "float8_e5m2". Encode: x rounded to the format's bits (with from = 32, x
 * is rounded to float32 first, a C cast, and that float narrowed); GR_EINVAL for parameter "x" where the
 * value does not fit. Decode: the value of bits (to = 32: widened to float32, then to double). */
gr_status gr_debug_float_encode(gr_context *ctx, const char *format, double x, int from, unsigned *bits);
gr_status gr_debug_float_decode(gr_context *ctx, const char *format, unsigned bits, int to, double *x);
/* The same conversions run on the device, next to CUDA's own (cuda_fp16.h, cuda_bf16.h, cuda_fp8.h), 4
 * uint64 words per element of in, a device buffer, into out, a device uint64 buffer of 4 #in elements.
 * in of float64 (narrowing): ours from the double, CUDA's from the double (__double2half,
 * __double2bfloat16, __nv_cvt_double_to_fp8 with __NV_NOSAT), ours from the value rounded to float32,
 * CUDA's from that float (__float2half_rn, __float2bfloat16_rn, __nv_cvt_float_to_fp8 with
 * __NV_SATFINITE, the hardware's conversion); each pattern with GR_SF_NOFIT where ours says it does not
 * fit. in of uint32 (patterns, widening): our float32 bits, CUDA's float32 bits (__half2float,
 * __bfloat162float, __nv_cvt_fp8_to_halfraw then __half2float), our double's bits, the bits of CUDA's
 * float converted to double on the device. GR_ENODEV without a CUDA device. */
gr_status gr_debug_float_device(gr_context *ctx, const char *format, const gr_buffer *in, gr_buffer *out);

/* ---- planning ------------------------------------------------------------------------------------- */

#define GR_PLAN_MAX_PASSES 16
typedef struct gr_pass {
    size_t elements;        /* inputs of this pass */
    size_t blocks;          /* blocks launched; 0 for a pass done on the CPU */
    int block;              /* threads per block */
    gr_dtype in_dtype;      /* the input of this pass (the accumulator type after the first) */
    int on_host;            /* 1 when the CPU does this pass */
} gr_pass;

typedef struct gr_plan {
    int variant;            /* the variant the passes run (gpu_to_gpu: the one named, or auto's, for show) */
    gr_op op;
    gr_finish finish;       /* resolved, never GR_FINISH_AUTO */
    gr_dtype in_dtype;      /* the input's dtype */
    gr_dtype acc;           /* accumulator dtype */
    size_t n;               /* input elements */
    int ddof;               /* var, std: the divisor is n - ddof */
    size_t threshold;
    size_t acc_size;        /* bytes of one accumulator (the op's, the user operator's, the exact sums) */
    int exact;              /* opts.determinism = "gpu_to_gpu": the exact kernel's pass */
    size_t dev_bytes, host_bytes;   /* the scratch the passes need: device, and pinned host memory */
    int npasses;
    gr_pass pass[GR_PLAN_MAX_PASSES];
} gr_plan;

/* Resolves options (auto variant, default block, finish) into the passes a reduction would run. */
gr_status gr_plan_make(gr_context *ctx, const gr_buffer *b, const gr_options *o, gr_plan *plan);
/* The same for n elements of dtype t in memory of the given kind, without a buffer. */
gr_status gr_plan_for(gr_context *ctx, size_t n, gr_dtype t, gr_where where, const gr_options *o, gr_plan *plan);

/* ---- the variant registry ------------------------------------------------------------------------- */

enum { GR_NEEDS_CUDA = 1, GR_NEEDS_POW2_BLOCK = 2 };

/* What a reduction promises of its float results (integer results are exact, and so always the same):
 *   not_guaranteed  the bits may differ from run to run (atomics land in any order);
 *   run_to_run      the same bits on every run of the same call on the same GPU (the default);
 *   gpu_to_gpu      the same bits whatever the variant, launch shape, GPU or backend: the exactly rounded
 *                   results of engine/core/exact_pass.c. */
typedef enum { GR_DET_NOT_GUARANTEED, GR_DET_RUN_TO_RUN, GR_DET_GPU_TO_GPU, GR_DET_COUNT } gr_determinism;
const char *gr_determinism_name(gr_determinism d);
extern const char *const gr_determinism_names[GR_DET_COUNT + 1];   /* in order, NULL-terminated */

typedef struct gr_variant {
    const char *name;
    int ordinal;             /* teaching order */
    const char *origin;      /* the textbook step it reproduces */
    const char *summary;     /* one line */
    unsigned finishes;       /* bit (1u << gr_finish) for each supported finishing mode */
    gr_finish default_finish;
    int block_min, block_max, block_default;
    unsigned needs;          /* GR_NEEDS_* */
    unsigned ops;            /* the ops it takes: GR_OP_BIT(op) each */
    gr_determinism determinism;   /* the most it promises of float results */
    int user;                /* 1 for a user kernel (gr_kernel_register), 0 for the catalogue's */
    unsigned dtypes;         /* the dtypes it takes: GR_DTYPE_BIT(dtype) each (engine/lists.h) */
} gr_variant;

int gr_variant_count(void);
const gr_variant *gr_variant_get(int i);
int gr_variant_find(const char *name);          /* index, or -1 */
/* "auto, cpu, warp_shuffle, ..." */
const char *gr_variant_names(void);

/* ---- timing --------------------------------------------------------------------------------------- */

typedef struct gr_bench_result {
    double ms, ms_min, ms_max;   /* median, minimum and maximum of the timed repetitions */
    int reps, warmup;
    double gbps;                 /* bytes read by the first pass / median time */
} gr_bench_result;

/* Times `reps` reductions after `warmup` untimed ones: device events on cuda, the monotonic clock on cpu. */
gr_status gr_bench(gr_context *ctx, gr_buffer *b, const gr_options *o, int warmup, int reps,
                   gr_bench_result *out);

/* The ceiling: a kernel that only reads every byte of b (16-byte loads, a grid-stride loop, nothing
 * combined but an XOR so the loads stay), timed like gr_bench. GR_ENODEV on the cpu backend. */
gr_status gr_bench_read(gr_context *ctx, gr_buffer *b, int warmup, int reps, gr_bench_result *out);
/* gr_reduce_inputs over compact bufs timed like gr_bench (the bytes of every input in the figure). */
gr_status gr_bench_inputs(gr_context *ctx, gr_buffer *const *bufs, int count, const gr_options *o, int warmup,
                          int reps, gr_bench_result *out);
/* gr_dot(a, b) timed like gr_bench (the bytes of both inputs in the figure); gr_dot_axes into out like
 * gr_bench_axes (device events around each whole call on device data). */
gr_status gr_bench_dot(gr_context *ctx, gr_buffer *a, gr_buffer *b, const gr_options *o, int warmup, int reps,
                       gr_bench_result *out);
gr_status gr_bench_dot_axes(gr_context *ctx, gr_buffer *a, gr_buffer *b, const gr_options *o, unsigned axes,
                            gr_buffer *out[2], int warmup, int reps, gr_bench_result *result);

/* Times a reduction along axes into out (as gr_reduce_axes): device events around each call on device
 * data, the clock otherwise. */
gr_status gr_bench_axes(gr_context *ctx, gr_buffer *b, const gr_options *o, unsigned axes, gr_buffer *out[2],
                        int warmup, int reps, gr_bench_result *result);
/* Times a segmented reduction into out (as gr_reduce_segments) with device events around each call. */
gr_status gr_bench_segments(gr_context *ctx, gr_buffer *b, const gr_options *o, const gr_segments *seg,
                            gr_buffer *out[2], int warmup, int reps, gr_bench_result *result);

/* Times the streamed reduction of a host buffer with the monotonic clock (it spans several streams). */
gr_status gr_bench_streamed(gr_context *ctx, gr_buffer *h, const gr_options *o, size_t chunk_bytes,
                            int streams, int warmup, int reps, gr_bench_result *out);

#ifdef __cplusplus
}
#endif
#endif
