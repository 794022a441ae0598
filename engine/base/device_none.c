/*
 * device_none.c -- the device interface of a CPU-only build (no nvcc at build time).
 *
 * gr_dev_present() says no, so the context never selects the cuda backend and none of the other entry
 * points is reached; they answer "no device" all the same rather than trusting that.
 */
#include "base/device.h"

enum { NO_DEVICE = 100 };   /* the CUDA runtime's cudaErrorNoDevice, for uniform messages */

int gr_dev_present(void) { return 0; }
int gr_dev_count(void) { return 0; }
int gr_dev_props(int dev, gr_device_info *info) { (void)dev; (void)info; return NO_DEVICE; }
int gr_dev_init_on(int dev, gr_device_info *info) { (void)dev; (void)info; return NO_DEVICE; }
int gr_dev_use(int dev) { (void)dev; return NO_DEVICE; }
const char *gr_dev_error_name(int code) { (void)code; return "cudaErrorNoDevice"; }
const char *gr_dev_error_string(int code) { (void)code; return "this build of gpureduce has no CUDA support"; }
int gr_dev_error_is_oom(int code) { (void)code; return 0; }
int gr_dev_error_is_sticky(int code) { (void)code; return 0; }
int gr_dev_malloc(void **p, size_t bytes, int pooled) { (void)p; (void)bytes; (void)pooled; return NO_DEVICE; }
int gr_dev_free(void *p, void *stream, void *after) { (void)p; (void)stream; (void)after; return NO_DEVICE; }
int gr_dev_pool_info(gr_dev_pool_stats *out) {
    *out = (gr_dev_pool_stats){0, 0, 0, 0, 0, 0};
    return 0;
}
int gr_dev_pool_trim(void) { return 0; }
int gr_dev_host_alloc(void **p, size_t bytes) { (void)p; (void)bytes; return NO_DEVICE; }
int gr_dev_host_free(void *p) { (void)p; return NO_DEVICE; }
int gr_dev_memset(void *p, int v, size_t bytes, void *stream) {
    (void)p; (void)v; (void)bytes; (void)stream; return NO_DEVICE;
}
int gr_dev_copy(void *dst, const void *src, size_t bytes, void *stream) {
    (void)dst; (void)src; (void)bytes; (void)stream; return NO_DEVICE;
}
int gr_dev_stream_create(void **s) { (void)s; return NO_DEVICE; }
int gr_dev_stream_destroy(void *s) { (void)s; return NO_DEVICE; }
int gr_dev_stream_sync(void *s) { (void)s; return NO_DEVICE; }
int gr_dev_event_create(void **e, int timing) { (void)e; (void)timing; return NO_DEVICE; }
int gr_dev_event_destroy(void *e) { (void)e; return NO_DEVICE; }
int gr_dev_event_record(void *e, void *stream) { (void)e; (void)stream; return NO_DEVICE; }
int gr_dev_event_sync(void *e) { (void)e; return NO_DEVICE; }
int gr_dev_event_query(void *e) { (void)e; return NO_DEVICE; }
int gr_dev_event_elapsed(float *ms, void *start, void *end) {
    (void)ms; (void)start; (void)end; return NO_DEVICE;
}
int gr_dev_stream_wait_event(void *stream, void *e) { (void)stream; (void)e; return NO_DEVICE; }
int gr_dev_fill(void *p, size_t n, gr_dtype t, gr_scalar v, void *stream) {
    (void)p; (void)n; (void)t; (void)v; (void)stream; return NO_DEVICE;
}
int gr_dev_iota(void *p, size_t n, gr_dtype t, size_t first, gr_scalar start, gr_scalar step, void *stream) {
    (void)p; (void)n; (void)t; (void)first; (void)start; (void)step; (void)stream; return NO_DEVICE;
}
int gr_dev_random(void *p, size_t n, gr_dtype t, uint64_t seed, size_t first, gr_scalar lo, gr_scalar hi,
                  void *stream) {
    (void)p; (void)n; (void)t; (void)seed; (void)first; (void)lo; (void)hi; (void)stream; return NO_DEVICE;
}
int gr_dev_convert(void *dst, gr_dtype to, const void *src, gr_dtype from, size_t n, int mode,
                   unsigned long long *first_bad, void *stream) {
    (void)dst; (void)to; (void)src; (void)from; (void)n; (void)mode; (void)first_bad; (void)stream;
    return NO_DEVICE;
}
int gr_dev_strided(void *base, gr_dev_layout layout, size_t es, size_t first, size_t count, void *compact,
                   int gather, void *stream) {
    (void)base; (void)layout; (void)es; (void)first; (void)count; (void)compact; (void)gather; (void)stream;
    return NO_DEVICE;
}
int gr_dev_small_floats(int format, int widen, const void *in, size_t n, uint64_t *out, void *stream) {
    (void)format; (void)widen; (void)in; (void)n; (void)out; (void)stream; return NO_DEVICE;
}
int gr_dev_capture_begin(void *stream) { (void)stream; return NO_DEVICE; }
int gr_dev_capture_end(void *stream, void **exec) { (void)stream; *exec = NULL; return NO_DEVICE; }
int gr_dev_graph_launch(void *exec, void *stream) { (void)exec; (void)stream; return NO_DEVICE; }
int gr_dev_graph_destroy(void *exec) { (void)exec; return NO_DEVICE; }
int gr_dev_read_all(const void *p, size_t bytes, unsigned *sink, int sms, void *stream) {
    (void)p; (void)bytes; (void)sink; (void)sms; (void)stream; return NO_DEVICE;
}
int gr_dev_stream_query(void *s) { (void)s; return NO_DEVICE; }
int gr_dev_write_flag(void *stream, unsigned *flag, unsigned value) {
    (void)stream; (void)flag; (void)value; return NO_DEVICE;
}
int gr_dev_module_load(const void *image, void **module, char *log, size_t loglen) {
    (void)image; (void)log; (void)loglen; *module = NULL; return NO_DEVICE;
}
int gr_dev_module_function(void *module, const char *name, void **fn) {
    (void)module; (void)name; *fn = NULL; return NO_DEVICE;
}
int gr_dev_module_unload(void *module) { (void)module; return NO_DEVICE; }
int gr_dev_launch(void *fn, unsigned grid, unsigned block, size_t smem, void *stream, void **args) {
    (void)fn; (void)grid; (void)block; (void)smem; (void)stream; (void)args; return NO_DEVICE;
}
int gr_dev_oneshot(unsigned long long *const *boxes, int rank, int size, unsigned long long epoch, const void *value,
                   gr_dtype held, gr_dtype wire, gr_comm_op op, unsigned long long *reply, double timeout_s,
                   void *stream) {
    (void)boxes; (void)rank; (void)size; (void)epoch; (void)value; (void)held; (void)wire; (void)op; (void)reply;
    (void)timeout_s; (void)stream; return NO_DEVICE;
}
int gr_dev_oneshot_widens(gr_dtype held, gr_dtype wire) { (void)held; (void)wire; return 0; }
int gr_dev_mailbox_new(void **box, void *handle) { (void)handle; *box = NULL; return NO_DEVICE; }
int gr_dev_mailbox_free(void *box) { (void)box; return NO_DEVICE; }
int gr_dev_ipc_open(const void *handle, void **p) { (void)handle; *p = NULL; return NO_DEVICE; }
int gr_dev_ipc_close(void *p) { (void)p; return NO_DEVICE; }
