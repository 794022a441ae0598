/*
 * exact_pass.c -- the pass of a gpu_to_gpu reduction (exact_run.c plans it): the exact kernel
 * (cuda/kernels/exact.cu) launched into one gr_xsum in the slot's device scratch, which comes back to pinned
 * memory (2.3 KB) and is rounded here with exact_acc.h's code; or the same sums computed on the host.
 * A block folds at most 2^30 elements per launch (its shared words then cannot overflow): longer
 * inputs take several launches into the same sums. exec.c runs a plan's pass through here.
 */
#include "core/exact_pass.h"
#include "base/device.h"
#include "base/error.h"
#include "ops/exact.h"
#include "base/memory.h"

#include <stdlib.h>
#include <string.h>

void gr_exact_result(const gr_xsum *a, const gr_plan *plan, gr_result *out) {
    memset(out, 0, sizeof *out);
    out->count = 1;
    out->value[0].kind = GR_SCALAR_FLOAT;
    out->value[0].v.f = gr_x_finish(a, plan->op, plan->n, plan->ddof, plan->acc == GR_FLOAT32);
}

gr_status gr_exact_host(gr_context *ctx, const void *in, const gr_plan *plan, gr_result *out) {
    gr_xsum *a = calloc(1, sizeof *a);
    if (!a) return gr_fail(ctx, GR_ENOMEM, "out of host memory");
    gr_exact_add_values(a, in, plan->n, plan->in_dtype, plan->op);
    gr_exact_result(a, plan, out);
    free(a);
    return GR_OK;
}

gr_status gr_exact_launch_into(gr_context *ctx, const void *in, size_t n, const gr_plan *plan, size_t grid,
                               void *sums, void *stream) {
    size_t es = gr_dtype_size(plan->in_dtype), per = grid * GR_EXACT_MOST_PER_BLOCK;
    for (size_t lo = 0; lo < n; lo += per) {
        gr_exact_launch L = {
            .in = (const char *)in + lo * es, .n = n - lo < per ? n - lo : per, .in_dtype = plan->in_dtype,
            .op = plan->op, .sums = sums, .grid = grid, .block = plan->pass[0].block, .stream = stream,
        };
        int rc = gr_fault_hit(ctx, GR_FAULT_LAUNCH);
        if (rc == 0) rc = gr_exact_gpu.launch(&L);
        if (rc) return gr_fail_dev_at(ctx, rc, "gpu_to_gpu exact kernel", L.site);
    }
    return GR_OK;
}

gr_status gr_exact_start(gr_context *ctx, const void *in, const gr_plan *plan, gr_slot *slot, void *stream) {
    int rc = gr_dev_memset(slot->dev, 0, sizeof(gr_xsum), stream);
    if (rc) return gr_fail_dev(ctx, rc, "zeroing the exact sums");
    gr_status st = gr_exact_launch_into(ctx, in, plan->n, plan, plan->pass[0].blocks, slot->dev, stream);
    if (st != GR_OK) return st;
    rc = gr_copy(ctx, slot->host, slot->dev, sizeof(gr_xsum), stream);
    if (rc == 0) rc = gr_dev_event_record(slot->done, stream);
    slot->stream = stream;
    slot->flagged = 0;
    return rc ? gr_fail_dev(ctx, rc, "copying the exact sums back") : GR_OK;
}

gr_status gr_exact_collect(gr_context *ctx, const gr_plan *plan, gr_slot *slot, gr_result *out) {
    int rc = gr_dev_event_sync(slot->done);
    if (rc) return gr_fail_dev(ctx, rc, "gpu_to_gpu reduction");
    gr_exact_result((const gr_xsum *)slot->host, plan, out);
    return GR_OK;
}

