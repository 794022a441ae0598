/*
 * comm_axes.c -- c:reduce along axes of the ops whose ranks' results one all-reduce cannot combine: a mean
 * needs the ranks' sums and element counts, a variance their counts, means and variances, an argmin
 * where each rank's elements begin (comm_axes.h).
 *
 * Where partial results rebuild the op's accumulator per result (mean, var/std of floats, argmin, argmax,
 * minmax), each rank reduces its buffer along the axes into them (axes_parts.c, as a sharded buffer's
 * shards do: a mean's sums, a variance's means and population variances, an argmin's values and
 * indices). comm.c gathers every rank's head -- what it reduced, the shape, whether it failed -- and, where
 * every head agrees, every rank's partial results; each rank merges them here in rank order with the CPU
 * finish's combine, so every rank gets the same bits. The ranks' elements follow each other along the
 * first reduced axis, in rank order: an argmin's index counts in that concatenation (the first on ties,
 * the first NaN wins), and the reduced axes past the first must then match. A rank with no elements along
 * the axes adds nothing.
 *
 * The others -- norm (Blue's three sums), nanmean (a count no result holds), var/std of integers (exact
 * 128-bit sums of squares), every op at gpu_to_gpu (an exact sum per result) -- have no such parts: every
 * rank's elements are gathered to every rank instead and put one after another along the first reduced
 * axis (gr_axes_concat), and that array is reduced once, so every rank gets the bits one GPU gives for the
 * whole, at the determinism level asked. It moves every rank's data to every rank.
 *
 * gr_comm_combine_axes runs the same parts and merge in one process, with no communicator: how the specs
 * reach the merge without several GPUs, and a check of a job's results on one machine.
 */
#include "multi/comm_axes.h"
#include "multi/comm_parts.h"
#include "base/error.h"
#include "core/buffer.h"
#include "core/context.h"
#include "core/op_pass.h"
#include "ops/op_math.h"
#include "ops/ops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

gr_status gr_axes_rank_plan(gr_context *ctx, const gr_options *o, gr_dtype t, gr_axes_parts *M) {
    memset(M, 0, sizeof *M);
    M->nparts = gr_axes_partial_ops(o, t, M->part);
    gr_status st = gr_axes_parts_init(ctx, o, t, M);
    if (st != GR_OK) return st;         /* its own reason: an accumulator the dtype does not take */
    /* a one-value op whose result is not its accumulator bit for bit is gathered whole, as the rest */
    if (M->nparts && gr_op_desc_get(o->op)->family == GR_FAMILY_VALUE && !gr_axes_parts_exact_value(M)) M->nparts = 0;
    return GR_OK;
}

gr_status gr_axes_rank_make(gr_context *ctx, gr_buffer *b, const gr_options *o, unsigned axes, const gr_axes_parts *M,
                            gr_axes_rank *me) {
    memset(me, 0, sizeof *me);
    gr_axes_head *h = &me->head;
    *h = (gr_axes_head){.op = o->op, .dtype = b->dtype, .acc = M->acc, .ddof = o->ddof, .ndim = b->ndim, .axes = axes,
                        .det = o->determinism, .K = 1, .R = 1, .lead = 1, .inner = 1};
    for (int d = 0, first = 1; d < b->ndim; d++) {
        h->shape[d] = b->shape[d];
        if (!(axes >> d & 1)) {
            h->K *= b->shape[d];
        } else {
            h->R *= b->shape[d];
            if (first) h->lead = b->shape[d];
            else h->inner *= b->shape[d];
            first = 0;
        }
    }
    gr_status st = GR_OK;
    for (int p = 0; p < M->nparts && h->K > 0; p++)
        for (int r = 0; r < M->nres[p] && st == GR_OK; r++)
            st = gr_buffer_new_unset_on(ctx, h->K, M->dt[p][r], gr_buffer_where(b), gr_buffer_device(b), &me->res[p][r]);
    for (int p = 0; p < M->nparts && st == GR_OK && h->K > 0 && h->R > 0; p++) {
        gr_options po = *o;
        po.op = M->part[p];
        po.ddof = 0;
        st = gr_reduce_axes(ctx, b, &po, axes, me->res[p]);
    }
    h->status = st;
    return st;
}

void gr_axes_rank_free(gr_context *ctx, gr_axes_rank *me) {
    for (int p = 0; p < 2; p++)
        for (int r = 0; r < 2; r++) {
            gr_buffer_free(ctx, me->res[p][r]);
            me->res[p][r] = NULL;
        }
}

/* The kept axes of h as text, "{3, 4}", into buf. */
static const char *kept_shape(const gr_axes_head *h, char *buf, size_t size) {
    size_t kept[GR_MAX_DIMS];
    int nd = 0;
    for (int d = 0; d < h->ndim; d++)
        if (!(h->axes >> d & 1)) kept[nd++] = (size_t)h->shape[d];
    return gr_shape_text(nd, kept, buf, size);
}

/* A head's determinism as messages name it (-1: the variant's own, asked by no one). */
static const char *det_text(int det) {
    return det < 0 ? "the default" : gr_determinism_name((gr_determinism)det);
}

/* The reduced axes of h past the first as text, "{3, 4}", into buf. */
static const char *later_reduced_shape(const gr_axes_head *h, char *buf, size_t size) {
    size_t later[GR_MAX_DIMS];
    int nd = 0, first = 1;
    for (int d = 0; d < h->ndim; d++)
        if (h->axes >> d & 1) {
            if (!first) later[nd++] = (size_t)h->shape[d];
            first = 0;
        }
    return gr_shape_text(nd, later, buf, size);
}

gr_status gr_axes_heads_check(gr_context *ctx, const gr_axes_head *heads, int count, int whole, uint64_t *total) {
    const gr_axes_head *h0 = &heads[0];
    *total = 0;
    for (int r = 0; r < count; r++)
        if (heads[r].status != GR_OK)
            return gr_fail(ctx, (gr_status)heads[r].status, "rank %d of %d could not reduce its part (its own error "
                           "says why)", r, count);
    int arg = gr_op_family(gr_op_desc_get((gr_op)h0->op), (gr_dtype)h0->dtype) == GR_FAMILY_ARG;
    for (int r = 1; r < count; r++) {
        const gr_axes_head *h = &heads[r];
        if (h->op != h0->op || h->dtype != h0->dtype || h->acc != h0->acc || h->ddof != h0->ddof)
            return gr_fail_arg(ctx, GR_EINVAL, "b", "rank %d reduced %s with '%s' (accumulator %s, ddof %d), rank 0 %s "
                               "with '%s' (accumulator %s, ddof %d): every rank makes the same call on the same dtype",
                               r, gr_dtype_name((gr_dtype)h->dtype), gr_op_name((gr_op)h->op),
                               gr_dtype_name((gr_dtype)h->acc), (int)h->ddof, gr_dtype_name((gr_dtype)h0->dtype),
                               gr_op_name((gr_op)h0->op), gr_dtype_name((gr_dtype)h0->acc), (int)h0->ddof);
        if (h->det != h0->det)
            return gr_fail_arg(ctx, GR_EINVAL, "b", "rank %d reduced at determinism %s, rank 0 at %s: every rank makes "
                               "the same call", r, det_text(h->det), det_text(h0->det));
        int same = h->ndim == h0->ndim && h->axes == h0->axes && h->K == h0->K;
        for (int d = 0; d < h->ndim && same; d++) same = (h->axes >> d & 1) || h->shape[d] == h0->shape[d];
        char a[160], b[160];
        if (!same)
            return gr_fail_arg(ctx, GR_EINVAL, "b", "rank %d's results along the axes have the shape %s, rank 0's %s: "
                               "every rank gives the same result shape (%d axes and %d, reduced along the same)", r,
                               kept_shape(h, a, sizeof a), kept_shape(h0, b, sizeof b), (int)h->ndim, (int)h0->ndim);
        if (arg && h->inner != h0->inner && h->R > 0 && h0->R > 0)
            return gr_fail_arg(ctx, GR_EINVAL, "b", "rank %d's reduced axes past the first hold %llu elements, rank "
                               "0's %llu: argmin and argmax count the ranks' elements one after another along the "
                               "first reduced axis, so the others must match", r, (unsigned long long)h->inner,
                               (unsigned long long)h0->inner);
    }
    /* whole arrays one after another along the first reduced axis: the others agree, axis by axis */
    const gr_axes_head *held = NULL;    /* the first rank with elements along the axes */
    for (int r = 0; r < count && whole; r++) {
        const gr_axes_head *h = &heads[r];
        if (h->R == 0) continue;
        if (!held) held = h;
        int same = 1, first = 1;
        for (int d = 0; d < h->ndim; d++)
            if (h->axes >> d & 1) {
                same = same && (first || h->shape[d] == held->shape[d]);
                first = 0;
            }
        char a[160], b[160];
        if (!same)
            return gr_fail_arg(ctx, GR_EINVAL, "b", "rank %d's reduced axes past the first have the shape %s, rank "
                               "%d's %s: '%s' puts the ranks' elements one after another along the first reduced "
                               "axis, so the others must match", r, later_reduced_shape(h, a, sizeof a),
                               (int)(held - heads), later_reduced_shape(held, b, sizeof b), gr_op_name((gr_op)h->op));
    }
    for (int r = 0; r < count; r++) *total += heads[r].R;
    return GR_OK;
}

gr_status gr_axes_concat(gr_context *ctx, const gr_axes_head *heads, int count, gr_buffer *const *src,
                         const gr_buffer *like, gr_buffer **cat) {
    *cat = NULL;
    const gr_axes_head *held = NULL;
    uint64_t lead = 0;
    for (int r = 0; r < count; r++)
        if (heads[r].R > 0) {
            if (!held) held = &heads[r];
            lead += heads[r].lead;
        }
    int d0 = 0;
    while (!(held->axes >> d0 & 1)) d0++;
    size_t shape[GR_MAX_DIMS], n = 1;
    for (int d = 0; d < held->ndim; d++) n *= shape[d] = d == d0 ? (size_t)lead : (size_t)held->shape[d];
    gr_buffer *memory = NULL, *whole = NULL;
    gr_status st = gr_buffer_new_unset_on(ctx, n, (gr_dtype)held->dtype, gr_buffer_where(like), gr_buffer_device(like),
                                          &memory);
    if (st == GR_OK) st = gr_buffer_view(ctx, memory, held->ndim, shape, &whole);
    gr_buffer_free(ctx, memory);        /* the view keeps it */
    uint64_t at = 0;
    for (int r = 0; r < count && st == GR_OK; r++) {
        if (heads[r].R == 0) continue;
        gr_buffer *part = NULL;
        st = gr_buffer_narrow(ctx, whole, d0, (size_t)at, (size_t)heads[r].lead, &part);
        if (st == GR_OK) st = gr_buffer_copy(ctx, part, src[r]);
        gr_buffer_free(ctx, part);
        at += heads[r].lead;
    }
    if (st != GR_OK) {
        gr_buffer_free(ctx, whole);
        whole = NULL;
    }
    *cat = whole;
    return st;
}

gr_status gr_axes_ranks_merge(gr_context *ctx, const gr_options *o, const gr_axes_parts *M, const gr_axes_head *heads,
                              int count, char *const all[2][2], gr_buffer *out[2]) {
    gr_dtype want[2];
    int nres;
    gr_status st = gr_segment_result_dtypes(ctx, o, M->t, want, &nres);
    if (st != GR_OK) return st;
    const gr_op_desc *d = gr_op_desc_get(o->op);
    size_t K = heads[0].K;
    uint64_t total = 0, inner = 0;
    for (int i = 0; i < count; i++) {
        total += heads[i].R;
        if (heads[i].R > 0 && !inner) inner = heads[i].inner;
    }
    char *res[2] = {NULL, NULL};
    uint64_t *index0 = malloc((size_t)count * sizeof *index0);
    for (int r = 0; r < nres; r++) res[r] = malloc(K * 8 + 8);
    if (!index0 || !res[0] || (nres > 1 && !res[1])) st = gr_fail(ctx, GR_ENOMEM, "out of host memory");
    uint64_t before = 0;                /* the ranks' elements before rank i along the first reduced axis */
    for (int i = 0; i < count && st == GR_OK; i++) {
        index0[i] = before * inner;
        if (heads[i].R > 0) before += heads[i].lead;
    }
    uint64_t merged[GR_ACC_MAX / 8 + 1], one[GR_ACC_MAX / 8 + 1];     /* aligned: an arg's index is a uint64_t */
    for (size_t c = 0; c < K && st == GR_OK; c++) {
        int first = 1;
        for (int i = 0; i < count; i++) {
            if (heads[i].R == 0) continue;
            char *host[2][2] = {{NULL, NULL}, {NULL, NULL}};
            for (int p = 0; p < M->nparts; p++)
                for (int r = 0; r < M->nres[p]; r++) host[p][r] = all[p][r] + (size_t)i * K * gr_dtype_size(M->dt[p][r]);
            gr_axes_parts_rebuild(M, heads[i].R, index0[i], c, host, one);
            /* the first is taken as it is, not combined into an identity: one rank's sum of -0.0 stays -0.0 */
            if (first) memcpy(merged, one, M->as);
            else gr_host_combine(d, M->t, M->acc, merged, one);
            first = 0;
        }
        gr_result v = gr_op_result(o->op, merged, M->acc, M->t, (size_t)total, o->ddof);
        for (int r = 0; r < nres && st == GR_OK; r++) st = gr_segment_result_store(ctx, res[r], c, want[r], v.value[r]);
    }
    for (int r = 0; r < nres && st == GR_OK && K > 0; r++) st = gr_buffer_write(ctx, out[r], 0, res[r], K);
    free(index0);
    free(res[0]);
    free(res[1]);
    return st;
}

/* ---- in one process ------------------------------------------------------------------------------------ */

gr_status gr_comm_combine_axes(gr_context *ctx, gr_buffer *const *parts, size_t count, const gr_options *o,
                               unsigned axes, gr_buffer *out[2]) {
    if (count < 1 || count > 65536)
        return gr_fail_arg(ctx, GR_EINVAL, "parts", "expected 1 to 65536 buffers (got %zu)", count);
    if (!gr_part_gathered(o))
        return gr_fail_arg(ctx, GR_EINVAL, "op", "'%s' is combined by NCCL's all-reduce of the ranks' results, not "
                           "from their parts (gathered: mean, nanmean, var, std, norm, argmin, argmax, minmax, and "
                           "every op at determinism gpu_to_gpu)", gr_op_name(o->op));
    gr_axes_parts M;
    gr_status st = gr_axes_rank_plan(ctx, o, parts[0]->dtype, &M);
    if (st == GR_OK) st = gr_segment_outs_ready(ctx, parts[0], o, NULL, axes, out);
    if (st != GR_OK) return st;
    gr_axes_rank *ranks = calloc(count, sizeof *ranks);
    gr_axes_head *heads = calloc(count, sizeof *heads);
    char *all[2][2] = {{NULL, NULL}, {NULL, NULL}};
    if (!ranks || !heads) st = gr_fail(ctx, GR_ENOMEM, "out of host memory");
    for (size_t i = 0; i < count && st == GR_OK; i++) {
        gr_axes_parts Mi = M;           /* each rank plans for its own dtype: the heads then tell them apart */
        if (i > 0) st = gr_axes_rank_plan(ctx, o, parts[i]->dtype, &Mi);
        if (st == GR_OK) st = gr_axes_rank_make(ctx, parts[i], o, axes, &Mi, &ranks[i]);
        heads[i] = ranks[i].head;
    }
    gr_ctx_enter(ctx);
    uint64_t total = 0;
    if (st == GR_OK) st = gr_axes_heads_check(ctx, heads, (int)count, M.nparts == 0, &total);
    size_t K = st == GR_OK ? heads[0].K : 0;
    if (st == GR_OK && K > 0 && total == 0) {
        st = gr_reduce_axes(ctx, parts[0], o, axes, out);   /* every rank empty along the axes: one's results */
    } else if (st == GR_OK && K > 0 && M.nparts == 0 && count == 1) {
        st = gr_reduce_axes(ctx, parts[0], o, axes, out);   /* one rank: its own buffer, as c:reduce takes it */
    } else if (st == GR_OK && K > 0 && M.nparts == 0) {
        gr_buffer *whole = NULL;        /* no parts: the ranks' elements one after another, reduced once */
        st = gr_axes_concat(ctx, heads, (int)count, parts, parts[0], &whole);
        if (st == GR_OK) st = gr_reduce_axes(ctx, whole, o, axes, out);
        gr_buffer_free(ctx, whole);
    } else if (st == GR_OK && K > 0) {
        for (int p = 0; p < M.nparts && st == GR_OK; p++)
            for (int r = 0; r < M.nres[p] && st == GR_OK; r++) {
                size_t es = gr_dtype_size(M.dt[p][r]);
                if (!(all[p][r] = malloc(count * K * es))) st = gr_fail(ctx, GR_ENOMEM, "out of host memory");
                for (size_t i = 0; i < count && st == GR_OK; i++)
                    if (heads[i].R > 0) st = gr_buffer_read(ctx, ranks[i].res[p][r], 0, all[p][r] + i * K * es, K);
            }
        if (st == GR_OK) st = gr_axes_ranks_merge(ctx, o, &M, heads, (int)count, all, out);
    }
    for (size_t i = 0; ranks && i < count; i++) gr_axes_rank_free(ctx, &ranks[i]);
    for (int p = 0; p < 2; p++)
        for (int r = 0; r < 2; r++) free(all[p][r]);
    free(ranks);
    free(heads);
    return st;
}
