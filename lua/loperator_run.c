/*
 * loperator_run.c -- gr.reduce(b, {op = operator}): a user operator's kernels on the GPU (the engine's
 * plan and passes, engine/operator_run.c), or its cpu functions, called from here, on the cpu backend
 * and for host buffers.
 */
#include "binding.h"

#include <stdlib.h>
#include <string.h>

/* gr_options.fold: the partials folded by the operator's cpu.reduce, from the first, as numbers of the
 * accumulator's dtype (a Lua error in it becomes the reduction's error). */
static gr_status fold_partials(void *ud, const void *partials, size_t count, void *out) {
    lgr_reduce_opts *r = ud;
    lua_State *L = r->fold_L;
    gr_context *ctx = lgr_ctx(L);
    gr_dtype acc = (gr_dtype)r->fold_acc;
    size_t es = gr_dtype_size(acc);
    lgr_push_scalar(L, gr_scalar_load(partials, acc));
    for (size_t i = 1; i < count; i++) {
        lua_pushvalue(L, r->fold_fn);
        lua_rotate(L, -2, 1);                   /* reduce, acc */
        lgr_push_scalar(L, gr_scalar_load((const char *)partials + i * es, acc));
        if (lua_pcall(L, 2, 1, 0) != LUA_OK) {
            const char *msg = lua_pushfstring(L, "the operator's cpu.reduce failed: %s", lua_tostring(L, -1));
            gr_status st = gr_set_error(ctx, GR_EINVAL, "op", msg);
            lua_pop(L, 2);
            return st;
        }
    }
    gr_status st;
    if (lua_type(L, -1) == LUA_TNUMBER) {
        st = gr_scalar_store(ctx, lgr_check_number(L, -1, "cpu.reduce"), acc, out, "cpu.reduce's value");
    } else {
        const char *msg = lua_pushfstring(L, "the operator's cpu.reduce gave %s, not a number", luaL_typename(L, -1));
        st = gr_set_error(ctx, GR_EINVAL, "op", msg);
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    return st;
}

/* opts.op's operator prepared for b's dtype on the GPU: r->o.user set, or a Lua error. */
void lgr_operator_prepare(lua_State *L, lgr_reduce_opts *r, gr_buffer *b) {
    const gr_operator_image *img;
    gr_status st = (r->segment || r->offsets || r->many ? gr_operator_prepare_segments : gr_operator_prepare)(
        lgr_ctx(L), lgr_operator_cache(L), r->user_op, gr_buffer_dtype(b), &img);
    if (st != GR_OK) lgr_fail(L, st, 2, NULL);
    r->o.user = img;
    if (r->o.finish != GR_FINISH_HYBRID && r->o.finish != GR_FINISH_HOST) return;
    lua_getfield(L, 2, "op");
    lua_getiuservalue(L, -1, 1);
    if (!lua_istable(L, -1)) {
        lua_pop(L, 2);
        return;                                 /* the planner says what is missing */
    }
    lua_getfield(L, -1, "reduce");
    lua_replace(L, -3);
    lua_pop(L, 1);
    r->fold_L = L;
    r->fold_fn = lua_gettop(L);
    r->fold_acc = gr_operator_acc_dtype(r->user_op);
    r->o.fold = fold_partials;
    r->o.fold_ud = r;
}

/* The elements of a buffer, or of the shards of a sharded buffer in order, as one array. */
typedef struct parts {
    gr_buffer *const *b;
    size_t count;
} parts;

/* len elements from index `at` of the array into dst (across shards). */
static gr_status read_parts(gr_context *ctx, const parts *p, size_t at, unsigned char *dst, size_t len) {
    size_t es = gr_dtype_size(gr_buffer_dtype(p->b[0]));
    for (size_t i = 0; i < p->count && len; i++) {
        size_t n = gr_buffer_size(p->b[i]);
        if (at >= n) {
            at -= n;
            continue;
        }
        size_t take = n - at < len ? n - at : len;
        gr_status st = gr_buffer_read(ctx, p->b[i], at, dst, take);
        if (st != GR_OK) return st;
        dst += take * es;
        len -= take;
        at = 0;
    }
    return GR_OK;
}

/* The cpu functions over elements [lo, lo + n) of the array, in order: acc = reduce(acc, map(x, i)) from
 * the identity (when the host can read it as a number) or from the first element's map, then post(acc,
 * n) where there is one; the value is pushed. The elements are read a few thousand at a time; i counts
 * from `first`. fmap, fred, fpost: the stack slots of the functions (fpost nil without post). */
static void fold_on_cpu(lua_State *L, gr_operator *op, int fmap, int fred, int fpost, const parts *src, size_t lo,
                        size_t n, size_t first) {
    gr_context *ctx = lgr_ctx(L);
    const gr_operator_spec *spec = gr_operator_get_spec(op);
    gr_scalar id;
    if (gr_operator_identity_value(op, &id)) lgr_push_scalar(L, id);
    else lua_pushnil(L);
    int acc = lua_gettop(L);
    gr_dtype t = gr_buffer_dtype(src->b[0]);
    size_t es = gr_dtype_size(t);
    enum { PER = 4096 };
    unsigned char chunk[PER * 8];
    for (size_t at = 0; at < n; at += PER) {
        size_t len = n - at < PER ? n - at : PER;
        gr_status st = read_parts(ctx, src, lo + at, chunk, len);
        if (st != GR_OK) lgr_fail(L, st, 1, NULL);
        for (size_t k = 0; k < len; k++) {
            lua_pushvalue(L, fmap);
            lgr_push_scalar(L, gr_scalar_load(chunk + k * es, t));
            lua_pushinteger(L, (lua_Integer)(first + at + k));
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
        luaL_argerror(L, 1, lua_pushfstring(L, "operator %s over no element: its identity '%s' is not a number the "
                                               "host can read, and there is no element", spec->name, spec->identity));
    if (lua_isnil(L, fpost)) return;
    lua_pushvalue(L, fpost);
    lua_rotate(L, acc, 1);                      /* post, acc */
    lua_pushinteger(L, (lua_Integer)n);
    lua_call(L, 2, 1);
}

/* The cpu table's functions pushed: map, reduce, post (nil without). Returns map's slot. */
static int push_cpu_functions(lua_State *L, int cpu) {
    lua_getfield(L, cpu, "map");
    lua_getfield(L, cpu, "reduce");
    lua_getfield(L, cpu, "post");
    return lua_gettop(L) - 2;
}

/* Each segment's value stored as element s of the result buffer (on the host: the cpu backend, or a
 * host buffer). */
static int segments_on_cpu(lua_State *L, lgr_reduce_opts *r, const parts *src, int cpu) {
    gr_context *ctx = lgr_ctx(L);
    size_t total = 0;
    for (size_t i = 0; i < src->count; i++) total += gr_buffer_size(src->b[i]);
    gr_buffer *out[2], *home = src->b[0];
    lgr_segment_outs_like(L, gr_buffer_dtype(home), total, gr_buffer_where(home), gr_buffer_device(home), r, out);
    int result = lua_gettop(L);
    gr_segments seg = {r->segment, r->offsets};
    size_t k;
    int64_t *bounds = NULL;
    gr_status st = gr_segment_count_of(ctx, total, &seg, &k);
    if (st == GR_OK && !r->segment) st = gr_segment_bounds_read(ctx, total, &seg, &bounds);
    if (st != GR_OK) return lgr_fail(L, st, 2, NULL);
    int fmap = push_cpu_functions(L, cpu);
    gr_dtype rt = gr_buffer_dtype(out[0]);
    for (size_t s = 0; s < k; s++) {
        size_t lo = r->segment ? s * r->segment : (size_t)bounds[s];
        size_t hi = r->segment ? lo + r->segment : (size_t)bounds[s + 1];
        fold_on_cpu(L, r->user_op, fmap, fmap + 1, fmap + 2, src, lo, hi - lo, 0);
        gr_scalar v = {.kind = GR_SCALAR_UINT};
        if (lua_isboolean(L, -1)) v.v.u = (uint64_t)lua_toboolean(L, -1);     /* post's bool as 0 / 1 */
        else v = lgr_check_number(L, -1, "the operator's cpu value of a segment");
        lua_pop(L, 1);
        unsigned char bytes[8];
        st = gr_scalar_store(ctx, v, rt, bytes, "result");
        if (st == GR_OK) st = gr_buffer_write(ctx, out[0], s, bytes, 1);
        if (st != GR_OK) {
            free(bounds);
            return lgr_fail(L, st, 2, NULL);
        }
    }
    free(bounds);
    lua_settop(L, result);
    return 1;
}

/* The whole array with the cpu functions (the cpu backend, host buffers). */
static int reduce_on_cpu(lua_State *L, lgr_reduce_opts *r, const parts *src, int cpu) {
    if (r->async) luaL_argerror(L, 2, "opts.async: a gr.operator's cpu functions run synchronously");
    if (r->o.variant >= 0 || r->o.block || r->o.grid || r->o.finish != GR_FINISH_AUTO || r->o.acc >= 0)
        luaL_argerror(L, 2, "opts: a gr.operator's cpu functions take no variant, block, grid, finish or acc");
    if (r->segment || r->offsets) return segments_on_cpu(L, r, src, cpu);
    size_t total = 0;
    for (size_t i = 0; i < src->count; i++) total += gr_buffer_size(src->b[i]);
    int fmap = push_cpu_functions(L, cpu);
    fold_on_cpu(L, r->user_op, fmap, fmap + 1, fmap + 2, src, 0, total, 0);
    return 1;
}

/* gpu_to_gpu has no form for an operator: refused before its cpu functions could run. */
static void refuse_exact(lua_State *L, const lgr_reduce_opts *r) {
    if (r->o.determinism == GR_DET_GPU_TO_GPU)
        luaL_argerror(L, 2, "opts.determinism: 'gpu_to_gpu' has no form for a user operator (its combine is the "
                            "user's) (accepted with operators: not_guaranteed, run_to_run)");
}

/* The operator's cpu functions over the array, when it has them (returns 1, the value pushed); on the cpu
 * backend a clear error without them; else 0 (the GPU's turn). */
static int run_cpu_functions(lua_State *L, lgr_reduce_opts *r, const parts *src) {
    lua_getfield(L, 2, "op");
    lua_getiuservalue(L, -1, 1);
    int cpu = lua_gettop(L);
    if (lua_istable(L, cpu)) return reduce_on_cpu(L, r, src, cpu);
    if (gr_context_backend(lgr_ctx(L)) != GR_BACKEND_CUDA)
        luaL_argerror(L, 2, lua_pushfstring(L, "opts.op: operator %s has no cpu functions, and the cpu backend "
                                               "cannot run its kernels (give gr.operator a cpu table)",
                                            gr_operator_get_spec(r->user_op)->name));
    lua_pop(L, 2);
    return 0;
}

int lgr_reduce_operator(lua_State *L, lgr_reduce_opts *r, gr_buffer *b) {
    gr_context *ctx = lgr_ctx(L);
    refuse_exact(L, r);
    /* the GPU reduces device buffers, and host data it streams */
    if (gr_context_backend(ctx) == GR_BACKEND_CUDA && (gr_buffer_where(b) == GR_DEVICE || r->streamed)) {
        lgr_operator_prepare(L, r, b);          /* nothing more to look up on a repeated call */
        return -1;
    }
    parts one = {&b, 1};
    if (run_cpu_functions(L, r, &one)) return 1;
    lgr_operator_prepare(L, r, b);              /* a host buffer: the engine says what it cannot do */
    return -1;
}

int lgr_reduce_sharded_operator(lua_State *L, lgr_reduce_opts *r, gr_buffer *const *shards, size_t count) {
    refuse_exact(L, r);
    int device = gr_context_backend(lgr_ctx(L)) == GR_BACKEND_CUDA;
    for (size_t i = 0; i < count; i++) device = device && gr_buffer_where(shards[i]) == GR_DEVICE;
    if (device) {
        lgr_operator_prepare(L, r, shards[0]);  /* the engine loads it on the other shards' devices */
        return -1;
    }
    parts all = {shards, count};
    if (run_cpu_functions(L, r, &all)) return 1;
    lgr_operator_prepare(L, r, shards[0]);      /* the engine says what it cannot do */
    return -1;
}

/* gr.reduce_many with opts.op an operator: on the GPU the device buffers of each dtype in one launch of
 * the operator's kernels for that dtype; host data, and everything on the cpu backend, through its cpu
 * functions one buffer at a time. Pushes the table of results. */
int lgr_reduce_many_operator(lua_State *L, lgr_reduce_opts *r, gr_buffer **bufs, size_t count) {
    gr_context *ctx = lgr_ctx(L);
    refuse_exact(L, r);
    r->many = 1;
    lua_createtable(L, count < INT32_MAX ? (int)count : 0, 0);
    int results = lua_gettop(L);
    int gpu = gr_context_backend(ctx) == GR_BACKEND_CUDA;
    gr_buffer **group = lua_newuserdatauv(L, (count ? count : 1) * sizeof *group, 0);
    size_t *where = lua_newuserdatauv(L, (count ? count : 1) * sizeof *where, 0);
    gr_result *res = lua_newuserdatauv(L, (count ? count : 1) * sizeof *res, 0);
    for (int t = 0; t < GR_DTYPE_COUNT && gpu; t++) {
        size_t m = 0;
        for (size_t i = 0; i < count; i++)
            if (gr_buffer_dtype(bufs[i]) == (gr_dtype)t && gr_buffer_where(bufs[i]) == GR_DEVICE) {
                where[m] = i;
                group[m++] = bufs[i];
            }
        if (m == 0) continue;
        lgr_operator_prepare(L, r, group[0]);
        gr_status st = gr_reduce_many(ctx, group, m, &r->o, res);
        if (lgr_retry_after_gc(L, st)) st = gr_reduce_many(ctx, group, m, &r->o, res);
        if (st != GR_OK) return lgr_fail(L, st, 2, NULL);
        for (size_t j = 0; j < m; j++) {
            lgr_push_scalar(L, res[j].value[0]);
            lua_rawseti(L, results, (lua_Integer)where[j] + 1);
        }
    }
    int cpu = 0;
    for (size_t i = 0; i < count; i++) {
        if (gpu && gr_buffer_where(bufs[i]) == GR_DEVICE) continue;
        if (!cpu) {
            lua_getfield(L, 2, "op");
            lua_getiuservalue(L, -1, 1);
            if (!lua_istable(L, -1))
                return luaL_argerror(L, 2, lua_pushfstring(L, "opts.op: operator %s has no cpu functions for %s (give "
                                                              "gr.operator a cpu table)", gr_operator_get_spec(r->user_op)->name,
                                                           gpu ? "host buffers" : "the cpu backend"));
            cpu = push_cpu_functions(L, lua_gettop(L));
        }
        parts one = {&bufs[i], 1};
        fold_on_cpu(L, r->user_op, cpu, cpu + 1, cpu + 2, &one, 0, gr_buffer_size(bufs[i]), 0);
        lua_rawseti(L, results, (lua_Integer)i + 1);
    }
    lua_settop(L, results);
    return 1;
}
