/*
 * buffer.c -- buffers: allocation, wrapping, views, host transfers and generated contents.
 *
 * A buffer handle is a view (offset, count, dtype) of a reference-counted storage. Slices and queued
 * reductions hold references, so memory never goes while something can still read it; anything that
 * writes first waits for the reductions queued on the storage (gr_storage_quiesce); a free of device memory
 * is instead queued after them (storage_unref), so dropping a buffer never waits for the GPU. Also the
 * copies between buffers of one dtype (gr_buffer_copy_bytes, for gr_buffer_copy in core/convert.c),
 * overlapping views included.
 *
 * A strided view (core/layout.c) is read and written element by element in row-major order: on the
 * host by layout.c's walk, on the device by the strided kernel (gr_dev_strided) between the view and a
 * compact scratch buffer. The generators fill such a scratch as they would a compact buffer, which is
 * then scattered into the view, so a view gets the values a compact buffer of its size would.
 */
#include "core/buffer.h"
#include "ops/cpu_backend.h"
#include "base/dtype.h"
#include "base/device.h"
#include "base/env.h"
#include "core/context.h"
#include "base/error.h"
#include "base/memory.h"
#include "core/layout.h"
#include "base/launch.h"
#include "core/pool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int on_gpu(const gr_context *ctx) { return ctx->base.backend == GR_BACKEND_CUDA; }

static gr_mem_kind kind_of(gr_where where) { return where == GR_HOST ? GR_MEM_PINNED : GR_MEM_DEVICE; }

/* gr_storage.owned: our memory (gr_mem_free'd), the application's (gr_buffer_wrap: never freed), or lent
 * with a release (gr_buffer_adopt: a lent_storage, whose release runs in place of the free). */
enum { OWNED_WRAPPED = 0, OWNED_OURS = 1, OWNED_LENT = 2 };
typedef struct {
    gr_storage st;          /* first: the storage's address is the lent_storage's */
    void (*release)(void *arg);
    void *arg;
} lent_storage;

/* zero: fill with zeros (gr_buffer_new); else the memory is left as the allocator gives it (a buffer that
 * is about to be written whole), or, with GPUREDUCE_POISON=1, filled with 0xA5 bytes: the pool hands back
 * memory that may hold an earlier result, so a test run with it shows an element a call forgot to write. */
static gr_status storage_new(gr_context *ctx, size_t bytes, gr_where where, int zero, gr_storage **out) {
    gr_storage *st = calloc(1, sizeof *st);
    if (!st) return gr_fail(ctx, GR_ENOMEM, "out of host memory");
    st->bytes = bytes;
    st->where = where;
    st->owned = OWNED_OURS;
    st->refs = 1;
    st->device = ctx->device;
    gr_status s = gr_mem_alloc(ctx, kind_of(where), bytes, &st->ptr);
    int fill = zero ? 0 : gr_env_number_or(GR_ENV_POISON, 0) ? 0xA5 : -1;
    if (s == GR_OK && bytes && fill >= 0) {
        if (!on_gpu(ctx) || where == GR_HOST) {
            memset(st->ptr, fill, bytes);
        } else {
            int rc = gr_dev_memset(st->ptr, fill, bytes, ctx->stream);
            if (rc == 0) rc = gr_dev_stream_sync(ctx->stream);
            if (rc) s = gr_fail_dev(ctx, rc, "filling a new buffer");
        }
    }
    if (s != GR_OK) {
        gr_mem_free(ctx, kind_of(where), st->ptr, bytes);
        free(st);
        return s;
    }
    *out = st;
    return GR_OK;
}

/* The last reference gone, the memory goes. Device memory of our own is not waited for: its free is
 * queued after the context's stream (where this device's synchronous work runs) and after the event of
 * the last queued reader on any stream (gr_storage_mark_read), and the pool hands it out again only once
 * that free has completed (base/memory.h). Pinned memory, and memory the application lent (gr_buffer_wrap,
 * which it may free once we return; gr_buffer_adopt, whose release runs last), wait for their readers here.
 * The event may be destroyed at once: the free's wait already holds what it recorded. */
static void storage_unref(gr_context *ctx, gr_storage *st) {
    if (--st->refs > 0) return;
    if (st->owned == OWNED_OURS && st->where == GR_DEVICE && on_gpu(ctx)) {
        gr_mem_free_after(ctx, GR_MEM_DEVICE, st->ptr, st->bytes, ctx->stream, st->last_read);
    } else {
        gr_storage_quiesce(ctx, st);
        if (st->owned == OWNED_OURS) gr_mem_free(ctx, kind_of(st->where), st->ptr, st->bytes);
    }
    if (st->last_read) gr_dev_event_destroy(st->last_read);
    if (st->owned == OWNED_LENT) {
        lent_storage *lent = (lent_storage *)st;
        lent->release(lent->arg);
    }
    free(st);
}

gr_status gr_storage_quiesce(gr_context *ctx, gr_storage *st) {
    if (!st->last_read) return GR_OK;
    int rc = gr_dev_event_sync(st->last_read);
    return rc ? gr_fail_dev(ctx, rc, "waiting for reductions of the buffer") : GR_OK;
}

/* Marks the storage as read by work queued on `stream`. If an earlier reduction on another stream
 * still reads it, the new event is made to follow that one too, so one event covers both. */
gr_status gr_storage_mark_read(gr_context *ctx, gr_storage *st, void *stream) {
    int rc = 0;
    if (!st->last_read) rc = gr_dev_event_create(&st->last_read, 0);
    else rc = gr_dev_stream_wait_event(stream, st->last_read);
    if (rc == 0) rc = gr_dev_event_record(st->last_read, stream);
    return rc ? gr_fail_dev(ctx, rc, "recording the buffer's use") : GR_OK;
}

static gr_status handle_new(gr_context *ctx, gr_storage *st, size_t offset, size_t n, gr_dtype t,
                            gr_buffer **out) {
    gr_buffer *b = calloc(1, sizeof *b);
    if (!b) return gr_fail(ctx, GR_ENOMEM, "out of host memory");
    b->st = st;
    b->offset = offset;
    b->dtype = t;
    gr_layout_compact(b, 1, &n);
    *out = b;
    return GR_OK;
}

static gr_status check_dtype(gr_context *ctx, gr_dtype t) {
    if ((unsigned)t >= GR_DTYPE_COUNT)
        return gr_fail_arg(ctx, GR_EINVAL, "dtype", "unknown dtype (accepted: %s)", gr_dtype_names());
    return GR_OK;
}

static gr_status buffer_new(gr_context *ctx, size_t n, gr_dtype t, gr_where where, int zero, gr_buffer **out) {
    *out = NULL;
    ctx = gr_ctx_enter(ctx);
    gr_status s = check_dtype(ctx, t);
    if (s != GR_OK) return s;
    size_t es = gr_dtype_size(t);
    if (n > SIZE_MAX / es / 2)
        return gr_fail_arg(ctx, GR_EINVAL, "size", "%zu elements of %s are more bytes than memory can hold", n,
                           gr_dtype_name(t));
    gr_storage *st = NULL;
    if ((s = storage_new(ctx, n * es, where, zero, &st)) != GR_OK) return s;
    if ((s = handle_new(ctx, st, 0, n, t, out)) != GR_OK) storage_unref(ctx, st);
    return s;
}

gr_status gr_buffer_new(gr_context *ctx, size_t n, gr_dtype t, gr_where where, gr_buffer **out) {
    return buffer_new(ctx, n, t, where, 1, out);
}

gr_status gr_buffer_new_unset(gr_context *ctx, size_t n, gr_dtype t, gr_where where, gr_buffer **out) {
    return buffer_new(ctx, n, t, where, 0, out);
}

/* buffer_new on device `device` (1-based) */
static gr_status buffer_new_on(gr_context *ctx, size_t n, gr_dtype t, gr_where where, int device, int zero,
                               gr_buffer **out) {
    *out = NULL;
    gr_context *on;
    gr_status s = gr_context_on(ctx, device - 1, &on);
    return s == GR_OK ? buffer_new(on, n, t, where, zero, out) : s;
}

gr_status gr_buffer_new_on(gr_context *ctx, size_t n, gr_dtype t, gr_where where, int device, gr_buffer **out) {
    return buffer_new_on(ctx, n, t, where, device, 1, out);
}

gr_status gr_buffer_new_unset_on(gr_context *ctx, size_t n, gr_dtype t, gr_where where, int device,
                                 gr_buffer **out) {
    return buffer_new_on(ctx, n, t, where, device, 0, out);
}

int gr_buffer_device(const gr_buffer *b) { return b->st->device + 1; }

gr_status gr_buffer_wrap(gr_context *ctx, void *ptr, size_t n, gr_dtype t, gr_where where,
                         gr_buffer **out) {
    *out = NULL;
    gr_status s = check_dtype(ctx, t);
    if (s != GR_OK) return s;
    if (!ptr && n) return gr_fail_arg(ctx, GR_EINVAL, "ptr", "NULL pointer for %zu elements", n);
    if (n > SIZE_MAX / gr_dtype_size(t) / 2)
        return gr_fail_arg(ctx, GR_EINVAL, "size", "%zu elements of %s are more bytes than memory can hold", n,
                           gr_dtype_name(t));
    gr_storage *st = calloc(1, sizeof *st);
    if (!st) return gr_fail(ctx, GR_ENOMEM, "out of host memory");
    *st = (gr_storage){ptr, n * gr_dtype_size(t), where, OWNED_WRAPPED, 1, NULL, ctx->device};
    if ((s = handle_new(ctx, st, 0, n, t, out)) != GR_OK) free(st);
    return s;
}

gr_status gr_buffer_adopt(gr_context *ctx, void *ptr, size_t bytes, gr_where where, size_t n, gr_dtype t,
                          void (*release)(void *arg), void *arg, gr_buffer **out) {
    *out = NULL;
    lent_storage *lent = calloc(1, sizeof *lent);
    if (!lent) return gr_fail(ctx, GR_ENOMEM, "out of host memory");
    lent->st = (gr_storage){ptr, bytes, where, OWNED_LENT, 1, NULL, ctx->device};
    lent->release = release;
    lent->arg = arg;
    gr_status s = handle_new(ctx, &lent->st, 0, n, t, out);
    if (s != GR_OK) free(lent);
    return s;
}

gr_status gr_buffer_slice(gr_context *ctx, gr_buffer *b, size_t offset, size_t count, gr_buffer **out) {
    *out = NULL;
    if (offset > b->n || count > b->n - offset)
        return gr_fail_arg(ctx, GR_EINVAL, "offset", "%zu elements from offset %zu are outside the buffer "
                           "(size %zu)", count, offset, b->n);
    int whole = offset == 0 && count == b->n;
    if (!whole && !gr_buffer_is_compact(b))
        return gr_fail_arg(ctx, GR_EINVAL, "offset", "a strided view has no 1-D slices (narrow it, or slice "
                           "its contiguous copy)");
    gr_status s = handle_new(ctx, b->st, b->offset + offset, count, b->dtype, out);
    if (s != GR_OK) return s;
    b->st->refs++;
    if (whole) {                /* the same view: its shape and strides too */
        (*out)->ndim = b->ndim;
        memcpy((*out)->shape, b->shape, sizeof b->shape);
        memcpy((*out)->strides, b->strides, sizeof b->strides);
    }
    return GR_OK;
}

void gr_buffer_free(gr_context *ctx, gr_buffer *b) {
    if (!b) return;
    ctx = gr_ctx_for(ctx, b);
    storage_unref(ctx, b->st);
    free(b);
}

gr_status gr_buffers_hold(gr_context *ctx, gr_buffer *const *bufs, size_t count, gr_buffer ***out) {
    gr_buffer **held = *out = calloc(count ? count : 1, sizeof *held);
    if (!held) return gr_fail(ctx, GR_ENOMEM, "out of host memory");
    for (size_t i = 0; i < count; i++) {
        gr_status s = bufs[i] ? gr_buffer_slice(ctx, bufs[i], 0, bufs[i]->n, &held[i]) : GR_OK;
        if (s != GR_OK) {
            gr_buffers_release(ctx, held, i);
            *out = NULL;
            return s;
        }
    }
    return GR_OK;
}

void gr_buffers_release(gr_context *ctx, gr_buffer **held, size_t count) {
    if (!held) return;
    for (size_t i = 0; i < count; i++) gr_buffer_free(ctx, held[i]);
    free(held);
    gr_ctx_enter(ctx);          /* each free made its buffer's device current */
}

size_t gr_buffer_size(const gr_buffer *b) { return b->n; }
gr_dtype gr_buffer_dtype(const gr_buffer *b) { return b->dtype; }
gr_where gr_buffer_where(const gr_buffer *b) { return b->st->where; }
void *gr_buffer_data(const gr_buffer *b) {
    return (char *)b->st->ptr + b->offset * gr_dtype_size(b->dtype);
}

/* Host-side access is plain memory on the cpu backend and for pinned buffers. */
static int host_visible(const gr_context *ctx, const gr_buffer *b) {
    return !on_gpu(ctx) || b->st->where == GR_HOST;
}

/* n elements at offset must fit: the values are to blame when the offset itself is inside. */
static gr_status check_range(gr_context *ctx, const gr_buffer *b, size_t offset, size_t n, const char *what) {
    if (offset > b->n)
        return gr_fail_arg(ctx, GR_EINVAL, "offset", "%zu is past the end of the buffer (size %zu)", offset, b->n);
    if (n > b->n - offset)
        return gr_fail_arg(ctx, GR_EINVAL, what, "%zu elements from offset %zu do not fit in a buffer of %zu "
                           "(room for %zu)", n, offset, b->n, b->n - offset);
    return GR_OK;
}

/* count elements of view b from its row-major index first, to (gather) or from compact memory on b's
 * side: host memory where b is host-visible, else device memory of b's device. Waited for. */
static gr_status move_view(gr_context *ctx, const gr_buffer *b, size_t first, size_t count, void *compact,
                           int gather) {
    char *base = gr_buffer_data(b);
    if (count == 0) return GR_OK;
    if (host_visible(ctx, b)) {
        gr_layout_move_host(base, b, first, count, compact, gather);
        return GR_OK;
    }
    int rc = gr_fault_hit(ctx, GR_FAULT_LAUNCH);
    if (rc == 0)
        rc = gr_dev_strided(base, gr_layout_for_device(b), gr_dtype_size(b->dtype), first, count, compact, gather,
                            ctx->stream);
    if (rc == 0) rc = gr_dev_stream_sync(ctx->stream);
    return rc ? gr_fail_dev(ctx, rc, gather ? "reading a strided view" : "writing a strided view") : GR_OK;
}

/* Host memory into (write) or out of a strided view on the device, through a compact device scratch. */
static gr_status transfer_view(gr_context *ctx, gr_buffer *b, size_t offset, void *host, size_t n, int write) {
    gr_buffer *tmp;
    gr_status s = gr_buffer_new_unset(ctx, n, b->dtype, GR_DEVICE, &tmp);
    if (s != GR_OK) return s;
    size_t bytes = n * gr_dtype_size(b->dtype);
    int rc = write ? gr_copy(ctx, gr_buffer_data(tmp), host, bytes, ctx->stream) : 0;
    if (rc == 0 && write) rc = gr_dev_stream_sync(ctx->stream);
    if (rc) s = gr_fail_dev(ctx, rc, "copy to the device");
    if (s == GR_OK) s = move_view(ctx, b, offset, n, gr_buffer_data(tmp), !write);
    if (s == GR_OK && !write) {
        rc = gr_copy(ctx, host, gr_buffer_data(tmp), bytes, ctx->stream);
        if (rc == 0) rc = gr_dev_stream_sync(ctx->stream);
        if (rc) s = gr_fail_dev(ctx, rc, "copy from the device");
    }
    gr_buffer_free(ctx, tmp);
    return s;
}

gr_status gr_buffer_write(gr_context *ctx, gr_buffer *b, size_t offset, const void *src, size_t n) {
    ctx = gr_ctx_for(ctx, b);
    gr_status s = check_range(ctx, b, offset, n, "values");
    if (s != GR_OK || n == 0) return s;
    if ((s = gr_storage_quiesce(ctx, b->st)) != GR_OK) return s;
    if (!gr_buffer_is_compact(b))
        return host_visible(ctx, b) ? move_view(ctx, b, offset, n, (void *)src, 0)
                                    : transfer_view(ctx, b, offset, (void *)src, n, 1);
    size_t es = gr_dtype_size(b->dtype);
    char *dst = (char *)gr_buffer_data(b) + offset * es;
    if (host_visible(ctx, b)) {
        memcpy(dst, src, n * es);
        return GR_OK;
    }
    int rc = gr_copy(ctx, dst, src, n * es, ctx->stream);
    if (rc == 0) rc = gr_dev_stream_sync(ctx->stream);
    return rc ? gr_fail_dev(ctx, rc, "copy to the device") : GR_OK;
}

gr_status gr_buffer_read(gr_context *ctx, const gr_buffer *b, size_t offset, void *dst, size_t n) {
    ctx = gr_ctx_for(ctx, b);
    gr_status s = check_range(ctx, b, offset, n, "count");
    if (s != GR_OK || n == 0) return s;
    /* an asynchronous axis reduction may still be writing it (its results' storage records the work) */
    if ((s = gr_storage_quiesce(ctx, b->st)) != GR_OK) return s;
    if (!gr_buffer_is_compact(b))
        return host_visible(ctx, b) ? move_view(ctx, b, offset, n, dst, 1)
                                    : transfer_view(ctx, (gr_buffer *)b, offset, dst, n, 0);
    size_t es = gr_dtype_size(b->dtype);
    const char *src = (const char *)gr_buffer_data(b) + offset * es;
    if (host_visible(ctx, b)) {
        memcpy(dst, src, n * es);
        return GR_OK;
    }
    int rc = gr_copy(ctx, dst, src, n * es, ctx->stream);
    if (rc == 0) rc = gr_dev_stream_sync(ctx->stream);
    return rc ? gr_fail_dev(ctx, rc, "copy from the device") : GR_OK;
}

/* Both on one side: host memory, or the memory of one device. */
static gr_status check_pair(gr_context *ctx, const gr_buffer *view, const gr_buffer *compact) {
    if (view->dtype != compact->dtype || view->n != compact->n || !gr_buffer_is_compact(compact) ||
        host_visible(ctx, view) != host_visible(ctx, compact) ||
        (!host_visible(ctx, view) && view->st->device != compact->st->device))
        return gr_fail_arg(ctx, GR_EINVAL, "src", "a strided copy needs a compact buffer of the view's dtype "
                           "and size on its side");
    return GR_OK;
}

gr_status gr_buffer_gather(gr_context *ctx, gr_buffer *dst, const gr_buffer *view) {
    ctx = gr_ctx_for(ctx, view);
    gr_status s = check_pair(ctx, view, dst);
    if (s == GR_OK) s = gr_storage_quiesce(ctx, dst->st);
    return s == GR_OK ? move_view(ctx, view, 0, view->n, gr_buffer_data(dst), 1) : s;
}

gr_status gr_buffer_scatter(gr_context *ctx, gr_buffer *view, const gr_buffer *src) {
    ctx = gr_ctx_for(ctx, view);
    gr_status s = check_pair(ctx, view, src);
    if (s == GR_OK) s = gr_storage_quiesce(ctx, view->st);
    return s == GR_OK ? move_view(ctx, view, 0, view->n, gr_buffer_data(src), 0) : s;
}

gr_status gr_buffer_check_compact(gr_context *ctx, const gr_buffer *b, const char *arg) {
    if (!b || gr_buffer_is_compact(b)) return GR_OK;
    return gr_fail_arg(ctx, GR_EINVAL, arg, "a strided view is reduced through its compact copy (b:contiguous())");
}

void gr_buffer_inputs(gr_inputs *in, gr_buffer *const *bufs, int count) {
    gr_inputs_one(in, gr_buffer_data(bufs[0]), gr_buffer_dtype(bufs[0]), gr_buffer_size(bufs[0]));
    for (int k = 1; k < count; k++) {
        in->at[k] = in->at[0];
        in->at[k].data = gr_buffer_data(bufs[k]);
        in->at[k].dtype = gr_buffer_dtype(bufs[k]);
    }
    in->count = count;
}

const char *gr_shape_text(int nd, const size_t *shape, char *buf, size_t size) {
    size_t used = (size_t)snprintf(buf, size, "{");
    for (int d = 0; d < nd && used < size; d++)
        used += (size_t)snprintf(buf + used, size - used, "%s%zu", d ? ", " : "", shape[d]);
    if (used < size) snprintf(buf + used, size - used, "}");
    return buf;
}

const char *gr_buffer_shape_text(const gr_buffer *b, char *buf, size_t size) {
    return gr_shape_text(b->ndim, b->shape, buf, size);
}

/* ---- generated contents -------------------------------------------------------------------------- */

/* A compact scratch of strided view b's dtype and size on its side, which a generator fills before
 * gr_buffer_scatter moves it into b. */
static gr_status scratch_for(gr_context *ctx, const gr_buffer *b, gr_buffer **tmp) {
    return gr_buffer_new_unset(ctx, b->n, b->dtype, b->st->where, tmp);
}

/* Ends a generator that ran on the scratch of view b: scattered into b when it succeeded; freed. */
static gr_status scatter_scratch(gr_context *ctx, gr_buffer *b, gr_buffer *tmp, gr_status s) {
    if (s == GR_OK) s = gr_buffer_scatter(ctx, b, tmp);
    gr_buffer_free(ctx, tmp);
    gr_ctx_for(ctx, b);
    return s;
}

/* A scalar in the form the generators take: a double for float dtypes, 64 two's-complement bits for
 * integer dtypes (checked to fit the dtype). */
static gr_status normalize(gr_context *ctx, gr_scalar in, gr_dtype t, const char *what, gr_scalar *out) {
    union { uint64_t u; double f; } e;
    gr_status s = gr_scalar_store(ctx, in, t, &e, what);
    if (s != GR_OK) return s;
    *out = gr_scalar_load(&e, t);
    /* a bool is generated as the unsigned integer 0 or 1 (its element's byte) */
    if (out->kind == GR_SCALAR_BOOL) *out = (gr_scalar){GR_SCALAR_UINT, {.u = (uint64_t)(out->v.b != 0)}};
    /* keep the double: iota and random compute in double and round once */
    if (out->kind == GR_SCALAR_FLOAT)
        out->v.f = in.kind == GR_SCALAR_FLOAT ? in.v.f : in.kind == GR_SCALAR_UINT ? (double)in.v.u : (double)in.v.i;
    return GR_OK;
}

/* A generator's launch on the device, waited for. */
static gr_status finish_generate(gr_context *ctx, int rc, const char *what) {
    if (rc == 0) rc = gr_dev_stream_sync(ctx->stream);
    return rc ? gr_fail_dev(ctx, rc, what) : GR_OK;
}

gr_status gr_buffer_fill(gr_context *ctx, gr_buffer *b, gr_scalar value) {
    ctx = gr_ctx_for(ctx, b);
    gr_scalar v;
    gr_status s = normalize(ctx, value, b->dtype, "value", &v);
    if (s != GR_OK || b->n == 0) return s;
    if (!gr_buffer_is_compact(b)) {
        gr_buffer *tmp;
        if ((s = scratch_for(ctx, b, &tmp)) != GR_OK) return s;
        return scatter_scratch(ctx, b, tmp, gr_buffer_fill(ctx, tmp, value));
    }
    if ((s = gr_storage_quiesce(ctx, b->st)) != GR_OK) return s;
    if (host_visible(ctx, b)) {
        union { uint64_t u; double f; } elem;
        gr_scalar_store(ctx, v, b->dtype, &elem, "value");
        gr_cpu_fill(gr_buffer_data(b), b->n, b->dtype, &elem);
        return GR_OK;
    }
    int rc = gr_fault_hit(ctx, GR_FAULT_LAUNCH);
    if (rc == 0) rc = gr_dev_fill(gr_buffer_data(b), b->n, b->dtype, v, ctx->stream);
    return finish_generate(ctx, rc, "fill");
}

gr_status gr_buffer_iota(gr_context *ctx, gr_buffer *b, gr_scalar start, gr_scalar step) {
    return gr_buffer_iota_at(ctx, b, 0, start, step);
}

gr_status gr_buffer_iota_at(gr_context *ctx, gr_buffer *b, uint64_t first, gr_scalar start, gr_scalar step) {
    ctx = gr_ctx_for(ctx, b);
    /* a sequence of bools would be 0, 1 and then nothing: refused rather than given a meaning */
    if (gr_dtype_is_bool(b->dtype))
        return gr_fail_arg(ctx, GR_EINVAL, "iota", "bool buffers have no sequence (fill or random them instead)");
    gr_scalar a, d;
    gr_status s = normalize(ctx, start, b->dtype, "start", &a);
    if (s == GR_OK && gr_dtype_is_float(b->dtype)) s = normalize(ctx, step, b->dtype, "step", &d);
    else if (s == GR_OK) {
        /* an integer step may be negative for an unsigned dtype: it wraps like the values do */
        if (step.kind == GR_SCALAR_UINT) d = step;
        else s = normalize(ctx, step, GR_INT64, "step", &d);
    }
    if (s != GR_OK || b->n == 0) return s;
    if (!gr_buffer_is_compact(b)) {
        gr_buffer *tmp;
        if ((s = scratch_for(ctx, b, &tmp)) != GR_OK) return s;
        return scatter_scratch(ctx, b, tmp, gr_buffer_iota_at(ctx, tmp, first, start, step));
    }
    if ((s = gr_storage_quiesce(ctx, b->st)) != GR_OK) return s;
    if (host_visible(ctx, b)) {
        gr_cpu_iota(gr_buffer_data(b), b->n, b->dtype, first, a, d);
        return GR_OK;
    }
    int rc = gr_fault_hit(ctx, GR_FAULT_LAUNCH);
    if (rc == 0) rc = gr_dev_iota(gr_buffer_data(b), b->n, b->dtype, first, a, d, ctx->stream);
    return finish_generate(ctx, rc, "iota");
}

static int finite(double x) { return x - x == 0.0; }

gr_status gr_buffer_random(gr_context *ctx, gr_buffer *b, uint64_t seed, gr_scalar lo, gr_scalar hi) {
    return gr_buffer_random_at(ctx, b, 0, seed, lo, hi);
}

gr_status gr_buffer_random_at(gr_context *ctx, gr_buffer *b, uint64_t first, uint64_t seed, gr_scalar lo,
                              gr_scalar hi) {
    ctx = gr_ctx_for(ctx, b);
    gr_scalar l, h;
    gr_status s = normalize(ctx, lo, b->dtype, "lo", &l);
    if (s == GR_OK) s = normalize(ctx, hi, b->dtype, "hi", &h);
    if (s != GR_OK) return s;
    int is_float = gr_dtype_is_float(b->dtype);
    if (is_float && !finite(l.v.f)) return gr_fail_arg(ctx, GR_EINVAL, "lo", "must be finite (got %g)", l.v.f);
    if (is_float && !finite(h.v.f)) return gr_fail_arg(ctx, GR_EINVAL, "hi", "must be finite (got %g)", h.v.f);
    int bad = is_float ? !(l.v.f < h.v.f) : l.kind == GR_SCALAR_INT ? l.v.i > h.v.i : l.v.u > h.v.u;
    if (bad)
        return gr_fail_arg(ctx, GR_EINVAL, "hi", "must be %s lo", is_float ? "greater than" : "at least");
    if (b->n == 0) return GR_OK;
    if (!gr_buffer_is_compact(b)) {
        gr_buffer *tmp;
        if ((s = scratch_for(ctx, b, &tmp)) != GR_OK) return s;
        return scatter_scratch(ctx, b, tmp, gr_buffer_random_at(ctx, tmp, first, seed, lo, hi));
    }
    if ((s = gr_storage_quiesce(ctx, b->st)) != GR_OK) return s;
    if (host_visible(ctx, b)) {
        gr_cpu_random(gr_buffer_data(b), b->n, b->dtype, first, seed, l, h);
        return GR_OK;
    }
    int rc = gr_fault_hit(ctx, GR_FAULT_LAUNCH);
    if (rc == 0) rc = gr_dev_random(gr_buffer_data(b), b->n, b->dtype, seed, first, l, h, ctx->stream);
    return finish_generate(ctx, rc, "random");
}

/* ---- copies -------------------------------------------------------------------------------------- */

/* A bounce area for copies between overlapping device ranges: at most this many bytes at a time. */
#define BOUNCE_BYTES ((size_t)16 << 20)

/* memmove between device ranges that overlap, through a scratch area: forward when dst is below src,
 * backward otherwise, so no chunk overwrites bytes that a later chunk still has to read. */
static gr_status move_overlapping(gr_context *ctx, char *dst, const char *src, size_t bytes) {
    size_t step = bytes < BOUNCE_BYTES ? bytes : BOUNCE_BYTES;
    gr_slot *slot;
    gr_status st = gr_slot_acquire(ctx, step, 0, &slot);
    if (st != GR_OK) return st;
    int rc = 0;
    size_t chunks = (bytes + step - 1) / step;
    for (size_t k = 0; k < chunks && rc == 0; k++) {
        size_t i = dst < src ? k : chunks - 1 - k;
        size_t lo = i * step, len = bytes - lo < step ? bytes - lo : step;
        rc = gr_copy(ctx, slot->dev, src + lo, len, ctx->stream);
        if (rc == 0) rc = gr_copy(ctx, dst + lo, slot->dev, len, ctx->stream);
    }
    int sync = gr_dev_stream_sync(ctx->stream);
    if (rc == 0) rc = sync;
    gr_slot_release(ctx, slot);
    return rc ? gr_fail_dev(ctx, rc, "copy") : GR_OK;
}

/* Between devices the copy runs on the destination's stream; the runtime moves the bytes peer to peer
 * where the devices allow it, else through the host. */
gr_status gr_buffer_copy_bytes(gr_context *ctx, gr_buffer *dst, const gr_buffer *src) {
    ctx = gr_ctx_for(ctx, dst);
    if (dst->dtype != src->dtype || dst->n != src->n)
        return gr_fail_arg(ctx, GR_EINVAL, "src", "source is %zu %s, destination %zu %s (they must match)",
                           src->n, gr_dtype_name(src->dtype), dst->n, gr_dtype_name(dst->dtype));
    if (!gr_buffer_is_compact(dst) || !gr_buffer_is_compact(src))   /* gr_buffer_copy takes strided views */
        return gr_fail_arg(ctx, GR_EINVAL, "src", "a byte copy needs compact buffers (a strided view is "
                           "copied by gr_buffer_copy)");
    gr_status st = gr_storage_quiesce(ctx, dst->st);
    if (st != GR_OK || dst->n == 0) return st;
    size_t bytes = dst->n * gr_dtype_size(dst->dtype);
    char *d = gr_buffer_data(dst);
    const char *s = gr_buffer_data(src);
    if (d == s) return GR_OK;
    /* cudaMemcpy is undefined for overlapping ranges (slices of one buffer); memmove is not */
    int overlap = d < s + bytes && s < d + bytes;
    if (overlap && ctx->base.backend == GR_BACKEND_CUDA && gr_buffer_where(dst) == GR_DEVICE)
        return move_overlapping(ctx, d, s, bytes);
    if (overlap || ctx->base.backend != GR_BACKEND_CUDA) {
        memmove(d, s, bytes);     /* host memory on both sides */
        return GR_OK;
    }
    int rc = gr_copy(ctx, d, s, bytes, ctx->stream);
    if (rc == 0) rc = gr_dev_stream_sync(ctx->stream);
    return rc ? gr_fail_dev(ctx, rc, "copy") : GR_OK;
}
