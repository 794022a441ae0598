/*
 * lreduce.c -- reductions from Lua: gr.reduce and its shortcuts (their options read by lrequest.c),
 * streamed host data, gr.reduce_many, and the Pending userdata of asynchronous work.
 *
 * A Pending keeps the buffer it reads (user value 1) and the stream it runs on (user value 2) alive
 * while the work is in flight; collecting an unfinished Pending waits for it.
 */
#include "lreduce.h"
#include "laxes.h"
#include "lbuffer.h"
#include "linputs.h"
#include "lrequest.h"
#include "lsharded.h"

#include <stdlib.h>
#include <string.h>


/* ---- reductions ---------------------------------------------------------------------------------- */

static int push_pending(lua_State *L, gr_buffer *b, const lgr_request *r);
static int push_axes_pending(lua_State *L, gr_buffer *b, const lgr_request *r);

/* A table or byte string reduced as streamed host data: staged through pinned memory first. */
static int reduce_source(lua_State *L, lgr_request *r) {
    gr_context *ctx = lgr_ctx(L);
    gr_dtype t = r->dtype < 0 ? GR_FLOAT32 : (gr_dtype)r->dtype;
    void *data;
    size_t n = lgr_stage_source(L, 1, t, &data);
    lbuffer *u = lgr_new_buffer_ud(L);       /* collected, and so freed, even if a step below raises */
    gr_status st;
    LGR_RETRY(L, st, gr_buffer_new(ctx, n, t, GR_HOST, &u->b));
    if (st == GR_OK) st = gr_buffer_write(ctx, u->b, 0, data, n);
    free(data);
    if (st == GR_OK) lgr_request_prepare(L, r, LGR_FOR_RUN, &u->b, 1);    /* its kernels, or its cpu functions */
    gr_result v;
    if (st == GR_OK) LGR_RETRY(L, st, gr_reduce_streamed(ctx, u->b, &r->o, r->chunk, r->streams, &v));
    gr_buffer_free(ctx, u->b);
    u->b = NULL;
    if (st != GR_OK) return lgr_fail(L, st, 2, NULL);
    return lgr_push_result(L, &v);
}

/* Segmented: the results in buffers on the input's side, opts.out's or new ones. */
static int reduce_segments(lua_State *L, gr_buffer *b, const lgr_request *r) {
    gr_context *ctx = lgr_ctx(L);
    gr_segments seg = {r->segment, r->offsets};
    gr_buffer *out[2];
    int count = lgr_request_outs(L, b, r, out);
    gr_status st;
    LGR_RETRY(L, st, gr_reduce_segments(ctx, b, &r->o, &seg, out));
    if (st != GR_OK) return lgr_fail(L, st, 2, NULL);
    return count;
}

/* opts.op of gr.reduce and reduce_many: a misspelt variable there is nil, which must not mean sum. */
static void require_op(lua_State *L, const lgr_request *r) {
    if (!r->op_given)
        luaL_argerror(L, 2, lua_pushfstring(L, "opts.op: required: an op's name (accepted: %s) or a gr.operator "
                                               "(gr.sum and the like name theirs)", gr_op_names()));
}

/* A result as one value: the scalar, or a table {value, index} / {min, max} for the ops with two. */
static void push_value(lua_State *L, const gr_result *r) {
    if (r->count < 2) {
        lgr_push_scalar(L, r->value[0]);
        return;
    }
    lua_createtable(L, r->count, 0);
    for (int i = 0; i < r->count; i++) {
        lgr_push_scalar(L, r->value[i]);
        lua_rawseti(L, -2, i + 1);
    }
}

/* opts.ops: a table keyed by op name, each value what gr.reduce gives for that op ({value, index} and
 * {min, max} as tables). On the GPU the ops that fuse go through one kernel (gr_fused_prepare; a build
 * without NVRTC reduces them one by one). */
static int reduce_ops(lua_State *L, gr_buffer *b, const lgr_request *r) {
    gr_context *ctx = lgr_ctx(L);
    const gr_image *fused = NULL;
    gr_status st;
    if (gr_context_backend(ctx) == GR_BACKEND_CUDA && gr_buffer_where(b) == GR_DEVICE &&
        r->o.determinism != GR_DET_GPU_TO_GPU) {
        st = gr_fused_prepare(ctx, lgr_operator_cache(L), r->ops, r->nops, gr_buffer_dtype(b), r->o.acc, &fused);
        if (st == GR_ENODEV) fused = NULL;          /* no NVRTC: one pass per op, the same results */
        else if (st != GR_OK) return lgr_fail(L, st, 2, NULL);
    }
    gr_result res[GR_OP_COUNT];
    LGR_RETRY(L, st, gr_reduce_ops(ctx, b, &r->o, r->ops, r->nops, fused, res));
    if (st != GR_OK) return lgr_fail(L, st, 2, NULL);
    lua_createtable(L, 0, r->nops);
    for (int k = 0; k < r->nops; k++) {
        push_value(L, &res[k]);
        lua_setfield(L, -2, gr_op_name(r->ops[k]));
    }
    return 1;
}

/* opts.ops with segment, offsets or axis: each op reduced by a call of its own (one read each, for now),
 * its result buffer(s) under its name -- two-result ops as a table of their two buffers. */
static int reduce_ops_many(lua_State *L, gr_buffer *b, lgr_request *r) {
    lua_createtable(L, 0, r->nops);
    int table = lua_gettop(L);
    gr_op asked = r->o.op;
    for (int k = 0; k < r->nops; k++) {
        r->o.op = r->ops[k];
        int count = r->naxes ? lgr_reduce_axes(L, b, r) : reduce_segments(L, b, r);
        if (count > 1) {
            lua_createtable(L, count, 0);
            lua_insert(L, -count - 1);
            for (int i = count; i >= 1; i--) lua_rawseti(L, -(i + 1), i);     /* the top is result i */
        }
        lua_setfield(L, table, gr_op_name(r->ops[k]));
    }
    r->o.op = asked;
    return 1;
}

/* Whether r's whole-buffer result is the same whatever the elements' order but for rounding (opts.ops:
 * every op's). */
static int order_free(const lgr_request *r) {
    for (int k = 0; k < r->nops; k++)
        if (r->ops[k] == GR_ARGMIN || r->ops[k] == GR_ARGMAX) return 0;
    return lgr_request_order_free(r);
}

/* gr.reduce over a list of an operator's inputs: synchronously (linputs.c), or with opts.async a Pending
 * whose wait gives the value (the engine's pending holds the inputs' memory; the Pending keeps
 * opts.stream, user value 2). */
static int reduce_inputs(lua_State *L, lgr_request *r) {
    gr_buffer *bufs[GR_OPERATOR_INPUTS];
    int count = lgr_inputs_read(L, r, 0, bufs);
    if (!r->async) return lgr_reduce_inputs(L, r, bufs, count);
    lgr_pending *u = lgr_new_pending(L, 0);
    gr_status st;
    LGR_RETRY(L, st, gr_reduce_inputs_async(lgr_ctx(L), bufs, count, &r->o, &u->p));
    if (st != GR_OK) return lgr_fail(L, st, 2, "bufs", 1, NULL);
    if (r->o.stream) {
        lua_getfield(L, 2, "stream");
        lua_setiuservalue(L, -2, 2);
    }
    return 1;
}

static int reduce_with(lua_State *L, int op) {
    lgr_request r;
    int is_buffer = luaL_testudata(L, 1, BUFFER_MT) != NULL;
    lgr_request_read(L, 2, op, op < 0 ? LGR_READ_OPS : 0, &r);
    if (op < 0 && !r.nops) require_op(L, &r);
    /* an operator's inputs: a list of buffers, or any table given with an operator (but a streamed source) */
    if (!is_buffer && !lgr_is_sharded(L, 1) &&
        (lgr_is_buffer_list(L, 1) || (lua_type(L, 1) == LUA_TTABLE && r.user_op && !r.streamed)))
        return reduce_inputs(L, &r);
    if (is_buffer && r.user_op && gr_operator_inputs(r.user_op) > 1)
        luaL_argerror(L, 1, lua_pushfstring(L, "operator %s reads %d inputs: give a list of %d buffers {b1, b2, ...}",
                                            gr_operator_get_spec(r.user_op)->name, gr_operator_inputs(r.user_op),
                                            gr_operator_inputs(r.user_op)));
    if (r.nops && !is_buffer && lgr_is_sharded(L, 1))
        luaL_argerror(L, 2, "opts.ops: a sharded buffer is reduced one op per call for now");
    if (!is_buffer && lgr_is_sharded(L, 1)) return lgr_reduce_sharded(L, &r);
    if (!is_buffer && r.streamed && (lua_type(L, 1) == LUA_TTABLE || lua_type(L, 1) == LUA_TSTRING))
        return reduce_source(L, &r);
    if (r.naxes) {                                  /* along axes: the view as it is, strided or not */
        gr_buffer *v = lgr_check_buffer(L, 1);
        if (r.dtype >= 0)
            luaL_argerror(L, 2, "opts.dtype: only for a table or byte-string source (a buffer has its own dtype)");
        if (r.nops) return reduce_ops_many(L, v, &r);
        lgr_request_prepare(L, &r, LGR_FOR_RUN, &v, 1);
        return r.async ? push_axes_pending(L, v, &r) : lgr_reduce_axes(L, v, &r);
    }
    gr_buffer *b = lgr_check_reduced_buffer(L, 1, order_free(&r));
    if (r.dtype >= 0)
        luaL_argerror(L, 2, "opts.dtype: only for a table or byte-string source (a buffer has its own dtype)");
    if (r.nops) return r.segment || r.offsets ? reduce_ops_many(L, b, &r) : reduce_ops(L, b, &r);
    lgr_request_prepare(L, &r, LGR_FOR_RUN, &b, 1);   /* its kernels, or its operator's cpu functions */
    if (r.segment || r.offsets) return reduce_segments(L, b, &r);
    if (r.async) return push_pending(L, b, &r);
    gr_context *ctx = lgr_ctx(L);
    gr_result v;
    gr_status st;
    LGR_RETRY(L, st, r.streamed ? gr_reduce_streamed(ctx, b, &r.o, r.chunk, r.streams, &v)
                                : gr_reduce(ctx, b, &r.o, &v));
    if (st == GR_EINVAL && r.streamed && strcmp(gr_errarg(ctx), "streamed") == 0)
        return luaL_argerror(L, 2, lua_pushfstring(L, "opts.%s, or pass a table or a byte string with opts.dtype",
                                                   gr_errmsg(ctx)));
    if (st != GR_OK) return lgr_fail(L, st, 2, NULL);
    return lgr_push_result(L, &v);
}

int lgr_reduce(lua_State *L) { return reduce_with(L, -1); }

/* bufs[where[j]] for j < m reduced with r's options (the cpu functions, or one dtype's kernels), the
 * values stored at those places of the results table. */
static void reduce_group(lua_State *L, lgr_request *r, gr_buffer **group, const size_t *where, size_t m,
                         gr_result *res, int results) {
    gr_context *ctx = lgr_ctx(L);
    gr_status st;
    LGR_RETRY(L, st, gr_reduce_many(ctx, group, m, &r->o, res));
    if (st != GR_OK) lgr_fail(L, st, 2, "bufs", 1, NULL);
    for (size_t j = 0; j < m; j++) {
        lgr_push_scalar(L, res[j].value[0]);
        lua_rawseti(L, results, (lua_Integer)where[j] + 1);
    }
}

/* gr.reduce_many with opts.op an operator: on the GPU the device buffers of each dtype in one launch of
 * the operator's kernels for that dtype (r->images); host data, and everything on the cpu backend,
 * through its cpu functions. Pushes the table of results. */
static int reduce_many_operator(lua_State *L, lgr_request *r, gr_buffer **bufs, size_t count) {
    lua_createtable(L, count < INT32_MAX ? (int)count : 0, 0);
    int results = lua_gettop(L);
    int gpu = gr_context_backend(lgr_ctx(L)) == GR_BACKEND_CUDA;
    size_t n = count ? count : 1;
    gr_buffer **group = lua_newuserdatauv(L, n * sizeof *group, 0);
    size_t *where = lua_newuserdatauv(L, n * sizeof *where, 0);
    gr_result *res = lua_newuserdatauv(L, n * sizeof *res, 0);
    for (int t = 0; t < GR_DTYPE_COUNT && gpu; t++) {
        size_t m = 0;
        for (size_t i = 0; i < count; i++)
            if (gr_buffer_dtype(bufs[i]) == (gr_dtype)t && gr_buffer_where(bufs[i]) == GR_DEVICE) {
                where[m] = i;
                group[m++] = bufs[i];
            }
        r->o.user = r->images[t];
        if (m) reduce_group(L, r, group, where, m, res, results);
    }
    size_t m = 0;
    for (size_t i = 0; i < count; i++)
        if (!gpu || gr_buffer_where(bufs[i]) != GR_DEVICE) {
            where[m] = i;
            group[m++] = bufs[i];
        }
    r->o.user = NULL;                           /* the engine runs the cpu functions over them all */
    r->o.fold = NULL;
    if (m || !gpu) reduce_group(L, r, group, where, m, res, results);
    lua_settop(L, results);
    return 1;
}

/* gr.reduce_many({b1, b2, ...}, opts): a table of results, one per buffer (a table {value, index} or
 * {min, max} for the ops with two). */
int lgr_reduce_many(lua_State *L) {
    luaL_checktype(L, 1, LUA_TTABLE);
    lgr_request r;
    lgr_request_read(L, 2, -1, 0, &r);
    if (r.o.variant >= 0 && gr_variant_get(r.o.variant)->user)
        return luaL_argerror(L, 2, lua_pushfstring(L, "opts.variant: user kernel '%s' reduces one buffer per call "
                                                      "(its kernels are compiled for one dtype: call gr.reduce on "
                                                      "each)", gr_variant_get(r.o.variant)->name));
    if (r.async || r.streamed || r.segment || r.offsets || r.dtype >= 0 || r.o.stream)
        return luaL_argerror(L, 2, "opts: reduce_many takes the op and its options (op, acc, ddof, variant, block, "
                                   "finish, threshold), not async, streamed, segment, offsets, out, dtype or stream");
    lua_Integer len = lgr_list_len(L, 1, "");
    if (len < 0 || (lua_Unsigned)len > SIZE_MAX / sizeof(gr_result))
        return luaL_argerror(L, 1, lua_pushfstring(L, "a list of %I buffers", len));
    size_t count = (size_t)len;
    gr_buffer **bufs = lua_newuserdatauv(L, (count ? count : 1) * sizeof *bufs, 0);
    gr_result *res = lua_newuserdatauv(L, (count ? count : 1) * sizeof *res, 0);
    for (size_t i = 0; i < count; i++) {
        lua_geti(L, 1, (lua_Integer)i + 1);
        lbuffer *u = luaL_testudata(L, -1, BUFFER_MT);
        if (!u || !u->b)
            return luaL_argerror(L, 1, lua_pushfstring(L, "element %I: expected a gpureduce.Buffer, got %s",
                                                       (lua_Integer)i + 1, u ? "a freed buffer" : luaL_typename(L, -1)));
        bufs[i] = u->b;
        lua_pop(L, 1);
    }
    require_op(L, &r);
    lgr_request_prepare(L, &r, LGR_FOR_MANY, bufs, count);
    if (r.user_op) return reduce_many_operator(L, &r, bufs, count);
    gr_context *ctx = lgr_ctx(L);
    gr_status st;
    LGR_RETRY(L, st, gr_reduce_many(ctx, bufs, count, &r.o, res));
    if (st != GR_OK) return lgr_fail(L, st, 2, "bufs", 1, NULL);
    lua_createtable(L, count < INT32_MAX ? (int)count : 0, 0);
    for (size_t i = 0; i < count; i++) {
        push_value(L, &res[i]);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    return 1;
}

/* gr.sum, gr.argmin, ... : one closure per op of the engine's list, the op's id as upvalue 2. */
int lgr_reduce_op(lua_State *L) { return reduce_with(L, (int)lua_tointeger(L, lua_upvalueindex(2))); }

/* ---- pendings ------------------------------------------------------------------------------------ */

/* The Pending on the top of the stack keeps the buffer (argument 1) and opts.stream alive while in
 * flight (user values 1 and 2). */
static void hold_while_in_flight(lua_State *L, const lgr_request *r) {
    lua_pushvalue(L, 1);
    lua_setiuservalue(L, -2, 1);
    if (r->o.stream) {
        lua_getfield(L, 2, "stream");
        lua_setiuservalue(L, -2, 2);
    }
}

lgr_pending *lgr_new_pending(lua_State *L, int nout) {
    lgr_pending *u = lua_newuserdatauv(L, sizeof *u, 2 + nout);
    u->p = NULL;
    u->nout = nout;
    luaL_setmetatable(L, PENDING_MT);
    return u;
}

static int push_pending(lua_State *L, gr_buffer *b, const lgr_request *r) {
    gr_context *ctx = lgr_ctx(L);
    lgr_pending *u = lgr_new_pending(L, 0);
    gr_status st;
    LGR_RETRY(L, st, gr_reduce_async(ctx, b, &r->o, &u->p));
    if (st != GR_OK) return lgr_fail(L, st, 2, NULL);
    hold_while_in_flight(L, r);
    return 1;
}

/* Along axes: the result buffers made (or opts.out's) first, then the work queued; wait returns them. */
static int push_axes_pending(lua_State *L, gr_buffer *b, const lgr_request *r) {
    unsigned mask;
    gr_buffer *out[2] = {NULL, NULL};
    int count = lgr_axes_outs(L, b, r, &mask, out);
    int first = lua_gettop(L) - count + 1;
    lgr_pending *u = lgr_new_pending(L, count);
    gr_status st;
    LGR_RETRY(L, st, gr_reduce_axes_async(lgr_ctx(L), b, &r->o, mask, out, &u->p));
    if (st != GR_OK) return lgr_fail(L, st, 2, NULL);
    hold_while_in_flight(L, r);
    for (int i = 0; i < count; i++) {           /* the results too, which wait returns */
        lua_pushvalue(L, first + i);
        lua_setiuservalue(L, -2, 3 + i);
    }
    return 1;
}

static gr_pending *check_pending(lua_State *L, int arg) {
    lgr_pending *u = luaL_checkudata(L, arg, PENDING_MT);
    if (!u->p) luaL_argerror(L, arg, "pending has been released");
    return u->p;
}

static int p_ready(lua_State *L) {
    gr_pending *p = check_pending(L, 1);
    lua_pushboolean(L, gr_pending_ready(lgr_ctx(L), p));
    return 1;
}

static int p_wait(lua_State *L) {
    gr_pending *p = check_pending(L, 1);
    gr_result v;
    gr_status st = gr_pending_wait(lgr_ctx(L), p, &v);
    if (st != GR_OK) return lgr_fail(L, st, 0, NULL);
    int nout = ((lgr_pending *)lua_touserdata(L, 1))->nout;
    for (int i = 0; i < nout; i++) lua_getiuservalue(L, 1, 3 + i);
    return nout ? nout : lgr_push_result(L, &v);
}

static int p_release(lua_State *L) {
    lgr_pending *u = luaL_checkudata(L, 1, PENDING_MT);
    gr_context *ctx = lgr_ctx_or_null(L);
    if (u->p && ctx) gr_pending_free(ctx, u->p);
    u->p = NULL;
    return 0;
}

static int p_tostring(lua_State *L) {
    lgr_pending *u = luaL_checkudata(L, 1, PENDING_MT);
    gr_context *ctx = lgr_ctx_or_null(L);
    lua_pushstring(L, !u->p || !ctx ? "gpureduce.Pending(released)"
                            : gr_pending_ready(ctx, u->p) ? "gpureduce.Pending(ready)"
                                                          : "gpureduce.Pending(running)");
    return 1;
}

const luaL_Reg lgr_pending_methods[] = {{"free", p_release}, {"ready", p_ready}, {"wait", p_wait}, {NULL, NULL}};
const luaL_Reg lgr_pending_meta[] = {
    {"__close", p_release}, {"__gc", p_release}, {"__tostring", p_tostring}, {NULL, NULL}};
