/*
 * dtype.c -- the dtype table, generated from GR_DTYPE_LIST (gr.h), and scalars stored as elements.
 */
#include "base/error.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct { const char *name; size_t size; int is_float, is_signed; } dtypes[GR_DTYPE_COUNT] = {
#define ROW(E, name, ctype, bytes, is_float, is_signed) [GR_##E] = {#name, bytes, is_float, is_signed},
    GR_DTYPE_LIST(ROW)
#undef ROW
};

const char *gr_dtype_name(gr_dtype t) { return (unsigned)t < GR_DTYPE_COUNT ? dtypes[t].name : "?"; }
size_t gr_dtype_size(gr_dtype t) { return (unsigned)t < GR_DTYPE_COUNT ? dtypes[t].size : 0; }
int gr_dtype_is_float(gr_dtype t) { return (unsigned)t < GR_DTYPE_COUNT && dtypes[t].is_float; }
int gr_dtype_is_signed(gr_dtype t) { return (unsigned)t < GR_DTYPE_COUNT && dtypes[t].is_signed; }

int gr_dtype_from_name(const char *name) {
    for (int i = 0; i < GR_DTYPE_COUNT; i++)
        if (strcmp(name, dtypes[i].name) == 0) return i;
    return -1;
}

const char *gr_dtype_names(void) {
    static char buf[128];
    if (!buf[0]) {
        size_t used = 0;
        for (int i = 0; i < GR_DTYPE_COUNT && used < sizeof buf; i++)
            used += (size_t)snprintf(buf + used, sizeof buf - used, "%s%s", i ? ", " : "", dtypes[i].name);
    }
    return buf;
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

gr_scalar gr_scalar_load(const void *p, gr_dtype t) {
    gr_scalar s = {0};
    switch (t) {
    case GR_FLOAT32: s.kind = GR_SCALAR_FLOAT; s.v.f = *(const float *)p; break;
    case GR_FLOAT64: s.kind = GR_SCALAR_FLOAT; s.v.f = *(const double *)p; break;
    case GR_INT8: s.kind = GR_SCALAR_INT; s.v.i = *(const int8_t *)p; break;
    case GR_INT32: s.kind = GR_SCALAR_INT; s.v.i = *(const int32_t *)p; break;
    case GR_INT64: s.kind = GR_SCALAR_INT; s.v.i = *(const int64_t *)p; break;
    case GR_UINT8: s.kind = GR_SCALAR_UINT; s.v.u = *(const uint8_t *)p; break;
    case GR_UINT32: s.kind = GR_SCALAR_UINT; s.v.u = *(const uint32_t *)p; break;
    default: s.kind = GR_SCALAR_UINT; s.v.u = *(const uint64_t *)p; break;
    }
    return s;
}
