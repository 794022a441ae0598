/*
 * operator.h -- user operators (operator.c): what the rest of engine/user/ needs of an operator's
 * images besides gr.h's entry points. The operator itself is ops/user_op.h's; its source is
 * operator_source.h's; its image is jit/compile.h's, loaded and launched by core/image.h.
 */
#ifndef GR_OPERATOR_H
#define GR_OPERATOR_H

#include "gr.h"

/* GR_OK when what the image says of op's accumulator and result is what the host derives from the
 * declared types (a dtype), or is sane (a struct); else the failure. `what` names the image. */
gr_status gr_operator_check_image(gr_context *ctx, const gr_operator *op, const gr_image *img, const char *what);

#endif
