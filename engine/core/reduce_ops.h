/*
 * reduce_ops.h -- several built-in ops over one buffer (reduce_ops.c; the entry point, gr_reduce_ops, is
 * in gr.h): where each op's accumulator lies in a fused image's tuple (user/fused_source.c makes it), and
 * the ops started together.
 */
#ifndef GR_REDUCE_OPS_H
#define GR_REDUCE_OPS_H

#include "jit/compile.h"

/* Whether op over `in` is planned (auto, device data) with the variant whose shape a fused image has (the
 * operator's): then its single kernel folds as the fused one does, and only then may the tuple answer it
 * (mean over FP8 runs on warp_shuffle where sum runs on pipelined: the same functor, another order). */
int gr_fused_takes(gr_op op, gr_dtype in);
/* The op whose functor op's single kernel folds with, for elements of dtype `in` (mean: sum's; std:
 * var's; an integer's nansum, nanmin, nanmax: sum's, min's, max's): ops of one fold op share a slot. */
gr_op gr_fused_fold_op(gr_op op, gr_dtype in);
/* The byte offset of the k-th op's accumulator in fused image img's tuple (k = img->fused_count: the
 * tuple's size): each slot is its op's accumulator size rounded up to 16 bytes. */
size_t gr_fused_offset(const gr_image *img, int k);
/* The slot of img's tuple that answers op over `in` with accumulator dtype acc (what its single call takes:
 * gr_op_acc_dtype), -1 where none does: that of its fold op in that dtype, for an op gr_fused_takes. */
int gr_fused_slot(const gr_image *img, gr_op op, gr_dtype in, int acc);
/* A segmented fused image's result writers (user/fused_source.c writes them, core/ops_rows.c fills their
 * table): writer k writes op's results from slot `slot` of the tuple. */
typedef struct gr_fused_writer {
    gr_op op;
    int slot;
} gr_fused_writer;
/* At most this many writers: 8 slots of at most 3 ops each (sum's: sum, mean and an integer's nansum). */
#define GR_FUSED_WRITERS 24
/* The writers of an image whose slots fold slot_ops[0..m) over elements of `in`: for each slot in order, each
 * op in gr.h's order that gr_fused_takes and folds with the slot's op (gr_fused_fold_op), whatever its
 * accumulator (gr_fused_slot says which slot answers an op). Returns how many (at most GR_FUSED_WRITERS). */
int gr_fused_writers(const gr_op *slot_ops, int m, gr_dtype in, gr_fused_writer *w);
/* The writer of img (a segmented fused image) that writes op's results from slot j; -1 where none does. */
int gr_fused_writer_of(const gr_image *img, gr_op op, int j);
/* The ops list of gr_reduce_ops and its kin: 1 to GR_OP_COUNT distinct built-in ops, no user operator;
 * errors name "ops". */
gr_status gr_ops_check(gr_context *ctx, const gr_options *o, const gr_op *ops, int count);
/* o for a pass of the fused image: planned as a user operator's pass is, with o's determinism and stream,
 * so that its variant, block, grid and finish are each op's own auto plan's. */
gr_options gr_fused_options(const gr_options *o, const gr_image *fused);

#endif
