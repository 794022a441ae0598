/*
 * types.c -- the dtype, op and finishing-mode tables, and the accumulator rules.
 *
 * The result rules of DESIGN.md live here and nowhere else: integer sums and products accumulate in
 * 64 bits (wrapping, so results are exact modulo 2^64 and bit-identical on every backend), min and max
 * stay in the input type, and/or reduce 0/1 flags, floats accumulate in their own type unless the
 * caller asks for float64.
 */
#include "internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct { const char *name; size_t size; int is_float, is_signed; } dtypes[GR_DTYPE_COUNT] = {
    [GR_INT8] = {"int8", 1, 0, 1},       [GR_UINT8] = {"uint8", 1, 0, 0},
    [GR_INT32] = {"int32", 4, 0, 1},     [GR_UINT32] = {"uint32", 4, 0, 0},
    [GR_INT64] = {"int64", 8, 0, 1},     [GR_UINT64] = {"uint64", 8, 0, 0},
    [GR_FLOAT32] = {"float32", 4, 1, 1}, [GR_FLOAT64] = {"float64", 8, 1, 1},
};

static const char *const op_names[GR_OP_COUNT] = {"sum", "prod", "min", "max", "and", "or"};
static const char *const finish_names[GR_FINISH_COUNT] = {"auto", "device", "hybrid", "host", "single"};

const char *gr_dtype_name(gr_dtype t) { return (unsigned)t < GR_DTYPE_COUNT ? dtypes[t].name : "?"; }
size_t gr_dtype_size(gr_dtype t) { return (unsigned)t < GR_DTYPE_COUNT ? dtypes[t].size : 0; }
int gr_dtype_is_float(gr_dtype t) { return (unsigned)t < GR_DTYPE_COUNT && dtypes[t].is_float; }
int gr_dtype_is_signed(gr_dtype t) { return (unsigned)t < GR_DTYPE_COUNT && dtypes[t].is_signed; }
const char *gr_op_name(gr_op op) { return (unsigned)op < GR_OP_COUNT ? op_names[op] : "?"; }
const char *gr_finish_name(gr_finish f) { return (unsigned)f < GR_FINISH_COUNT ? finish_names[f] : "?"; }

int gr_dtype_from_name(const char *name) {
    for (int i = 0; i < GR_DTYPE_COUNT; i++)
        if (strcmp(name, dtypes[i].name) == 0) return i;
    return -1;
}

int gr_op_from_name(const char *name) {
    for (int i = 0; i < GR_OP_COUNT; i++)
        if (strcmp(name, op_names[i]) == 0) return i;
    if (strcmp(name, "all") == 0) return GR_AND;    /* the names of the shortcuts, too */
    if (strcmp(name, "any") == 0) return GR_OR;
    return -1;
}

int gr_finish_from_name(const char *name) {
    for (int i = 0; i < GR_FINISH_COUNT; i++)
        if (strcmp(name, finish_names[i]) == 0) return i;
    return -1;
}

static const char *join(char *buf, size_t len, const char *const *names, int count) {
    if (buf[0]) return buf;
    size_t used = 0;
    for (int i = 0; i < count && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%s", i ? ", " : "", names[i]);
    return buf;
}

const char *gr_dtype_names(void) {
    static char buf[128];
    const char *names[GR_DTYPE_COUNT];
    for (int i = 0; i < GR_DTYPE_COUNT; i++) names[i] = dtypes[i].name;
    return join(buf, sizeof buf, names, GR_DTYPE_COUNT);
}

const char *gr_op_names(void) {
    static char buf[128];
    return join(buf, sizeof buf, op_names, GR_OP_COUNT);
}

const char *gr_finish_names(void) {
    static char buf[128];
    return join(buf, sizeof buf, finish_names, GR_FINISH_COUNT);
}

/* ---- accumulators ------------------------------------------------------------------------------ */

int gr_acc_dtype(gr_context *ctx, gr_op op, gr_dtype t, int override) {
    int natural;
    if (op == GR_AND || op == GR_OR) natural = GR_UINT8;
    else if (op == GR_MIN || op == GR_MAX) natural = t;
    else if (gr_dtype_is_float(t)) natural = t;
    else natural = GR_UINT64;                   /* wrapping 64-bit sums and products, signed or not */
    if (override < 0 || override == natural) return natural;
    if ((op == GR_SUM || op == GR_PROD) && t == GR_FLOAT32 && override == GR_FLOAT64) return GR_FLOAT64;
    if ((op == GR_SUM || op == GR_PROD) && !gr_dtype_is_float(t) &&
        (override == GR_INT64 || override == GR_UINT64))
        return GR_UINT64;                       /* already 64-bit: same bits either way */
    gr_fail_arg(ctx, GR_EINVAL, "acc",
            "%s is not accepted for %s of %s (accepted: %s%s)", gr_dtype_name(override),
            gr_op_name(op), gr_dtype_name(t), gr_dtype_name(natural),
            ((op == GR_SUM || op == GR_PROD) && t == GR_FLOAT32) ? ", float64" : "");
    return -1;
}

gr_scalar gr_acc_to_scalar(const void *p, gr_dtype acc, gr_dtype in_dtype, gr_op op) {
    gr_scalar s = {0};      /* every byte set: a caller reading the wrong member sees 0, not garbage */
    if (op == GR_AND || op == GR_OR) {
        s.kind = GR_SCALAR_BOOL;
        s.v.b = *(const uint8_t *)p != 0;
        return s;
    }
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
    /* uint64: the 64-bit wrapping accumulator of every integer sum and product */
    uint64_t u = *(const uint64_t *)p;
    if (gr_dtype_is_signed(in_dtype)) { s.kind = GR_SCALAR_INT; s.v.i = (int64_t)u; }
    else { s.kind = GR_SCALAR_UINT; s.v.u = u; }
    return s;
}

gr_scalar gr_identity_scalar(gr_op op, gr_dtype in_dtype, gr_dtype acc) {
    gr_scalar s = {0};
    if (op == GR_AND || op == GR_OR) { s.kind = GR_SCALAR_BOOL; s.v.b = op == GR_AND; return s; }
    int one = op == GR_PROD;
    if (gr_dtype_is_float(acc)) { s.kind = GR_SCALAR_FLOAT; s.v.f = one; }
    else if (gr_dtype_is_signed(in_dtype)) { s.kind = GR_SCALAR_INT; s.v.i = one; }
    else { s.kind = GR_SCALAR_UINT; s.v.u = (uint64_t)one; }
    return s;
}

/* ---- scalar -> element ------------------------------------------------------------------------- */

/* The shortest decimal form that reads back as the same double, marked as a float ("-1.0", "1e+39"). */
static void format_float(char *v, size_t len, double d) {
    for (int digits = 15; digits <= 17; digits++) {
        snprintf(v, len, "%.*g", digits, d);
        if (strtod(v, NULL) == d) break;
    }
    if (!strpbrk(v, ".eni")) strncat(v, ".0", len - strlen(v) - 1);
}

static gr_status out_of_range(gr_context *ctx, const char *what, gr_scalar s, gr_dtype t) {
    char v[64];
    if (s.kind == GR_SCALAR_FLOAT) format_float(v, sizeof v, s.v.f);
    else if (s.kind == GR_SCALAR_UINT) snprintf(v, sizeof v, "%llu", (unsigned long long)s.v.u);
    else snprintf(v, sizeof v, "%lld", (long long)s.v.i);
    return gr_fail_arg(ctx, GR_EINVAL, what, "%s does not fit in %s", v, gr_dtype_name(t));
}

gr_status gr_scalar_store(gr_context *ctx, gr_scalar s, gr_dtype t, void *out, const char *what) {
    if (s.kind == GR_SCALAR_BOOL)
        return gr_fail_arg(ctx, GR_EINVAL, what, "expected a number, got a boolean");
    if (gr_dtype_is_float(t)) {
        double d = s.kind == GR_SCALAR_FLOAT ? s.v.f
                 : s.kind == GR_SCALAR_UINT ? (double)s.v.u : (double)s.v.i;
        if (t == GR_FLOAT32) {
            /* a finite value that rounds to infinity does not fit; inf and NaN themselves do */
            float f = (float)d;
            if (isinf(f) && !isinf(d)) return out_of_range(ctx, what, s, t);
            memcpy(out, &f, 4);
        } else {
            memcpy(out, &d, 8);
        }
        return GR_OK;
    }
    /* integers: the value must be integral and in range */
    int neg = 0;
    uint64_t mag;
    if (s.kind == GR_SCALAR_FLOAT) {
        double d = s.v.f;
        if (!(d == floor(d)) || fabs(d) >= 18446744073709551616.0) return out_of_range(ctx, what, s, t);
        neg = d < 0;
        mag = neg ? (uint64_t)(-d) : (uint64_t)d;
        if (neg && t == GR_UINT64) return out_of_range(ctx, what, s, t);
    } else if (s.kind == GR_SCALAR_UINT) {
        mag = s.v.u;
    } else {
        neg = s.v.i < 0;
        mag = neg ? (uint64_t)0 - (uint64_t)s.v.i : (uint64_t)s.v.i;
    }
    switch (t) {
    case GR_INT8:
        if (neg ? mag > 128 : mag > 127) return out_of_range(ctx, what, s, t);
        *(int8_t *)out = (int8_t)(neg ? -(int64_t)mag : (int64_t)mag); return GR_OK;
    case GR_UINT8:
        if (neg || mag > 255) return out_of_range(ctx, what, s, t);
        *(uint8_t *)out = (uint8_t)mag; return GR_OK;
    case GR_INT32:
        if (neg ? mag > 2147483648u : mag > 2147483647u) return out_of_range(ctx, what, s, t);
        *(int32_t *)out = (int32_t)(neg ? -(int64_t)mag : (int64_t)mag); return GR_OK;
    case GR_UINT32:
        if (neg || mag > 4294967295u) return out_of_range(ctx, what, s, t);
        *(uint32_t *)out = (uint32_t)mag; return GR_OK;
    case GR_INT64:
        if (neg ? mag > (uint64_t)1 << 63 : mag > (uint64_t)INT64_MAX) return out_of_range(ctx, what, s, t);
        *(int64_t *)out = neg ? (int64_t)((uint64_t)0 - mag) : (int64_t)mag; return GR_OK;
    case GR_UINT64:
        /* A Lua integer is signed: a negative one stands for its two's-complement bits, the form in
         * which uint64 values come back (a float must be a non-negative whole number) */
        *(uint64_t *)out = neg ? (uint64_t)0 - mag : mag; return GR_OK;
    default:
        return gr_fail_arg(ctx, GR_EINVAL, "dtype", "unknown dtype");
    }
}
