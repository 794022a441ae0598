/*
 * ops.c -- the descriptors of the built-in ops and the rules every backend shares: which accumulator
 * an op takes for a dtype, and how a combined accumulator becomes the caller's result.
 *
 * The result rules of the API live here and nowhere else: integer sums and products accumulate in 64
 * bits (wrapping, so results are exact modulo 2^64 and bit-identical on every backend), min and max stay
 * in the input type, and/or reduce 0/1 flags, floats accumulate in their own type unless the caller asks
 * for float64 (float32 data only).
 */
#include "ops.h"
#include "error.h"

#include <stdio.h>
#include <string.h>

static const gr_op_desc ops[GR_OP_COUNT] = {
    /* name    alias  id       map             combine          acc           result           arity identity */
    [GR_SUM] = {"sum", NULL, GR_SUM, GR_MAP_VALUE, GR_COMBINE_ADD, GR_ACC_WIDE, GR_RESULT_VALUE, 1, 1},
    [GR_PROD] = {"prod", NULL, GR_PROD, GR_MAP_VALUE, GR_COMBINE_MUL, GR_ACC_WIDE, GR_RESULT_VALUE, 1, 1},
    [GR_MIN] = {"min", NULL, GR_MIN, GR_MAP_VALUE, GR_COMBINE_MIN, GR_ACC_INPUT, GR_RESULT_VALUE, 1, 0},
    [GR_MAX] = {"max", NULL, GR_MAX, GR_MAP_VALUE, GR_COMBINE_MAX, GR_ACC_INPUT, GR_RESULT_VALUE, 1, 0},
    [GR_AND] = {"and", "all", GR_AND, GR_MAP_NONZERO, GR_COMBINE_AND, GR_ACC_FLAG, GR_RESULT_BOOL, 1, 1},
    [GR_OR] = {"or", "any", GR_OR, GR_MAP_NONZERO, GR_COMBINE_OR, GR_ACC_FLAG, GR_RESULT_BOOL, 1, 1},
};

const gr_op_desc *gr_op_desc_get(gr_op op) { return (unsigned)op < GR_OP_COUNT ? &ops[op] : NULL; }

const char *gr_op_name(gr_op op) { return (unsigned)op < GR_OP_COUNT ? ops[op].name : "?"; }
int gr_op_arity(gr_op op) { return (unsigned)op < GR_OP_COUNT ? ops[op].arity : 0; }

int gr_op_from_name(const char *name) {
    for (int i = 0; i < GR_OP_COUNT; i++)
        if (strcmp(name, ops[i].name) == 0 || (ops[i].alias && strcmp(name, ops[i].alias) == 0)) return i;
    return -1;
}

int gr_op_acc_dtype(gr_context *ctx, gr_op op, gr_dtype t, int override) {
    const gr_op_desc *d = gr_op_desc_get(op);
    if (!d) return gr_fail_arg(ctx, GR_EINVAL, "op", "unknown op"), -1;
    int natural = d->acc == GR_ACC_FLAG ? GR_UINT8
                : d->acc == GR_ACC_INPUT || gr_dtype_is_float(t) ? (int)t
                : GR_UINT64;            /* wrapping 64-bit sums and products, signed or not */
    if (override < 0 || override == natural) return natural;
    if (d->acc == GR_ACC_WIDE && t == GR_FLOAT32 && override == GR_FLOAT64) return GR_FLOAT64;
    if (d->acc == GR_ACC_WIDE && !gr_dtype_is_float(t) && (override == GR_INT64 || override == GR_UINT64))
        return GR_UINT64;               /* already 64-bit: same bits either way */
    gr_fail_arg(ctx, GR_EINVAL, "acc", "%s is not accepted for %s of %s (accepted: %s%s)",
                gr_dtype_name((gr_dtype)override), d->name, gr_dtype_name(t), gr_dtype_name((gr_dtype)natural),
                d->acc == GR_ACC_WIDE && t == GR_FLOAT32 ? ", float64" : "");
    return -1;
}

/* One accumulator value of dtype acc as a tagged scalar; the wrapping uint64 accumulator of integer
 * sums and products comes back signed when the input was. */
static gr_scalar acc_scalar(const void *p, gr_dtype acc, gr_dtype in_dtype) {
    gr_scalar s = {0};      /* every byte set: a caller reading the wrong member sees 0, not garbage */
    switch (acc) {
    case GR_FLOAT32: s.kind = GR_SCALAR_FLOAT; s.v.f = *(const float *)p; return s;
    case GR_FLOAT64: s.kind = GR_SCALAR_FLOAT; s.v.f = *(const double *)p; return s;
    case GR_INT8: s.kind = GR_SCALAR_INT; s.v.i = *(const int8_t *)p; return s;
    case GR_UINT8: s.kind = GR_SCALAR_UINT; s.v.u = *(const uint8_t *)p; return s;
    case GR_INT32: s.kind = GR_SCALAR_INT; s.v.i = *(const int32_t *)p; return s;
    case GR_UINT32: s.kind = GR_SCALAR_UINT; s.v.u = *(const uint32_t *)p; return s;
    case GR_INT64: s.kind = GR_SCALAR_INT; s.v.i = *(const int64_t *)p; return s;
    default: break;
    }
    uint64_t u = *(const uint64_t *)p;
    if (gr_dtype_is_signed(in_dtype)) { s.kind = GR_SCALAR_INT; s.v.i = (int64_t)u; }
    else { s.kind = GR_SCALAR_UINT; s.v.u = u; }
    return s;
}

gr_result gr_op_result(gr_op op, const void *acc_value, gr_dtype acc, gr_dtype in_dtype, size_t n) {
    (void)n;
    const gr_op_desc *d = gr_op_desc_get(op);
    gr_result r = {0};
    r.count = 1;
    if (d->result == GR_RESULT_BOOL) {
        r.value[0].kind = GR_SCALAR_BOOL;
        r.value[0].v.b = *(const uint8_t *)acc_value != 0;
    } else {
        r.value[0] = acc_scalar(acc_value, acc, in_dtype);
    }
    return r;
}

gr_status gr_op_empty_result(gr_context *ctx, gr_op op, gr_dtype in_dtype, gr_dtype acc, gr_result *out) {
    const gr_op_desc *d = gr_op_desc_get(op);
    if (!d->has_identity)
        return gr_fail(ctx, GR_EEMPTY, "%s of an empty buffer is undefined (it has no identity)", d->name);
    gr_result r = {0};
    r.count = 1;
    if (d->result == GR_RESULT_BOOL) {
        r.value[0].kind = GR_SCALAR_BOOL;
        r.value[0].v.b = d->combine == GR_COMBINE_AND;
    } else {
        int one = d->combine == GR_COMBINE_MUL;
        if (gr_dtype_is_float(acc)) { r.value[0].kind = GR_SCALAR_FLOAT; r.value[0].v.f = one; }
        else if (gr_dtype_is_signed(in_dtype)) { r.value[0].kind = GR_SCALAR_INT; r.value[0].v.i = one; }
        else { r.value[0].kind = GR_SCALAR_UINT; r.value[0].v.u = (uint64_t)one; }
    }
    *out = r;
    return GR_OK;
}

const char *gr_op_names(void) {
    static char buf[256];
    if (!buf[0]) {
        size_t used = 0;
        for (int i = 0; i < GR_OP_COUNT && used < sizeof buf; i++)
            used += (size_t)snprintf(buf + used, sizeof buf - used, "%s%s", i ? ", " : "", ops[i].name);
    }
    return buf;
}
