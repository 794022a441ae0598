/*
 * policy.h -- every automatic choice of the engine, in one place (policy.c): what "auto" means for the
 * variant, the block size, the finish, the hybrid threshold, host staging and streamed host data.
 */
#ifndef GR_POLICY_H
#define GR_POLICY_H

#include "core/handles.h"

/* The variant auto runs for n elements of dtype t in memory of kind `where`, for op. */
int gr_policy_variant(const gr_context *ctx, gr_where where, gr_dtype t, gr_op op, size_t n);
/* The variant whose kernel shape a user operator's generated kernels take for elements of dtype t. */
int gr_policy_operator_variant(gr_dtype t);
/* The variant that reduces each chunk of streamed host data once it is on the device. */
int gr_policy_streamed_variant(gr_dtype t, gr_op op);
/* Threads per block: `requested` if the caller gave one, else the variant's default, or more for a
 * large input when auto chose the variant. */
int gr_policy_block(const gr_variant *v, int requested, int auto_variant, size_t bytes);
/* The finishing mode: `requested` unless it is auto. */
gr_finish gr_policy_finish(const gr_variant *v, gr_finish requested, int auto_variant);
/* hybrid: at or below this many partials, the CPU finishes. */
size_t gr_policy_hybrid_threshold(size_t requested);
/* A host variant over device memory copies it to pinned memory in pieces of this many bytes. */
size_t gr_policy_stage_bytes(void);
/* How a segmented reduction shares its segments out (cuda/kernels/segmented.cu): `group` lanes per segment, or
 * with group 0 whole blocks, `splits` of them per segment; `block` threads per block, `grid` blocks. */
typedef struct gr_seg_shape {
    int group, block, splits;
    size_t grid;
} gr_seg_shape;
/* The shape for k segments of n elements in all (their mean size n / k) of es bytes each. */
gr_seg_shape gr_policy_segments(const gr_context *ctx, size_t n, size_t k, size_t es);
/* The shape for k segments of n elements whose longest has `longest` elements: `even` (the shape chosen
 * from the mean) unless the longest is far above the mean, then blocks per segment. */
gr_seg_shape gr_policy_uneven_segments(const gr_context *ctx, size_t n, size_t k, size_t longest, size_t es,
                                       const gr_seg_shape *even);
/* Whether the ops a reduction by key of n values (keys whose range takes range_bits bits; 0 where the keys
 * came sorted and were not measured) can run as one pass over runs of keys do so, skipping the grouping
 * into offsets. */
int gr_policy_by_runs_alone(size_t n, int range_bits);
/* The shape for k rows of `row` elements of es bytes of an axis reduction: lanes, block and splits from
 * the row's length alone (batch invariance), the grid from k. */
gr_seg_shape gr_policy_axis_rows(const gr_context *ctx, size_t row, size_t k, size_t es);
/* Whether rows of `row` elements of es bytes along a contiguous axis go to the segmented kernel (1) or
 * the column kernel (0) for built-in op `op`: from the row alone (batch invariance). */
int gr_policy_rows_segmented(size_t row, size_t es, gr_op op);
/* The most blocks of one launch of the column kernel. */
size_t gr_policy_column_grid(const gr_context *ctx);
/* reduce_many: a buffer of more bytes than this is reduced on its own, not as one block's item. */
size_t gr_policy_many_item_bytes(void);

/* Streamed host data: bytes per chunk and streams, from the caller's values (0 = the default). */
size_t gr_policy_chunk_bytes(size_t requested);
int gr_policy_streams(int requested);

#endif
