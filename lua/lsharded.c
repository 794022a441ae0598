/*
 * lsharded.c -- reductions of sharded buffers (gr.sharded).
 *
 * A sharded buffer is a Lua table (gpureduce/init.lua makes it and writes its methods: they only loop
 * over the shards, each a plain Buffer on its device). What must be C is the reduction: the shards are
 * handed to the engine together (gr_reduce_shards, gr_reduce_shards_segments), which runs them on every
 * device at once and combines them in shard order (a gr.operator's kernels or cpu functions too, as
 * lgr_request_prepare makes them ready).
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
    lua_pushliteral(L, "parts");
    if (lua_rawget(L, 1) != LUA_TTABLE) return luaL_argerror(L, 1, "sharded buffer has been freed");
    size_t count = (size_t)lua_rawlen(L, -1);
    gr_buffer **shards = lua_newuserdatauv(L, (count ? count : 1) * sizeof *shards, 0);
    for (size_t i = 0; i < count; i++) {
        lua_rawgeti(L, -2, (lua_Integer)i + 1);
        lbuffer *u = luaL_testudata(L, -1, BUFFER_MT);
        if (!u || !u->b)
            return luaL_argerror(L, 1, lua_pushfstring(L, "shard %I is %s", (lua_Integer)i + 1,
                                                       u ? "a freed buffer" : luaL_typename(L, -1)));
        shards[i] = u->b;
        lua_pop(L, 1);
    }
    if (count == 0) return luaL_argerror(L, 1, "sharded buffer has no shard");
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
