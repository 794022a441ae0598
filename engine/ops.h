/*
 * ops.h -- an op is a descriptor, not an index that files branch on.
 *
 * A descriptor says what the op does to its input, in terms the backends implement once each:
 *   map      what one element contributes: its value, or a flag (x != 0) for the logical ops;
 *   combine  how two contributions meet: add, multiply, min, max, and, or;
 *   acc      which accumulator that needs for an input dtype: a wide one (64-bit integers, the float
 *            itself or float64), the input's own dtype, or a byte flag;
 *   result   what the combined accumulator becomes (its value, or a boolean), how many values come
 *            back, whether an empty input has an identity.
 * The CPU backend and the host finishes read these fields; the kernels have one functor per op
 * (cuda/ops.cuh) that the dispatch finds by the op's id. docs/extending.md walks through adding one.
 */
#ifndef GR_OPS_H
#define GR_OPS_H

#include "handles.h"

typedef enum { GR_MAP_VALUE, GR_MAP_NONZERO } gr_map_kind;
typedef enum { GR_COMBINE_ADD, GR_COMBINE_MUL, GR_COMBINE_MIN, GR_COMBINE_MAX, GR_COMBINE_AND, GR_COMBINE_OR } gr_combine_kind;
typedef enum { GR_ACC_WIDE, GR_ACC_INPUT, GR_ACC_FLAG } gr_acc_rule;
typedef enum { GR_RESULT_VALUE, GR_RESULT_BOOL } gr_result_kind;

typedef struct gr_op_desc {
    const char *name;
    const char *alias;          /* a second name ("all" for and), or NULL */
    gr_op id;                   /* the kernels' dispatch key */
    gr_map_kind map;
    gr_combine_kind combine;
    gr_acc_rule acc;
    gr_result_kind result;
    int arity;                  /* values in the result */
    int has_identity;           /* 0: an empty input is an error (there is no identity to return) */
} gr_op_desc;

/* The descriptor of an op, or NULL when op is not one. */
const gr_op_desc *gr_op_desc_get(gr_op op);
/* The accumulator dtype of op over dtype t, with an optional override (-1 = none); -1 and a message
 * naming "acc" when the override is not accepted. */
int gr_op_acc_dtype(gr_context *ctx, gr_op op, gr_dtype t, int override);
/* The result of a reduction of n elements of in_dtype whose combined accumulator is at acc_value. */
gr_result gr_op_result(gr_op op, const void *acc_value, gr_dtype acc, gr_dtype in_dtype, size_t n);
/* The result of an empty reduction: the identity (GR_OK) or GR_EEMPTY with a message. */
gr_status gr_op_empty_result(gr_context *ctx, gr_op op, gr_dtype in_dtype, gr_dtype acc, gr_result *out);

#endif
