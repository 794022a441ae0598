/*
 * loperator_cpu.c -- a user operator's cpu table {map =, reduce =, post =, identity =} made the engine's
 * gr_operator_cpu: engine/core/operator_cpu.c calls these functions on the cpu backend, for host
 * buffers, and for the CPU finishes of the GPU's partials (gr_options.fold). lrequest.c decides when a
 * request runs them.
 *
 * The functions here only translate: an accumulator or an element to a Lua value, the table's function
 * called under lua_pcall, its result checked for type and handed back. They never raise -- the engine's
 * frames are below them -- so every failure becomes the context's error, naming the function. The cpu
 * table's functions and two accumulator slots (struct accumulators live there) are on the stack for the
 * call's duration.
 */
#include "loperator_cpu.h"

#include <stdio.h>
#include <string.h>

enum { F_MAP, F_REDUCE, F_POST, F_IDENTITY };
static const char *const fn_names[] = {"cpu.map", "cpu.reduce", "cpu.post", "cpu.identity"};

/* ---- the engine's calls into the cpu table --------------------------------------------------------- */

static gr_status fail(lgr_operator_cpu *c, const char *fmt, const char *fn, const char *what, const char *more) {
    char msg[480];
    snprintf(msg, sizeof msg, fmt, fn, what, more);
    return gr_set_error(c->ctx, GR_EINVAL, "op", msg);
}

/* What a function gave, for messages: "nothing", "nil", "a table", ... (no allocation). */
static const char *given(lua_State *L, int none) {
    static const char *const names[] = {"nil", "a boolean", "a userdata", "a number", "a string", "a table",
                                        "a function", "a userdata", "a thread"};
    int t = lua_type(L, -1);
    return none ? "nothing" : t >= 0 && t < (int)(sizeof names / sizeof *names) ? names[t] : "a value";
}

/* Function `which` of the cpu table pushed (lgr_operator_cpu_push made room for it and its arguments);
 * returns the top it was pushed above. */
static int push_fn(lgr_operator_cpu *c, int which) {
    int base = lua_gettop(c->L);
    lua_pushvalue(c->L, c->fn + which);
    return base;
}

/* Calls function `which`, pushed above `base` with its nargs arguments: GR_OK with its first result
 * alone at base + 1 (nil where it returned nothing, *none set), or the context's error, the stack back
 * at base. */
static gr_status call(lgr_operator_cpu *c, int which, int base, int nargs, int *none) {
    lua_State *L = c->L;
    if (lua_pcall(L, nargs, LUA_MULTRET, 0) != LUA_OK) {
        char why[64];
        const char *msg = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : why;
        if (msg == why) snprintf(why, sizeof why, "%s error value", given(L, 0));
        gr_status st = fail(c, "the operator's %s failed: %s%s", fn_names[which], msg, "");
        lua_settop(L, base);
        return st;
    }
    int top = lua_gettop(L);
    *none = top == base;
    if (top != base + 1) lua_settop(L, base + 1);
    return GR_OK;
}

/* The result on the top, popped, as an accumulator: a number the engine converts where acc is a dtype,
 * else any value but nil, kept in out's slot. */
static gr_status take_acc(lgr_operator_cpu *c, int which, int none, gr_cpu_acc *out) {
    lua_State *L = c->L;
    gr_status st = GR_OK;
    if (c->acc < 0 && !lua_isnil(L, -1)) {
        lua_replace(L, c->slots + (int)out->slot);
        return GR_OK;
    }
    if (c->acc >= 0 && lua_isinteger(L, -1)) {
        out->value.kind = GR_SCALAR_INT;
        out->value.v.i = (int64_t)lua_tointeger(L, -1);
    } else if (c->acc >= 0 && lua_type(L, -1) == LUA_TNUMBER) {
        out->value.kind = GR_SCALAR_FLOAT;
        out->value.v.f = (double)lua_tonumber(L, -1);
    } else if (c->acc >= 0) {
        st = fail(c, "the operator's %s returned %s, not a number (its accumulator is %s)", fn_names[which],
                  given(L, none), gr_dtype_name((gr_dtype)c->acc));
    } else {
        st = fail(c, "the operator's %s returned %s, not an accumulator%s", fn_names[which], given(L, none), "");
    }
    lua_settop(L, -2);
    return st;
}

/* An argument for function `which` pushed; where it cannot be (an int64 beyond 2^53 that gr.int64's mode
 * refuses, on 5.1 and LuaJIT), the stack back at base and the context's error: raising here would unwind
 * through the engine's frames. */
static gr_status push_arg(lgr_operator_cpu *c, int which, int base, gr_scalar v) {
    char why[320];
    if (lgr_push_scalar_or(c->L, v, why, sizeof why)) return GR_OK;
    lua_settop(c->L, base);
    return fail(c, "the operator's %s cannot be given a value: %s%s", fn_names[which], why, "");
}

static gr_status push_acc(lgr_operator_cpu *c, int which, int base, const gr_cpu_acc *a) {
    if (c->acc >= 0) return push_arg(c, which, base, a->value);
    lua_pushvalue(c->L, c->slots + (int)a->slot);
    return GR_OK;
}

static gr_status cpu_map(void *ud, gr_scalar x, uint64_t i, gr_cpu_acc *out) {
    lgr_operator_cpu *c = ud;
    int base = push_fn(c, F_MAP), none;
    gr_status st = push_arg(c, F_MAP, base, x);
    if (st != GR_OK) return st;
    lua_pushinteger(c->L, (lua_Integer)i);
    st = call(c, F_MAP, base, 2, &none);
    return st == GR_OK ? take_acc(c, F_MAP, none, out) : st;
}

/* cpu.map(x1, ..., xn, i) for an operator of several inputs. */
static gr_status cpu_map_inputs(void *ud, const gr_scalar *xs, int count, uint64_t i, gr_cpu_acc *out) {
    lgr_operator_cpu *c = ud;
    int base = push_fn(c, F_MAP), none;
    gr_status st = GR_OK;
    for (int k = 0; k < count && st == GR_OK; k++) st = push_arg(c, F_MAP, base, xs[k]);
    if (st != GR_OK) return st;
    lua_pushinteger(c->L, (lua_Integer)i);
    st = call(c, F_MAP, base, count + 1, &none);
    return st == GR_OK ? take_acc(c, F_MAP, none, out) : st;
}

static gr_status cpu_reduce(void *ud, const gr_cpu_acc *a, const gr_cpu_acc *b, gr_cpu_acc *out) {
    lgr_operator_cpu *c = ud;
    int base = push_fn(c, F_REDUCE), none;
    gr_status st = push_acc(c, F_REDUCE, base, a);
    if (st == GR_OK) st = push_acc(c, F_REDUCE, base, b);
    if (st != GR_OK) return st;
    st = call(c, F_REDUCE, base, 2, &none);
    return st == GR_OK ? take_acc(c, F_REDUCE, none, out) : st;
}

static gr_status cpu_post(void *ud, const gr_cpu_acc *a, uint64_t n, gr_scalar *out) {
    lgr_operator_cpu *c = ud;
    lua_State *L = c->L;
    int base = push_fn(c, F_POST), none;
    gr_status st = push_acc(c, F_POST, base, a);
    if (st != GR_OK) return st;
    lua_pushinteger(L, (lua_Integer)n);
    st = call(c, F_POST, base, 2, &none);
    if (st != GR_OK) return st;
    if (lua_isboolean(L, -1)) {
        out->kind = GR_SCALAR_BOOL;
        out->v.b = lua_toboolean(L, -1);
    } else if (lua_isinteger(L, -1)) {
        out->kind = GR_SCALAR_INT;
        out->v.i = (int64_t)lua_tointeger(L, -1);
    } else if (lua_type(L, -1) == LUA_TNUMBER) {
        out->kind = GR_SCALAR_FLOAT;
        out->v.f = (double)lua_tonumber(L, -1);
    } else {
        st = fail(c, "the operator's %s returned %s, not a number or a boolean%s", fn_names[F_POST], given(L, none), "");
    }
    lua_pop(L, 1);
    return st;
}

static gr_status cpu_identity(void *ud, gr_cpu_acc *out) {
    lgr_operator_cpu *c = ud;
    int base = push_fn(c, F_IDENTITY), none = 0;
    /* an identity that is not a function is its own value */
    gr_status st = lua_isfunction(c->L, -1) ? call(c, F_IDENTITY, base, 0, &none) : GR_OK;
    return st == GR_OK ? take_acc(c, F_IDENTITY, none, out) : st;
}

gr_status lgr_operator_cpu_fold(void *ud, const void *partials, size_t count, void *out) {
    lgr_operator_cpu *c = ud;
    return gr_operator_cpu_fold(c->ctx, &c->fns, (gr_dtype)c->acc, partials, count, out);
}

/* ---- the table made functions ---------------------------------------------------------------------- */

int lgr_operator_cpu_push(lua_State *L, int op_idx, gr_operator *op, lgr_operator_cpu *c) {
    if (lua_getiuservalue(L, op_idx, 1) != LUA_TTABLE) {
        lua_pop(L, 1);
        return 0;
    }
    int cpu = lua_gettop(L);
    /* the functions and slots, then room for the calls: the engine calls them with a few values more
     * on the stack than now, and a C function's room lasts until it returns */
    luaL_checkstack(L, 6 + LUA_MINSTACK, "the operator's cpu functions");
    for (int k = F_MAP; k <= F_IDENTITY; k++) lua_getfield(L, cpu, fn_names[k] + 4);
    lua_pushnil(L);
    lua_pushnil(L);
    c->L = L;
    c->ctx = lgr_ctx(L);
    c->fn = cpu + 1;
    c->slots = cpu + 5;
    c->acc = gr_operator_acc_dtype(op);
    c->fns = (gr_operator_cpu){op, cpu_map, cpu_reduce, lua_isnil(L, c->fn + F_POST) ? NULL : cpu_post,
                               lua_isnil(L, c->fn + F_IDENTITY) ? NULL : cpu_identity, c, cpu_map_inputs};
    return 1;
}
