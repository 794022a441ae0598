/*
 * kernel.c -- user kernel variants (gr.kernel): the spec checked and copied, one instantiation compiled
 * at registration so that a broken source fails there, the row appended to the registry, and, for each
 * reduction, the kernels compiled (kernel_source.c's source, the operators' caches and NVRTC) and loaded
 * on the device, remembered per cache.
 *
 * A user kernel's row has the catalogue's classic shape (partials and the epilogue), so every finishing
 * mode that takes partials works: device passes, hybrid, host (the CPU finishes a built-in op) and
 * single. The registry is the process's: rows are never replaced, so a name registered again must come
 * with the same spec (the same index is returned) -- a script run twice, or two Lua states of one
 * process, agree on what "mine" is.
 */
#include "user/kernel.h"
#include "base/error.h"
#include "core/context.h"
#include "core/image.h"
#include "core/registry.h"
#include "jit/compile.h"
#include "jit/kcache.h"
#include "jit/source_text.h"
#include "jit/user_text.h"
#include "ops/ops.h"
#include "user/operator.h"
#include "user/operator_source.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the shape the planner gives a user kernel ------------------------------------------------------ */

/* Blocks of a grid-stride pass over n elements: as many as take 32 bytes per thread per round, at most
 * one resident wave (as warp_shuffle's grid, launch.cuh's grid_for). */
static size_t user_grid(size_t n, int block, size_t elem_bytes, const gr_launch_device *dev) {
    size_t per_block = (size_t)block * (elem_bytes < 16 ? 16 / elem_bytes : 1) * 2;
    size_t want = (n + per_block - 1) / per_block;
    size_t full = (size_t)dev->sms * (size_t)(dev->max_threads_per_sm / block);
    if (full < 1) full = 1;
    return want < 1 ? 1 : want < full ? want : full;
}

/* exec.c launches a user kernel's prepared image; a plan without one is refused before (plan.c) */
static int user_launch(gr_launch *L) {
    L->site = "a user kernel without prepared kernels";
    return 1;   /* cudaErrorInvalidValue */
}

const gr_kernel gr_user_kernel_shape = {user_launch, user_grid, NULL, NULL};

/* ---- the spec ------------------------------------------------------------------------------------ */

static int is_pow2(int x) { return x > 0 && (x & (x - 1)) == 0; }

static gr_status check_block(gr_context *ctx, const char *which, int b) {
    if (b >= 32 && b <= 1024 && is_pow2(b)) return GR_OK;
    return gr_fail_arg(ctx, GR_EINVAL, "block", "%s %d is not a power of two from 32 to 1024 (accepted: 32, 64, "
                       "128, 256, 512, 1024)", which, b);
}

/* The spec checked, with its defaults filled in (strings still the caller's). */
static gr_status check_spec(gr_context *ctx, const gr_kernel_spec *in, gr_kernel_spec *s) {
    if (!in) return gr_fail_arg(ctx, GR_EINVAL, "spec", "is NULL");
    *s = *in;
    gr_status st = gr_check_name(ctx, s->name);
    if (st != GR_OK) return st;
    int at = gr_variant_find(s->name);
    if ((at >= 0 && !gr_variant_get(at)->user) || strcmp(s->name, "auto") == 0)
        return gr_fail_arg(ctx, GR_EINVAL, "name", "'%s' is %s (a user kernel needs a name of its own)", s->name,
                           at < 0 ? "what opts.variant calls the automatic choice" : "a catalogue variant");
    if (!s->entry) s->entry = s->name;
    if ((st = gr_user_name_check(ctx, "entry", s->entry, "an entry point")) != GR_OK) return st;
    if (!s->source || gr_operator_is_blank(s->source))
        return gr_fail_arg(ctx, GR_EINVAL, "source", "is %s (expected CUDA C++ that defines the entry point %s)",
                           s->source ? "empty" : "required", s->entry);
    if ((st = gr_user_text_check(ctx, "source", s->source, GR_TEXT_KERNEL)) != GR_OK) return st;
    if (!gr_source_has_token(s->source, s->entry, 1))
        return gr_fail_arg(ctx, GR_EINVAL, "source", "does not define the entry point %s: expected template <class "
                           "Op, class In> __device__ typename Op::acc_t %s(const In *in, size_t n, unsigned long "
                           "long first)%s", s->entry, s->entry, in->entry ? "" : " (the entry point is named after "
                           "the kernel unless entry names another)");
    if (!s->block_min) s->block_min = 32;
    if (!s->block_max) s->block_max = 1024;
    if (!s->block_default) s->block_default = s->block_min > 256 ? s->block_min : s->block_max < 256 ? s->block_max : 256;
    st = check_block(ctx, "min", s->block_min);
    if (st == GR_OK) st = check_block(ctx, "max", s->block_max);
    if (st == GR_OK) st = check_block(ctx, "default", s->block_default);
    if (st != GR_OK) return st;
    if (s->block_min > s->block_max || s->block_default < s->block_min || s->block_default > s->block_max)
        return gr_fail_arg(ctx, GR_EINVAL, "block", "min %d, default %d, max %d: expected min <= default <= max",
                           s->block_min, s->block_default, s->block_max);
    unsigned all_finishes = gr_finishes_of(GR_SHAPE_PARTIALS | GR_SHAPE_EPILOGUE);
    if (!s->finishes) s->finishes = all_finishes;
    if (s->finishes & ~all_finishes)
        return gr_fail_arg(ctx, GR_EINVAL, "finishes", "has modes a user kernel cannot name (accepted: device, "
                           "hybrid, host, single; auto is the planner's choice among them)");
    if (!s->ops) s->ops = GR_OPS_ALL;
    if (s->ops & ~GR_OPS_ALL)
        return gr_fail_arg(ctx, GR_EINVAL, "ops", "has bits that are no op (accepted: GR_OP_BIT of %s)", gr_op_names());
    if (s->determinism < 0) s->determinism = GR_DET_RUN_TO_RUN;
    if (s->determinism > GR_DET_RUN_TO_RUN)
        return gr_fail_arg(ctx, GR_EINVAL, "determinism", "a user kernel can promise not_guaranteed or run_to_run "
                           "(gpu_to_gpu is the engine's exactly rounded sum)");
    return GR_OK;
}

static int same_text(const char *a, const char *b) { return (!a && !b) || (a && b && strcmp(a, b) == 0); }

/* Whether a registered spec is the one given (defaults filled in both). */
static int same_spec(const gr_kernel_spec *a, const gr_kernel_spec *b) {
    return same_text(a->name, b->name) && same_text(a->source, b->source) && same_text(a->entry, b->entry) &&
           (!b->summary || same_text(a->summary, b->summary)) && a->block_min == b->block_min &&
           a->block_max == b->block_max && a->block_default == b->block_default && a->finishes == b->finishes &&
           a->ops == b->ops && a->determinism == b->determinism;
}

static char *copy_of(const char *s) {
    size_t len = strlen(s) + 1;
    char *c = malloc(len);
    if (c) memcpy(c, s, len);
    return c;
}

static void definition_free(struct gr_user_kernel *k) {
    if (!k) return;
    free((char *)k->spec.name);
    free((char *)k->spec.source);
    free((char *)k->spec.entry);
    free((char *)k->spec.summary);
    free(k);
}

/* The registry keeps user kernels for the life of the process; their definitions go when the module
 * is unloaded (lua_close, or exit), so that leak checkers see every allocation given back. */
__attribute__((destructor)) static void forget_definitions(void) {
    for (int i = gr_variant_count() - 1; i >= 0; i--) {
        const gr_variant_row *row = gr_variant_row_get(i);
        if (row && row->user) definition_free((struct gr_user_kernel *)row->user);
    }
}

static struct gr_user_kernel *definition_of(const gr_kernel_spec *s) {
    struct gr_user_kernel *k = calloc(1, sizeof *k);
    if (!k) return NULL;
    char summary[160];
    snprintf(summary, sizeof summary, "user kernel (gr.kernel): %s<Op, In> reduces each block's share", s->entry);
    k->spec = *s;
    k->spec.name = copy_of(s->name);
    k->spec.source = copy_of(s->source);
    k->spec.entry = copy_of(s->entry);
    k->spec.summary = copy_of(s->summary ? s->summary : summary);
    if (!k->spec.name || !k->spec.source || !k->spec.entry || !k->spec.summary) {
        definition_free(k);
        return NULL;
    }
    return k;
}

/* ---- compiling ----------------------------------------------------------------------------------- */

/* The architecture to compile for: the device's, or sm_90 without one (the source is checked all the
 * same). */
static int arch_of(gr_context *ctx) {
    gr_device_info info;
    return gr_device_info_get(ctx, &info) == GR_OK ? info.cc_major * 10 + info.cc_minor : 90;
}

/* The image of k for one reduction, through the caches. A failed call of the entry point (NVRTC's error
 * in the "entry" lines) is said as what it is: the entry point is missing or has another signature. */
static gr_status compile(gr_context *ctx, gr_operator_cache *cache, const struct gr_user_kernel *k, gr_op op,
                         gr_dtype acc, const gr_operator *user_op, gr_dtype in, gr_image **out,
                         gr_operator_compile_info *info) {
    char *source, what[200];
    gr_status st = gr_kernel_source_of(ctx, k, op, acc, user_op, in, &source);
    if (st != GR_OK) return st;
    snprintf(what, sizeof what, "kernel %s for %s over %s elements", k->spec.name,
             user_op ? gr_operator_get_spec(user_op)->name : gr_op_name(op), gr_dtype_name(in));
    st = gr_image_compile(ctx, cache, source, in, arch_of(ctx), what, out, info);
    free(source);
    if (st == GR_EINVAL && strcmp(gr_errarg(ctx), "entry") == 0) {
        char nvrtc[600];
        snprintf(nvrtc, sizeof nvrtc, "%s", gr_errmsg(ctx) + strlen("entry: "));
        st = gr_fail_arg(ctx, GR_EINVAL, "source", "the entry point %s cannot be called as %s<Op, In>(in, n, first): "
                         "expected template <class Op, class In> __device__ typename Op::acc_t %s(const In *in, "
                         "size_t n, unsigned long long first) (NVRTC: entry %s)", k->spec.entry, k->spec.entry,
                         k->spec.entry, nvrtc);
    }
    if (st == GR_OK && !user_op && (*out)->acc_size != gr_op_acc_size(op, in, acc))
        st = gr_fail(ctx, GR_ECUDA, "%s: the image's accumulator has %zu bytes, the engine's %zu", what,
                     (*out)->acc_size, gr_op_acc_size(op, in, acc));
    if (st == GR_OK && user_op) st = gr_operator_check_image(ctx, user_op, *out, what);
    return st;
}

/* ---- registration ---------------------------------------------------------------------------------- */

const gr_kernel_spec *gr_kernel_get_spec(int variant) {
    const gr_variant_row *row = gr_variant_row_get(variant);
    return row && row->user ? &row->user->spec : NULL;
}

/* The spec checked and filled in (s), and the index of a user kernel registered with the same spec, or
 * -1 when the name is free. */
static gr_status check_all(gr_context *ctx, const gr_kernel_spec *spec, gr_kernel_spec *s, int *same) {
    *same = -1;
    gr_status st = check_spec(ctx, spec, s);
    if (st != GR_OK) return st;
    int at = gr_variant_find(s->name);
    const gr_kernel_spec *had = gr_kernel_get_spec(at);
    if (had && same_spec(had, s)) {
        *same = at;
        return GR_OK;
    }
    if (had)
        return gr_fail_arg(ctx, GR_EINVAL, "name", "'%s' is registered already, with another definition (a user "
                           "kernel stays as it is for the life of the process: give the new one another name)",
                           s->name);
    return GR_OK;
}

gr_status gr_kernel_check(gr_context *ctx, const gr_kernel_spec *spec) {
    gr_kernel_spec s;
    int same;
    return check_all(ctx, spec, &s, &same);
}

gr_status gr_kernel_register(gr_context *ctx, gr_operator_cache *cache, const gr_kernel_spec *spec, int *variant) {
    *variant = -1;
    gr_kernel_spec s;
    int same;
    gr_status st = check_all(ctx, spec, &s, &same);
    if (st != GR_OK) return st;
    if (same >= 0) {
        *variant = same;
        return GR_OK;
    }
    struct gr_user_kernel *k = definition_of(&s);
    if (!k) return gr_fail(ctx, GR_ENOMEM, "out of host memory");
    if (cache) {
        /* one instantiation now: the first op it takes, over float32 */
        gr_op op = GR_SUM;
        while (!(s.ops & GR_OP_BIT(op))) op = (gr_op)(op + 1);
        gr_image *img;
        st = compile(ctx, cache, k, op, (gr_dtype)gr_op_acc_dtype(ctx, op, GR_FLOAT32, -1), NULL, GR_FLOAT32, &img,
                     NULL);
        if (st == GR_ENODEV) st = GR_OK;    /* no NVRTC: it compiles where it runs, or says so there */
    }
    if (st == GR_OK) {
        gr_variant_row row = {
            k->spec.name, 0, "a user kernel (gr.kernel)", k->spec.summary, GR_SHAPE_PARTIALS | GR_SHAPE_EPILOGUE,
            GR_FINISH_DEVICE, s.block_min, s.block_max, s.block_default, GR_NEEDS_CUDA | GR_NEEDS_POW2_BLOCK, s.ops,
            (gr_determinism)s.determinism, &gr_user_kernel_shape, NULL, s.finishes, k,
            GR_DTYPES_ALL,      /* kernel_source.c refuses the dtypes it has no C type for */
        };
        /* the single finish when it has it (one launch: the fastest), else the first of device, hybrid, host */
        static const gr_finish order[] = {GR_FINISH_SINGLE, GR_FINISH_DEVICE, GR_FINISH_HYBRID, GR_FINISH_HOST};
        for (int i = 3; i >= 0; i--)
            if (s.finishes & (1u << order[i])) row.default_finish = order[i];
        st = gr_registry_add(ctx, &row, variant);
    }
    if (st != GR_OK) definition_free(k);
    return st;
}

gr_status gr_kernel_compile(gr_context *ctx, gr_operator_cache *cache, int variant, gr_op op, int acc,
                            const gr_operator *user_op, gr_dtype in, gr_operator_compile_info *info) {
    memset(info, 0, sizeof *info);
    const gr_variant_row *row = gr_variant_row_get(variant);
    if (!row || !row->user)
        return gr_fail_arg(ctx, GR_EINVAL, "variant", "is not a user kernel (gr_kernel_register)");
    if (!cache) return gr_fail_arg(ctx, GR_EINVAL, "cache", "is NULL");
    if ((unsigned)in >= GR_DTYPE_COUNT) return gr_fail_arg(ctx, GR_EINVAL, "dtype", "%d is not a dtype", (int)in);
    if (!user_op && (acc = gr_op_acc_dtype(ctx, op, in, acc)) < 0) return GR_EINVAL;
    gr_image *img;
    gr_status st = compile(ctx, cache, row->user, op, (gr_dtype)acc, user_op, in, &img, info);
    if (st != GR_OK) memset(info, 0, sizeof *info);     /* an image its checks refused tells nothing */
    return st;
}

gr_status gr_kernel_source(gr_context *ctx, int variant, gr_op op, int acc, const gr_operator *user_op, gr_dtype in,
                           char **out) {
    *out = NULL;
    const gr_variant_row *row = gr_variant_row_get(variant);
    if (!row || !row->user)
        return gr_fail_arg(ctx, GR_EINVAL, "variant", "is not a user kernel (gr_kernel_register)");
    if (!user_op && (acc = gr_op_acc_dtype(ctx, op, in, acc)) < 0) return GR_EINVAL;
    return gr_kernel_source_of(ctx, row->user, op, (gr_dtype)acc, user_op, in, out);
}

/* ---- prepared for a reduction ------------------------------------------------------------------------ */

/* What the cache's memo keys a built-in op's image by. */
typedef struct {
    int variant, op, in, acc, arch;
} memo_key;

gr_status gr_kernel_prepare(gr_context *ctx, gr_operator_cache *cache, int variant, gr_op op, int acc,
                            gr_operator *user_op, gr_dtype in, const gr_image **out) {
    *out = NULL;
    const gr_variant_row *row = gr_variant_row_get(variant);
    if (!row || !row->user)
        return gr_fail_arg(ctx, GR_EINVAL, "variant", "is not a user kernel (gr_kernel_register)");
    ctx = gr_ctx_enter(ctx);    /* its modules live on the context's own device */
    if (gr_context_backend(ctx) != GR_BACKEND_CUDA)
        return gr_fail_arg(ctx, GR_ENODEV, "variant", "'%s' needs a CUDA device (backend is cpu)", row->name);
    if (!cache) return gr_fail_arg(ctx, GR_EINVAL, "cache", "is NULL");
    if ((unsigned)in >= GR_DTYPE_COUNT) return gr_fail_arg(ctx, GR_EINVAL, "dtype", "%d is not a dtype", (int)in);
    /* an op it does not take, or an operator for a kernel that lists its ops: the planner says so */
    if (user_op ? row->ops != GR_OPS_ALL : !gr_op_desc_get(op) || !(row->ops & GR_OP_BIT(op))) return GR_OK;
    if (!user_op && (acc = gr_op_acc_dtype(ctx, op, in, acc)) < 0) return GR_EINVAL;
    memo_key key = {variant, user_op ? -1 : (int)op, (int)in, acc, arch_of(ctx)};
    gr_kcache_mem *memo = gr_operator_cache_memo(cache);
    gr_image *img = user_op ? NULL : gr_kcache_mem_find(memo, &key, sizeof key);
    if (img) {
        *out = img;
        return GR_OK;
    }
    gr_status st = compile(ctx, cache, row->user, op, (gr_dtype)acc, user_op, in, &img, NULL);
    if (st != GR_OK) return st;
    const gr_image_kernels *loaded;
    if ((st = gr_image_load(ctx, img, &loaded)) != GR_OK) return st;
    img->variant = variant;
    img->op = user_op ? -1 : (int)op;
    img->acc_dtype = user_op ? gr_operator_acc_dtype(user_op) : acc;
    img->has_post = user_op && gr_operator_get_spec(user_op)->post;
    if (!user_op && gr_kcache_mem_insert(memo, &key, sizeof key, img) != GR_OK)
        return gr_fail(ctx, GR_ENOMEM, "out of host memory");
    *out = img;
    return GR_OK;
}
