/*
 * plan.c -- the one planner: turns options into a run -- the kernel that runs the passes (a catalogue
 * row's, a compiled image, the exact kernel: plan.h), which variant, block size, grid of each pass,
 * where it finishes, and the scratch the passes need. The automatic choices come from policy.c; what
 * each finishing mode does with the partials comes from the finish table (finish.c). Whole buffers,
 * streamed chunks and segments are all planned here; nothing else tells the kinds of kernel apart.
 */
#include "core/plan.h"
#include "gr.h"
#include "base/error.h"
#include "core/context.h"
#include "core/exact_pass.h"
#include "core/image.h"
#include "core/op_pass.h"
#include "core/policy.h"
#include "core/registry.h"
#include "ops/ops.h"
#include "ops/user_op.h"

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

/* ---- passes and scratch ------------------------------------------------------------------------------ */

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
static size_t half_bytes(const gr_run *run, int parity) {
    const gr_plan *p = &run->plan;
    size_t most = 0, es = p->acc_size;
    for (int i = parity; i < p->npasses; i += 2) {
        size_t partials = run->kernel->one_accumulator ? 1 : p->pass[i].blocks;
        if (!p->pass[i].on_host && partials > most) most = partials;
    }
    return (most * es + 255) / 256 * 256;
}

/* Device scratch [first half | second half | the kernel's own]; pinned memory for the partials of a
 * CPU finish, or for a value larger than the slot's result area (gr_run_value). */
static void lay_out_scratch(gr_run *run) {
    gr_plan *p = &run->plan;
    run->half_offset = half_bytes(run, 0);
    run->extra_offset = run->half_offset + half_bytes(run, 1);
    p->dev_bytes = run->extra_offset + run->scratch;
    const gr_pass *last = p->npasses ? &p->pass[p->npasses - 1] : NULL;
    p->host_bytes = last && last->on_host && p->npasses > 1 ? last->elements * p->acc_size
                  : p->acc_size > GR_ACC_MAX ? p->acc_size : 0;
}

/* The device passes of a run whose kernel, block, finish and accumulator are settled: the first over
 * the n elements, then (finishes without an epilogue) passes over partials down to what the finish
 * leaves, the last of them on the host where it says so; then the scratch they need. */
static gr_status build_passes(gr_context *ctx, gr_run *run, int block, const gr_options *o) {
    gr_plan *plan = &run->plan;
    const gr_launch_device dev = {ctx->info.sms, ctx->info.max_threads_per_sm};
    size_t n = plan->n;
    gr_dtype t = plan->in_dtype;
    run->scratch = run->kernel->scratch ? run->kernel->scratch(run, n) : 0;
    size_t blocks = n == 0 ? 1 : o->grid ? o->grid : run->kernel->grid(run, n, block, gr_dtype_size(t), &dev);
    add_pass(plan, n, blocks, block, t, 0);
    size_t count = run->kernel->one_accumulator ? 1 : blocks;
    const gr_finish_row *f = gr_finish_row_get(plan->finish);
    /* a kernel that leaves one accumulator has no epilogue: its value is copied back */
    run->epilogue = f->epilogue && !run->kernel->one_accumulator;
    run->raises_flag = run->epilogue && run->row && (run->row->shape & GR_SHAPE_EPILOGUE);
    /* the grids of passes over partials, as for elements of the accumulator dtype's size (a user
     * operator's struct: its size, at most 16, which the grid functions divide into 16) */
    size_t partial_bytes = run->user ? (plan->acc_size < 16 ? plan->acc_size : 16) : gr_dtype_size(plan->acc);
    if (!f->epilogue) {
        size_t stop = f->passes == GR_PASSES_TO_ONE ? 1 : f->passes == GR_PASSES_TO_THRESHOLD ? plan->threshold : count;
        while (count > stop) {
            if (plan->npasses == GR_PLAN_MAX_PASSES - 1)
                return gr_fail(ctx, GR_EINVAL, "plan: more than %d passes", GR_PLAN_MAX_PASSES - 1);
            size_t next = run->kernel->grid(run, count, block, partial_bytes, &dev);
            add_pass(plan, count, next, block, plan->acc, 0);
            count = next;
        }
        if (count > 1) add_pass(plan, count, 0, block, plan->acc, 1);
    }
    lay_out_scratch(run);
    return GR_OK;
}

/* ---- the kernel: a catalogue row's, a compiled image, the exact kernel -------------------------------- */

/* What every plan says, whatever its kernel. */
static void set_facts(gr_plan *p, int variant, gr_op op, gr_finish finish, gr_dtype t, gr_dtype acc, size_t acc_size,
                      size_t n, int ddof) {
    p->variant = variant;
    p->op = op;
    p->finish = finish;
    p->in_dtype = t;
    p->acc = acc;
    p->acc_size = acc_size;
    p->n = n;
    p->ddof = ddof;
}

/* A user kernel's row (gr.kernel) runs the kernels gr_kernel_prepare made for this very reduction
 * (o->kernel: its variant, dtype, and op and accumulator, or -1 for a user operator); no other row
 * takes them. *out: those kernels as loaded on ctx's device (the binding prepares them on the default
 * device; a buffer may live on another), NULL for a catalogue row. */
static gr_status user_kernel(gr_context *ctx, const gr_options *o, const gr_variant_row *row, int vi, gr_dtype t,
                             int op, int acc, const gr_image **out) {
    *out = NULL;
    const gr_image *k = o->kernel;
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

/* The exact kernel takes these ops and dtypes, and no user operator. */
static gr_status exact_takes(gr_context *ctx, const gr_options *o, gr_dtype t) {
    if (o->user)
        return gr_fail_arg(ctx, GR_EINVAL, "determinism", "'gpu_to_gpu' has no form for a user operator (its "
                           "combine is the user's) (accepted with operators: not_guaranteed, run_to_run)");
    if (!gr_x_sums_of(o->op) || !gr_exact_takes(t))
        return gr_fail_arg(ctx, GR_EINVAL, "determinism", "'gpu_to_gpu' is available for sum, nansum, asum, "
                           "mean, nanmean, sumsq, norm, var and std of the float dtypes (not %s of %s) (accepted "
                           "here: not_guaranteed, run_to_run)", gr_op_name(o->op), gr_dtype_name(t));
    return GR_OK;
}

/* opts.determinism = "gpu_to_gpu": one pass of the exact kernel (opts.block and opts.grid shape it;
 * opts.variant, finish and threshold change nothing), or on the host where the data is (the cpu
 * backend, host buffers). */
static gr_status plan_exact(gr_context *ctx, size_t n, gr_dtype t, gr_where where, const gr_options *o, gr_run *run) {
    gr_status st = exact_takes(ctx, o, t);
    if (st != GR_OK) return st;
    int acc = gr_op_acc_dtype(ctx, o->op, t, o->acc);
    if (acc < 0) return GR_EINVAL;
    int block = o->block ? o->block : GR_EXACT_BLOCK;
    if (block < 32 || block > 1024 || (block & (block - 1)))
        return gr_fail_arg(ctx, GR_EINVAL, "block", "the exact kernel of 'gpu_to_gpu' takes 32, 64, 128, 256, "
                           "512 or 1024 threads (got %d)", block);
    if (o->grid > GR_EXACT_MOST_BLOCKS)
        return gr_fail_arg(ctx, GR_EINVAL, "grid", "the exact kernel of 'gpu_to_gpu' takes at most 2^30 blocks "
                           "(got %zu)", o->grid);
    int on_host = ctx->base.backend != GR_BACKEND_CUDA || where == GR_HOST;
    if (!on_host && (!&gr_exact_gpu || !gr_exact_gpu.launch))
        return gr_fail(ctx, GR_ENODEV, "'gpu_to_gpu' of device data needs the CUDA kernels (this build has none)");
    gr_plan *plan = &run->plan;
    set_facts(plan, o->variant >= 0 ? o->variant : gr_policy_variant(ctx, where, t, o->op, n), o->op,
              GR_FINISH_SINGLE, t, (gr_dtype)acc, sizeof(gr_xsum), n, o->ddof);
    plan->exact = 1;
    run->kernel = &gr_exact_pass;
    if (n == 0) return GR_OK;
    if (on_host) {
        add_pass(plan, n, 0, block, t, 1);
        return GR_OK;
    }
    return build_passes(ctx, run, block, o);
}

/* The inputs the operator of o (its image, or its cpu functions) reads must be the reduction's. */
static gr_status check_inputs(gr_context *ctx, const gr_options *o) {
    int want = o->user ? (o->user->inputs > 1 ? o->user->inputs : 1) : o->cpu ? gr_operator_inputs(o->cpu->op) : 1;
    int given = o->ninputs > 1 ? o->ninputs : 1;
    if (want == given) return GR_OK;
    if (want == 1)
        return gr_fail_arg(ctx, GR_EINVAL, "bufs", "the operator reads one input: give it one buffer (%d given)", given);
    return gr_fail_arg(ctx, GR_EINVAL, "bufs", "the operator reads %d inputs: give it a list of %d buffers (%d given)",
                       want, want, given);
}

/* A user operator (o->user): the shape its generated kernel has (engine/user/operator_source.c) --
 * pipelined's or warp_shuffle's, as policy.c's gr_policy_operator_variant says (warp_shuffle's for several
 * inputs) -- or
 * a user kernel's that takes every op (run with the operator: o->kernel), on device buffers, with the
 * finishes that end on the device. An empty buffer still runs one block, whose epilogue writes the
 * identity (and post then sees it). */
static gr_status plan_operator(gr_context *ctx, size_t n, gr_dtype t, gr_where where, const gr_options *o,
                               gr_run *run) {
    gr_status ist = check_inputs(ctx, o);
    if (ist != GR_OK) return ist;
    static int warp_shuffle = -1;       /* an operator of several inputs has this shape for every dtype */
    int vi = o->variant >= 0 && gr_variant_row_get(o->variant)->user ? o->variant
           : o->user->inputs > 1 ? gr_catalogue_index("warp_shuffle", &warp_shuffle) : gr_policy_operator_variant(t);
    const gr_variant *v = gr_variant_get(vi);
    const gr_variant_row *row = gr_variant_row_get(vi);
    if (ctx->base.backend != GR_BACKEND_CUDA || !row->kernel)
        return gr_fail_arg(ctx, GR_ENODEV, "op", "a user operator's kernels need a CUDA device (backend is %s; "
                           "give the operator cpu functions for the cpu backend)",
                           ctx->base.backend == GR_BACKEND_CUDA ? "cuda, but this build has no kernels" : "cpu");
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
    gr_plan *plan = &run->plan;
    set_facts(plan, vi, o->op, finish, t, o->user->acc_dtype >= 0 ? (gr_dtype)o->user->acc_dtype : GR_UINT8,
              o->user->acc_size, n, 0);     /* a struct accumulator: bytes */
    plan->threshold = gr_policy_hybrid_threshold(o->threshold);
    run->kernel = &gr_image_pass;
    run->row = row;
    run->image = kernel ? kernel : img;
    run->user = img;
    run->device_combine = 1;
    if (finish != GR_FINISH_SINGLE && finish != GR_FINISH_DEVICE) {
        run->fold = o->fold;
        run->fold_ud = o->fold_ud;
    }
    return build_passes(ctx, run, block, o);
}

/* The names of the variants whose row takes the op bit and the dtype bit given (0: any), from the
 * registry, into buf. */
static const char *takers_of(char *buf, size_t size, unsigned op_bit, unsigned dtype_bit) {
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < gr_variant_count() && used < size; i++) {
        const gr_variant *w = gr_variant_get(i);
        if ((!op_bit || (w->ops & op_bit)) && (!dtype_bit || (w->dtypes & dtype_bit)))
            used += (size_t)snprintf(buf + used, size - used, "%s%s", used ? ", " : "", w->name);
    }
    return buf;
}

/* A built-in op: the caller's variant or the policy's, a catalogue row's kernel or host function, or a
 * user kernel's image prepared for this op (o->kernel). */
static gr_status plan_op(gr_context *ctx, size_t n, gr_dtype t, gr_where where, const gr_options *o, gr_run *run) {
    if (!gr_op_desc_get(o->op))
        return gr_fail_arg(ctx, GR_EINVAL, "op", "unknown op (accepted: %s)", gr_op_names());
    int auto_variant = o->variant < 0;
    int vi = auto_variant ? gr_policy_variant(ctx, where, t, o->op, n) : o->variant;
    const gr_variant *v = gr_variant_get(vi);
    const gr_variant_row *row = gr_variant_row_get(vi);
    if (!v) return gr_fail_arg(ctx, GR_EINVAL, "variant", "unknown variant (accepted: %s)", gr_variant_names());
    if ((v->needs & GR_NEEDS_CUDA) && (ctx->base.backend != GR_BACKEND_CUDA || !row->kernel))
        return gr_fail_arg(ctx, GR_ENODEV, "variant", "'%s' needs a CUDA device (backend is %s)", v->name,
                           ctx->base.backend == GR_BACKEND_CUDA ? "cuda, but this build has no kernels" : "cpu");
    gr_status dst = gr_check_determinism(ctx, v, o->determinism);
    if (dst != GR_OK) return dst;
    char takers[512];
    if (!(v->ops & GR_OP_BIT(o->op)))
        return gr_fail_arg(ctx, GR_EINVAL, "op", "'%s' is not taken by variant '%s' (variants that take it: auto, %s)",
                           gr_op_name(o->op), v->name, takers_of(takers, sizeof takers, GR_OP_BIT(o->op), 0));
    if (!(v->dtypes & GR_DTYPE_BIT(t)))
        return gr_fail_arg(ctx, GR_EINVAL, "variant", "'%s' does not take %s data (variants that take it: auto, %s)",
                           v->name, gr_dtype_name(t), takers_of(takers, sizeof takers, 0, GR_DTYPE_BIT(t)));
    int block = gr_policy_block(v, o->block, auto_variant, n * gr_dtype_size(t));
    gr_status st = gr_check_block(ctx, v, block);
    if (st != GR_OK) return st;
    gr_finish finish = gr_policy_finish(v, o->finish, auto_variant);
    if ((st = gr_check_finish(ctx, v, finish)) != GR_OK) return st;
    int acc = gr_op_acc_dtype(ctx, o->op, t, o->acc);
    if (acc < 0) return GR_EINVAL;
    const gr_image *kernel;
    if ((st = user_kernel(ctx, o, row, vi, t, (int)o->op, acc, &kernel)) != GR_OK) return st;

    gr_plan *plan = &run->plan;
    set_facts(plan, vi, o->op, finish, t, (gr_dtype)acc, gr_op_acc_size(o->op, t, (gr_dtype)acc), n, o->ddof);
    plan->threshold = gr_policy_hybrid_threshold(o->threshold);
    run->kernel = kernel ? &gr_image_pass : &gr_op_pass;
    run->row = row;
    run->image = kernel;
    if (n == 0) return GR_OK;
    if (!row->kernel) {                       /* a host variant: one pass on the CPU */
        add_pass(plan, n, 0, block, t, 1);
        return GR_OK;
    }
    return build_passes(ctx, run, block, o);
}

/* ---- entry points -------------------------------------------------------------------------------- */

gr_status gr_plan_run(gr_context *ctx, size_t n, gr_dtype t, gr_where where, const gr_options *o, gr_run *run) {
    memset(run, 0, sizeof *run);
    if (o->determinism == GR_DET_GPU_TO_GPU) return plan_exact(ctx, n, t, where, o, run);
    if (o->user) return plan_operator(ctx, n, t, where, o, run);
    return plan_op(ctx, n, t, where, o, run);
}

gr_status gr_plan_chunks(gr_context *ctx, gr_dtype t, const gr_options *o, gr_options *chunks) {
    *chunks = *o;
    chunks->finish = GR_FINISH_SINGLE;
    chunks->grid = 0;
    if (o->determinism == GR_DET_GPU_TO_GPU) {     /* the exact kernel's own checks, on every backend */
        gr_run probe;
        memset(&probe, 0, sizeof probe);
        return plan_exact(ctx, 0, t, GR_HOST, o, &probe);
    }
    if (o->finish != GR_FINISH_AUTO && o->finish != GR_FINISH_SINGLE)
        return gr_fail_arg(ctx, GR_EINVAL, "finish", "streamed reductions finish each chunk in one kernel "
                           "(accepted: auto, single)");
    if (o->user) return GR_OK;          /* the operator's own shape: plan_operator checks the rest per chunk */
    if (!gr_op_desc_get(o->op))
        return gr_fail_arg(ctx, GR_EINVAL, "op", "unknown op (accepted: %s)", gr_op_names());
    int vi = o->variant < 0 ? gr_policy_streamed_variant(t, o->op) : o->variant;
    const gr_variant *v = gr_variant_get(vi);
    if (!v) return gr_fail_arg(ctx, GR_EINVAL, "variant", "unknown variant (accepted: %s)", gr_variant_names());
    if (!(v->needs & GR_NEEDS_CUDA) || !(v->finishes & (1u << GR_FINISH_SINGLE)))
        return gr_fail_arg(ctx, GR_EINVAL, "variant", "streamed reductions need a device variant with the "
                           "'single' finish ('%s' has none)", v->name);
    if (o->variant >= 0 && ctx->base.backend != GR_BACKEND_CUDA)
        return gr_fail_arg(ctx, GR_ENODEV, "variant", "'%s' needs a CUDA device (backend is cpu)", v->name);
    gr_status dst = gr_check_determinism(ctx, v, o->determinism);
    if (dst != GR_OK) return dst;
    gr_status st = gr_check_block(ctx, v, o->block ? o->block : v->block_default);
    if (st != GR_OK) return st;
    if (gr_op_acc_dtype(ctx, o->op, t, o->acc) < 0) return GR_EINVAL;
    chunks->variant = vi;
    return GR_OK;
}

gr_status gr_plan_segments(gr_context *ctx, const gr_options *o, gr_dtype t, int device, gr_run *run) {
    memset(run, 0, sizeof *run);
    const gr_op_desc *d = gr_op_desc_get(o->op);
    if (!d && !o->user && !o->cpu) return gr_fail_arg(ctx, GR_EINVAL, "op", "unknown op (accepted: %s)", gr_op_names());
    const char *way = gr_options_way(o);
    if (way)
        return gr_fail_arg(ctx, GR_EINVAL, way, "segmented reductions choose their own kernel and shape (the "
                           "policy's); this option does not apply to them");
    gr_status st = gr_check_determinism(ctx, NULL, o->determinism);    /* they keep no atomics */
    if (st != GR_OK) return st;
    if (o->stream)
        return gr_fail_arg(ctx, GR_EINVAL, "stream", "segmented reductions and reduce_many run on the context's "
                           "stream, synchronously (leave opts.stream out)");
    gr_plan *plan = &run->plan;
    plan->variant = -1;
    plan->op = o->op;
    plan->in_dtype = t;
    plan->ddof = o->ddof;
    if (o->user || o->cpu) {        /* a user operator: its own accumulator, one result per segment */
        if ((st = check_inputs(ctx, o)) != GR_OK) return st;
        if (o->acc >= 0)
            return gr_fail_arg(ctx, GR_EINVAL, "acc", "a user operator's accumulator is its own (gr.operator's acc)");
        int has_post = o->user ? o->user->has_post : gr_operator_get_spec(o->cpu->op)->post != NULL;
        int acc_dtype = o->user ? o->user->acc_dtype : gr_operator_acc_dtype(o->cpu->op);
        int r = gr_operator_segment_dtype(ctx, has_post, acc_dtype);
        if (r < 0) return GR_EINVAL;
        plan->acc = acc_dtype >= 0 ? (gr_dtype)acc_dtype : GR_UINT8;
        run->results = 1;
        run->out_dtype[0] = run->out_dtype[1] = (gr_dtype)r;
        run->item_bytes[0] = gr_dtype_size((gr_dtype)r);
        run->item_bytes[1] = has_post ? 8 : 0;
        if (!o->user) return GR_OK;             /* the caller's functions run it (operator_cpu.c) */
        if (device && o->determinism == GR_DET_GPU_TO_GPU) return exact_takes(ctx, o, t);
        plan->acc_size = o->user->acc_size;
        run->kernel = &gr_image_pass;
        run->user = o->user;
        if (device && (st = gr_image_on(ctx, o->user, &run->user)) != GR_OK) return st;
        run->image = run->user;
        return GR_OK;
    }
    int a = gr_op_acc_dtype(ctx, o->op, t, o->acc);
    if (a < 0) return GR_EINVAL;
    plan->acc = (gr_dtype)a;
    run->results = d->arity;
    for (int i = 0; i < 2; i++) {
        run->out_dtype[i] = gr_op_result_dtype(o->op, t, plan->acc, i);
        run->item_bytes[i] = gr_dtype_size(run->out_dtype[i]);
    }
    if (o->determinism != GR_DET_GPU_TO_GPU) {
        plan->acc_size = gr_op_acc_size(o->op, t, plan->acc);
        run->kernel = &gr_op_pass;
        return GR_OK;
    }
    if ((st = exact_takes(ctx, o, t)) != GR_OK) return st;
    if (device && (!&gr_exact_gpu || !gr_exact_gpu.segments))
        return gr_fail(ctx, GR_ENODEV, "'gpu_to_gpu' of device data needs the CUDA kernels (this build has none)");
    plan->acc_size = sizeof(gr_xsum);
    plan->exact = 1;
    run->kernel = &gr_exact_pass;
    return GR_OK;
}

int gr_plan_items(const gr_options *o) {
    return !gr_options_way(o) && o->determinism != GR_DET_GPU_TO_GPU;    /* the exact kernel has no items form */
}

/* The plan gr.plan shows of a run. */
gr_status gr_plan_for(gr_context *ctx, size_t n, gr_dtype t, gr_where where, const gr_options *o, gr_plan *plan) {
    gr_run run;
    gr_status st = gr_plan_run(ctx, n, t, where, o, &run);
    *plan = run.plan;
    return st;
}

gr_status gr_plan_make(gr_context *ctx, const gr_buffer *b, const gr_options *o, gr_plan *plan) {
    return gr_plan_for(gr_ctx_for(ctx, b), gr_buffer_size(b), gr_buffer_dtype(b), gr_buffer_where(b), o, plan);
}
