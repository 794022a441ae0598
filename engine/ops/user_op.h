/*
 * user_op.h -- a user operator as the host knows it (user_op.c): its fields, its accumulator's dtype,
 * its identity where the host can read it, and its lifetime. gr.h's gr_operator is this structure.
 *
 * engine/user/operator.c checks a spec and makes an operator of it (gr_operator_create), then compiles
 * it; the reduction paths read it here (core/operator_cpu.c runs its cpu functions, core/segments.c
 * asks its results' dtype), so that they need nothing of engine/user/.
 */
#ifndef GR_USER_OP_H
#define GR_USER_OP_H

#include "gr.h"

/* The loaded image of an operator of several inputs for one tuple of dtypes (with segments or not). */
typedef struct gr_op_ready {
    int segments;
    gr_dtype dtypes[GR_OPERATOR_INPUTS];
    gr_image *img;
    struct gr_op_ready *next;
} gr_op_ready;

struct gr_operator {
    gr_operator_spec spec;          /* the operator's own copies; post and preamble may be NULL */
    int acc_dtype;                  /* a gr_dtype, or -1 for a struct of the preamble */
    int indexed;                    /* map uses i */
    /* per input dtype, the image whose kernels are loaded (user/operator.c's gr_operator_prepare), and
     * the cache that holds it: a reduction finds its kernels here without generating the source or
     * hashing the key */
    gr_image *ready[2][GR_DTYPE_COUNT];     /* [1]: the images with gr_op_segments */
    gr_op_ready *ready_inputs;              /* several inputs: per tuple of dtypes, a list */
    const gr_operator_cache *ready_in;
    /* the caller's handle, and one per reduction running its cpu functions (operator_cpu.c), which may
     * free the caller's: the operator goes with the last (gr_operator_free) */
    int refs;
};

/* An operator of a checked spec (its strings copied) and its accumulator's dtype (-1: a struct), with
 * one reference, the caller's; GR_ENOMEM (with the message) when a copy cannot be made. */
gr_status gr_user_op_new(gr_context *ctx, const gr_operator_spec *spec, int acc_dtype, gr_operator **out);

/* One more reference on op, let go by gr_operator_free. */
void gr_operator_hold(gr_operator *op);

#endif
