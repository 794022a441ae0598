/*
 * lcomm.c -- gr.comm and the Comm userdata: NCCL communicators across processes (engine/multi/comm.c,
 * comm_env.c).
 *
 * gr.comm takes one of three forms, told apart by the keys of its table (read by the options parser):
 * {rank =, size =, id =, timeout =, device =} joins as told; {handle = p, timeout =} borrows the host
 * application's ncclComm_t; no table, or one with none of those keys, joins as the launcher's
 * environment says. The communicator is destroyed by c:destroy(), __close or __gc (one idempotent
 * release; a borrowed one loses only its wrapper), and a method of a destroyed one raises saying so.
 */
#include "lcomm.h"
#include "laxes.h"
#include "lbuffer.h"
#include "lopts.h"
#include "lrequest.h"

#include <float.h>
#include <limits.h>

static void read_text(lua_State *L, int arg, const lgr_opt *opt, void *field) {
    if (lua_type(L, -1) != LUA_TSTRING)
        luaL_argerror(L, arg, lua_pushfstring(L, "opts.%s: expected a file path or the string of gr.comm_id(), "
                                              "got %s", opt->key, luaL_typename(L, -1)));
    *(const char **)field = lua_tostring(L, -1);       /* lives in the options table, on the stack */
}

static void read_seconds(lua_State *L, int arg, const lgr_opt *opt, void *field) {
    if (lua_type(L, -1) != LUA_TNUMBER || !(lua_tonumber(L, -1) > 0) || lua_tonumber(L, -1) > DBL_MAX)
        luaL_argerror(L, arg, lua_pushfstring(L, "opts.%s: expected a positive number of seconds, got %s", opt->key,
                                              luaL_tolstring(L, -1, NULL)));
    *(double *)field = lua_tonumber(L, -1);
}

static void read_handle(lua_State *L, int arg, const lgr_opt *opt, void *field) {
    if (lua_type(L, -1) != LUA_TLIGHTUSERDATA || !lua_touserdata(L, -1))
        luaL_argerror(L, arg, lua_pushfstring(L, "opts.%s: expected an ncclComm_t as a light userdata (c:handle() "
                                              "gives one), got %s", opt->key, lua_type(L, -1) == LUA_TLIGHTUSERDATA ?
                                              "NULL" : luaL_typename(L, -1)));
    *(void **)field = lua_touserdata(L, -1);
}

typedef struct {
    gr_comm_spec spec;
    void *handle;           /* {handle = p}: borrowed */
} comm_opts;

#define S(f) offsetof(comm_opts, f)
static const lgr_opt comm_specs[] = {
    {"device", lgr_read_int, S(spec.device), 1, INT_MAX, NULL},
    {"handle", read_handle, S(handle), 0, 0, NULL},
    {"id", read_text, S(spec.id), 0, 0, NULL},
    {"rank", lgr_read_int, S(spec.rank), 0, INT_MAX, NULL},
    {"size", lgr_read_int, S(spec.size), 1, INT_MAX, NULL},
    {"timeout", read_seconds, S(spec.timeout), 0, 0, NULL},
    {NULL, NULL, 0, 0, 0, NULL}};
#undef S

/* Whether the options table at arg has `key` (read before parsing: a conflict is named before a type). */
static int has_key(lua_State *L, int arg, const char *key) {
    int set = lua_istable(L, arg) && lua_getfield(L, arg, key) != LUA_TNIL;
    if (lua_istable(L, arg)) lua_pop(L, 1);
    return set;
}

typedef struct { gr_comm *c; } lcomm;

static gr_comm *check_comm(lua_State *L) {
    lcomm *u = luaL_checkudata(L, 1, COMM_MT);
    if (!u->c) luaL_argerror(L, 1, "communicator has been destroyed");
    return u->c;
}

/* gr.comm{rank = r, size = k, id = path_or_hex, timeout = 30, device = d}; gr.comm{handle = p, timeout = 30};
 * gr.comm() or gr.comm{timeout = 30}: from the launcher's environment. */
int lgr_comm(lua_State *L) {
    if (!lua_isnoneornil(L, 1)) luaL_checktype(L, 1, LUA_TTABLE);
    int told = has_key(L, 1, "rank") || has_key(L, 1, "size") || has_key(L, 1, "id");
    if (has_key(L, 1, "handle") && (told || has_key(L, 1, "device")))
        return luaL_argerror(L, 1, "opts.handle: a borrowed communicator's rank, size and device are NCCL's (not "
                                   "with rank, size, id or device)");
    if (!told && !has_key(L, 1, "handle") && has_key(L, 1, "device"))
        return luaL_argerror(L, 1, "opts.device: from the launcher's environment the device is the local rank's "
                                   "(LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_RANK or SLURM_LOCALID, plus 1)");
    comm_opts o = {{-1, -1, NULL, 30.0, 0}, NULL};
    lgr_parse_opts(L, 1, comm_specs, &o);
    if (told && (o.spec.rank < 0 || o.spec.size < 0 || !o.spec.id))
        return luaL_argerror(L, 1, "opts: rank, size and id are required");
    lcomm *u = lua_newuserdatauv(L, sizeof *u, 0);
    u->c = NULL;
    luaL_setmetatable(L, COMM_MT);
    gr_context *ctx = lgr_ctx(L);
    gr_status st = o.handle ? gr_comm_borrow(ctx, o.handle, o.spec.timeout, &u->c)
                 : told ? gr_comm_create(ctx, &o.spec, &u->c)
                 : gr_comm_from_env(ctx, o.spec.timeout, &u->c);
    if (st != GR_OK) return lgr_fail(L, st, 1, NULL);
    return 1;
}

/* gr.comm_id(): a new communicator id as hex text, for the caller to hand to the other ranks. */
int lgr_comm_id(lua_State *L) {
    char hex[GR_COMM_ID_CHARS + 1];
    gr_status st = gr_comm_id(lgr_ctx(L), hex);
    if (st != GR_OK) return lgr_fail(L, st, 0, NULL);
    lua_pushstring(L, hex);
    return 1;
}

/* gr.nccl_version(): NCCL's version code (22809 for 2.28.9), or nil when it cannot be opened. */
int lgr_nccl_version(lua_State *L) {
    int v = gr_nccl_version();
    if (v) lua_pushinteger(L, v);
    else lua_pushnil(L);
    return 1;
}

static int c_release(lua_State *L) {
    lcomm *u = luaL_checkudata(L, 1, COMM_MT);
    gr_context *ctx = lgr_ctx_or_null(L);
    if (u->c && ctx) gr_comm_destroy(ctx, u->c);
    u->c = NULL;
    return 0;
}

static int c_allreduce(lua_State *L) {
    gr_comm *c = check_comm(L);
    gr_buffer *b = lgr_check_buffer(L, 2);
    gr_comm_op op = (gr_comm_op)luaL_checkoption(L, 3, "sum", gr_comm_op_names);
    gr_status st = gr_comm_allreduce(lgr_ctx(L), c, b, op);
    if (st != GR_OK) return lgr_fail(L, st, 0, "b", 2, "op", 3, NULL);
    lua_settop(L, 2);
    return 1;
}

/* c:reduce(b, opts): opts as gr.reduce's (op defaults to sum): one value, or with opts.axis the result
 * buffer (opts.out's or a new one), combined across the ranks. */
static int c_reduce(lua_State *L) {
    gr_comm *c = check_comm(L);
    lgr_check_buffer(L, 2);
    lua_remove(L, 1);                   /* (b, opts), as gr.reduce reads them */
    lgr_request r;
    lgr_request_read(L, 2, -1, 0, &r);
    if (r.async || r.streamed || r.segment || r.offsets || r.user_op || r.dtype >= 0)
        return luaL_argerror(L, 2, "opts: c:reduce takes a built-in op and the options of a whole-buffer reduction "
                                   "or of one along axes (not async, streamed, segment, offsets, dtype or an operator)");
    gr_context *ctx = lgr_ctx(L);
    gr_status st;
    if (r.naxes) {                      /* along axes: the view as it is, into buffers of the result shape */
        if (r.o.stream)
            return luaL_argerror(L, 2, "opts.stream: c:reduce along axes runs on the communicator's stream (leave "
                                       "it out)");
        gr_buffer *v = lgr_check_buffer(L, 1);
        lgr_request_prepare(L, &r, LGR_FOR_RUN, &v, 1);
        unsigned axes;
        gr_buffer *out[2];
        int count = lgr_axes_outs(L, v, &r, &axes, out);
        /* no retry after a collection: a collective must be called once on every rank */
        st = gr_comm_reduce_axes(ctx, c, v, &r.o, axes, out);
        if (st != GR_OK) return lgr_fail(L, st, 2, "b", 1, NULL);
        return count;
    }
    gr_buffer *b = lgr_check_reduced_buffer(L, 1, lgr_request_order_free(&r));
    lgr_request_prepare(L, &r, LGR_FOR_RUN, &b, 1);
    gr_result v;
    st = gr_comm_reduce(ctx, c, b, &r.o, &v);
    if (st != GR_OK) return lgr_fail(L, st, 2, "b", 1, NULL);
    return lgr_push_result(L, &v);
}

/* gr.debug_comm_combine({b1, b2, ...}, opts): what c:reduce(b, opts) gives every rank of a job whose rank
 * i - 1 holds bi, for the ops whose accumulators the ranks gather (mean, var, argmin, ...; every op at
 * gpu_to_gpu), merged in this process: no communicator, any backend. With opts.axis, the buffers of
 * results along the axes (from the ranks' parts, or from their elements one after another). */
int lgr_debug_comm_combine(lua_State *L) {
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_Integer k = luaL_len(L, 1);
    if (k < 1 || k > 65536)
        return luaL_argerror(L, 1, lua_pushfstring(L, "expected a list of 1 to 65536 buffers (got %I)", k));
    lgr_request r;
    lgr_request_read(L, 2, -1, 0, &r);
    if (r.async || r.streamed || r.segment || r.offsets || r.user_op || r.dtype >= 0)
        return luaL_argerror(L, 2, "opts: c:reduce's parts are whole-buffer reductions of a built-in op, or ones "
                                   "along axes (not async, streamed, segment, offsets, dtype or an operator)");
    luaL_checkstack(L, (int)k + 4, "too many buffers");
    gr_buffer **parts = lua_newuserdatauv(L, (size_t)k * sizeof *parts, 0);     /* the collector frees it */
    int base = lua_gettop(L);
    for (lua_Integer i = 1; i <= k; i++) {
        lua_geti(L, 1, i);              /* kept on the stack: a compact copy replaces a strided view there */
        if (!luaL_testudata(L, -1, BUFFER_MT))
            return luaL_argerror(L, 1, lua_pushfstring(L, "element %I: expected a buffer, got %s", i,
                                                       luaL_typename(L, -1)));
        /* along axes the views as they are, as c:reduce takes them */
        parts[i - 1] = r.naxes ? lgr_check_buffer(L, base + (int)i)
                               : lgr_check_reduced_buffer(L, base + (int)i, lgr_request_order_free(&r));
    }
    lgr_request_prepare(L, &r, LGR_FOR_RUN, parts, 1);
    if (r.naxes) {                      /* into buffers of the result shape of the first part */
        unsigned axes;
        gr_buffer *out[2];
        int count = lgr_axes_outs(L, parts[0], &r, &axes, out);
        gr_status st = gr_comm_combine_axes(lgr_ctx(L), parts, (size_t)k, &r.o, axes, out);
        if (st != GR_OK) return lgr_fail(L, st, 2, "parts", 1, "b", 1, NULL);
        return count;
    }
    gr_result v;
    gr_status st = gr_comm_combine_parts(lgr_ctx(L), parts, (size_t)k, &r.o, &v);
    if (st != GR_OK) return lgr_fail(L, st, 2, "parts", 1, "b", 1, NULL);
    return lgr_push_result(L, &v);
}

static int c_barrier(lua_State *L) {
    gr_status st = gr_comm_barrier(lgr_ctx(L), check_comm(L));
    if (st != GR_OK) return lgr_fail(L, st, 0, NULL);
    return 0;
}

static int c_rank(lua_State *L) {
    lua_pushinteger(L, gr_comm_rank(check_comm(L)));
    return 1;
}

static int c_size(lua_State *L) {
    lua_pushinteger(L, gr_comm_size(check_comm(L)));
    return 1;
}

static int c_device(lua_State *L) {
    lua_pushinteger(L, gr_comm_device(check_comm(L)));
    return 1;
}

/* c:handle(): the ncclComm_t as a light userdata, for gr.comm{handle = p} or a host application. */
static int c_handle(lua_State *L) {
    gr_comm *c = check_comm(L);
    void *p = gr_comm_handle(c);
    if (!p)
        return luaL_error(L, "gpureduce: rank %d of %d: the communicator was given up after an earlier failure; "
                          "it has no handle", gr_comm_rank(c), gr_comm_size(c));
    lua_pushlightuserdata(L, p);
    return 1;
}

/* c:_bench_raw(b, op, reps, sync_each): bare ncclAllReduce timed, seconds per call (the benchmark's
 * yardstick, experiments/multi_gpu/bench.lua). */
static int c_bench_raw(lua_State *L) {
    gr_comm *c = check_comm(L);
    gr_buffer *b = lgr_check_buffer(L, 2);
    gr_comm_op op = (gr_comm_op)luaL_checkoption(L, 3, "sum", gr_comm_op_names);
    int reps = (int)lgr_check_integer(L, 4, "reps", 1, INT_MAX);
    double s;
    gr_status st = gr_comm_bench_raw(lgr_ctx(L), c, b, op, reps, lua_toboolean(L, 5), &s);
    if (st != GR_OK) return lgr_fail(L, st, 0, "b", 2, NULL);
    lua_pushnumber(L, s);
    return 1;
}

/* c:_oneshot(): true where one value is combined through the ranks' mailboxes, false with ncclAllReduce,
 * nil before the ranks have decided (their first one-value c:reduce). */
static int c_oneshot(lua_State *L) {
    int how = gr_comm_oneshot(check_comm(L));
    if (how < 0) lua_pushnil(L);
    else lua_pushboolean(L, how);
    return 1;
}

static int c_tostring(lua_State *L) {
    lcomm *u = luaL_checkudata(L, 1, COMM_MT);
    if (!u->c) lua_pushstring(L, "gpureduce.Comm(destroyed)");
    else lua_pushfstring(L, "gpureduce.Comm(rank %d of %d, device %d)", gr_comm_rank(u->c), gr_comm_size(u->c),
                         gr_comm_device(u->c));
    return 1;
}

const luaL_Reg lgr_comm_methods[] = {
    {"_bench_raw", c_bench_raw}, {"_oneshot", c_oneshot}, {"allreduce", c_allreduce}, {"barrier", c_barrier},
    {"destroy", c_release}, {"device", c_device}, {"handle", c_handle}, {"rank", c_rank}, {"reduce", c_reduce},
    {"size", c_size}, {NULL, NULL}};
const luaL_Reg lgr_comm_meta[] = {
    {"__close", c_release}, {"__gc", c_release}, {"__tostring", c_tostring}, {NULL, NULL}};
