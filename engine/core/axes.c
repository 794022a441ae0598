/*
 * axes.c -- reductions along axes of a view (gr_reduce_axes): which kernel reduces which layout.
 *
 * The view's axes split into kept ones (the outputs, in their order) and reduced ones (each output's
 * elements, row-major over them); each side is coalesced, axes that walk memory as one merged and
 * length-1 axes dropped. Then:
 *   columns  the built-in ops on device data (not gpu_to_gpu): the column kernel (cuda/kernels/columns.cu)
 *            over A x R x C -- one reduced axis of any stride, up to two kept ones -- reading 16 bytes of
 *            adjacent columns where the outputs are adjacent, or 16 bytes along a row where the reduced
 *            axis is contiguous; its order of combination depends on R alone;
 *   rows     rows along a contiguous axis where gr_policy_rows_segmented (from R, the dtype's size and
 *            the op) prefers the segmented kernel, user operators and gpu_to_gpu on the device, and host
 *            data: the segmented kernel or loop, one row per output (rows a pitch apart on the device),
 *            shaped by gr_policy_axis_rows from the row's length alone;
 *   gather   anything else: the view regrouped as kept axes then reduced axes into a compact copy, whose
 *            rows one of the above reduces (the same choice from R as for a view's own rows).
 * Every choice depends on R, the dtype, the op and the view's layout, never on the lengths of the kept
 * axes: a result has the same bits whatever the number of other results or its place among them. Hence
 * one rule more: where a kept axis has stride 1 (a compact (L, c) matrix reduced along axis 1), the
 * outputs are columns even when c = 1 makes the reduced axis contiguous, so that a lone column gives the
 * bits it gives among others. A row and the same elements as a column (a transposed view, or a 1-D buffer
 * beside an (L, 1) matrix) may go to different kernels, and then differ in their last bits.
 *
 * gr_segment_outs_ready makes the checks of the results -- an axis reduction's, and a segmented one's as
 * segments.c makes them -- without reducing, for callers of several reductions that must fail first.
 */
#include "gr.h"
#include "base/device.h"
#include "base/error.h"
#include "base/launch.h"
#include "core/axes.h"
#include "core/buffer.h"
#include "core/context.h"
#include "core/exact_pass.h"
#include "core/op_pass.h"
#include "core/operator_cpu.h"
#include "core/pending.h"
#include "core/plan.h"
#include "core/policy.h"
#include "core/pool.h"
#include "core/segments.h"
#include "base/memory.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* cuda/kernels/columns.cu's launcher; absent in a build without kernels. */
extern const gr_col_kernel gr_columns __attribute__((weak));

typedef struct {
    size_t len, stride;
} axis_walk;

/* Merges neighbours (in the order given) that walk memory as one axis -- the outer's stride is the
 * inner's stride times its length -- and drops length-1 axes; returns the count left. */
static int coalesce(axis_walk *d, int n) {
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (d[i].len == 1) continue;
        if (m > 0 && d[m - 1].stride == d[i].stride * d[i].len) {
            d[m - 1].len *= d[i].len;
            d[m - 1].stride = d[i].stride;
        } else {
            d[m++] = d[i];
        }
    }
    return m;
}

/* An empty reduced axis: every output is an empty segment's result (its identity, or NaN). */
static gr_status empty_rows(gr_context *ctx, gr_buffer *b, const gr_options *o, size_t k, gr_buffer *out[2]) {
    gr_buffer *none = NULL, *bounds = NULL;
    gr_status st = gr_buffer_new(ctx, 0, gr_buffer_dtype(b), gr_buffer_where(b), &none);
    if (st == GR_OK) st = gr_buffer_new(ctx, k + 1, GR_INT64, gr_buffer_where(b), &bounds);
    if (st == GR_OK) st = gr_buffer_fill(ctx, bounds, (gr_scalar){.kind = GR_SCALAR_INT, .v.i = 0});
    if (st == GR_OK) st = gr_segments_rows(ctx, none, o, 0, 0, bounds, out);
    gr_buffer_free(ctx, bounds);
    gr_buffer_free(ctx, none);
    return st;
}

/* Scratch that queued kernels of pending p use until its event (with p NULL: none, the caller waits). */
static void hold_slot(gr_pending *p, gr_slot *slot) {
    p->held[p->held[0] ? 1 : 0] = slot;
}

/* The column kernel over A x R x C (see gr_col_launch): waited for, or with p queued and its scratch
 * held by p. */
static gr_status columns(gr_context *ctx, const char *data, gr_dtype t, const gr_run *run, const gr_options *o,
                         size_t A, size_t R, size_t C, size_t sa, size_t sr, size_t sc, int64_t oa, int64_t oc,
                         gr_buffer *out[2], gr_pending *p) {
    size_t es = gr_dtype_size(t), lb = es == 1 ? 8 : 16, kv = lb / es;
    int aligned = (uintptr_t)data % lb == 0 && (sa * es) % lb == 0;
    int pack = 1;
    if (sr == 1 && es <= 8) pack = 0;                                                       /* along a row */
    else if (sc == 1 && aligned && kv >= 2 && C % kv == 0 && (sr * es) % lb == 0) pack = (int)kv;   /* a row's vectors */
    else if (sc == 1 && aligned && C < kv && kv % C == 0 && sr == C) pack = (int)C;         /* several rows a vector */
    size_t as = run->plan.acc_size, g1 = (R + GR_COLUMN_GROUP_ROWS - 1) / GR_COLUMN_GROUP_ROWS;
    size_t g2 = (g1 + GR_COLUMN_GROUP_ROWS - 1) / GR_COLUMN_GROUP_ROWS;
    size_t scratch = g1 > 1 ? (A * g1 * C * as + 255) / 256 * 256 + A * g2 * C * as : 0;
    gr_slot *slot;
    gr_status st = gr_slot_acquire(ctx, scratch, 0, &slot);
    if (st != GR_OK) return st;
    gr_col_launch L = {
        .in = data, .in_dtype = t, .acc = run->plan.acc, .op = o->op, .ddof = o->ddof,
        .A = A, .R = R, .C = C, .sa = (int64_t)sa, .sr = (int64_t)sr, .sc = (int64_t)sc,
        .out = {gr_buffer_data(out[0]), run->results > 1 ? gr_buffer_data(out[1]) : NULL}, .oa = oa, .oc = oc,
        .pack = pack, .grid = gr_policy_column_grid(ctx), .scratch = slot->dev, .stream = ctx->stream,
    };
    int rc = gr_fault_hit(ctx, GR_FAULT_LAUNCH);
    if (rc == 0) rc = gr_columns.launch(&L);
    if (p && rc == 0) {
        hold_slot(p, slot);
        return GR_OK;
    }
    int sync = gr_dev_stream_sync(ctx->stream);
    if (rc == 0) rc = sync;
    gr_slot_release(ctx, slot);
    return rc ? gr_fail_dev_at(ctx, rc, "axis reduction", L.site) : GR_OK;
}

/* The kept axes (nkc <= 2, coalesced) and one reduced axis through the column kernel: C the kept axis of
 * the smaller stride, A the other; the results compact over the kept axes in their order. */
static gr_status by_columns(gr_context *ctx, const char *data, gr_dtype t, const gr_run *run, const gr_options *o,
                            const axis_walk *kept, int nkc, const axis_walk *red, gr_buffer *out[2], gr_pending *p) {
    if (nkc == 0) return columns(ctx, data, t, run, o, 1, red->len, 1, 0, red->stride, 0, 0, 0, out, p);
    int ci = nkc == 2 && kept[1].stride < kept[0].stride ? 1 : 0;
    const axis_walk *c = &kept[ci], *a = nkc == 2 ? &kept[1 - ci] : NULL;
    int64_t out_stride[2] = {nkc == 2 ? (int64_t)kept[1].len : 1, 1};
    return columns(ctx, data, t, run, o, a ? a->len : 1, red->len, c->len, a ? a->stride : 0, red->stride, c->stride,
                   a ? out_stride[1 - ci] : 0, out_stride[ci], out, p);
}

/* The segmented kernel over rows (gr_segments_rows): waited for, or with p queued and held by p. */
static gr_status rows(gr_context *ctx, gr_buffer *b, const gr_options *o, size_t R, size_t pitch, gr_buffer *out[2],
                      gr_pending *p) {
    if (!p) return gr_segments_rows(ctx, b, o, R, pitch, NULL, out);
    gr_seg_wait w;
    gr_status st = gr_segments_rows_queue(ctx, b, o, R, pitch, out, &w);
    if (st != GR_OK || w.rc) {              /* the wait gives back what a failed queue took */
        gr_status done = gr_segments_wait(&w);
        return st != GR_OK ? st : done;
    }
    if (w.slot) hold_slot(p, w.slot);
    return GR_OK;
}

/* The axes' mask checked against b's axes; *K the number of outputs (the kept axes' elements). */
static gr_status kept_outputs(gr_context *ctx, const gr_buffer *b, unsigned axes, size_t *K) {
    int nd = b->ndim;
    if (axes == 0 || (axes >> nd) != 0)
        return gr_fail_arg(ctx, GR_EINVAL, "axis", "axes outside the buffer's %d (accepted: 1 to %d, or -%d to -1)",
                           nd, nd, nd);
    *K = 1;
    for (int d = 0; d < nd; d++)
        if (!(axes >> d & 1)) *K *= b->shape[d];
    return GR_OK;
}

/* The results of run over b checked before anything is written: K outputs of its dtypes, compact, on b's
 * device. */
static gr_status outs_check(gr_context *ctx, const gr_buffer *b, const gr_run *run, size_t K, gr_buffer *out[2]) {
    gr_status st = gr_segment_outs_check(ctx, b, NULL, out, run->results, run->out_dtype, K);
    for (int i = 0; i < run->results && st == GR_OK; i++) st = gr_buffer_check_compact(ctx, out[i], i ? "out2" : "out");
    for (int i = 0; i < run->results && st == GR_OK; i++) st = gr_same_device(ctx, b, out[i], "out");
    return st;
}

/* A view's axes for a reduction along `axes` (a mask within its ndim): the kept axes, then the reduced ones
 * (perm, their order for a regrouped copy), each side coalesced (nkc, nrc), R the reduced length. */
typedef struct {
    axis_walk kept[GR_MAX_DIMS], red[GR_MAX_DIMS];
    int nkc, nrc, perm[GR_MAX_DIMS];
    int lone_column;        /* a kept axis of stride 1 (see the top of this file) */
    size_t R;
} axes_layout;

static void layout_of(const gr_buffer *b, unsigned axes, axes_layout *l) {
    int nd = b->ndim, nk = 0, nr = 0;
    l->lone_column = 0;
    l->R = 1;
    for (int d = 0; d < nd; d++)
        if (!(axes >> d & 1)) {
            if (b->strides[d] <= 1) l->lone_column = 1;
            l->perm[nk] = d;
            l->kept[nk++] = (axis_walk){b->shape[d], b->strides[d]};
        }
    for (int d = 0; d < nd; d++)
        if (axes >> d & 1) {
            l->perm[nk + nr] = d;
            l->red[nr++] = (axis_walk){b->shape[d], b->strides[d]};
            l->R *= b->shape[d];
        }
    l->nkc = coalesce(l->kept, nk);
    l->nrc = coalesce(l->red, nr);
}

/* Rows of the view itself, a row's length apart: one contiguous reduced run per output and outputs R
 * elements apart (no lone column) -- the layout whose rows go to the segmented kernel where the policy
 * takes them (run_axes below; core/ops_rows.c's fused ops read the same rows). */
static int own_rows(const axes_layout *l) {
    return !l->lone_column && l->nrc == 1 && l->red[0].stride == 1 && l->nkc <= 1 &&
           (l->nkc ? l->kept[0].stride : l->R) == l->R;
}

size_t gr_axes_own_rows(const gr_buffer *b, unsigned axes) {
    if (axes == 0 || (axes >> b->ndim) != 0) return 0;
    axes_layout l;
    layout_of(b, axes, &l);
    return own_rows(&l) ? l.R : 0;
}

/* gr_reduce_axes on the context's stream (the caller has set it): waited for, or with p queued. */
static gr_status run_axes(gr_context *ctx, gr_buffer *b, const gr_options *o, unsigned axes, gr_buffer *out[2],
                          gr_pending *p) {
    size_t K;
    gr_status st = kept_outputs(ctx, b, axes, &K);
    if (st != GR_OK) return st;
    axes_layout l;
    layout_of(b, axes, &l);
    axis_walk *kept = l.kept, *red = l.red;
    const size_t R = l.R;
    const int nkc = l.nkc, nrc = l.nrc, lone_column = l.lone_column;

    int on_device = ctx->base.backend == GR_BACKEND_CUDA && gr_buffer_where(b) == GR_DEVICE;
    int by_cpu = gr_operator_cpu_takes(ctx, o, b);
    gr_run run;
    st = gr_plan_segments(ctx, o, gr_buffer_dtype(b), on_device && !by_cpu, &run);
    if (st == GR_OK) st = outs_check(ctx, b, &run, K, out);
    if (st != GR_OK || K == 0) return st;
    if (R == 0) return empty_rows(ctx, b, o, K, out);

    /* the built-in ops on device data: rows along a contiguous axis to the segmented kernel where the
     * policy says it reads them faster (from R alone), anything else to the column kernel -- over the
     * view itself where one reduced axis and at most two kept ones remain, else over a regrouped compact
     * copy read along its rows */
    int columns_take = on_device && !by_cpu && run.kernel == &gr_op_pass && &gr_columns && gr_columns.launch;
    int rows_segmented = columns_take && !lone_column &&
                         gr_policy_rows_segmented(R, gr_dtype_size(gr_buffer_dtype(b)), o->op);
    if (columns_take && nrc == 1 && nkc <= 2 && !(rows_segmented && red[0].stride == 1))
        return by_columns(ctx, gr_buffer_data(b), gr_buffer_dtype(b), &run, o, kept, nkc, red, out, p);
    /* rows: each output's elements one run; a pitch other than the row's on the device, where the
     * operators' segmented kernels take it (not the exact one) */
    if ((!columns_take || rows_segmented) && nrc == 1 && red[0].stride == 1 && nkc <= 1) {
        size_t pitch = nkc ? kept[0].stride : R;
        if (pitch == R || (on_device && !by_cpu && run.kernel != &gr_exact_pass))
            return rows(ctx, b, o, R, pitch, out, p);
    }
    /* gather: kept axes, then reduced axes, copied compact; its rows are the outputs' runs */
    gr_buffer *regrouped = NULL, *flat = NULL;
    st = gr_buffer_permute(ctx, b, l.perm, &regrouped);
    if (st == GR_OK) st = gr_buffer_contiguous(ctx, regrouped, &flat);
    if (st == GR_OK && columns_take && !rows_segmented) {
        axis_walk rows_of = {K, R}, run_of = {R, 1};
        st = by_columns(ctx, gr_buffer_data(flat), gr_buffer_dtype(flat), &run, o, &rows_of, 1, &run_of, out, p);
    } else if (st == GR_OK) {
        st = rows(ctx, flat, o, R, R, out, p);
    }
    if (p && st == GR_OK) {                 /* the copy goes once the queued kernel has read it */
        p->temps[0] = flat;
        p->temps[1] = regrouped;
        return GR_OK;
    }
    gr_buffer_free(ctx, flat);
    gr_buffer_free(ctx, regrouped);
    return st;
}

/* The stream of this call, opts.stream's or the context's, made the context's for its length (the
 * segmented and column steps queue there); `plain` is o without it. */
static gr_status enter_stream(gr_context *ctx, const gr_options *o, void **saved, gr_options *plain) {
    *saved = ctx->stream;
    *plain = *o;
    plain->stream = NULL;
    if (!o->stream) return GR_OK;
    if (o->stream->device != ctx->device) return gr_stream_misplaced(ctx, o->stream);
    if (o->stream->handle) ctx->stream = o->stream->handle;
    return GR_OK;
}

gr_status gr_reduce_axes(gr_context *ctx, gr_buffer *b, const gr_options *o, unsigned axes, gr_buffer *out[2]) {
    ctx = gr_ctx_for(ctx, b);
    void *saved;
    gr_options plain;
    gr_status st = enter_stream(ctx, o, &saved, &plain);
    if (st == GR_OK) st = run_axes(ctx, b, &plain, axes, out, NULL);
    ctx->stream = saved;
    return st;
}

gr_status gr_segment_outs_ready(gr_context *ctx, gr_buffer *b, const gr_options *o, const gr_segments *seg,
                                unsigned axes, gr_buffer *out[2]) {
    ctx = gr_ctx_for(ctx, b);
    gr_options plain = *o;          /* an axis reduction's stream (enter_stream's) changes none of the checks */
    plain.stream = NULL;
    gr_run run;
    size_t k;
    gr_status st = gr_plan_segments(ctx, &plain, gr_buffer_dtype(b), 0, &run);
    if (st == GR_OK) st = seg ? gr_segment_count(ctx, b, seg, &k) : kept_outputs(ctx, b, axes, &k);
    if (st != GR_OK || !seg) return st != GR_OK ? st : outs_check(ctx, b, &run, k, out);
    /* as segments.c's queue checks them */
    st = gr_segment_outs_check(ctx, b, seg->size ? NULL : seg->offsets, out, run.results, run.out_dtype, k);
    for (int i = 0; i < run.results && st == GR_OK; i++) st = gr_same_device(ctx, b, out[i], "out");
    return st;
}

/* Asynchronously: the kernels queued on the call's stream, an event after them; the pending holds a
 * handle on the input, the kernels' scratch and any regrouped copy until the event has passed, and the
 * input's and results' storage record the work, so that writing or freeing them (and reading a result)
 * waits for it. Host data and the cpu backend are reduced at once. */
gr_status gr_reduce_axes_async(gr_context *ctx, gr_buffer *b, const gr_options *o, unsigned axes, gr_buffer *out[2],
                               gr_pending **out_p) {
    *out_p = NULL;
    ctx = gr_ctx_for(ctx, b);
    if (gr_operator_cpu_takes(ctx, o, b))
        return gr_fail_arg(ctx, GR_EINVAL, "async", "a user operator's cpu functions run synchronously");
    gr_pending *p = gr_pending_new_queued(ctx, "axis reduction");
    if (!p) return GR_ENOMEM;
    int queued = ctx->base.backend == GR_BACKEND_CUDA && gr_buffer_where(b) == GR_DEVICE;
    void *saved;
    gr_options plain;
    gr_status st = enter_stream(ctx, o, &saved, &plain);
    if (st == GR_OK) st = run_axes(ctx, b, &plain, axes, out, queued ? p : NULL);
    if (st == GR_OK && queued) {            /* b's whole view kept: it keeps its layout */
        gr_buffer *read[] = {b, out[0], out[1]};
        st = gr_pending_start_queued(ctx, p, GR_OK, b, read, 3, "recording an axis reduction's end");
    }
    ctx->stream = saved;
    if (st != GR_OK) {                      /* given back here: reduce.c's gr_pending_free calls into this file */
        if (!p->finished) gr_pending_settle_queued(ctx, p);
        gr_buffer_free(ctx, p->b);
        free(p);
        return st;
    }
    *out_p = p;
    return GR_OK;
}

