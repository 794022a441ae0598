/*
 * view.c -- views of other shapes on a buffer's memory: gr_buffer_view (a shape for a compact buffer),
 * gr_buffer_permute (axes reordered: strides permuted, nothing copied), gr_buffer_narrow (a range along
 * one axis: the offset moved, one length changed), gr_buffer_contiguous (a compact buffer of a view's
 * elements, copied only when the view is strided) and gr_buffer_dense (the memory a strided view fills
 * exactly, as a compact 1-D buffer: what a whole-view reduction reads without a copy).
 *
 * Each view is a handle on the same storage (gr_buffer_slice of the whole buffer, which keeps the
 * layout), so it keeps the memory alive as a slice does; its layout is then changed here
 * (core/layout.c). A refused view leaves nothing behind.
 */
#include "core/buffer.h"
#include "core/context.h"
#include "core/layout.h"
#include "base/error.h"

#include <stdint.h>
#include <stdio.h>

static gr_status same_view(gr_context *ctx, gr_buffer *b, gr_buffer **out) {
    return gr_buffer_slice(ctx, b, 0, b->n, out);
}

gr_status gr_buffer_view(gr_context *ctx, gr_buffer *b, int ndim, const size_t *shape, gr_buffer **out) {
    *out = NULL;
    if (ndim < 1 || ndim > GR_MAX_DIMS)
        return gr_fail_arg(ctx, GR_EINVAL, "shape", "%d axes (accepted: 1 to %d)", ndim, GR_MAX_DIMS);
    size_t n;
    int fits = gr_layout_count(ndim, shape, &n);
    if (!fits || n != b->n) {
        char text[8 * 24 + 8];
        size_t at = 0;
        for (int d = 0; d < ndim; d++)
            at += (size_t)snprintf(text + at, sizeof text - at, "%s%zu", d ? ", " : "{", shape[d]);
        snprintf(text + at, sizeof text - at, "}");
        char count[32];
        snprintf(count, sizeof count, fits ? "%zu" : "too many", n);
        return gr_fail_arg(ctx, GR_EINVAL, "shape", "%s has %s elements, the buffer %zu (the lengths' product must "
                           "be its size)", text, count, b->n);
    }
    if (!gr_buffer_is_compact(b))
        return gr_fail_arg(ctx, GR_EINVAL, "b", "a strided view cannot take another shape (make it contiguous "
                           "first)");
    gr_status s = same_view(ctx, b, out);
    if (s == GR_OK) gr_layout_compact(*out, ndim, shape);
    return s;
}

gr_status gr_buffer_permute(gr_context *ctx, gr_buffer *b, const int *perm, gr_buffer **out) {
    *out = NULL;
    int seen[GR_MAX_DIMS] = {0};
    for (int k = 0; k < b->ndim; k++) {
        if (perm[k] < 0 || perm[k] >= b->ndim)
            return gr_fail_arg(ctx, GR_EINVAL, "perm", "entry %d is axis %d of a %d-axis buffer (accepted: each "
                               "axis once)", k, perm[k], b->ndim);
        if (seen[perm[k]]++)
            return gr_fail_arg(ctx, GR_EINVAL, "perm", "axis %d is named twice (accepted: each axis once)", perm[k]);
    }
    gr_status s = same_view(ctx, b, out);
    if (s != GR_OK) return s;
    for (int k = 0; k < b->ndim; k++) {
        (*out)->shape[k] = b->shape[perm[k]];
        (*out)->strides[k] = b->strides[perm[k]];
    }
    return GR_OK;
}

gr_status gr_buffer_narrow(gr_context *ctx, gr_buffer *b, int axis, size_t start, size_t count, gr_buffer **out) {
    *out = NULL;
    if (axis < 0 || axis >= b->ndim)
        return gr_fail_arg(ctx, GR_EINVAL, "axis", "axis %d of a %d-axis buffer", axis, b->ndim);
    size_t len = b->shape[axis];
    if (start > len)
        return gr_fail_arg(ctx, GR_EINVAL, "start", "%zu is past the end of an axis of length %zu", start, len);
    if (count > len - start)
        return gr_fail_arg(ctx, GR_EINVAL, "count", "%zu positions from %zu do not fit an axis of length %zu",
                           count, start, len);
    gr_status s = same_view(ctx, b, out);
    if (s != GR_OK) return s;
    gr_buffer *v = *out;
    v->shape[axis] = count;
    v->n = 1;
    for (int d = 0; d < v->ndim; d++) v->n *= v->shape[d];
    if (v->n) v->offset += start * b->strides[axis];   /* an empty view keeps its offset: inside the memory */
    return GR_OK;
}

gr_status gr_buffer_contiguous(gr_context *ctx, gr_buffer *b, gr_buffer **out) {
    *out = NULL;
    if (gr_buffer_is_compact(b)) return same_view(ctx, b, out);
    gr_buffer *c;
    gr_status s = gr_buffer_new_unset(gr_ctx_for(ctx, b), b->n, b->dtype, b->st->where, &c);
    if (s != GR_OK) return s;
    gr_layout_compact(c, b->ndim, b->shape);
    s = gr_buffer_gather(ctx, c, b);
    if (s != GR_OK) {
        gr_buffer_free(ctx, c);
        return s;
    }
    *out = c;
    return GR_OK;
}

gr_status gr_buffer_dense(gr_context *ctx, gr_buffer *b, gr_buffer **out) {
    *out = NULL;
    if (gr_buffer_is_compact(b) || b->n == 0) return GR_OK;
    /* the axes longer than 1, by stride from the largest: dense when each stride is the next one's span
     * and the last is 1 (strides are never negative, so the first element is the lowest) */
    size_t len[GR_MAX_DIMS], stride[GR_MAX_DIMS];
    int m = 0;
    for (int d = 0; d < b->ndim; d++) {
        if (b->shape[d] == 1) continue;
        int at = m++;
        while (at > 0 && stride[at - 1] < (size_t)b->strides[d]) {
            len[at] = len[at - 1];
            stride[at] = stride[at - 1];
            at--;
        }
        len[at] = b->shape[d];
        stride[at] = (size_t)b->strides[d];
    }
    if (m == 0 || stride[m - 1] != 1) return GR_OK;
    for (int i = 0; i + 1 < m; i++)
        if (stride[i] != stride[i + 1] * len[i + 1]) return GR_OK;
    gr_status s = same_view(ctx, b, out);
    if (s == GR_OK) gr_layout_compact(*out, 1, &b->n);
    return s;
}
