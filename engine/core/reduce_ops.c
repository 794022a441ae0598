/*
 * reduce_ops.c -- gr_reduce_ops: several built-in ops over one buffer, each result what gr_reduce gives for
 * that op alone; gr_reduce_ops_async: the same started, one pending per op. Where a fused image covers
 * ops (user/fused_source.c), one pass of its kernel computes them all in one read: planned as a user
 * operator's pass is (the same variant, block, grid and single finish as each op's own auto plan), its
 * tuple written to pinned memory by the last block, and each op's result taken from its slot with the
 * op's own gr_op_result -- at once, or, started, when its pending settles (the ops' pendings share the
 * pass). Every other op -- and every op off the GPU, at gpu_to_gpu, or with a kernel option (variant,
 * block, grid, finish, threshold), whose single calls plan otherwise -- is one gr_reduce (gr_reduce_async)
 * call of its own.
 */
#include "core/reduce_ops.h"
#include "gr.h"
#include "base/device.h"
#include "base/error.h"
#include "core/buffer.h"
#include "core/context.h"
#include "core/exec.h"
#include "core/image.h"
#include "core/pending.h"
#include "core/policy.h"
#include "core/pool.h"
#include "ops/ops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int gr_fused_takes(gr_op op, gr_dtype in) {
    return gr_policy_streamed_variant(in, op) == gr_policy_operator_variant(in);
}

gr_op gr_fused_fold_op(gr_op op, gr_dtype in) {
    /* the same functor as the other's (cuda/device/ops.cuh's OpOf) */
    if (op == GR_MEAN) return GR_SUM;
    if (op == GR_STD) return GR_VAR;
    if (gr_dtype_is_float(in)) return op;
    return op == GR_NANSUM ? GR_SUM : op == GR_NANMIN ? GR_MIN : op == GR_NANMAX ? GR_MAX : op;
}

size_t gr_fused_offset(const gr_image *img, int k) {
    size_t off = 0;
    for (int j = 0; j < k; j++)
        off += (gr_op_acc_size((gr_op)img->fused_ops[j], img->in, (gr_dtype)img->fused_acc[j]) + 15) / 16 * 16;
    return off;
}

int gr_fused_slot(const gr_image *img, gr_op op, gr_dtype in, int acc) {
    if (!gr_fused_takes(op, in)) return -1;
    for (int j = 0; j < img->fused_count; j++)
        if (acc == img->fused_acc[j] && (int)gr_fused_fold_op(op, in) == img->fused_ops[j]) return j;
    return -1;
}

int gr_fused_writers(const gr_op *slot_ops, int m, gr_dtype in, gr_fused_writer *w) {
    int count = 0;
    for (int j = 0; j < m; j++)
        for (int op = 0; op < GR_OP_COUNT && count < GR_FUSED_WRITERS; op++)
            if (gr_fused_takes((gr_op)op, in) && gr_fused_fold_op((gr_op)op, in) == slot_ops[j])
                w[count++] = (gr_fused_writer){(gr_op)op, j};
    return count;
}

int gr_fused_writer_of(const gr_image *img, gr_op op, int j) {
    gr_op slots[GR_OP_COUNT];
    gr_fused_writer w[GR_FUSED_WRITERS];
    for (int k = 0; k < img->fused_count; k++) slots[k] = (gr_op)img->fused_ops[k];
    int count = gr_fused_writers(slots, img->fused_count, img->in, w);
    for (int k = 0; k < count; k++)
        if (w[k].op == op && w[k].slot == j) return k;
    return -1;
}

/* The image's passes, with no result of their own: the caller reads the tuple. */
static int fused_launch(const gr_run *run, gr_launch *L) { return gr_image_pass.launch(run, L); }

static gr_status no_result(gr_context *ctx, const gr_run *run, gr_slot *slot, const void *acc, size_t n,
                           gr_result *out) {
    (void)ctx, (void)run, (void)slot, (void)acc, (void)n;
    memset(out, 0, sizeof *out);
    return GR_OK;
}

static const gr_pass_kernel fused_pass = {
    .what = "the fused ops' kernel%.0s", .launch = fused_launch, .result = no_result,
};

static void *stream_of(gr_context *ctx, const gr_options *o) {
    return o->stream && o->stream->handle ? o->stream->handle : ctx->stream;
}

/* Where an op's accumulator lies in a fused tuple: its byte offset (-1: the tuple has none of the op's)
 * and the accumulator dtype its single call takes. */
typedef struct {
    long off;
    int acc;
} tuple_at;

/* op's result from the tuple, as its single call makes it from its own accumulator. */
static gr_result tuple_result(gr_op op, const void *tuple, tuple_at at, gr_dtype in, size_t n, int ddof) {
    return gr_op_result(op, (const unsigned char *)tuple + at.off, (gr_dtype)at.acc, in, n, ddof);
}

/* Whether the fused kernel can stand for the ops' single calls on b with o. */
static int fusable(const gr_context *ctx, const gr_buffer *b, const gr_options *o, const gr_image *fused) {
    return fused && fused->fused_count > 1 && !fused->has_segments && fused->in == b->dtype &&
           ctx->base.backend == GR_BACKEND_CUDA && gr_buffer_where(b) == GR_DEVICE && b->n > 0 &&
           o->determinism != GR_DET_GPU_TO_GPU && !gr_options_way(o);
}

/* Where each op's accumulator lies in fused's tuple (at[k].off, -1 where no slot answers ops[k]). Returns
 * how many ops the tuple answers. */
static int tuple_places(gr_context *ctx, const gr_buffer *b, const gr_options *o, const gr_image *fused,
                        const gr_op *ops, int count, tuple_at *at) {
    int found = 0;
    for (int k = 0; k < count; k++) {
        int acc = gr_op_acc_dtype(ctx, ops[k], b->dtype, o->acc);
        int j = gr_fused_slot(fused, ops[k], b->dtype, acc);
        at[k].off = j < 0 ? -1 : (long)gr_fused_offset(fused, j);
        at[k].acc = acc;
        found += j >= 0;
    }
    return found;
}

gr_options gr_fused_options(const gr_options *o, const gr_image *fused) {
    gr_options f = *o;
    f.op = GR_SUM;
    f.user = fused;
    f.acc = -1;
    f.fold = NULL;
    f.fold_ud = NULL;
    f.cpu = NULL;
    f.kernel = NULL;
    return f;
}

/* The run of one pass of the fused kernel over b. */
static gr_status plan_fused(gr_context *ctx, const gr_buffer *b, const gr_options *o, const gr_image *fused,
                            gr_run *run) {
    gr_options f = gr_fused_options(o, fused);
    gr_status st = gr_plan_run(ctx, b->n, b->dtype, GR_DEVICE, &f, run);
    run->kernel = &fused_pass;
    return st;
}

/* Queues the pass on stream. The last block writes the whole tuple to the slot's pinned memory of its
 * own (slot->host: the result area holds GR_ACC_MAX bytes), which the host reads once the pass is done. */
static gr_status queue_fused(gr_context *ctx, const gr_buffer *b, const gr_run *run, gr_slot *slot, void *stream) {
    gr_inputs in;
    gr_inputs_one(&in, gr_buffer_data(b), b->dtype, b->n);
    return gr_exec_single_to(ctx, &in, 0, run, slot->dev, slot->counter, slot->host, stream);
}

/* One pass of the fused kernel over b; the results of the ops it answers into results (done[k] set).
 * Nothing runs where the plan is not the single finish the ops' own plans have. */
static gr_status run_fused(gr_context *ctx, gr_buffer *b, const gr_options *o, const gr_image *fused,
                           const gr_op *ops, int count, gr_result *results, int *done) {
    tuple_at at[GR_OP_COUNT];
    gr_run run;
    if (!tuple_places(ctx, b, o, fused, ops, count, at)) return GR_OK;
    gr_status st = plan_fused(ctx, b, o, fused, &run);
    if (st != GR_OK || !run.epilogue) return st;
    gr_slot *slot;
    if ((st = gr_slot_acquire(ctx, run.plan.dev_bytes, run.plan.acc_size, &slot)) != GR_OK) return st;
    void *stream = stream_of(ctx, o);
    gr_slot_lower(slot);
    st = queue_fused(ctx, b, &run, slot, stream);
    const void *tuple = NULL;
    /* spun for, as a single call is, rather than a stream synchronisation */
    if (st == GR_OK) st = gr_exec_wait_single(ctx, slot, stream, &tuple);
    else gr_dev_stream_sync(stream);            /* let anything queued drain before the slot's reuse */
    for (int k = 0; k < count && st == GR_OK; k++)
        if (at[k].off >= 0) {
            results[k] = tuple_result(ops[k], tuple, at[k], b->dtype, b->n, o->ddof);
            done[k] = 1;
        }
    gr_slot_release(ctx, slot);
    return st;
}

gr_status gr_ops_check(gr_context *ctx, const gr_options *o, const gr_op *ops, int count) {
    if (count < 1 || count > GR_OP_COUNT)
        return gr_fail_arg(ctx, GR_EINVAL, "ops", "1 to %d built-in ops (got %d)", GR_OP_COUNT, count);
    for (int k = 0; k < count; k++) {
        if (!gr_op_desc_get(ops[k])) return gr_fail_arg(ctx, GR_EINVAL, "ops", "unknown op (accepted: %s)", gr_op_names());
        for (int j = 0; j < k; j++)
            if (ops[j] == ops[k])
                return gr_fail_arg(ctx, GR_EINVAL, "ops", "'%s' is named twice (each op once)", gr_op_name(ops[k]));
    }
    if (o->user || o->cpu)
        return gr_fail_arg(ctx, GR_EINVAL, "ops", "takes built-in ops; a user operator is reduced with opts.op");
    return GR_OK;
}

/* What every form refuses: a wrong list of ops, a user operator, a strided view, another device's stream. */
static gr_status check_ops(gr_context *ctx, gr_buffer *b, const gr_options *o, const gr_op *ops, int count) {
    gr_status st = gr_ops_check(ctx, o, ops, count);
    if (st == GR_OK) st = gr_buffer_check_compact(ctx, b, "b");
    if (st != GR_OK) return st;
    /* the fused pass runs on it before any single call would refuse it */
    if (o->stream && o->stream->device != ctx->device) return gr_stream_misplaced(ctx, o->stream);
    return GR_OK;
}

gr_status gr_reduce_ops(gr_context *ctx, gr_buffer *b, const gr_options *o, const gr_op *ops, int count,
                        const gr_image *fused, gr_result *results) {
    ctx = gr_ctx_for(ctx, b);
    gr_status st = check_ops(ctx, b, o, ops, count);
    if (st != GR_OK) return st;
    int done[GR_OP_COUNT] = {0};
    if (fusable(ctx, b, o, fused) && (st = run_fused(ctx, b, o, fused, ops, count, results, done)) != GR_OK)
        return st;
    for (int k = 0; k < count; k++) {
        if (done[k]) continue;
        gr_options one = *o;
        one.op = ops[k];
        if ((st = gr_reduce(ctx, b, &one, &results[k])) != GR_OK) return st;
    }
    return GR_OK;
}

/* ---- started: one pass, a pending per op it answers ----------------------------------------------- */

/* A fused pass in flight, shared by the pendings of the ops it answers (their p->pass; p->pass_op is the
 * op's place in ops): the first of them to settle waits for the pass, each reads its own op's result
 * from the tuple, and the last gives back the slot (the tuple stays there until then) and the input. */
typedef struct gr_ops_pass {
    gr_slot *slot;          /* the pass's scratch, its tuple (slot->host) and its `done` event */
    gr_buffer *b;           /* a handle of our own on the input's memory */
    int refs;               /* the pendings not settled yet */
    int waited;
    gr_status status;       /* the pass's, every share's */
    char err[512];
    gr_dtype in;
    size_t n;
    int ddof;
    gr_op ops[GR_OP_COUNT];
    tuple_at at[GR_OP_COUNT];
} gr_ops_pass;

static void drop_pass(gr_context *ctx, gr_ops_pass *f) {
    if (f->slot) {
        if (!f->waited) gr_dev_event_sync(f->slot->done);     /* never give back scratch a kernel still writes */
        gr_slot_release(ctx, f->slot);
    }
    gr_buffer_free(ctx, f->b);
    free(f);
}

/* A share settles (reduce.c calls it from ready, wait and free): the pass waited for once, its failure
 * every share's; the op's result as run_fused reads it. */
static void settle_share(gr_context *ctx, gr_pending *p) {
    gr_ops_pass *f = p->pass;
    if (!f->waited) {
        int rc = gr_dev_event_sync(f->slot->done);
        f->waited = 1;
        if (rc) {
            f->status = gr_fail_dev(ctx, rc, "the fused ops' kernel");
            snprintf(f->err, sizeof f->err, "%s", gr_errmsg(ctx));
        }
    }
    int k = p->pass_op;
    p->status = f->status;
    if (p->status == GR_OK) p->value = tuple_result(f->ops[k], f->slot->host, f->at[k], f->in, f->n, f->ddof);
    else snprintf(p->err, sizeof p->err, "%s", f->err);
    p->finished = 1;
    p->pass = NULL;
    if (--f->refs == 0) drop_pass(ctx, f);
}

/* The shares of f, out[k] for each op the tuple answers; none made (ENOMEM) if one cannot be. They
 * settle only once the pass is queued (wire_shares). */
static gr_status make_shares(gr_context *ctx, gr_ops_pass *f, int count, gr_pending **out) {
    for (int k = 0; k < count; k++) {
        if (f->at[k].off < 0) continue;
        if (!(out[k] = calloc(1, sizeof *out[k]))) {
            for (int j = 0; j < k; j++) free(out[j]), out[j] = NULL;
            return gr_fail(ctx, GR_ENOMEM, "out of host memory");
        }
        out[k]->ctx = ctx;
        out[k]->pass = f;
        out[k]->pass_op = k;
        f->refs++;
    }
    return GR_OK;
}

static void wire_shares(gr_ops_pass *f, int count, gr_pending **out) {
    for (int k = 0; k < count; k++)
        if (out[k]) {
            out[k]->settle = settle_share;
            out[k]->done = f->slot->done;       /* what gr_pending_ready asks */
        }
}

/* The fused pass over b queued on o's stream (or the context's), the input marked read there; out[k] a
 * share for each op its tuple answers. Nothing is made where the tuple answers none or the plan is not
 * the single finish: each op then starts on its own. */
static gr_status start_pass(gr_context *ctx, gr_buffer *b, const gr_options *o, const gr_image *fused,
                            const gr_op *ops, int count, gr_pending **out) {
    gr_ops_pass *f = calloc(1, sizeof *f);
    if (!f) return gr_fail(ctx, GR_ENOMEM, "out of host memory");
    gr_run run;
    gr_status st = GR_OK;
    int answered = tuple_places(ctx, b, o, fused, ops, count, f->at);
    if (answered) st = plan_fused(ctx, b, o, fused, &run);
    if (st != GR_OK || !answered || !run.epilogue) {
        free(f);
        return st;
    }
    f->in = b->dtype;
    f->n = b->n;
    f->ddof = o->ddof;
    memcpy(f->ops, ops, (size_t)count * sizeof *ops);
    void *stream = stream_of(ctx, o);
    if ((st = make_shares(ctx, f, count, out)) == GR_OK) st = gr_buffer_slice(ctx, b, 0, b->n, &f->b);
    if (st == GR_OK) st = gr_slot_acquire(ctx, run.plan.dev_bytes, run.plan.acc_size, &f->slot);
    if (st == GR_OK) {
        st = queue_fused(ctx, b, &run, f->slot, stream);
        int rc = st == GR_OK ? gr_dev_event_record(f->slot->done, stream) : 0;
        if (rc) st = gr_fail_dev(ctx, rc, "event record");
        if (st == GR_OK) st = gr_storage_mark_read(ctx, b->st, stream);
        if (st != GR_OK) gr_dev_stream_sync(stream);    /* a pass queued before the failure ends first */
    }
    if (st == GR_OK) {
        wire_shares(f, count, out);
        return GR_OK;
    }
    for (int k = 0; k < count; k++) free(out[k]), out[k] = NULL;     /* never settled: plain memory */
    f->waited = 1;                          /* nothing left queued: the stream was waited for */
    drop_pass(ctx, f);
    return st;
}

gr_status gr_reduce_ops_async(gr_context *ctx, gr_buffer *b, const gr_options *o, const gr_op *ops, int count,
                              const gr_image *fused, gr_pending **out) {
    ctx = gr_ctx_for(ctx, b);
    gr_status st = check_ops(ctx, b, o, ops, count);
    if (st != GR_OK) return st;
    memset(out, 0, (size_t)count * sizeof *out);
    if (fusable(ctx, b, o, fused)) st = start_pass(ctx, b, o, fused, ops, count, out);
    for (int k = 0; k < count && st == GR_OK; k++) {
        if (out[k]) continue;
        gr_options one = *o;
        one.op = ops[k];
        st = gr_reduce_async(ctx, b, &one, &out[k]);
    }
    if (st != GR_OK)                        /* those started end before their memory goes back */
        for (int k = 0; k < count; k++) gr_pending_free(ctx, out[k]), out[k] = NULL;
    return st;
}
