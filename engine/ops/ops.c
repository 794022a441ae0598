/*
 * ops.c -- the descriptors of the built-in ops and the rules every backend shares: which accumulator
 * an op takes for a dtype, its size, and the dtypes of its results.
 *
 * The result rules of the API live here and nowhere else: integer sums and products (and sums of
 * squares) accumulate in 64 bits (wrapping, so results are exact modulo 2^64 and bit-identical on every
 * backend), min and max stay in the input type, and/or reduce 0/1 flags, floats accumulate in their
 * dtype's float_acc (lists.h: their own type) unless the caller asks for float64 (float32 data only);
 * means, variances and norms of integers are float64 results, a mean from the exact 64-bit sum,
 * var/std/norm of integers of up to 32 bits from exact sums and sums of squares (gr_op_family), of
 * 64-bit integers by Welford and Blue in float64. absmax keeps |x| in the input's float dtype, or for
 * integers in the unsigned dtype of their width (so int8's |-128| is 128); asum is a sum like sum's of
 * |x| (integers: 64-bit wrapping, read as unsigned).
 */
#include "ops/ops.h"
#include "base/dtype.h"
#include "base/error.h"

#include <stdio.h>
#include <string.h>

#define V GR_FAMILY_VALUE
static const gr_op_desc ops[GR_OP_COUNT] = {
    /*           name       alias  id          family               map              combine             acc            result           arity identity */
    [GR_SUM] = {"sum", NULL, GR_SUM, V, GR_MAP_VALUE, GR_COMBINE_ADD, GR_ACC_WIDE, GR_RESULT_VALUE, 1, 1},
    [GR_PROD] = {"prod", NULL, GR_PROD, V, GR_MAP_VALUE, GR_COMBINE_MUL, GR_ACC_WIDE, GR_RESULT_VALUE, 1, 1},
    [GR_MIN] = {"min", NULL, GR_MIN, V, GR_MAP_VALUE, GR_COMBINE_MIN, GR_ACC_INPUT, GR_RESULT_VALUE, 1, 0},
    [GR_MAX] = {"max", NULL, GR_MAX, V, GR_MAP_VALUE, GR_COMBINE_MAX, GR_ACC_INPUT, GR_RESULT_VALUE, 1, 0},
    [GR_AND] = {"and", "all", GR_AND, V, GR_MAP_NONZERO, GR_COMBINE_AND, GR_ACC_FLAG, GR_RESULT_BOOL, 1, 1},
    [GR_OR] = {"or", "any", GR_OR, V, GR_MAP_NONZERO, GR_COMBINE_OR, GR_ACC_FLAG, GR_RESULT_BOOL, 1, 1},
    [GR_COUNT] = {"count", NULL, GR_COUNT, V, GR_MAP_NONZERO, GR_COMBINE_ADD, GR_ACC_COUNT, GR_RESULT_VALUE, 1, 1},
    [GR_MEAN] = {"mean", NULL, GR_MEAN, V, GR_MAP_VALUE, GR_COMBINE_ADD, GR_ACC_WIDE, GR_RESULT_MEAN, 1, 0},
    [GR_VAR] = {"var", NULL, GR_VAR, GR_FAMILY_WELFORD, GR_MAP_VALUE, GR_COMBINE_ADD, GR_ACC_FLOAT, GR_RESULT_VAR, 1, 0},
    [GR_STD] = {"std", NULL, GR_STD, GR_FAMILY_WELFORD, GR_MAP_VALUE, GR_COMBINE_ADD, GR_ACC_FLOAT, GR_RESULT_STD, 1, 0},
    [GR_ARGMIN] = {"argmin", NULL, GR_ARGMIN, GR_FAMILY_ARG, GR_MAP_VALUE, GR_COMBINE_MIN, GR_ACC_INPUT, GR_RESULT_ARG, 2, 0},
    [GR_ARGMAX] = {"argmax", NULL, GR_ARGMAX, GR_FAMILY_ARG, GR_MAP_VALUE, GR_COMBINE_MAX, GR_ACC_INPUT, GR_RESULT_ARG, 2, 0},
    [GR_MINMAX] = {"minmax", NULL, GR_MINMAX, GR_FAMILY_MINMAX, GR_MAP_VALUE, GR_COMBINE_MIN, GR_ACC_INPUT, GR_RESULT_PAIR, 2, 0},
    [GR_SUMSQ] = {"sumsq", NULL, GR_SUMSQ, V, GR_MAP_SQUARE, GR_COMBINE_ADD, GR_ACC_WIDE, GR_RESULT_VALUE, 1, 1},
    [GR_NORM] = {"norm", NULL, GR_NORM, GR_FAMILY_NORM, GR_MAP_VALUE, GR_COMBINE_ADD, GR_ACC_FLOAT, GR_RESULT_NORM, 1, 1},
    [GR_NANSUM] = {"nansum", NULL, GR_NANSUM, V, GR_MAP_NAN_ZERO, GR_COMBINE_ADD, GR_ACC_WIDE, GR_RESULT_VALUE, 1, 1},
    [GR_NANMIN] = {"nanmin", NULL, GR_NANMIN, V, GR_MAP_VALUE, GR_COMBINE_NANMIN, GR_ACC_INPUT, GR_RESULT_VALUE, 1, 0},
    [GR_NANMAX] = {"nanmax", NULL, GR_NANMAX, V, GR_MAP_VALUE, GR_COMBINE_NANMAX, GR_ACC_INPUT, GR_RESULT_VALUE, 1, 0},
    [GR_NANMEAN] = {"nanmean", NULL, GR_NANMEAN, GR_FAMILY_COUNTED, GR_MAP_NAN_ZERO, GR_COMBINE_ADD, GR_ACC_FLOAT, GR_RESULT_MEAN, 1, 0},
    [GR_ABSMAX] = {"absmax", NULL, GR_ABSMAX, V, GR_MAP_ABS, GR_COMBINE_MAX, GR_ACC_MAGNITUDE, GR_RESULT_VALUE, 1, 1},
    [GR_ASUM] = {"asum", NULL, GR_ASUM, V, GR_MAP_ABS, GR_COMBINE_ADD, GR_ACC_WIDE, GR_RESULT_VALUE, 1, 1},
};
#undef V

const gr_op_desc *gr_op_desc_get(gr_op op) { return (unsigned)op < GR_OP_COUNT ? &ops[op] : NULL; }


const char *gr_op_name(gr_op op) { return (unsigned)op < GR_OP_COUNT ? ops[op].name : "?"; }
int gr_op_arity(gr_op op) { return (unsigned)op < GR_OP_COUNT ? ops[op].arity : 0; }
const char *gr_op_alias(gr_op op) { return (unsigned)op < GR_OP_COUNT ? ops[op].alias : NULL; }

int gr_op_from_name(const char *name) {
    for (int i = 0; i < GR_OP_COUNT; i++)
        if (strcmp(name, ops[i].name) == 0 || (ops[i].alias && strcmp(name, ops[i].alias) == 0)) return i;
    return -1;
}

static const char *op_name_at(int i) { return ops[i].name; }

const char *gr_op_names(void) {
    static char buf[512];
    return gr_join_names(buf, sizeof buf, GR_OP_COUNT, op_name_at);
}

/* The unsigned integer dtype as wide as t, for t's absolute values; a float or unsigned dtype is its own. */
static gr_dtype magnitude_dtype(gr_dtype t) {
    if (gr_dtype_is_float(t) || !gr_dtype_is_signed(t)) return t;
    for (int u = 0; u < GR_DTYPE_COUNT; u++) {
        gr_scalar lo, hi;
        gr_dtype_limits((gr_dtype)u, &lo, &hi);
        if (hi.kind == GR_SCALAR_UINT && gr_dtype_size((gr_dtype)u) == gr_dtype_size(t)) return (gr_dtype)u;
    }
    return GR_UINT64;               /* a signed dtype without an unsigned twin (none in lists.h) */
}

int gr_op_acc_dtype(gr_context *ctx, gr_op op, gr_dtype t, int override) {
    const gr_op_desc *d = gr_op_desc_get(op);
    if (!d) return gr_fail_arg(ctx, GR_EINVAL, "op", "unknown op"), -1;
    int is_float = gr_dtype_is_float(t);
    gr_dtype facc = gr_dtype_float_acc(t);
    int natural = t;
    switch (d->acc) {
    case GR_ACC_FLAG: natural = GR_UINT8; break;
    case GR_ACC_COUNT: natural = GR_UINT64; break;
    case GR_ACC_INPUT: natural = t; break;
    case GR_ACC_FLOAT: natural = facc; break;
    case GR_ACC_WIDE: natural = is_float ? facc : GR_UINT64; break;   /* wrapping 64-bit sums and products */
    case GR_ACC_MAGNITUDE: natural = magnitude_dtype(t); break;
    }
    if (override < 0 || override == natural) return natural;
    /* a float accumulator narrower than float64 may be float64 instead */
    int widens = (d->acc == GR_ACC_WIDE || d->acc == GR_ACC_FLOAT) && is_float && facc != GR_FLOAT64;
    if (widens && override == GR_FLOAT64) return GR_FLOAT64;
    if (d->acc == GR_ACC_WIDE && !is_float && (override == GR_INT64 || override == GR_UINT64))
        return GR_UINT64;               /* already 64-bit: same bits either way */
    gr_fail_arg(ctx, GR_EINVAL, "acc", "%s is not accepted for %s of %s (accepted: %s%s)",
                gr_dtype_name((gr_dtype)override), d->name, gr_dtype_name(t), gr_dtype_name((gr_dtype)natural),
                widens ? ", float64" : "");
    return -1;
}

size_t gr_op_acc_size(gr_op op, gr_dtype t, gr_dtype acc) { return gr_host_acc_size(gr_op_desc_get(op), t, acc); }

gr_dtype gr_op_result_dtype(gr_op op, gr_dtype t, gr_dtype acc, int which) {
    const gr_op_desc *d = gr_op_desc_get(op);
    switch (d->result) {
    case GR_RESULT_BOOL: return GR_UINT8;
    case GR_RESULT_ARG: return which == 0 ? t : GR_INT64;
    case GR_RESULT_PAIR: return t;
    case GR_RESULT_MEAN: case GR_RESULT_VAR: case GR_RESULT_STD: case GR_RESULT_NORM:
        return gr_dtype_is_float(acc) ? acc : GR_FLOAT64;
    case GR_RESULT_VALUE:
        if (d->acc == GR_ACC_COUNT) return GR_INT64;
        if (acc == GR_UINT64 && d->acc == GR_ACC_WIDE) return gr_op_signed_result(d, t) ? GR_INT64 : GR_UINT64;
        return acc;
    }
    return acc;
}

gr_result gr_op_result(gr_op op, const void *acc_value, gr_dtype acc, gr_dtype in_dtype, size_t n, int ddof) {
    return gr_host_result(gr_op_desc_get(op), in_dtype, acc, acc_value, n, ddof);
}

gr_status gr_op_empty_result(gr_context *ctx, gr_op op, gr_dtype in_dtype, gr_dtype acc, gr_result *out) {
    const gr_op_desc *d = gr_op_desc_get(op);
    if (!d->has_identity)
        return gr_fail(ctx, GR_EEMPTY, "%s of an empty buffer is undefined (it has no identity)", d->name);
    unsigned char a[GR_ACC_MAX];
    gr_host_identity(d, in_dtype, acc, a);
    *out = gr_host_result(d, in_dtype, acc, a, 0, 0);
    return GR_OK;
}
