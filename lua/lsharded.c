/*
 * lsharded.c -- reductions of sharded buffers (gr.sharded).
 *
 * A sharded buffer is a Lua table (gpureduce/init.lua makes it and writes its methods: they only loop
 * over the shards, each a plain Buffer on its device). What must be C is the reduction: the shards are
 * handed to the engine together (gr_reduce_shards), which runs them on every device at once and
 * combines them in shard order.
 */
#include "binding.h"

int lgr_is_sharded(lua_State *L, int idx) {
    if (lua_type(L, idx) != LUA_TTABLE || !lua_getmetatable(L, idx)) return 0;
    luaL_getmetatable(L, SHARDED_MT);
    int same = lua_rawequal(L, -1, -2);
    lua_pop(L, 2);
    return same;
}

int lgr_reduce_sharded(lua_State *L, const lgr_reduce_opts *r) {
    if (r->async || r->streamed || r->segment || r->offsets || r->has_out || r->dtype >= 0)
        return luaL_argerror(L, 2, "opts: a sharded buffer is reduced whole and synchronously (async, streamed, "
                                   "segment, offsets, out and dtype are not taken yet)");
    if (r->user_op)
        return luaL_argerror(L, 2, "opts.op: a gr.operator reduces plain buffers only, not sharded ones (yet)");
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
    gr_context *ctx = lgr_ctx(L);
    gr_result v;
    gr_status st = gr_reduce_shards(ctx, shards, count, &r->o, &v);
    if (lgr_retry_after_gc(L, st)) st = gr_reduce_shards(ctx, shards, count, &r->o, &v);
    if (st != GR_OK) return lgr_fail(L, st, 2, "shards", 1, NULL);
    return lgr_push_result(L, &v);
}
