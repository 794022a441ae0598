/*
 * lsharded.c -- reductions of sharded buffers (gr.sharded).
 *
 * A sharded buffer is a Lua table (gpureduce/init.lua makes it and writes its methods: they only loop
 * over the shards, each a plain Buffer on its device). What must be C is the reduction: the shards are
 * handed to the engine together (gr_reduce_shards, gr_reduce_shards_segments, gr_dot_shards), which runs
 * them on every device at once and combines them in shard order (a gr.operator's kernels or cpu functions
 * too, as lgr_request_prepare makes them ready).
 */
#include "lsharded.h"
#include "lbuffer.h"

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
    if (r->nops && r->has_out)
        return luaL_argerror(L, 2, "opts.out: a whole reduction's results are numbers (out is for segments)");
    size_t count;
    gr_buffer **shards = shards_at(L, 1, &count);
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
    if (r->async || r->segment || r->offsets || r->naxes || r->has_out)
        return luaL_argerror(L, 3, "opts: gr.dot of sharded buffers is one synchronous number (not async, segment, "
                                   "offsets, axis or out)");
    size_t count, other;
    gr_buffer **a = shards_at(L, 1, &count);
    gr_buffer **b = shards_at(L, 2, &other);
    if (other != count)
        return luaL_argerror(L, 2, lua_pushfstring(L, "b has %I shards, a %I (gr.dot of sharded buffers takes two "
                                                      "of the same split)", (lua_Integer)other, (lua_Integer)count));
    gr_result v;
    gr_status st;
    LGR_RETRY(L, st, gr_dot_shards(lgr_ctx(L), a, b, count, &r->o, &v));
    if (st != GR_OK) return lgr_fail(L, st, 3, "a", 1, "b", 2, "shards", 1, NULL);
    return lgr_push_result(L, &v);
}
