/*
 * lcore.c -- what every file of the binding stands on: the module's context (made once per Lua state),
 * failures raised as Lua errors, the out-of-memory retry, and Lua values <-> engine values. It calls no
 * other file of the binding.
 *
 * Lifetime rules: a userdata is created with a NULL handle and its metatable before anything
 * is allocated, so a failed allocation leaves a harmless object; one idempotent release function serves
 * __gc, __close and :free(); methods reach the handle through one accessor that rejects a freed object.
 */
#include "lcore.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define CONTEXT_MT "gpureduce.Context"

/* The module's context, and the cache of the operators compiled in it (made on first use). */
typedef struct { gr_context *ctx; gr_operator_cache *ops; } lcontext;

/* ---- the context --------------------------------------------------------------------------------- */

gr_context *lgr_ctx_or_null(lua_State *L) {
    return ((lcontext *)lua_touserdata(L, lua_upvalueindex(1)))->ctx;
}

gr_operator_cache *lgr_operator_cache(lua_State *L) {
    lcontext *u = lua_touserdata(L, lua_upvalueindex(1));
    if (!u->ops && gr_operator_cache_create(lgr_ctx(L), &u->ops) != GR_OK)
        luaL_error(L, "gpureduce: %s", gr_errmsg(u->ctx));
    return u->ops;
}

gr_context *lgr_ctx(lua_State *L) {
    gr_context *ctx = lgr_ctx_or_null(L);
    if (!ctx)
        luaL_error(L, "gpureduce: the module's context is closed (the Lua state is closing): "
                      "gpureduce cannot be used from a finalizer that runs after its own");
    return ctx;
}

/* Closing the state finalizes the context after every buffer, stream and pending made after it (Lua
 * runs finalizers in the reverse order of their marking), but objects marked before it -- a finalizer
 * set up before `require "gpureduce"` -- run later still: every entry point checks the context. */
static int ctx_gc(lua_State *L) {
    lcontext *u = luaL_checkudata(L, 1, CONTEXT_MT);
    gr_operator_cache_destroy(u->ops);     /* unloads the operators' modules while the device is there */
    u->ops = NULL;
    gr_context_destroy(u->ctx);
    u->ctx = NULL;
    return 0;
}

/* One context per Lua state, kept in the registry: a second load of the module (busted reloads modules
 * for every spec file) shares it, so objects made under either load stay valid. */
#define CONTEXT_KEY "gpureduce.context"

void lgr_push_context(lua_State *L) {
    if (lua_getfield(L, LUA_REGISTRYINDEX, CONTEXT_KEY) == LUA_TUSERDATA) return;
    lua_pop(L, 1);
    lcontext *u = lua_newuserdatauv(L, sizeof *u, 0);
    u->ctx = NULL;
    u->ops = NULL;
    luaL_newmetatable(L, CONTEXT_MT);
    lua_pushcfunction(L, ctx_gc);
    lua_setfield(L, -2, "__gc");
    lua_setmetatable(L, -2);
    gr_status st = gr_context_create(&u->ctx);
    if (st == GR_ENOMEM) luaL_error(L, "gpureduce: cannot create a context: out of host memory");
    if (st != GR_OK) luaL_error(L, "gpureduce: %s", gr_errmsg(u->ctx));   /* the collector destroys it */
    lua_pushvalue(L, -1);
    lua_setfield(L, LUA_REGISTRYINDEX, CONTEXT_KEY);
}

/* ---- failures ------------------------------------------------------------------------------------ */

int lgr_fail(lua_State *L, gr_status st, int opts_arg, ...) {
    gr_context *ctx = lgr_ctx(L);
    const char *msg = gr_errmsg(ctx), *name = gr_errarg(ctx);
    int arg = 0;
    if (*name) {
        va_list ap;
        va_start(ap, opts_arg);
        for (const char *k; !arg && (k = va_arg(ap, const char *)) != NULL;) {
            int pos = va_arg(ap, int);
            if (strcmp(k, name) == 0) arg = pos;
        }
        va_end(ap);
        if (!arg && opts_arg) {     /* an option: say it the way the script wrote it */
            msg = lua_pushfstring(L, "opts.%s", msg);
            arg = opts_arg;
        }
    }
    if (st == GR_EINVAL && arg > 0) return luaL_argerror(L, arg, msg);
    return luaL_error(L, "gpureduce: %s", msg);
}

int lgr_retry_after_gc(lua_State *L, gr_status st) {
    if (st != GR_ENOMEM) return 0;
    lua_gc(L, LUA_GCCOLLECT, 0);
    return 1;
}

void lgr_track(lua_State *L, size_t bytes) {
    size_t kb = bytes >> 10;
    if (kb > 0) lua_gc(L, LUA_GCSTEP, (int)(kb < (size_t)1 << 30 ? kb : (size_t)1 << 30));
}

/* ---- values -------------------------------------------------------------------------------------- */

gr_scalar lgr_check_number(lua_State *L, int arg, const char *what) {
    gr_scalar s = {0};
    if (lua_isinteger(L, arg)) {
        s.kind = GR_SCALAR_INT;
        s.v.i = lua_tointeger(L, arg);
    } else if (lua_type(L, arg) == LUA_TNUMBER) {
        s.kind = GR_SCALAR_FLOAT;
        s.v.f = lua_tonumber(L, arg);
    } else {
        luaL_argerror(L, arg, lua_pushfstring(L, "%s: expected a number, got %s", what, luaL_typename(L, arg)));
    }
    return s;
}

gr_scalar lgr_check_value(lua_State *L, int arg, const char *what, gr_dtype t) {
    if (t != GR_BOOL) return lgr_check_number(L, arg, what);
    if (lua_isboolean(L, arg)) return (gr_scalar){GR_SCALAR_BOOL, {.b = lua_toboolean(L, arg)}};
    if (lua_type(L, arg) != LUA_TNUMBER)
        luaL_argerror(L, arg, lua_pushfstring(L, "%s: expected a boolean (or 0 or 1), got %s", what,
                                              luaL_typename(L, arg)));
    return lgr_check_number(L, arg, what);
}

void lgr_push_scalar(lua_State *L, gr_scalar s) {
    switch (s.kind) {
    case GR_SCALAR_INT: lua_pushinteger(L, (lua_Integer)s.v.i); break;
    case GR_SCALAR_UINT: lua_pushinteger(L, (lua_Integer)s.v.u); break;   /* two's-complement bits */
    case GR_SCALAR_FLOAT: lua_pushnumber(L, (lua_Number)s.v.f); break;
    default: lua_pushboolean(L, s.v.b); break;
    }
}

int lgr_push_result(lua_State *L, const gr_result *r) {
    for (int i = 0; i < r->count; i++) lgr_push_scalar(L, r->value[i]);
    return r->count;
}

void lgr_push_value(lua_State *L, const gr_result *r) {
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

lua_Integer lgr_list_len(lua_State *L, int arg, const char *prefix) {
    lua_Integer n = luaL_len(L, arg), last = n;
    lua_pushnil(L);
    while (lua_next(L, arg)) {
        lua_pop(L, 1);
        if (lua_isinteger(L, -1) && lua_tointeger(L, -1) > last) last = lua_tointeger(L, -1);
    }
    for (lua_Integer k = 1; k <= last && last > n; k++) {
        int absent = lua_geti(L, arg, k) == LUA_TNIL;
        lua_pop(L, 1);
        if (absent)
            luaL_argerror(L, arg, lua_pushfstring(L, "%sa list with holes (no element %I of %I)", prefix, k, last));
    }
    return n;
}

lua_Integer lgr_check_integer(lua_State *L, int arg, const char *what, lua_Integer min, lua_Integer max) {
    int isint;
    lua_Integer v = lua_tointegerx(L, arg, &isint);
    if (!isint) {
        const char *got = lua_type(L, arg) == LUA_TNUMBER ? lua_pushfstring(L, "%f", lua_tonumber(L, arg))
                                                           : luaL_typename(L, arg);
        luaL_argerror(L, arg, lua_pushfstring(L, "%s: expected an integer, got %s", what, got));
    }
    if (v < min || v > max) {
        if (max == LUA_MAXINTEGER)
            luaL_argerror(L, arg, lua_pushfstring(L, "%s must be >= %I (got %I)", what, min, v));
        luaL_argerror(L, arg, lua_pushfstring(L, "%s must be %I to %I (got %I)", what, min, max, v));
    }
    return v;
}

gr_dtype lgr_check_dtype(lua_State *L, int arg, const char *def) {
    if (!def && lua_type(L, arg) != LUA_TSTRING)
        luaL_argerror(L, arg, lua_pushfstring(L, "dtype: expected a string (accepted: %s), got %s", gr_dtype_names(),
                                              luaL_typename(L, arg)));
    const char *name = def ? luaL_optstring(L, arg, def) : lua_tostring(L, arg);
    int t = gr_dtype_from_name(name);
    if (t < 0)
        luaL_argerror(L, arg, lua_pushfstring(L, "unknown dtype '%s' (accepted: %s)", name, gr_dtype_names()));
    return (gr_dtype)t;
}
