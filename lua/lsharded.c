/*
 * lsharded.c -- reductions of sharded buffers (gr.sharded).
 *
 * A sharded buffer is a Lua table (gpureduce/init.lua makes it and writes its methods: they only loop
 * over the shards, each a plain Buffer on its device). What must be C is the reduction: the shards are
 * handed to the engine together (gr_reduce_shards, gr_reduce_shards_segments, gr_dot_shards), which runs
 * them on every device at once and combines them in shard order (a gr.operator's kernels or cpu functions
 * too, as lgr_request_prepare makes them ready). Along axes (gr_reduce_shards_axes, gr_dot_shards_axes) the
 * shards are views split along their first axis, and the results -- of the logical array's result shape,
 * opts.out's or new ones -- lie on the first shard's device.
 */
#include "lsharded.h"
#include "lbuffer.h"

#include <stdio.h>
#include <string.h>

int lgr_is_sharded(lua_State *L, int idx) {
    if (lua_type(L, idx) != LUA_TTABLE || !lua_getmetatable(L, idx)) return 0;
    luaL_getmetatable(L, SHARDED_MT);
    int same = lua_rawequal(L, -1, -2);
    lua_pop(L, 2);
    return same;
}

/* The shards of the sharded buffer at idx, in a userdata array pushed on the stack; raises naming argument
 * idx where it has been freed, has no shard or holds something else. */
static gr_buffer **shards_at(lua_State *L, int idx, size_t *count) {
    lua_pushliteral(L, "parts");
    if (lua_rawget(L, idx) != LUA_TTABLE) luaL_argerror(L, idx, "sharded buffer has been freed");
    size_t k = (size_t)lua_rawlen(L, -1);
    gr_buffer **shards = lua_newuserdatauv(L, (k ? k : 1) * sizeof *shards, 0);
    for (size_t i = 0; i < k; i++) {
        lua_rawgeti(L, -2, (lua_Integer)i + 1);
        lbuffer *u = luaL_testudata(L, -1, BUFFER_MT);
        if (!u || !u->b)
            luaL_argerror(L, idx, lua_pushfstring(L, "shard %I is %s", (lua_Integer)i + 1,
                                                  u ? "a freed buffer" : luaL_typename(L, -1)));
        shards[i] = u->b;
        lua_pop(L, 1);
    }
    if (k == 0) luaL_argerror(L, idx, "sharded buffer has no shard");
    lua_remove(L, -2);                              /* the parts table: the array stays */
    *count = k;
    return shards;
}

/* opts.ops over a whole sharded buffer: a table keyed by op name, each value what gr.reduce gives for that
 * op alone; the ops that fuse in one read of every shard. */
static int reduce_sharded_ops(lua_State *L, lgr_request *r, gr_buffer **shards, size_t count) {
    const gr_image *fused = lgr_request_fused(L, r, gr_buffer_dtype(shards[0]), gr_buffer_where(shards[0]));
    gr_result res[GR_OP_COUNT];
    gr_status st;
    LGR_RETRY(L, st, gr_reduce_shards_ops(lgr_ctx(L), shards, count, &r->o, r->ops, r->nops, fused, res));
    if (st != GR_OK) return lgr_fail(L, st, 2, "shards", 1, NULL);
    lua_createtable(L, 0, r->nops);
    for (int k = 0; k < r->nops; k++) {
        lgr_push_value(L, &res[k]);
        lua_setfield(L, -2, gr_op_name(r->ops[k]));
    }
    return 1;
}

/* ---- along axes ------------------------------------------------------------------------------------ */

/* What an axis call works with: the logical shape (shard 1's past the rows, every shard's rows), the axes
 * as a mask of 0-based bits, and the result shape. */
typedef struct along {
    int nd, rnd;
    size_t shape[GR_MAX_DIMS], result[GR_MAX_DIMS], k;
    unsigned mask;
} along;

static const char *dims_text(lua_State *L, int nd, const size_t *dims) {
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    for (int d = 0; d < nd; d++) {
        char len[32];
        snprintf(len, sizeof len, "%s%zu", d ? ", " : "{", dims[d]);
        luaL_addstring(&b, len);
    }
    luaL_addchar(&b, '}');
    luaL_pushresult(&b);
    return lua_tostring(L, -1);
}

/* Reads r's axes against the shards' logical shape; a bad axis raises as for one buffer. */
static void along_read(lua_State *L, const lgr_request *r, gr_buffer **shards, size_t count, along *a) {
    a->nd = gr_buffer_ndim(shards[0]);
    gr_buffer_layout(shards[0], a->shape, NULL);
    a->shape[0] = 0;
    for (size_t i = 0; i < count; i++) {
        size_t dims[GR_MAX_DIMS];
        gr_buffer_layout(shards[i], dims, NULL);
        a->shape[0] += dims[0];
    }
    a->mask = 0;
    for (int i = 0; i < r->naxes; i++) {
        lua_Integer given = r->axes[i], d = given < 0 ? a->nd + given : given - 1;
        if (given == 0 || d < 0 || d >= a->nd)
            luaL_argerror(L, r->arg, lua_pushfstring(L, "opts.axis: %I is not an axis of this %d-axis buffer (accepted: "
                                                     "1 to %d, or -%d to -1 from the end)", given, a->nd, a->nd, a->nd));
        if (a->mask & 1u << d)
            luaL_argerror(L, r->arg, lua_pushfstring(L, "opts.axis: axis %d is named twice (each axis once)", (int)d + 1));
        a->mask |= 1u << d;
    }
    a->rnd = 0;
    a->k = 1;
    for (int d = 0; d < a->nd; d++) {
        int gone = a->mask >> d & 1;
        if (gone && !r->keepdims) continue;
        a->result[a->rnd] = gone ? 1 : a->shape[d];
        a->k *= a->result[a->rnd++];
    }
    if (a->rnd == 0) a->result[a->rnd++] = 1;
}

/* The result buffers of r's op (its entry of opts.out with opts.ops) pushed: opts.out's, checked against the
 * result shape, or new ones of it on the first shard's device. Returns how many. */
static int along_outs(lua_State *L, const lgr_request *r, gr_buffer **shards, const along *a, gr_buffer *out[2]) {
    gr_context *ctx = lgr_ctx(L);
    gr_dtype dt[2];
    int count;
    gr_status st = gr_segment_result_dtypes(ctx, &r->o, gr_buffer_dtype(shards[0]), dt, &count);
    if (st != GR_OK) return lgr_fail(L, st, r->arg, NULL);
    out[0] = out[1] = NULL;
    if (r->has_out) {
        lgr_request_given_outs(L, r, count, out);
        for (int i = 0; i < count; i++) {
            size_t dims[GR_MAX_DIMS];
            int nd = gr_buffer_ndim(out[i]), same = nd == a->rnd;
            gr_buffer_layout(out[i], dims, NULL);
            for (int d = 0; same && d < nd; d++) same = dims[d] == a->result[d];
            if (same) continue;
            char name[LGR_OUT_NAME];
            lgr_request_out_name(r, count > 1 ? i + 1 : 0, name);
            const char *want = dims_text(L, a->rnd, a->result), *got = dims_text(L, nd, dims);
            luaL_argerror(L, r->arg, lua_pushfstring(L, "%s: must have the result's shape %s (got %s)", name, want, got));
        }
        return count;
    }
    for (int i = 0; i < count; i++) {
        lbuffer *u = lgr_new_buffer_ud(L);
        gr_buffer *flat = NULL;
        LGR_RETRY(L, st, gr_buffer_new_unset_on(ctx, a->k, dt[i], gr_buffer_where(shards[0]),
                                                gr_buffer_device(shards[0]), &flat));
        if (st == GR_OK) st = gr_buffer_view(ctx, flat, a->rnd, a->result, &u->b);
        gr_buffer_free(ctx, flat);
        if (st != GR_OK) return lgr_fail(L, st, r->arg, NULL);
        lgr_track(L, a->k * gr_dtype_size(dt[i]));
        out[i] = u->b;
    }
    return count;
}

/* One op along the axes (its kernels or cpu functions made ready here): its results pushed. */
static int along_one(lua_State *L, lgr_request *r, gr_buffer **shards, size_t count, const along *a) {
    /* every axis is the whole reduction of the shards, whose operator kernels are a whole buffer's */
    size_t n = 1;
    for (int d = 0; d < a->nd; d++) n *= a->shape[d];
    int whole = a->mask == (1u << a->nd) - 1 && n > 0, naxes = r->naxes;
    if (whole) r->naxes = 0;
    lgr_request_prepare(L, r, LGR_FOR_SHARDS, shards, count);
    r->naxes = naxes;
    gr_buffer *out[2];
    int results = along_outs(L, r, shards, a, out);
    gr_status st;
    LGR_RETRY(L, st, gr_reduce_shards_axes(lgr_ctx(L), shards, count, &r->o, a->mask, out));
    if (st != GR_OK) return lgr_fail(L, st, 2, "shards", 1, NULL);
    return results;
}

/* A failure over op's entry of opts.out (r->out_at) said as that entry, opts.out.<op> -- as one buffer's
 * opts.ops says it -- where the engine blames "out" or "out2". */
static int fail_along(lua_State *L, const lgr_request *r, gr_status st, int count) {
    const char *arg = gr_errarg(lgr_ctx(L));
    int which = strcmp(arg, "out") == 0 ? (count > 1 ? 1 : 0) : strcmp(arg, "out2") == 0 ? 2 : -1;
    if (st != GR_EINVAL || which < 0 || !r->out_at) return lgr_fail(L, st, 2, "shards", 1, NULL);
    const char *msg = gr_errmsg(lgr_ctx(L)), *colon = strchr(msg, ':');
    if (colon && (size_t)(colon - msg) == strlen(arg)) msg = colon + 1 + (colon[1] == ' ');
    char name[LGR_OUT_NAME];
    lgr_request_out_name(r, which, name);
    return luaL_argerror(L, r->arg, lua_pushfstring(L, "%s: %s", name, msg));
}

/* opts.ops along axes: a table keyed by op name, each entry what that op's own call gives (a table of two
 * buffers for argmin, argmax and minmax), into its entry of opts.out where it has one. Every op's results
 * are made and checked before the first is reduced, so that a bad entry fails before anything is written. */
static int along_ops(lua_State *L, lgr_request *r, gr_buffer **shards, size_t count, const along *a) {
    int outs = 0;
    if (r->has_out) {
        lua_getfield(L, r->arg, "out");
        outs = lua_gettop(L);
    }
    gr_buffer *given[GR_OP_COUNT][2];
    int results[GR_OP_COUNT], first[GR_OP_COUNT];
    for (int k = 0; k < r->nops; k++) {
        r->o.op = r->ops[k];
        if (outs) lua_getfield(L, outs, gr_op_name(r->ops[k]));
        else lua_pushnil(L);
        r->has_out = !lua_isnil(L, -1);
        r->out_at = r->has_out ? lua_gettop(L) : 0;
        first[k] = lua_gettop(L) + 1;
        results[k] = along_outs(L, r, shards, a, given[k]);
        gr_status st = gr_shards_axes_outs_ready(lgr_ctx(L), shards, count, &r->o, a->mask, given[k]);
        if (st != GR_OK) return fail_along(L, r, st, results[k]);
    }
    lua_createtable(L, 0, r->nops);
    int table = lua_gettop(L);
    for (int k = 0; k < r->nops; k++) {
        r->o.op = r->ops[k];
        gr_status st;
        LGR_RETRY(L, st, gr_reduce_shards_axes(lgr_ctx(L), shards, count, &r->o, a->mask, given[k]));
        if (st != GR_OK) return lgr_fail(L, st, 2, "shards", 1, NULL);
        if (results[k] > 1) {
            lua_createtable(L, results[k], 0);
            for (int i = 0; i < results[k]; i++) {
                lua_pushvalue(L, first[k] + i);
                lua_rawseti(L, -2, i + 1);
            }
        } else {
            lua_pushvalue(L, first[k]);
        }
        lua_setfield(L, table, gr_op_name(r->ops[k]));
    }
    r->has_out = outs != 0;
    r->out_at = 0;
    return 1;
}

int lgr_reduce_sharded(lua_State *L, lgr_request *r) {
    if (r->async)
        return luaL_argerror(L, 2, "opts.async: a sharded buffer is reduced synchronously (every shard at once, on "
                                   "its device)");
    if (r->streamed)
        return luaL_argerror(L, 2, "opts.streamed: a sharded buffer is on its devices already (streamed takes host "
                                   "data)");
    if (r->o.stream)
        return luaL_argerror(L, 2, "opts.stream: a sharded reduction runs on the stream of each shard's device: it "
                                   "takes no stream");
    if (r->dtype >= 0)
        return luaL_argerror(L, 2, "opts.dtype: only for a table or byte-string source (a sharded buffer has its own "
                                   "dtype)");
    if (r->nops && (r->segment || r->offsets))
        return luaL_argerror(L, 2, "opts.ops: a sharded buffer's segments are reduced one op per call (opts.op)");
    if (r->nops && r->has_out && !r->naxes)
        return luaL_argerror(L, 2, "opts.out: a whole reduction's results are numbers (out is for segments and axes)");
    size_t count;
    gr_buffer **shards = shards_at(L, 1, &count);
    if (r->naxes) {
        along a;
        along_read(L, r, shards, count, &a);
        return r->nops ? along_ops(L, r, shards, count, &a) : along_one(L, r, shards, count, &a);
    }
    if (r->nops) return reduce_sharded_ops(L, r, shards, count);
    lgr_request_prepare(L, r, LGR_FOR_SHARDS, shards, count);      /* an operator's kernels, or its cpu functions */
    gr_context *ctx = lgr_ctx(L);
    gr_status st;
    if (r->segment || r->offsets) {
        size_t n = 0;
        for (size_t i = 0; i < count; i++) n += gr_buffer_size(shards[i]);
        gr_buffer *out[2];
        int results = lgr_request_outs_like(L, gr_buffer_dtype(shards[0]), n, gr_buffer_where(shards[0]),
                                            gr_buffer_device(shards[0]), r, out);
        gr_segments seg = {r->segment, r->offsets};
        LGR_RETRY(L, st, gr_reduce_shards_segments(ctx, shards, count, &r->o, &seg, out));
        if (st != GR_OK) return lgr_fail(L, st, 2, "shards", 1, NULL);
        return results;
    }
    gr_result v;
    LGR_RETRY(L, st, gr_reduce_shards(ctx, shards, count, &r->o, &v));
    if (st != GR_OK) return lgr_fail(L, st, 2, "shards", 1, NULL);
    return lgr_push_result(L, &v);
}

int lgr_dot_sharded(lua_State *L, lgr_request *r) {
    if (!lgr_is_sharded(L, 1) || !lgr_is_sharded(L, 2))
        return luaL_argerror(L, lgr_is_sharded(L, 1) ? 2 : 1, "gr.dot of a sharded buffer takes two sharded buffers "
                                                              "of the same split");
    if (r->async || r->segment || r->offsets || (r->has_out && !r->naxes))
        return luaL_argerror(L, 3, "opts: gr.dot of sharded buffers is one synchronous number, or with opts.axis a "
                                   "buffer of them (not async, segment, offsets, or out without axis)");
    size_t count, other;
    gr_buffer **a = shards_at(L, 1, &count);
    gr_buffer **b = shards_at(L, 2, &other);
    if (other != count)
        return luaL_argerror(L, 2, lua_pushfstring(L, "b has %I shards, a %I (gr.dot of sharded buffers takes two "
                                                      "of the same split)", (lua_Integer)other, (lua_Integer)count));
    gr_status st;
    if (r->naxes) {
        along ax;
        along_read(L, r, a, count, &ax);
        gr_buffer *out[2];
        int results = along_outs(L, r, a, &ax, out);
        LGR_RETRY(L, st, gr_dot_shards_axes(lgr_ctx(L), a, b, count, &r->o, ax.mask, out));
        if (st != GR_OK) return lgr_fail(L, st, 3, "a", 1, "b", 2, "shards", 1, NULL);
        return results;
    }
    gr_result v;
    LGR_RETRY(L, st, gr_dot_shards(lgr_ctx(L), a, b, count, &r->o, &v));
    if (st != GR_OK) return lgr_fail(L, st, 3, "a", 1, "b", 2, "shards", 1, NULL);
    return lgr_push_result(L, &v);
}
