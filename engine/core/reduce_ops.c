/*
 * reduce_ops.c -- gr_reduce_ops: several built-in ops over one buffer, each result what gr_reduce gives for
 * that op alone. Where a fused image covers ops (user/fused_source.c), one pass of its kernel computes
 * them all in one read: planned as a user operator's pass is (the same variant, block, grid and single
 * finish as each op's own auto plan), its tuple written to pinned memory by the last block, and each op's
 * result taken from its slot with the op's own gr_op_result. Every other op -- and every op off the GPU,
 * at gpu_to_gpu, or with a kernel option (variant, block, grid, finish, threshold), whose single calls
 * plan otherwise -- is one gr_reduce call of its own.
 */
#include "core/reduce_ops.h"
#include "gr.h"
#include "base/device.h"
#include "base/error.h"
#include "core/buffer.h"
#include "core/context.h"
#include "core/exec.h"
#include "core/image.h"
#include "core/policy.h"
#include "core/pool.h"
#include "ops/ops.h"

#include <stdlib.h>
#include <string.h>

int gr_fused_takes(gr_op op, gr_dtype in) {
    return gr_policy_streamed_variant(in, op) == gr_policy_operator_variant(in);
}

gr_op gr_fused_fold_op(gr_op op, gr_dtype in) {
    /* the same functor as the other's (cuda/device/ops.cuh's OpOf) */
    if (op == GR_MEAN) return GR_SUM;
    if (op == GR_STD) return GR_VAR;
    if (gr_dtype_is_float(in)) return op;
    return op == GR_NANSUM ? GR_SUM : op == GR_NANMIN ? GR_MIN : op == GR_NANMAX ? GR_MAX : op;
}

size_t gr_fused_offset(const gr_image *img, int k) {
    size_t off = 0;
    for (int j = 0; j < k; j++)
        off += (gr_op_acc_size((gr_op)img->fused_ops[j], img->in, (gr_dtype)img->fused_acc[j]) + 15) / 16 * 16;
    return off;
}

/* The image's passes, with no result of their own: the caller reads the tuple. */
static int fused_launch(const gr_run *run, gr_launch *L) { return gr_image_pass.launch(run, L); }

static gr_status no_result(gr_context *ctx, const gr_run *run, gr_slot *slot, const void *acc, size_t n,
                           gr_result *out) {
    (void)ctx, (void)run, (void)slot, (void)acc, (void)n;
    memset(out, 0, sizeof *out);
    return GR_OK;
}

static const gr_pass_kernel fused_pass = {
    .what = "the fused ops' kernel%.0s", .launch = fused_launch, .result = no_result,
};

/* Whether the fused kernel can stand for the ops' single calls on b with o. */
static int fusable(const gr_context *ctx, const gr_buffer *b, const gr_options *o, const gr_image *fused) {
    return fused && fused->fused_count > 1 && fused->in == b->dtype && ctx->base.backend == GR_BACKEND_CUDA &&
           gr_buffer_where(b) == GR_DEVICE && b->n > 0 && o->determinism != GR_DET_GPU_TO_GPU && !gr_options_way(o);
}

/* One pass of the fused kernel over b; the results of the ops it covers into results (done[k] set). */
static gr_status run_fused(gr_context *ctx, gr_buffer *b, const gr_options *o, const gr_image *fused,
                           const gr_op *ops, int count, gr_result *results, int *done) {
    gr_options f = *o;
    f.op = GR_SUM;
    f.user = fused;
    f.acc = -1;
    f.fold = NULL;
    f.fold_ud = NULL;
    f.cpu = NULL;
    f.kernel = NULL;
    gr_run run;
    gr_status st = gr_plan_run(ctx, b->n, b->dtype, GR_DEVICE, &f, &run);
    if (st != GR_OK) return st;
    if (!run.epilogue) return GR_OK;            /* not the single finish the ops' own plans have */
    run.kernel = &fused_pass;
    size_t bytes = run.plan.acc_size;
    unsigned char *tuple = malloc(bytes);
    if (!tuple) return gr_fail(ctx, GR_ENOMEM, "out of host memory");
    gr_slot *slot;
    st = gr_slot_acquire(ctx, run.plan.dev_bytes, bytes, &slot);
    if (st == GR_OK) {
        void *stream = o->stream && o->stream->handle ? o->stream->handle : ctx->stream;
        gr_inputs in;
        gr_inputs_one(&in, gr_buffer_data(b), b->dtype, b->n);
        /* the last block writes the whole tuple to pinned memory of the slot's own (the result area holds
         * GR_ACC_MAX bytes) */
        st = gr_exec_single_to(ctx, &in, 0, &run, slot->dev, slot->counter, slot->host, stream);
        int rc = gr_dev_stream_sync(stream);
        if (st == GR_OK && rc) st = gr_fail_dev(ctx, rc, "the fused ops' kernel");
        if (st == GR_OK) memcpy(tuple, slot->host, bytes);
        gr_slot_release(ctx, slot);
    }
    for (int j = 0; j < fused->fused_count && st == GR_OK; j++)
        for (int k = 0; k < count; k++) {
            /* the op's accumulator: its fold op's, in the accumulator dtype its single call takes */
            int acc = gr_op_acc_dtype(ctx, ops[k], b->dtype, o->acc);
            if (done[k] || !gr_fused_takes(ops[k], b->dtype) || acc != fused->fused_acc[j] ||
                (int)gr_fused_fold_op(ops[k], b->dtype) != fused->fused_ops[j])
                continue;
            results[k] = gr_op_result(ops[k], tuple + gr_fused_offset(fused, j), (gr_dtype)acc, b->dtype, b->n, o->ddof);
            done[k] = 1;
        }
    free(tuple);
    return st;
}

gr_status gr_reduce_ops(gr_context *ctx, gr_buffer *b, const gr_options *o, const gr_op *ops, int count,
                        const gr_image *fused, gr_result *results) {
    ctx = gr_ctx_for(ctx, b);
    if (count < 1 || count > GR_OP_COUNT)
        return gr_fail_arg(ctx, GR_EINVAL, "ops", "1 to %d built-in ops (got %d)", GR_OP_COUNT, count);
    for (int k = 0; k < count; k++) {
        if (!gr_op_desc_get(ops[k])) return gr_fail_arg(ctx, GR_EINVAL, "ops", "unknown op (accepted: %s)", gr_op_names());
        for (int j = 0; j < k; j++)
            if (ops[j] == ops[k])
                return gr_fail_arg(ctx, GR_EINVAL, "ops", "'%s' is named twice (each op once)", gr_op_name(ops[k]));
    }
    if (o->user || o->cpu)
        return gr_fail_arg(ctx, GR_EINVAL, "ops", "takes built-in ops; a user operator is reduced with opts.op");
    gr_status st = gr_buffer_check_compact(ctx, b, "b");
    if (st != GR_OK) return st;
    int done[GR_OP_COUNT] = {0};
    if (fusable(ctx, b, o, fused) && (st = run_fused(ctx, b, o, fused, ops, count, results, done)) != GR_OK)
        return st;
    for (int k = 0; k < count; k++) {
        if (done[k]) continue;
        gr_options one = *o;
        one.op = ops[k];
        if ((st = gr_reduce(ctx, b, &one, &results[k])) != GR_OK) return st;
    }
    return GR_OK;
}
