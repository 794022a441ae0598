/*
 * laxes.c -- reductions along axes from Lua: opts.axis resolved against the view (1-based, negative from
 * the end, each axis once), the result shape (the kept axes, with keepdims the reduced ones as length 1;
 * {1} when every axis goes), the result buffers -- opts.out's, checked against that shape, or new ones
 * of it on the input's side -- and the engine's gr_reduce_axes.
 */
#include "laxes.h"
#include "lbuffer.h"

#include <stdio.h>

/* The axes as a mask of 0-based bits; a bad one raises naming opts.axis. */
static unsigned axes_mask(lua_State *L, gr_buffer *b, const lgr_request *r) {
    int nd = gr_buffer_ndim(b);
    unsigned mask = 0;
    for (int i = 0; i < r->naxes; i++) {
        lua_Integer a = r->axes[i], d = a > 0 ? a - 1 : nd + a;
        if (a == 0 || d < 0 || d >= nd)
            luaL_argerror(L, r->arg, lua_pushfstring(L, "opts.axis: %I is not an axis of this %d-axis buffer (accepted: 1 "
                                                   "to %d, or -%d to -1 from the end)", a, nd, nd, nd));
        if (mask >> d & 1)
            luaL_argerror(L, r->arg, lua_pushfstring(L, "opts.axis: axis %d is named twice (each axis once)", (int)d + 1));
        mask |= 1u << d;
    }
    return mask;
}

static int result_shape(gr_buffer *b, unsigned mask, int keepdims, size_t *shape) {
    size_t in[GR_MAX_DIMS];
    gr_buffer_layout(b, in, NULL);
    int m = 0;
    for (int d = 0; d < gr_buffer_ndim(b); d++)
        if (!(mask >> d & 1)) shape[m++] = in[d];
        else if (keepdims) shape[m++] = 1;
    if (m == 0) shape[m++] = 1;
    return m;
}

static const char *shape_text(char *text, size_t cap, int nd, const size_t *shape) {
    size_t at = 0;
    for (int d = 0; d < nd && at < cap; d++)
        at += (size_t)snprintf(text + at, cap - at, "%s%zu", d ? ", " : "{", shape[d]);
    if (at < cap) snprintf(text + at, cap - at, "}");
    return text;
}

/* opts.out's buffer(s) (or the op's entry of it), pushed in order, each of the result shape (the dtype and
 * side are the engine's to check). */
static void given_outs(lua_State *L, const lgr_request *r, int count, int nd, const size_t *shape, gr_buffer *out[2]) {
    lgr_request_given_outs(L, r, count, out);
    for (int i = 0; i < count; i++) {
        size_t got[GR_MAX_DIMS];
        int gnd = gr_buffer_ndim(out[i]), same = gnd == nd;
        gr_buffer_layout(out[i], got, NULL);
        for (int d = 0; d < nd && same; d++) same = got[d] == shape[d];
        if (!same) {
            char want[200], have[200], name[LGR_OUT_NAME];
            lgr_request_out_name(r, count > 1 ? i + 1 : 0, name);
            luaL_argerror(L, r->arg, lua_pushfstring(L, "%s: must have the result's shape %s (got %s)", name,
                                                     shape_text(want, sizeof want, nd, shape),
                                                     shape_text(have, sizeof have, gnd, got)));
        }
    }
}

int lgr_reduce_axes(lua_State *L, gr_buffer *b, const lgr_request *r) {
    unsigned mask;
    gr_buffer *out[2];
    int count = lgr_axes_outs(L, b, r, &mask, out);
    gr_status st;
    LGR_RETRY(L, st, gr_reduce_axes(lgr_ctx(L), b, &r->o, mask, out));
    if (st != GR_OK) return lgr_fail(L, st, r->arg, NULL);
    return count;
}

int lgr_axes_outs(lua_State *L, gr_buffer *b, const lgr_request *r, unsigned *axes, gr_buffer *out[2]) {
    gr_context *ctx = lgr_ctx(L);
    unsigned mask = axes_mask(L, b, r);
    size_t shape[GR_MAX_DIMS], k = 1;
    int nd = result_shape(b, mask, r->keepdims, shape);
    for (int d = 0; d < nd; d++) k *= shape[d];
    gr_dtype dt[2];
    int count = 1;
    gr_status st = gr_segment_result_dtypes(ctx, &r->o, gr_buffer_dtype(b), dt, &count);
    if (st != GR_OK) return lgr_fail(L, st, r->arg, NULL);
    out[0] = out[1] = NULL;
    if (r->has_out) {
        given_outs(L, r, count, nd, shape, out);
    } else {
        for (int i = 0; i < count; i++) {
            lbuffer *u = lgr_new_buffer_ud(L);
            LGR_RETRY(L, st, gr_buffer_new_unset_on(ctx, k, dt[i], gr_buffer_where(b), gr_buffer_device(b), &u->b));
            if (st != GR_OK) return lgr_fail(L, st, r->arg, NULL);
            lgr_track(L, k * gr_dtype_size(dt[i]));
            gr_buffer *shaped;
            if ((st = gr_buffer_view(ctx, u->b, nd, shape, &shaped)) != GR_OK) return lgr_fail(L, st, r->arg, NULL);
            gr_buffer_free(ctx, u->b);
            u->b = shaped;
            out[i] = shaped;
        }
    }
    *axes = mask;
    return count;
}
