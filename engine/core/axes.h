/*
 * axes.h -- what other parts of the core need of axes.c's choice of kernel for a reduction along axes.
 */
#ifndef GR_AXES_H
#define GR_AXES_H

#include "core/handles.h"

#include <stddef.h>

/* The reduced length R where b's reduction along `axes` (a mask within b's ndim) reads rows of b itself,
 * R elements apart, one contiguous run per output: the layout gr_reduce_axes gives the segmented kernel
 * for the ops whose rows gr_policy_rows_segmented takes. 0 for every other layout (columns, a regrouped
 * copy, rows at another pitch). */
size_t gr_axes_own_rows(const gr_buffer *b, unsigned axes);

#endif
