/*
 * op_pass.c -- a built-in op's kernel behind plan.h's interface: the passes of a catalogue row (its
 * gr_kernel from cuda/variants/, or its host function), the result from the op's accumulator
 * (gr_op_result) or from partials the CPU combines first (gr_cpu_finish); for segments the policy's
 * shape and segmented kernel, on the host a loop of the cpu backend per segment, and reduce_many's items
 * read back as the values gr_reduce would give.
 */
#include "core/op_pass.h"
#include "core/registry.h"
#include "ops/cpu_backend.h"
#include "ops/ops.h"

#include <string.h>

static int launch(const gr_run *run, gr_launch *L) { return run->row->kernel->launch(L); }

static size_t grid(const gr_run *run, size_t n, int block, size_t elem_bytes, const gr_launch_device *dev) {
    return run->row->kernel->grid(n, block, elem_bytes, dev);
}

static size_t scratch(const gr_run *run, size_t n) {
    const gr_kernel *k = run->row->kernel;
    return k->scratch ? k->scratch(n, run->plan.in_dtype, run->plan.op, run->plan.acc) : 0;
}

static gr_status host(gr_context *ctx, const gr_run *run, const void *in, size_t n, uint64_t first, void *acc) {
    return run->row->host(ctx, in, n, first, run->plan.in_dtype, run->plan.op, run->plan.acc, acc);
}

static gr_status result(gr_context *ctx, const gr_run *run, gr_slot *slot, const void *acc, size_t n,
                        gr_result *out) {
    (void)ctx, (void)slot;
    const gr_plan *p = &run->plan;
    *out = gr_op_result(p->op, acc, p->acc, p->in_dtype, n, p->ddof);
    return GR_OK;
}

static gr_status finish(gr_context *ctx, const gr_run *run, gr_slot *slot, const void *accs, size_t count, size_t n,
                        gr_result *out) {
    (void)slot;
    const gr_plan *p = &run->plan;
    return gr_cpu_finish(ctx, accs, count, p->acc, p->op, p->in_dtype, n, p->ddof, out);
}

static gr_seg_shape shape(const gr_context *ctx, const gr_run *run, size_t n, size_t k) {
    return gr_policy_segments(ctx, n, k, gr_dtype_size(run->plan.in_dtype));
}

static int segments(gr_context *ctx, const gr_run *run, gr_seg_launch *L) {
    (void)ctx, (void)run;
    return gr_segmented.launch(L);
}

/* A result value stored as element i of a result buffer of dtype t (and/or's booleans as 0/1 bytes). */
gr_status gr_segment_result_store(gr_context *ctx, void *p, size_t i, gr_dtype t, gr_scalar v) {
    if (v.kind == GR_SCALAR_BOOL) {
        int b = v.v.b;
        v.kind = GR_SCALAR_UINT;
        v.v.u = (uint64_t)b;
    }
    return gr_scalar_store(ctx, v, t, (char *)p + i * gr_dtype_size(t), "result");
}

static gr_status segments_host(gr_context *ctx, const gr_run *run, const void *in, size_t size, const int64_t *bounds,
                               size_t k, gr_buffer *out[2]) {
    const gr_plan *p = &run->plan;
    const gr_op_desc *d = gr_op_desc_get(p->op);
    gr_dtype t = p->in_dtype;
    size_t es = gr_dtype_size(t);
    const char *base = in;
    int count = run->results;
    gr_dtype rt[2] = {gr_buffer_dtype(out[0]), count > 1 ? gr_buffer_dtype(out[1]) : GR_UINT8};
    void *dst[2] = {gr_buffer_data(out[0]), count > 1 ? gr_buffer_data(out[1]) : NULL};
    for (size_t s = 0; s < k; s++) {
        size_t lo = size ? s * size : (size_t)bounds[s], hi = size ? lo + size : (size_t)bounds[s + 1];
        unsigned char a[GR_ACC_MAX];
        gr_status st = gr_cpu_reduce(ctx, base + lo * es, hi - lo, 0, t, p->op, p->acc, 0, a);
        if (st != GR_OK) return st;
        gr_result r = gr_host_result(d, t, p->acc, a, hi - lo, p->ddof);
        for (int i = 0; i < count && st == GR_OK; i++) st = gr_segment_result_store(ctx, dst[i], s, rt[i], r.value[i]);
        if (st != GR_OK) return st;
    }
    return GR_OK;
}

/* A result read back from the result elements of one item: the same values gr_reduce would give. */
static gr_result item(const gr_run *run, const void *out0, const void *out1, size_t i) {
    const gr_op_desc *d = gr_op_desc_get(run->plan.op);
    gr_result r = {0};
    r.count = d->arity;
    const void *src[2] = {out0, out1};
    for (int k = 0; k < d->arity; k++) {
        const char *p = (const char *)src[k] + i * gr_dtype_size(run->out_dtype[k]);
        gr_scalar s = gr_scalar_load(p, run->out_dtype[k]);
        if (d->result == GR_RESULT_BOOL) {
            s.kind = GR_SCALAR_BOOL;
            s.v.b = *(const uint8_t *)p != 0;
        }
        r.value[k] = s;
    }
    return r;
}

const gr_pass_kernel gr_op_pass = {
    .what = "variant '%s'", .launch = launch, .grid = grid, .scratch = scratch, .host = host, .result = result,
    .finish = finish, .shape = shape, .segments = segments, .segments_host = segments_host, .item = item,
};
