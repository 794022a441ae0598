/*
 * ops.h -- an op is a descriptor, not an index that files branch on.
 *
 * A descriptor says what the op does, in terms the backends implement once each:
 *   family   the shape of its accumulator: one value (most ops), a value and its index (argmin,
 *            argmax), a low and a high (minmax), a count, mean and sum of squared deviations (var,
 *            std), three scaled sums of squares (norm), a count and a sum (nanmean); on integers of
 *            up to 32 bits var, std and norm take exact integer sums instead (gr_op_family);
 *   map      what one element contributes to a one-value accumulator: its value, a flag (x != 0), its
 *            square, its value with NaN taken as zero, or its absolute value;
 *   combine  how two one-value accumulators meet: add, multiply, min, max, and, or, or the min and max
 *            that skip NaN (for argmin/argmax: which way the comparison goes);
 *   acc      which accumulator dtype that needs for an input dtype;
 *   result   what the combined accumulator becomes: its value, a boolean, a mean, a variance, a
 *            standard deviation, a norm, or two values; how many values come back; whether an empty
 *            input has an identity.
 * The CPU backend and the host finishes read these fields (host_ops.c); the kernels have one functor
 * per op (cuda/device/ops.cuh, found through OpOf by the op's id). docs/extending.md walks through adding one.
 */
#ifndef GR_OPS_H
#define GR_OPS_H

#include "base/state.h"

typedef enum {
    GR_FAMILY_VALUE,            /* one value of the accumulator dtype */
    GR_FAMILY_ARG,              /* {u64 index; T value}: the first index of the extreme value */
    GR_FAMILY_MINMAX,           /* {T lo; T hi} */
    GR_FAMILY_WELFORD,          /* {u64 n; F mean; F m2} */
    GR_FAMILY_NORM,             /* {F small; F medium; F big}: Blue's scaled sums of squares */
    GR_FAMILY_COUNTED,          /* {u64 n; F sum}: a sum and how many elements it holds */
    GR_FAMILY_MOMENTS,          /* {u64 n; u64 sum; u128 sumsq}: var/std of integers of up to 32 bits */
    GR_FAMILY_SQUARES,          /* {u128 sumsq}: norm of integers of up to 32 bits */
} gr_family;

typedef enum {
    GR_MAP_VALUE, GR_MAP_NONZERO, GR_MAP_SQUARE, GR_MAP_NAN_ZERO,
    GR_MAP_ABS,                 /* |x|: floats with the sign cleared (|-0.0| = +0.0, |NaN| NaN), integers
                                 * as their magnitude's bits (|INT_MIN| fits an unsigned type of its width) */
} gr_map_kind;
typedef enum {
    GR_COMBINE_ADD, GR_COMBINE_MUL, GR_COMBINE_MIN, GR_COMBINE_MAX, GR_COMBINE_AND, GR_COMBINE_OR,
    GR_COMBINE_NANMIN, GR_COMBINE_NANMAX,   /* NaN loses to any number; the identity is NaN */
} gr_combine_kind;
typedef enum {
    GR_ACC_WIDE,                /* integers: uint64 (wrapping); floats: their float_acc (lists.h), or float64 */
    GR_ACC_INPUT,               /* the input's own dtype */
    GR_ACC_FLAG,                /* uint8 0/1 */
    GR_ACC_COUNT,               /* uint64 */
    GR_ACC_FLOAT,               /* the dtype's float_acc (lists.h: float64 for integers), or float64 */
    GR_ACC_MAGNITUDE,           /* floats: the input's own dtype; integers: the unsigned dtype of the
                                 * input's width, which holds every |x| (int8's |-128| is a uint8 128) */
} gr_acc_rule;
typedef enum {
    GR_RESULT_VALUE, GR_RESULT_BOOL, GR_RESULT_MEAN, GR_RESULT_VAR, GR_RESULT_STD, GR_RESULT_NORM,
    GR_RESULT_ARG, GR_RESULT_PAIR,
} gr_result_kind;

typedef struct gr_op_desc {
    const char *name;
    const char *alias;          /* a second name ("all" for and), or NULL */
    gr_op id;                   /* the kernels' dispatch key */
    gr_family family;
    gr_map_kind map;
    gr_combine_kind combine;    /* for GR_FAMILY_ARG: GR_COMBINE_MIN or GR_COMBINE_MAX */
    gr_acc_rule acc;
    gr_result_kind result;
    int arity;                  /* values in the result */
    int has_identity;           /* 0: an empty input is an error (there is no identity to return) */
} gr_op_desc;

/* The descriptor of an op, or NULL when op is not one. */
const gr_op_desc *gr_op_desc_get(gr_op op);
/* The accumulator family of op over input dtype t: the descriptor's, except that var, std and norm of
 * integers of up to 32 bits keep exact integer sums (a 64-bit sum and a 128-bit sum of squares), which
 * are exact, order-free and, with the bytes' dot-product instructions, as fast as a sum. Kept in step
 * with cuda/device/ops.cuh's exact_int_v. Inline: ops.c and host_ops.c both ask, and neither calls the other
 * back (the layer check). */
static inline gr_family gr_op_family(const gr_op_desc *d, gr_dtype t) {
    int exact = !gr_dtype_is_float(t) && gr_dtype_size(t) <= 4;
    if (exact && d->family == GR_FAMILY_WELFORD) return GR_FAMILY_MOMENTS;
    if (exact && d->family == GR_FAMILY_NORM) return GR_FAMILY_SQUARES;
    return d->family;
}
/* Whether op's accumulator is one value that an element of the accumulator dtype loads as itself: add,
 * multiply, min or max of values, and/or of flags. Its partials can then be reduced again as elements
 * (the CPU finish), and the cpu_pairwise variant folds it in a running value. */
static inline int gr_op_folds_itself(const gr_op_desc *d) {
    if (d->family != GR_FAMILY_VALUE) return 0;
    if (d->map == GR_MAP_VALUE)
        return d->combine == GR_COMBINE_ADD || d->combine == GR_COMBINE_MUL || d->combine == GR_COMBINE_MIN ||
               d->combine == GR_COMBINE_MAX;
    return d->map == GR_MAP_NONZERO && (d->combine == GR_COMBINE_AND || d->combine == GR_COMBINE_OR);
}
/* Whether a one-value integer result of op over t reads as signed: the wrapping 64-bit sums and
 * products of signed data do (two's complement); a sum or a maximum of absolute values (asum, absmax) is
 * never negative, so it reads as unsigned (|INT64_MIN| = 2^63 is a uint64). Inline for the same reason
 * as gr_op_family. */
static inline int gr_op_signed_result(const gr_op_desc *d, gr_dtype t) {
    return gr_dtype_is_signed(t) && d->map != GR_MAP_ABS;
}
/* The accumulator dtype of op over dtype t, with an optional override (-1 = none); -1 and a message
 * naming "acc" when the override is not accepted. */
int gr_op_acc_dtype(gr_context *ctx, gr_op op, gr_dtype t, int override);
/* Bytes of one accumulator of op for input dtype t and accumulator dtype acc (<= GR_ACC_MAX). */
size_t gr_op_acc_size(gr_op op, gr_dtype t, gr_dtype acc);
#define GR_ACC_MAX 32
/* The dtypes of a result's values when they are written to buffers (segmented reductions). */
gr_dtype gr_op_result_dtype(gr_op op, gr_dtype t, gr_dtype acc, int which);

/* ---- the host side of every op (host_ops.c): accumulators as bytes, in the device's layout -------- */

/* Bytes of one accumulator of the op (gr_op_acc_size by descriptor; the layout is this file's). */
size_t gr_host_acc_size(const gr_op_desc *op, gr_dtype t, gr_dtype acc);
void gr_host_identity(const gr_op_desc *op, gr_dtype t, gr_dtype acc, void *a);
/* One element x (of dtype t) at 0-based `index` into a fresh accumulator at a. */
void gr_host_load(const gr_op_desc *op, gr_dtype t, gr_dtype acc, const void *x, uint64_t index, void *a);
/* a = a (op) b. */
void gr_host_combine(const gr_op_desc *op, gr_dtype t, gr_dtype acc, void *a, const void *b);
/* The result of a reduction of n elements whose combined accumulator is at a. */
gr_result gr_host_result(const gr_op_desc *op, gr_dtype t, gr_dtype acc, const void *a, size_t n, int ddof);

/* The result of a reduction of n elements of in_dtype whose combined accumulator is at acc_value. */
gr_result gr_op_result(gr_op op, const void *acc_value, gr_dtype acc, gr_dtype in_dtype, size_t n, int ddof);
/* The result of an empty reduction: the identity (GR_OK) or GR_EEMPTY with a message. */
gr_status gr_op_empty_result(gr_context *ctx, gr_op op, gr_dtype in_dtype, gr_dtype acc, gr_result *out);

#endif
