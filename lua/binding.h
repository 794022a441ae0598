/*
 * binding.h -- what the files of the Lua binding (module gpureduce.core) share.
 *
 *   lmodule.c   the module opened: the metatables, the function table (as Lua's linit.c)
 *   lcore.c     the context, failures, values: what every other file stands on
 *   lbuffer.c   Buffer userdata: construction, contents, views, element marshalling
 *   lrequest.c  a reduction request: its options read, what it needs prepared (one place), its result
 *               buffers
 *   lreduce.c   reductions, Stream and Pending userdata
 *   linfo.c     tables about the engine: variants, device, plans, benchmarks, pool statistics
 *   lopts.c     the table-driven parser of every options table
 *   loperator.c user operators: gr.operator and the Operator userdata
 *   loperator_cpu.c  a user operator's cpu table made the engine's functions
 *   lkernel.c   user kernel variants: gr.kernel, gr.kernel_source, gr.kernel_compile
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
typedef struct { gr_operator *op; } loperator;

/* ---- the context and failures (lcore.c) ------------------------------------------------------------ */

/* The module's context userdata pushed: the Lua state's one, made on the first call (kept in the
 * registry: a module loaded twice shares it). */
void lgr_push_context(lua_State *L);

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
 * returns 1 so that the caller tries once more; 0 for any other status. LGR_RETRY is how it is used. */
int lgr_retry_after_gc(lua_State *L, gr_status st);
/* st = call, and after an out-of-memory status one full collection and the call once more: the one
 * recovery of every binding call that may allocate. `call` is evaluated a second time on a retry. */
#define LGR_RETRY(L, st, call)                                   \
    do {                                                         \
        (st) = (call);                                           \
        if (lgr_retry_after_gc((L), (st))) (st) = (call);        \
    } while (0)
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
/* __index (b[i], then the methods: upvalue 2) and __newindex (b[i] = v) of buffers. */
int lgr_buffer_index(lua_State *L);
int lgr_buffer_newindex(lua_State *L);
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

/* ---- a user operator's cpu functions (loperator_cpu.c) ------------------------------------------------ */

/* The cpu table of an operator as the engine's functions: its map, reduce, post, identity at stack
 * slots fn.. of L, two accumulator slots from `slots`, the accumulator's dtype (-1: a struct). */
typedef struct lgr_operator_cpu {
    gr_operator_cpu fns;        /* what the engine calls (gr_options.cpu points here) */
    lua_State *L;
    gr_context *ctx;
    int fn, slots, acc;
} lgr_operator_cpu;
/* The cpu table (user value 1) of the Operator `op` at stack index op_idx made the engine's functions:
 * its functions and two accumulator slots pushed (they must stay there while the engine may call them),
 * c filled. 0 (nothing pushed) when the operator has no cpu table. */
int lgr_operator_cpu_push(lua_State *L, int op_idx, gr_operator *op, lgr_operator_cpu *c);
/* gr_options.fold (fold_ud: the lgr_operator_cpu): the partials of a CPU finish folded by cpu.reduce. */
gr_status lgr_operator_cpu_fold(void *ud, const void *partials, size_t count, void *out);

/* ---- a reduction request (lrequest.c) -------------------------------------------------------------- */

/* A reduction's options as read from Lua: the engine's, and what the binding handles itself. */
typedef struct lgr_request {
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
    lgr_operator_cpu cpu;       /* opts.op's cpu functions, where the request runs them (o.cpu, o.fold) */
    const gr_operator_image *images[GR_DTYPE_COUNT];    /* gr.reduce_many: opts.op's kernels per dtype */
} lgr_request;

/* Reads the options of gr.reduce and its shortcuts (op >= 0 fixes the op), gr.plan (bench = 0) and
 * gr.bench (bench = 1). */
void lgr_request_read(lua_State *L, int arg, int op, int bench, lgr_request *r);
/* What a request is, as its preparation sees it. */
typedef enum {
    LGR_FOR_RUN,        /* gr.reduce and the shortcuts: one buffer (a streamed source's staged copy) */
    LGR_FOR_SHARDS,     /* the same over the shards of a sharded buffer */
    LGR_FOR_MANY,       /* gr.reduce_many over its buffers */
    LGR_FOR_PLAN        /* gr.plan and gr.bench: the GPU's form, whatever the backend and the buffer */
} lgr_purpose;
/* The one place that decides what a request over bufs (count of them) needs before the engine plans
 * it, called once per request: opts.op's kernels (r->o.user; per dtype for reduce_many, r->images) where
 * the GPU reduces, else its cpu functions (r->o.cpu, pushed on the stack for the call's duration), with
 * r->o.fold for the CPU finishes; a named user kernel's kernels (r->o.kernel) for a whole buffer. Raises
 * where the request cannot run that way (gpu_to_gpu with an operator, no cpu functions off the GPU, a
 * compile error with NVRTC's log). */
void lgr_request_prepare(lua_State *L, lgr_request *r, lgr_purpose why, gr_buffer *const *bufs, size_t count);
/* The result buffers of a segmented reduction: opts.out's, or new ones pushed on the stack. Returns
 * how many results the op has. */
int lgr_request_outs(lua_State *L, gr_buffer *b, const lgr_request *r, gr_buffer *out[2]);
/* The same for the segments of n elements of dtype t, new buffers made in `where` memory of `device`
 * (1-based): a sharded buffer's results go to its first shard's device. */
int lgr_request_outs_like(lua_State *L, gr_dtype t, size_t n, gr_where where, int device, const lgr_request *r,
                          gr_buffer *out[2]);

/* ---- reductions, streams, pendings (lreduce.c) ------------------------------------------------------ */

int lgr_reduce(lua_State *L);
int lgr_reduce_op(lua_State *L);     /* upvalue 2: the op's id */
int lgr_reduce_many(lua_State *L);
int lgr_stream(lua_State *L);
extern const luaL_Reg lgr_stream_methods[], lgr_stream_meta[];
extern const luaL_Reg lgr_pending_methods[], lgr_pending_meta[];

/* ---- sharded buffers (lsharded.c) ---------------------------------------------------------------- */

/* Whether the value at idx is a sharded buffer: a table whose metatable is SHARDED_MT's (its methods
 * are Lua, in gpureduce/sharded.lua; its shards the Buffers of its field `parts`, in order). */
int lgr_is_sharded(lua_State *L, int idx);
/* gr.reduce(s, opts) and the shortcuts for a sharded buffer at 1: every shard at once on its device. */
int lgr_reduce_sharded(lua_State *L, lgr_request *r);

/* ---- communicators (lcomm.c) ---------------------------------------------------------------------- */

int lgr_comm(lua_State *L);
int lgr_comm_id(lua_State *L);
int lgr_nccl_version(lua_State *L);
extern const luaL_Reg lgr_comm_methods[], lgr_comm_meta[];

/* ---- user operators (loperator.c) ----------------------------------------------------------------- */

/* The operator at arg; raises for anything else or a freed one. Its cpu table {map =, reduce =, post =,
 * identity =} is user value 1 of the userdata (nil when it has none). */
gr_operator *lgr_check_operator(lua_State *L, int arg);
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
