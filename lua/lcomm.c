/*
 * lcomm.c -- gr.comm and the Comm userdata: NCCL communicators across processes (engine/multi/comm.c).
 *
 * The table of gr.comm{rank =, size =, id =, timeout =, device =} is read by the options parser; the
 * communicator is destroyed by c:destroy(), __close or __gc (one idempotent release), and a method of a
 * destroyed one raises saying so.
 */
#include "lcomm.h"
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

#define S(f) offsetof(gr_comm_spec, f)
static const lgr_opt comm_specs[] = {
    {"device", lgr_read_int, S(device), 1, INT_MAX, NULL},
    {"id", read_text, S(id), 0, 0, NULL},
    {"rank", lgr_read_int, S(rank), 0, INT_MAX, NULL},
    {"size", lgr_read_int, S(size), 1, INT_MAX, NULL},
    {"timeout", read_seconds, S(timeout), 0, 0, NULL},
    {NULL, NULL, 0, 0, 0, NULL}};
#undef S

typedef struct { gr_comm *c; } lcomm;

static gr_comm *check_comm(lua_State *L) {
    lcomm *u = luaL_checkudata(L, 1, COMM_MT);
    if (!u->c) luaL_argerror(L, 1, "communicator has been destroyed");
    return u->c;
}

/* gr.comm{rank = r, size = k, id = path_or_hex, timeout = 30, device = d} */
int lgr_comm(lua_State *L) {
    luaL_checktype(L, 1, LUA_TTABLE);
    gr_comm_spec spec = {-1, -1, NULL, 30.0, 0};
    lgr_parse_opts(L, 1, comm_specs, &spec);
    if (spec.rank < 0 || spec.size < 0 || !spec.id)
        return luaL_argerror(L, 1, "opts: rank, size and id are required");
    lcomm *u = lua_newuserdatauv(L, sizeof *u, 0);
    u->c = NULL;
    luaL_setmetatable(L, COMM_MT);
    gr_status st = gr_comm_create(lgr_ctx(L), &spec, &u->c);
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

/* c:reduce(b, opts): opts as gr.reduce's (op defaults to sum). */
static int c_reduce(lua_State *L) {
    gr_comm *c = check_comm(L);
    gr_buffer *b = lgr_check_buffer(L, 2);
    lua_remove(L, 1);                   /* (b, opts), as gr.reduce reads them */
    lgr_request r;
    lgr_request_read(L, 2, -1, 0, &r);
    if (r.async || r.streamed || r.segment || r.offsets || r.user_op || r.dtype >= 0)
        return luaL_argerror(L, 2, "opts: c:reduce takes a built-in op and the options of a whole-buffer "
                                   "reduction (not async, streamed, segment, offsets, out, dtype or an operator)");
    gr_result v;
    gr_status st = gr_comm_reduce(lgr_ctx(L), c, b, &r.o, &v);
    if (st != GR_OK) return lgr_fail(L, st, 2, "b", 1, NULL);
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

static int c_tostring(lua_State *L) {
    lcomm *u = luaL_checkudata(L, 1, COMM_MT);
    if (!u->c) lua_pushstring(L, "gpureduce.Comm(destroyed)");
    else lua_pushfstring(L, "gpureduce.Comm(rank %d of %d, device %d)", gr_comm_rank(u->c), gr_comm_size(u->c),
                         gr_comm_device(u->c));
    return 1;
}

const luaL_Reg lgr_comm_methods[] = {
    {"_bench_raw", c_bench_raw}, {"allreduce", c_allreduce}, {"barrier", c_barrier}, {"destroy", c_release},
    {"device", c_device}, {"rank", c_rank}, {"reduce", c_reduce}, {"size", c_size}, {NULL, NULL}};
const luaL_Reg lgr_comm_meta[] = {
    {"__close", c_release}, {"__gc", c_release}, {"__tostring", c_tostring}, {NULL, NULL}};
