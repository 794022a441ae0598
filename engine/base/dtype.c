/*
 * dtype.c -- the dtype table, generated from GR_DTYPE_LIST (lists.h), and elements read and written as
 * scalars: every per-dtype fact the engine's C code uses is a column of that list, read here.
 */
#include "base/dtype.h"
#include "base/error.h"
#include "base/small_floats.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The gr_scalar member of each kind (gr.h). */
#define GR_MEMBER_INT i
#define GR_MEMBER_UINT u
#define GR_MEMBER_FLOAT f
#define GR_MEMBER_BOOL b

static const struct {
    const char *name;
    size_t size;
    int is_float, is_signed;
    gr_scalar lowest, highest;
    gr_dtype float_acc;
    int nccl;
} dtypes[GR_DTYPE_COUNT] = {
#define ROW(E, name, ctype, bytes, is_float, is_signed, kind, lowest, highest, float_acc, nccl, format) \
    [GR_##E] = {#name, bytes, is_float, is_signed, {GR_SCALAR_##kind, {.GR_MEMBER_##kind = lowest}}, \
                {GR_SCALAR_##kind, {.GR_MEMBER_##kind = highest}}, GR_##float_acc, nccl},
    GR_DTYPE_LIST(ROW)
#undef ROW
};

const char *gr_dtype_name(gr_dtype t) { return (unsigned)t < GR_DTYPE_COUNT ? dtypes[t].name : "?"; }
size_t gr_dtype_size(gr_dtype t) { return (unsigned)t < GR_DTYPE_COUNT ? dtypes[t].size : 0; }
int gr_dtype_is_float(gr_dtype t) { return (unsigned)t < GR_DTYPE_COUNT && dtypes[t].is_float; }
int gr_dtype_is_signed(gr_dtype t) { return (unsigned)t < GR_DTYPE_COUNT && dtypes[t].is_signed; }
gr_dtype gr_dtype_float_acc(gr_dtype t) { return (unsigned)t < GR_DTYPE_COUNT ? dtypes[t].float_acc : GR_FLOAT64; }
int gr_dtype_nccl(gr_dtype t) { return (unsigned)t < GR_DTYPE_COUNT ? dtypes[t].nccl : -1; }
int gr_dtype_is_bool(gr_dtype t) { return (unsigned)t < GR_DTYPE_COUNT && dtypes[t].highest.kind == GR_SCALAR_BOOL; }

void gr_dtype_limits(gr_dtype t, gr_scalar *lowest, gr_scalar *highest) {
    gr_scalar none = {GR_SCALAR_INT, {.i = 0}};
    *lowest = (unsigned)t < GR_DTYPE_COUNT ? dtypes[t].lowest : none;
    *highest = (unsigned)t < GR_DTYPE_COUNT ? dtypes[t].highest : none;
}

int gr_dtype_from_name(const char *name) {
    for (int i = 0; i < GR_DTYPE_COUNT; i++)
        if (strcmp(name, dtypes[i].name) == 0) return i;
    return -1;
}

static const char *dtype_name_at(int i) { return dtypes[i].name; }

const char *gr_dtype_names(void) {
    static char buf[256];
    return gr_join_names(buf, sizeof buf, GR_DTYPE_COUNT, dtype_name_at);
}

/* ---- scalar -> element ------------------------------------------------------------------------- */

void gr_format_float(char *v, size_t len, double d) {
    for (int digits = 15; digits <= 17; digits++) {
        snprintf(v, len, "%.*g", digits, d);
        if (strtod(v, NULL) == d) break;
    }
    if (!strpbrk(v, ".eni")) strncat(v, ".0", len - strlen(v) - 1);
}

void gr_format_scalar(char *v, size_t len, gr_scalar s) {
    switch (s.kind) {
    case GR_SCALAR_FLOAT: gr_format_float(v, len, s.v.f); break;
    case GR_SCALAR_UINT: snprintf(v, len, "%llu", (unsigned long long)s.v.u); break;
    case GR_SCALAR_INT: snprintf(v, len, "%lld", (long long)s.v.i); break;
    case GR_SCALAR_BOOL: snprintf(v, len, "%s", s.v.b ? "true" : "false"); break;
    }
}

static gr_status out_of_range(gr_context *ctx, const char *what, gr_scalar s, gr_dtype t) {
    char v[64];
    gr_format_scalar(v, sizeof v, s);
    return gr_fail_arg(ctx, GR_EINVAL, what, "%s does not fit in %s%s", v, gr_dtype_name(t),
                       gr_dtype_is_bool(t) ? " (it takes true, false, 0 or 1)" : "");
}

/* A number of any kind as a double. */
static double as_double(gr_scalar s) {
    return s.kind == GR_SCALAR_FLOAT ? s.v.f : s.kind == GR_SCALAR_UINT ? (double)s.v.u : (double)s.v.i;
}

/* A number (not a boolean) as a value of t's kind, in that kind's member: 1, or 0 when it is not a whole
 * number for an integer dtype or lies outside t's limits. Floats are checked after rounding, by the caller. */
static int to_kind(gr_scalar s, gr_dtype t, gr_scalar *v) {
    gr_scalar lo = dtypes[t].lowest, hi = dtypes[t].highest;
    v->kind = hi.kind;
    switch (hi.kind) {
    case GR_SCALAR_FLOAT: v->v.f = as_double(s); return 1;
    case GR_SCALAR_BOOL:
        /* bool takes a boolean, or a number that is 0 or 1 (any other refused: no truthiness) */
        v->v.b = s.kind == GR_SCALAR_BOOL ? s.v.b != 0 : as_double(s) == 1.0;
        return s.kind == GR_SCALAR_BOOL || as_double(s) == 0.0 || as_double(s) == 1.0;
    case GR_SCALAR_INT: case GR_SCALAR_UINT: break;
    }
    if (s.kind == GR_SCALAR_BOOL) return 0;
    int neg = 0;
    uint64_t mag;
    if (s.kind == GR_SCALAR_FLOAT) {
        double d = s.v.f;
        if (!(d == floor(d)) || fabs(d) >= 18446744073709551616.0) return 0;
        neg = d < 0;
        mag = neg ? (uint64_t)(-d) : (uint64_t)d;
    } else if (s.kind == GR_SCALAR_UINT) {
        mag = s.v.u;
    } else {
        neg = s.v.i < 0;
        mag = neg ? (uint64_t)0 - (uint64_t)s.v.i : (uint64_t)s.v.i;
    }
    uint64_t most_neg = lo.kind == GR_SCALAR_INT ? (uint64_t)0 - (uint64_t)lo.v.i : 0;
    uint64_t most = hi.kind == GR_SCALAR_INT ? (uint64_t)hi.v.i : hi.v.u;
    /* A Lua integer is signed: a negative one stands for its two's-complement bits in an unsigned dtype
     * as wide as itself, the form in which such values come back (a float must be a whole number >= 0) */
    int bits = neg && hi.kind == GR_SCALAR_UINT && most == UINT64_MAX && s.kind == GR_SCALAR_INT;
    if (!bits && (neg ? mag > most_neg : mag > most)) return 0;
    uint64_t u = neg ? (uint64_t)0 - mag : mag;
    if (hi.kind == GR_SCALAR_INT) v->v.i = (int64_t)u;
    else v->v.u = u;
    return 1;
}

/* An element's conversions by the list's format column: ENCODE sets the element e from the value x of
 * its kind, and nofit where a finite value does not fit; DECODE gives the value of element e. C: a C cast,
 * and a float that rounds to infinity from a finite value does not fit (inf and NaN themselves do); a
 * small float format: small_floats.h's narrowing, rounded once to nearest even, which says what fits. */
#define GR_ENCODE_C(ctype, e, nofit, x)                                                                 \
    do {                                                                                                \
        e = (ctype)(x);                                                                                 \
        nofit = isinf((double)e) && !isinf((double)(x));                                                \
    } while (0)
#define GR_ENCODE_SF(pre, ctype, e, nofit, x)                                                           \
    do {                                                                                                \
        unsigned p_ = gr_##pre##_from_double(x);                                                        \
        e = (ctype)p_;                                                                                  \
        nofit = (p_ & GR_SF_NOFIT) != 0;                                                                \
    } while (0)
#define GR_ENCODE_f16(...) GR_ENCODE_SF(f16, __VA_ARGS__)
#define GR_ENCODE_bf16(...) GR_ENCODE_SF(bf16, __VA_ARGS__)
#define GR_ENCODE_e4m3(...) GR_ENCODE_SF(e4m3, __VA_ARGS__)
#define GR_ENCODE_e5m2(...) GR_ENCODE_SF(e5m2, __VA_ARGS__)
#define GR_DECODE_C(e) (e)
#define GR_DECODE_f16(e) gr_f16_to_double(e)
#define GR_DECODE_bf16(e) gr_bf16_to_double(e)
#define GR_DECODE_e4m3(e) gr_e4m3_to_double(e)
#define GR_DECODE_e5m2(e) gr_e5m2_to_double(e)

gr_status gr_scalar_store(gr_context *ctx, gr_scalar s, gr_dtype t, void *out, const char *what) {
    if ((unsigned)t >= GR_DTYPE_COUNT) return gr_fail_arg(ctx, GR_EINVAL, "dtype", "unknown dtype");
    if (s.kind == GR_SCALAR_BOOL && !gr_dtype_is_bool(t))
        return gr_fail_arg(ctx, GR_EINVAL, what, "expected a number, got a boolean");
    gr_scalar v;
    if (!to_kind(s, t, &v)) return out_of_range(ctx, what, s, t);
    switch (t) {
#define STORE(E, name, ctype, bytes, is_float, is_signed, sk, lowest, highest, float_acc, nccl, format) \
    case GR_##E: {                                                                                      \
        ctype e;                                                                                        \
        int nofit;                                                                                      \
        GR_ENCODE_##format(ctype, e, nofit, v.v.GR_MEMBER_##sk);                                        \
        if (nofit) return out_of_range(ctx, what, s, t);                                                \
        memcpy(out, &e, sizeof e);                                                                      \
        return GR_OK;                                                                                   \
    }
    GR_DTYPE_LIST(STORE)
#undef STORE
    case GR_DTYPE_COUNT: break;
    }
    return gr_fail_arg(ctx, GR_EINVAL, "dtype", "unknown dtype");
}

/* A scalar as t's kind for gr_scalar_put: integers by their 64 bits, floats by C conversion. */
static int64_t put_int(gr_scalar s) {
    return s.kind == GR_SCALAR_FLOAT ? (int64_t)s.v.f : s.kind == GR_SCALAR_BOOL ? s.v.b != 0 : s.v.i;
}
static uint64_t put_uint(gr_scalar s) {
    return s.kind == GR_SCALAR_FLOAT ? (uint64_t)s.v.f : s.kind == GR_SCALAR_BOOL ? s.v.b != 0 : s.v.u;
}
/* bool: whether the value is not zero (NaN is not), as C converts to _Bool */
static int put_bool(gr_scalar s) {
    return s.kind == GR_SCALAR_FLOAT ? s.v.f != 0.0 : s.kind == GR_SCALAR_BOOL ? s.v.b != 0 : s.v.u != 0;
}
#define GR_PUT_BOOL put_bool
#define GR_PUT_INT put_int
#define GR_PUT_UINT put_uint
#define GR_PUT_FLOAT as_double

/* A value in an element, unchecked: a small float format keeps its pattern's low bits (IEEE's answer,
 * the infinity, where the value does not fit). */
#define GR_NARROW_C(x) (x)
#define GR_NARROW_f16(x) gr_f16_from_double(x)
#define GR_NARROW_bf16(x) gr_bf16_from_double(x)
#define GR_NARROW_e4m3(x) gr_e4m3_from_double(x)
#define GR_NARROW_e5m2(x) gr_e5m2_from_double(x)

void gr_scalar_put(void *p, gr_dtype t, gr_scalar s) {
    switch (t) {
#define PUT(E, name, ctype, bytes, is_float, is_signed, sk, lowest, highest, float_acc, nccl, format)   \
    case GR_##E: {                                                                                      \
        ctype e = (ctype)GR_NARROW_##format(GR_PUT_##sk(s));                                            \
        memcpy(p, &e, sizeof e);                                                                        \
        break;                                                                                          \
    }
    GR_DTYPE_LIST(PUT)
#undef PUT
    case GR_DTYPE_COUNT: break;
    }
}

/* The one reader of elements (buffer.c's generators, the binding's values, results and partials): the
 * element as its kind's widest member, by a C cast or, for a small float format, widened exactly. */
gr_scalar gr_scalar_load(const void *p, gr_dtype t) {
    gr_scalar s = {0};
    switch (t) {
#define LOAD(E, name, ctype, bytes, is_float, is_signed, sk, lowest, highest, float_acc, nccl, format)  \
    case GR_##E: {                                                                                      \
        ctype e;                                                                                        \
        memcpy(&e, p, sizeof e);                                                                        \
        s.kind = GR_SCALAR_##sk;                                                                      \
        s.v.GR_MEMBER_##sk = GR_DECODE_##format(e);                                                   \
        break;                                                                                          \
    }
    GR_DTYPE_LIST(LOAD)
#undef LOAD
    case GR_DTYPE_COUNT: break;
    }
    return s;
}
