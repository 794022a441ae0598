/*
 * lstream.c -- the Stream userdata: gr.stream(), s:sync(), s:free(). A reduction takes one as
 * opts.stream (lrequest.c reads it); a Pending keeps the one it runs on alive (lreduce.c).
 */
#include "lstream.h"

static gr_stream *check_stream(lua_State *L, int arg) {
    lstream *u = luaL_checkudata(L, arg, STREAM_MT);
    if (!u->s) luaL_argerror(L, arg, "stream has been freed");
    return u->s;
}

int lgr_stream(lua_State *L) {
    gr_context *ctx = lgr_ctx(L);
    lstream *u = lua_newuserdatauv(L, sizeof *u, 0);
    u->s = NULL;
    luaL_setmetatable(L, STREAM_MT);
    gr_status st = gr_stream_new(ctx, &u->s);
    if (st != GR_OK) return lgr_fail(L, st, 0, NULL);
    return 1;
}

static int s_release(lua_State *L) {
    lstream *u = luaL_checkudata(L, 1, STREAM_MT);
    gr_context *ctx = lgr_ctx_or_null(L);
    if (u->s && ctx) gr_stream_free(ctx, u->s);
    u->s = NULL;
    return 0;
}

static int s_sync(lua_State *L) {
    gr_stream *s = check_stream(L, 1);
    gr_status st = gr_stream_sync(lgr_ctx(L), s);
    if (st != GR_OK) return lgr_fail(L, st, 0, NULL);
    return 0;
}

static int s_tostring(lua_State *L) {
    lstream *u = luaL_checkudata(L, 1, STREAM_MT);
    lua_pushstring(L, u->s ? "gpureduce.Stream" : "gpureduce.Stream(freed)");
    return 1;
}

const luaL_Reg lgr_stream_methods[] = {{"free", s_release}, {"sync", s_sync}, {NULL, NULL}};
const luaL_Reg lgr_stream_meta[] = {
    {"__close", s_release}, {"__gc", s_release}, {"__tostring", s_tostring}, {NULL, NULL}};
