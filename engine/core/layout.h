/*
 * layout.h -- the shape and strides of a buffer handle (layout.c): compact layouts, the compactness
 * test, and the host's walk over a strided view in row-major order. Data only: no memory is allocated,
 * nothing is queued.
 */
#ifndef GR_LAYOUT_H
#define GR_LAYOUT_H

#include "core/handles.h"
#include "base/device.h"

/* b gets the compact (row-major) layout of shape[0..ndim); b->n is set to the product. */
void gr_layout_compact(gr_buffer *b, int ndim, const size_t *shape);
/* 1 when the element count of shape[0..ndim) is at most SIZE_MAX; *n gets it */
int gr_layout_count(int ndim, const size_t *shape, size_t *n);
/* The permutation that puts the axes not in the mask `axes` first, in order, then the reduced ones (into
 * perm[0..ndim)): each row of the compact permuted view is one result's elements, the results in the kept
 * axes' row-major order. *row gets the reduced axes' element count, *kept the kept ones'. */
void gr_layout_reduced_last(const gr_buffer *b, unsigned axes, int *perm, size_t *row, size_t *kept);
/* b's layout as the device's strided kernel takes it */
gr_dev_layout gr_layout_for_device(const gr_buffer *b);
/* count elements of view b from its row-major index first, between base (b's element 0, host memory) and
 * compact (host memory): gather copies into compact, else compact is scattered into the view. */
void gr_layout_move_host(char *base, const gr_buffer *b, size_t first, size_t count, char *compact, int gather);

#endif
