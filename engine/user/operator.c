/*
 * operator.c -- user operators: the spec checked and the operator made of it (ops/user_op.c keeps it),
 * its images compiled through the kernel caches (jit/compile.c) from operator_source.c's source and
 * checked against what the host derives of its types, prepared per input dtype for the reductions
 * (loaded by core/image.c and remembered on the operator), and its identity checked on the GPU.
 *
 * The generated source (gr_operator_source; docs/architecture.md shows one) includes the NVRTC-clean
 * headers, then the preamble, then one function per expression, each expression on lines of its own
 * after a `#line 1 "<field>"` directive and followed by `#line N "generated"`: NVRTC then reports an
 * error in a field as "map(1): error: ...", which compile_log.c rewrites as "map: 1:5: ...". A functor
 * over those functions has the shape of cuda/device/ops.cuh's, so the kernels are the catalogue's pieces
 * (thread_accumulate, block_reduce, epilogue) instantiated for it.
 */
#include "user/operator.h"
#include "base/device.h"
#include "base/dtype.h"
#include "base/error.h"
#include "core/context.h"
#include "core/image.h"
#include "jit/compile.h"
#include "jit/source_text.h"
#include "jit/user_text.h"
#include "ops/ops.h"
#include "ops/user_op.h"
#include "user/operator_source.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the spec -------------------------------------------------------------------------------------- */

/* C's own names of arithmetic types: an acc spelt this way gets a hint toward the dtype names. */
static const char *const c_type_words[] = {"char", "short", "int", "long", "float", "double", "bool",
                                           "signed", "unsigned", "void", "half", "size_t", NULL};

static gr_status check_expression(gr_context *ctx, const char *field, const char *text, const char *what) {
    if (!text) return gr_fail_arg(ctx, GR_EINVAL, field, "is required (%s)", what);
    if (gr_operator_is_blank(text)) return gr_fail_arg(ctx, GR_EINVAL, field, "is empty (expected %s)", what);
    return gr_user_text_check(ctx, field, text, GR_TEXT_EXPRESSION);
}

/* The accumulator: a dtype, or a struct the preamble declares. */
static gr_status check_acc(gr_context *ctx, const gr_operator_spec *spec, int *dtype) {
    const char *acc = spec->acc;
    *dtype = -1;
    if (!acc || gr_operator_is_blank(acc))
        return gr_fail_arg(ctx, GR_EINVAL, "acc", "is %s (expected a dtype: %s; or the name of a struct "
                           "declared in the preamble)", acc ? "empty" : "required", gr_dtype_names());
    int t = gr_dtype_from_name(acc);
    if (t >= 0) {
        *dtype = t;
        return GR_OK;
    }
    for (int k = 0; c_type_words[k]; k++)
        if (strncmp(acc, c_type_words[k], strlen(c_type_words[k])) == 0 &&
            !gr_is_ident_char(acc[strlen(c_type_words[k])]))
            return gr_fail_arg(ctx, GR_EINVAL, "acc", "'%s' is a C type: name it by its dtype (%s)", acc,
                               gr_dtype_names());
    if (!gr_is_identifier(acc) || strlen(acc) > GR_NAME_MAX)
        return gr_fail_arg(ctx, GR_EINVAL, "acc", "unknown accumulator '%.80s%s': neither a dtype (%s) nor the "
                           "name of a struct (a C name of at most %d characters)", acc, strlen(acc) > 80 ? "..." : "",
                           gr_dtype_names(), GR_NAME_MAX);
    gr_status st = gr_user_name_check(ctx, "acc", acc, "a struct's name");
    if (st != GR_OK) return st;
    if (!spec->preamble || !gr_source_has_token(spec->preamble, acc, 0))
        return gr_fail_arg(ctx, GR_EINVAL, "acc", "unknown accumulator '%s': neither a dtype (%s) nor a struct "
                           "declared in the preamble", acc, gr_dtype_names());
    if (!spec->post)
        return gr_fail_arg(ctx, GR_EINVAL, "post", "is required when acc is a struct (%s): a struct cannot be "
                           "a result, post makes a number of it", acc);
    return GR_OK;
}

static gr_status check_spec(gr_context *ctx, const gr_operator_spec *spec, int *acc_dtype) {
    if (!spec) return gr_fail_arg(ctx, GR_EINVAL, "spec", "is NULL");
    gr_status st = gr_check_name(ctx, spec->name);
    if (st == GR_OK) st = check_expression(ctx, "map", spec->map, "a C expression over x and i");
    if (st == GR_OK) st = check_expression(ctx, "reduce", spec->reduce, "a C expression over a and b");
    if (st == GR_OK) st = check_expression(ctx, "identity", spec->identity, "a C initializer of the accumulator");
    if (st == GR_OK && spec->post) st = check_expression(ctx, "post", spec->post, "a C expression over a and n");
    if (st == GR_OK && spec->preamble) st = gr_user_text_check(ctx, "preamble", spec->preamble, GR_TEXT_PREAMBLE);
    if (st == GR_OK) st = check_acc(ctx, spec, acc_dtype);
    return st;
}

gr_status gr_operator_create(gr_context *ctx, const gr_operator_spec *spec, gr_operator **out) {
    *out = NULL;
    int acc_dtype;
    gr_status st = check_spec(ctx, spec, &acc_dtype);
    if (st == GR_OK) st = gr_user_op_new(ctx, spec, acc_dtype, out);
    if (st == GR_OK) (*out)->indexed = gr_source_has_token((*out)->spec.map, "i", 1);
    return st;
}


/* What the host believes of an operator's image. A dtype accumulator's size and alignment are its
 * dtype's, and without post the result's kind follows the dtype (as gr_op_kind_of says on the device):
 * derived here, the image must agree. A struct's layout and post's kind are the image's own -- no field
 * can reach the constants that say them (user_text.h: no directive, no gr_ name, no asm) -- and must be
 * sane: a whole number of 32-bit words within GR_ACC_MAX, aligned to a power of two that divides it. An
 * image that says otherwise is not this operator's (a damaged or forged cache file): refused. */
gr_status gr_operator_check_image(gr_context *ctx, const gr_operator *op, const gr_image *img,
                                  const char *what) {
    size_t size = img->acc_size, align = img->acc_align;
    if (op->acc_dtype >= 0) {
        gr_dtype t = (gr_dtype)op->acc_dtype;
        size_t want = gr_dtype_size(t);
        int kind = gr_dtype_is_float(t) ? GR_SCALAR_FLOAT : gr_dtype_is_signed(t) ? GR_SCALAR_INT : GR_SCALAR_UINT;
        if (size == want && align == want && (op->spec.post || img->result_kind == kind)) return GR_OK;
        return gr_fail(ctx, GR_ECUDA, "%s: the image's accumulator has %zu bytes aligned to %zu%s, where %s has "
                       "%zu: the image is not this operator's (a forged file in the kernel cache?)", what, size, align,
                       op->spec.post || img->result_kind == kind ? "" : " and another result kind",
                       gr_dtype_name(t), want);
    }
    if (size > GR_ACC_MAX)
        return gr_fail_arg(ctx, GR_EINVAL, "acc", "operator %s: an accumulator of %zu bytes is over the %d a "
                           "reduction keeps", op->spec.name, size, GR_ACC_MAX);
    if (size < 4 || size % 4 || align == 0 || (align & (align - 1)) || size % align)
        return gr_fail(ctx, GR_ECUDA, "%s: the image's accumulator struct has %zu bytes aligned to %zu, which no "
                       "struct that compiled can have: the image is not this operator's (a forged file in the kernel "
                       "cache?)", what, size, align);
    return GR_OK;
}

/* ---- compiling and preparing ---------------------------------------------------------------------- */

/* The image of the whole-buffer kernels, or with segments set of those and gr_op_segments. */
static gr_status compile_part(gr_context *ctx, gr_operator_cache *cache, gr_operator *op, gr_dtype in, int arch,
                              int segments, gr_image **out, gr_operator_compile_info *info) {
    *out = NULL;
    char *source;
    gr_status st = gr_operator_source_part(ctx, op, in, segments, &source);
    if (st != GR_OK) return st;
    char what[128];
    snprintf(what, sizeof what, "operator %s over %s elements", op->spec.name, gr_dtype_name(in));
    st = gr_image_compile(ctx, cache, source, in, arch, what, out, info);
    free(source);
    if (st == GR_OK) st = gr_operator_check_image(ctx, op, *out, what);
    return st;
}

gr_status gr_operator_compile(gr_context *ctx, gr_operator_cache *cache, gr_operator *op, gr_dtype in, int arch,
                              gr_image **out, gr_operator_compile_info *info) {
    return compile_part(ctx, cache, op, in, arch, 0, out, info);
}

static gr_status prepare_part(gr_context *ctx, gr_operator_cache *cache, gr_operator *op, gr_dtype in, int segments,
                              const gr_image **out) {
    *out = NULL;
    ctx = gr_ctx_enter(ctx);    /* the operator's modules live on the context's own device */
    if ((unsigned)in >= GR_DTYPE_COUNT) return gr_fail_arg(ctx, GR_EINVAL, "dtype", "unknown dtype");
    if (op->ready_in == cache && op->ready[segments][in]) {
        *out = op->ready[segments][in];
        return GR_OK;
    }
    gr_device_info info;
    gr_status st = gr_device_info_get(ctx, &info);
    if (st != GR_OK) return st;
    gr_image *img;
    st = compile_part(ctx, cache, op, in, info.cc_major * 10 + info.cc_minor, segments, &img, NULL);
    if (st != GR_OK) return st;
    img->has_segments = segments;       /* the images of the two parts have different sources */
    const gr_image_kernels *k;
    if ((st = gr_image_load(ctx, img, &k)) != GR_OK) return st;
    img->has_post = op->spec.post != NULL;
    img->acc_dtype = op->acc_dtype;
    if (op->ready_in != cache) {            /* another context's cache: its images are not ours */
        memset(op->ready, 0, sizeof op->ready);
        op->ready_in = cache;
    }
    op->ready[segments][in] = img;
    *out = img;
    return GR_OK;
}

gr_status gr_operator_prepare(gr_context *ctx, gr_operator_cache *cache, gr_operator *op, gr_dtype in,
                              const gr_image **out) {
    return prepare_part(ctx, cache, op, in, 0, out);
}

gr_status gr_operator_prepare_segments(gr_context *ctx, gr_operator_cache *cache, gr_operator *op, gr_dtype in,
                                       const gr_image **out) {
    return prepare_part(ctx, cache, op, in, 1, out);
}

gr_status gr_operator_check(gr_context *ctx, gr_operator_cache *cache, gr_operator *op, gr_dtype in) {
    ctx = gr_ctx_enter(ctx);
    gr_device_info info;
    gr_status st = gr_device_info_get(ctx, &info);
    if (st != GR_OK) return st;
    gr_image *img;
    const gr_image_kernels *k;
    if ((st = gr_operator_compile(ctx, cache, op, in, info.cc_major * 10 + info.cc_minor, &img, NULL)) != GR_OK)
        return st;
    if ((st = gr_image_load(ctx, img, &k)) != GR_OK) return st;
    gr_buffer *flags;
    if ((st = gr_buffer_new(ctx, 8, GR_UINT32, GR_DEVICE, &flags)) != GR_OK) return st;
    void *p = gr_buffer_data(flags);
    void *args[] = {&p};
    unsigned got[8] = {0};
    int e = gr_dev_launch(k->check, 1, 32, 0, ctx->stream, args);
    if (e) st = gr_fail_dev(ctx, e, "the operator's identity check");
    else st = gr_buffer_read(ctx, flags, 0, got, 8);
    gr_buffer_free(ctx, flags);
    if (st != GR_OK) return st;

    gr_scalar values[8];
    int count = gr_operator_check_values(in, values);
    for (int v = 0; v < count; v++) {
        if (!got[v]) continue;
        char x[48];
        gr_format_scalar(x, sizeof x, values[v]);
        return gr_fail_arg(ctx, GR_EINVAL, "identity", "%s is not neutral for reduce: %s differs from map(x) "
                           "byte for byte for the %s element x = %s", op->spec.identity,
                           got[v] & 1 ? "reduce(identity, map(x))" : "reduce(map(x), identity)",
                           gr_dtype_name(in), x);
    }
    return GR_OK;
}
