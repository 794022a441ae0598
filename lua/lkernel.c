/*
 * lkernel.c -- user kernel variants from Lua: gr.kernel{...} registers one (engine/user/kernel.c), and
 * gr.kernel_source and gr.kernel_compile show what it becomes for one reduction. A reduction that names
 * one gets its kernels prepared for its op and dtype (r->o.kernel) by lrequest.c.
 *
 * gr.kernel reads the table (unknown fields, types, the block range, the lists of finishing modes and
 * ops), lets the engine check the rest (gr_kernel_check: names, ranges, the entry point in the source),
 * then registers it, compiling one instantiation where NVRTC is there: a compile error raises with
 * NVRTC's whole log, its first error said in the source's own lines ("source: 3:12: ...").
 */
#include "lkernel.h"
#include "linfo.h"
#include "loperator.h"
#include "lrequest.h"

#include <stdlib.h>
#include <string.h>

static const char *const kernel_keys[] = {"block", "determinism", "entry", "finishes", "name", "ops", "source",
                                          "summary", NULL};
static const char *const block_keys[] = {"default", "max", "min", NULL};

/* An integer in t[key] (nil: 0, the engine's default), named `what` in the message. */
static int int_field(lua_State *L, int t, const char *key, const char *what) {
    int type = lua_getfield(L, t, key), isint = 0;
    lua_Integer v = lua_tointegerx(L, -1, &isint);
    if (type != LUA_TNIL && (type != LUA_TNUMBER || !isint || v < 1 || v > 1 << 20))
        luaL_argerror(L, 1, lua_pushfstring(L, "%s: expected a block size (a power of two from 32 to 1024), got %s",
                                            what, type == LUA_TNUMBER ? luaL_tolstring(L, -1, NULL)
                                                                      : lua_typename(L, type)));
    lua_pop(L, 1);
    return type == LUA_TNIL ? 0 : (int)v;
}

/* block = {min =, max =, default =} (each optional), or one integer for a kernel of one block size. */
static void block_field(lua_State *L, gr_kernel_spec *s) {
    int type = lua_getfield(L, 1, "block");
    int t = lua_gettop(L);
    if (type == LUA_TNUMBER) {
        s->block_min = s->block_max = s->block_default = int_field(L, 1, "block", "block");
    } else if (type == LUA_TTABLE) {
        lgr_refuse_unknown(L, t, block_keys, "block.");
        s->block_min = int_field(L, t, "min", "block.min");
        s->block_max = int_field(L, t, "max", "block.max");
        s->block_default = int_field(L, t, "default", "block.default");
    } else if (type != LUA_TNIL) {
        luaL_argerror(L, 1, lua_pushfstring(L, "block: expected a table {min =, max =, default =} or one block size, "
                                               "got %s", luaL_typename(L, t)));
    }
    lua_settop(L, t - 1);
}

/* A list of names in t[key] as a mask of bits 1 << index, each name through from_name (-1: unknown);
 * nil: 0 (the engine's default). */
static unsigned names_field(lua_State *L, const char *key, int (*from_name)(const char *), const char *accepted,
                            const char *refused) {
    int type = lua_getfield(L, 1, key);
    int t = lua_gettop(L);
    unsigned mask = 0;
    if (type == LUA_TNIL) {
        lua_pop(L, 1);
        return 0;
    }
    if (type != LUA_TTABLE)
        luaL_argerror(L, 1, lua_pushfstring(L, "%s: expected a list of names (%s), got %s", key, accepted,
                                            luaL_typename(L, t)));
    lua_Integer n = (lua_Integer)lua_rawlen(L, t);
    if (n == 0) luaL_argerror(L, 1, lua_pushfstring(L, "%s: is empty (list at least one of %s)", key, accepted));
    for (lua_Integer i = 1; i <= n; i++) {
        int is_string = lua_rawgeti(L, t, i) == LUA_TSTRING;
        const char *name = is_string ? lua_tostring(L, -1) : luaL_typename(L, -1);
        int k = is_string ? from_name(name) : -1;
        if (k < 0 || (refused && strcmp(name, refused) == 0))
            luaL_argerror(L, 1, lua_pushfstring(L, "%s[%I]: %s%s%s is not accepted (accepted: %s)", key, i,
                                                is_string ? "'" : "", name, is_string ? "'" : "", accepted));
        mask |= 1u << k;
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    return mask;
}

static int finish_from_name(const char *name) { return gr_finish_from_name(name); }
static int op_from_name(const char *name) { return gr_op_from_name(name); }

/* gr.kernel{name =, source =, entry =, block =, finishes =, ops =, determinism =, summary =}: the
 * registry's entry of the new variant (as gr.variant(name) gives it). */
int lgr_kernel(lua_State *L) {
    gr_context *ctx = lgr_ctx(L);
    luaL_checktype(L, 1, LUA_TTABLE);
    lgr_refuse_unknown(L, 1, kernel_keys, "");
    gr_kernel_spec s = {0};
    s.name = lgr_string_field(L, 1, "name", "");
    s.source = lgr_string_field(L, 1, "source", " (CUDA C++ that defines the entry point)");
    s.entry = lgr_string_field(L, 1, "entry", " (the entry point's name)");
    s.summary = lgr_string_field(L, 1, "summary", " (one line)");
    block_field(L, &s);
    s.finishes = names_field(L, "finishes", finish_from_name, "device, hybrid, host, single", "auto");
    s.ops = names_field(L, "ops", op_from_name, gr_op_names(), NULL);
    const char *det = lgr_string_field(L, 1, "determinism", " (not_guaranteed or run_to_run)");
    s.determinism = -1;
    if (det) {
        for (int d = 0; gr_determinism_names[d]; d++)
            if (strcmp(det, gr_determinism_names[d]) == 0) s.determinism = d;
        if (s.determinism < 0)
            luaL_argerror(L, 1, lua_pushfstring(L, "determinism: unknown level '%s' (accepted: not_guaranteed, "
                                                   "run_to_run)", det));
    }
    if (gr_kernel_check(ctx, &s) != GR_OK) return luaL_argerror(L, 1, gr_errmsg(ctx));
    int variant;
    gr_status st = gr_kernel_register(ctx, lgr_operator_cache(L), &s, &variant);
    const char *warning = gr_operator_cache_warning();
    if (warning) lua_writestringerror("%s\n", warning);
    if (st == GR_EINVAL && strcmp(gr_errarg(ctx), "name") != 0) return lgr_raise_compile_error(L);
    if (st == GR_EINVAL) return luaL_argerror(L, 1, gr_errmsg(ctx));
    if (st != GR_OK) return lgr_fail(L, st, 0, NULL);
    lgr_push_variant(L, variant);
    return 1;
}

/* A user kernel by name at arg, its index. */
static int check_kernel_name(lua_State *L, int arg) {
    const char *name = luaL_checkstring(L, arg);
    int v = gr_variant_find(name);
    if (v < 0 || !gr_variant_get(v)->user)
        luaL_argerror(L, arg, lua_pushfstring(L, "'%s' is not a user kernel (gr.kernel registers one)", name));
    return v;
}

/* The reduction that gr.kernel_source and gr.kernel_compile are asked about: {op =, dtype =, acc =}, op a
 * name or a gr.operator, by default sum over float32. */
static gr_dtype read_reduction(lua_State *L, lgr_request *r) {
    lgr_request_read(L, 2, -1, 0, r);
    if (r->o.variant >= 0 || r->o.block || r->o.grid || r->o.finish != GR_FINISH_AUTO || r->async || r->segment ||
        r->offsets || r->streamed || r->o.threshold || r->o.stream || r->o.determinism >= 0)
        luaL_argerror(L, 2, "opts: takes op, dtype and acc (the reduction the kernel is generated for)");
    return r->dtype < 0 ? GR_FLOAT32 : (gr_dtype)r->dtype;
}

/* gr.kernel_source(name, opts): the CUDA source generated for one reduction. */
int lgr_kernel_source(lua_State *L) {
    int v = check_kernel_name(L, 1);
    lgr_request r;
    gr_dtype t = read_reduction(L, &r);
    char *src;
    gr_status st = gr_kernel_source(lgr_ctx(L), v, r.o.op, r.o.acc, r.user_op, t, &src);
    if (st != GR_OK) return lgr_fail(L, st, 2, NULL);
    lua_pushstring(L, src);
    free(src);
    return 1;
}

/* gr.kernel_compile(name, opts): that source compiled (through the caches; no GPU needed): the compile's
 * facts, as op:info() gives them. */
int lgr_kernel_compile(lua_State *L) {
    int v = check_kernel_name(L, 1);
    lgr_request r;
    gr_dtype t = read_reduction(L, &r);
    gr_operator_compile_info c;
    gr_context *ctx = lgr_ctx(L);
    gr_status st = gr_kernel_compile(ctx, lgr_operator_cache(L), v, r.o.op, r.o.acc, r.user_op, t, &c);
    if (st == GR_EINVAL && strcmp(gr_errarg(ctx), "acc") && strcmp(gr_errarg(ctx), "dtype")) return lgr_raise_compile_error(L);
    if (st != GR_OK) return lgr_fail(L, st, 2, NULL);
    lua_createtable(L, 0, 10);
    lgr_set_compile_info(L, &c);
    return 1;
}
