/*
 * compile.h -- text in, image out, through the caches (compile.c): a generated source compiled by NVRTC,
 * or found in the cache's memory or on disk; the image's constants read from its bytes.
 *
 * An image is what gr.h calls gr_image: the compiled kernels of one generated source (a user operator's,
 * or a user kernel's: engine/user/) for one input dtype and architecture, owned by its cache. It is bytes
 * here; core/image.c loads it on a device and launches its kernels (their names and arguments are
 * core/image.h's), and the image keeps what was loaded so that it goes with the image.
 */
#ifndef GR_COMPILE_H
#define GR_COMPILE_H

#include "gr.h"

struct gr_kcache_mem;

/* An image's kernels once loaded into a device's context (core/image.c fills them). */
typedef struct gr_image_kernels {
    void *module;                   /* NULL until loaded */
    void *main, *partials, *post, *check, *segments;
} gr_image_kernels;

struct gr_image {
    void *image;                    /* CUBIN, or PTX text with its NUL */
    size_t size;
    int ptx, arch;
    gr_dtype in;
    size_t acc_size, acc_align;     /* read from the image's constants */
    int result_kind;                /* a gr_scalar kind, from the image's constants */
    double nvrtc_ms;                /* NVRTC's time, when this process compiled it; else 0 */
    /* what it computes, said by whoever prepared it (engine/user/): */
    int has_post;                   /* a user operator's post runs on the device (gr_op_post) */
    int has_segments;               /* its source has gr_op_segments */
    int acc_dtype;                  /* a gr_dtype, or -1 for a struct */
    int inputs;                     /* the inputs its kernels read (user/operator.c; 0 or 1: one, the
                                     * kernels of image.h; more: inputs.cuh's, which take gr::InputPtrs) */
    int variant, op;                /* a user kernel's registry index and built-in op (-1: a user operator's
                                     * functor); -1 and -1 for an operator's own image */
    int fused_count;                /* several built-in ops fused (user/fused_source.c): how many, which, and */
    int fused_ops[GR_OP_COUNT];     /* each one's accumulator dtype, in the tuple's order; 0 otherwise */
    int fused_acc[GR_OP_COUNT];
    /* loaded (core/image.c): on `device`, and copies of this image loaded on other devices, a list this
     * one owns; unloaded with the cache */
    gr_image_kernels kernels;
    int device;
    struct gr_image *elsewhere;
};

/* The image of a generated source for input dtype `in` and compute capability arch: from the cache's
 * memory, else the disk cache, else NVRTC (then stored in both). `what` names the source in messages
 * ("operator l2 over float64 elements"); a compile error in a user's text is said in its terms
 * (compile_log.h) and NVRTC's whole log stays in the cache (gr_operator_cache_log). The compile's facts
 * go to *info (NULL: not wanted). GR_ENODEV without NVRTC. */
gr_status gr_image_compile(gr_context *ctx, gr_operator_cache *cache, const char *source, gr_dtype in, int arch,
                           const char *what, gr_image **out, gr_operator_compile_info *info);

/* A map of the cache's that callers may key as they like (values not owned): user/kernel.c remembers
 * there which image serves a user kernel for an op and dtype. */
struct gr_kcache_mem *gr_operator_cache_memo(gr_operator_cache *c);

#endif
