/*
 * ops_rows.c -- several built-in ops along segments, CSR offsets or rows in one launch (opts.ops with
 * segment, offsets or axis): gr_reduce_ops_segments. One launch of a segmented fused image's kernel
 * (user/fused_source.c) reduces each segment once, its accumulator the tuple of the ops' own, and
 * writes each op's results with that op's own writer into that op's buffers.
 *
 * Why the results are the single calls' bits: the launch is queued through segments.c as gr.dot's is
 * (gr_segments_inputs_queue with a kernel of our own), so the checks, the offsets' check and the longest
 * segment it measures, and the shape -- gr_policy_segments, gr_policy_uneven_segments, or for rows
 * gr_policy_axis_rows, all of them from the segments and the dtype, never from the op -- are those of
 * each op's own call; the walk is segmented.cuh's, folding each op's thread state as its own kernel does.
 * Rows only where axes.c reduces the view's own rows for that op (gr_axes_own_rows, and the policy's
 * gr_policy_rows_segmented per op); the other layouts (columns, a gathered copy), the ops the image does
 * not answer, and everything off the GPU or at gpu_to_gpu are left to calls of their own (the caller's).
 */
#include "gr.h"
#include "base/device.h"
#include "base/error.h"
#include "base/launch.h"
#include "core/axes.h"
#include "core/buffer.h"
#include "core/context.h"
#include "core/image.h"
#include "core/op_pass.h"
#include "core/pending.h"
#include "core/plan.h"
#include "core/policy.h"
#include "core/pool.h"
#include "core/reduce_ops.h"
#include "core/segments.h"
#include "ops/ops.h"

#include <stdio.h>
#include <string.h>

/* The queue's kernel: the built-in ops' shape (gr_op_pass's), segments launched by the fused image. The
 * queue hands the launch run->kernel, which is `pass`, the first member: the launch finds the rest. */
typedef struct fused_rows {
    gr_pass_kernel pass;
    const gr_image *img;
    void *outs[GR_FUSED_WRITERS][2];    /* the writers' results (the kernel's gr_fused_outs) */
    int writers;
    gr_slot *slot;                      /* the table on the device, and the parts of split segments */
    gr_status st;                       /* a failure of the launch's own (its scratch) */
    char why[256];                      /* st's message, which the queue's report of the launch replaces */
} fused_rows;

static gr_seg_shape rows_shape(const gr_context *ctx, const gr_run *run, size_t n, size_t k) {
    return gr_op_pass.shape(ctx, run, n, k);
}

/* The results table copied to the device ahead of the kernel, which reads it from the launch's out0; the
 * parts of split segments in our scratch (the queue's are sized for one op's accumulator). */
static int rows_launch(gr_context *ctx, const gr_run *run, gr_seg_launch *L) {
    fused_rows *f = (fused_rows *)run->kernel;
    size_t table = (size_t)f->writers * sizeof f->outs[0], at = (table + 255) / 256 * 256;
    size_t parts = L->splits > 1 ? L->grid * f->img->acc_size : 0;
    f->st = gr_slot_acquire(ctx, at + parts, table, &f->slot);
    if (f->st != GR_OK) {
        snprintf(f->why, sizeof f->why, "%s", gr_errmsg(ctx));
        return 2;                       /* cudaErrorMemoryAllocation; f->st and f->why say what */
    }
    memcpy(f->slot->host, f->outs, table);
    int rc = gr_dev_copy(f->slot->dev, f->slot->host, table, L->stream);
    L->out[0] = f->slot->dev;
    L->out[1] = NULL;
    L->partials = parts ? (char *)f->slot->dev + at : NULL;
    if (rc == 0) rc = gr_image_launch_segments(L, f->img);
    if (rc && !L->site) L->site = "gr_op_segments (fused ops)";
    return rc;
}

/* Whether this call may fuse at all: device data on the GPU, the single calls' own plan (no kernel option,
 * below gpu_to_gpu), a compact buffer; segments take no stream (their single calls refuse one), rows one
 * of b's device. */
static int fuses_here(const gr_context *ctx, const gr_buffer *b, const gr_options *o, const gr_segments *seg,
                      size_t row) {
    if (ctx->base.backend != GR_BACKEND_CUDA || gr_buffer_where(b) != GR_DEVICE ||
        o->determinism == GR_DET_GPU_TO_GPU || gr_options_way(o) || !gr_buffer_is_compact(b))
        return 0;
    if (seg) return !o->stream;
    return row > 0 && b->n > 0 && (!o->stream || o->stream->device == ctx->device);
}

/* Whether op's own call reduces these rows (row > 0) with the segmented kernel; segments always. */
static int rows_take(const gr_buffer *b, size_t row, gr_op op) {
    return !row || gr_policy_rows_segmented(row, gr_dtype_size(b->dtype), op);
}

int gr_reduce_ops_segments_fusable(gr_context *ctx, gr_buffer *b, const gr_options *o, const gr_op *ops, int count,
                                   const gr_segments *seg, unsigned axes) {
    ctx = gr_ctx_for(ctx, b);
    size_t row = seg ? 0 : gr_axes_own_rows(b, axes);
    int taken = 0;
    if (!fuses_here(ctx, b, o, seg, row)) return 0;
    for (int k = 0; k < count; k++)
        taken += (unsigned)ops[k] < GR_OP_COUNT && gr_fused_takes(ops[k], b->dtype) && rows_take(b, row, ops[k]);
    return taken >= 2;
}

/* The ops the image answers here (fuse[k] set, their writers' results in f->outs); how many. */
static int answered(gr_context *ctx, const gr_buffer *b, const gr_options *o, const gr_op *ops, int count,
                    gr_buffer *(*out)[2], size_t row, fused_rows *f, int *fuse) {
    int found = 0;
    for (int k = 0; k < count; k++) {
        int acc = gr_op_acc_dtype(ctx, ops[k], b->dtype, o->acc);
        int j = acc < 0 ? -1 : gr_fused_slot(f->img, ops[k], b->dtype, acc);
        int w = j < 0 ? -1 : gr_fused_writer_of(f->img, ops[k], j);
        fuse[k] = w >= 0 && rows_take(b, row, ops[k]);
        if (!fuse[k]) continue;
        f->outs[w][0] = out[k][0] ? gr_buffer_data(out[k][0]) : NULL;
        f->outs[w][1] = out[k][1] ? gr_buffer_data(out[k][1]) : NULL;
        found++;
    }
    return found;
}

/* Every fused op's results checked as its own call checks them (the queue checks the first op's), and
 * what earlier work still does with them waited for. */
static gr_status outs_ready(gr_context *ctx, gr_buffer *b, const gr_options *o, const gr_op *ops, int count,
                            const gr_segments *seg, unsigned axes, gr_buffer *(*out)[2], const int *fuse) {
    gr_status st = GR_OK;
    for (int k = 0; k < count && st == GR_OK; k++) {
        if (!fuse[k]) continue;
        gr_options one = *o;
        one.op = ops[k];
        st = gr_segment_outs_ready(ctx, b, &one, seg, axes, out[k]);
        for (int i = 0; i < 2 && st == GR_OK; i++)
            if (out[k][i]) st = gr_storage_quiesce(ctx, out[k][i]->st);
    }
    return st;
}

/* The queued launch made a pending (as gr_reduce_axes_async's): it holds the scratch and a handle on b
 * until its event has passed; b's and the results' storage record the work. On failure the launch is
 * waited for and everything given back. */
static gr_status pend(gr_context *ctx, gr_buffer *b, gr_seg_wait *w, fused_rows *f, gr_buffer *(*out)[2],
                      const int *fuse, int count, gr_pending **p) {
    gr_pending *q = gr_pending_new_queued(ctx, "fused ops along rows");
    if (!q) {
        gr_status st = GR_ENOMEM;
        gr_segments_wait(w);
        gr_slot_release(ctx, f->slot);
        return st;
    }
    q->held[0] = w->slot;
    q->held[1] = f->slot;
    w->slot = NULL;
    gr_buffer *read[1 + 2 * GR_OP_COUNT] = {b};     /* count <= GR_OP_COUNT (gr_ops_check) */
    int n = 1;
    for (int k = 0; k < count; k++)
        for (int i = 0; i < 2; i++)
            if (fuse[k] && out[k][i]) read[n++] = out[k][i];
    gr_status st = gr_pending_start_queued(ctx, q, GR_OK, b, read, n, "recording the fused ops' end");
    if (st == GR_OK) {
        *p = q;
        return GR_OK;
    }
    gr_pending_free(ctx, q);                /* the stream was waited for */
    return st;
}

/* The launch over b's segments or rows for the ops marked in fuse (the first of them names the plan),
 * on the context's stream: waited for, or with p made a pending. */
static gr_status launch(gr_context *ctx, gr_buffer *b, const gr_options *o, const gr_op *ops, int count,
                        const gr_segments *seg, size_t row, gr_buffer *(*out)[2], const int *fuse, fused_rows *f,
                        gr_pending **p) {
    int first = 0;
    while (!fuse[first]) first++;
    gr_options one = *o;
    one.op = ops[first];
    one.stream = NULL;              /* the context's stream is the call's (the caller set it) */
    gr_segments rows = {row, NULL};
    gr_seg_wait w;
    gr_status st = gr_segments_inputs_queue(ctx, &b, 1, &f->pass, &one, seg ? seg : &rows, !seg, out[first], &w);
    if (st == GR_OK && f->st == GR_OK && !w.rc && p) return pend(ctx, b, &w, f, out, fuse, count, p);
    gr_status done = gr_segments_wait(&w);
    if (f->slot) gr_slot_release(ctx, f->slot);
    f->slot = NULL;
    if (f->st != GR_OK) return gr_fail(ctx, f->st, "%s", f->why);
    return st != GR_OK ? st : done;
}

gr_status gr_reduce_ops_segments(gr_context *ctx, gr_buffer *b, const gr_options *o, const gr_op *ops, int count,
                                 const gr_image *fused, const gr_segments *seg, unsigned axes, gr_buffer *(*out)[2],
                                 int *done, gr_pending **p) {
    if (p) *p = NULL;
    memset(done, 0, (size_t)(count > 0 ? count : 0) * sizeof *done);
    ctx = gr_ctx_for(ctx, b);
    gr_status st = gr_ops_check(ctx, o, ops, count);
    if (st != GR_OK) return st;
    if (p && seg) return gr_fail_arg(ctx, GR_EINVAL, "async", "segmented reductions are synchronous");
    size_t row = seg ? 0 : gr_axes_own_rows(b, axes);
    if (!fused || !fused->has_segments || fused->in != b->dtype || !fuses_here(ctx, b, o, seg, row)) return GR_OK;
    fused_rows f = {.pass = gr_op_pass, .img = fused};
    f.pass.what = "the fused ops' segmented kernel%.0s";
    f.pass.segments = rows_launch;
    f.pass.shape = rows_shape;
    f.pass.segments_host = NULL;
    int fuse[GR_OP_COUNT];
    gr_fused_writer w[GR_FUSED_WRITERS];
    gr_op slots[GR_OP_COUNT];
    for (int j = 0; j < fused->fused_count; j++) slots[j] = (gr_op)fused->fused_ops[j];
    f.writers = gr_fused_writers(slots, fused->fused_count, fused->in, w);
    if (answered(ctx, b, o, ops, count, out, row, &f, fuse) < 2) return GR_OK;     /* one op: its own call */
    if ((st = gr_image_on(ctx, fused, &f.img)) != GR_OK) return st;
    if ((st = outs_ready(ctx, b, o, ops, count, seg, axes, out, fuse)) != GR_OK) return st;
    void *saved = ctx->stream;
    if (!seg && o->stream && o->stream->handle) ctx->stream = o->stream->handle;
    st = launch(ctx, b, o, ops, count, seg, row, out, fuse, &f, p);
    ctx->stream = saved;
    for (int k = 0; k < count && st == GR_OK; k++) done[k] = fuse[k];
    return st;
}
