/*
 * lrequest.h -- a reduction request (lrequest.c): its options read, what it needs prepared before the
 * engine plans it (decided in one place), and the result buffers of its segments.
 */
#ifndef LGR_LREQUEST_H
#define LGR_LREQUEST_H

#include "lcore.h"
#include "loperator_cpu.h"

/* A reduction's options as read from Lua: the engine's, and what the binding handles itself. */
typedef struct lgr_request {
    gr_options o;
    int arg;                    /* the options' argument position (2; gr.dot's is 3): errors name it */
    int async;
    int streamed, streams;      /* streamed host data: on/off, stream count (0 = default) */
    size_t chunk;               /* bytes per chunk (0 = default) */
    int dtype;                  /* the dtype of a table or byte-string source, -1 = float32 */
    int reps, warmup;           /* gr.bench */
    size_t segment;             /* fixed segment size (0: none) */
    gr_buffer *offsets;         /* CSR boundaries (NULL: none) */
    int has_out;                /* opts.out was given (its buffers: user values of the options table); with
                                 * opts.ops, while one op is reduced: that op has an entry there */
    int out_at;                 /* with opts.ops, while one op is reduced: the stack index of its entry
                                 * opts.out.<op>, which stands for opts.out (0: opts.out itself) */
    int naxes;                  /* opts.axis: how many axes it names (0: not given) */
    int nops;                   /* opts.ops: how many ops it names (0: not given), and which */
    gr_op ops[GR_OP_COUNT];
    lua_Integer axes[GR_MAX_DIMS];  /* as given: 1-based, negative from the end (laxes.c resolves them) */
    int keepdims;               /* opts.keepdims */
    int sorted;                 /* opts.sorted (gr.reduce_by_key: equal keys already consecutive) */
    gr_operator *user_op;       /* opts.op was a gr.operator (the Operator is the options table's) */
    int op_given;               /* opts.op was given (gr.reduce needs it) */
    lgr_operator_cpu cpu;       /* opts.op's cpu functions, where the request runs them (o.cpu, o.fold) */
    const gr_operator_image *images[GR_DTYPE_COUNT];    /* gr.reduce_many: opts.op's kernels per dtype */
} lgr_request;

/* What lgr_request_read reads: gr.bench's keys (reps, warmup); opts.ops (gr.reduce's and
 * gr.reduce_by_key's; with opts.out a table keyed by op name, its names checked); gr.reduce_by_key's
 * sorted and out (a list of its result buffers, or with opts.ops that table and `keys`); async with segment
 * or offsets (gr.dot's, LGR_READ_ASYNC_SEGMENTS: other segmented reductions are synchronous). */
enum { LGR_READ_BENCH = 1, LGR_READ_OPS = 2, LGR_READ_KEYS = 4, LGR_READ_ASYNC_SEGMENTS = 8 };
/* Reads the options of gr.reduce and its shortcuts (op >= 0 fixes the op), gr.plan (flags 0) and
 * gr.bench (LGR_READ_BENCH); opts.ops is refused unless flags has LGR_READ_OPS. */
void lgr_request_read(lua_State *L, int arg, int op, int flags, lgr_request *r);
/* Whether a whole-buffer result of r is the same whatever the elements' order but for rounding: not
 * segments, not argmin/argmax (the index counts the view's order), not an operator (its map may read
 * the index). Such a request reads a dense strided view as its memory lies (lgr_check_reduced_buffer). */
static inline int lgr_request_order_free(const lgr_request *r) {
    return !r->segment && !r->offsets && !r->user_op && r->o.op != GR_ARGMIN && r->o.op != GR_ARGMAX;
}
/* What a request is, as its preparation sees it. */
typedef enum {
    LGR_FOR_RUN,        /* gr.reduce and the shortcuts: one buffer (a streamed source's staged copy) */
    LGR_FOR_SHARDS,     /* the same over the shards of a sharded buffer */
    LGR_FOR_MANY,       /* gr.reduce_many over its buffers */
    LGR_FOR_PLAN,       /* gr.plan and gr.bench: the GPU's form, whatever the backend and the buffer */
    LGR_FOR_INPUTS,     /* gr.reduce over the inputs of an operator of several (bufs: them, in order) */
    LGR_FOR_KEYS        /* gr.reduce_by_key: the values (bufs[0]), reduced as segments */
} lgr_purpose;
/* The one place that decides what a request over bufs (count of them) needs before the engine plans
 * it, called once per request: opts.op's kernels (r->o.user; per dtype for reduce_many, r->images) where
 * the GPU reduces, else its cpu functions (r->o.cpu, pushed on the stack for the call's duration), with
 * r->o.fold for the CPU finishes; a named user kernel's kernels (r->o.kernel) for a whole buffer. Raises
 * where the request cannot run that way (gpu_to_gpu with an operator, no cpu functions off the GPU, a
 * compile error with NVRTC's log). */
void lgr_request_prepare(lua_State *L, lgr_request *r, lgr_purpose why, gr_buffer *const *bufs, size_t count);
/* How errors name r's opts.out (or, with r->out_at, the entry opts.out.<op>): "opts.out", "opts.out.max",
 * with "[index]" for the buffer at that 1-based index of a list (index 0: none). */
enum { LGR_OUT_NAME = 48 };
void lgr_request_out_name(const lgr_request *r, int index, char name[LGR_OUT_NAME]);
/* r's given result buffers (opts.out, or with r->out_at the op's entry) for an op of `count` results
 * pushed in order into out[]: one buffer, or a list of `count`; raises naming it otherwise. */
void lgr_request_given_outs(lua_State *L, const lgr_request *r, int count, gr_buffer *out[2]);
/* The result buffers of a segmented reduction: opts.out's, or new ones pushed on the stack. Returns
 * how many results the op has. */
int lgr_request_outs(lua_State *L, gr_buffer *b, const lgr_request *r, gr_buffer *out[2]);
/* The same for the segments of n elements of dtype t, new buffers made in `where` memory of `device`
 * (1-based): a sharded buffer's results go to its first shard's device. */
int lgr_request_outs_like(lua_State *L, gr_dtype t, size_t n, gr_where where, int device, const lgr_request *r,
                          gr_buffer *out[2]);

/* The fused image for r's ops over elements of t where they are (gr_fused_prepare), or NULL where the
 * ops are reduced one by one (the cpu backend, host data, gpu_to_gpu, a build without NVRTC, fewer than
 * two ops that fuse); raises for an op or accumulator a single call would refuse. */
const gr_image *lgr_request_fused(lua_State *L, const lgr_request *r, gr_dtype t, gr_where where);

#endif
