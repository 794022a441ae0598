/*
 * lcore.c -- the module gpureduce.core: its context, the metatables of its userdata, its functions, and
 * the failure and value helpers every file of the binding uses.
 *
 * Lifetime rules: a userdata is created with a NULL handle and its metatable before anything
 * is allocated, so a failed allocation leaves a harmless object; one idempotent release function serves
 * __gc, __close and :free(); methods reach the handle through one accessor that rejects a freed object.
 */
#include "binding.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

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

/* ---- the module ---------------------------------------------------------------------------------- */

static const luaL_Reg module_funcs[] = {
    {"backend", lgr_backend}, {"bench", lgr_bench},
    {"bench_read", lgr_bench_read}, {"buffer", lgr_buffer}, {"clock", lgr_clock}, {"comm", lgr_comm},
    {"comm_id", lgr_comm_id}, {"copy", lgr_copy},
    {"debug_events", lgr_debug_events}, {"debug_fault", lgr_debug_fault}, {"device", lgr_device},
    {"devices", lgr_devices}, {"dtypes", lgr_dtypes}, {"finishes", lgr_finishes}, {"kernel", lgr_kernel},
    {"kernel_compile", lgr_kernel_compile}, {"kernel_source", lgr_kernel_source},
    {"memory_limit", lgr_memory_limit}, {"nccl_version", lgr_nccl_version},
    {"operator", lgr_operator}, {"ops", lgr_ops}, {"plan", lgr_plan}, {"pool_stats", lgr_pool_stats},
    {"pool_trim", lgr_pool_trim}, {"reduce", lgr_reduce}, {"reduce_many", lgr_reduce_many}, {"stream", lgr_stream},
    {"variants", lgr_variants}, {"wrap", lgr_wrap}, {NULL, NULL}};

/* gr.sum, gr.prod, ..., gr.nanmean and the aliases gr.all, gr.any: one function per op of the engine's
 * list (the list is the only place the ops are named). */
static void add_op_functions(lua_State *L, int module, int ctx_idx) {
    for (int op = 0; op < GR_OP_COUNT; op++) {
        const char *names[2] = {gr_op_name((gr_op)op), gr_op_alias((gr_op)op)};
        for (int k = 0; k < 2 && names[k]; k++) {
            lua_pushvalue(L, ctx_idx);
            lua_pushinteger(L, op);
            lua_pushcclosure(L, lgr_reduce_op, 2);
            lua_setfield(L, module, names[k]);
        }
    }
}

/* Buffers index their elements (b[1]) as well as their methods: __index is a function that gets the
 * methods table as upvalue 2. */

/* A metatable whose functions all see the context (at stack index ctx_idx) as upvalue 1; made once
 * per state. With `indexer`, __index is that function (upvalues: the context, the methods table). */
static void new_type(lua_State *L, const char *name, const luaL_Reg *methods, const luaL_Reg *meta, int ctx_idx,
                     lua_CFunction indexer) {
    if (!luaL_newmetatable(L, name)) {
        lua_pop(L, 1);
        return;
    }
    lua_pushvalue(L, ctx_idx);
    luaL_setfuncs(L, meta, 1);
    lua_newtable(L);
    lua_pushvalue(L, ctx_idx);
    luaL_setfuncs(L, methods, 1);
    if (indexer) {
        lua_pushvalue(L, ctx_idx);
        lua_insert(L, -2);
        lua_pushcclosure(L, indexer, 2);
    }
    lua_setfield(L, -2, "__index");
    lua_pop(L, 1);
}

/* b[i] reads element i (1-based); b.name finds a method. As for a table, any other number (0, past the
 * end, 1.5) reads nil, so that ipairs(b) stops at the end; b:get(i) raises there. */
static int buffer_index(lua_State *L) {
    if (lua_type(L, 2) == LUA_TNUMBER) {
        gr_buffer *b = lgr_check_buffer(L, 1);
        int whole;
        lua_Integer i = lua_tointegerx(L, 2, &whole);
        if (!whole || i < 1 || (lua_Unsigned)i > gr_buffer_size(b)) return 0;
        lua_pushinteger(L, i);
        lua_replace(L, 2);
        lua_getfield(L, lua_upvalueindex(2), "get");
        lua_insert(L, 1);
        lua_call(L, 2, 1);
        return 1;
    }
    lua_pushvalue(L, 2);
    lua_rawget(L, lua_upvalueindex(2));
    return 1;
}

/* b[i] = v writes element i; anything else is refused (a buffer has no fields to set). */
static int buffer_newindex(lua_State *L) {
    if (lua_type(L, 2) != LUA_TNUMBER)
        return luaL_error(L, "gpureduce.Buffer: cannot set field '%s' (only elements b[1] to b[#b] can be "
                             "assigned)", luaL_tolstring(L, 2, NULL));
    return lgr_buffer_set_element(L);
}

/* One context per Lua state, kept in the registry: a second load of the module (busted reloads modules
 * for every spec file) shares it, so objects made under either load stay valid. */
#define CONTEXT_KEY "gpureduce.context"

static void push_context(lua_State *L) {
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

int luaopen_gpureduce_core(lua_State *L) {
    push_context(L);
    int ctx_idx = lua_gettop(L);
    new_type(L, BUFFER_MT, lgr_buffer_methods, lgr_buffer_meta, ctx_idx, buffer_index);
    luaL_getmetatable(L, BUFFER_MT);
    lua_pushvalue(L, ctx_idx);
    lua_pushcclosure(L, buffer_newindex, 1);
    lua_setfield(L, -2, "__newindex");
    lua_pop(L, 1);
    new_type(L, STREAM_MT, lgr_stream_methods, lgr_stream_meta, ctx_idx, NULL);
    new_type(L, PENDING_MT, lgr_pending_methods, lgr_pending_meta, ctx_idx, NULL);
    new_type(L, COMM_MT, lgr_comm_methods, lgr_comm_meta, ctx_idx, NULL);
    new_type(L, OPERATOR_MT, lgr_operator_methods, lgr_operator_meta, ctx_idx, lgr_operator_index);
    luaL_newlibtable(L, module_funcs);
    lua_pushvalue(L, ctx_idx);
    luaL_setfuncs(L, module_funcs, 1);
    add_op_functions(L, lua_gettop(L), ctx_idx);
    lua_pushstring(L, GR_VERSION);
    lua_setfield(L, -2, "version");
    luaL_newmetatable(L, SHARDED_MT);       /* gr.sharded's; its methods are Lua (gpureduce/sharded.lua) */
    lua_setfield(L, -2, "_Sharded");
    return 1;
}
