/*
 * image.h -- a compiled image's kernels on a device (image.c): loaded into the device's context, launched
 * for a pass or for segments, and their results read back. The image itself -- bytes compiled from a
 * generated source through the caches -- is jit/compile.h's; the sources are engine/user/'s (a user
 * operator's, operator_source.c; a user kernel's, kernel_source.c), and both give the kernels below.
 *
 * The kernels of a generated source, by their extern "C" names (Acc is the accumulator, In the input
 * dtype's type):
 *   gr_op_main(const In *in, size_t n, Acc *partials, unsigned *counter, Acc *final_out,
 *              unsigned long long first)
 *       one pass over elements, like the catalogue's kernels: one partial per block, or with final_out
 *       set the last block combines them and writes final_out (engine/base/launch.h says how).
 *   gr_op_partials(const Acc *in, size_t n, Acc *partials, unsigned *counter, Acc *final_out)
 *       the same over accumulators (the passes after the first).
 *   gr_op_post(const Acc *acc, unsigned long long n, void *out)
 *       one thread: post's value of *acc and the element count n, as 8 bytes at out in the kind
 *       gr_operator_compile_info.result_kind says: a double (GR_SCALAR_FLOAT), a long long
 *       (GR_SCALAR_INT), an unsigned long long (GR_SCALAR_UINT), or 0 / 1 as unsigned long long
 *       (GR_SCALAR_BOOL). Without post the value is the accumulator itself.
 *   gr_op_segments(gr::SegArgs a, int g, int splits, Acc *partials, unsigned *counters)
 *       cuda/device/segmented.cuh's body over a gr_seg_launch's segments or items (the arguments in the
 *       order segmented.cu passes them), writing result s at out0 as gr_operator_segment_dtype says, and
 *       with out1 set (reduce_many, an operator with post) post's value as gr_op_post writes it, at
 *       out1 + 8 s.
 *   gr_op_check(unsigned *flags)
 *       one block of 32 threads: for value k of gr_operator_check_values, flags[k] gets bit 0 when
 *       reduce(identity, map(v)) is not map(v) byte for byte, bit 1 when reduce(map(v), identity) is not.
 * and the device constants gr_op_acc_size, gr_op_acc_align and gr_op_result_kind, which the compile
 * reads from the image into gr_operator_compile_info.
 */
#ifndef GR_IMAGE_H
#define GR_IMAGE_H

#include "core/plan.h"
#include "jit/compile.h"

#define GR_OP_KERNEL_MAIN "gr_op_main"
#define GR_OP_KERNEL_PARTIALS "gr_op_partials"
#define GR_OP_KERNEL_POST "gr_op_post"
#define GR_OP_KERNEL_CHECK "gr_op_check"
#define GR_OP_KERNEL_SEGMENTS "gr_op_segments"

struct gr_launch;
struct gr_seg_launch;

/* The image's kernels, loading its module into ctx's device's context on first use (the cuda backend
 * only: GR_ENODEV otherwise); gr_op_segments only where img->has_segments. ctx's device must be the
 * current one (gr_ctx_enter, gr_ctx_for). They stay loaded as long as the cache holds the image. */
gr_status gr_image_load(gr_context *ctx, gr_image *img, const gr_image_kernels **out);

/* The image's kernels on ctx's device (the current one): img itself where they were loaded there, else
 * a copy whose kernels are loaded on that device on first use (a sharded reduction runs an operator on every shard's
 * device). The copy lives as long as img. */
gr_status gr_image_on(gr_context *ctx, const gr_image *img, const gr_image **out);

/* Queues one pass: gr_op_main over elements, gr_op_partials over the accumulators of an earlier pass
 * (L->partials_in). 0 or a CUDA error code, like a variant's launcher. */
int gr_image_launch(struct gr_launch *L, const gr_image *img);
/* Queues a segmented reduction (segments.c's launch) with the image's gr_op_segments. */
int gr_image_launch_segments(struct gr_seg_launch *L, const gr_image *img);

/* The result of a reduction of n elements whose combined accumulator is at acc (pinned memory the
 * device can read): the accumulator itself where the operator has no post, else post's value, computed
 * on the device (post_out: 8 bytes of pinned memory). */
gr_status gr_image_result(gr_context *ctx, const gr_image *img, const void *acc, size_t n, void *post_out,
                          void *stream, gr_result *out);
/* Item i of a reduce_many launch with gr_image_launch_segments: the accumulator at out0 (no post), or
 * post's value in its kind at out1 (8 bytes each), as gr_image_result gives it. */
gr_result gr_image_item_result(const gr_image *img, const void *out0, const void *out1, size_t i);

/* The images' kernel behind the planner's interface (plan.h): the passes of run->image, the result and
 * the segments of run->user (a user operator's, or NULL for a user kernel with a built-in op, whose
 * result is the op's). No host form. */
extern const gr_pass_kernel gr_image_pass;

#endif
