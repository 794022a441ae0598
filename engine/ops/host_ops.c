/*
 * host_ops.c -- every op on the host, one accumulator at a time: the identity, one element in, two
 * accumulators combined, the result. The CPU backend uses these where its per-dtype loops do not apply,
 * and every host finish (hybrid, host, streamed chunk values, segments) combines device partials with
 * them, so the layouts here are the kernels' layouts byte for byte (cuda/device/ops.cuh):
 *   value    one element of the accumulator dtype
 *   arg      u64 index at 0, the value (input dtype) at 8; 16 bytes
 *   minmax   lo at 0, hi at the input's size; at least 4 bytes
 *   welford, norm, counted, moments, squares: op_math.h's structs (gr_welford_f32 and so on), which the
 *            kernels' functors are made of too
 * What those families compute -- Chan's merge, Blue's sums and join, the exact moments, the results of
 * mean, var, std, norm and nanmean, the NaN and tie rules of the extremes -- is op_math.h's, compiled here
 * and in the kernels from one text. Float accumulators of float32 are op_math.h's float functions, and
 * the one-value ones round after every operation (rnd), which is float32 arithmetic exactly, so the CPU
 * backend overflows, underflows and rounds where the kernels do.
 */
#include "ops/ops.h"
#include "ops/op_math.h"
#include "base/dtype.h"

#include <math.h>
#include <string.h>

/* A value in the widest form of its kind. */
typedef struct { int kind; int64_t i; uint64_t u; double f; } num;     /* kind: 'i', 'u', 'f' */

/* A scalar of the INT, UINT or FLOAT kind (the kinds of the dtypes) as a num, and back. */
static num num_of(gr_scalar s) {
    num v = {0, 0, 0, 0};
    switch (s.kind) {
    case GR_SCALAR_INT: v.kind = 'i', v.i = s.v.i, v.u = (uint64_t)s.v.i; break;
    case GR_SCALAR_UINT: v.kind = 'u', v.u = s.v.u, v.i = (int64_t)s.v.u; break;
    case GR_SCALAR_FLOAT: v.kind = 'f', v.f = s.v.f; break;
    case GR_SCALAR_BOOL: v.kind = 'u', v.u = (uint64_t)(s.v.b != 0), v.i = (int64_t)v.u; break;
    }
    return v;
}
static gr_scalar scalar_of_num(num v) {
    gr_scalar s = {0};
    if (v.kind == 'f') s.kind = GR_SCALAR_FLOAT, s.v.f = v.f;
    else if (v.kind == 'i') s.kind = GR_SCALAR_INT, s.v.i = v.i;
    else s.kind = GR_SCALAR_UINT, s.v.u = v.u;
    return s;
}

/* An element or an accumulator value of dtype t: the dtype list's reader and writer (base/dtype.c), a C
 * cast each way, integers wrapping into narrower dtypes. */
static num read_num(const void *p, gr_dtype t) { return num_of(gr_scalar_load(p, t)); }
static void write_num(void *p, gr_dtype t, num v) { gr_scalar_put(p, t, scalar_of_num(v)); }

static num make_f(double f) { num v = {'f', 0, 0, f}; return v; }
static num make_u(uint64_t u) { num v = {'u', (int64_t)u, u, 0}; return v; }

/* Rounds to the accumulator's precision: float32 arithmetic is double arithmetic rounded at each step. */
static double rnd(gr_dtype acc, double f) { return acc == GR_FLOAT32 ? (double)(float)f : f; }

static int is_nan(num v) { return v.kind == 'f' && v.f != v.f; }

/* a < b in the value's own order (floats, signed or unsigned integers). */
static int less(num a, num b) {
    if (a.kind == 'f') return a.f < b.f;
    if (a.kind == 'i') return a.i < b.i;
    return a.u < b.u;
}

/* The largest and smallest values of dtype t (infinities for floats): the dtype list's limits. */
static num top(gr_dtype t) {
    gr_scalar lo, hi;
    gr_dtype_limits(t, &lo, &hi);
    return num_of(hi);
}
static num bottom(gr_dtype t) {
    gr_scalar lo, hi;
    gr_dtype_limits(t, &lo, &hi);
    return num_of(lo);
}

/* ---- one-value accumulators ---------------------------------------------------------------------- */

static num value_identity(const gr_op_desc *op, gr_dtype acc) {
    int f = gr_dtype_is_float(acc);
    switch (op->combine) {
    case GR_COMBINE_MUL: case GR_COMBINE_AND: return f ? make_f(1) : make_u(1);
    case GR_COMBINE_MIN: return top(acc);
    case GR_COMBINE_MAX:            /* absolute values are >= 0: their max starts at 0 (absmax of nothing) */
        if (op->map == GR_MAP_ABS) return f ? make_f(0) : make_u(0);
        return bottom(acc);
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
    case GR_MAP_ABS:
        /* ops.cuh's magnitude(), step for step: x <= 0 catches -0.0 and 0 - x is exact, so |-0.0| = +0.0
         * (a NaN fails the test and stays as it is); an integer's magnitude as its bits, which fit absmax's
         * unsigned accumulator of the input's width and wrap in asum's 64 bits */
        if (f) {
            double v = rnd(acc, x.kind == 'f' ? x.f : x.kind == 'i' ? (double)x.i : (double)x.u);
            return make_f(v <= 0 ? 0 - v : v);
        }
        return make_u(x.kind == 'i' && x.i < 0 ? (uint64_t)0 - x.u : x.u);
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
    case GR_COMBINE_MIN: return GR_EXTREME(a, b, is_nan(a), is_nan(b), less(b, a));
    case GR_COMBINE_MAX: return GR_EXTREME(a, b, is_nan(a), is_nan(b), less(a, b));
    case GR_COMBINE_NANMIN: GR_RETURN_NANEXTREME(a, b, is_nan(a), is_nan(b), less(b, a));
    case GR_COMBINE_NANMAX: GR_RETURN_NANEXTREME(a, b, is_nan(a), is_nan(b), less(a, b));
    case GR_COMBINE_AND: return make_u(a.u && b.u);
    case GR_COMBINE_OR: return make_u(a.u || b.u);
    }
    return a;
}

/* op_math.h's structs in and out of an accumulator's bytes (which need not be aligned for them). */
#define ACC_IN(var, p) memcpy(&(var), (p), sizeof(var))
#define ACC_OUT(p, var) memcpy((p), &(var), sizeof(var))
/* counted: the count and the sum, not the padding after a float32 sum (its bytes stay as they were) */
#define COUNTED_OUT(p, c) (memcpy((p), &(c).n, 8), memcpy((char *)(p) + 8, &(c).sum, sizeof (c).sum))
/* One element x into the bytes at p by op_math.h's LOAD_f32 or LOAD_f64, as the accumulator is float32
 * (which only float32 data has: (float)x is exact) or float64. */
#define PUT_LOADED(p, f32, LOAD, x)                                                                     \
    do {                                                                                                \
        if (f32) {                                                                                      \
            __typeof__(LOAD##_f32(0.0f)) v_ = LOAD##_f32((float)(x));                                   \
            ACC_OUT(p, v_);                                                                             \
        } else {                                                                                        \
            __typeof__(LOAD##_f64(0.0)) v_ = LOAD##_f64(x);                                             \
            ACC_OUT(p, v_);                                                                             \
        }                                                                                               \
    } while (0)

/* x^2 of an integer of up to 32 bits, exactly. */
static uint64_t square_of(num x) { return x.kind == 'i' ? gr_square_signed(x.i) : gr_square_unsigned(x.u); }

/* The bytes of one accumulator: the layout above, the device's (cuda/device/ops.cuh). */
size_t gr_host_acc_size(const gr_op_desc *d, gr_dtype t, gr_dtype acc) {
    size_t es = gr_dtype_size(t);
    int f32 = acc == GR_FLOAT32;
    switch (gr_op_family(d, t)) {
    case GR_FAMILY_VALUE: return gr_dtype_size(acc);
    case GR_FAMILY_ARG: return 16;                              /* u64 index, then the value */
    case GR_FAMILY_MINMAX: return es < 4 ? 4 : 2 * es;          /* two values, 4-byte aligned */
    case GR_FAMILY_WELFORD: return f32 ? sizeof(gr_welford_f32) : sizeof(gr_welford_f64);
    case GR_FAMILY_NORM: return f32 ? sizeof(gr_norm_f32) : sizeof(gr_norm_f64);
    case GR_FAMILY_COUNTED: return f32 ? sizeof(gr_counted_f32) : sizeof(gr_counted_f64);
    case GR_FAMILY_MOMENTS: return sizeof(gr_moments);
    case GR_FAMILY_SQUARES: return sizeof(gr_squares);
    }
    return GR_ACC_MAX;
}

/* ---- the four operations ------------------------------------------------------------------------- */

void gr_host_identity(const gr_op_desc *op, gr_dtype t, gr_dtype acc, void *a) {
    memset(a, 0, gr_host_acc_size(op, t, acc));   /* exactly its bytes: `a` may be one of an array */
    char *p = a;
    switch (gr_op_family(op, t)) {
    case GR_FAMILY_ARG:
        *(uint64_t *)p = GR_NO_INDEX;
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
    int f32 = acc == GR_FLOAT32;
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
        PUT_LOADED(p, f32, gr_welford_load, xf);
        break;
    case GR_FAMILY_NORM:
        PUT_LOADED(p, f32, gr_norm_load, xf);
        break;
    case GR_FAMILY_MOMENTS: {
        gr_moments m = {1, x.u, {square_of(x), 0}};     /* the bits of the (signed) value */
        ACC_OUT(p, m);
        break;
    }
    case GR_FAMILY_SQUARES: {
        gr_squares q = {{square_of(x), 0}};
        ACC_OUT(p, q);
        break;
    }
    case GR_FAMILY_COUNTED:             /* a NaN counts nothing: the accumulator stays zero */
        if (xf != xf) break;
        if (f32) {
            gr_counted_f32 c = {1, (float)xf};
            COUNTED_OUT(p, c);
        } else {
            gr_counted_f64 c = {1, xf};
            COUNTED_OUT(p, c);
        }
        break;
    case GR_FAMILY_VALUE:
        write_num(p, acc, value_load(op, acc, x));
        break;
    }
}

/* argmin/argmax: 1 where (bv, bi) replaces (av, ai) (op_math.h's rule). */
static int arg_b_wins(const gr_op_desc *op, num av, uint64_t ai, num bv, uint64_t bi) {
    int mn = op->combine == GR_COMBINE_MIN;
    GR_RETURN_ARG(0, 1, is_nan(av), is_nan(bv), mn ? less(bv, av) : less(av, bv), mn ? less(av, bv) : less(bv, av),
                  ai, bi);
}

/* a = a (op) b for op_math.h's struct T, merged by MERGE; of gr_NAME_f32 or gr_NAME_f64 by f32. */
#define MERGE_ACC(T, MERGE, p, q)                                                                       \
    do {                                                                                                \
        T a_, b_;                                                                                       \
        ACC_IN(a_, p);                                                                                  \
        ACC_IN(b_, q);                                                                                  \
        a_ = MERGE(a_, b_);                                                                             \
        ACC_OUT(p, a_);                                                                                 \
    } while (0)
#define MERGE_FLOAT(f32, NAME, p, q)                                                                    \
    do {                                                                                                \
        if (f32) MERGE_ACC(gr_##NAME##_f32, gr_##NAME##_merge_f32, p, q);                               \
        else MERGE_ACC(gr_##NAME##_f64, gr_##NAME##_merge_f64, p, q);                                   \
    } while (0)

void gr_host_combine(const gr_op_desc *op, gr_dtype t, gr_dtype acc, void *a, const void *b) {
    char *p = a;
    const char *q = b;
    int f32 = acc == GR_FLOAT32;
    switch (gr_op_family(op, t)) {
    case GR_FAMILY_ARG: {
        uint64_t ai = *(const uint64_t *)p, bi = *(const uint64_t *)q;
        if (arg_b_wins(op, read_num(p + 8, t), ai, read_num(q + 8, t), bi)) memcpy(p, q, 16);
        break;
    }
    case GR_FAMILY_MINMAX: {
        size_t es = gr_dtype_size(t);
        num alo = read_num(p, t), blo = read_num(q, t), ahi = read_num(p + es, t), bhi = read_num(q + es, t);
        write_num(p, t, GR_EXTREME(alo, blo, is_nan(alo), is_nan(blo), less(blo, alo)));
        write_num(p + es, t, GR_EXTREME(ahi, bhi, is_nan(ahi), is_nan(bhi), less(ahi, bhi)));
        break;
    }
    case GR_FAMILY_WELFORD:
        MERGE_FLOAT(f32, welford, p, q);
        break;
    case GR_FAMILY_NORM:
        MERGE_FLOAT(f32, norm, p, q);
        break;
    case GR_FAMILY_MOMENTS:
        MERGE_ACC(gr_moments, gr_moments_merge, p, q);
        break;
    case GR_FAMILY_SQUARES:
        MERGE_ACC(gr_squares, gr_squares_merge, p, q);
        break;
    case GR_FAMILY_COUNTED:
        if (f32) {
            gr_counted_f32 x, y;
            ACC_IN(x, p);
            ACC_IN(y, q);
            x = gr_counted_merge_f32(x, y);
            COUNTED_OUT(p, x);
        } else {
            MERGE_ACC(gr_counted_f64, gr_counted_merge_f64, p, q);
        }
        break;
    case GR_FAMILY_VALUE:
        write_num(p, acc, value_combine(op, acc, read_num(p, acc), read_num(q, acc)));
        break;
    }
}

static gr_scalar scalar_f(double f) { gr_scalar s = {0}; s.kind = GR_SCALAR_FLOAT; s.v.f = f; return s; }
static gr_scalar scalar_i(int64_t i) { gr_scalar s = {0}; s.kind = GR_SCALAR_INT; s.v.i = i; return s; }

/* An element or accumulator value as the caller's scalar; a wrapping uint64 accumulator comes back
 * signed when the input was, a value of a bool dtype as a boolean. */
static gr_scalar scalar_of(num v, gr_dtype t, int signed_input) {
    if (v.kind == 'u' && t == GR_UINT64 && signed_input) return scalar_i(v.i);
    if (gr_dtype_is_bool(t)) return (gr_scalar){GR_SCALAR_BOOL, {.b = v.u != 0}};
    return scalar_of_num(v);
}

/* var or std (std: the square root) of a Welford or an exact accumulator. */
static double deviation(gr_family fam, int f32, const char *p, int ddof, int is_signed, int std) {
    if (fam == GR_FAMILY_MOMENTS) {
        gr_moments m;
        ACC_IN(m, p);
        return std ? gr_moments_std(m, ddof, is_signed) : gr_moments_var(m, ddof, is_signed);
    }
    if (f32) {
        gr_welford_f32 w;
        ACC_IN(w, p);
        return std ? gr_welford_std_f32(w, ddof) : gr_welford_var_f32(w, ddof);
    }
    gr_welford_f64 w;
    ACC_IN(w, p);
    return std ? gr_welford_std_f64(w, ddof) : gr_welford_var_f64(w, ddof);
}

gr_result gr_host_result(const gr_op_desc *op, gr_dtype t, gr_dtype acc, const void *a, size_t n, int ddof) {
    gr_result r = {0};
    const char *p = a;
    int f32 = acc == GR_FLOAT32;
    gr_family fam = gr_op_family(op, t);
    r.count = op->arity;
    switch (op->result) {
    case GR_RESULT_BOOL:
        r.value[0].kind = GR_SCALAR_BOOL;
        r.value[0].v.b = *(const uint8_t *)p != 0;
        break;
    case GR_RESULT_MEAN:
        if (fam == GR_FAMILY_COUNTED) {
            gr_counted_f32 c32;
            gr_counted_f64 c64;
            if (f32) ACC_IN(c32, p);
            else ACC_IN(c64, p);
            r.value[0] = scalar_f(f32 ? gr_nanmean_f32(c32) : gr_nanmean_f64(c64));
        } else if (gr_dtype_is_float(acc)) {
            r.value[0] = scalar_f(f32 ? gr_mean_f32(*(const float *)p, n) : gr_mean_f64(*(const double *)p, n));
        } else {                    /* the exact 64-bit sum of the integers, divided once */
            r.value[0] = scalar_f(gr_int_mean(*(const uint64_t *)p, gr_dtype_is_signed(t), n));
        }
        break;
    case GR_RESULT_VAR: case GR_RESULT_STD:
        r.value[0] = scalar_f(deviation(fam, f32, p, ddof, gr_dtype_is_signed(t), op->result == GR_RESULT_STD));
        break;
    case GR_RESULT_NORM:
        if (fam == GR_FAMILY_SQUARES) {
            gr_squares q;
            ACC_IN(q, p);
            r.value[0] = scalar_f(gr_squares_norm(q));
        } else if (f32) {
            gr_norm_f32 s;
            ACC_IN(s, p);
            r.value[0] = scalar_f(gr_norm_join_f32(s));
        } else {
            gr_norm_f64 s;
            ACC_IN(s, p);
            r.value[0] = scalar_f(gr_norm_join_f64(s));
        }
        break;
    case GR_RESULT_ARG:
        r.value[0] = scalar_of(read_num(p + 8, t), t, 0);
        r.value[1] = scalar_i(gr_arg_position(*(const uint64_t *)p));
        break;
    case GR_RESULT_PAIR:
        r.value[0] = scalar_of(read_num(p, t), t, 0);
        r.value[1] = scalar_of(read_num(p + gr_dtype_size(t), t), t, 0);
        break;
    case GR_RESULT_VALUE:
        if (op->acc == GR_ACC_COUNT) r.value[0] = scalar_i((int64_t) * (const uint64_t *)p);
        else r.value[0] = scalar_of(read_num(p, acc), acc, gr_op_signed_result(op, t));
        break;
    }
    return r;
}
