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

#endif
