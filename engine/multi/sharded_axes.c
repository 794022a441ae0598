/*
 * sharded_axes.c -- reductions along axes of a sharded buffer split by rows (gr_reduce_shards_axes, and
 * gr_dot_shards_axes for two of one split).
 *
 * The shards are views of one shape but their first axis (the rows): shard i holds rows [row0_i, row0_i +
 * rows_i) of the logical array. Which path a call takes depends on whether the row axis is reduced:
 *   rows kept     every shard reduces its own rows along the axes on its device -- into its slice of the
 *                 results where it lies on their device, else into a buffer there copied into place
 *                 (peer to peer where the GPUs allow it). Every shard's work is queued before any is
 *                 waited for. A result covers elements of one row only, and an axis reduction's result
 *                 does not depend on how many others the call has (axes.c), so each has one GPU's bits
 *                 where the shard sits at one buffer's alignment (gr.sharded places them so: the loads
 *                 follow the data's alignment modulo 16 bytes, and so the order a short row is folded in);
 *   rows reduced  the ops whose accumulators can be rebuilt from results (every op of the value family --
 *                 mean from the sum --, argmin, argmax, minmax, and var/std of floats from each shard's
 *                 mean and population variance) reduce each shard's rows on its device at once into
 *                 accumulator-precision results there. A one-value op's results are its accumulators:
 *                 they are stacked as the rows of a (shards, K) buffer on the first shard's device and
 *                 folded along those rows by the op's combine (sum, prod, min, max, and, or, nanmin,
 *                 nanmax) there -- an order fixed by the number of shards. For the others
 *                 the host reads the results, rebuilds each shard's accumulator per output (an arg index
 *                 counted from the shard's first row, a Welford triple), combines them in shard order
 *                 with the CPU finish's merge (host_ops.c: NaN rules, first index on ties, Chan's merge)
 *                 and writes the results (about 50 ns per output and shard). Integer results, min/max,
 *                 count, and/or and the indices equal one buffer's; float sums are the same on every run
 *                 and close to one buffer's. Anything else -- gpu_to_gpu, user operators, nanmean, norm,
 *                 var/std of integers (up to 32 bits: their exact 128-bit sums of squares are in no
 *                 result; 64 bits: their mean result is the wrapping sum over n, not Welford's mean) --
 *                 gathers the rows into one buffer on the first shard's device and reduces that once:
 *                 one buffer's bits;
 *   every axis    the whole-buffer reduction of the shards (sharded.c), its value stored as the one result.
 * gr.dot along axes takes the same paths with each pair of shards' dot products along the axes (queued
 * on each pair's device by gr_dot_many_async, as the reductions are, before any is waited for) and a
 * sum's combine.
 */
#include "multi/sharded.h"
#include "multi/axes_parts.h"
#include "base/error.h"
#include "core/buffer.h"
#include "core/context.h"
#include "core/op_pass.h"
#include "ops/op_math.h"
#include "ops/ops.h"

#include <stdlib.h>
#include <string.h>

#define COMBINE_COLUMNS 65536   /* outputs combined per round on the host: bounds its memory */

/* The logical array: the shards' shape, their rows summed; where each shard's rows start. */
typedef struct split {
    gr_buffer *const *shards, *const *with;     /* with: a dot's second input (shard i beside shard i), or NULL */
    size_t count;
    int nd;
    size_t shape[GR_MAX_DIMS];
    size_t *row0;               /* row0[i]: shard i's first row; row0[count]: the rows */
    unsigned axes;
    size_t K, R;                /* results; elements each covers */
    size_t inner;               /* elements of the reduced axes but the first, per row (the reduced rows' stride) */
    size_t per_row;             /* results per row where the rows are kept */
} split;

/* Shards of one shape but the rows (else GR_EINVAL naming "shards"), and axes inside it (else naming
 * "axis"): the logical shape, the rows' starts, the result and group sizes. */
static gr_status split_read(gr_context *ctx, gr_buffer *const *shards, size_t count, unsigned axes, split *s) {
    s->shards = shards;
    s->count = count;
    s->nd = shards[0]->ndim;
    s->axes = axes;
    for (size_t i = 1; i < count; i++) {
        int same = shards[i]->ndim == s->nd;
        for (int d = 1; d < s->nd && same; d++) same = shards[i]->shape[d] == shards[0]->shape[d];
        if (!same)
            return gr_fail_arg(ctx, GR_EINVAL, "shards", "shard %zu's shape differs from shard 1's past the rows (a "
                               "sharded buffer is split along its first axis)", i + 1);
    }
    if (axes == 0 || (axes >> s->nd) != 0)
        return gr_fail_arg(ctx, GR_EINVAL, "axis", "axes outside the buffer's %d (accepted: 1 to %d, or -%d to -1)",
                           s->nd, s->nd, s->nd);
    if (!(s->row0 = malloc((count + 1) * sizeof *s->row0))) return gr_fail(ctx, GR_ENOMEM, "out of host memory");
    s->row0[0] = 0;
    for (size_t i = 0; i < count; i++) s->row0[i + 1] = s->row0[i] + shards[i]->shape[0];
    memcpy(s->shape, shards[0]->shape, sizeof s->shape);
    s->shape[0] = s->row0[count];
    s->K = s->R = s->inner = s->per_row = 1;
    for (int d = 0; d < s->nd; d++) {
        if (axes >> d & 1) s->R *= s->shape[d];
        else s->K *= s->shape[d];
        if (d > 0 && (axes >> d & 1)) s->inner *= s->shape[d];
        if (d > 0 && !(axes >> d & 1)) s->per_row *= s->shape[d];
    }
    return GR_OK;
}

static int all_axes(const split *s) { return s->axes == (1u << s->nd) - 1; }

/* ---- one shard's reduction along the axes ------------------------------------------------------------- */

/* Shard i's reduction with options o (or its pair's dot) into out -- queued on its device
 * (gr_reduce_axes_async, gr_dot_many_async) where a device reduces it, else at once -- and where given,
 * the buffers on the results' device its results go to (place: slices of the results, or of the stacked
 * partials). */
typedef struct job {
    gr_options o;
    gr_buffer *out[2], *place[2];
    gr_pending *p;
} job;

static gr_status job_start(gr_context *ctx, const split *s, size_t i, job *j) {
    int queue = ctx->base.backend == GR_BACKEND_CUDA && gr_buffer_where(s->shards[i]) == GR_DEVICE &&
                !gr_shards_by_cpu(ctx, s->shards, s->count, &j->o);
    if (s->with && queue) return gr_dot_many_async(ctx, s->shards[i], s->with[i], &j->o, NULL, s->axes, j->out, &j->p);
    if (s->with) return gr_dot_axes(ctx, s->shards[i], s->with[i], &j->o, s->axes, j->out);
    if (queue) return gr_reduce_axes_async(ctx, s->shards[i], &j->o, s->axes, j->out, &j->p);
    return gr_reduce_axes(ctx, s->shards[i], &j->o, s->axes, j->out);
}

/* New buffers of k results of want[0..nres) on shard `on`'s device, unset (the reduction writes them). */
static gr_status results_on(gr_context *ctx, const gr_buffer *on, size_t k, int nres, const gr_dtype want[2],
                            gr_buffer *out[2]) {
    gr_status st = GR_OK;
    for (int r = 0; r < nres && st == GR_OK; r++)
        st = gr_buffer_new_unset_on(ctx, k, want[r], gr_buffer_where(on), gr_buffer_device(on), &out[r]);
    return st;
}

/* Shard i's job started: into its place where the shard lies on that device, else into new buffers on
 * the shard's device (copied into place by job_done; with no place they stay for the caller). */
static gr_status job_queue(gr_context *ctx, const split *s, size_t i, job *j, int nres, const gr_dtype want[2],
                           size_t k) {
    gr_status st = GR_OK;
    if (j->place[0] && gr_buffer_device(j->place[0]) == gr_buffer_device(s->shards[i]))
        for (int r = 0; r < nres; r++) j->out[r] = j->place[r];
    else
        st = results_on(ctx, s->shards[i], k, nres, want, j->out);
    return st == GR_OK ? job_start(ctx, s, i, j) : st;
}

/* A job waited for (st: the status so far, kept when it failed already), its results copied into place
 * and the buffers it made for that given back. */
static gr_status job_done(gr_context *ctx, job *j, gr_status st) {
    if (j->p) {
        gr_result unused;
        gr_status done = gr_pending_wait(ctx, j->p, &unused);
        gr_pending_free(ctx, j->p);
        j->p = NULL;
        if (st == GR_OK) st = done;
    }
    for (int r = 0; r < 2; r++) {
        if (!j->place[r]) continue;
        if (j->out[r] && j->out[r] != j->place[r]) {
            if (st == GR_OK) st = gr_buffer_copy(ctx, j->place[r], j->out[r]);
            gr_buffer_free(ctx, j->out[r]);
        }
        gr_buffer_free(ctx, j->place[r]);
        j->out[r] = j->place[r] = NULL;
    }
    return st;
}

/* ---- rows kept: each shard's results are its slice of the results ---------------------------------------- */

static gr_status rows_kept(gr_context *ctx, const split *s, const gr_options *o, int nres, const gr_dtype want[2],
                           gr_buffer *out[2]) {
    job *jobs = calloc(s->count, sizeof *jobs);
    if (!jobs) return gr_fail(ctx, GR_ENOMEM, "out of host memory");
    gr_status st = GR_OK;
    for (size_t i = 0; i < s->count && st == GR_OK; i++) {
        size_t at = s->row0[i] * s->per_row, k = s->shards[i]->shape[0] * s->per_row;
        if (k == 0) continue;
        jobs[i].o = *o;
        for (int r = 0; r < nres && st == GR_OK; r++) st = gr_buffer_slice(ctx, out[r], at, k, &jobs[i].place[r]);
        if (st == GR_OK) st = job_queue(ctx, s, i, &jobs[i], nres, want, k);
    }
    for (size_t i = 0; i < s->count; i++) st = job_done(ctx, &jobs[i], st);
    gr_ctx_enter(ctx);
    free(jobs);
    return st;
}

/* ---- rows reduced, gathered: one buffer on the first shard's device ------------------------------------- */

/* A compact copy of the whole array on shards[0]'s device (its side), of the logical shape. */
static gr_status gather(gr_context *ctx, const split *s, gr_buffer *const *shards, gr_buffer **whole) {
    size_t n = 0;
    for (size_t i = 0; i < s->count; i++) n += shards[i]->n;
    gr_buffer *flat = NULL;
    gr_status st = gr_buffer_new_unset_on(ctx, n, shards[0]->dtype, gr_buffer_where(shards[0]),
                                          gr_buffer_device(shards[0]), &flat);
    size_t at = 0;
    for (size_t i = 0; i < s->count && st == GR_OK; at += shards[i]->n, i++) {
        gr_buffer *dst = NULL;
        if (shards[i]->n == 0) continue;
        st = gr_buffer_slice(ctx, flat, at, shards[i]->n, &dst);
        if (st == GR_OK) st = gr_buffer_copy(ctx, dst, shards[i]);
        gr_buffer_free(ctx, dst);
    }
    if (st == GR_OK) st = gr_buffer_view(ctx, flat, s->nd, s->shape, whole);
    gr_buffer_free(ctx, flat);          /* the view holds the memory */
    return st;
}

static gr_status gathered(gr_context *ctx, const split *s, const gr_options *o, gr_buffer *out[2]) {
    gr_buffer *a = NULL, *b = NULL;
    gr_status st = gather(ctx, s, s->shards, &a);
    if (st == GR_OK && s->with) st = gather(ctx, s, s->with, &b);
    if (st == GR_OK) st = b ? gr_dot_axes(ctx, a, b, o, s->axes, out) : gr_reduce_axes(ctx, a, o, s->axes, out);
    gr_buffer_free(ctx, a);
    gr_buffer_free(ctx, b);
    gr_ctx_enter(ctx);
    return st;
}

/* ---- rows reduced, combined: each shard's accumulators rebuilt from its results ------------------------- */

/* The shards' partial reductions (axes_parts.h): shard i's partial p is jobs[i][p] (its results
 * out[0..m.nres[p]), of the dtypes m.dt[p]). */
typedef struct partials {
    gr_axes_parts m;
    job (*jobs)[2];
} partials;

/* Outputs [c0, c0 + cn): every shard's results read, rebuilt, combined in shard order, the results written.
 * scratch: room for the results read (4), the results written (2), cn elements of 8 bytes each, and cn
 * accumulators. */
static gr_status combine_columns(gr_context *ctx, const split *s, const gr_options *o, const partials *P, size_t c0,
                                 size_t cn, int nres, const gr_dtype want[2], gr_buffer *out[2], char *scratch) {
    const gr_op_desc *d = gr_op_desc_get(o->op);
    const gr_axes_parts *M = &P->m;
    char *host[2][2] = {{NULL, NULL}, {NULL, NULL}}, *res[2] = {NULL, NULL}, *at = scratch;
    for (int p = 0; p < M->nparts; p++)
        for (int r = 0; r < M->nres[p]; r++, at += cn * 8) host[p][r] = at;
    for (int r = 0; r < nres; r++, at += cn * 8) res[r] = at;
    char *accs = at;
    uint64_t one[GR_ACC_MAX / 8 + 1];   /* aligned: the arg family reads its index as a uint64_t */
    for (size_t c = 0; c < cn; c++) gr_host_identity(d, M->t, M->acc, accs + c * M->as);
    gr_status st = GR_OK;
    for (size_t i = 0; i < s->count && st == GR_OK; i++) {
        if (!P->jobs[i][0].out[0]) continue;            /* no rows */
        for (int p = 0; p < M->nparts && st == GR_OK; p++)
            for (int r = 0; r < M->nres[p] && st == GR_OK; r++)
                st = gr_buffer_read(ctx, P->jobs[i][p].out[r], c0, host[p][r], cn);
        uint64_t n = (uint64_t)s->shards[i]->shape[0] * s->inner, index0 = (uint64_t)s->row0[i] * s->inner;
        for (size_t c = 0; c < cn && st == GR_OK; c++) {
            gr_axes_parts_rebuild(M, n, index0, c, host, one);
            gr_host_combine(d, M->t, M->acc, accs + c * M->as, one);
        }
    }
    for (size_t c = 0; c < cn && st == GR_OK; c++) {
        gr_result v = gr_op_result(o->op, accs + c * M->as, M->acc, M->t, s->R, o->ddof);
        for (int r = 0; r < nres && st == GR_OK; r++) st = gr_segment_result_store(ctx, res[r], c, want[r], v.value[r]);
    }
    for (int r = 0; r < nres && st == GR_OK; r++) st = gr_buffer_write(ctx, out[r], c0, res[r], cn);
    return st;
}

/* The op that folds partial results of op as elements (a one-value accumulator's combine). */
static gr_op fold_op(const gr_op_desc *d) {
    switch (d->combine) {
    case GR_COMBINE_ADD: return GR_SUM;
    case GR_COMBINE_MUL: return GR_PROD;
    case GR_COMBINE_MIN: return GR_MIN;
    case GR_COMBINE_MAX: return GR_MAX;
    case GR_COMBINE_AND: return GR_AND;
    case GR_COMBINE_OR: return GR_OR;
    case GR_COMBINE_NANMIN: return GR_NANMIN;
    case GR_COMBINE_NANMAX: return GR_NANMAX;
    }
    return GR_SUM;
}

/* A one-value op: the shards' results (its accumulators' values) stacked as the rows of a (shards, K) buffer
 * on the results' device, and folded along those rows by the op that combines them (fo) -- on the device,
 * in an order fixed by the number of shards. */
static gr_status rows_folded(gr_context *ctx, const split *s, const partials *P, const gr_options *fo,
                             gr_buffer *out[2]) {
    size_t used = 0;
    for (size_t i = 0; i < s->count; i++) used += s->shards[i]->shape[0] > 0;
    gr_buffer *stack = NULL, *rows = NULL;
    gr_status st = gr_buffer_new_unset_on(ctx, used * s->K, P->m.dt[0][0], gr_buffer_where(out[0]),
                                          gr_buffer_device(out[0]), &stack);
    size_t j = 0;
    for (size_t i = 0; i < s->count && st == GR_OK; i++) {
        if (s->shards[i]->shape[0] == 0) continue;
        job *jb = &P->jobs[i][0];
        st = gr_buffer_slice(ctx, stack, j++ * s->K, s->K, &jb->place[0]);
        if (st == GR_OK) st = job_queue(ctx, s, i, jb, 1, P->m.dt[0], s->K);
    }
    for (size_t i = 0; i < s->count; i++) st = job_done(ctx, &P->jobs[i][0], st);
    size_t shape[2] = {used, s->K};
    if (st == GR_OK) st = gr_buffer_view(ctx, stack, 2, shape, &rows);
    if (st == GR_OK) st = gr_reduce_axes(ctx, rows, fo, 1u, out);
    gr_buffer_free(ctx, rows);
    gr_buffer_free(ctx, stack);
    return st;
}

/* The other ops: every shard's results queued at once on its device, then read to the host and combined
 * per output there (combine_columns). */
static gr_status rows_on_host(gr_context *ctx, const split *s, const gr_options *o, const partials *P, int nres,
                              const gr_dtype want[2], gr_buffer *out[2]) {
    gr_status st = GR_OK;
    for (size_t i = 0; i < s->count && st == GR_OK; i++) {
        if (s->shards[i]->shape[0] == 0) continue;
        for (int p = 0; p < P->m.nparts && st == GR_OK; p++)
            st = job_queue(ctx, s, i, &P->jobs[i][p], P->m.nres[p], P->m.dt[p], s->K);
    }
    for (size_t i = 0; i < s->count; i++)
        for (int p = 0; p < P->m.nparts; p++) st = job_done(ctx, &P->jobs[i][p], st);
    gr_ctx_enter(ctx);
    size_t chunk = s->K < COMBINE_COLUMNS ? s->K : COMBINE_COLUMNS;
    char *scratch = st == GR_OK ? malloc(chunk * (6 * 8 + P->m.as)) : NULL;
    if (st == GR_OK && !scratch) st = gr_fail(ctx, GR_ENOMEM, "out of host memory");
    for (size_t c0 = 0; c0 < s->K && st == GR_OK; c0 += chunk)
        st = combine_columns(ctx, s, o, P, c0, s->K - c0 < chunk ? s->K - c0 : chunk, nres, want, out, scratch);
    free(scratch);
    return st;
}

static gr_status rows_combined(gr_context *ctx, const split *s, const gr_options *o, partials *P, int nres,
                               const gr_dtype want[2], gr_buffer *out[2]) {
    gr_status st = gr_axes_parts_init(ctx, o, P->m.t, &P->m);
    if (st != GR_OK) return st;
    /* a one-value op's result is its accumulator's value, bit for bit (else: gathered); but a mean's, which
     * the host makes from the sums, folded by its combine where that gives the op's own results */
    const gr_op_desc *d = gr_op_desc_get(o->op);
    int value = gr_op_family(d, P->m.t) == GR_FAMILY_VALUE, fold = value && d->result != GR_RESULT_MEAN;
    if (value && !gr_axes_parts_exact_value(&P->m)) return gathered(ctx, s, o, out);
    gr_options fo = *o;
    fo.op = fold_op(d);
    fo.ddof = 0;
    fo.acc = -1;
    gr_dtype fdt[2];
    int fres;
    if (fold && (gr_segment_result_dtypes(ctx, &fo, P->m.dt[0][0], fdt, &fres) != GR_OK || fdt[0] != want[0]))
        fold = 0;
    if (!(P->jobs = calloc(s->count, sizeof *P->jobs))) return gr_fail(ctx, GR_ENOMEM, "out of host memory");
    for (size_t i = 0; i < s->count; i++)
        for (int p = 0; p < P->m.nparts; p++) {
            P->jobs[i][p].o = *o;
            P->jobs[i][p].o.op = P->m.part[p];
            P->jobs[i][p].o.ddof = 0;
        }
    st = fold ? rows_folded(ctx, s, P, &fo, out) : rows_on_host(ctx, s, o, P, nres, want, out);
    for (size_t i = 0; i < s->count; i++)
        for (int p = 0; p < 2; p++)
            for (int r = 0; r < 2; r++) gr_buffer_free(ctx, P->jobs[i][p].out[r]);
    gr_ctx_enter(ctx);
    free(P->jobs);
    return st;
}

/* ---- every axis ---------------------------------------------------------------------------------------- */

static gr_status whole(gr_context *ctx, const split *s, const gr_options *o, int nres, const gr_dtype want[2],
                       gr_buffer *out[2]) {
    gr_result v;
    gr_status st = s->with ? gr_dot_shards(ctx, s->shards, s->with, s->count, o, &v)
                           : gr_reduce_shards(ctx, s->shards, s->count, o, &v);
    for (int r = 0; r < nres && st == GR_OK; r++) {
        unsigned char bytes[16];
        st = gr_segment_result_store(ctx, bytes, 0, want[r], v.value[r]);
        if (st == GR_OK) st = gr_buffer_write(ctx, out[r], 0, bytes, 1);
    }
    return st;
}

/* ---- entry points -------------------------------------------------------------------------------------- */

/* The checks of a call, nothing written: the shards (and a dot's pair), the axes, the results. */
static gr_status prepare(gr_context *ctx, split *s, const gr_options *o, gr_buffer *out[2], int *nres,
                         gr_dtype want[2]) {
    gr_status st = s->with ? gr_dot_shards_check(ctx, s->shards, s->with, s->count, o)
                           : gr_shards_check(ctx, s->shards, s->count, o);
    if (st == GR_OK) st = split_read(ctx, s->shards, s->count, s->axes, s);
    if (st == GR_OK) st = gr_segment_result_dtypes(ctx, o, s->shards[0]->dtype, want, nres);
    if (st == GR_OK && o->determinism == GR_DET_GPU_TO_GPU) {
        gr_plan plan;               /* an op or dtype gpu_to_gpu does not take, refused as for one buffer */
        st = gr_plan_make(ctx, s->shards[0], o, &plan);
    }
    if (st == GR_OK)
        for (int r = 0; r < *nres && st == GR_OK; r++) st = gr_buffer_check_compact(ctx, out[r], r ? "out2" : "out");
    if (st == GR_OK)
        st = gr_shards_outs_check(ctx, s->shards, s->count, NULL, out, *nres, want, s->K, "results along axes");
    return st;
}

static gr_status reduce_split(gr_context *ctx, split *s, const gr_options *o, gr_buffer *out[2]) {
    int nres;
    gr_dtype want[2];
    s->row0 = NULL;
    gr_status st = prepare(ctx, s, o, out, &nres, want);
    partials P = {0};
    P.m.t = s->shards[0]->dtype;
    if (st != GR_OK || s->K == 0) {
        /* nothing to do */
    } else if (s->R == 0 && (s->axes & 1)) {
        /* every result an empty one's, as the first shard gives it (the rows reduced, its kept axes are the
         * array's; with the rows kept each shard gives its own, below) */
        st = s->with ? gr_dot_axes(ctx, s->shards[0], s->with[0], o, s->axes, out)
                     : gr_reduce_axes(ctx, s->shards[0], o, s->axes, out);
    } else if (all_axes(s)) {
        st = whole(ctx, s, o, nres, want, out);
    } else if (!(s->axes & 1)) {
        st = rows_kept(ctx, s, o, nres, want, out);
    } else if ((P.m.nparts = gr_axes_partial_ops(o, P.m.t, P.m.part)) == 0) {
        st = gathered(ctx, s, o, out);
    } else {
        st = rows_combined(ctx, s, o, &P, nres, want, out);
    }
    free(s->row0);
    gr_ctx_enter(ctx);
    return st;
}

gr_status gr_reduce_shards_axes(gr_context *ctx, gr_buffer *const *shards, size_t count, const gr_options *o,
                                unsigned axes, gr_buffer *out[2]) {
    split s = {.shards = shards, .count = count, .axes = axes};
    return reduce_split(ctx, &s, o, out);
}

gr_status gr_dot_shards_axes(gr_context *ctx, gr_buffer *const *a, gr_buffer *const *b, size_t count,
                             const gr_options *o, unsigned axes, gr_buffer *out[2]) {
    split s = {.shards = a, .with = b, .count = count, .axes = axes};
    return reduce_split(ctx, &s, o, out);
}

gr_status gr_shards_axes_outs_ready(gr_context *ctx, gr_buffer *const *shards, size_t count, const gr_options *o,
                                    unsigned axes, gr_buffer *out[2]) {
    split s = {.shards = shards, .count = count, .axes = axes};
    int nres;
    gr_dtype want[2];
    gr_status st = prepare(ctx, &s, o, out, &nres, want);
    free(s.row0);
    return st;
}
