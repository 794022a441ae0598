/*
 * convert.c -- conversions between dtypes: b:astype (gr_buffer_astype) and gr.copy (gr_buffer_copy, which
 * copies the bytes when the dtypes agree: buffer.c's gr_buffer_copy_bytes).
 *
 * The elements' rules are ops/convert_element.h's. Where a conversion runs:
 *   - both buffers in host memory (the cpu backend; pinned host buffers): ops/cpu_convert.c's loops;
 *   - both in device memory of one device: the kernel (gr_dev_convert, cuda/runtime/convert.cu), one
 *     memory-bound pass on the context's stream;
 *   - across sides or devices, through a scratch buffer on a device: a device source is converted on its
 *     device into a scratch of the destination's dtype, which is then copied; a host source is copied as
 *     it is into a device scratch on the destination's device, then converted there;
 *   - views that overlap (one memory wrapped twice): through a converted scratch on the source's side;
 *   - strided views (core/layout.c): a strided source is first gathered into a compact copy on its side
 *     (gr_buffer_contiguous), a strided destination is written through a compact scratch on its side
 *     (gr_buffer_scatter); astype of a strided view converts its compact copy. Results keep the shape.
 *
 * A pair of dtypes that cannot fail (gr_convert_can_fail: float16 -> float32, int8 -> int32, anything
 * into float64 or bool) converts in one pass, unchecked. One that can fail leaves the destination as it
 * was when an element does not fit: a fresh destination (astype) is written while it is checked and
 * freed on failure; an existing one (copy) is checked by a first pass that writes nothing, then written
 * by a second. On the device the check lowers a word of a scratch slot to the first failing index
 * (atomicMin), read back after the pass; the message names that element (counted from 1), its value
 * and both dtypes.
 */
#include "base/device.h"
#include "base/dtype.h"
#include "base/error.h"
#include "base/memory.h"
#include "core/buffer.h"
#include "core/context.h"
#include "core/layout.h"
#include "core/pool.h"
#include "ops/convert_element.h"
#include "ops/cpu_convert.h"


static int on_gpu(const gr_context *ctx) { return ctx->base.backend == GR_BACKEND_CUDA; }

/* In host memory: every buffer of the cpu backend, the pinned ones of the cuda backend. */
static int in_host_memory(const gr_context *ctx, const gr_buffer *b) {
    return !on_gpu(ctx) || b->st->where == GR_HOST;
}

/* One address space and one converter for both: host memory, or one device's memory. */
static int same_side(const gr_context *ctx, const gr_buffer *a, const gr_buffer *b) {
    int ha = in_host_memory(ctx, a), hb = in_host_memory(ctx, b);
    return ha == hb && (ha || a->st->device == b->st->device);
}

static int overlap(const gr_buffer *a, const gr_buffer *b) {
    const char *pa = gr_buffer_data(a), *pb = gr_buffer_data(b);
    return pa < pb + b->n * gr_dtype_size(b->dtype) && pb < pa + a->n * gr_dtype_size(a->dtype);
}

/* The failure of element i of src (0-based) that does not fit dtype `to`. */
static gr_status not_fit(gr_context *ctx, const gr_buffer *src, size_t i, gr_dtype to) {
    unsigned char e[16];
    gr_status st = gr_buffer_read(ctx, src, i, e, 1);
    if (st != GR_OK) return st;
    gr_scalar s = gr_scalar_load(e, src->dtype);
    char v[64];
    gr_format_scalar(v, sizeof v, s);
    return gr_fail_arg(ctx, GR_EINVAL, "src", "element %zu (%s %s) does not fit in %s", i + 1,
                       gr_dtype_name(src->dtype), v, gr_dtype_name(to));
}

/* One pass of the kernel over src into dst's memory (NULL-free: dst is only written with GR_CV_WRITE);
 * *first: the first element that does not fit, n when none does (or without GR_CV_CHECK). */
static gr_status device_pass(gr_context *ctx, gr_buffer *dst, const gr_buffer *src, int mode, size_t *first) {
    const size_t n = src->n;
    *first = n;
    gr_slot *slot = NULL;
    if (mode & GR_CV_CHECK) {
        gr_status st = gr_slot_acquire(ctx, sizeof(unsigned long long), 0, &slot);
        if (st != GR_OK) return st;
    }
    unsigned long long *word = slot ? (unsigned long long *)slot->dev : NULL;
    int rc = word ? gr_dev_memset(word, 0xff, sizeof *word, ctx->stream) : 0;
    if (rc == 0) rc = gr_fault_hit(ctx, GR_FAULT_LAUNCH);
    if (rc == 0)
        rc = gr_dev_convert(gr_buffer_data(dst), dst->dtype, gr_buffer_data(src), src->dtype, n, mode, word,
                            ctx->stream);
    if (rc == 0 && word) rc = gr_copy(ctx, slot->result, word, sizeof *word, ctx->stream);
    if (rc == 0) rc = gr_dev_stream_sync(ctx->stream);
    if (rc == 0 && word) {
        unsigned long long i = *(const unsigned long long *)slot->result;
        *first = i < n ? (size_t)i : n;
    }
    if (slot) gr_slot_release(ctx, slot);
    return rc ? gr_fail_dev(ctx, rc, "conversion") : GR_OK;
}

/* src into dst, on one side, without overlap, of different dtypes and the same size. fresh: dst is new,
 * so it may be written while it is checked. */
static gr_status convert_here(gr_context *ctx, gr_buffer *dst, const gr_buffer *src, int fresh) {
    const size_t n = src->n;
    const int check = gr_convert_can_fail(src->dtype, dst->dtype);
    const int checked_write = GR_CV_WRITE | (check && fresh ? GR_CV_CHECK : 0);
    size_t first = n;
    gr_status st = gr_storage_quiesce(ctx, dst->st);
    if (st != GR_OK || n == 0) return st;
    if (in_host_memory(ctx, dst)) {
        const void *s = gr_buffer_data(src);
        if (check && !fresh) first = gr_cpu_convert(NULL, dst->dtype, s, src->dtype, n, GR_CV_CHECK);
        if (first == n) first = gr_cpu_convert(gr_buffer_data(dst), dst->dtype, s, src->dtype, n, checked_write);
    } else {
        if (check && !fresh) st = device_pass(ctx, dst, src, GR_CV_CHECK, &first);
        if (st == GR_OK && first == n) st = device_pass(ctx, dst, src, checked_write, &first);
    }
    if (st == GR_OK && first < n) st = not_fit(ctx, src, first, dst->dtype);
    return st;
}

static gr_status astype(gr_context *ctx, const gr_buffer *src, gr_dtype to, gr_buffer **out) {
    gr_buffer *b;
    gr_status st = gr_buffer_new_unset(ctx, src->n, to, src->st->where, &b);
    if (st != GR_OK) return st;
    st = to == src->dtype ? gr_buffer_copy_bytes(ctx, b, src) : convert_here(ctx, b, src, 1);
    if (st != GR_OK) {
        gr_buffer_free(ctx, b);
        return st;
    }
    *out = b;
    return GR_OK;
}

gr_status gr_buffer_astype(gr_context *ctx, const gr_buffer *src, gr_dtype dtype, gr_buffer **out) {
    *out = NULL;
    ctx = gr_ctx_for(ctx, src);
    if ((unsigned)dtype >= GR_DTYPE_COUNT)
        return gr_fail_arg(ctx, GR_EINVAL, "dtype", "unknown dtype (accepted: %s)", gr_dtype_names());
    gr_buffer *compact = NULL;
    gr_status st = GR_OK;
    if (!gr_buffer_is_compact(src)) st = gr_buffer_contiguous(ctx, (gr_buffer *)src, &compact);
    if (st == GR_OK) st = astype(ctx, compact ? compact : src, dtype, out);
    if (st == GR_OK) gr_layout_compact(*out, src->ndim, src->shape);
    gr_buffer_free(ctx, compact);
    gr_ctx_for(ctx, src);
    return st;
}

/* gr_buffer_copy where either side is a strided view (see the top of this file). */
static gr_status copy_views(gr_context *ctx, gr_buffer *dst, const gr_buffer *src) {
    gr_buffer *from = NULL, *into = NULL;
    gr_status st = GR_OK;
    if (!gr_buffer_is_compact(src)) st = gr_buffer_contiguous(ctx, (gr_buffer *)src, &from);
    const gr_buffer *s = from ? from : src;
    if (st == GR_OK && gr_buffer_is_compact(dst)) {
        st = gr_buffer_copy(ctx, dst, s);
    } else if (st == GR_OK) {
        /* through a scratch of dst's dtype on dst's side: dst is unchanged when an element does not fit */
        st = gr_buffer_new_unset(gr_ctx_for(ctx, dst), dst->n, dst->dtype, dst->st->where, &into);
        if (st == GR_OK) st = gr_buffer_copy(ctx, into, s);
        if (st == GR_OK) st = gr_buffer_scatter(ctx, dst, into);
    }
    gr_buffer_free(ctx, from);
    gr_buffer_free(ctx, into);
    gr_ctx_for(ctx, dst);
    return st;
}

/* src into dst of another dtype through a scratch buffer (see the top of this file). */
static gr_status convert_through(gr_context *ctx, gr_buffer *dst, const gr_buffer *src) {
    gr_buffer *tmp = NULL;
    gr_status st;
    if (!same_side(ctx, dst, src) && in_host_memory(ctx, src)) {
        /* a host source into device memory: moved as it is, converted on the destination's device */
        st = gr_buffer_new_unset(ctx, src->n, src->dtype, GR_DEVICE, &tmp);
        if (st == GR_OK) st = gr_buffer_copy_bytes(ctx, tmp, src);
        if (st == GR_OK) st = convert_here(ctx, dst, tmp, 0);
    } else {
        /* converted where the source is, then moved */
        gr_context *at = gr_ctx_for(ctx, src);
        st = astype(at, src, dst->dtype, &tmp);
        ctx = gr_ctx_for(ctx, dst);
        if (st == GR_OK) st = gr_buffer_copy_bytes(ctx, dst, tmp);
    }
    gr_buffer_free(ctx, tmp);
    gr_ctx_for(ctx, dst);           /* the free made the scratch's device current */
    return st;
}

gr_status gr_buffer_copy(gr_context *ctx, gr_buffer *dst, const gr_buffer *src) {
    ctx = gr_ctx_for(ctx, dst);
    if (dst->n != src->n)
        return gr_fail_arg(ctx, GR_EINVAL, "src", "source is %zu %s, destination %zu %s (the sizes must match)",
                           src->n, gr_dtype_name(src->dtype), dst->n, gr_dtype_name(dst->dtype));
    if (dst->n && (!gr_buffer_is_compact(dst) || !gr_buffer_is_compact(src))) return copy_views(ctx, dst, src);
    if (dst->dtype == src->dtype) return gr_buffer_copy_bytes(ctx, dst, src);
    if (dst->n == 0) return GR_OK;
    if (same_side(ctx, dst, src) && !overlap(dst, src)) return convert_here(ctx, dst, src, 0);
    return convert_through(ctx, dst, src);
}
