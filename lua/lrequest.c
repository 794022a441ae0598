/*
 * lrequest.c -- a reduction request as the binding reads it: the options of gr.reduce and its
 * shortcuts, gr.plan, gr.bench, gr.reduce_many, c:reduce and the kernel queries, checked for the
 * combinations that do not go together; what the request needs prepared before the engine plans it,
 * decided in one place (lgr_request_prepare: a user kernel's kernels, a user operator's kernels or its
 * cpu functions); and the result buffers of a segmented request (opts.out's, or new ones).
 *
 * It stands below every entry point that reduces (lreduce.c, lsharded.c, linfo.c, lkernel.c, lcomm.c)
 * and calls none of them.
 */
#include "lrequest.h"
#include "lbuffer.h"
#include "loperator.h"
#include "lopts.h"
#include "lstream.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

/* ---- options ------------------------------------------------------------------------------------- */

/* The value at the top of the stack as a name on one of the engine's lists (ops, variants, finishes):
 * its index by from_name, or an error naming opts.<field>, what else it takes and the accepted names
 * (asked for only then). */
static int read_name(lua_State *L, int arg, const char *field, const char *what, const char *or_else,
                     const char *(*accepted)(void), int (*from_name)(const char *)) {
    if (lua_type(L, -1) != LUA_TSTRING)
        luaL_argerror(L, arg, lua_pushfstring(L, "opts.%s: expected a string (accepted: %s)%s, got %s", field,
                                              accepted(), or_else, luaL_typename(L, -1)));
    const char *name = lua_tostring(L, -1);
    int v = from_name(name);
    if (v < 0)
        luaL_argerror(L, arg, lua_pushfstring(L, "opts.%s: unknown %s '%s' (accepted: %s)", field, what, name,
                                              accepted()));
    return v;
}

/* opts.op: an op's name, or a gr.operator (kept in the reduce options that hold this field). */
static void read_op(lua_State *L, int arg, const lgr_opt *opt, void *field) {
    (void)opt;
    lgr_request *r = (lgr_request *)((char *)field - offsetof(lgr_request, o.op));
    r->op_given = 1;
    if (luaL_testudata(L, -1, OPERATOR_MT)) {
        r->user_op = lgr_check_operator(L, -1);
        return;
    }
    *(gr_op *)field = (gr_op)read_name(L, arg, "op", "op", " or a gr.operator", gr_op_names, gr_op_from_name);
}

static void read_variant(lua_State *L, int arg, const lgr_opt *opt, void *field) {
    (void)opt;
    *(int *)field = lua_type(L, -1) == LUA_TSTRING && strcmp(lua_tostring(L, -1), "auto") == 0
        ? -1 : read_name(L, arg, "variant", "variant", "", gr_variant_names, gr_variant_find);
}

static void read_finish(lua_State *L, int arg, const lgr_opt *opt, void *field) {
    (void)opt;
    *(gr_finish *)field = (gr_finish)read_name(L, arg, "finish", "mode", "", gr_finish_names, gr_finish_from_name);
}

static void read_stream(lua_State *L, int arg, const lgr_opt *opt, void *field) {
    (void)opt;
    lstream *u = luaL_testudata(L, -1, STREAM_MT);
    if (!u)
        luaL_argerror(L, arg, lua_pushfstring(L, "opts.stream: expected a gpureduce.Stream, got %s",
                                              luaL_typename(L, -1)));
    if (!u->s) luaL_argerror(L, arg, "opts.stream: stream has been freed");
    *(gr_stream **)field = u->s;
}

static void read_buffer(lua_State *L, int arg, const lgr_opt *opt, void *field) {
    lbuffer *u = luaL_testudata(L, -1, BUFFER_MT);
    if (!u)
        luaL_argerror(L, arg, lua_pushfstring(L, "opts.%s: expected a gpureduce.Buffer, got %s", opt->key,
                                              luaL_typename(L, -1)));
    if (!u->b) luaL_argerror(L, arg, lua_pushfstring(L, "opts.%s: buffer has been freed", opt->key));
    *(gr_buffer **)field = u->b;
}

/* opts.out: a buffer, or a table of two for the ops with two results; checked when used. */
static void read_out(lua_State *L, int arg, const lgr_opt *opt, void *field) {
    (void)opt;
    if (!luaL_testudata(L, -1, BUFFER_MT) && !lua_istable(L, -1))
        luaL_argerror(L, arg, lua_pushfstring(L, "opts.out: expected a gpureduce.Buffer or a table of two, got %s",
                                              luaL_typename(L, -1)));
    *(int *)field = 1;
}

/* opts.ops: a list of distinct op names. */
static void read_ops(lua_State *L, int arg, const lgr_opt *opt, void *field) {
    (void)opt;
    lgr_request *r = (lgr_request *)((char *)field - offsetof(lgr_request, nops));
    if (!lua_istable(L, -1) || luaL_testudata(L, -1, BUFFER_MT))
        luaL_argerror(L, arg, lua_pushfstring(L, "opts.ops: expected a list of op names (accepted: %s), got %s",
                                              gr_op_names(), luaL_typename(L, -1)));
    int at = lua_gettop(L);
    lua_Integer n = lgr_list_len(L, at, "opts.ops: ");
    if (n < 1 || n > GR_OP_COUNT)
        luaL_argerror(L, arg, lua_pushfstring(L, "opts.ops: a list of 1 to %d op names (got %d)", GR_OP_COUNT, (int)n));
    for (lua_Integer i = 1; i <= n; i++) {
        lua_geti(L, at, i);
        const char *name = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
        int v = name ? gr_op_from_name(name) : -1;
        if (v < 0)
            luaL_argerror(L, arg, lua_pushfstring(L, "opts.ops[%d]: %s%s%s (accepted: %s)", (int)i,
                                                  name ? "unknown op '" : "expected an op's name, got ",
                                                  name ? name : luaL_typename(L, -1), name ? "'" : "", gr_op_names()));
        for (int j = 0; j < (int)i - 1; j++)
            if (r->ops[j] == (gr_op)v)
                luaL_argerror(L, arg, lua_pushfstring(L, "opts.ops: '%s' is named twice (each op once)", name));
        r->ops[i - 1] = (gr_op)v;
        lua_pop(L, 1);
    }
    r->nops = (int)n;
}

/* opts.axis: an axis (an integer) or a list of up to GR_MAX_DIMS of them; laxes.c checks them against
 * the buffer's axes. */
static void read_axis(lua_State *L, int arg, const lgr_opt *opt, void *field) {
    (void)opt;
    lgr_request *r = (lgr_request *)((char *)field - offsetof(lgr_request, naxes));
    int isnum;
    if (lua_istable(L, -1) && !luaL_testudata(L, -1, BUFFER_MT)) {
        int at = lua_gettop(L);
        lua_Integer n = lgr_list_len(L, at, "opts.axis: ");
        if (n < 1 || n > GR_MAX_DIMS)
            luaL_argerror(L, arg, lua_pushfstring(L, "opts.axis: a list of 1 to %d axes (got %d)", GR_MAX_DIMS, (int)n));
        for (lua_Integer i = 1; i <= n; i++) {
            lua_geti(L, at, i);
            r->axes[i - 1] = lua_tointegerx(L, -1, &isnum);
            if (!isnum || lua_type(L, -1) != LUA_TNUMBER)     /* "2" is a string, not an axis */
                luaL_argerror(L, arg, lua_pushfstring(L, "opts.axis[%d]: expected an integer axis, got %s", (int)i,
                                                      luaL_typename(L, -1)));
            lua_pop(L, 1);
        }
        r->naxes = (int)n;
        return;
    }
    r->axes[0] = lua_tointegerx(L, -1, &isnum);
    if (!isnum || lua_type(L, -1) != LUA_TNUMBER)
        luaL_argerror(L, arg, lua_pushfstring(L, "opts.axis: expected an axis (an integer) or a list of them, got %s",
                                              luaL_typename(L, -1)));
    r->naxes = 1;
}

/* opts.out with opts.ops: a table keyed by the ops' names (and, for gr.reduce_by_key, `keys`), each entry
 * what opts.out takes for that op alone (checked where it is used); a name not in opts.ops raises. */
static void read_ops_out(lua_State *L, lgr_request *r, int keys) {
    lua_getfield(L, r->arg, "out");
    int t = lua_gettop(L);
    const char *form = keys ? "{keys = buffer, sum = buffer, argmax = {values, indices}, ...}"
                            : "{sum = buffer, argmax = {values, indices}, ...}";
    if (!lua_istable(L, t))
        luaL_argerror(L, r->arg, lua_pushfstring(L, "opts.out: with opts.ops, a table keyed by op name %s, got %s",
                                                 form, luaL_testudata(L, t, BUFFER_MT) ? "a gpureduce.Buffer"
                                                                                       : luaL_typename(L, t)));
    for (lua_pushnil(L); lua_next(L, t); lua_pop(L, 1)) {
        if (lua_type(L, -2) != LUA_TSTRING)
            luaL_argerror(L, r->arg, lua_pushfstring(L, "opts.out: with opts.ops, a table keyed by op name %s, not a "
                                                     "list (got a %s key)", form, luaL_typename(L, -2)));
        const char *name = lua_tostring(L, -2);
        int named = keys && strcmp(name, "keys") == 0;
        for (int k = 0; k < r->nops && !named; k++) named = strcmp(name, gr_op_name(r->ops[k])) == 0;
        if (named) continue;
        luaL_Buffer ops;
        luaL_buffinit(L, &ops);
        for (int k = 0; k < r->nops; k++) {
            if (k) luaL_addstring(&ops, ", ");
            luaL_addstring(&ops, gr_op_name(r->ops[k]));
        }
        if (keys) luaL_addstring(&ops, ", and keys for the keys' buffer");
        luaL_pushresult(&ops);
        luaL_argerror(L, r->arg, lua_pushfstring(L, "opts.out.%s: not an op of opts.ops (accepted: %s)", name,
                                                 lua_tostring(L, -1)));
    }
    lua_pop(L, 1);
}

#define R(field) offsetof(lgr_request, field)
#define ANY_SIZE 1, LUA_MAXINTEGER

/* The keys of gr.reduce and gr.plan; gr.bench takes these but async and dtype, plus reps and warmup. */
static const lgr_opt reduce_specs[] = {
    {"acc", lgr_read_dtype, R(o.acc), 0, 0, NULL},
    {"async", lgr_read_bool, R(async), 0, 0, NULL},
    {"axis", read_axis, R(naxes), 0, 0, NULL},
    {"block", lgr_read_int, R(o.block), 1, INT_MAX, NULL},
    {"chunk", lgr_read_size, R(chunk), ANY_SIZE, NULL},
    {"ddof", lgr_read_int, R(o.ddof), 0, INT_MAX, NULL},
    {"determinism", lgr_read_choice, R(o.determinism), 0, 0, gr_determinism_names},
    {"dtype", lgr_read_dtype, R(dtype), 0, 0, NULL},
    {"finish", read_finish, R(o.finish), 0, 0, NULL},
    {"grid", lgr_read_size, R(o.grid), ANY_SIZE, NULL},
    {"keepdims", lgr_read_bool, R(keepdims), 0, 0, NULL},
    {"offsets", read_buffer, R(offsets), 0, 0, NULL},
    {"op", read_op, R(o.op), 0, 0, NULL},
    {"ops", read_ops, R(nops), 0, 0, NULL},
    {"out", read_out, R(has_out), 0, 0, NULL},
    {"segment", lgr_read_size, R(segment), ANY_SIZE, NULL},
    {"sorted", lgr_read_bool, R(sorted), 0, 0, NULL},
    {"stream", read_stream, R(o.stream), 0, 0, NULL},
    {"streamed", lgr_read_bool, R(streamed), 0, 0, NULL},
    {"streams", lgr_read_int, R(streams), 1, INT_MAX, NULL},
    {"threshold", lgr_read_size, R(o.threshold), ANY_SIZE, NULL},
    {"variant", read_variant, R(o.variant), 0, 0, NULL},
    {NULL, NULL, 0, 0, 0, NULL}};

static const lgr_opt bench_specs[] = {
    {"acc", lgr_read_dtype, R(o.acc), 0, 0, NULL},
    {"axis", read_axis, R(naxes), 0, 0, NULL},
    {"block", lgr_read_int, R(o.block), 1, INT_MAX, NULL},
    {"chunk", lgr_read_size, R(chunk), ANY_SIZE, NULL},
    {"ddof", lgr_read_int, R(o.ddof), 0, INT_MAX, NULL},
    {"determinism", lgr_read_choice, R(o.determinism), 0, 0, gr_determinism_names},
    {"finish", read_finish, R(o.finish), 0, 0, NULL},
    {"grid", lgr_read_size, R(o.grid), ANY_SIZE, NULL},
    {"keepdims", lgr_read_bool, R(keepdims), 0, 0, NULL},
    {"offsets", read_buffer, R(offsets), 0, 0, NULL},
    {"op", read_op, R(o.op), 0, 0, NULL},
    {"reps", lgr_read_int, R(reps), 1, INT_MAX, NULL},
    {"segment", lgr_read_size, R(segment), ANY_SIZE, NULL},
    {"stream", read_stream, R(o.stream), 0, 0, NULL},
    {"streamed", lgr_read_bool, R(streamed), 0, 0, NULL},
    {"streams", lgr_read_int, R(streams), 1, INT_MAX, NULL},
    {"threshold", lgr_read_size, R(o.threshold), ANY_SIZE, NULL},
    {"variant", read_variant, R(o.variant), 0, 0, NULL},
    {"warmup", lgr_read_int, R(warmup), 0, INT_MAX, NULL},
    {NULL, NULL, 0, 0, 0, NULL}};

void lgr_request_read(lua_State *L, int arg, int op, int flags, lgr_request *r) {
    int bench = flags & LGR_READ_BENCH;
    memset(r, 0, sizeof *r);
    r->arg = lua_absindex(L, arg);
    gr_options_init(&r->o, op >= 0 ? (gr_op)op : GR_SUM);
    r->reps = 20;
    r->warmup = 3;
    r->dtype = -1;
    lgr_parse_opts(L, arg, bench ? bench_specs : reduce_specs, r);
    if (op >= 0 && r->user_op)
        luaL_argerror(L, arg, lua_pushfstring(L, "opts.op: a gr.operator conflicts with this function's op '%s' "
                                              "(use gr.reduce(b, {op = operator}))", gr_op_name((gr_op)op)));
    if (op >= 0 && r->o.op != (gr_op)op)
        luaL_argerror(L, arg, lua_pushfstring(L, "opts.op: '%s' conflicts with this function's op '%s'",
                                              gr_op_name(r->o.op), gr_op_name((gr_op)op)));
    if ((r->chunk || r->streams) && !r->streamed)
        luaL_argerror(L, arg, "opts.chunk and opts.streams go with opts.streamed = true");
    if (r->streamed && r->async)
        luaL_argerror(L, arg, "opts.async: streamed reductions are synchronous (they span several streams)");
    if (r->segment && r->offsets)
        luaL_argerror(L, arg, "opts.segment and opts.offsets: give one (fixed-size segments or CSR boundaries)");
    if ((r->segment || r->offsets) && (r->streamed || (r->async && !(flags & LGR_READ_ASYNC_SEGMENTS))))
        luaL_argerror(L, arg, r->streamed ? "opts.streamed: segmented reductions take device or host buffers, not "
                                            "streamed data" : "opts.async: segmented reductions are synchronous");
    if (r->naxes && (r->segment || r->offsets))
        luaL_argerror(L, arg, "opts.axis: reduces a view's axes; it does not go with opts.segment or opts.offsets "
                              "(segments are for 1-D buffers)");
    if (r->naxes && r->streamed)
        luaL_argerror(L, arg, "opts.axis: reductions along axes take buffers, not streamed data");
    if (r->keepdims && !r->naxes) luaL_argerror(L, arg, "opts.keepdims goes with opts.axis");
    if (r->sorted && !(flags & LGR_READ_KEYS))
        luaL_argerror(L, arg, "opts.sorted goes with gr.reduce_by_key (keys already grouped)");
    if (r->has_out && !r->segment && !r->offsets && !r->naxes && !(flags & LGR_READ_KEYS))
        luaL_argerror(L, arg, "opts.out goes with opts.segment, opts.offsets or opts.axis (results of one value come "
                              "back as values)");
    if (r->nops) {
        if (!(flags & LGR_READ_OPS))
            luaL_argerror(L, arg, op >= 0 ? "opts.ops goes with gr.reduce (this function reduces its own op)"
                                          : "opts.ops goes with gr.reduce (one buffer, several ops)");
        if (r->op_given || r->user_op) luaL_argerror(L, arg, "opts.ops and opts.op: give one");
        if (r->streamed)
            luaL_argerror(L, arg, "opts.ops: several ops read a buffer, not streamed data (leave out opts.streamed, "
                                  "or stream the data once per op with opts.op)");
        if (r->has_out) read_ops_out(L, r, flags & LGR_READ_KEYS);
    }
}

/* ---- what a request needs prepared ------------------------------------------------------------- */

/* opts.op's cpu functions (r->o.cpu), pushed on the stack on the first call for the rest of the
 * request's. 0 (nothing pushed) when the operator has no cpu table. */
static int use_cpu_functions(lua_State *L, lgr_request *r) {
    if (r->o.cpu) return 1;
    lua_getfield(L, r->arg, "op");
    if (!lgr_operator_cpu_push(L, lua_gettop(L), r->user_op, &r->cpu)) {
        lua_pop(L, 1);
        return 0;
    }
    r->o.cpu = &r->cpu.fns;
    return 1;
}

/* opts.op's kernels for inputs of the dtypes `in` (r->o.user; the segments' form where `segments`), and
 * for the finishes on the CPU r->o.fold by its cpu.reduce; a Lua error where they cannot be had. */
static void inputs_kernels(lua_State *L, lgr_request *r, int segments, const gr_input_dtypes *in) {
    const gr_operator_image *img;
    gr_status st = gr_operator_prepare_inputs(lgr_ctx(L), lgr_operator_cache(L), r->user_op, in, segments, &img);
    if (st != GR_OK) lgr_fail(L, st, r->arg, NULL);
    r->o.user = img;
    if (r->o.finish != GR_FINISH_HYBRID && r->o.finish != GR_FINISH_HOST) return;
    if (!use_cpu_functions(L, r)) return;       /* the planner says what is missing */
    r->o.fold = lgr_operator_cpu_fold;
    r->o.fold_ud = &r->cpu;
}

/* The same for elements of dtype t (every input of it). */
static void operator_kernels(lua_State *L, lgr_request *r, int segments, gr_dtype t) {
    gr_input_dtypes in = {.count = gr_operator_inputs(r->user_op)};
    for (int k = 0; k < in.count; k++) in.at[k] = t;
    inputs_kernels(L, r, segments, &in);
}

static const char *operator_name(const lgr_request *r) { return gr_operator_get_spec(r->user_op)->name; }

/* Where the GPU does not reduce (the cpu backend, or data in host memory): the cpu functions, or a
 * clear error without them that says both ways out. */
static void off_the_gpu(lua_State *L, lgr_request *r) {
    if (use_cpu_functions(L, r)) return;
    if (gr_context_backend(lgr_ctx(L)) != GR_BACKEND_CUDA)
        luaL_argerror(L, r->arg, lua_pushfstring(L, "opts.op: operator %s has no cpu functions, and the cpu backend "
                                               "cannot run its kernels (give gr.operator a cpu table)",
                                            operator_name(r)));
    luaL_argerror(L, r->arg, lua_pushfstring(L, "opts.op: operator %s has no cpu functions, and a user operator's "
                                           "kernels reduce device buffers (this one is in host memory: gr.copy it "
                                           "to a device buffer, or give gr.operator a cpu table)", operator_name(r)));
}

/* gr.reduce_many: the kernels of each dtype among the device buffers (r->images) before anything runs
 * (a CPU finish runs cpu.reduce, which may free the operator); the cpu functions where a buffer is not
 * on the GPU, or a clear error without them. */
static void operator_many(lua_State *L, lgr_request *r, gr_buffer *const *bufs, size_t count) {
    int gpu = gr_context_backend(lgr_ctx(L)) == GR_BACKEND_CUDA, off = !gpu;
    for (size_t i = 0; i < count; i++) {
        gr_dtype t = gr_buffer_dtype(bufs[i]);
        if (!gpu || gr_buffer_where(bufs[i]) != GR_DEVICE) {
            off = 1;
        } else if (!r->images[t]) {
            operator_kernels(L, r, 1, t);
            r->images[t] = r->o.user;
        }
    }
    if (off && !use_cpu_functions(L, r))
        luaL_argerror(L, r->arg, lua_pushfstring(L, "opts.op: operator %s has no cpu functions for %s (give gr.operator a "
                                               "cpu table)", operator_name(r), gpu ? "host buffers" : "the cpu backend"));
}

/* When r->o.variant names a user kernel and the backend is cuda: its kernels for this reduction over
 * dtype t (the op, or opts.op's operator) in r->o.kernel, or a Lua error (a compile error with NVRTC's
 * log). Elsewhere nothing: the engine says what cannot run. */
static void user_kernels(lua_State *L, lgr_request *r, gr_dtype t) {
    if (r->o.variant < 0 || !gr_variant_get(r->o.variant)->user) return;     /* every call passes here */
    if (r->o.determinism == GR_DET_GPU_TO_GPU) return;     /* the exact kernel runs, whatever the variant */
    gr_context *ctx = lgr_ctx(L);
    if (gr_context_backend(ctx) != GR_BACKEND_CUDA) return;
    const gr_operator_image *img;
    gr_status st = gr_kernel_prepare(ctx, lgr_operator_cache(L), r->o.variant, r->o.op, r->o.acc, r->user_op, t, &img);
    /* a compile error names the source, an operator's field or nothing (a generated line) */
    const char *arg = gr_errarg(ctx);
    if (st == GR_EINVAL && strcmp(arg, "variant") && strcmp(arg, "dtype") && strcmp(arg, "acc") && strcmp(arg, "cache"))
        lgr_raise_compile_error(L);
    if (st != GR_OK) lgr_fail(L, st, r->arg, NULL);
    r->o.kernel = img;
}

void lgr_request_prepare(lua_State *L, lgr_request *r, lgr_purpose why, gr_buffer *const *bufs, size_t count) {
    /* axes reduce rows through the segments' kernels, and a reduction by key its groups */
    int segments = r->segment || r->offsets || r->naxes || why == LGR_FOR_KEYS;
    if (r->user_op && why == LGR_FOR_INPUTS) {
        /* the inputs of one operator: its kernels for their dtypes on device buffers, else its cpu functions */
        if (r->o.determinism == GR_DET_GPU_TO_GPU)
            luaL_argerror(L, r->arg, "opts.determinism: 'gpu_to_gpu' has no form for a user operator (its combine is the "
                                "user's) (accepted with operators: not_guaranteed, run_to_run)");
        gr_input_dtypes in = {.count = (int)count};
        int gpu = gr_context_backend(lgr_ctx(L)) == GR_BACKEND_CUDA;
        for (size_t i = 0; i < count; i++) {
            in.at[i] = gr_buffer_dtype(bufs[i]);
            gpu = gpu && gr_buffer_where(bufs[i]) == GR_DEVICE;
        }
        if (gpu || !use_cpu_functions(L, r)) {
            if (!gpu && gr_context_backend(lgr_ctx(L)) != GR_BACKEND_CUDA)
                luaL_argerror(L, r->arg, lua_pushfstring(L, "opts.op: operator %s has no cpu functions, and the cpu backend "
                                                       "cannot run its kernels (give gr.operator a cpu table)",
                                                    operator_name(r)));
            inputs_kernels(L, r, segments, &in);
        }
        return;
    }
    if (r->user_op && why == LGR_FOR_PLAN) {
        operator_kernels(L, r, segments, gr_buffer_dtype(bufs[0]));
    } else if (r->user_op) {
        /* gpu_to_gpu has no form for an operator: refused before anything runs */
        if (r->o.determinism == GR_DET_GPU_TO_GPU)
            luaL_argerror(L, r->arg, "opts.determinism: 'gpu_to_gpu' has no form for a user operator (its combine is the "
                                "user's) (accepted with operators: not_guaranteed, run_to_run)");
        if (why == LGR_FOR_MANY) {
            operator_many(L, r, bufs, count);
        } else {
            /* the GPU reduces device buffers (a sharded one's on every device), and host data it streams;
             * the engine loads the kernels on the other shards' devices */
            int gpu = gr_context_backend(lgr_ctx(L)) == GR_BACKEND_CUDA;
            for (size_t i = 0; i < count && !r->streamed; i++) gpu = gpu && gr_buffer_where(bufs[i]) == GR_DEVICE;
            if (gpu) operator_kernels(L, r, segments, gr_buffer_dtype(bufs[0]));
            else off_the_gpu(L, r);
        }
    }
    /* a user kernel reduces one whole buffer */
    if ((why == LGR_FOR_RUN || why == LGR_FOR_PLAN) && !segments) user_kernels(L, r, gr_buffer_dtype(bufs[0]));
}

/* ---- result buffers of segments ------------------------------------------------------------------ */

int lgr_request_outs(lua_State *L, gr_buffer *b, const lgr_request *r, gr_buffer *out[2]) {
    return lgr_request_outs_like(L, gr_buffer_dtype(b), gr_buffer_size(b), gr_buffer_where(b), gr_buffer_device(b),
                                 r, out);
}

int lgr_request_outs_like(lua_State *L, gr_dtype t, size_t n, gr_where where, int device, const lgr_request *r,
                          gr_buffer *out[2]) {
    gr_context *ctx = lgr_ctx(L);
    gr_dtype dt[2];
    int count = 1;
    gr_status st = gr_segment_result_dtypes(ctx, &r->o, t, dt, &count);
    if (st != GR_OK) return lgr_fail(L, st, r->arg, NULL);
    gr_segments seg = {r->segment, r->offsets};
    size_t k;
    if ((st = gr_segment_count_of(ctx, n, &seg, &k)) != GR_OK) return lgr_fail(L, st, r->arg, NULL);
    out[0] = out[1] = NULL;
    if (r->has_out) {
        lgr_request_given_outs(L, r, count, out);
        return count;
    }
    for (int i = 0; i < count; i++) {
        lbuffer *u = lgr_new_buffer_ud(L);
        LGR_RETRY(L, st, gr_buffer_new_unset_on(ctx, k, dt[i], where, device, &u->b));
        if (st != GR_OK) return lgr_fail(L, st, r->arg, NULL);
        lgr_track(L, k * gr_dtype_size(dt[i]));
        out[i] = u->b;
    }
    return count;
}

void lgr_request_out_name(const lgr_request *r, int index, char name[LGR_OUT_NAME]) {
    int at = snprintf(name, LGR_OUT_NAME, "opts.out%s%s", r->out_at ? "." : "", r->out_at ? gr_op_name(r->o.op) : "");
    if (index && at < LGR_OUT_NAME) snprintf(name + at, LGR_OUT_NAME - (size_t)at, "[%d]", index);
}

void lgr_request_given_outs(lua_State *L, const lgr_request *r, int count, gr_buffer *out[2]) {
    char name[LGR_OUT_NAME], prefix[LGR_OUT_NAME + 2];
    lgr_request_out_name(r, 0, name);
    int at = lua_gettop(L) + 1;
    if (r->out_at) lua_pushvalue(L, r->out_at);
    else lua_getfield(L, r->arg, "out");
    int list = lua_istable(L, at);
    if (list) {
        snprintf(prefix, sizeof prefix, "%s: ", name);
        if (lgr_list_len(L, at, prefix) != count)
            luaL_argerror(L, r->arg, lua_pushfstring(L, "%s: %s has %d result%s: give %s", name, gr_op_name(r->o.op),
                                                     count, count > 1 ? "s" : "", count > 1 ? "a table of two buffers"
                                                                                            : "one buffer"));
        for (int i = 0; i < count; i++) lua_geti(L, at, i + 1);
        lua_remove(L, at);                      /* the table: its buffers stay, in order */
    } else if (count > 1 && luaL_testudata(L, at, BUFFER_MT)) {
        luaL_argerror(L, r->arg, lua_pushfstring(L, "%s: %s has two results: give a table of two buffers", name,
                                                 gr_op_name(r->o.op)));
    }
    for (int i = 0; i < count; i++) {
        lbuffer *u = luaL_testudata(L, at + i, BUFFER_MT);
        lgr_request_out_name(r, list ? i + 1 : 0, name);
        if (!u)
            luaL_argerror(L, r->arg, lua_pushfstring(L, "%s: expected %s, got %s", name, list || count < 2 ?
                                                     "a gpureduce.Buffer" : "a table of two gpureduce.Buffers",
                                                     luaL_typename(L, at + i)));
        if (!u->b) luaL_argerror(L, r->arg, lua_pushfstring(L, "%s: buffer has been freed", name));
        out[i] = u->b;
    }
}

const gr_image *lgr_request_fused(lua_State *L, const lgr_request *r, gr_dtype t, gr_where where) {
    gr_context *ctx = lgr_ctx(L);
    const gr_image *fused = NULL;
    if (gr_context_backend(ctx) != GR_BACKEND_CUDA || where != GR_DEVICE || r->o.determinism == GR_DET_GPU_TO_GPU)
        return NULL;
    gr_status st = gr_fused_prepare(ctx, lgr_operator_cache(L), r->ops, r->nops, t, r->o.acc, &fused);
    if (st == GR_ENODEV) return NULL;               /* no NVRTC: one pass per op, the same results */
    if (st != GR_OK) lgr_fail(L, st, r->arg, NULL);
    return fused;
}
