/*
 * plan.c -- turns options into passes: which variant, block size, grid of each pass, where it finishes,
 * and the scratch the passes need. The automatic choices come from policy.c; what each finishing mode
 * does with the partials comes from the finish table (finish.c).
 */
#include "gr.h"
#include "core/context.h"
#include "base/error.h"
#include "core/exact_run.h"
#include "core/image.h"
#include "ops/ops.h"
#include "core/policy.h"
#include "core/registry.h"

#include <stdio.h>
#include <string.h>

void gr_options_init(gr_options *o, gr_op op) {
    memset(o, 0, sizeof *o);
    o->op = op;
    o->variant = -1;
    o->finish = GR_FINISH_AUTO;
    o->acc = -1;
    o->determinism = -1;
}

const char *gr_options_way(const gr_options *o) {
    return o->variant >= 0 ? "variant" : o->block ? "block" : o->grid ? "grid" : o->finish != GR_FINISH_AUTO ? "finish"
         : o->threshold ? "threshold" : NULL;
}

static void add_pass(gr_plan *p, size_t elements, size_t blocks, int block, gr_dtype in, int on_host) {
    gr_pass *ps = &p->pass[p->npasses++];
    ps->elements = elements;
    ps->blocks = blocks;
    ps->block = block;
    ps->in_dtype = in;
    ps->on_host = on_host;
}

/* Ping-pong halves: odd passes write the first half, even passes the second. Each half is as large as
 * the most partials any of its passes writes, rounded to 256 bytes. */
static size_t half_bytes(const gr_plan *p, int parity) {
    size_t most = 0, es = p->acc_size;
    for (int i = parity; i < p->npasses; i += 2)
        if (!p->pass[i].on_host && p->pass[i].blocks > most) most = p->pass[i].blocks;
    return (most * es + 255) / 256 * 256;
}

/* Device scratch [first half | second half | the variant's own]; pinned memory for the partials of a
 * CPU finish. */
static void lay_out_scratch(gr_plan *p) {
    p->half_offset = half_bytes(p, 0);
    p->extra_offset = p->half_offset + half_bytes(p, 1);
    p->dev_bytes = p->extra_offset + p->scratch;
    const gr_pass *last = p->npasses ? &p->pass[p->npasses - 1] : NULL;
    p->host_bytes = last && last->on_host && p->npasses > 1 ? last->elements * p->acc_size : 0;
}

/* The device passes of a plan whose variant, block, finish and accumulator are settled: the first over
 * the n elements, then (finishes without an epilogue) passes over partials down to what the finish
 * leaves, the last of them on the host where it says so; then the scratch they need. */
static gr_status build_passes(gr_context *ctx, gr_plan *plan, const gr_variant_row *row, int block,
                              const gr_options *o) {
    const gr_launch_device dev = {ctx->info.sms, ctx->info.max_threads_per_sm};
    size_t n = plan->n;
    gr_dtype t = plan->in_dtype;
    if (row->kernel->scratch && !plan->user) plan->scratch = row->kernel->scratch(n, t, o->op, plan->acc);
    size_t blocks = n == 0 ? 1 : o->grid ? o->grid : row->kernel->grid(n, block, gr_dtype_size(t), &dev);
    add_pass(plan, n, blocks, block, t, 0);
    size_t count = blocks;
    const gr_finish_row *f = gr_finish_row_get(plan->finish);
    /* the grids of passes over partials, as for elements of the accumulator dtype's size (a user
     * operator's struct: its size, at most 16, which the grid functions divide into 16) */
    size_t partial_bytes = plan->user ? (plan->acc_size < 16 ? plan->acc_size : 16) : gr_dtype_size(plan->acc);
    if (!f->epilogue) {
        size_t stop = f->passes == GR_PASSES_TO_ONE ? 1 : f->passes == GR_PASSES_TO_THRESHOLD ? plan->threshold : count;
        while (count > stop) {
            if (plan->npasses == GR_PLAN_MAX_PASSES - 1)
                return gr_fail(ctx, GR_EINVAL, "plan: more than %d passes", GR_PLAN_MAX_PASSES - 1);
            size_t next = row->kernel->grid(count, block, partial_bytes, &dev);
            add_pass(plan, count, next, block, plan->acc, 0);
            count = next;
        }
        if (count > 1) add_pass(plan, count, 0, block, plan->acc, 1);
    }
    lay_out_scratch(plan);
    return GR_OK;
}

/* A user kernel's row (gr.kernel) runs the kernels gr_kernel_prepare made for this very reduction
 * (o->kernel: its variant, dtype, and op and accumulator, or -1 for a user operator); no other row
 * takes them. *out: those kernels as loaded on ctx's device (the binding prepares them on the default
 * device; a buffer may live on another), NULL for a catalogue row. */
static gr_status user_kernel(gr_context *ctx, const gr_options *o, const gr_variant_row *row, int vi, gr_dtype t,
                             int op, int acc, const gr_image **out) {
    *out = NULL;
    const struct gr_image *k = o->kernel;
    if (!row->user)
        return k ? gr_fail_arg(ctx, GR_EINVAL, "kernel", "is set, but variant '%s' is not a user kernel", row->name)
                 : GR_OK;
    if (!k)
        return gr_fail_arg(ctx, GR_EINVAL, "variant", "'%s' is a user kernel: its kernels for this op over %s must "
                           "be prepared first (gr_kernel_prepare, into gr_options.kernel)", row->name, gr_dtype_name(t));
    if (k->variant != vi || k->in != t || k->op != op || (op >= 0 && k->acc_dtype != acc))
        return gr_fail_arg(ctx, GR_EINVAL, "kernel", "was prepared for another reduction (variant, op, dtype or "
                           "accumulator) than this one, with variant '%s' over %s", row->name, gr_dtype_name(t));
    return gr_image_on(ctx, k, out);
}

/* A plan with a user operator (o->user): the shape its generated kernel has (engine/user/operator.c) --
 * pipelined's for 1-byte elements, warp_shuffle's for the others, as auto gives the built-in ops -- or
 * a user kernel's that takes every op (run with the operator: o->kernel), on device buffers, with the
 * finishes that end on the device. An empty buffer still runs one block, whose epilogue writes the
 * identity (and post then sees it). */
static gr_status plan_user(gr_context *ctx, size_t n, gr_dtype t, gr_where where, const gr_options *o, gr_plan *plan) {
    static int warp_shuffle = -1, pipelined = -1;
    int vi = o->variant >= 0 && gr_variant_row_get(o->variant)->user ? o->variant
           : gr_dtype_size(t) == 1 ? gr_catalogue_index("pipelined", &pipelined)
                                   : gr_catalogue_index("warp_shuffle", &warp_shuffle);
    const gr_variant *v = gr_variant_get(vi);
    const gr_variant_row *row = gr_variant_row_get(vi);
    if (ctx->backend != GR_BACKEND_CUDA || !row->kernel)
        return gr_fail_arg(ctx, GR_ENODEV, "op", "a user operator's kernels need a CUDA device (backend is %s; "
                           "give the operator cpu functions for the cpu backend)",
                           ctx->backend == GR_BACKEND_CUDA ? "cuda, but this build has no kernels" : "cpu");
    if (where != GR_DEVICE)
        return gr_fail_arg(ctx, GR_EINVAL, "op", "a user operator reduces device buffers (this one is in host "
                           "memory: gr.copy it to a device buffer, or use opts.streamed with a built-in op)");
    if (o->variant >= 0 && o->variant != vi)
        return gr_fail_arg(ctx, GR_EINVAL, "variant", "'%s' does not take a user operator over %s (accepted: "
                           "auto, %s, whose shape the operator's kernel has; or a user kernel that takes every op)",
                           gr_variant_get(o->variant)->name, gr_dtype_name(t), v->name);
    if (row->user && v->ops != GR_OPS_ALL)
        return gr_fail_arg(ctx, GR_EINVAL, "op", "user kernel '%s' lists the ops it takes: a user operator needs one "
                           "that takes every op (gr.kernel without ops)", v->name);
    const gr_image *kernel;
    gr_status kst = user_kernel(ctx, o, row, vi, t, -1, -1, &kernel);
    if (kst != GR_OK) return kst;
    if (o->acc >= 0)
        return gr_fail_arg(ctx, GR_EINVAL, "acc", "a user operator's accumulator is its own (gr.operator's acc)");
    gr_status dst = gr_check_determinism(ctx, v, o->determinism);
    if (dst != GR_OK) return dst;
    gr_finish finish = o->finish != GR_FINISH_AUTO ? o->finish
                     : v->finishes & (1u << GR_FINISH_SINGLE) ? GR_FINISH_SINGLE : GR_FINISH_DEVICE;
    if (finish != GR_FINISH_SINGLE && finish != GR_FINISH_DEVICE && (!o->fold || o->user->acc_dtype < 0))
        return gr_fail_arg(ctx, GR_EINVAL, "finish", "'%s' combines partials on the CPU, with the operator's "
                           "cpu.reduce over %s (accepted here: auto, single, device)", gr_finish_name(finish),
                           o->user->acc_dtype < 0 ? "numbers, which a struct accumulator's partials are not"
                                                  : "its partials: give gr.operator a cpu table");
    if ((kst = gr_check_finish(ctx, v, finish)) != GR_OK) return kst;
    int block = gr_policy_block(v, o->block, o->variant < 0, n * gr_dtype_size(t));
    gr_status st = gr_check_block(ctx, v, block);
    if (st != GR_OK) return st;
    const gr_image *img;       /* the operator's kernels loaded on the buffer's device */
    if ((st = gr_image_on(ctx, o->user, &img)) != GR_OK) return st;
    plan->variant = vi;
    plan->op = o->op;
    plan->user = img;
    if (finish != GR_FINISH_SINGLE && finish != GR_FINISH_DEVICE) {
        plan->fold = o->fold;
        plan->fold_ud = o->fold_ud;
    }
    plan->kernel = kernel;
    plan->finish = finish;
    plan->in_dtype = t;
    plan->acc = o->user->acc_dtype >= 0 ? (gr_dtype)o->user->acc_dtype : GR_UINT8;   /* a struct: bytes */
    plan->acc_size = o->user->acc_size;
    plan->n = n;
    plan->threshold = gr_policy_hybrid_threshold(o->threshold);
    return build_passes(ctx, plan, row, block, o);
}

gr_status gr_plan_for(gr_context *ctx, size_t n, gr_dtype t, gr_where where, const gr_options *o, gr_plan *plan) {
    if (o->determinism == GR_DET_GPU_TO_GPU) return gr_exact_plan(ctx, n, t, where, o, plan);
    memset(plan, 0, sizeof *plan);
    if (o->user) return plan_user(ctx, n, t, where, o, plan);
    if (!gr_op_desc_get(o->op))
        return gr_fail_arg(ctx, GR_EINVAL, "op", "unknown op (accepted: %s)", gr_op_names());
    int auto_variant = o->variant < 0;
    int vi = auto_variant ? gr_policy_variant(ctx, where, t, o->op, n) : o->variant;
    const gr_variant *v = gr_variant_get(vi);
    const gr_variant_row *row = gr_variant_row_get(vi);
    if (!v) return gr_fail_arg(ctx, GR_EINVAL, "variant", "unknown variant (accepted: %s)", gr_variant_names());
    if ((v->needs & GR_NEEDS_CUDA) && (ctx->backend != GR_BACKEND_CUDA || !row->kernel))
        return gr_fail_arg(ctx, GR_ENODEV, "variant", "'%s' needs a CUDA device (backend is %s)", v->name,
                           ctx->backend == GR_BACKEND_CUDA ? "cuda, but this build has no kernels" : "cpu");
    gr_status dst = gr_check_determinism(ctx, v, o->determinism);
    if (dst != GR_OK) return dst;
    if (!(v->ops & GR_OP_BIT(o->op))) {
        char takers[512] = "";          /* the variants that take it, from the registry */
        size_t used = 0;
        for (int i = 0; i < gr_variant_count() && used < sizeof takers; i++)
            if (gr_variant_get(i)->ops & GR_OP_BIT(o->op))
                used += (size_t)snprintf(takers + used, sizeof takers - used, "%s%s", used ? ", " : "",
                                         gr_variant_get(i)->name);
        return gr_fail_arg(ctx, GR_EINVAL, "op", "'%s' is not taken by variant '%s' (variants that take it: auto, %s)",
                           gr_op_name(o->op), v->name, takers);
    }
    int block = gr_policy_block(v, o->block, auto_variant, n * gr_dtype_size(t));
    gr_status st = gr_check_block(ctx, v, block);
    if (st != GR_OK) return st;
    gr_finish finish = gr_policy_finish(v, o->finish, auto_variant);
    if ((st = gr_check_finish(ctx, v, finish)) != GR_OK) return st;
    int acc = gr_op_acc_dtype(ctx, o->op, t, o->acc);
    if (acc < 0) return GR_EINVAL;
    const gr_image *kernel;
    if ((st = user_kernel(ctx, o, row, vi, t, (int)o->op, acc, &kernel)) != GR_OK) return st;

    plan->variant = vi;
    plan->kernel = kernel;
    plan->op = o->op;
    plan->finish = finish;
    plan->in_dtype = t;
    plan->acc = (gr_dtype)acc;
    plan->n = n;
    plan->ddof = o->ddof;
    plan->threshold = gr_policy_hybrid_threshold(o->threshold);
    plan->acc_size = gr_op_acc_size(o->op, t, plan->acc);
    if (n == 0) return GR_OK;
    if (!row->kernel) {                       /* a host variant: one pass on the CPU */
        add_pass(plan, n, 0, block, t, 1);
        return GR_OK;
    }

    return build_passes(ctx, plan, row, block, o);
}

gr_status gr_plan_make(gr_context *ctx, const gr_buffer *b, const gr_options *o, gr_plan *plan) {
    return gr_plan_for(gr_ctx_for(ctx, b), gr_buffer_size(b), gr_buffer_dtype(b), gr_buffer_where(b), o, plan);
}
