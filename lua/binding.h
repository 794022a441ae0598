/*
 * binding.h -- what the files of the Lua binding (module gpureduce.core) share.
 *
 *   lcore.c     the module: its context, the metatables, the function table
 *   lbuffer.c   Buffer userdata: construction, contents, views, element marshalling
 *   lreduce.c   reductions with their options, Stream and Pending userdata
 *   linfo.c     tables about the engine: variants, device, plans, benchmarks, pool statistics
 *   lopts.c     the table-driven parser of every options table
 *   loperator.c user operators: gr.operator and the Operator userdata
 *   loperator_run.c  reductions with a user operator: its kernels prepared, or its cpu functions handed
 *               to the engine
 *   lkernel.c   user kernel variants: gr.kernel, and their kernels prepared for a reduction
 *   lsharded.c  reductions of sharded buffers (gr.sharded; their methods are gpureduce/sharded.lua)
 *   lcomm.c     gr.comm and the Comm userdata: NCCL communicators across processes
 *
 * No CUDA header here: everything goes through engine/gr.h. Every function registered by the module
 * has the context userdata as upvalue 1.
 */
#ifndef LGR_BINDING_H
#define LGR_BINDING_H

#include <lauxlib.h>
#include <lua.h>

#include <stddef.h>

#include "../engine/gr.h"

#define CONTEXT_MT "gpureduce.Context"
#define BUFFER_MT "gpureduce.Buffer"
#define STREAM_MT "gpureduce.Stream"
#define PENDING_MT "gpureduce.Pending"
#define OPERATOR_MT "gpureduce.Operator"
#define SHARDED_MT "gpureduce.Sharded"
#define COMM_MT "gpureduce.Comm"

/* The module's context, and the cache of the operators compiled in it (made on first use). */
typedef struct { gr_context *ctx; gr_operator_cache *ops; } lcontext;
typedef struct { gr_buffer *b; } lbuffer;
typedef struct { gr_stream *s; } lstream;
typedef struct { gr_pending *p; } lpending;
/* An Operator keeps the facts of its compile at creation, which op:info() shows. */
typedef struct { gr_operator *op; gr_operator_compile_info compiled; } loperator;

/* ---- the context and failures (lcore.c) ------------------------------------------------------------ */

/* The context; raises a clear error once the Lua state's closing has destroyed it (a finalizer that
 * runs after the module's own may still call in). */
gr_context *lgr_ctx(lua_State *L);
/* The context or NULL when it is gone: for the release functions, which never raise. */
gr_context *lgr_ctx_or_null(lua_State *L);
/* The context's cache of compiled operators; raises when memory runs out. */
gr_operator_cache *lgr_operator_cache(lua_State *L);

/* Raises the engine's last failure. Misuse is blamed on an argument: `args` maps the parameter names
 * the engine reports (gr_errarg, e.g. "values") to argument positions, as pairs ending with NULL; any
 * other name is an option and is said "opts.<name>" of argument `opts_arg` (0: no options argument).
 * Failures of the environment raise "gpureduce: <message>" with the CUDA error's name. */
int lgr_fail(lua_State *L, gr_status st, int opts_arg, ...);

/* After an out-of-memory failure: runs a full collection (finalizers free unreachable buffers) and
 * returns 1 so that the caller tries once more; 0 for any other status. */
int lgr_retry_after_gc(lua_State *L, gr_status st);
/* Tells the collector about `bytes` held outside the Lua heap by a new object (a buffer looks like a
 * few bytes to it otherwise, and a loop that drops large buffers would run out of device memory
 * before the collector thought of running). */
void lgr_track(lua_State *L, size_t bytes);

/* ---- values ---------------------------------------------------------------------------------------- */

/* A Lua number as an engine scalar (integers stay exact, floats stay floats); raises otherwise, booleans
 * included, naming `what` and the type given. */
gr_scalar lgr_check_number(lua_State *L, int arg, const char *what);
void lgr_push_scalar(lua_State *L, gr_scalar s);
/* Pushes the values of a result (one or two); returns how many. */
int lgr_push_result(lua_State *L, const gr_result *r);
/* Fields of the table on the top of the stack (a NULL string sets no field). */
static inline void lgr_set_int(lua_State *L, const char *k, lua_Integer v) {
    lua_pushinteger(L, v);
    lua_setfield(L, -2, k);
}
static inline void lgr_set_num(lua_State *L, const char *k, double v) {
    lua_pushnumber(L, v);
    lua_setfield(L, -2, k);
}
static inline void lgr_set_str(lua_State *L, const char *k, const char *v) {
    lua_pushstring(L, v);
    lua_setfield(L, -2, k);
}
static inline void lgr_set_bool(lua_State *L, const char *k, int v) {
    lua_pushboolean(L, v);
    lua_setfield(L, -2, k);
}
/* The length of the list at arg as # gives it (its __len too; read its elements with lua_geti, which
 * honours __index), refusing holes: a raw integer key past that length raises "<prefix>a list with
 * holes (no element k of n)". */
lua_Integer lgr_list_len(lua_State *L, int arg, const char *prefix);
/* An integer argument within [min, max]; raises naming `what` and the value given. */
lua_Integer lgr_check_integer(lua_State *L, int arg, const char *what, lua_Integer min, lua_Integer max);
gr_dtype lgr_check_dtype(lua_State *L, int arg, const char *def);

/* ---- buffers (lbuffer.c) -------------------------------------------------------------------------- */

gr_buffer *lgr_check_buffer(lua_State *L, int arg);
/* A new Buffer userdata with no handle yet, on the top of the stack. */
lbuffer *lgr_new_buffer_ud(lua_State *L);
/* Host staging of a table or byte string of elements of dtype t; the caller frees *out. Returns the
 * element count; raises on a bad element, naming its index. */
size_t lgr_stage_source(lua_State *L, int arg, gr_dtype t, void **out);

int lgr_buffer(lua_State *L);
/* b[i] = v: (buffer, index, value) on the stack. */
int lgr_buffer_set_element(lua_State *L);
int lgr_copy(lua_State *L);
int lgr_wrap(lua_State *L);
extern const luaL_Reg lgr_buffer_methods[];
extern const luaL_Reg lgr_buffer_meta[];

/* ---- options (lopts.c) ----------------------------------------------------------------------------- */

/* One key of an options table: how to read its value (at the top of the stack) into the destination
 * struct at `offset`; min/max bound integers, names list the words of an enumeration. */
typedef struct lgr_opt {
    const char *key;
    void (*read)(lua_State *L, int arg, const struct lgr_opt *opt, void *field);
    size_t offset;
    lua_Integer min, max;
    const char *const *names;
} lgr_opt;

/* Reads opts (argument `arg`, nil or absent for none) into dst by the specs (ending with a NULL key);
 * a key that is not in the specs, a value of the wrong type or out of range raises, naming the key
 * and what is accepted. */
void lgr_parse_opts(lua_State *L, int arg, const lgr_opt *specs, void *dst);

void lgr_read_int(lua_State *L, int arg, const lgr_opt *opt, void *field);        /* int */
void lgr_read_size(lua_State *L, int arg, const lgr_opt *opt, void *field);       /* size_t */
void lgr_read_bool(lua_State *L, int arg, const lgr_opt *opt, void *field);       /* int 0/1 */
void lgr_read_dtype(lua_State *L, int arg, const lgr_opt *opt, void *field);      /* int, a gr_dtype */
void lgr_read_choice(lua_State *L, int arg, const lgr_opt *opt, void *field);     /* int, index in names */

/* ---- reductions, streams, pendings (lreduce.c) ------------------------------------------------------ */

/* A reduction's options as read from Lua: the engine's, and what the binding handles itself. */
typedef struct lgr_reduce_opts {
    gr_options o;
    int async;
    int streamed, streams;      /* streamed host data: on/off, stream count (0 = default) */
    size_t chunk;               /* bytes per chunk (0 = default) */
    int dtype;                  /* the dtype of a table or byte-string source, -1 = float32 */
    int reps, warmup;           /* gr.bench */
    size_t segment;             /* fixed segment size (0: none) */
    gr_buffer *offsets;         /* CSR boundaries (NULL: none) */
    int has_out;                /* opts.out was given (its buffers: user values of the options table) */
    gr_operator *user_op;       /* opts.op was a gr.operator (the Operator is the options table's) */
    int op_given;               /* opts.op was given (gr.reduce needs it) */
    /* the operator's cpu table as the engine's functions (loperator_run.c; o.cpu, o.fold point here):
     * its map, reduce, post, identity at stack slots cpu_fn.. of cpu_L, two accumulator slots from
     * cpu_slots, the accumulator's dtype (-1: a struct) */
    gr_operator_cpu cpu;
    lua_State *cpu_L;
    gr_context *cpu_ctx;
    int cpu_fn, cpu_slots, cpu_acc;
    int many;                   /* gr.reduce_many: an operator's kernels with those of segments */
} lgr_reduce_opts;

/* Reads the options of gr.reduce and its shortcuts (op >= 0 fixes the op), gr.plan (bench = 0) and
 * gr.bench (bench = 1). */
void lgr_reduce_opts_read(lua_State *L, int arg, int op, int bench, lgr_reduce_opts *r);

int lgr_reduce(lua_State *L);
int lgr_reduce_op(lua_State *L);     /* upvalue 2: the op's id */
int lgr_reduce_many(lua_State *L);
/* The result buffers of a segmented reduction: opts.out's, or new ones pushed on the stack. Returns
 * how many results the op has. */
int lgr_segment_outs(lua_State *L, gr_buffer *b, const lgr_reduce_opts *r, gr_buffer *out[2]);
/* The same for the segments of n elements of dtype t, new buffers made in `where` memory of `device`
 * (1-based): a sharded buffer's results go to its first shard's device. */
int lgr_segment_outs_like(lua_State *L, gr_dtype t, size_t n, gr_where where, int device, const lgr_reduce_opts *r,
                          gr_buffer *out[2]);
int lgr_stream(lua_State *L);
extern const luaL_Reg lgr_stream_methods[], lgr_stream_meta[];
extern const luaL_Reg lgr_pending_methods[], lgr_pending_meta[];

/* ---- sharded buffers (lsharded.c) ---------------------------------------------------------------- */

/* Whether the value at idx is a sharded buffer: a table whose metatable is SHARDED_MT's (its methods
 * are Lua, in gpureduce/sharded.lua; its shards the Buffers of its field `parts`, in order). */
int lgr_is_sharded(lua_State *L, int idx);
/* gr.reduce(s, opts) and the shortcuts for a sharded buffer at 1: every shard at once on its device. */
int lgr_reduce_sharded(lua_State *L, lgr_reduce_opts *r);

/* ---- communicators (lcomm.c) ---------------------------------------------------------------------- */

int lgr_comm(lua_State *L);
int lgr_comm_id(lua_State *L);
int lgr_nccl_version(lua_State *L);
extern const luaL_Reg lgr_comm_methods[], lgr_comm_meta[];

/* ---- user operators (loperator.c) ----------------------------------------------------------------- */

/* The operator at arg; raises for anything else or a freed one. Its cpu table {map =, reduce =, post =,
 * identity =} is user value 1 of the userdata (nil when it has none). */
gr_operator *lgr_check_operator(lua_State *L, int arg);
/* A reduction of b (the buffer at 1, whole or its segments) with opts.op (at 2) a user operator, made
 * ready for the engine (loperator_run.c): on the GPU its kernels prepared (r->o.user); on the cpu
 * backend and for host buffers its cpu table as the engine's functions (r->o.cpu, the functions pushed
 * on the stack for the call's duration); a clear error where neither can run. */
void lgr_reduce_operator(lua_State *L, lgr_reduce_opts *r, gr_buffer *b);
/* gr.reduce_many({...}, opts) with opts.op a user operator (loperator_run.c): pushes the results table. */
int lgr_reduce_many_operator(lua_State *L, lgr_reduce_opts *r, gr_buffer **bufs, size_t count);
/* The same as lgr_reduce_operator for the shards of a sharded buffer. */
void lgr_reduce_sharded_operator(lua_State *L, lgr_reduce_opts *r, gr_buffer *const *shards, size_t count);
/* opts.op's operator prepared for buffer b on the GPU: r->o.user set (gr.plan, gr.bench); for the
 * finishes on the CPU also r->o.fold, by its cpu.reduce (pushed on the stack for the call's duration). */
void lgr_operator_prepare(lua_State *L, lgr_reduce_opts *r, gr_buffer *b);
int lgr_operator(lua_State *L);
int lgr_operator_index(lua_State *L);    /* __index: op.name, then the methods (upvalue 2) */
/* What gr.operator and gr.kernel share in reading their table (argument 1): "a, b, c" of a
 * NULL-terminated list, pushed; a refusal of a key of table t that is not in keys (prefix: "cpu." for a
 * nested table); t[key] as a C string left on the stack (NULL for nil), refusing another type with
 * "<key>: expected a string<hint>" and a string with a zero byte inside. */
const char *lgr_push_list(lua_State *L, const char *const *names);
void lgr_refuse_unknown(lua_State *L, int t, const char *const *keys, const char *prefix);
const char *lgr_string_field(lua_State *L, int t, const char *key, const char *hint);
/* The fields of a compile's facts (origin, dtype, arch, ptx, image_bytes, nvrtc_ms, ...) in the table on
 * the top of the stack: op:info()'s and gr.kernel_compile's. */
void lgr_set_compile_info(lua_State *L, const gr_operator_compile_info *c);
/* Raises the engine's last compile error (GR_EINVAL of a compile) with NVRTC's whole log after it. */
int lgr_raise_compile_error(lua_State *L);

/* ---- user kernels (lkernel.c) --------------------------------------------------------------------- */

int lgr_kernel(lua_State *L);
int lgr_kernel_compile(lua_State *L);
int lgr_kernel_source(lua_State *L);
/* When r->o.variant names a user kernel and the backend is cuda: its kernels for this reduction over
 * dtype t (the op, or r->user_op) prepared into r->o.kernel, or a Lua error (a compile error with
 * NVRTC's log). Elsewhere nothing: the engine says what cannot run. */
void lgr_kernel_prepare(lua_State *L, lgr_reduce_opts *r, gr_dtype t);
extern const luaL_Reg lgr_operator_methods[], lgr_operator_meta[];

/* ---- tables about the engine (linfo.c) ------------------------------------------------------------ */

int lgr_backend(lua_State *L);
int lgr_bench(lua_State *L);
int lgr_bench_read(lua_State *L);
int lgr_clock(lua_State *L);
int lgr_debug_events(lua_State *L);
int lgr_debug_fault(lua_State *L);
int lgr_device(lua_State *L);
int lgr_devices(lua_State *L);
int lgr_dtypes(lua_State *L);
int lgr_finishes(lua_State *L);
int lgr_memory_limit(lua_State *L);
int lgr_ops(lua_State *L);
int lgr_plan(lua_State *L);
int lgr_pool_stats(lua_State *L);
int lgr_pool_trim(lua_State *L);
int lgr_variants(lua_State *L);
/* The registry entry of variant i as gr.variants() lists it, pushed. */
void lgr_push_variant(lua_State *L, int i);

#endif
