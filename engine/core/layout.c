/*
 * layout.c -- shapes and strides of buffer handles (core/handles.h: ndim, shape, strides in elements).
 *
 * A layout is compact when its elements follow one another in row-major order from the view's element
 * 0: the strides are the suffix products of the shape, an axis of length 1 having any stride, and an
 * empty view always compact. Compact views reduce and copy as 1-D buffers; the others go through
 * gr_layout_move_host on the host or the strided kernel (cuda/runtime/strided.cu) on the device.
 */
#include "core/layout.h"
#include "base/dtype.h"

#include <stdint.h>
#include <string.h>

void gr_layout_compact(gr_buffer *b, int ndim, const size_t *shape) {
    size_t stride = 1, n = 1;
    b->ndim = ndim;
    for (int d = ndim - 1; d >= 0; d--) {
        b->shape[d] = shape[d];
        b->strides[d] = stride;
        stride *= shape[d] ? shape[d] : 1;     /* numpy's strides for an empty axis: as if of length 1 */
        n *= shape[d];
    }
    for (int d = ndim; d < GR_MAX_DIMS; d++) b->shape[d] = b->strides[d] = 0;
    b->n = n;
}

int gr_layout_count(int ndim, const size_t *shape, size_t *n) {
    size_t c = 1;
    int zero = 0, over = 0;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] == 0) zero = 1;
        else if (c > SIZE_MAX / shape[d]) over = 1;
        else c *= shape[d];
    }
    *n = zero ? 0 : c;
    return zero || !over;
}

int gr_buffer_ndim(const gr_buffer *b) { return b->ndim; }

void gr_buffer_layout(const gr_buffer *b, size_t *shape, int64_t *strides) {
    for (int d = 0; d < b->ndim; d++) {
        if (shape) shape[d] = b->shape[d];
        if (strides) strides[d] = (int64_t)b->strides[d];
    }
}

int gr_buffer_is_compact(const gr_buffer *b) {
    if (b->n == 0) return 1;
    size_t expect = 1;
    for (int d = b->ndim - 1; d >= 0; d--) {
        if (b->shape[d] == 1) continue;
        if (b->strides[d] != expect) return 0;
        expect *= b->shape[d];
    }
    return 1;
}

gr_dev_layout gr_layout_for_device(const gr_buffer *b) {
    gr_dev_layout l;
    memset(&l, 0, sizeof l);
    l.ndim = b->ndim;
    for (int d = 0; d < b->ndim; d++) {
        l.shape[d] = b->shape[d];
        l.strides[d] = b->strides[d];
    }
    return l;
}

/* One element of es bytes (1, 2, 4 or 8: every dtype of GR_DTYPE_LIST). */
static void move_element(char *to, const char *from, size_t es) {
    switch (es) {
    case 1: *to = *from; break;
    case 2: memcpy(to, from, 2); break;
    case 4: memcpy(to, from, 4); break;
    default: memcpy(to, from, es); break;
    }
}

void gr_layout_move_host(char *base, const gr_buffer *b, size_t first, size_t count, char *compact, int gather) {
    if (count == 0) return;
    const size_t es = gr_dtype_size(b->dtype);
    const int nd = b->ndim;
    size_t idx[GR_MAX_DIMS], rest = first, off = 0;
    for (int d = nd - 1; d >= 0; d--) {          /* count > 0: no axis is empty */
        idx[d] = rest % b->shape[d];
        rest /= b->shape[d];
        off += idx[d] * b->strides[d];
    }
    for (size_t i = 0; i < count; i++) {
        char *v = base + off * es, *c = compact + i * es;
        if (gather) move_element(c, v, es);
        else move_element(v, c, es);
        for (int d = nd - 1; d >= 0; d--) {      /* the next index in row-major order, as an odometer */
            if (++idx[d] < b->shape[d]) {
                off += b->strides[d];
                break;
            }
            off -= (b->shape[d] - 1) * b->strides[d];
            idx[d] = 0;
        }
    }
}

void gr_layout_reduced_last(const gr_buffer *b, unsigned axes, int *perm, size_t *row, size_t *kept) {
    int m = 0;
    *row = *kept = 1;
    for (int d = 0; d < b->ndim; d++)
        if (!(axes >> d & 1)) {
            perm[m++] = d;
            *kept *= b->shape[d];
        }
    for (int d = 0; d < b->ndim; d++)
        if (axes >> d & 1) {
            perm[m++] = d;
            *row *= b->shape[d];
        }
}
