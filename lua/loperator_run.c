/*
 * loperator_run.c -- gr.reduce(b, {op = operator}): a user operator's kernels prepared for the GPU (the
 * engine's plan and passes, engine/user/operator_run.c), or its cpu table handed to the engine as functions
 * (gr_options.cpu; engine/core/operator_cpu.c runs them on the cpu backend and for host buffers).
 *
 * The functions here only translate: an accumulator or an element to a Lua value, the table's function
 * called under lua_pcall, its result checked for type and handed back. They never raise -- the engine's
 * frames are below them -- so every failure becomes the context's error, naming the function. The cpu
 * table's functions and two accumulator slots (struct accumulators live there) are on the stack for the
 * call's duration.
 */
#include "binding.h"

#include <stdio.h>
#include <string.h>

enum { F_MAP, F_REDUCE, F_POST, F_IDENTITY };
static const char *const fn_names[] = {"cpu.map", "cpu.reduce", "cpu.post", "cpu.identity"};

/* ---- the engine's calls into the cpu table --------------------------------------------------------- */

static gr_status fail(lgr_request *r, const char *fmt, const char *fn, const char *what, const char *more) {
    char msg[480];
    snprintf(msg, sizeof msg, fmt, fn, what, more);
    return gr_set_error(r->cpu_ctx, GR_EINVAL, "op", msg);
}

/* What a function gave, for messages: "nothing", "nil", "a table", ... (no allocation). */
static const char *given(lua_State *L, int none) {
    static const char *const names[] = {"nil", "a boolean", "a userdata", "a number", "a string", "a table",
                                        "a function", "a userdata", "a thread"};
    int t = lua_type(L, -1);
    return none ? "nothing" : t >= 0 && t < (int)(sizeof names / sizeof *names) ? names[t] : "a value";
}

/* Function `which` of the cpu table pushed (use_cpu_functions made room for it and its arguments);
 * returns the top it was pushed above. */
static int push_fn(lgr_request *r, int which) {
    int base = lua_gettop(r->cpu_L);
    lua_pushvalue(r->cpu_L, r->cpu_fn + which);
    return base;
}

/* Calls function `which`, pushed above `base` with its nargs arguments: GR_OK with its first result
 * alone at base + 1 (nil where it returned nothing, *none set), or the context's error, the stack back
 * at base. */
static gr_status call(lgr_request *r, int which, int base, int nargs, int *none) {
    lua_State *L = r->cpu_L;
    if (lua_pcall(L, nargs, LUA_MULTRET, 0) != LUA_OK) {
        char why[64];
        const char *msg = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : why;
        if (msg == why) snprintf(why, sizeof why, "%s error value", given(L, 0));
        gr_status st = fail(r, "the operator's %s failed: %s%s", fn_names[which], msg, "");
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
static gr_status take_acc(lgr_request *r, int which, int none, gr_cpu_acc *out) {
    lua_State *L = r->cpu_L;
    gr_status st = GR_OK;
    if (r->cpu_acc < 0 && !lua_isnil(L, -1)) {
        lua_replace(L, r->cpu_slots + (int)out->slot);
        return GR_OK;
    }
    if (r->cpu_acc >= 0 && lua_isinteger(L, -1)) {
        out->value.kind = GR_SCALAR_INT;
        out->value.v.i = (int64_t)lua_tointeger(L, -1);
    } else if (r->cpu_acc >= 0 && lua_type(L, -1) == LUA_TNUMBER) {
        out->value.kind = GR_SCALAR_FLOAT;
        out->value.v.f = (double)lua_tonumber(L, -1);
    } else if (r->cpu_acc >= 0) {
        st = fail(r, "the operator's %s returned %s, not a number (its accumulator is %s)", fn_names[which],
                  given(L, none), gr_dtype_name((gr_dtype)r->cpu_acc));
    } else {
        st = fail(r, "the operator's %s returned %s, not an accumulator%s", fn_names[which], given(L, none), "");
    }
    lua_settop(L, -2);
    return st;
}

static void push_acc(lgr_request *r, const gr_cpu_acc *a) {
    if (r->cpu_acc < 0) lua_pushvalue(r->cpu_L, r->cpu_slots + (int)a->slot);
    else lgr_push_scalar(r->cpu_L, a->value);
}

static gr_status cpu_map(void *ud, gr_scalar x, uint64_t i, gr_cpu_acc *out) {
    lgr_request *r = ud;
    int base = push_fn(r, F_MAP), none;
    lgr_push_scalar(r->cpu_L, x);
    lua_pushinteger(r->cpu_L, (lua_Integer)i);
    gr_status st = call(r, F_MAP, base, 2, &none);
    return st == GR_OK ? take_acc(r, F_MAP, none, out) : st;
}

static gr_status cpu_reduce(void *ud, const gr_cpu_acc *a, const gr_cpu_acc *b, gr_cpu_acc *out) {
    lgr_request *r = ud;
    int base = push_fn(r, F_REDUCE), none;
    push_acc(r, a);
    push_acc(r, b);
    gr_status st = call(r, F_REDUCE, base, 2, &none);
    return st == GR_OK ? take_acc(r, F_REDUCE, none, out) : st;
}

static gr_status cpu_post(void *ud, const gr_cpu_acc *a, uint64_t n, gr_scalar *out) {
    lgr_request *r = ud;
    lua_State *L = r->cpu_L;
    int base = push_fn(r, F_POST), none;
    push_acc(r, a);
    lua_pushinteger(L, (lua_Integer)n);
    gr_status st = call(r, F_POST, base, 2, &none);
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
        st = fail(r, "the operator's %s returned %s, not a number or a boolean%s", fn_names[F_POST], given(L, none), "");
    }
    lua_pop(L, 1);
    return st;
}

static gr_status cpu_identity(void *ud, gr_cpu_acc *out) {
    lgr_request *r = ud;
    int base = push_fn(r, F_IDENTITY), none = 0;
    /* an identity that is not a function is its own value */
    gr_status st = lua_isfunction(r->cpu_L, -1) ? call(r, F_IDENTITY, base, 0, &none) : GR_OK;
    return st == GR_OK ? take_acc(r, F_IDENTITY, none, out) : st;
}

/* gr_options.fold: the partials of a CPU finish folded by cpu.reduce (engine/core/operator_cpu.c). */
static gr_status fold_partials(void *ud, const void *partials, size_t count, void *out) {
    lgr_request *r = ud;
    return gr_operator_cpu_fold(r->cpu_ctx, &r->cpu, (gr_dtype)r->cpu_acc, partials, count, out);
}

/* opts.op's cpu table made the engine's functions: its map, reduce, post and identity and two
 * accumulator slots pushed, r->cpu filled and r->o.cpu set. 0 (nothing pushed) without a cpu table. */
static int use_cpu_functions(lua_State *L, lgr_request *r) {
    if (r->o.cpu) return 1;
    lua_getfield(L, 2, "op");
    if (lua_getiuservalue(L, -1, 1) != LUA_TTABLE) {
        lua_pop(L, 2);
        return 0;
    }
    int cpu = lua_gettop(L);
    /* the functions and slots, then room for the calls: the engine calls them with a few values more
     * on the stack than now, and a C function's room lasts until it returns */
    luaL_checkstack(L, 6 + LUA_MINSTACK, "the operator's cpu functions");
    for (int k = F_MAP; k <= F_IDENTITY; k++) lua_getfield(L, cpu, fn_names[k] + 4);
    lua_pushnil(L);
    lua_pushnil(L);
    r->cpu_L = L;
    r->cpu_ctx = lgr_ctx(L);
    r->cpu_fn = cpu + 1;
    r->cpu_slots = cpu + 5;
    r->cpu_acc = gr_operator_acc_dtype(r->user_op);
    r->cpu = (gr_operator_cpu){r->user_op, cpu_map, cpu_reduce, lua_isnil(L, r->cpu_fn + F_POST) ? NULL : cpu_post,
                               lua_isnil(L, r->cpu_fn + F_IDENTITY) ? NULL : cpu_identity, r};
    r->o.cpu = &r->cpu;
    return 1;
}

/* ---- choosing the kernels or the cpu functions ---------------------------------------------------- */

/* opts.op's operator prepared for b's dtype on the GPU: r->o.user set, or a Lua error. */
void lgr_operator_prepare(lua_State *L, lgr_request *r, gr_buffer *b) {
    const gr_operator_image *img;
    gr_status st = (r->segment || r->offsets || r->many ? gr_operator_prepare_segments : gr_operator_prepare)(
        lgr_ctx(L), lgr_operator_cache(L), r->user_op, gr_buffer_dtype(b), &img);
    if (st != GR_OK) lgr_fail(L, st, 2, NULL);
    r->o.user = img;
    if (r->o.finish != GR_FINISH_HYBRID && r->o.finish != GR_FINISH_HOST) return;
    if (!use_cpu_functions(L, r)) return;       /* the planner says what is missing */
    r->o.fold = fold_partials;
    r->o.fold_ud = r;
}

/* gpu_to_gpu has no form for an operator: refused before anything runs. */
static void refuse_exact(lua_State *L, const lgr_request *r) {
    if (r->o.determinism == GR_DET_GPU_TO_GPU)
        luaL_argerror(L, 2, "opts.determinism: 'gpu_to_gpu' has no form for a user operator (its combine is the "
                            "user's) (accepted with operators: not_guaranteed, run_to_run)");
}

/* Where the GPU does not reduce: the cpu functions, or on the cpu backend a clear error without them;
 * else the kernels prepared for `home`, and the engine says what they cannot do. */
static void off_the_gpu(lua_State *L, lgr_request *r, gr_buffer *home) {
    if (use_cpu_functions(L, r)) return;
    if (gr_context_backend(lgr_ctx(L)) != GR_BACKEND_CUDA)
        luaL_argerror(L, 2, lua_pushfstring(L, "opts.op: operator %s has no cpu functions, and the cpu backend "
                                               "cannot run its kernels (give gr.operator a cpu table)",
                                            gr_operator_get_spec(r->user_op)->name));
    lgr_operator_prepare(L, r, home);
}

void lgr_reduce_operator(lua_State *L, lgr_request *r, gr_buffer *b) {
    refuse_exact(L, r);
    /* the GPU reduces device buffers, and host data it streams */
    if (gr_context_backend(lgr_ctx(L)) == GR_BACKEND_CUDA && (gr_buffer_where(b) == GR_DEVICE || r->streamed))
        lgr_operator_prepare(L, r, b);          /* nothing more to look up on a repeated call */
    else
        off_the_gpu(L, r, b);
}

void lgr_reduce_sharded_operator(lua_State *L, lgr_request *r, gr_buffer *const *shards, size_t count) {
    refuse_exact(L, r);
    int device = gr_context_backend(lgr_ctx(L)) == GR_BACKEND_CUDA;
    for (size_t i = 0; i < count; i++) device = device && gr_buffer_where(shards[i]) == GR_DEVICE;
    if (device) lgr_operator_prepare(L, r, shards[0]);  /* the engine loads it on the other shards' devices */
    else off_the_gpu(L, r, shards[0]);
}

/* ---- reduce_many ----------------------------------------------------------------------------------- */

/* bufs[where[j]] for j < m reduced with r's options (the cpu functions, or one dtype's kernels), the
 * values stored at those places of the results table. */
static void reduce_group(lua_State *L, lgr_request *r, gr_buffer **group, const size_t *where, size_t m,
                         gr_result *res, int results) {
    gr_context *ctx = lgr_ctx(L);
    gr_status st;
    LGR_RETRY(L, st, gr_reduce_many(ctx, group, m, &r->o, res));
    if (st != GR_OK) lgr_fail(L, st, 2, "bufs", 1, NULL);
    for (size_t j = 0; j < m; j++) {
        lgr_push_scalar(L, res[j].value[0]);
        lua_rawseti(L, results, (lua_Integer)where[j] + 1);
    }
}

/* gr.reduce_many with opts.op an operator: on the GPU the device buffers of each dtype in one launch of
 * the operator's kernels for that dtype; host data, and everything on the cpu backend, through its cpu
 * functions. Pushes the table of results. */
int lgr_reduce_many_operator(lua_State *L, lgr_request *r, gr_buffer **bufs, size_t count) {
    refuse_exact(L, r);
    r->many = 1;
    lua_createtable(L, count < INT32_MAX ? (int)count : 0, 0);
    int results = lua_gettop(L);
    int gpu = gr_context_backend(lgr_ctx(L)) == GR_BACKEND_CUDA;
    size_t n = count ? count : 1;
    gr_buffer **group = lua_newuserdatauv(L, n * sizeof *group, 0);
    size_t *where = lua_newuserdatauv(L, n * sizeof *where, 0);
    gr_result *res = lua_newuserdatauv(L, n * sizeof *res, 0);
    /* every dtype's kernels first: a CPU finish runs cpu.reduce, which may free the operator */
    const gr_operator_image *img[GR_DTYPE_COUNT] = {NULL};
    for (size_t i = 0; i < count && gpu; i++) {
        gr_dtype t = gr_buffer_dtype(bufs[i]);
        if (gr_buffer_where(bufs[i]) == GR_DEVICE && !img[t]) {
            lgr_operator_prepare(L, r, bufs[i]);
            img[t] = r->o.user;
        }
    }
    for (int t = 0; t < GR_DTYPE_COUNT && gpu; t++) {
        size_t m = 0;
        for (size_t i = 0; i < count; i++)
            if (gr_buffer_dtype(bufs[i]) == (gr_dtype)t && gr_buffer_where(bufs[i]) == GR_DEVICE) {
                where[m] = i;
                group[m++] = bufs[i];
            }
        r->o.user = img[t];
        if (m) reduce_group(L, r, group, where, m, res, results);
    }
    size_t m = 0;
    for (size_t i = 0; i < count; i++)
        if (!gpu || gr_buffer_where(bufs[i]) != GR_DEVICE) {
            where[m] = i;
            group[m++] = bufs[i];
        }
    if ((m || !gpu) && !use_cpu_functions(L, r))
        return luaL_argerror(L, 2, lua_pushfstring(L, "opts.op: operator %s has no cpu functions for %s (give "
                                                      "gr.operator a cpu table)", gr_operator_get_spec(r->user_op)->name,
                                                   gpu ? "host buffers" : "the cpu backend"));
    r->o.user = NULL;                           /* the engine runs the cpu functions over them all */
    r->o.fold = NULL;
    if (m || !gpu) reduce_group(L, r, group, where, m, res, results);
    lua_settop(L, results);
    return 1;
}
