/*
 * loperator_run.c -- gr.reduce(b, {op = operator}): a user operator's kernels on the GPU (the engine's
 * plan and passes, engine/operator_run.c), or its cpu functions, called from here, on the cpu backend
 * and for host buffers.
 */
#include "binding.h"

#include <string.h>

/* opts.op's operator prepared for b's dtype on the GPU: r->o.user set, or a Lua error. */
void lgr_operator_prepare(lua_State *L, lgr_reduce_opts *r, gr_buffer *b) {
    const gr_operator_image *img;
    gr_status st = gr_operator_prepare(lgr_ctx(L), lgr_operator_cache(L), r->user_op, gr_buffer_dtype(b), &img);
    if (st != GR_OK) lgr_fail(L, st, 2, NULL);
    r->o.user = img;
}

/* The cpu functions, in order: the elements read a few thousand at a time, acc = reduce(acc, map(x,
 * i)) from the identity (when the host can read it as a number) or from the first element's map,
 * then post(acc, n) where there is one. */
static int reduce_on_cpu(lua_State *L, lgr_reduce_opts *r, gr_buffer *b, int cpu) {
    gr_context *ctx = lgr_ctx(L);
    const gr_operator_spec *spec = gr_operator_get_spec(r->user_op);
    if (r->async) luaL_argerror(L, 2, "opts.async: a gr.operator's cpu functions run synchronously");
    if (r->o.variant >= 0 || r->o.block || r->o.grid || r->o.finish != GR_FINISH_AUTO || r->o.acc >= 0)
        luaL_argerror(L, 2, "opts: a gr.operator's cpu functions take no variant, block, grid, finish or acc");
    lua_getfield(L, cpu, "map");
    int fmap = lua_gettop(L);
    lua_getfield(L, cpu, "reduce");
    lua_getfield(L, cpu, "post");
    int fred = fmap + 1, fpost = fmap + 2;
    gr_scalar id;
    if (gr_operator_identity_value(r->user_op, &id)) lgr_push_scalar(L, id);
    else lua_pushnil(L);
    int acc = lua_gettop(L);

    gr_dtype t = gr_buffer_dtype(b);
    size_t n = gr_buffer_size(b), es = gr_dtype_size(t);
    enum { PER = 4096 };
    unsigned char chunk[PER * 8];
    for (size_t lo = 0; lo < n; lo += PER) {
        size_t len = n - lo < PER ? n - lo : PER;
        gr_status st = gr_buffer_read(ctx, b, lo, chunk, len);
        if (st != GR_OK) return lgr_fail(L, st, 1, NULL);
        for (size_t k = 0; k < len; k++) {
            lua_pushvalue(L, fmap);
            lgr_push_scalar(L, gr_scalar_load(chunk + k * es, t));
            lua_pushinteger(L, (lua_Integer)(lo + k));
            lua_call(L, 2, 1);
            if (lua_isnil(L, acc)) {
                lua_replace(L, acc);
                continue;
            }
            lua_pushvalue(L, fred);
            lua_pushvalue(L, acc);
            lua_rotate(L, -3, -1);             /* map's value, reduce, acc -> reduce, acc, map's value */
            lua_call(L, 2, 1);
            lua_replace(L, acc);
        }
    }
    if (n == 0 && lua_isnil(L, acc))
        return luaL_argerror(L, 1, lua_pushfstring(L, "operator %s over an empty buffer: its identity '%s' is not a "
                                                      "number the host can read, and there is no element",
                                                      spec->name, spec->identity));
    if (lua_isnil(L, fpost)) {
        lua_pushvalue(L, acc);
        return 1;
    }
    lua_pushvalue(L, fpost);
    lua_pushvalue(L, acc);
    lua_pushinteger(L, (lua_Integer)n);
    lua_call(L, 2, 1);
    return 1;
}

int lgr_reduce_operator(lua_State *L, lgr_reduce_opts *r, gr_buffer *b) {
    gr_context *ctx = lgr_ctx(L);
    if (gr_context_backend(ctx) == GR_BACKEND_CUDA && gr_buffer_where(b) == GR_DEVICE) {
        lgr_operator_prepare(L, r, b);          /* the GPU: nothing more to look up on a repeated call */
        return -1;
    }
    lua_getfield(L, 2, "op");
    lua_getiuservalue(L, -1, 1);
    int cpu = lua_gettop(L);
    if (lua_istable(L, cpu)) return reduce_on_cpu(L, r, b, cpu);
    if (gr_context_backend(ctx) != GR_BACKEND_CUDA)
        return luaL_argerror(L, 2, lua_pushfstring(L, "opts.op: operator %s has no cpu functions, and the cpu "
                                                      "backend cannot run its kernels (give gr.operator a cpu table)",
                                                   gr_operator_get_spec(r->user_op)->name));
    lua_pop(L, 2);
    lgr_operator_prepare(L, r, b);              /* a host buffer: the engine says what it cannot do */
    return -1;
}
