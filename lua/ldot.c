/*
 * ldot.c -- gr.dot(a, b, opts) from Lua: the sum of a[i] * b[i] (engine/core/dot.c), a number, or with
 * opts.async a Pending whose wait gives it; with segment, offsets or axis a buffer of dot products (with
 * opts.async a Pending whose wait gives the buffer);
 * gr.bench_dot(a, b, opts), its timing as gr.bench gives one. The options are a sum's (lrequest.c reads
 * them); what gr.dot does not take is refused by name.
 */
#include "ldot.h"
#include "laxes.h"
#include "lbuffer.h"
#include "linfo.h"
#include "lreduce.h"
#include "lrequest.h"
#include "lsharded.h"

/* A dot product per segment or along axes: the results in buffers on a's side (opts.out's or new ones,
 * pushed), the sum's dtype; with opts.async queued, into *p. */
static int dot_many(lua_State *L, gr_buffer *a, gr_buffer *b, const lgr_request *r, gr_pending **p) {
    gr_context *ctx = lgr_ctx(L);
    gr_buffer *out[2];
    gr_status st;
    unsigned axes = 0;
    gr_segments seg = {r->segment, r->offsets};
    if (r->naxes) lgr_axes_outs(L, a, r, &axes, out);
    else lgr_request_outs(L, a, r, out);
    if (p) LGR_RETRY(L, st, gr_dot_many_async(ctx, a, b, &r->o, r->naxes ? NULL : &seg, axes, out, p));
    else if (r->naxes) LGR_RETRY(L, st, gr_dot_axes(ctx, a, b, &r->o, axes, out));
    else LGR_RETRY(L, st, gr_dot_segments(ctx, a, b, &r->o, &seg, out));
    if (st != GR_OK) return lgr_fail(L, st, 3, "a", 1, "b", 2, NULL);
    return 1;
}

/* The same queued: a Pending whose wait gives the result buffer (its user value 3), holding a and b
 * (user values 1 and 4) and opts.stream (2) while in flight. */
static int dot_many_async(lua_State *L, gr_buffer *a, gr_buffer *b, const lgr_request *r) {
    lgr_pending *u = lgr_new_pending(L, 2);
    int at = lua_gettop(L);
    dot_many(L, a, b, r, &u->p[0]);
    lua_setiuservalue(L, at, 3);            /* the result buffer, on the top */
    u->nout = 1;
    lua_pushvalue(L, 1);
    lua_setiuservalue(L, at, 1);
    lua_pushvalue(L, 2);
    lua_setiuservalue(L, at, 4);
    if (r->o.stream) {
        lua_getfield(L, 3, "stream");
        lua_setiuservalue(L, at, 2);
    }
    return 1;
}

int lgr_dot(lua_State *L) {
    lgr_request r;
    lgr_request_read(L, 3, GR_SUM, LGR_READ_ASYNC_SEGMENTS, &r);
    if (r.streamed || r.dtype >= 0)
        luaL_argerror(L, 3, "opts: gr.dot takes two buffers (not streamed, chunk, streams or dtype)");
    if (lgr_is_sharded(L, 1) || lgr_is_sharded(L, 2)) return lgr_dot_sharded(L, &r);
    gr_buffer *a = lgr_check_buffer(L, 1), *b = lgr_check_buffer(L, 2);
    if (r.has_out && !(r.segment || r.offsets || r.naxes))
        luaL_argerror(L, 3, "opts.out: only with segment, offsets or axis (a whole dot product is a number)");
    if (r.segment || r.offsets || r.naxes) return r.async ? dot_many_async(L, a, b, &r) : dot_many(L, a, b, &r, NULL);
    gr_context *ctx = lgr_ctx(L);
    gr_status st;
    if (r.async) {
        /* the engine's pending holds both inputs' memory; the Pending keeps opts.stream (user value 2) */
        lgr_pending *u = lgr_new_pending(L, 0);
        LGR_RETRY(L, st, gr_dot_async(ctx, a, b, &r.o, &u->p[0]));
        if (st != GR_OK) return lgr_fail(L, st, 3, "a", 1, "b", 2, NULL);
        if (r.o.stream) {
            lua_getfield(L, 3, "stream");
            lua_setiuservalue(L, -2, 2);
        }
        return 1;
    }
    gr_result v;
    LGR_RETRY(L, st, gr_dot(ctx, a, b, &r.o, &v));
    if (st != GR_OK) return lgr_fail(L, st, 3, "a", 1, "b", 2, NULL);
    return lgr_push_result(L, &v);
}

/* gr.bench_dot(a, b, opts): reps and warmup as for gr.bench, the other options gr.dot's (axis too, timed
 * as gr.bench times axes: whole calls); bytes counts both inputs. */
int lgr_bench_dot(lua_State *L) {
    gr_buffer *a = lgr_check_buffer(L, 1), *b = lgr_check_buffer(L, 2);
    lgr_request r;
    lgr_request_read(L, 3, GR_SUM, 1, &r);
    gr_context *ctx = lgr_ctx(L);
    gr_bench_result res;
    gr_status st;
    if (r.naxes) {                      /* along axes: into result buffers made once */
        unsigned axes;
        gr_buffer *out[2];
        lgr_axes_outs(L, a, &r, &axes, out);
        st = gr_bench_dot_axes(ctx, a, b, &r.o, axes, out, r.warmup, r.reps, &res);
    } else {
        if (r.segment || r.offsets) luaL_argerror(L, 3, "opts.segment, opts.offsets: gr.bench_dot times whole "
                                                        "buffers and axes");
        st = gr_bench_dot(ctx, a, b, &r.o, r.warmup, r.reps, &res);
    }
    if (st != GR_OK) return lgr_fail(L, st, 3, "a", 1, "b", 2, NULL);
    int device = gr_context_backend(ctx) == GR_BACKEND_CUDA && gr_buffer_where(a) == GR_DEVICE;
    lgr_push_bench(L, &res, a, device ? "events" : "clock");
    lua_pushinteger(L, (lua_Integer)(2 * gr_buffer_size(a) * gr_dtype_size(gr_buffer_dtype(a))));
    lua_setfield(L, -2, "bytes");
    return 1;
}
