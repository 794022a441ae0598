/*
 * loperator.c -- user operators from Lua: gr.operator{...} and the Operator userdata.
 *
 * gr.operator checks the table (unknown fields, types, the cpu functions), lets the engine check the
 * expressions (gr_operator_create), and compiles them at once for one dtype where NVRTC is there, so a
 * mistake in an expression is an error of this call, said in the field's terms ("map: 1:5: ..."). The
 * identity is then checked against reduce: on the GPU by the generated check kernel, on the cpu
 * backend by the cpu functions when they are given and the identity is a literal the host can read.
 *
 * The cpu table must compute what the kernels compute (engine/core/operator_cpu.c runs it): post exactly where
 * the operator has post, identity where the host cannot read the operator's. An Operator keeps it
 * {map =, reduce =, post =, identity =} as user value 1 (nil without one), for the cpu backend's
 * reductions. The disk cache's one warning goes to stderr, once per process.
 */
#include "loperator.h"

#include <stdlib.h>
#include <string.h>

static const char *const operator_keys[] = {"acc", "cpu", "identity", "inputs", "map", "name", "post", "preamble",
                                            "reduce", NULL};
static const char *const cpu_keys[] = {"identity", "map", "post", "reduce", NULL};

/* ---- the accessor and the release ---------------------------------------------------------------- */

gr_operator *lgr_check_operator(lua_State *L, int arg) {
    loperator *u = luaL_checkudata(L, arg, OPERATOR_MT);
    if (!u->op) luaL_argerror(L, arg, "operator has been freed");
    return u->op;
}

static int o_release(lua_State *L) {
    loperator *u = luaL_checkudata(L, 1, OPERATOR_MT);
    gr_operator_free(u->op);    /* its compiled images stay in the state's cache, shared by equal sources */
    u->op = NULL;
    return 0;
}

/* ---- reading the table ---------------------------------------------------------------------------- */

/* "a, b, c" of a NULL-terminated list, on the stack. */
const char *lgr_push_list(lua_State *L, const char *const *names) {
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    for (int i = 0; names[i]; i++) {
        if (i) luaL_addstring(&b, ", ");
        luaL_addstring(&b, names[i]);
    }
    luaL_pushresult(&b);
    return lua_tostring(L, -1);
}

void lgr_refuse_unknown(lua_State *L, int t, const char *const *keys, const char *prefix) {
    lua_pushnil(L);
    while (lua_next(L, t)) {
        lua_pop(L, 1);
        int known = 0;
        if (lua_type(L, -1) == LUA_TSTRING)
            for (int i = 0; keys[i] && !known; i++) known = strcmp(lua_tostring(L, -1), keys[i]) == 0;
        if (!known) {
            const char *k = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : luaL_tolstring(L, -1, NULL);
            luaL_argerror(L, 1, lua_pushfstring(L, "unknown field '%s%s' (accepted: %s)", prefix, k,
                                                lgr_push_list(L, keys)));
        }
    }
}

const char *lgr_string_field(lua_State *L, int t, const char *key, const char *hint) {
    int type = lua_getfield(L, t, key);
    if (type == LUA_TNIL) return NULL;
    if (type != LUA_TSTRING)
        luaL_argerror(L, 1, lua_pushfstring(L, "%s: expected a string%s, got %s", key, hint, luaL_typename(L, -1)));
    size_t len;
    const char *s = lua_tolstring(L, -1, &len);
    if (strlen(s) != len) luaL_argerror(L, 1, lua_pushfstring(L, "%s: has a zero byte inside", key));
    return s;
}

/* A field of gr.operator's table, with what its string holds. */
static const char *string_field(lua_State *L, int t, const char *key) {
    return lgr_string_field(L, t, key, strcmp(key, "name") == 0 || strcmp(key, "acc") == 0 ? "" :
                                       strcmp(key, "preamble") == 0 ? " (C declarations)" : " (a C expression)");
}

/* inputs = {"x", "w", ...}: the names map gives the inputs, into spec (the strings stay on the stack,
 * in the table, for the call). */
static void inputs_field(lua_State *L, int t, gr_operator_spec *spec) {
    int type = lua_getfield(L, t, "inputs");
    spec->ninputs = 0;
    if (type == LUA_TNIL) {
        lua_pop(L, 1);
        return;
    }
    if (type != LUA_TTABLE)
        luaL_argerror(L, 1, lua_pushfstring(L, "inputs: expected a list of names (strings), got %s",
                                            luaL_typename(L, -1)));
    int list = lua_gettop(L);
    lua_Integer n = luaL_len(L, list);
    if (n < 1 || n > GR_OPERATOR_INPUTS)
        luaL_argerror(L, 1, lua_pushfstring(L, "inputs: names 1 to %d inputs (got %I)", GR_OPERATOR_INPUTS, n));
    lua_pushnil(L);
    while (lua_next(L, list)) {                 /* a list and nothing else: {x = 1} or {[9] = "y"} is a mistake */
        lua_pop(L, 1);
        if (!lua_isinteger(L, -1) || lua_tointeger(L, -1) < 1 || lua_tointeger(L, -1) > n)
            luaL_argerror(L, 1, lua_pushfstring(L, "inputs: expected a list of names, found key %s",
                                                luaL_tolstring(L, -1, NULL)));
    }
    for (lua_Integer k = 1; k <= n; k++) {
        if (lua_geti(L, list, k) != LUA_TSTRING)
            luaL_argerror(L, 1, lua_pushfstring(L, "inputs[%I]: expected a name (a string), got %s", k,
                                                luaL_typename(L, -1)));
        spec->inputs[k - 1] = lua_tostring(L, -1);
        lua_pop(L, 1);                          /* the table keeps the string alive */
    }
    spec->ninputs = (int)n;
}

/* The cpu table: functions map and reduce, post and identity checked later (they depend on the
 * operator). Leaves it (or nil) on the stack. */
static int cpu_field(lua_State *L, int t) {
    int type = lua_getfield(L, t, "cpu");
    if (type == LUA_TNIL) return 0;
    if (type != LUA_TTABLE)
        luaL_argerror(L, 1, lua_pushfstring(L, "cpu: expected a table of functions {map =, reduce =, post =}, "
                                               "got %s", luaL_typename(L, -1)));
    int cpu = lua_gettop(L);
    lgr_refuse_unknown(L, cpu, cpu_keys, "cpu.");
    for (int i = 0; cpu_keys[i]; i++) {
        if (strcmp(cpu_keys[i], "identity") == 0) continue;
        int got = lua_getfield(L, cpu, cpu_keys[i]);
        int optional = strcmp(cpu_keys[i], "post") == 0;
        if (got != LUA_TFUNCTION && !(optional && got == LUA_TNIL))
            luaL_argerror(L, 1, lua_pushfstring(L, "cpu.%s: expected a function%s, got %s", cpu_keys[i],
                                                optional ? " or nil" : "", luaL_typename(L, -1)));
        lua_pop(L, 1);
    }
    return 1;
}

/* What the cpu functions need to compute what the kernels compute: post exactly where the operator has
 * one, and an identity where the host cannot read the operator's (a struct's, an expression) -- a value
 * of the accumulator, or a function that returns one -- equal to the operator's where it can. */
static void check_cpu_shape(lua_State *L, const gr_operator *op, int cpu) {
    const gr_operator_spec *s = gr_operator_get_spec(op);
    int has_post = lua_getfield(L, cpu, "post") != LUA_TNIL;
    if (s->post && !has_post)
        luaL_argerror(L, 1, lua_pushfstring(L, "cpu.post: required: the operator has post '%s' (the cpu functions "
                                               "compute what its kernels compute)", s->post));
    if (!s->post && has_post)
        luaL_argerror(L, 1, "cpu.post: the operator has no post (its result is the accumulator itself): leave it out");
    int acc = gr_operator_acc_dtype(op);
    gr_scalar e;
    int readable = gr_operator_identity_value(op, &e);
    int type = lua_getfield(L, cpu, "identity");
    if (type == LUA_TNIL && !readable)
        luaL_argerror(L, 1, lua_pushfstring(L, "cpu.identity: required: the host cannot read identity '%s' (give "
                                               "the accumulator's identity as a Lua value, or a function that "
                                               "returns one)", s->identity));
    if (type == LUA_TNIL || acc < 0 || type == LUA_TFUNCTION) {
        lua_pop(L, 2);
        return;
    }
    if (type != LUA_TNUMBER)
        luaL_argerror(L, 1, lua_pushfstring(L, "cpu.identity: expected a number or a function that returns one (acc "
                                               "is %s), got %s", s->acc, luaL_typename(L, -1)));
    if (readable) {
        lgr_push_scalar(L, e);
        if (!lua_compare(L, -1, -2, LUA_OPEQ) && !(e.kind == GR_SCALAR_FLOAT && e.v.f != e.v.f))
            luaL_argerror(L, 1, lua_pushfstring(L, "cpu.identity: %s is not identity '%s' (acc %s)",
                                                luaL_tolstring(L, -2, NULL), s->identity, s->acc));
        lua_pop(L, 1);
    }
    lua_pop(L, 2);
}

/* ---- checks at creation --------------------------------------------------------------------------- */

/* The disk cache's warning, once per process, on stderr: a script sees it without turning Lua's warn()
 * on, and it does not stop anything (the images are kept in memory instead). */
static void show_cache_warning(void) {
    const char *w = gr_operator_cache_warning();
    if (w) lua_writestringerror("%s\n", w);    /* worded for a user, "gpureduce: ..." */
}

/* The dtype an operator is compiled for at creation: its accumulator's, or float32 for a struct. */
static gr_dtype default_dtype(const gr_operator *op) {
    int acc = gr_operator_acc_dtype(op);
    return acc >= 0 ? (gr_dtype)acc : GR_FLOAT32;
}

/* Compiles for the default dtype and the device's architecture (sm_90 without a GPU), the compile's
 * facts kept in u. Without NVRTC nothing happens: the operator can still run on the cpu backend with
 * its cpu functions. A compile error raises the field's message and NVRTC's whole log. Returns 1 when
 * it compiled. */
static int compile_now(lua_State *L, loperator *u) {
    gr_operator *op = u->op;
    gr_context *ctx = lgr_ctx(L);
    gr_device_info info;
    int arch = gr_device_info_get(ctx, &info) == GR_OK ? info.cc_major * 10 + info.cc_minor : 90;
    gr_operator_image *img;
    gr_status st = gr_operator_compile(ctx, lgr_operator_cache(L), op, default_dtype(op), arch, &img, &u->compiled);
    show_cache_warning();
    if (st == GR_ENODEV) return 0;
    if (st == GR_EINVAL) return lgr_raise_compile_error(L);
    if (st != GR_OK) return lgr_fail(L, st, 0, NULL);
    return 1;
}

int lgr_raise_compile_error(lua_State *L) {
    const char *log = gr_operator_cache_log(lgr_operator_cache(L));
    size_t len = strlen(log);
    while (len && (log[len - 1] == '\n' || log[len - 1] == ' ')) len--;
    lua_pushlstring(L, log, len);
    return luaL_error(L, "gpureduce: %s%s%s", gr_errmsg(lgr_ctx(L)), len ? "\nNVRTC's log:\n" : "", lua_tostring(L, -1));
}

/* Lua's view of two accumulator values: equal, or both NaN. */
static int same_value(lua_State *L, int a, int b) {
    if (lua_rawequal(L, a, b)) return 1;
    return lua_type(L, a) == LUA_TNUMBER && lua_type(L, b) == LUA_TNUMBER && lua_tonumber(L, a) != lua_tonumber(L, a) &&
           lua_tonumber(L, b) != lua_tonumber(L, b);
}

/* cpu.reduce(identity, cpu.map(x, i)) and cpu.reduce(cpu.map(x, i), identity) must both be cpu.map(x, i)
 * for the values the GPU's check uses, x of the accumulator's dtype and i its 0-based position. */
static void check_cpu_identity(lua_State *L, const gr_operator *op, int cpu) {
    gr_scalar e;
    if (!gr_operator_identity_value(op, &e)) return;    /* only the GPU can say what it is */
    gr_scalar values[8];
    int count = gr_operator_check_values((gr_dtype)gr_operator_acc_dtype(op), values);
    int top = lua_gettop(L);
    lgr_push_scalar(L, e);
    int id = lua_gettop(L);
    int inputs = gr_operator_inputs(op);       /* each input given the same value */
    for (int k = 0; k < count; k++) {
        /* a value that this Lua's numbers cannot hold and gr.int64's mode refuses (5.1, LuaJIT: an int64
         * beyond 2^53) is left out of the check; a reduction that meets one fails, naming it */
        char skip[320];
        lua_getfield(L, cpu, "map");
        if (!lgr_push_scalar_or(L, values[k], skip, sizeof skip)) {
            lua_pop(L, 1);
            continue;
        }
        for (int j = 1; j < inputs; j++) lgr_push_scalar(L, values[k]);
        lua_pushinteger(L, k);
        lua_call(L, inputs + 1, 1);
        int m = lua_gettop(L);
        for (int side = 0; side < 2; side++) {
            lua_getfield(L, cpu, "reduce");
            lua_pushvalue(L, side ? m : id);
            lua_pushvalue(L, side ? id : m);
            lua_call(L, 2, 1);
            int r = lua_gettop(L);
            if (!same_value(L, r, m)) {
                lgr_push_scalar(L, values[k]);
                const char *x = luaL_tolstring(L, r + 1, NULL), *got = luaL_tolstring(L, r, NULL);
                luaL_argerror(L, 1, lua_pushfstring(L, "identity: %s is not neutral for cpu.reduce: %s gave %s, "
                                                       "not cpu.map(x, i) = %s, for x = %s",
                                                    gr_operator_get_spec(op)->identity,
                                                    side ? "cpu.reduce(cpu.map(x, i), identity)"
                                                         : "cpu.reduce(identity, cpu.map(x, i))",
                                                    got, luaL_tolstring(L, m, NULL), x));
            }
            lua_pop(L, 1);
        }
        lua_pop(L, 1);
    }
    lua_settop(L, top);
}

/* ---- gr.operator ---------------------------------------------------------------------------------- */

int lgr_operator(lua_State *L) {
    gr_context *ctx = lgr_ctx(L);
    luaL_checktype(L, 1, LUA_TTABLE);
    lgr_refuse_unknown(L, 1, operator_keys, "");
    gr_operator_spec spec = {
        .name = string_field(L, 1, "name"), .map = string_field(L, 1, "map"),
        .reduce = string_field(L, 1, "reduce"), .post = string_field(L, 1, "post"),
        .identity = string_field(L, 1, "identity"), .acc = string_field(L, 1, "acc"),
        .preamble = string_field(L, 1, "preamble"),
    };
    inputs_field(L, 1, &spec);
    int has_cpu = cpu_field(L, 1);
    int cpu = lua_gettop(L);

    loperator *u = lua_newuserdatauv(L, sizeof *u, 1);
    u->op = NULL;
    memset(&u->compiled, 0, sizeof u->compiled);
    luaL_setmetatable(L, OPERATOR_MT);
    lua_pushvalue(L, cpu);
    lua_setiuservalue(L, -2, 1);
    gr_status st = gr_operator_create(ctx, &spec, &u->op);
    if (st == GR_EINVAL) return luaL_argerror(L, 1, gr_errmsg(ctx));
    if (st != GR_OK) return lgr_fail(L, st, 0, NULL);

    if (has_cpu) check_cpu_shape(L, u->op, cpu);
    int compiled = compile_now(L, u);
    if (gr_context_backend(ctx) == GR_BACKEND_CUDA && compiled) {
        st = gr_operator_check(ctx, lgr_operator_cache(L), u->op, default_dtype(u->op));
        if (st == GR_EINVAL) return luaL_argerror(L, 1, gr_errmsg(ctx));
        if (st != GR_OK) return lgr_fail(L, st, 0, NULL);
    } else if (gr_context_backend(ctx) == GR_BACKEND_CPU && has_cpu && gr_operator_acc_dtype(u->op) >= 0) {
        check_cpu_identity(L, u->op, cpu);
    }
    return 1;
}

/* ---- methods -------------------------------------------------------------------------------------- */

static const char *const kind_names[] = {"int", "uint", "float", "bool"};

/* op:source([dtype]): the CUDA source generated for elements of dtype (default: the accumulator's, or
 * float32 for a struct). */
static int o_source(lua_State *L) {
    gr_operator *op = lgr_check_operator(L, 1);
    char *src;
    gr_status st;
    if (lua_istable(L, 2)) {                    /* {dtype, ...}: one per input */
        gr_input_dtypes in = {.count = (int)luaL_len(L, 2)};
        if (in.count != gr_operator_inputs(op))
            return luaL_argerror(L, 2, lua_pushfstring(L, "operator %s takes %d input%s: give as many dtypes",
                                                       gr_operator_get_spec(op)->name, gr_operator_inputs(op),
                                                       gr_operator_inputs(op) > 1 ? "s" : ""));
        for (int k = 0; k < in.count; k++) {
            lua_geti(L, 2, k + 1);
            in.at[k] = lgr_check_dtype(L, -1, NULL);
            lua_pop(L, 1);
        }
        st = gr_operator_source_inputs(lgr_ctx(L), op, &in, &src);
    } else {
        gr_dtype t = lgr_check_dtype(L, 2, gr_dtype_name(default_dtype(op)));
        st = gr_operator_source(lgr_ctx(L), op, t, &src);
    }
    if (st != GR_OK) return lgr_fail(L, st, 0, "dtype", 2, NULL);
    lua_pushstring(L, src);
    free(src);
    return 1;
}

/* op:info(): the fields, what was detected, and the compile at creation: where its image came from
 * ("none" without NVRTC, "memory", "disk", "nvrtc"), NVRTC's time, the accumulator's layout. */
static int o_info(lua_State *L) {
    gr_operator *op = lgr_check_operator(L, 1);
    const gr_operator_spec *s = gr_operator_get_spec(op);
    const gr_operator_compile_info c = ((loperator *)lua_touserdata(L, 1))->compiled;
    lua_createtable(L, 0, 16);
    lgr_set_str(L, "name", s->name);
    lgr_set_str(L, "acc", s->acc);
    lgr_set_bool(L, "indexed", gr_operator_indexed(op));
    lua_createtable(L, gr_operator_inputs(op), 0);
    for (int k = 0; k < gr_operator_inputs(op); k++) {
        lua_pushstring(L, s->ninputs ? s->inputs[k] : "x");
        lua_rawseti(L, -2, k + 1);
    }
    lua_setfield(L, -2, "inputs");
    int has_cpu = lua_getiuservalue(L, 1, 1) != LUA_TNIL;
    lua_pop(L, 1);
    lgr_set_bool(L, "has_cpu", has_cpu);
    lua_createtable(L, 0, 5);
    lgr_set_str(L, "map", s->map);
    lgr_set_str(L, "reduce", s->reduce);
    lgr_set_str(L, "post", s->post);
    lgr_set_str(L, "identity", s->identity);
    lgr_set_str(L, "preamble", s->preamble);
    lua_setfield(L, -2, "expressions");
    lgr_set_compile_info(L, &c);
    return 1;
}

void lgr_set_compile_info(lua_State *L, const gr_operator_compile_info *c) {
    lgr_set_str(L, "origin", gr_operator_origin_name(c->origin));
    if (c->origin != GR_ORIGIN_NONE) {
        lgr_set_str(L, "dtype", gr_dtype_name(c->in));
        lgr_set_int(L, "arch", c->arch);
        lgr_set_bool(L, "ptx", c->ptx);
        lgr_set_int(L, "image_bytes", (lua_Integer)c->image_bytes);
        lgr_set_num(L, "nvrtc_ms", c->nvrtc_ms);
        lgr_set_num(L, "total_ms", c->total_ms);
        lgr_set_int(L, "acc_size", (lua_Integer)c->acc_size);
        lgr_set_int(L, "acc_align", (lua_Integer)c->acc_align);
        lgr_set_str(L, "result", kind_names[c->result_kind]);
    }
}

static int o_tostring(lua_State *L) {
    loperator *u = luaL_checkudata(L, 1, OPERATOR_MT);
    if (!u->op) {
        lua_pushstring(L, "gpureduce.Operator(freed)");
        return 1;
    }
    const gr_operator_spec *s = gr_operator_get_spec(u->op);
    lua_pushfstring(L, "gpureduce.Operator(%s: map %s, reduce %s, acc %s)", s->name, s->map, s->reduce, s->acc);
    return 1;
}

/* op.name, then the methods (upvalue 2). */
int lgr_operator_index(lua_State *L) {
    if (lua_type(L, 2) == LUA_TSTRING && strcmp(lua_tostring(L, 2), "name") == 0) {
        lua_pushstring(L, gr_operator_get_spec(lgr_check_operator(L, 1))->name);
        return 1;
    }
    lua_pushvalue(L, 2);
    lua_rawget(L, lua_upvalueindex(2));
    return 1;
}

const luaL_Reg lgr_operator_methods[] = {{"free", o_release}, {"info", o_info}, {"source", o_source}, {NULL, NULL}};
const luaL_Reg lgr_operator_meta[] = {
    {"__close", o_release}, {"__gc", o_release}, {"__tostring", o_tostring}, {NULL, NULL}};
