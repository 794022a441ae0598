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

/* The module's context, the cache of the operators compiled in it (made on first use), and what an
 * int64 or uint64 value beyond 2^53 becomes where Lua has no 64-bit integers (gr.int64). */
typedef struct { gr_context *ctx; gr_operator_cache *ops; int int64; } lcontext;

static const char *const INT64_MODES[] = {"error", "string", "float", NULL};
enum { INT64_ERROR, INT64_STRING, INT64_FLOAT };

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
    u->int64 = INT64_ERROR;
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
    if (kb > 0) lgr_gc_step(L, kb < (size_t)1 << 30 ? kb : (size_t)1 << 30);
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

/* gr.int64(mode): where Lua's numbers are doubles (5.1, LuaJIT), what an int64 or uint64 value beyond
 * 2^53 becomes: "error" (the default: no value loses bits unasked), "string" (its decimal digits) or
 * "float" (the nearest double). Returns the mode before; with no argument, only that. On 5.3 and later
 * every such value is an integer, and the mode is kept but never needed. */
int lgr_int64(lua_State *L) {
    lcontext *u = lua_touserdata(L, lua_upvalueindex(1));
    int before = u->int64;
    if (!lua_isnoneornil(L, 1)) u->int64 = luaL_checkoption(L, 1, NULL, INT64_MODES);
    lua_pushstring(L, INT64_MODES[before]);
    return 1;
}

/* The integers that a double holds exactly, all of them: |v| <= 2^53. */
#define EXACT_IN_DOUBLE ((uint64_t)1 << 53)

#define WIDE_MESSAGE "gpureduce: the %s value %s is beyond 2^53, which a number of %s does not hold exactly: " \
                     "gr.int64(\"string\") returns such values as decimal strings, gr.int64(\"float\") " \
                     "rounds them to the nearest number"

/* An int64 or uint64 value that a Lua number would round (5.1, LuaJIT): as gr.int64 says. Found through
 * the registry, not upvalue 1: an operator's cpu functions are called from the engine. Where the mode
 * refuses it, raises -- or, given `err`, writes the message there and returns 0 instead. */
static int push_wide(lua_State *L, gr_scalar s, char *err, size_t errlen) {
    char digits[24];
    int neg = s.kind == GR_SCALAR_INT && s.v.i < 0;
    uint64_t mag = s.kind == GR_SCALAR_UINT ? s.v.u : neg ? 0 - (uint64_t)s.v.i : (uint64_t)s.v.i;
    snprintf(digits, sizeof digits, "%s%llu", neg ? "-" : "", (unsigned long long)mag);
    lua_getfield(L, LUA_REGISTRYINDEX, CONTEXT_KEY);
    lcontext *u = luaL_testudata(L, -1, CONTEXT_MT);
    int mode = u ? u->int64 : INT64_ERROR;
    lua_pop(L, 1);
    const char *kind = s.kind == GR_SCALAR_UINT ? "uint64" : "int64";
    switch (mode) {
    case INT64_STRING: lua_pushstring(L, digits); return 1;
    case INT64_FLOAT:
        lua_pushnumber(L, s.kind == GR_SCALAR_UINT ? (lua_Number)s.v.u : (lua_Number)s.v.i);
        return 1;
    default:
        if (err) {
            snprintf(err, errlen, WIDE_MESSAGE, kind, digits, LUA_VERSION);
            return 0;
        }
        return luaL_error(L, WIDE_MESSAGE, kind, digits, LUA_VERSION);
    }
}

int lgr_push_scalar_or(lua_State *L, gr_scalar s, char *err, size_t errlen) {
    switch (s.kind) {
    case GR_SCALAR_INT:
        if (LGR_LUA_INT64 || (s.v.i >= -(int64_t)EXACT_IN_DOUBLE && s.v.i <= (int64_t)EXACT_IN_DOUBLE))
            lua_pushinteger(L, (lua_Integer)s.v.i);
        else
            return push_wide(L, s, err, errlen);
        break;
    case GR_SCALAR_UINT:                                                  /* two's-complement bits */
        if (LGR_LUA_INT64 || s.v.u <= EXACT_IN_DOUBLE) lua_pushinteger(L, (lua_Integer)s.v.u);
        else return push_wide(L, s, err, errlen);
        break;
    case GR_SCALAR_FLOAT: lua_pushnumber(L, (lua_Number)s.v.f); break;
    default: lua_pushboolean(L, s.v.b); break;
    }
    return 1;
}

void lgr_push_scalar(lua_State *L, gr_scalar s) { lgr_push_scalar_or(L, s, NULL, 0); }

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
