/*
 * device.h -- the device interface: every call the engine makes to the GPU goes through these
 * functions, so that no engine file includes a CUDA header.
 *
 * Implemented by cuda/runtime/runtime.cu (the runtime calls), cuda/runtime/generate.cu (fill, iota, random),
 * cuda/runtime/convert.cu (conversions between dtypes), cuda/runtime/strided.cu (element access of strided views),
 * cuda/runtime/read_bandwidth.cu (the read ceiling), cuda/runtime/small_floats.cu (a testing hook's
 * conversions) and cuda/runtime/jit.cu (code compiled at run time) in a CUDA
 * build, and by engine/base/device_none.c in a CPU-only build. Every function returns 0 or a CUDA error
 * code (an int: the engine names it in its messages).
 */
#ifndef GR_DEVICE_H
#define GR_DEVICE_H

#include "gr.h"

#ifdef __cplusplus
extern "C" {
#endif

int gr_dev_present(void);                             /* 1 when a usable CUDA device exists */
/* Several devices (engine/devices.c): their count, the facts of one without touching it, one made
 * current and described (its primary context created; context.c picks the first, GPUREDUCE_DEVICE),
 * and the current device of the calling thread set (a no-op when this thread last set the same one
 * through here). */
int gr_dev_count(void);
int gr_dev_props(int dev, gr_device_info *info);
int gr_dev_init_on(int dev, gr_device_info *info);
int gr_dev_use(int dev);
const char *gr_dev_error_name(int code);
const char *gr_dev_error_string(int code);
int gr_dev_error_is_oom(int code);
/* 1 for the errors that leave the CUDA context unusable (a kernel that faulted: an illegal address, a
 * trap, an assert): every later CUDA call of the process fails with it */
int gr_dev_error_is_sticky(int code);
/* Device memory of the current device: from its caching pool when `pooled` (the first allocation on a
 * device decides for the process; a device without memory pools uses cudaMalloc), ready for any stream
 * when this returns (runtime.cu says why reuse is safe). A free with a stream does not wait: the memory
 * returns to the pool after the work queued so far on `stream` and the work before the event `after`
 * (NULL: none); with a NULL stream it waits for the device first, as cudaFree does. */
int gr_dev_malloc(void **p, size_t bytes, int pooled);
int gr_dev_free(void *p, void *stream, void *after);
/* The buffer pools of the process, every device's added together (all zero in a CPU-only build). */
typedef struct gr_dev_pool_stats {
    size_t reserved;                /* bytes the pools hold from the driver: in use and idle */
    size_t used;                    /* of those, handed out and not yet given back */
    unsigned long long hits;        /* allocations served from memory the pools held */
    unsigned long long misses;      /* allocations that took more memory from the driver */
    int pooled_devices;             /* devices whose buffers come from a pool */
    int plain_devices;              /* devices set up to use cudaMalloc instead */
} gr_dev_pool_stats;
int gr_dev_pool_info(gr_dev_pool_stats *out);
/* Waits for every pooled device and gives its idle memory back to the driver. */
int gr_dev_pool_trim(void);
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
/* CUDA graphs: capture what the stream is given between begin and end into an executable graph */
int gr_dev_capture_begin(void *stream);
int gr_dev_capture_end(void *stream, void **exec);     /* *exec NULL on failure */
int gr_dev_graph_launch(void *exec, void *stream);
int gr_dev_graph_destroy(void *exec);
/* Code compiled at run time (engine/jit/nvrtc.c): a CUBIN or PTX image loaded into the device's context,
 * the loader's messages in log when it fails (log may be NULL); a kernel of it by its extern "C" name;
 * a launch of a 1-D grid, args pointing at each of the kernel's arguments in order. */
int gr_dev_module_load(const void *image, void **module, char *log, size_t loglen);
int gr_dev_module_function(void *module, const char *name, void **fn);
int gr_dev_module_unload(void *module);
int gr_dev_launch(void *fn, unsigned grid, unsigned block, size_t smem, void *stream, void **args);
/* the read-bandwidth ceiling kernel: reads n bytes at p, XOR-folds them into *sink */
int gr_dev_read_all(const void *p, size_t bytes, unsigned *sink, int sms, void *stream);
/* generators of buffer contents, on the device */
int gr_dev_fill(void *p, size_t n, gr_dtype t, gr_scalar v, void *stream);
/* element i of p gets the value of index first + i (a shard of a larger buffer) */
int gr_dev_iota(void *p, size_t n, gr_dtype t, size_t first, gr_scalar start, gr_scalar step, void *stream);
int gr_dev_random(void *p, size_t n, gr_dtype t, uint64_t seed, size_t first, gr_scalar lo,
                  gr_scalar hi, void *stream);
/* Conversion between dtypes (b:astype, gr.copy; engine/core/convert.c): n elements of dtype `from` at src
 * (device memory) into dtype `to` at dst (device memory, not overlapping src), by mode, the flags of
 * engine/ops/convert_element.h: GR_CV_CHECK lowers *first_bad (device memory, which the caller sets to
 * all ones before) to the index of the first element that does not fit, with atomicMin; GR_CV_WRITE
 * writes every converted element. The same bits as the host's gr_cpu_convert. Asynchronous. */
int gr_dev_convert(void *dst, gr_dtype to, const void *src, gr_dtype from, size_t n, int mode,
                   unsigned long long *first_bad, void *stream);
/* The layout of a view for the strided kernel (core/layout.c): shape and strides in elements, by value. */
typedef struct gr_dev_layout {
    int ndim;
    size_t shape[GR_MAX_DIMS];
    size_t strides[GR_MAX_DIMS];
} gr_dev_layout;
/* Element access of strided views (cuda/runtime/strided.cu): count elements of es bytes (1, 2, 4 or 8)
 * of the view whose element 0 is at base, from its row-major index first, gathered into compact (gather
 * = 1) or scattered from it (gather = 0); both device memory, not overlapping. Asynchronous. */
int gr_dev_strided(void *base, gr_dev_layout layout, size_t es, size_t first, size_t count, void *compact,
                   int gather, void *stream);
/* One value combined across the ranks of a communicator whose GPUs reach each other's memory
 * (cuda/runtime/oneshot.cu, engine/multi/comm_oneshot.c). boxes: device memory holding each rank's mailbox
 * (GR_ONESHOT_BOX_BYTES, zeroed before the first call), rank order; epoch: the call's number, 1 for the
 * first and one more each call, the same on every rank; value: this rank's value (device memory) of dtype
 * held, widened in the kernel to dtype wire (float64, int64, uint64 or uint8) where
 * gr_dev_oneshot_widens(held, wire) says it can; reply: mapped pinned memory, two words: the combination in
 * rank order, then 1, or 2 where some rank's value did not come within timeout_s seconds (the caller sets
 * the second word to 0 first). Asynchronous. */
#define GR_ONESHOT_RANKS 32
#define GR_ONESHOT_BOX_BYTES (2 * GR_ONESHOT_RANKS * 16)
int gr_dev_oneshot(unsigned long long *const *boxes, int rank, int size, unsigned long long epoch, const void *value,
                   gr_dtype held, gr_dtype wire, gr_comm_op op, unsigned long long *reply, double timeout_s,
                   void *stream);
/* 1 where gr_dev_oneshot takes a value of dtype held for the wire dtype: the wire's own, float32 for
 * float64, the narrower integers of the wire's sign, bool for uint8 (0 in a CPU-only build) */
int gr_dev_oneshot_widens(gr_dtype held, gr_dtype wire);
/* A mailbox (GR_ONESHOT_BOX_BYTES of device memory from cudaMalloc, zeroed) and its CUDA IPC handle
 * (GR_IPC_HANDLE_BYTES), for the other processes of the host to open; open maps another process's
 * (enabling peer access), close unmaps it. */
#define GR_IPC_HANDLE_BYTES 64
int gr_dev_mailbox_new(void **box, void *handle);
int gr_dev_mailbox_free(void *box);
int gr_dev_ipc_open(const void *handle, void **p);
int gr_dev_ipc_close(void *p);
/* A testing hook's kernel (cuda/runtime/small_floats.cu): the conversions of base/small_floats.h for
 * format number `format` (GR_SMALL_FLOAT_LIST's order) and CUDA's own, 4 words per element of in into
 * out: n doubles narrowed, or with `widen` n uint32 patterns widened (gr.h's gr_debug_float_device) */
int gr_dev_small_floats(int format, int widen, const void *in, size_t n, uint64_t *out, void *stream);

#ifdef __cplusplus
}
#endif
#endif
