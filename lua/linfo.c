/*
 * linfo.c -- tables about the engine for scripts: the variant registry, the device, plans, benchmarks,
 * the pool's statistics, the names of dtypes, ops and finishing modes, and the testing hooks.
 */
#include "linfo.h"
#include "linputs.h"
#include "laxes.h"
#include "lbuffer.h"
#include "lopts.h"
#include "lrequest.h"

#include <limits.h>
#include <stddef.h>
#include <time.h>


static void push_plan(lua_State *L, const gr_plan *p) {
    lua_createtable(L, 0, 6);
    lgr_set_str(L, "variant", gr_variant_get(p->variant)->name);
    lgr_set_str(L, "finish", gr_finish_name(p->finish));
    lgr_set_str(L, "acc", gr_dtype_name(p->acc));
    lgr_set_int(L, "threshold", (lua_Integer)p->threshold);
    if (p->exact) lgr_set_bool(L, "exact", 1);      /* gpu_to_gpu: the exact kernel's one pass */
    lua_createtable(L, p->npasses, 0);
    for (int i = 0; i < p->npasses; i++) {
        const gr_pass *ps = &p->pass[i];
        lua_createtable(L, 0, 5);
        lgr_set_int(L, "elements", (lua_Integer)ps->elements);
        lgr_set_int(L, "blocks", (lua_Integer)ps->blocks);
        lgr_set_int(L, "block", ps->block);
        lgr_set_str(L, "dtype", gr_dtype_name(ps->in_dtype));
        lgr_set_str(L, "where", ps->on_host ? "host" : "device");
        lua_rawseti(L, -2, i + 1);
    }
    lua_setfield(L, -2, "passes");
}

int lgr_plan(lua_State *L) {
    gr_buffer *b = lgr_check_buffer(L, 1);
    lgr_request r;
    lgr_request_read(L, 2, -1, 0, &r);
    if (r.segment || r.offsets || r.has_out || r.async || r.streamed || r.dtype >= 0)
        return luaL_argerror(L, 2, "opts: gr.plan shows the passes of a whole-buffer reduction (not segment, "
                                   "offsets, out, async, streamed or dtype)");
    lgr_request_prepare(L, &r, LGR_FOR_PLAN, &b, 1);
    gr_plan p;
    gr_status st = gr_plan_make(lgr_ctx(L), b, &r.o, &p);
    if (st != GR_OK) return lgr_fail(L, st, 2, NULL);
    push_plan(L, &p);
    /* a struct accumulator travels as bytes: the plan names the operator's acc instead */
    if (r.user_op && gr_operator_acc_dtype(r.user_op) < 0) lgr_set_str(L, "acc", gr_operator_get_spec(r.user_op)->acc);
    return 1;
}

void lgr_push_bench(lua_State *L, const gr_bench_result *r, gr_buffer *b, const char *timer) {
    lua_createtable(L, 0, 13);
    lgr_set_num(L, "ms", r->ms);
    lgr_set_num(L, "ms_min", r->ms_min);
    lgr_set_num(L, "ms_max", r->ms_max);
    lgr_set_num(L, "gbps", r->gbps);
    lgr_set_int(L, "reps", r->reps);
    lgr_set_int(L, "warmup", r->warmup);
    lgr_set_int(L, "n", (lua_Integer)gr_buffer_size(b));
    lgr_set_int(L, "bytes", (lua_Integer)(gr_buffer_size(b) * gr_dtype_size(gr_buffer_dtype(b))));
    lgr_set_str(L, "timer", timer);
}

/* gr.bench(b, opts): opts as for gr.reduce plus reps (20) and warmup (3); streamed host data too. */
/* gr.bench({x, w, ...}, opts): an operator of several inputs over whole buffers, `bytes` counting every
 * input. */
static int bench_inputs(lua_State *L, lgr_request *r) {
    gr_buffer *bufs[GR_OPERATOR_INPUTS];
    int count = lgr_inputs_read(L, r, 1, bufs);
    gr_context *ctx = lgr_ctx(L);
    gr_bench_result res;
    gr_status st = gr_bench_inputs(ctx, bufs, count, &r->o, r->warmup, r->reps, &res);
    if (st != GR_OK) return lgr_fail(L, st, 2, "bufs", 1, NULL);
    int device = gr_context_backend(ctx) == GR_BACKEND_CUDA && gr_buffer_where(bufs[0]) == GR_DEVICE && r->o.user;
    lgr_push_bench(L, &res, bufs[0], device ? "events" : "clock");
    size_t bytes = 0;
    for (int k = 0; k < count; k++) bytes += gr_buffer_size(bufs[k]) * gr_dtype_size(gr_buffer_dtype(bufs[k]));
    lua_pushinteger(L, (lua_Integer)bytes);
    lua_setfield(L, -2, "bytes");
    return 1;
}

int lgr_bench(lua_State *L) {
    lgr_request x;
    lgr_request_read(L, 2, -1, 1, &x);
    if (lgr_is_buffer_list(L, 1)) return bench_inputs(L, &x);         /* an operator's inputs */
    if (x.naxes) {                                  /* along axes: the view as it is */
        gr_buffer *v = lgr_check_buffer(L, 1);
        lgr_request_prepare(L, &x, LGR_FOR_RUN, &v, 1);
        unsigned axes;
        gr_buffer *out[2];
        lgr_axes_outs(L, v, &x, &axes, out);
        gr_bench_result r;
        gr_status st = gr_bench_axes(lgr_ctx(L), v, &x.o, axes, out, x.warmup, x.reps, &r);
        if (st != GR_OK) return lgr_fail(L, st, 2, NULL);
        int device = gr_context_backend(lgr_ctx(L)) == GR_BACKEND_CUDA && gr_buffer_where(v) == GR_DEVICE;
        lgr_push_bench(L, &r, v, device ? "events" : "clock");
        return 1;
    }
    gr_buffer *b = lgr_check_reduced_buffer(L, 1, lgr_request_order_free(&x));
    lgr_request_prepare(L, &x, LGR_FOR_PLAN, &b, 1);
    gr_context *ctx = lgr_ctx(L);
    gr_bench_result r;
    if (x.segment || x.offsets) {
        gr_buffer *out[2];
        lgr_request_outs(L, b, &x, out);
        gr_segments seg = {x.segment, x.offsets};
        gr_status st = gr_bench_segments(ctx, b, &x.o, &seg, out, x.warmup, x.reps, &r);
        if (st != GR_OK) return lgr_fail(L, st, 2, NULL);
        int device = gr_context_backend(ctx) == GR_BACKEND_CUDA && gr_buffer_where(b) == GR_DEVICE;
        lgr_push_bench(L, &r, b, device ? "events" : "clock");
        return 1;
    }
    if (x.streamed) {
        gr_status st = gr_bench_streamed(ctx, b, &x.o, x.chunk, x.streams, x.warmup, x.reps, &r);
        if (st != GR_OK) return lgr_fail(L, st, 2, NULL);
        lgr_push_bench(L, &r, b, "clock");
        return 1;
    }
    gr_plan p;
    gr_status st = gr_plan_make(ctx, b, &x.o, &p);
    if (st == GR_OK) st = gr_bench(ctx, b, &x.o, x.warmup, x.reps, &r);
    if (st != GR_OK) return lgr_fail(L, st, 2, NULL);
    lgr_push_bench(L, &r, b, p.npasses && !p.pass[0].on_host ? "events" : "clock");
    push_plan(L, &p);
    lua_setfield(L, -2, "plan");
    return 1;
}

/* gr.bench_read(b, {reps=, warmup=}): the read-bandwidth ceiling on this buffer. */
typedef struct { int reps, warmup; } read_opts;
static const lgr_opt read_specs[] = {
    {"reps", lgr_read_int, offsetof(read_opts, reps), 1, INT_MAX, NULL},
    {"warmup", lgr_read_int, offsetof(read_opts, warmup), 0, INT_MAX, NULL},
    {NULL, NULL, 0, 0, 0, NULL}};

int lgr_bench_read(lua_State *L) {
    gr_buffer *b = lgr_check_buffer(L, 1);
    read_opts x = {20, 3};
    lgr_parse_opts(L, 2, read_specs, &x);
    gr_bench_result r;
    gr_status st = gr_bench_read(lgr_ctx(L), b, x.warmup, x.reps, &r);
    if (st != GR_OK) return lgr_fail(L, st, 2, NULL);
    lgr_push_bench(L, &r, b, "events");
    return 1;
}

/* gr.pool_stats(): the scratch pool's allocations, what the context holds, and the buffer pool's figures
 * (the process's, every device's together: docs/api.md "Memory"). */
int lgr_pool_stats(lua_State *L) {
    gr_pool_stats s;
    gr_buffer_pool_stats b;
    gr_pool_stats_get(lgr_ctx(L), &s);
    gr_buffer_pool_stats_get(lgr_ctx(L), &b);
    lua_createtable(L, 0, 12);
    lgr_set_int(L, "device_allocs", (lua_Integer)s.device_allocs);
    lgr_set_int(L, "host_allocs", (lua_Integer)s.host_allocs);
    lgr_set_int(L, "slots", s.slots);
    lgr_set_int(L, "live_device_bytes", (lua_Integer)s.live_device_bytes);
    lgr_set_int(L, "live_pinned_bytes", (lua_Integer)s.live_pinned_bytes);
    lgr_set_int(L, "live_allocations", (lua_Integer)s.live_allocations);
    lgr_set_bool(L, "buffer_pool", b.enabled);
    lgr_set_int(L, "buffer_cached_bytes", (lua_Integer)b.cached_bytes);
    lgr_set_int(L, "buffer_idle_bytes", (lua_Integer)b.idle_bytes);
    lgr_set_int(L, "buffer_used_bytes", (lua_Integer)b.used_bytes);
    lgr_set_int(L, "buffer_hits", (lua_Integer)b.hits);
    lgr_set_int(L, "buffer_misses", (lua_Integer)b.misses);
    return 1;
}

/* gr.pool_trim(): gives back the scratch of idle slots and the buffer pool's idle memory. */
int lgr_pool_trim(lua_State *L) {
    gr_pool_trim(lgr_ctx(L));
    return 0;
}

/* gr.memory_limit(bytes): caps what the context holds (0 = no cap); a test can make a small device. */
int lgr_memory_limit(lua_State *L) {
    lua_Integer bytes = lgr_check_integer(L, 1, "bytes", 0, LUA_MAXINTEGER);
    gr_context_set_memory_limit(lgr_ctx(L), (size_t)bytes);
    return 0;
}

/* gr.debug_fault(kind, k): the k-th "alloc", "launch" or "copy" from now fails (0 disarms). */
int lgr_debug_fault(lua_State *L) {
    const char *kind = luaL_checkstring(L, 1);
    lua_Integer k = lgr_check_integer(L, 2, "k", 0, LONG_MAX);
    gr_status st = gr_debug_fault(lgr_ctx(L), kind, (long)k);
    if (st != GR_OK) return lgr_fail(L, st, 0, "kind", 1, "k", 2, NULL);
    return 0;
}

/* gr.debug_events(): {alloc =, launch =, copy =} events counted so far. */
int lgr_debug_events(lua_State *L) {
    size_t c[3];
    gr_debug_events(lgr_ctx(L), c);
    lua_createtable(L, 0, 3);
    lgr_set_int(L, "alloc", (lua_Integer)c[0]);
    lgr_set_int(L, "launch", (lua_Integer)c[1]);
    lgr_set_int(L, "copy", (lua_Integer)c[2]);
    return 1;
}

/* gr.debug_float_encode(format, x [, from = 64]): the bits of x rounded to a float format narrower than
 * float32 (from = 32: through float32 first); raises where x does not fit. */
int lgr_debug_float_encode(lua_State *L) {
    const char *format = luaL_checkstring(L, 1);
    double x = (double)luaL_checknumber(L, 2);
    int from = lua_isnoneornil(L, 3) ? 64 : (int)lgr_check_integer(L, 3, "from", 0, 64);
    unsigned bits = 0;
    gr_status st = gr_debug_float_encode(lgr_ctx(L), format, x, from, &bits);
    if (st != GR_OK) return lgr_fail(L, st, 0, "format", 1, "x", 2, "from", 3, NULL);
    lua_pushinteger(L, (lua_Integer)bits);
    return 1;
}

/* gr.debug_float_decode(format, bits [, to = 64]): the value of a pattern (to = 32: through float32). */
int lgr_debug_float_decode(lua_State *L) {
    const char *format = luaL_checkstring(L, 1);
    lua_Integer bits = lgr_check_integer(L, 2, "bits", 0, UINT_MAX);
    int to = lua_isnoneornil(L, 3) ? 64 : (int)lgr_check_integer(L, 3, "to", 0, 64);
    double x = 0;
    gr_status st = gr_debug_float_decode(lgr_ctx(L), format, (unsigned)bits, to, &x);
    if (st != GR_OK) return lgr_fail(L, st, 0, "format", 1, "bits", 2, "to", 3, NULL);
    lua_pushnumber(L, (lua_Number)x);
    return 1;
}

/* gr.debug_float_device(format, in, out): the conversions on the device, next to CUDA's (gr.h). */
int lgr_debug_float_device(lua_State *L) {
    const char *format = luaL_checkstring(L, 1);
    gr_buffer *in = lgr_check_buffer(L, 2), *out = lgr_check_buffer(L, 3);
    gr_status st = gr_debug_float_device(lgr_ctx(L), format, in, out);
    if (st != GR_OK) return lgr_fail(L, st, 0, "format", 1, "in", 2, "out", 3, NULL);
    return 0;
}

/* A list of the names of 0 .. count-1 whose bit is set in mask (~0u: all of them). */
static int push_names(lua_State *L, int count, unsigned mask, const char *(*name)(int)) {
    lua_createtable(L, count, 0);
    for (int i = 0, k = 0; i < count; i++)
        if (mask & (1u << i)) {
            lua_pushstring(L, name(i));
            lua_rawseti(L, -2, ++k);
        }
    return 1;
}
static const char *dtype_at(int i) { return gr_dtype_name((gr_dtype)i); }
static const char *op_at(int i) { return gr_op_name((gr_op)i); }
static const char *finish_at(int i) { return gr_finish_name((gr_finish)i); }

void lgr_push_variant(lua_State *L, int i) {
    gr_context *ctx = lgr_ctx(L);
    const gr_variant *v = gr_variant_get(i);
    {
        lua_createtable(L, 0, 12);
        lgr_set_str(L, "name", v->name);
        lgr_set_int(L, "ordinal", v->ordinal);
        lgr_set_str(L, "origin", v->origin);
        lgr_set_str(L, "summary", v->summary);
        push_names(L, GR_FINISH_COUNT, v->finishes & ~(1u << GR_FINISH_AUTO), finish_at);
        lua_setfield(L, -2, "finishes");
        lgr_set_str(L, "default_finish", gr_finish_name(v->default_finish));
        lgr_set_str(L, "determinism", gr_determinism_name(v->determinism));
        lua_createtable(L, 0, 3);
        lgr_set_int(L, "min", v->block_min);
        lgr_set_int(L, "max", v->block_max);
        lgr_set_int(L, "default", v->block_default);
        lua_setfield(L, -2, "block");
        lua_newtable(L);
        int k = 0;
        if (v->needs & GR_NEEDS_CUDA) { lua_pushstring(L, "cuda"); lua_rawseti(L, -2, ++k); }
        if (v->needs & GR_NEEDS_POW2_BLOCK) { lua_pushstring(L, "power-of-two block"); lua_rawseti(L, -2, ++k); }
        lua_setfield(L, -2, "needs");
        lgr_set_bool(L, "available", !(v->needs & GR_NEEDS_CUDA) || gr_context_backend(ctx) == GR_BACKEND_CUDA);
        push_names(L, GR_OP_COUNT, v->ops, op_at);
        lua_setfield(L, -2, "ops");
        push_names(L, GR_DTYPE_COUNT, v->dtypes, dtype_at);
        lua_setfield(L, -2, "dtypes");
        lgr_set_bool(L, "user", v->user);
    }
}

int lgr_variants(lua_State *L) {
    int n = gr_variant_count();
    lua_createtable(L, n, 0);
    for (int i = 0; i < n; i++) {
        lgr_push_variant(L, i);
        lua_rawseti(L, -2, i + 1);
    }
    return 1;
}

int lgr_backend(lua_State *L) {
    lua_pushstring(L, gr_context_backend(lgr_ctx(L)) == GR_BACKEND_CUDA ? "cuda" : "cpu");
    return 1;
}

/* The facts of one GPU as a table. */
static void push_device_info(lua_State *L, const gr_device_info *info) {
    gr_device_info d = *info;
    lua_createtable(L, 0, 14);
    lgr_set_str(L, "name", d.name);
    lgr_set_int(L, "sms", d.sms);
    lgr_set_int(L, "memory", (lua_Integer)d.memory);
    lua_pushfstring(L, "%d.%d", d.cc_major, d.cc_minor);
    lua_setfield(L, -2, "cc");
    lgr_set_int(L, "cc_major", d.cc_major);
    lgr_set_int(L, "cc_minor", d.cc_minor);
    lgr_set_int(L, "l2", (lua_Integer)d.l2);
    lgr_set_int(L, "clock_khz", d.clock_khz);
    lgr_set_int(L, "mem_clock_khz", d.mem_clock_khz);
    lgr_set_int(L, "bus_width", d.bus_width);
    lgr_set_int(L, "max_threads_per_sm", d.max_threads_per_sm);
    lua_pushfstring(L, "%d.%d", d.runtime_version / 1000, (d.runtime_version % 1000) / 10);
    lua_setfield(L, -2, "cuda_runtime");
    lua_pushfstring(L, "%d.%d", d.driver_version / 1000, (d.driver_version % 1000) / 10);
    lua_setfield(L, -2, "cuda_driver");
}

int lgr_device(lua_State *L) {
    gr_device_info d;
    if (gr_device_info_get(lgr_ctx(L), &d) != GR_OK) {
        lua_pushnil(L);
        return 1;
    }
    push_device_info(L, &d);
    return 1;
}

/* gr.devices(): {index =, default =, name =, ...} for each GPU; on the cpu backend one entry, the host
 * ({index = 1, name = "cpu", backend = "cpu"}). */
int lgr_devices(lua_State *L) {
    gr_context *ctx = lgr_ctx(L);
    int count = gr_device_count(ctx), cuda = gr_context_backend(ctx) == GR_BACKEND_CUDA;
    lua_createtable(L, count, 0);
    for (int k = 1; k <= count; k++) {
        gr_device_info d;
        gr_status st = gr_device_info_at(ctx, k, &d);
        if (st != GR_OK) return lgr_fail(L, st, 0, NULL);
        if (cuda) push_device_info(L, &d);
        else lua_createtable(L, 0, 4);
        lgr_set_int(L, "index", k);
        lgr_set_bool(L, "default", k == gr_device_default(ctx));
        lgr_set_str(L, "backend", cuda ? "cuda" : "cpu");
        if (!cuda) lgr_set_str(L, "name", d.name);
        lua_rawseti(L, -2, k);
    }
    return 1;
}

int lgr_dtypes(lua_State *L) { return push_names(L, GR_DTYPE_COUNT, ~0u, dtype_at); }
int lgr_ops(lua_State *L) { return push_names(L, GR_OP_COUNT, ~0u, op_at); }
int lgr_finishes(lua_State *L) { return push_names(L, GR_FINISH_COUNT, ~0u, finish_at); }

/* A monotonic clock in seconds, for wall-time measurements in scripts (os.clock is CPU time). */
int lgr_clock(lua_State *L) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    lua_pushnumber(L, (lua_Number)ts.tv_sec + (lua_Number)ts.tv_nsec * 1e-9);
    return 1;
}

