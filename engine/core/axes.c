/*
 * axes.c -- reductions along axes of a view (gr_reduce_axes): which kernel reduces which layout.
 *
 * The view's axes split into kept ones (the outputs, in their order) and reduced ones (each output's
 * elements, row-major over them); each side is coalesced, axes that walk memory as one merged and
 * length-1 axes dropped. Then, as CUB's segmented dispatch and PyTorch's Reduce.cuh choose by layout:
 *   rows     an output's elements are one contiguous run (reduced axes innermost): the segmented kernel,
 *            one row per output, rows `pitch` elements apart (a narrowed view's rows too, on the device);
 *   columns  the reduced axis is an outer one and the outputs of one batch are contiguous (a kept axis
 *            of stride 1): the column kernel (cuda/kernels/columns.cu), adjacent threads on adjacent
 *            outputs, for the built-in ops on device data at the default determinism levels;
 *   gather   anything else (several reduced runs, host data that is not rows, user operators and
 *            gpu_to_gpu off the rows): the view regrouped as kept axes then reduced axes into a compact
 *            copy, whose rows the segmented path reduces.
 * Rows and columns fix every choice that orders an output's combination from the reduced length alone
 * (gr_policy_axis_rows; the column kernel's groups), so an output's bits do not depend on how many
 * others the call has or where it sits.
 */
#include "gr.h"
#include "base/device.h"
#include "base/error.h"
#include "base/launch.h"
#include "core/buffer.h"
#include "core/context.h"
#include "core/exact_pass.h"
#include "core/op_pass.h"
#include "core/operator_cpu.h"
#include "core/plan.h"
#include "core/policy.h"
#include "core/pool.h"
#include "core/segments.h"
#include "base/memory.h"

#include <stdint.h>
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

/* The column kernel over A x R x C (see gr_col_launch), synchronously. */
static gr_status columns(gr_context *ctx, gr_buffer *b, const gr_run *run, const gr_options *o, size_t A, size_t R,
                         size_t C, size_t sa, size_t sr, int64_t oa, int64_t oc, gr_buffer *out[2]) {
    size_t es = gr_dtype_size(gr_buffer_dtype(b)), lb = es == 1 ? 8 : 16, kv = lb / es;
    const char *data = gr_buffer_data(b);
    int aligned = (uintptr_t)data % lb == 0 && (sa * es) % lb == 0;
    int pack = 1;
    if (aligned && kv >= 2 && C % kv == 0 && (sr * es) % lb == 0) pack = (int)kv;           /* whole vectors of a row */
    else if (aligned && C < kv && kv % C == 0 && sr == C) pack = (int)C;                /* several rows a vector */
    size_t packs = (C + (size_t)pack - 1) / (size_t)pack;
    int tile = 1;
    while (tile < 32 && (size_t)tile < packs) tile *= 2;
    size_t as = run->plan.acc_size, g1 = (R + GR_COLUMN_GROUP_ROWS - 1) / GR_COLUMN_GROUP_ROWS;
    size_t g2 = (g1 + GR_COLUMN_GROUP_ROWS - 1) / GR_COLUMN_GROUP_ROWS;
    size_t scratch = g1 > 1 ? (A * g1 * C * as + 255) / 256 * 256 + A * g2 * C * as : 0;
    gr_slot *slot;
    gr_status st = gr_slot_acquire(ctx, scratch, 0, &slot);
    if (st != GR_OK) return st;
    gr_col_launch L = {
        .in = data, .in_dtype = gr_buffer_dtype(b), .acc = run->plan.acc, .op = o->op, .ddof = o->ddof,
        .A = A, .R = R, .C = C, .sa = (int64_t)sa, .sr = (int64_t)sr,
        .out = {gr_buffer_data(out[0]), run->results > 1 ? gr_buffer_data(out[1]) : NULL}, .oa = oa, .oc = oc,
        .pack = pack, .tile = tile, .grid = gr_policy_column_grid(ctx), .scratch = slot->dev, .stream = ctx->stream,
    };
    int rc = gr_fault_hit(ctx, GR_FAULT_LAUNCH);
    if (rc == 0) rc = gr_columns.launch(&L);
    int sync = gr_dev_stream_sync(ctx->stream);
    if (rc == 0) rc = sync;
    gr_slot_release(ctx, slot);
    return rc ? gr_fail_dev_at(ctx, rc, "column reduction", L.site) : GR_OK;
}

gr_status gr_reduce_axes(gr_context *ctx, gr_buffer *b, const gr_options *o, unsigned axes, gr_buffer *out[2]) {
    ctx = gr_ctx_for(ctx, b);
    int nd = b->ndim;
    if (axes == 0 || (axes >> nd) != 0)
        return gr_fail_arg(ctx, GR_EINVAL, "axis", "axes outside the buffer's %d (accepted: 1 to %d, or -%d to -1)",
                           nd, nd, nd);
    axis_walk kept[GR_MAX_DIMS], red[GR_MAX_DIMS];
    int nk = 0, nr = 0, perm[GR_MAX_DIMS];
    size_t K = 1, R = 1;
    for (int d = 0; d < nd; d++)
        if (!(axes >> d & 1)) {
            perm[nk] = d;
            kept[nk++] = (axis_walk){b->shape[d], b->strides[d]};
            K *= b->shape[d];
        }
    for (int d = 0; d < nd; d++)
        if (axes >> d & 1) {
            perm[nk + nr] = d;
            red[nr++] = (axis_walk){b->shape[d], b->strides[d]};
            R *= b->shape[d];
        }

    int on_device = ctx->base.backend == GR_BACKEND_CUDA && gr_buffer_where(b) == GR_DEVICE;
    int by_cpu = gr_operator_cpu_takes(ctx, o, b);
    gr_run run;
    gr_status st = gr_plan_segments(ctx, o, gr_buffer_dtype(b), on_device && !by_cpu, &run);
    if (st == GR_OK) st = gr_segment_outs_check(ctx, b, NULL, out, run.results, run.out_dtype, K);
    for (int i = 0; i < run.results && st == GR_OK; i++) st = gr_buffer_check_compact(ctx, out[i], i ? "out2" : "out");
    for (int i = 0; i < run.results && st == GR_OK; i++) st = gr_same_device(ctx, b, out[i], "out");
    if (st != GR_OK || K == 0) return st;
    if (R == 0) return empty_rows(ctx, b, o, K, out);

    int nkc = coalesce(kept, nk), nrc = coalesce(red, nr);
    /* rows: each output's elements one run; a pitch other than the row's on the device, where the
     * built-in and the operators' segmented kernels take it (not the exact one) */
    if (nrc == 1 && red[0].stride == 1 && nkc <= 1) {
        size_t pitch = nkc ? kept[0].stride : R;
        if (pitch == R || (on_device && !by_cpu && run.kernel != &gr_exact_pass))
            return gr_segments_rows(ctx, b, o, R, pitch, NULL, out);
    }
    /* columns: one reduced axis, outputs contiguous within a batch */
    if (on_device && !by_cpu && run.kernel == &gr_op_pass && &gr_columns && gr_columns.launch && nrc == 1 &&
        red[0].stride != 1 && (nkc == 1 || nkc == 2)) {
        int ci = kept[0].stride == 1 ? 0 : nkc == 2 && kept[1].stride == 1 ? 1 : -1;
        if (ci >= 0) {
            const axis_walk *c = &kept[ci], *a = nkc == 2 ? &kept[1 - ci] : NULL;
            /* the outputs are compact over the kept axes in their order */
            int64_t oc = nkc == 2 && ci == 0 ? (int64_t)kept[1].len : 1;
            int64_t oa = a ? (ci == 1 ? (int64_t)c->len : 1) : 0;
            return columns(ctx, b, &run, o, a ? a->len : 1, R, c->len, a ? a->stride : 0, red[0].stride, oa, oc, out);
        }
    }
    /* gather: kept axes, then reduced axes, copied compact; its rows are the outputs' runs */
    gr_buffer *regrouped = NULL, *flat = NULL;
    st = gr_buffer_permute(ctx, b, perm, &regrouped);
    if (st == GR_OK) st = gr_buffer_contiguous(ctx, regrouped, &flat);
    if (st == GR_OK) st = gr_segments_rows(ctx, flat, o, R, R, NULL, out);
    gr_buffer_free(ctx, flat);
    gr_buffer_free(ctx, regrouped);
    return st;
}
