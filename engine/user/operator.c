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

/* Words C++ keeps for itself: a parameter of map cannot be called so (NVRTC's error would point at a
 * generated line, not at the field). */
static const char *const cpp_words[] = {
    "auto", "bool", "break", "case", "char", "class", "const", "constexpr", "continue", "default", "delete",
    "do", "double", "else", "enum", "extern", "false", "float", "for", "goto", "if", "inline", "int", "long",
    "namespace", "new", "nullptr", "operator", "private", "public", "register", "return", "short", "signed",
    "sizeof", "static", "struct", "switch", "template", "this", "true", "typedef", "typename", "union",
    "unsigned", "using", "void", "volatile", "while", NULL};

/* The names of the inputs: C names map may use, distinct, not i (the index) nor a C++ word. */
static gr_status check_inputs(gr_context *ctx, const gr_operator_spec *spec) {
    if (spec->ninputs < 0 || spec->ninputs > GR_OPERATOR_INPUTS)
        return gr_fail_arg(ctx, GR_EINVAL, "inputs", "names 1 to %d inputs (got %d)", GR_OPERATOR_INPUTS,
                           spec->ninputs);
    for (int k = 0; k < spec->ninputs; k++) {
        const char *name = spec->inputs[k];
        if (!name || !gr_is_identifier(name))
            return gr_fail_arg(ctx, GR_EINVAL, "inputs", "input %d: '%.64s' is not a C name (letters, digits and "
                               "'_', not starting with a digit)", k + 1, name ? name : "(null)");
        gr_status st = gr_user_name_check(ctx, "inputs", name, "an input's name");
        if (st != GR_OK) return st;
        if (strcmp(name, "i") == 0)
            return gr_fail_arg(ctx, GR_EINVAL, "inputs", "input %d: 'i' is the element's index in map: name the "
                               "input otherwise", k + 1);
        for (int w = 0; cpp_words[w]; w++)
            if (strcmp(name, cpp_words[w]) == 0)
                return gr_fail_arg(ctx, GR_EINVAL, "inputs", "input %d: '%s' is a C++ keyword", k + 1, name);
        for (int j = 0; j < k; j++)
            if (strcmp(name, spec->inputs[j]) == 0)
                return gr_fail_arg(ctx, GR_EINVAL, "inputs", "'%s' names inputs %d and %d: each name once", name,
                                   j + 1, k + 1);
    }
    return GR_OK;
}

static gr_status check_spec(gr_context *ctx, const gr_operator_spec *spec, int *acc_dtype) {
    if (!spec) return gr_fail_arg(ctx, GR_EINVAL, "spec", "is NULL");
    gr_status st = gr_check_name(ctx, spec->name);
    if (st == GR_OK) st = check_inputs(ctx, spec);
    if (st == GR_OK) st = check_expression(ctx, "map", spec->map, spec->ninputs > 1 ? "a C expression over the inputs "
                                           "and i" : "a C expression over x and i");
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

/* Every input of dtype t. */
static gr_input_dtypes all_of(const gr_operator *op, gr_dtype t) {
    gr_input_dtypes in = {.count = gr_operator_inputs(op)};
    for (int k = 0; k < in.count; k++) in.at[k] = t;
    return in;
}

static gr_status check_dtypes(gr_context *ctx, const gr_operator *op, const gr_input_dtypes *in) {
    if (in->count != gr_operator_inputs(op))
        return gr_fail_arg(ctx, GR_EINVAL, "bufs", "operator %s takes %d input%s (got %d)", op->spec.name,
                           gr_operator_inputs(op), gr_operator_inputs(op) > 1 ? "s" : "", in->count);
    for (int k = 0; k < in->count; k++)
        if ((unsigned)in->at[k] >= GR_DTYPE_COUNT)
            return gr_fail_arg(ctx, GR_EINVAL, "dtype", "%d is not a dtype", (int)in->at[k]);
    return GR_OK;
}

/* The image of the whole-buffer kernels, or with segments set of those and gr_op_segments. */
static gr_status compile_part(gr_context *ctx, gr_operator_cache *cache, gr_operator *op, const gr_input_dtypes *in,
                              int arch, int segments, gr_image **out, gr_operator_compile_info *info) {
    *out = NULL;
    gr_status st = check_dtypes(ctx, op, in);
    if (st != GR_OK) return st;
    char *source;
    st = gr_operator_source_part(ctx, op, in, segments, &source);
    if (st != GR_OK) return st;
    char what[160];
    int used = snprintf(what, sizeof what, "operator %s over %s", op->spec.name, gr_dtype_name(in->at[0]));
    for (int k = 1; k < in->count && used < (int)sizeof what; k++)
        used += snprintf(what + used, sizeof what - (size_t)used, ", %s", gr_dtype_name(in->at[k]));
    if (used < (int)sizeof what) snprintf(what + used, sizeof what - (size_t)used, " elements");
    st = gr_image_compile(ctx, cache, source, in->at[0], arch, what, out, info);
    free(source);
    if (st == GR_OK) st = gr_operator_check_image(ctx, op, *out, what);
    if (st == GR_OK) (*out)->inputs = in->count;
    return st;
}

gr_status gr_operator_compile(gr_context *ctx, gr_operator_cache *cache, gr_operator *op, gr_dtype in, int arch,
                              gr_image **out, gr_operator_compile_info *info) {
    gr_input_dtypes all = all_of(op, in);
    return compile_part(ctx, cache, op, &all, arch, 0, out, info);
}

gr_status gr_operator_compile_inputs(gr_context *ctx, gr_operator_cache *cache, gr_operator *op,
                                     const gr_input_dtypes *in, int arch, gr_image **out,
                                     gr_operator_compile_info *info) {
    return compile_part(ctx, cache, op, in, arch, 0, out, info);
}

/* Where the loaded image of dtypes `in` (with segments or not) is remembered on op: its slot in
 * op->ready for one input, else an entry of op->ready_inputs (made here where `make`); NULL when none. */
static gr_image **remembered(gr_operator *op, const gr_input_dtypes *in, int segments, int make) {
    if (in->count == 1) return &op->ready[segments][in->at[0]];
    for (gr_op_ready *r = op->ready_inputs; r; r = r->next)
        if (r->segments == segments && memcmp(r->dtypes, in->at, (size_t)in->count * sizeof in->at[0]) == 0)
            return &r->img;
    if (!make) return NULL;
    gr_op_ready *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->segments = segments;
    memcpy(r->dtypes, in->at, (size_t)in->count * sizeof in->at[0]);
    r->next = op->ready_inputs;
    op->ready_inputs = r;
    return &r->img;
}

static gr_status prepare_part(gr_context *ctx, gr_operator_cache *cache, gr_operator *op, const gr_input_dtypes *in,
                              int segments, const gr_image **out) {
    *out = NULL;
    ctx = gr_ctx_enter(ctx);    /* the operator's modules live on the context's own device */
    gr_status st = check_dtypes(ctx, op, in);
    if (st != GR_OK) return st;
    if (op->ready_in != cache) {            /* another context's cache: its images are not ours */
        memset(op->ready, 0, sizeof op->ready);
        for (gr_op_ready *r = op->ready_inputs; r; r = r->next) r->img = NULL;
        op->ready_in = cache;
    }
    gr_image **slot = remembered(op, in, segments, 0);
    if (slot && *slot) {
        *out = *slot;
        return GR_OK;
    }
    gr_device_info info;
    if ((st = gr_device_info_get(ctx, &info)) != GR_OK) return st;
    gr_image *img;
    st = compile_part(ctx, cache, op, in, info.cc_major * 10 + info.cc_minor, segments, &img, NULL);
    if (st != GR_OK) return st;
    img->has_segments = segments;       /* the images of the two parts have different sources */
    const gr_image_kernels *k;
    if ((st = gr_image_load(ctx, img, &k)) != GR_OK) return st;
    img->has_post = op->spec.post != NULL;
    img->acc_dtype = op->acc_dtype;
    if ((slot = remembered(op, in, segments, 1)) != NULL) *slot = img;  /* else found again next time */
    *out = img;
    return GR_OK;
}

gr_status gr_operator_prepare(gr_context *ctx, gr_operator_cache *cache, gr_operator *op, gr_dtype in,
                              const gr_image **out) {
    gr_input_dtypes all = all_of(op, in);
    return prepare_part(ctx, cache, op, &all, 0, out);
}

gr_status gr_operator_prepare_segments(gr_context *ctx, gr_operator_cache *cache, gr_operator *op, gr_dtype in,
                                       const gr_image **out) {
    gr_input_dtypes all = all_of(op, in);
    return prepare_part(ctx, cache, op, &all, 1, out);
}

gr_status gr_operator_prepare_inputs(gr_context *ctx, gr_operator_cache *cache, gr_operator *op,
                                     const gr_input_dtypes *in, int segments, const gr_image **out) {
    return prepare_part(ctx, cache, op, in, segments != 0, out);
}

gr_status gr_operator_check(gr_context *ctx, gr_operator_cache *cache, gr_operator *op, gr_dtype in) {
    gr_input_dtypes all = all_of(op, in);
    return gr_operator_check_inputs(ctx, cache, op, &all);
}

gr_status gr_operator_check_inputs(gr_context *ctx, gr_operator_cache *cache, gr_operator *op,
                                   const gr_input_dtypes *ins) {
    ctx = gr_ctx_enter(ctx);
    gr_device_info info;
    gr_status st = gr_device_info_get(ctx, &info);
    if (st != GR_OK) return st;
    gr_image *img;
    const gr_image_kernels *k;
    if ((st = compile_part(ctx, cache, op, ins, info.cc_major * 10 + info.cc_minor, 0, &img, NULL)) != GR_OK)
        return st;
    gr_dtype in = ins->at[0];
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
