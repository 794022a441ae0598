/*
 * operator.h -- user operators (operator.c): the structures behind gr.h's operator handles, and what
 * the engine's reduction paths need of a compiled operator: its kernels, loaded on the device.
 *
 * An operator is C expressions (gr_operator_spec). For each input dtype, gr_operator_source writes a
 * whole NVRTC translation unit from them and the NVRTC-clean headers (docs/architecture.md, "User
 * operators", shows one); gr_operator_compile turns it into an image through the caches (kcache.h)
 * and NVRTC (nvrtc.h); gr_operator_load makes its kernels callable with gr_dev_launch.
 */
#ifndef GR_OPERATOR_H
#define GR_OPERATOR_H

#include "gr.h"

struct gr_operator {
    gr_operator_spec spec;          /* the operator's own copies; post and preamble may be NULL */
    int acc_dtype;                  /* a gr_dtype, or -1 for a struct of the preamble */
    int indexed;                    /* map uses i */
    gr_operator_compile_info last;  /* the operator's last gr_operator_compile */
    /* per input dtype, the image whose kernels are loaded (operator_run.c), and the cache that holds
     * it: a reduction finds its kernels here without generating the source or hashing the key */
    gr_operator_image *ready[2][GR_DTYPE_COUNT];   /* [1]: the images with gr_op_segments */
    const gr_operator_cache *ready_in;
    /* the caller's handle, and one per reduction running its cpu functions (operator_cpu.c), which may
     * free the caller's: the operator goes with the last (gr_operator_free) */
    int refs;
};

/* One more reference on op, let go by gr_operator_free. */
void gr_operator_hold(gr_operator *op);

/* The kernels of a generated source, by their extern "C" names (the source's layout is operator.c's;
 * Acc is the accumulator, In the input dtype's type):
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
 *       cuda/device/segmented.cuh's body over a gr_seg_launch's segments or items (the arguments in the order
 *       segmented.cu passes them), writing result s at out0 as gr_operator_segment_dtype says, and with
 *       out1 set (reduce_many, an operator with post) post's value as gr_op_post writes it, at out1 + 8 s.
 *   gr_op_check(unsigned *flags)
 *       one block of 32 threads: for value k of gr_operator_check_values, flags[k] gets bit 0 when
 *       reduce(identity, map(v)) is not map(v) byte for byte, bit 1 when reduce(map(v), identity) is not.
 * and the device constants gr_op_acc_size, gr_op_acc_align and gr_op_result_kind, which the compile
 * reads from the image into gr_operator_compile_info. */
#define GR_OP_KERNEL_MAIN "gr_op_main"
#define GR_OP_KERNEL_PARTIALS "gr_op_partials"
#define GR_OP_KERNEL_POST "gr_op_post"
#define GR_OP_KERNEL_CHECK "gr_op_check"
#define GR_OP_KERNEL_SEGMENTS "gr_op_segments"

typedef struct gr_operator_kernels {
    void *module;                   /* NULL until loaded */
    void *main, *partials, *post, *check, *segments;
} gr_operator_kernels;

struct gr_operator_image {
    void *image;                    /* CUBIN, or PTX text with its NUL */
    size_t size;
    int ptx, arch;
    gr_dtype in;
    size_t acc_size, acc_align;
    int result_kind;                /* a gr_scalar kind */
    double nvrtc_ms;                /* NVRTC's time, when this process compiled it; else 0 */
    gr_operator_kernels kernels;    /* loaded on first use; unloaded with the cache */
    int device;                     /* the CUDA ordinal whose context holds kernels.module */
    /* copies of this image loaded on other devices (gr_operator_image_on), a list owned by this one */
    struct gr_operator_image *elsewhere;
    /* set by gr_operator_prepare from the operator (its source, and so this image, says the same) */
    int has_post;
    int has_segments;               /* its source has gr_op_segments (gr_operator_prepare_segments) */
    int acc_dtype;                  /* a gr_dtype, or -1 for a struct */
    /* set by gr_kernel_prepare for a user kernel's image (kernel.c): its registry index, and the
     * built-in op it reduces with (-1: a user operator's functor); -1 and -1 for an operator's own */
    int variant, op;
};

struct gr_text;
/* The parts of an operator's generated source around its gr_op_main and gr_op_partials, for a user
 * kernel that runs the operator (kernel_source.c): the head -- headers, preamble, the fields' functions,
 * the functor gr_op_functor over gr_op_in and gr_op_acc -- and the tail -- gr_op_post, gr_op_check and
 * the image's constants. */
gr_status gr_operator_source_head(gr_context *ctx, const gr_operator *op, gr_dtype in, struct gr_text *t);
void gr_operator_source_tail(struct gr_text *t, gr_dtype in);

/* The image of a generated source (an operator's, or a user kernel's: kernel_source.c) for input dtype
 * `in` and compute capability arch: from the cache's memory, else the disk cache, else NVRTC (then
 * stored in both). `what` names the source in messages ("operator l2 over float64 elements"); a compile
 * error in a user's text is said in its terms (compile_log.h). The compile's facts go to
 * *info and to the cache's last. GR_ENODEV without NVRTC. */
gr_status gr_image_compile(gr_context *ctx, gr_operator_cache *cache, const char *source, gr_dtype in, int arch,
                           const char *what, gr_operator_image **out, gr_operator_compile_info *info);
/* GR_OK when what the image says of op's accumulator and result is what the host derives from the
 * declared types (a dtype), or is sane (a struct); else the failure. `what` names the image. */
gr_status gr_operator_check_image(gr_context *ctx, const gr_operator *op, const gr_operator_image *img,
                                  const char *what);
/* A map of the cache's that users may key as they like (values not owned): kernel.c remembers there
 * which image serves a user kernel for an op and dtype. */
struct gr_kcache_mem *gr_operator_cache_memo(gr_operator_cache *c);

/* gr_operator_source's text, with gr_op_segments after the rest when `segments` is set: a second image
 * per dtype, compiled on the first segmented reduction, so that whole-buffer ones compile no more. */
gr_status gr_operator_source_part(gr_context *ctx, const gr_operator *op, gr_dtype in, int segments, char **out);

/* Whether s is empty or only white space (the spec's checks and the generated source share it). */
int gr_operator_is_blank(const char *s);

/* The image's kernels, loading its module into the device's context on first use (cuda backend only:
 * GR_ENODEV otherwise). They stay loaded as long as the cache holds the image. */
gr_status gr_operator_load(gr_context *ctx, gr_operator_image *img, const gr_operator_kernels **out);

/* The image's kernels on ctx's device: img itself where they were loaded there, else a copy whose
 * kernels are loaded on that device on first use (a sharded reduction runs an operator on every shard's
 * device). The copy lives as long as img. */
gr_status gr_operator_image_on(gr_context *ctx, const gr_operator_image *img, const gr_operator_image **out);

/* ---- reductions with an operator (operator_run.c) ------------------------------------------------- */


/* Item i of a reduce_many launch with gr_operator_launch_segments: the accumulator at out0 (no post), or
 * post's value in its kind at out1 (8 bytes each), as gr_operator_result gives it. */
gr_result gr_operator_item_result(const gr_operator_image *img, const void *out0, const void *out1, size_t i);

struct gr_launch;
struct gr_seg_launch;
/* Queues a segmented reduction (segments.c's launch) with the operator's gr_op_segments. */
int gr_operator_launch_segments(struct gr_seg_launch *L, const gr_operator_image *img);
/* Queues one pass of a plan with a user operator: gr_op_main over elements, gr_op_partials over the
 * accumulators of an earlier pass. 0 or a CUDA error code, like a variant's launcher. */
int gr_operator_launch(struct gr_launch *L, const gr_operator_image *img);
/* The result of a reduction of n elements whose combined accumulator is at acc (pinned memory the
 * device can read): the accumulator itself where the operator has no post, else post's value, computed
 * on the device (post_out: 8 bytes of pinned memory). */
gr_status gr_operator_result(gr_context *ctx, const gr_operator_image *img, const void *acc, size_t n,
                             void *post_out, void *stream, gr_result *out);

#endif
