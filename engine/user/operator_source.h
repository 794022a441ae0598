/*
 * operator_source.h -- the CUDA source generated for a user operator (operator_source.c), whole or in
 * the parts a user kernel that runs the operator wraps (kernel_source.c).
 */
#ifndef GR_OPERATOR_SOURCE_H
#define GR_OPERATOR_SOURCE_H

#include "gr.h"

struct gr_text;
/* The parts of an operator's generated source around its gr_op_main and gr_op_partials, for a user
 * kernel that runs the operator (kernel_source.c): the head -- headers, preamble, the fields' functions,
 * the functor gr_op_functor over gr_op_in and gr_op_acc -- and the tail -- gr_op_post, gr_op_check and
 * the image's constants. */
gr_status gr_operator_source_head(gr_context *ctx, const gr_operator *op, gr_dtype in, struct gr_text *t);
void gr_operator_source_tail(struct gr_text *t, gr_dtype in);

/* gr_operator_source_inputs's text, with gr_op_segments after the rest when `segments` is set: a second image
 * per dtype, compiled on the first segmented reduction, so that whole-buffer ones compile no more. */
gr_status gr_operator_source_part(gr_context *ctx, const gr_operator *op, const gr_input_dtypes *in, int segments,
                                  char **out);

/* Whether s is empty or only white space (the spec's checks and the generated source share it). */
int gr_operator_is_blank(const char *s);

#endif
