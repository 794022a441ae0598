/*
 * axes_parts.c -- a reduction along axes rebuilt from its parts' results (axes_parts.h).
 *
 * A part's results along the axes are the op's accumulators turned into values: a one-value op's are its
 * accumulators, bit for bit, where the result dtype is the accumulator's; a mean's are its sums; an
 * argmin's its value and index (the index moved by the elements of the parts before); a float variance's
 * its mean and population variance, from which Welford's triple (n, mean, n times the variance) is made
 * again. The caller combines the parts' accumulators in part order with the CPU finish's merge
 * (host_ops.c) and turns them into results with gr_op_result.
 */
#include "multi/axes_parts.h"
#include "base/error.h"
#include "core/op_pass.h"
#include "ops/op_math.h"
#include "ops/ops.h"

#include <string.h>

int gr_axes_partial_ops(const gr_options *o, gr_dtype t, gr_op part[2]) {
    if (o->user || o->cpu || o->kernel || o->determinism == GR_DET_GPU_TO_GPU) return 0;
    const gr_op_desc *d = gr_op_desc_get(o->op);
    switch (gr_op_family(d, t)) {
    case GR_FAMILY_VALUE:
        part[0] = d->result == GR_RESULT_MEAN ? GR_SUM : o->op;     /* a mean is its sum's accumulator */
        return 1;
    case GR_FAMILY_ARG: case GR_FAMILY_MINMAX:
        part[0] = o->op;
        return 1;
    case GR_FAMILY_WELFORD:
        /* a 64-bit integer mean is the wrapping sum over n, not Welford's mean */
        if (!gr_dtype_is_float(t)) return 0;
        part[0] = GR_MEAN;
        part[1] = GR_VAR;
        return 2;
    case GR_FAMILY_NORM: case GR_FAMILY_COUNTED: case GR_FAMILY_MOMENTS: case GR_FAMILY_SQUARES:
        return 0;
    }
    return 0;
}

gr_status gr_axes_parts_init(gr_context *ctx, const gr_options *o, gr_dtype t, gr_axes_parts *P) {
    P->t = t;
    int acc = gr_op_acc_dtype(ctx, o->op, t, o->acc);
    if (acc < 0) return GR_EINVAL;
    P->acc = (gr_dtype)acc;
    P->as = gr_op_acc_size(o->op, t, P->acc);
    gr_status st = GR_OK;
    for (int p = 0; p < P->nparts && st == GR_OK; p++) {
        gr_options po = *o;
        po.op = P->part[p];
        po.ddof = 0;
        st = gr_segment_result_dtypes(ctx, &po, t, P->dt[p], &P->nres[p]);
    }
    return st;
}

int gr_axes_parts_exact_value(const gr_axes_parts *P) {
    return gr_dtype_size(P->dt[0][0]) == P->as;
}

void gr_axes_parts_rebuild(const gr_axes_parts *P, uint64_t n, uint64_t index0, size_t c, char *const host[2][2],
                           void *acc) {
    const gr_op_desc *d = gr_op_desc_get(P->part[0]);
    size_t es = gr_dtype_size(P->t);
    char *a = acc;
    memset(a, 0, P->as);
    if (P->nparts == 2) {               /* Welford: n, the mean, and m2 = n times the population variance */
        double mean = gr_scalar_load(host[0][0] + c * gr_dtype_size(P->dt[0][0]), P->dt[0][0]).v.f;
        double var = gr_scalar_load(host[1][0] + c * gr_dtype_size(P->dt[1][0]), P->dt[1][0]).v.f;
        if (P->acc == GR_FLOAT32) {
            gr_welford_f32 w = {n, (float)mean, (float)(var * (double)n)};
            memcpy(a, &w, sizeof w);
        } else {
            gr_welford_f64 w = {n, mean, var * (double)n};
            memcpy(a, &w, sizeof w);
        }
        return;
    }
    switch (gr_op_family(d, P->t)) {
    case GR_FAMILY_ARG: {               /* the index counted over the whole: the elements before the part's */
        int64_t at = gr_scalar_load(host[0][1] + c * 8, GR_INT64).v.i;
        uint64_t index = at > 0 ? (uint64_t)(at - 1) + index0 : GR_NO_INDEX;
        memcpy(a, &index, 8);
        memcpy(a + 8, host[0][0] + c * es, es);
        break;
    }
    case GR_FAMILY_MINMAX:
        memcpy(a, host[0][0] + c * es, es);
        memcpy(a + es, host[0][1] + c * es, es);
        break;
    case GR_FAMILY_VALUE: case GR_FAMILY_WELFORD: case GR_FAMILY_NORM: case GR_FAMILY_COUNTED:
    case GR_FAMILY_MOMENTS: case GR_FAMILY_SQUARES:
        memcpy(a, host[0][0] + c * P->as, P->as);       /* the result is the accumulator's value */
        break;
    }
}
