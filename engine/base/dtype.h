/*
 * dtype.h -- the engine's own facts of a dtype, beyond those gr.h declares (dtype.c; all columns of
 * GR_DTYPE_LIST in lists.h).
 */
#ifndef GR_DTYPE_H
#define GR_DTYPE_H

#include "gr.h"

/* The float dtype t's float accumulations take by default: t itself for float32 and float64, float64
 * for the integers. */
gr_dtype gr_dtype_float_acc(gr_dtype t);
/* NCCL's ncclDataType_t for t, -1 where NCCL has none. */
int gr_dtype_nccl(gr_dtype t);
/* Whether t's elements read as booleans (the BOOL kind of lists.h: one byte, 0 or 1). */
int gr_dtype_is_bool(gr_dtype t);

/* The shortest decimal form that reads back as the same double, marked as a float ("-1.0", "1e+39"):
 * how a value that does not fit a dtype is named in the message ("1e+39 does not fit in float32"). */
void gr_format_float(char *v, size_t len, double d);
/* A scalar of any kind as the messages name it: a float as gr_format_float, integers in decimal, a bool
 * as true or false. */
void gr_format_scalar(char *v, size_t len, gr_scalar s);

/* The engine's own writer of an element, gr_scalar_load's counterpart without gr_scalar_store's checks:
 * for the values the engine makes itself (accumulators, generated contents). The scalar is taken to t's
 * kind -- an integer as its 64 bits (so a narrower dtype keeps the low ones: wrapping), a number as a
 * double for a float dtype -- and the element is a C cast of that. A float scalar into an integer dtype
 * must be a whole number that fits. */
void gr_scalar_put(void *p, gr_dtype t, gr_scalar s);

#endif
