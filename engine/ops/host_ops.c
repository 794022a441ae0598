/*
 * host_ops.c -- every op on the host, one accumulator at a time: the identity, one element in, two
 * accumulators combined, the result. The CPU backend uses these where its per-dtype loops do not apply,
 * and every host finish (hybrid, host, streamed chunk values, segments) combines device partials with
 * them, so the layouts here are the kernels' layouts byte for byte (cuda/device/ops.cuh):
 *   value    one element of the accumulator dtype
 *   arg      u64 index at 0, the value (input dtype) at 8; 16 bytes
 *   minmax   lo at 0, hi at the input's size; at least 4 bytes
 *   welford  u64 n at 0, mean at 8, m2 after it (accumulator dtype)
 *   norm     small, medium, big (accumulator dtype)
 *   counted  u64 n at 0, the sum (accumulator dtype) at 8; 16 bytes
 *   moments  u64 n at 0, u64 sum at 8 (two's complement when signed), sum of squares as u128 at 16
 *            (low word first); 32 bytes
 *   squares  the sum of squares as u128 (low word first); 16 bytes
 * Float accumulators of float32 round after every operation, which is float32 arithmetic exactly, so
 * the CPU backend overflows, underflows and rounds where the kernels do.
 */
#include "ops/ops.h"

#include <math.h>
#include <string.h>

/* A value in the widest form of its kind. */
typedef struct { int kind; int64_t i; uint64_t u; double f; } num;     /* kind: 'i', 'u', 'f' */

static num read_num(const void *p, gr_dtype t) {
    num v = {0, 0, 0, 0};
    switch (t) {
    case GR_INT8: v.kind = 'i'; v.i = *(const int8_t *)p; break;
    case GR_UINT8: v.kind = 'u'; v.u = *(const uint8_t *)p; break;
    case GR_INT32: v.kind = 'i'; v.i = *(const int32_t *)p; break;
    case GR_UINT32: v.kind = 'u'; v.u = *(const uint32_t *)p; break;
    case GR_INT64: v.kind = 'i'; v.i = *(const int64_t *)p; break;
    case GR_UINT64: v.kind = 'u'; v.u = *(const uint64_t *)p; break;
    case GR_FLOAT32: v.kind = 'f'; v.f = *(const float *)p; break;
    case GR_FLOAT64: case GR_DTYPE_COUNT: v.kind = 'f'; v.f = *(const double *)p; break;
    }
    if (v.kind == 'i') v.u = (uint64_t)v.i;
    if (v.kind == 'u') v.i = (int64_t)v.u;
    return v;
}

static void write_num(void *p, gr_dtype t, num v) {
    switch (t) {
    case GR_INT8: *(int8_t *)p = (int8_t)v.i; break;
    case GR_UINT8: *(uint8_t *)p = (uint8_t)v.u; break;
    case GR_INT32: *(int32_t *)p = (int32_t)v.i; break;
    case GR_UINT32: *(uint32_t *)p = (uint32_t)v.u; break;
    case GR_INT64: *(int64_t *)p = v.i; break;
    case GR_UINT64: *(uint64_t *)p = v.u; break;
    case GR_FLOAT32: *(float *)p = (float)v.f; break;
    case GR_FLOAT64: case GR_DTYPE_COUNT: *(double *)p = v.f; break;
    }
}

static num make_f(double f) { num v = {'f', 0, 0, f}; return v; }
static num make_u(uint64_t u) { num v = {'u', (int64_t)u, u, 0}; return v; }

static double f_of(const void *p, gr_dtype t) { return t == GR_FLOAT32 ? *(const float *)p : *(const double *)p; }
static void f_put(void *p, gr_dtype t, double f) {
    if (t == GR_FLOAT32) *(float *)p = (float)f;
    else *(double *)p = f;
}
/* Rounds to the accumulator's precision: float32 arithmetic is double arithmetic rounded at each step. */
static double rnd(gr_dtype acc, double f) { return acc == GR_FLOAT32 ? (double)(float)f : f; }

static int is_nan(num v) { return v.kind == 'f' && v.f != v.f; }

/* a < b in the value's own order (floats, signed or unsigned integers). */
static int less(num a, num b) {
    if (a.kind == 'f') return a.f < b.f;
    if (a.kind == 'i') return a.i < b.i;
    return a.u < b.u;
}

/* The largest and smallest values of dtype t (infinities for floats). */
static num top(gr_dtype t) {
    switch (t) {
    case GR_INT8: { num v = {'i', INT8_MAX, INT8_MAX, 0}; return v; }
    case GR_INT32: { num v = {'i', INT32_MAX, INT32_MAX, 0}; return v; }
    case GR_INT64: { num v = {'i', INT64_MAX, INT64_MAX, 0}; return v; }
    case GR_UINT8: return make_u(UINT8_MAX);
    case GR_UINT32: return make_u(UINT32_MAX);
    case GR_UINT64: return make_u(UINT64_MAX);
    case GR_FLOAT32: case GR_FLOAT64: case GR_DTYPE_COUNT: return make_f(INFINITY);
    }
    return make_f(INFINITY);
}
static num bottom(gr_dtype t) {
    switch (t) {
    case GR_INT8: { num v = {'i', INT8_MIN, (uint64_t)(int64_t)INT8_MIN, 0}; return v; }
    case GR_INT32: { num v = {'i', INT32_MIN, (uint64_t)(int64_t)INT32_MIN, 0}; return v; }
    case GR_INT64: { num v = {'i', INT64_MIN, (uint64_t)INT64_MIN, 0}; return v; }
    case GR_UINT8: case GR_UINT32: case GR_UINT64: return make_u(0);
    case GR_FLOAT32: case GR_FLOAT64: case GR_DTYPE_COUNT: return make_f(-INFINITY);
    }
    return make_f(-INFINITY);
}

/* ---- one-value accumulators ---------------------------------------------------------------------- */

static num value_identity(const gr_op_desc *op, gr_dtype acc) {
    int f = gr_dtype_is_float(acc);
    switch (op->combine) {
    case GR_COMBINE_MUL: case GR_COMBINE_AND: return f ? make_f(1) : make_u(1);
    case GR_COMBINE_MIN: return top(acc);
    case GR_COMBINE_MAX: return bottom(acc);
    case GR_COMBINE_NANMIN: return f ? make_f(NAN) : top(acc);
    case GR_COMBINE_NANMAX: return f ? make_f(NAN) : bottom(acc);
    case GR_COMBINE_ADD: case GR_COMBINE_OR: return f ? make_f(0) : make_u(0);
    }
    return make_u(0);
}

/* One element's contribution, in the accumulator's kind. */
static num value_load(const gr_op_desc *op, gr_dtype acc, num x) {
    int f = gr_dtype_is_float(acc);
    switch (op->map) {
    case GR_MAP_NONZERO: {
        int nz = x.kind == 'f' ? x.f != 0.0 : x.u != 0;
        return make_u((uint64_t)nz);
    }
    case GR_MAP_SQUARE:
        if (f) {
            double v = rnd(acc, x.kind == 'f' ? x.f : x.kind == 'i' ? (double)x.i : (double)x.u);
            return make_f(rnd(acc, v * v));
        }
        return make_u(x.u * x.u);           /* wrapping, signed by its bits */
    case GR_MAP_NAN_ZERO:
        if (x.kind == 'f' && x.f != x.f) return f ? make_f(0) : make_u(0);
        /* fall through */
    case GR_MAP_VALUE:
        if (f) return make_f(rnd(acc, x.kind == 'f' ? x.f : x.kind == 'i' ? (double)x.i : (double)x.u));
        if (op->acc == GR_ACC_INPUT) return x;
        return make_u(x.u);                 /* the wrapping 64-bit accumulator takes the bits */
    }
    return x;
}

static num value_combine(const gr_op_desc *op, gr_dtype acc, num a, num b) {
    int f = gr_dtype_is_float(acc);
    switch (op->combine) {
    case GR_COMBINE_ADD: return f ? make_f(rnd(acc, a.f + b.f)) : make_u(a.u + b.u);
    case GR_COMBINE_MUL: return f ? make_f(rnd(acc, a.f * b.f)) : make_u(a.u * b.u);
    case GR_COMBINE_MIN: return is_nan(a) ? a : is_nan(b) ? b : less(b, a) ? b : a;     /* NaN wins */
    case GR_COMBINE_MAX: return is_nan(a) ? a : is_nan(b) ? b : less(a, b) ? b : a;
    case GR_COMBINE_NANMIN: return is_nan(a) ? b : is_nan(b) ? a : less(b, a) ? b : a;  /* NaN loses */
    case GR_COMBINE_NANMAX: return is_nan(a) ? b : is_nan(b) ? a : less(a, b) ? b : a;
    case GR_COMBINE_AND: return make_u(a.u && b.u);
    case GR_COMBINE_OR: return make_u(a.u || b.u);
    }
    return a;
}

/* ---- exact sums of integers of up to 32 bits (var, std, norm) ------------------------------------ */

typedef unsigned __int128 u128;

static u128 u128_of(const void *p) {
    const uint64_t *w = p;
    return (u128)w[1] << 64 | w[0];
}
static void u128_put(void *p, u128 v) {
    uint64_t *w = p;
    w[0] = (uint64_t)v;
    w[1] = (uint64_t)(v >> 64);
}
/* Rounded once: the high word's part is exact while it is below 2^53 (cuda/device/results.cuh, the same). */
static double u128_double(u128 v) { return (double)(uint64_t)(v >> 64) * 0x1p64 + (double)(uint64_t)v; }

/* x^2 of an integer of up to 32 bits, exactly (below 2^64). */
static uint64_t square_of(num x) { return x.kind == 'i' ? (uint64_t)(x.i * x.i) : x.u * x.u; }

/* The sum of squared deviations of n integers from their exact sum and sum of squares s2. With q the
 * floor of the mean and r = sum - q n (0 <= r < n), sum (x - q)^2 = s2 - n q^2 - 2 q r is an exact
 * integer (computed modulo 2^128, where it fits), and sum (x - mean)^2 is that less r^2 / n: one
 * rounding of a large value, and no cancellation beyond r^2 / n < n. cuda/device/results.cuh does the same. */
static double moments_m2(uint64_t n, uint64_t sum, u128 s2, int is_signed) {
    uint64_t uq, r;
    int neg = 0;
    if (is_signed) {
        int64_t s = (int64_t)sum, q = s / (int64_t)n, rr = s % (int64_t)n;
        if (rr < 0) {
            q -= 1;
            rr += (int64_t)n;
        }
        neg = q < 0;
        uq = neg ? -(uint64_t)q : (uint64_t)q;
        r = (uint64_t)rr;
    } else {
        uq = sum / n;
        r = sum % n;
    }
    u128 m = s2 - (u128)n * (uq * uq), twice_qr = ((u128)uq * r) << 1;
    m = neg ? m + twice_qr : m - twice_qr;
    double dev = u128_double(m) - (double)r * ((double)r / (double)n);
    return dev > 0 ? dev : 0;
}

/* ---- Blue's scaled sums of squares (LAPACK's nrm2 since 3.10) --------------------------------------
 * Elements above tbig are scaled down by sbig, below tsml up by ssml, before they are squared, so no
 * square overflows or underflows; the three sums meet only at the end. The constants, for base 2 and
 * a mantissa of t bits, exponents emin..emax: tsml = 2^ceil((emin - 1) / 2), tbig = 2^floor((emax - t
 * + 1) / 2), ssml = 2^-floor((emin - t) / 2), sbig = 2^-ceil((emax + t - 1) / 2). */
typedef struct { double tsml, tbig, ssml, sbig; } blue;

static blue blue_of(gr_dtype acc) {
    if (acc == GR_FLOAT32) return (blue){0x1p-63, 0x1p52, 0x1p75, 0x1p-76};
    return (blue){0x1p-511, 0x1p486, 0x1p537, 0x1p-538};
}

void gr_host_norm_scales(gr_dtype acc, double c[4]) {
    blue b = blue_of(acc);
    c[0] = b.tsml, c[1] = b.tbig, c[2] = b.ssml, c[3] = b.sbig;
}

static double blue_norm(gr_dtype acc, double small, double medium, double big) {
    blue c = blue_of(acc);
    double scale, sumsq;
    if (big > 0 || big != big) {
        if (medium > 0 || medium != medium) big = rnd(acc, big + rnd(acc, rnd(acc, medium * c.sbig) * c.sbig));
        scale = 1 / c.sbig;
        sumsq = big;
    } else if (small > 0) {
        if (medium > 0 || medium != medium) {
            double m = rnd(acc, sqrt(medium)), s = rnd(acc, rnd(acc, sqrt(small)) / c.ssml);
            double lo = s > m ? m : s, hi = s > m ? s : m;
            scale = 1;
            sumsq = rnd(acc, rnd(acc, hi * hi) * rnd(acc, 1 + rnd(acc, rnd(acc, lo / hi) * rnd(acc, lo / hi))));
        } else {
            scale = 1 / c.ssml;
            sumsq = small;
        }
    } else {
        scale = 1;
        sumsq = medium;
    }
    return rnd(acc, scale * rnd(acc, sqrt(sumsq)));
}

/* The bytes of one accumulator: the layout above, the device's (cuda/device/ops.cuh). */
size_t gr_host_acc_size(const gr_op_desc *d, gr_dtype t, gr_dtype acc) {
    size_t es = gr_dtype_size(t), as = gr_dtype_size(acc);
    switch (gr_op_family(d, t)) {
    case GR_FAMILY_ARG: return 16;                              /* u64 index, then the value */
    case GR_FAMILY_MINMAX: return es < 4 ? 4 : 2 * es;          /* two values, 4-byte aligned */
    case GR_FAMILY_WELFORD: return 8 + 2 * as;                  /* u64 n, mean, m2 */
    case GR_FAMILY_NORM: return 3 * as;
    case GR_FAMILY_COUNTED: return 16;                          /* u64 n, then the sum */
    case GR_FAMILY_MOMENTS: return 32;
    case GR_FAMILY_SQUARES: return 16;
    case GR_FAMILY_VALUE: return as;
    }
    return GR_ACC_MAX;
}

/* ---- the four operations ------------------------------------------------------------------------- */

static size_t fsize(gr_dtype acc) { return gr_dtype_size(acc); }

void gr_host_identity(const gr_op_desc *op, gr_dtype t, gr_dtype acc, void *a) {
    memset(a, 0, gr_host_acc_size(op, t, acc));   /* exactly its bytes: `a` may be one of an array */
    char *p = a;
    switch (gr_op_family(op, t)) {
    case GR_FAMILY_ARG:
        *(uint64_t *)p = UINT64_MAX;
        write_num(p + 8, t, op->combine == GR_COMBINE_MIN ? top(t) : bottom(t));
        break;
    case GR_FAMILY_MINMAX:
        write_num(p, t, top(t));
        write_num(p + gr_dtype_size(t), t, bottom(t));
        break;
    case GR_FAMILY_WELFORD: case GR_FAMILY_NORM: case GR_FAMILY_COUNTED: case GR_FAMILY_MOMENTS:
    case GR_FAMILY_SQUARES:
        break;                          /* all zero */
    case GR_FAMILY_VALUE:
        write_num(p, acc, value_identity(op, acc));
        break;
    }
}

void gr_host_load(const gr_op_desc *op, gr_dtype t, gr_dtype acc, const void *xp, uint64_t index, void *a) {
    num x = read_num(xp, t);
    double xf = x.kind == 'f' ? x.f : x.kind == 'i' ? (double)x.i : (double)x.u;
    char *p = a;
    memset(a, 0, gr_host_acc_size(op, t, acc));   /* exactly its bytes: `a` may be one of an array */
    switch (gr_op_family(op, t)) {
    case GR_FAMILY_ARG:
        *(uint64_t *)p = index;
        write_num(p + 8, t, x);
        break;
    case GR_FAMILY_MINMAX:
        write_num(p, t, x);
        write_num(p + gr_dtype_size(t), t, x);
        break;
    case GR_FAMILY_WELFORD:
        *(uint64_t *)p = 1;
        f_put(p + 8, acc, rnd(acc, xf));
        /* x - x: 0 for a finite x, NaN for NaN or +-inf, so that a lone one makes the variance NaN */
        f_put(p + 8 + fsize(acc), acc, rnd(acc, xf) - rnd(acc, xf));
        break;
    case GR_FAMILY_NORM: {
        blue c = blue_of(acc);
        double ax = rnd(acc, fabs(rnd(acc, xf)));
        if (ax > c.tbig) f_put(p + 2 * fsize(acc), acc, rnd(acc, rnd(acc, ax * c.sbig) * rnd(acc, ax * c.sbig)));
        else if (ax < c.tsml) f_put(p, acc, rnd(acc, rnd(acc, ax * c.ssml) * rnd(acc, ax * c.ssml)));
        else f_put(p + fsize(acc), acc, rnd(acc, ax * ax));
        break;
    }
    case GR_FAMILY_MOMENTS:
        *(uint64_t *)p = 1;
        *(uint64_t *)(p + 8) = x.u;                             /* the bits of the (signed) value */
        u128_put(p + 16, (u128)square_of(x));
        break;
    case GR_FAMILY_SQUARES:
        u128_put(p, (u128)square_of(x));
        break;
    case GR_FAMILY_COUNTED:
        if (!(xf != xf)) {
            *(uint64_t *)p = 1;
            f_put(p + 8, acc, rnd(acc, xf));
        }
        break;
    case GR_FAMILY_VALUE:
        write_num(p, acc, value_load(op, acc, x));
        break;
    }
}

/* argmin/argmax: the more extreme value wins, a NaN is the most extreme of all, ties go to the lower
 * index (so the first occurrence wins, and the identity, index 2^64 - 1, loses every tie). */
static int arg_b_wins(const gr_op_desc *op, num av, uint64_t ai, num bv, uint64_t bi) {
    int an = is_nan(av), bn = is_nan(bv);
    if (an || bn) return an && bn ? bi < ai : bn;
    int better = op->combine == GR_COMBINE_MIN ? less(bv, av) : less(av, bv);
    int worse = op->combine == GR_COMBINE_MIN ? less(av, bv) : less(bv, av);
    return better || (!worse && bi < ai);
}

void gr_host_combine(const gr_op_desc *op, gr_dtype t, gr_dtype acc, void *a, const void *b) {
    char *p = a;
    const char *q = b;
    size_t fs = fsize(acc);
    switch (gr_op_family(op, t)) {
    case GR_FAMILY_ARG: {
        uint64_t ai = *(const uint64_t *)p, bi = *(const uint64_t *)q;
        if (arg_b_wins(op, read_num(p + 8, t), ai, read_num(q + 8, t), bi)) memcpy(p, q, 16);
        break;
    }
    case GR_FAMILY_MINMAX: {
        gr_op_desc mn = *op, mx = *op;
        mn.combine = GR_COMBINE_MIN;
        mx.combine = GR_COMBINE_MAX;
        size_t es = gr_dtype_size(t);
        write_num(p, t, value_combine(&mn, t, read_num(p, t), read_num(q, t)));
        write_num(p + es, t, value_combine(&mx, t, read_num(p + es, t), read_num(q + es, t)));
        break;
    }
    case GR_FAMILY_WELFORD: {
        uint64_t na = *(const uint64_t *)p, nb = *(const uint64_t *)q;
        if (nb == 0) break;
        if (na == 0) {
            memcpy(p, q, 8 + 2 * fs);
            break;
        }
        double ma = f_of(p + 8, acc), mb = f_of(q + 8, acc), m2a = f_of(p + 8 + fs, acc), m2b = f_of(q + 8 + fs, acc);
        double n = rnd(acc, (double)(na + nb)), delta = rnd(acc, mb - ma);
        double wb = rnd(acc, rnd(acc, (double)nb) / n), wab = rnd(acc, rnd(acc, rnd(acc, (double)na) * wb));
        *(uint64_t *)p = na + nb;
        f_put(p + 8, acc, rnd(acc, ma + rnd(acc, delta * wb)));
        f_put(p + 8 + fs, acc, rnd(acc, rnd(acc, m2a + m2b) + rnd(acc, rnd(acc, delta * delta) * wab)));
        break;
    }
    case GR_FAMILY_NORM:
        for (int k = 0; k < 3; k++) f_put(p + k * fs, acc, rnd(acc, f_of(p + k * fs, acc) + f_of(q + k * fs, acc)));
        break;
    case GR_FAMILY_MOMENTS:
        *(uint64_t *)p += *(const uint64_t *)q;
        *(uint64_t *)(p + 8) += *(const uint64_t *)(q + 8);
        u128_put(p + 16, u128_of(p + 16) + u128_of(q + 16));
        break;
    case GR_FAMILY_SQUARES:
        u128_put(p, u128_of(p) + u128_of(q));
        break;
    case GR_FAMILY_COUNTED:
        *(uint64_t *)p += *(const uint64_t *)q;
        f_put(p + 8, acc, rnd(acc, f_of(p + 8, acc) + f_of(q + 8, acc)));
        break;
    case GR_FAMILY_VALUE:
        write_num(p, acc, value_combine(op, acc, read_num(p, acc), read_num(q, acc)));
        break;
    }
}

static gr_scalar scalar_f(double f) { gr_scalar s = {0}; s.kind = GR_SCALAR_FLOAT; s.v.f = f; return s; }
static gr_scalar scalar_i(int64_t i) { gr_scalar s = {0}; s.kind = GR_SCALAR_INT; s.v.i = i; return s; }

/* An element or accumulator value as the caller's scalar; a wrapping uint64 accumulator comes back
 * signed when the input was. */
static gr_scalar scalar_of(num v, gr_dtype t, int signed_input) {
    gr_scalar s = {0};
    if (v.kind == 'f') return scalar_f(v.f);
    if (v.kind == 'i' || (t == GR_UINT64 && signed_input)) return scalar_i(v.i);
    s.kind = GR_SCALAR_UINT;
    s.v.u = v.u;
    return s;
}

gr_result gr_host_result(const gr_op_desc *op, gr_dtype t, gr_dtype acc, const void *a, size_t n, int ddof) {
    gr_result r = {0};
    const char *p = a;
    size_t fs = fsize(acc);
    r.count = op->arity;
    switch (op->result) {
    case GR_RESULT_BOOL:
        r.value[0].kind = GR_SCALAR_BOOL;
        r.value[0].v.b = *(const uint8_t *)p != 0;
        break;
    case GR_RESULT_MEAN:
        if (gr_op_family(op, t) == GR_FAMILY_COUNTED) {
            uint64_t k = *(const uint64_t *)p;
            r.value[0] = scalar_f(k ? rnd(acc, f_of(p + 8, acc) / (double)k) : NAN);
        } else if (gr_dtype_is_float(acc)) {
            r.value[0] = scalar_f(rnd(acc, f_of(p, acc) / (double)n));
        } else {                    /* the exact 64-bit sum of the integers, divided once */
            uint64_t u = *(const uint64_t *)p;
            r.value[0] = scalar_f(gr_dtype_is_signed(t) ? (double)(int64_t)u / (double)n : (double)u / (double)n);
        }
        break;
    case GR_RESULT_VAR: case GR_RESULT_STD: {
        uint64_t k = *(const uint64_t *)p;
        double dof = (double)k - (double)ddof, var;
        if (gr_op_family(op, t) == GR_FAMILY_MOMENTS)
            var = dof > 0 ? moments_m2(k, *(const uint64_t *)(p + 8), u128_of(p + 16), gr_dtype_is_signed(t)) / dof : NAN;
        else
            var = dof > 0 ? rnd(acc, f_of(p + 8 + fs, acc) / rnd(acc, dof)) : NAN;
        r.value[0] = scalar_f(op->result == GR_RESULT_STD ? rnd(acc, sqrt(var)) : var);
        break;
    }
    case GR_RESULT_NORM:
        if (gr_op_family(op, t) == GR_FAMILY_SQUARES) r.value[0] = scalar_f(sqrt(u128_double(u128_of(p))));
        else r.value[0] = scalar_f(blue_norm(acc, f_of(p, acc), f_of(p + fs, acc), f_of(p + 2 * fs, acc)));
        break;
    case GR_RESULT_ARG: {
        uint64_t i = *(const uint64_t *)p;
        r.value[0] = scalar_of(read_num(p + 8, t), t, 0);
        r.value[1] = scalar_i(i == UINT64_MAX ? 0 : (int64_t)i + 1);
        break;
    }
    case GR_RESULT_PAIR:
        r.value[0] = scalar_of(read_num(p, t), t, 0);
        r.value[1] = scalar_of(read_num(p + gr_dtype_size(t), t), t, 0);
        break;
    case GR_RESULT_VALUE:
        if (op->acc == GR_ACC_COUNT) r.value[0] = scalar_i((int64_t) * (const uint64_t *)p);
        else r.value[0] = scalar_of(read_num(p, acc), acc, gr_dtype_is_signed(t));
        break;
    }
    return r;
}
