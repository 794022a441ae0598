/*
 * dlpack.c -- buffers handed to other libraries and taken from them without a copy, through DLPack 1.x
 * (core/dlpack.h): gr_buffer_to_dlpack, gr_buffer_from_dlpack and its pre-1.0 twin.
 *
 * Export: the tensor is the first member of an export record that also holds a handle of our own on the
 * buffer's view (gr_buffer_slice of the whole view, which counts a reference on the storage as every
 * slice does) and the shape and strides the tensor points at. The consumer's call of the deleter frees
 * that handle and the record; until then the memory stays, whatever happens to the caller's handles.
 * data is the view's first element itself (gr_buffer_data) and byte_offset 0, as PyTorch and CuPy give
 * theirs: every consumer reads that, while some ignore byte_offset.
 *
 * Import: the tensor's memory becomes a lent storage (gr_buffer_adopt) whose release calls the tensor's
 * deleter, once, when the last handle on it goes and no queued reduction reads it; the handle's view is
 * the tensor's shape and strides. A refused tensor is left untouched: the caller still owns it.
 *
 * The type codes come from lists.h's dtype table (its kind and format columns), so a dtype added there
 * must say its code here before the engine compiles.
 */
#include "core/dlpack.h"
#include "core/buffer.h"
#include "core/context.h"
#include "core/layout.h"
#include "base/error.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- dtypes --------------------------------------------------------------------------------------- */

/* The code of each (kind, format) pair of lists.h's dtype table. */
#define DL_CODE_INT_C kDLInt
#define DL_CODE_UINT_C kDLUInt
#define DL_CODE_BOOL_C kDLBool
#define DL_CODE_FLOAT_C kDLFloat
#define DL_CODE_FLOAT_f16 kDLFloat
#define DL_CODE_FLOAT_bf16 kDLBfloat
#define DL_CODE_FLOAT_e4m3 kDLFloat8_e4m3fn
#define DL_CODE_FLOAT_e5m2 kDLFloat8_e5m2
#define DL_CODE_(E, name, ctype, bytes, is_float, is_signed, kind, lo, hi, facc, nccl, format) \
    [GR_##E] = DL_CODE_##kind##_##format,
static const uint8_t dl_code[GR_DTYPE_COUNT] = {GR_DTYPE_LIST(DL_CODE_)};
#undef DL_CODE_

static DLDataType dl_type_of(gr_dtype t) { return (DLDataType){dl_code[t], (uint8_t)(8 * gr_dtype_size(t)), 1}; }

/* The dtype of a DLPack type (lanes aside), or -1. */
static int dtype_of(DLDataType d) {
    for (int t = 0; t < GR_DTYPE_COUNT; t++)
        if (dl_code[t] == d.code && 8 * gr_dtype_size((gr_dtype)t) == d.bits) return t;
    return -1;
}

/* "int8 (code 0, 8 bits), ...": what an import accepts, for its message. */
static const char *accepted_types(void) {
    static char buf[GR_DTYPE_COUNT * 40];
    if (!buf[0]) {
        size_t at = 0;
        for (int t = 0; t < GR_DTYPE_COUNT && at < sizeof buf; t++)
            at += (size_t)snprintf(buf + at, sizeof buf - at, "%s%s (code %d, %zu bits)", t ? ", " : "",
                                   gr_dtype_name((gr_dtype)t), dl_code[t], 8 * gr_dtype_size((gr_dtype)t));
    }
    return buf;
}

/* ---- export --------------------------------------------------------------------------------------- */

typedef struct {
    DLManagedTensorVersioned m;     /* first: the tensor's address is the record's */
    gr_context *ctx;                /* the root, as the caller's handles take it */
    gr_buffer *held;
    int64_t shape[GR_MAX_DIMS], strides[GR_MAX_DIMS];
} export_record;

static void export_deleter(DLManagedTensorVersioned *self) {
    if (!self) return;
    export_record *r = self->manager_ctx;
    gr_buffer_free(r->ctx, r->held);
    free(r);
}

gr_status gr_buffer_to_dlpack(gr_context *ctx, gr_buffer *b, void **out) {
    *out = NULL;
    gr_context *root = gr_ctx_root(ctx);
    ctx = gr_ctx_for(ctx, b);
    /* the consumer reads on streams of its own: nothing of ours may still be writing */
    gr_status s = gr_storage_quiesce(ctx, b->st);
    if (s != GR_OK) return s;
    export_record *r = calloc(1, sizeof *r);
    if (!r) return gr_fail(ctx, GR_ENOMEM, "out of host memory");
    if ((s = gr_buffer_slice(ctx, b, 0, b->n, &r->held)) != GR_OK) {
        free(r);
        return s;
    }
    r->ctx = root;
    DLDevice dev = {kDLCPU, 0};
    if (ctx->base.backend == GR_BACKEND_CUDA)
        dev = b->st->where == GR_DEVICE ? (DLDevice){kDLCUDA, b->st->device} : (DLDevice){kDLCUDAHost, 0};
    for (int d = 0; d < b->ndim; d++) {
        r->shape[d] = (int64_t)b->shape[d];
        r->strides[d] = (int64_t)b->strides[d];
    }
    r->m = (DLManagedTensorVersioned){
        .version = {GR_DLPACK_MAJOR, GR_DLPACK_MINOR},
        .manager_ctx = r,
        .deleter = export_deleter,
        .flags = 0,
        .dl_tensor = {gr_buffer_data(b), dev, b->ndim, dl_type_of(b->dtype), r->shape, r->strides, 0},
    };
    *out = &r->m;
    return GR_OK;
}

/* ---- import --------------------------------------------------------------------------------------- */

static void release_versioned(void *arg) {
    DLManagedTensorVersioned *m = arg;
    if (m->deleter) m->deleter(m);
}

static void release_legacy(void *arg) {
    DLManagedTensor *m = arg;
    if (m->deleter) m->deleter(m);
}

/* Every refusal names the argument the caller gave: the tensor. */
#define REFUSE(ctx, ...) gr_fail_arg((ctx), GR_EINVAL, "managed", __VA_ARGS__)

/* The side and context of a tensor's memory, or a refusal. */
static gr_status place(gr_context *ctx, DLDevice dev, gr_where *where, gr_context **on) {
    int gpu = ctx->base.backend == GR_BACKEND_CUDA;
    *on = gr_ctx_enter(ctx);
    if (dev.device_type == kDLCPU) {
        *where = gpu ? GR_HOST : GR_DEVICE;    /* the cpu backend's buffers are host memory on either side */
        return GR_OK;
    }
    if (dev.device_type == kDLCUDAHost) {
        *where = GR_HOST;
        return GR_OK;
    }
    if (dev.device_type == kDLCUDA && gpu) {
        int count = gr_device_count(ctx);
        if (dev.device_id < 0 || dev.device_id >= count)
            return REFUSE(ctx, "memory of CUDA device %d, which this machine lacks (accepted: kDLCUDA with "
                          "device_id 0 to %d)", (int)dev.device_id, count - 1);
        *where = GR_DEVICE;
        return gr_context_on(ctx, dev.device_id, on);
    }
    return REFUSE(ctx, "memory of device type %d%s (accepted: kDLCPU (1), kDLCUDAHost (3) and, on the cuda "
                  "backend, kDLCUDA (2))", (int)dev.device_type,
                  dev.device_type == kDLCUDA ? " while the backend is cpu"
                  : dev.device_type == kDLCUDAManaged ? " (kDLCUDAManaged: unified memory)" : "");
}

/* Shape and strides of t as a view's (ndim 0 as {1}); strides of axes of length 0 or 1 do not matter and
 * are made compact. *last: the offset in elements of the view's last element (0 when empty). */
static gr_status read_layout(gr_context *ctx, const DLTensor *t, int *ndim, size_t *shape, size_t *strides,
                             size_t *n, size_t *last) {
    if (t->ndim < 0 || t->ndim > GR_MAX_DIMS)
        return REFUSE(ctx, "a tensor of %d dimensions (accepted: 0 to %d)", (int)t->ndim, GR_MAX_DIMS);
    if (t->ndim > 0 && !t->shape)
        return REFUSE(ctx, "%d dimensions and no shape (accepted: a shape of ndim entries)", (int)t->ndim);
    *ndim = t->ndim ? t->ndim : 1;
    shape[0] = 1;
    for (int d = 0; d < t->ndim; d++) {
        if (t->shape[d] < 0)
            return REFUSE(ctx, "length %lld on axis %d (accepted: lengths >= 0)", (long long)t->shape[d], d);
        shape[d] = (size_t)t->shape[d];
    }
    if (!gr_layout_count(*ndim, shape, n))
        return REFUSE(ctx, "a shape whose element count passes SIZE_MAX (accepted: fewer elements)");
    size_t compact = 1, span = 0;
    for (int d = *ndim - 1; d >= 0; d--) {
        int64_t st = t->ndim && t->strides ? t->strides[d] : (int64_t)compact;
        if (shape[d] <= 1 || *n == 0) st = (int64_t)compact;
        else if (st < 0)
            return REFUSE(ctx, "stride %lld on axis %d (accepted: strides >= 0; a negative one is a flipped "
                          "view, which a buffer cannot take: make it contiguous first)", (long long)st, d);
        strides[d] = (size_t)st;
        if (*n && shape[d] > 1) {
            if ((size_t)st > (SIZE_MAX / 16 - span) / (shape[d] - 1))
                return REFUSE(ctx, "stride %lld on axis %d reaches past the address space (accepted: views "
                              "within memory)", (long long)st, d);
            span += (shape[d] - 1) * (size_t)st;
        }
        compact *= shape[d] ? shape[d] : 1;
    }
    *last = span;
    return GR_OK;
}

static gr_status import(gr_context *ctx, const DLTensor *t, void (*release)(void *), void *managed,
                        gr_buffer **out) {
    DLDataType dt = t->dtype;
    int dtype = dtype_of(dt);
    if (dt.lanes != 1)
        return REFUSE(ctx, "a vector type of %d lanes (accepted: 1 lane)", dt.lanes);
    if (dtype < 0)
        return REFUSE(ctx, "type code %d with %d bits (accepted: %s)", dt.code, dt.bits, accepted_types());
    int ndim = 1;
    size_t shape[GR_MAX_DIMS], strides[GR_MAX_DIMS], n = 0, last = 0;
    gr_status s = read_layout(ctx, t, &ndim, shape, strides, &n, &last);
    if (s != GR_OK) return s;
    size_t es = gr_dtype_size((gr_dtype)dtype);
    char *first = (char *)t->data + t->byte_offset;
    if (n && !t->data)
        return REFUSE(ctx, "NULL data for %zu elements (accepted: data NULL only when the tensor is empty)", n);
    if (n && (uintptr_t)first % es)
        return REFUSE(ctx, "data + byte_offset is %p, not a multiple of %zu (accepted: the first element "
                      "aligned to its size)", (void *)first, es);
    gr_where where;
    gr_context *on;
    if ((s = place(ctx, t->device, &where, &on)) != GR_OK) return s;
    if ((s = gr_buffer_adopt(on, n ? first : NULL, n ? (last + 1) * es : 0, where, n, (gr_dtype)dtype, release,
                             managed, out)) != GR_OK)
        return s;
    gr_buffer *b = *out;
    b->ndim = ndim;
    memcpy(b->shape, shape, sizeof shape);
    memcpy(b->strides, strides, sizeof strides);
    return GR_OK;
}

gr_status gr_buffer_from_dlpack(gr_context *ctx, void *managed, gr_buffer **out) {
    *out = NULL;
    DLManagedTensorVersioned *m = managed;
    if (!m) return REFUSE(ctx, "NULL (accepted: a DLManagedTensorVersioned*)");
    if (m->version.major != GR_DLPACK_MAJOR)
        return REFUSE(ctx, "DLPack version %u.%u (accepted: 1.x; a DLManagedTensor of before 1.0 is read by "
                      "gr_buffer_from_dlpack_legacy)", (unsigned)m->version.major, (unsigned)m->version.minor);
    if (m->flags & GR_DLPACK_FLAG_READ_ONLY)
        return REFUSE(ctx, "a read-only tensor (accepted: writable ones, as every buffer is writable)");
    return import(ctx, &m->dl_tensor, release_versioned, m, out);
}

gr_status gr_buffer_from_dlpack_legacy(gr_context *ctx, void *managed, gr_buffer **out) {
    *out = NULL;
    DLManagedTensor *m = managed;
    if (!m) return REFUSE(ctx, "NULL (accepted: a DLManagedTensor*)");
    return import(ctx, &m->dl_tensor, release_legacy, m, out);
}
