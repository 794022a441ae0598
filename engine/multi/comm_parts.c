/*
 * comm_parts.c -- c:reduce of one value for the ops whose ranks' results cannot be combined by one
 * all-reduce of those results: a mean needs the sums and the counts, a variance each rank's count, mean
 * and M2, an argmin the values, the indices and where each rank's data begin. So each rank reduces its
 * buffer up to the combined accumulator that gr_reduce would turn into its result, writes it with its
 * element count into a record of bytes, comm.c gathers every rank's record to every rank
 * (ncclAllGather), and each rank merges them here, in rank order, by the same code: every rank gets the
 * same bits, and one rank, or a job where one rank holds every element, gets gr_reduce's own.
 *
 * The accumulator is gr_reduce's: the run it plans, with its kernel's `result` and `finish` replaced by
 * two that keep the combined accumulator instead of turning it into a value (plan.h's interface; the
 * device passes, a host finish and a host variant all end in one of the two).
 *
 * Merging: as gr.sharded merges its shards -- by the op's own combine in the accumulator's dtype (Chan's
 * formula for var/std, Blue's three sums for norm; float32 for float32 data unless acc = "float64"), so
 * the result is the one a reduction of all the data would give in some order of its partials;
 * argmin/argmax indices are moved by the elements of the ranks before, ties and NaN decided by the
 * op's rule (the first index wins); gpu_to_gpu's exact sums are merged exactly and rounded once: the
 * bits of one buffer holding every rank's data.
 */
#include "multi/comm_parts.h"
#include "base/device.h"
#include "base/dtype.h"
#include "base/error.h"
#include "base/memory.h"
#include "core/buffer.h"
#include "core/context.h"
#include "core/exec.h"
#include "core/plan.h"
#include "core/policy.h"
#include "core/pool.h"
#include "ops/cpu_backend.h"
#include "ops/exact.h"
#include "ops/op_math.h"
#include "ops/ops.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* What a rank reduced and how it went; the accumulator's bytes follow (GR_ACC_MAX, or the exact sums). */
typedef struct {
    uint64_t n;                 /* elements of its buffer */
    int32_t status;             /* GR_OK, or its own failure */
    int32_t op, dtype, acc, ddof, exact;
} part_head;

#define HEAD_BYTES ((sizeof(part_head) + 15) / 16 * 16)

static int exact(const gr_options *o) { return o->determinism == GR_DET_GPU_TO_GPU; }

/* Every op whose accumulator is more than its result, or whose result is not its accumulator (mean); the
 * others (comm.c's across_ops) combine by one all-reduce of the ranks' values, but at gpu_to_gpu. */
int gr_part_gathered(const gr_options *o) {
    const gr_op_desc *d = gr_op_desc_get(o->op);
    return exact(o) || (d && (d->family != GR_FAMILY_VALUE || d->result == GR_RESULT_MEAN));
}

size_t gr_part_bytes(const gr_options *o) {
    size_t body = exact(o) ? sizeof(gr_xsum) : GR_ACC_MAX;
    return HEAD_BYTES + (body + 15) / 16 * 16;
}

/* ---- this rank's accumulator ---------------------------------------------------------------------- */

/* A run whose kernel keeps the combined accumulator at `acc` instead of making the result. */
typedef struct {
    gr_run run;                 /* first: the kernel's methods get &run and find the rest from it */
    gr_pass_kernel kernel;      /* the run's own kernel, result and finish replaced */
    const gr_pass_kernel *own;
    void *acc;
} kept_run;

static gr_status keep_value(gr_context *ctx, const gr_run *run, gr_slot *slot, const void *acc, size_t n,
                            gr_result *out) {
    (void)ctx, (void)slot, (void)n;
    memcpy(((const kept_run *)run)->acc, acc, run->plan.acc_size);
    memset(out, 0, sizeof *out);
    return GR_OK;
}

/* Accumulators the host combines (a finish on the host, a host variant's staged pieces), in order, as
 * the kernel's own finish combines them before it makes the result: the exact sums merged; the values
 * of the ops that fold themselves reduced again as elements; any other by the op's combine. */
static gr_status keep_partials(gr_context *ctx, const gr_run *run, gr_slot *slot, const void *accs, size_t count,
                               size_t n, gr_result *out) {
    (void)slot, (void)n;
    const gr_plan *p = &run->plan;
    void *acc = ((const kept_run *)run)->acc;
    memset(out, 0, sizeof *out);
    if (p->exact) {
        gr_xsum sum, one;
        memset(&sum, 0, sizeof sum);
        for (size_t i = 0; i < count; i++) {
            memcpy(&one, (const char *)accs + i * sizeof one, sizeof one);
            gr_x_merge(&sum, &one);
        }
        memcpy(acc, &sum, sizeof sum);
        return GR_OK;
    }
    const gr_op_desc *d = gr_op_desc_get(p->op);
    if (gr_op_folds_itself(d)) return gr_cpu_reduce(ctx, accs, count, 0, p->acc, p->op, p->acc, 0, acc);
    gr_host_identity(d, p->in_dtype, p->acc, acc);
    for (size_t i = 0; i < count; i++) gr_host_combine(d, p->in_dtype, p->acc, acc, (const char *)accs + i * p->acc_size);
    return GR_OK;
}

/* A host variant over device memory: the data through pinned memory in pieces of the policy's staging
 * size, each piece's accumulator made with its first index, the pieces then combined in order -- the
 * pieces gr_reduce makes, so the accumulator is its. */
static gr_status through_pinned(gr_context *ctx, const gr_buffer *b, kept_run *k) {
    size_t es = gr_dtype_size(b->dtype), per = gr_policy_stage_bytes() / es, as = k->run.plan.acc_size;
    size_t pieces = (b->n + per - 1) / per;
    gr_slot *slot;
    gr_status st = gr_slot_acquire(ctx, 0, (b->n < per ? b->n : per) * es, &slot);
    if (st != GR_OK) return st;
    char *accs = malloc(pieces * as);
    if (!accs) st = gr_fail(ctx, GR_ENOMEM, "out of host memory");
    for (size_t i = 0; i < pieces && st == GR_OK; i++) {
        size_t lo = i * per, len = b->n - lo < per ? b->n - lo : per;
        int rc = gr_copy(ctx, slot->host, (const char *)gr_buffer_data(b) + lo * es, len * es, ctx->stream);
        if (rc == 0) rc = gr_dev_stream_sync(ctx->stream);
        st = rc ? gr_fail_dev(ctx, rc, "reduce: the data to the host")
                : k->own->host(ctx, &k->run, slot->host, len, lo, accs + i * as);
    }
    gr_result unused;
    if (st == GR_OK) st = keep_partials(ctx, &k->run, NULL, accs, pieces, b->n, &unused);
    free(accs);
    gr_slot_release(ctx, slot);
    return st;
}

/* b's accumulator at acc, by the run gr_reduce plans for it (h: what was reduced). */
static gr_status accumulate(gr_context *ctx, gr_buffer *b, const gr_options *o, part_head *h, void *acc) {
    ctx = gr_ctx_for(ctx, b);
    gr_status st = gr_buffer_check_compact(ctx, b, "b");
    if (st != GR_OK) return st;
    if (o->stream && o->stream->device != ctx->device) return gr_stream_misplaced(ctx, o->stream);
    kept_run k;
    memset(&k, 0, sizeof k);
    if ((st = gr_plan_run(ctx, b->n, b->dtype, gr_buffer_where(b), o, &k.run)) != GR_OK) return st;
    h->acc = (int32_t)k.run.plan.acc;
    if (k.run.plan.npasses == 0) return GR_OK;         /* empty: nothing to merge */
    h->n = b->n;
    k.own = k.run.kernel;
    k.kernel = *k.own;
    k.kernel.result = keep_value;
    k.kernel.finish = keep_partials;
    k.run.kernel = &k.kernel;
    k.acc = acc;
    if (!k.run.plan.pass[0].on_host) {
        gr_inputs in;
        gr_inputs_one(&in, gr_buffer_data(b), b->dtype, b->n);
        gr_result unused;
        return gr_exec(ctx, &in, &k.run, o->stream && o->stream->handle ? o->stream->handle : ctx->stream, &unused);
    }
    if (ctx->base.backend == GR_BACKEND_CPU || gr_buffer_where(b) == GR_HOST)
        return k.own->host(ctx, &k.run, gr_buffer_data(b), b->n, 0, acc);
    return through_pinned(ctx, b, &k);
}

gr_status gr_part_make(gr_context *ctx, gr_buffer *b, const gr_options *o, void *rec) {
    memset(rec, 0, gr_part_bytes(o));
    part_head h = {0, GR_OK, (int32_t)o->op, (int32_t)b->dtype, -1, o->ddof, exact(o)};
    h.status = accumulate(ctx, b, o, &h, (char *)rec + HEAD_BYTES);
    if (h.status != GR_OK) h.n = 0;
    memcpy(rec, &h, sizeof h);
    return h.status;
}

/* ---- the records merged ------------------------------------------------------------------------- */

static part_head head_of(const void *recs, size_t bytes, int r) {
    part_head h;
    memcpy(&h, (const char *)recs + (size_t)r * bytes, sizeof h);
    return h;
}

static const void *body_of(const void *recs, size_t bytes, int r) {
    return (const char *)recs + (size_t)r * bytes + HEAD_BYTES;
}

/* GR_OK when every rank reduced, and reduced what rank 0 did; else the first difference, named. */
static gr_status same_calls(gr_context *ctx, const void *recs, size_t bytes, int count) {
    part_head h0 = head_of(recs, bytes, 0);
    for (int r = 0; r < count; r++) {
        part_head h = head_of(recs, bytes, r);
        if (h.status != GR_OK)
            return gr_fail(ctx, (gr_status)h.status, "rank %d of %d could not reduce its part (its own error says "
                           "why)", r, count);
    }
    for (int r = 1; r < count; r++) {
        part_head h = head_of(recs, bytes, r);
        if (h.op == h0.op && h.dtype == h0.dtype && h.acc == h0.acc && h.ddof == h0.ddof && h.exact == h0.exact)
            continue;
        return gr_fail_arg(ctx, GR_EINVAL, "b", "rank %d reduced %s with '%s' (accumulator %s, ddof %d), rank 0 %s "
                           "with '%s' (accumulator %s, ddof %d): every rank makes the same call on the same dtype",
                           r, gr_dtype_name((gr_dtype)h.dtype), gr_op_name((gr_op)h.op), gr_dtype_name((gr_dtype)h.acc),
                           (int)h.ddof, gr_dtype_name((gr_dtype)h0.dtype), gr_op_name((gr_op)h0.op),
                           gr_dtype_name((gr_dtype)h0.acc), (int)h0.ddof);
    }
    return GR_OK;
}

/* gpu_to_gpu: the exact sums of the ranks that hold elements merged, rounded once for n elements. */
static gr_result merge_exact(const void *recs, size_t bytes, int count, part_head h0, uint64_t n) {
    gr_xsum sum, one;
    memset(&sum, 0, sizeof sum);
    for (int r = 0; r < count; r++) {
        if (head_of(recs, bytes, r).n == 0) continue;
        memcpy(&one, body_of(recs, bytes, r), sizeof one);
        gr_x_merge(&sum, &one);
    }
    gr_result out = {0};
    out.count = 1;
    out.value[0].kind = GR_SCALAR_FLOAT;
    out.value[0].v.f = gr_x_finish(&sum, h0.op, n, h0.ddof, h0.acc == GR_FLOAT32);
    return out;
}

gr_status gr_part_merge(gr_context *ctx, const void *recs, size_t bytes, int count, gr_result *out) {
    gr_status st = same_calls(ctx, recs, bytes, count);
    if (st != GR_OK) return st;
    part_head h0 = head_of(recs, bytes, 0);
    gr_op op = (gr_op)h0.op;
    gr_dtype t = (gr_dtype)h0.dtype, acc = (gr_dtype)h0.acc;
    const gr_op_desc *d = gr_op_desc_get(op);
    uint64_t n = 0;
    for (int r = 0; r < count; r++) n += head_of(recs, bytes, r).n;
    if (n == 0) return gr_op_empty_result(ctx, op, t, acc, out);
    if (h0.exact) {
        *out = merge_exact(recs, bytes, count, h0, n);
        return GR_OK;
    }
    int arg = gr_op_family(d, t) == GR_FAMILY_ARG;
    unsigned char merged[GR_ACC_MAX], one[GR_ACC_MAX];
    uint64_t before = 0;                /* elements of the ranks before r: where its data begin */
    int first = 1;
    for (int r = 0; r < count; r++) {
        uint64_t k = head_of(recs, bytes, r).n;
        if (k == 0) continue;
        memcpy(one, body_of(recs, bytes, r), GR_ACC_MAX);
        if (arg) {                      /* {u64 0-based index; value}: an index into the concatenation */
            uint64_t at;
            memcpy(&at, one, sizeof at);
            if (at != GR_NO_INDEX) at += before;
            memcpy(one, &at, sizeof at);
        }
        /* the first is taken as it is, not combined into an identity: one rank's sum of -0.0 stays -0.0 */
        if (first) memcpy(merged, one, GR_ACC_MAX);
        else gr_host_combine(d, t, acc, merged, one);
        first = 0;
        before += k;
    }
    *out = gr_op_result(op, merged, acc, t, (size_t)n, h0.ddof);
    return GR_OK;
}

/* ---- in one process --------------------------------------------------------------------------------- */

gr_status gr_comm_combine_parts(gr_context *ctx, gr_buffer *const *parts, size_t count, const gr_options *o,
                                gr_result *out) {
    if (count < 1 || count > 65536)
        return gr_fail_arg(ctx, GR_EINVAL, "parts", "expected 1 to 65536 buffers (got %zu)", count);
    if (!gr_part_gathered(o))
        return gr_fail_arg(ctx, GR_EINVAL, "op", "'%s' is combined by NCCL's all-reduce of the ranks' results, not "
                           "from their parts (parts are gathered for mean, nanmean, var, std, norm, argmin, argmax, "
                           "minmax, and every op at determinism gpu_to_gpu)", gr_op_name(o->op));
    size_t bytes = gr_part_bytes(o);
    char *recs = malloc(bytes * count);
    if (!recs) return gr_fail(ctx, GR_ENOMEM, "out of host memory");
    gr_status st = GR_OK;
    for (size_t i = 0; i < count && st == GR_OK; i++) st = gr_part_make(ctx, parts[i], o, recs + i * bytes);
    gr_ctx_enter(ctx);
    if (st == GR_OK) st = gr_part_merge(ctx, recs, bytes, (int)count, out);
    free(recs);
    return st;
}
