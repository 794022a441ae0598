/*
 * sharded.c -- one reduction over the shards of a logical buffer, each on its own device.
 *
 * A sharded buffer (gr.sharded) is a list of plain buffers that hold consecutive pieces of one array:
 * shard i's first element has the index of the elements before it. Every piece (a whole shard here, a
 * part of a segment in sharded_segments.c) is reduced on its device, at once: a single-pass kernel per
 * piece, queued on that device's stream with the piece's first index (so argmin/argmax report indices of
 * the whole array, and an operator's map sees them), leaves its accumulator in its slot. The host then
 * waits for each device in piece order and combines:
 *   - the built-in ops with the CPU finish (cpu_backend.c), which merges every op's accumulators --
 *     sums, means, variances (Chan), arg indices: a float result is the same on every run (the order
 *     never depends on which device finished first); integer results and min/max equal one device's;
 *   - gpu_to_gpu's exact sums (exact_acc.h) merged and rounded once: one device's bits, the host's too;
 *   - a user operator's accumulators copied to the first piece's device and combined in order by the
 *     operator's own gr_op_partials in one block, then its post: no cpu functions needed.
 * A sharded gr.dot is a sum whose pieces read two buffers (gr_dot_shards): each piece's pass is the dot
 * kernel's (core/dot.h), its accumulator the sum's, combined as a sum's. Several ops (opts.ops,
 * gr_reduce_shards_ops) read each shard once with a fused image's kernel where one covers them: each
 * piece's tuple holds every op's accumulator as its own single kernel leaves it, so each op's combine is
 * the one its own call makes.
 *
 * On the cpu backend (and for shards in host memory) each piece is reduced by the host backend with its
 * first index, then combined the same way.
 */
#include "multi/sharded.h"
#include "base/device.h"
#include "base/error.h"
#include "base/launch.h"
#include "base/memory.h"
#include "core/context.h"
#include "core/dot.h"
#include "core/exec.h"
#include "core/image.h"
#include "core/operator_cpu.h"
#include "core/policy.h"
#include "core/pool.h"
#include "core/reduce_ops.h"
#include "core/segments.h"
#include "core/buffer.h"
#include "ops/cpu_backend.h"
#include "ops/exact.h"
#include "ops/ops.h"

#include <stdlib.h>
#include <string.h>

#define COMBINE_BLOCK 256       /* the one block that folds an operator's accumulators (at most 256) */

/* The shards are read as one array: a strided view (gr_buffer_is_compact) is refused. */
static gr_status shards_compact(gr_context *ctx, gr_buffer *const *shards, size_t count) {
    for (size_t i = 0; i < count; i++)
        if (shards[i] && !gr_buffer_is_compact(shards[i]))
            return gr_fail_arg(ctx, GR_EINVAL, "shards", "shard %zu is a strided view (shards are compact)", i + 1);
    return GR_OK;
}

gr_status gr_shards_check(gr_context *ctx, gr_buffer *const *shards, size_t count, const gr_options *o) {
    if (count == 0 || count > GR_MAX_SLOTS)
        return gr_fail_arg(ctx, GR_EINVAL, "shards", "expected 1 to %d shards (got %zu)", GR_MAX_SLOTS, count);
    gr_status cs = shards_compact(ctx, shards, count);
    if (cs != GR_OK) return cs;
    for (size_t i = 1; i < count; i++)
        if (shards[i]->dtype != shards[0]->dtype)
            return gr_fail_arg(ctx, GR_EINVAL, "shards", "shard %zu is %s, shard 1 %s (a sharded buffer has one "
                               "dtype)", i + 1, gr_dtype_name(shards[i]->dtype), gr_dtype_name(shards[0]->dtype));
    if (o->stream)
        return gr_fail_arg(ctx, GR_EINVAL, "stream", "a sharded reduction runs on the stream of each shard's "
                           "device: it takes no stream");
    if (o->finish != GR_FINISH_AUTO && o->finish != GR_FINISH_SINGLE)
        return gr_fail_arg(ctx, GR_EINVAL, "finish", "each shard is finished in one kernel and the shards on the "
                           "host (accepted: auto, single)");
    if (!o->user && !gr_op_desc_get(o->op))
        return gr_fail_arg(ctx, GR_EINVAL, "op", "unknown op (accepted: %s)", gr_op_names());
    return GR_OK;
}

static int exact(const gr_options *o) { return o->determinism == GR_DET_GPU_TO_GPU; }

/* The bytes of one piece's accumulator; the exact sums are merged as they come instead. */
static size_t acc_bytes(gr_context *ctx, const gr_options *o, gr_dtype t, gr_dtype *acc) {
    if (o->user) return o->user->acc_size;
    int a = gr_op_acc_dtype(ctx, o->op, t, o->acc);
    if (a < 0) return 0;
    *acc = (gr_dtype)a;
    return exact(o) ? 1 : gr_op_acc_size(o->op, t, *acc);
}

/* ---- on the host ------------------------------------------------------------------------------------- */

static gr_status pieces_on_host(gr_context *ctx, const gr_shard_piece *p, size_t count, const gr_options *o,
                                gr_dtype acc, size_t as, char *accs, size_t *used, gr_xsum *sums) {
    if (o->user)
        return gr_fail_arg(ctx, GR_EINVAL, "op", "a user operator's kernels reduce device shards (give the "
                           "operator cpu functions for the cpu backend)");
    for (size_t i = 0; i < count; i++) {
        if (p[i].n == 0) continue;
        gr_dtype t = p[i].shard->dtype;
        const char *data = (const char *)gr_buffer_data(p[i].shard) + p[i].at * gr_dtype_size(t);
        const char *with = p[i].with ? (const char *)gr_buffer_data(p[i].with) + p[i].at * gr_dtype_size(t) : NULL;
        if (exact(o)) {
            if (with) gr_exact_add_products(sums, data, with, p[i].n, t);
            else gr_exact_add_values(sums, data, p[i].n, t, o->op);
            continue;
        }
        if (with) {
            gr_dot_host_acc(data, with, p[i].n, t, acc, accs + (*used)++ * as);
            continue;
        }
        gr_status st = gr_cpu_reduce(ctx, data, p[i].n, p[i].first, t, o->op, acc, 0, accs + *used * as);
        if (st != GR_OK) return st;
        ++*used;
    }
    return GR_OK;
}

/* ---- on the devices ---------------------------------------------------------------------------------- */

/* The one-pass plan of a piece on its device's context c: the exact kernel's, or the single finish of
 * a variant (the streamed chunks' default) or of the operator's kernel (the plan takes its copy loaded
 * on that device). */
static gr_status plan_piece(gr_context *c, const gr_shard_piece *p, const gr_options *o, gr_run *run) {
    gr_dtype t = p->shard->dtype;
    gr_options co = *o;
    co.finish = GR_FINISH_SINGLE;
    if (!o->user && !exact(o) && co.variant < 0 && !p->with) co.variant = gr_policy_streamed_variant(t, o->op);
    gr_status st = p->with ? gr_dot_piece_plan(c, t, p->n, &co, run) : gr_plan_run(c, p->n, t, GR_DEVICE, &co, run);
    if (st == GR_OK && (run->plan.npasses != 1 || run->plan.pass[0].on_host))
        st = gr_fail_arg(c, GR_EINVAL, "variant", "sharded reductions need a device variant with the 'single' "
                         "finish");
    return st;
}

/* Queues the piece's pass on its device's stream, its value to the slot (gr_run_value); its end is the
 * slot's event. */
static gr_status queue_piece(gr_context *c, const gr_shard_piece *p, const gr_run *run, gr_slot *slot) {
    size_t skip = p->at * gr_dtype_size(p->shard->dtype);
    gr_inputs in;
    gr_inputs_one(&in, (const char *)gr_buffer_data(p->shard) + skip, p->shard->dtype, p->n);
    if (p->with) {                                  /* the second input: the same span, beside the first */
        in.at[1] = in.at[0];
        in.at[1].data = (const char *)gr_buffer_data(p->with) + skip;
        in.count = 2;
    }
    if (run->plan.acc_size <= GR_ACC_MAX) return gr_exec_start(c, &in, p->first, run, slot, c->stream, 0);
    /* a fused tuple, larger than the slot's result area: the last block writes it to the slot's pinned
     * partials (gr_run_value), as reduce_ops.c's pass does */
    gr_status st = gr_exec_single_to(c, &in, p->first, run, slot->dev, slot->counter, slot->host, c->stream);
    int rc = st == GR_OK ? gr_dev_event_record(slot->done, c->stream) : 0;
    return rc ? gr_fail_dev(c, rc, "event record") : st;
}

static gr_status pieces_on_devices(gr_context *ctx, const gr_shard_piece *p, size_t count, const gr_options *o,
                                   size_t as, char *accs, size_t *used, gr_xsum *sums) {
    gr_slot **slot = calloc(count, sizeof *slot);
    gr_context **on = calloc(count, sizeof *on);
    const void **value = calloc(count, sizeof *value);
    gr_xsum *one = exact(o) ? malloc(sizeof *one) : NULL;
    if (!slot || !on || !value || (exact(o) && !one)) {
        free(slot);
        free(on);
        free(value);
        free(one);
        return gr_fail(ctx, GR_ENOMEM, "out of host memory");
    }
    gr_status st = GR_OK;
    for (size_t i = 0; i < count && st == GR_OK; i++) {
        if (p[i].n == 0) continue;
        gr_context *c = gr_ctx_for(ctx, p[i].shard);
        gr_run run;
        st = plan_piece(c, &p[i], o, &run);
        size_t host = run.plan.host_bytes > as ? run.plan.host_bytes : as;  /* a tuple of fused ops may be large */
        if (st == GR_OK) st = gr_slot_acquire(c, run.plan.dev_bytes, host, &slot[i]);
        if (st != GR_OK) break;
        on[i] = c;
        value[i] = gr_run_value(&run, slot[i]);
        st = queue_piece(c, &p[i], &run, slot[i]);
    }
    /* every queued piece is waited for, also after a failure: its slot is reused next */
    for (size_t i = 0; i < count; i++) {
        if (!on[i]) continue;
        gr_context *c = gr_ctx_enter(on[i]);
        int rc = st == GR_OK ? gr_dev_event_sync(slot[i]->done) : gr_dev_stream_sync(c->stream);
        if (rc && st == GR_OK) st = gr_fail_dev(c, rc, "sharded reduction");
        if (st == GR_OK && exact(o)) {
            memcpy(one, slot[i]->host, sizeof *one);
            gr_x_merge(sums, one);
        } else if (st == GR_OK) {
            memcpy(accs + (*used)++ * as, value[i], as);
        }
        gr_slot_release(c, slot[i]);
    }
    gr_ctx_enter(ctx);
    free(slot);
    free(on);
    free(value);
    free(one);
    return st;
}

/* The operator's accumulators (used of them, in order) folded by its gr_op_partials in one block on
 * home's device, then its post over `total` elements. */
static gr_status combine_user(gr_context *ctx, gr_buffer *home, const gr_options *o, const char *accs, size_t used,
                              size_t total, gr_result *out) {
    gr_context *c = gr_ctx_for(ctx, home);
    const gr_image *img;
    gr_status st = gr_image_on(c, o->user, &img);
    if (st != GR_OK) return st;
    size_t bytes = used * img->acc_size, in_bytes = (bytes + 255) / 256 * 256;
    gr_slot *slot;
    if ((st = gr_slot_acquire(c, in_bytes + 256, bytes, &slot)) != GR_OK) return st;
    memcpy(slot->host, accs, bytes);
    gr_inputs in;
    gr_inputs_one(&in, slot->dev, img->acc_dtype >= 0 ? (gr_dtype)img->acc_dtype : GR_UINT8, used);
    gr_launch L = {
        .in = &in, .n = used, .in_dtype = home->dtype, .partials_in = 1, .out = (char *)slot->dev + in_bytes,
        .grid = 1, .block = COMBINE_BLOCK, .stream = c->stream, .counter = slot->counter, .final_out = slot->result,
    };
    int rc = gr_copy(c, slot->dev, slot->host, bytes, c->stream);
    if (rc == 0) rc = gr_fault_hit(c, GR_FAULT_LAUNCH);
    if (rc == 0) rc = gr_image_launch(&L, img);
    int sync = gr_dev_stream_sync(c->stream);
    if (rc == 0) rc = sync;
    st = rc ? gr_fail_dev_at(c, rc, "combining the shards' accumulators", L.site)
            : gr_image_result(c, img, slot->result, total, gr_slot_post_out(slot), c->stream, out);
    gr_slot_release(c, slot);
    gr_ctx_enter(ctx);
    return st;
}

gr_status gr_shard_pieces_reduce(gr_context *ctx, const gr_shard_piece *pieces, size_t count, const gr_options *o,
                                 size_t total, gr_result *out) {
    gr_dtype t = pieces[0].shard->dtype, acc = t;
    size_t as = acc_bytes(ctx, o, t, &acc), used = 0;
    if (as == 0) return GR_EINVAL;
    int on_host = ctx->base.backend != GR_BACKEND_CUDA;
    for (size_t i = 0; i < count; i++)
        if (gr_buffer_where(pieces[i].shard) == GR_HOST) on_host = 1;
    char *accs = malloc(count * as);
    gr_xsum *sums = exact(o) ? calloc(1, sizeof *sums) : NULL;
    if (!accs || (exact(o) && !sums)) {
        free(accs);
        return gr_fail(ctx, GR_ENOMEM, "out of host memory");
    }
    gr_status st = on_host ? pieces_on_host(ctx, pieces, count, o, acc, as, accs, &used, sums)
                           : pieces_on_devices(ctx, pieces, count, o, as, accs, &used, sums);
    if (st == GR_OK && exact(o)) {
        memset(out, 0, sizeof *out);
        out->count = 1;
        out->value[0].kind = GR_SCALAR_FLOAT;
        out->value[0].v.f = gr_x_finish(sums, o->op, total, o->ddof, acc == GR_FLOAT32);
    } else if (st == GR_OK && o->user) {
        st = combine_user(ctx, pieces[0].shard, o, accs, used, total, out);
    } else if (st == GR_OK) {
        st = gr_cpu_finish(ctx, accs, used, acc, o->op, t, total, o->ddof, out);
    }
    free(accs);
    free(sums);
    return st;
}

/* The pieces that are whole shards, in order, each counted from the elements before it; `with` (NULL: none)
 * the second input's shards (a dot's). NULL, the failure said, when host memory is short. */
static gr_shard_piece *whole_pieces(gr_context *ctx, gr_buffer *const *shards, gr_buffer *const *with,
                                    size_t count) {
    gr_shard_piece *pieces = malloc(count * sizeof *pieces);
    if (!pieces) {
        gr_fail(ctx, GR_ENOMEM, "out of host memory");
        return NULL;
    }
    uint64_t first = 0;
    for (size_t i = 0; i < count; first += shards[i]->n, i++)
        pieces[i] = (gr_shard_piece){shards[i], 0, shards[i]->n, first, with ? with[i] : NULL};
    return pieces;
}

/* ---- result buffers on the first shard's device ----------------------------------------------------------- */

gr_status gr_shards_outs_check(gr_context *ctx, gr_buffer *const *shards, size_t count, const gr_buffer *offsets,
                               gr_buffer *out[2], int nres, const gr_dtype want[2], size_t k, const char *what) {
    for (size_t i = 0; i < count; i++) {
        gr_status st = gr_segment_outs_check(ctx, shards[i], offsets, out, nres, want, k);
        if (st != GR_OK) return st;
    }
    int home = gr_buffer_device(shards[0]);
    for (int j = 0; j < nres && ctx->base.backend == GR_BACKEND_CUDA; j++)
        if (gr_buffer_device(out[j]) != home)
            return gr_fail_arg(ctx, GR_EINVAL, j ? "out2" : "out", "is on device %d: a sharded buffer's %s go to its first "
                               "shard's device, %d", gr_buffer_device(out[j]), what, home);
    for (int j = 0; j < nres; j++) {
        gr_status st = gr_storage_quiesce(gr_ctx_for(ctx, out[j]), out[j]->st);
        gr_ctx_enter(ctx);
        if (st != GR_OK) return st;
    }
    return GR_OK;
}

/* ---- whole sharded buffers ------------------------------------------------------------------------------ */

int gr_shards_by_cpu(const gr_context *ctx, gr_buffer *const *shards, size_t count, const gr_options *o) {
    int on_host = ctx->base.backend != GR_BACKEND_CUDA;
    for (size_t i = 0; i < count; i++)
        if (gr_buffer_where(shards[i]) == GR_HOST) on_host = 1;
    return o->cpu && (!o->user || on_host);
}

gr_status gr_reduce_shards(gr_context *ctx, gr_buffer *const *shards, size_t count, const gr_options *o,
                           gr_result *out) {
    if (count <= GR_MAX_SLOTS && shards_compact(ctx, shards, count) != GR_OK) return GR_EINVAL;
    if (gr_shards_by_cpu(ctx, shards, count, o)) return gr_operator_cpu_reduce(ctx, o, shards, count, out);
    gr_status st = gr_shards_check(ctx, shards, count, o);
    if (st != GR_OK) return st;
    gr_dtype t = shards[0]->dtype;
    size_t n = 0;
    int on_host = ctx->base.backend != GR_BACKEND_CUDA;
    for (size_t i = 0; i < count; i++) {
        n += shards[i]->n;
        if (gr_buffer_where(shards[i]) == GR_HOST) on_host = 1;
    }
    if ((on_host && !o->user) || exact(o)) {
        /* the options are checked as a plain buffer's would be (a device variant on the cpu backend,
         * an op or dtype gpu_to_gpu does not take) */
        gr_plan plan;
        if ((st = gr_plan_make(ctx, shards[0], o, &plan)) != GR_OK) return st;
    }
    if (n == 0 && o->user && !on_host)          /* the operator's identity, through its post */
        return gr_reduce(ctx, shards[0], o, out);
    if (n == 0 && !o->user) {
        int acc = gr_op_acc_dtype(ctx, o->op, t, o->acc);
        return acc < 0 ? GR_EINVAL : gr_op_empty_result(ctx, o->op, t, (gr_dtype)acc, out);
    }
    gr_shard_piece *pieces = whole_pieces(ctx, shards, NULL, count);
    if (!pieces) return GR_ENOMEM;
    st = gr_shard_pieces_reduce(ctx, pieces, count, o, n, out);
    free(pieces);
    return st;
}

/* ---- gr.dot of two sharded buffers ----------------------------------------------------------------------- */

gr_status gr_dot_shards_check(gr_context *ctx, gr_buffer *const *a, gr_buffer *const *b, size_t count,
                              const gr_options *o) {
    gr_status st = gr_shards_check(ctx, a, count, o);
    for (size_t i = 0; i < count && st == GR_OK; i++) {
        if (!gr_buffer_is_compact(b[i]))
            return gr_fail_arg(ctx, GR_EINVAL, "b", "shard %zu is a strided view (shards are compact)", i + 1);
        /* the same split: shard i of each on one device, of one length (gr_dot_check_pair says which differs) */
        if (a[i]->n != b[i]->n)
            return gr_fail_arg(ctx, GR_EINVAL, "b", "shard %zu of b has %zu elements, shard %zu of a %zu (gr.dot of "
                               "sharded buffers takes two of the same split)", i + 1, b[i]->n, i + 1, a[i]->n);
        st = gr_dot_check_pair(ctx, a[i], b[i], o);
    }
    return st;
}

gr_status gr_dot_shards(gr_context *ctx, gr_buffer *const *a, gr_buffer *const *b, size_t count, const gr_options *o,
                        gr_result *out) {
    gr_status st = gr_dot_shards_check(ctx, a, b, count, o);
    if (st != GR_OK) return st;
    size_t n = 0;
    for (size_t i = 0; i < count; i++) n += a[i]->n;
    gr_dtype t = a[0]->dtype;
    int acc = gr_op_acc_dtype(ctx, GR_SUM, t, o->acc);
    if (acc < 0) return GR_EINVAL;
    if (n == 0) return gr_op_empty_result(ctx, GR_SUM, t, (gr_dtype)acc, out);
    gr_shard_piece *pieces = whole_pieces(ctx, a, b, count);
    if (!pieces) return GR_ENOMEM;
    st = gr_shard_pieces_reduce(ctx, pieces, count, o, n, out);
    free(pieces);
    return st;
}

/* ---- several ops in one read of each shard ------------------------------------------------------------- */

/* Whether the fused image's kernel can stand for the ops' own reductions of the shards: device shards on
 * the GPU, below gpu_to_gpu, no kernel option, the image's dtype. */
static int shards_fusable(const gr_context *ctx, gr_buffer *const *shards, size_t count, const gr_options *o,
                          const gr_image *fused, size_t n) {
    if (!fused || fused->fused_count < 2 || fused->in != shards[0]->dtype || n == 0) return 0;
    if (ctx->base.backend != GR_BACKEND_CUDA || exact(o) || gr_options_way(o) || o->user || o->cpu) return 0;
    for (size_t i = 0; i < count; i++)
        if (gr_buffer_where(shards[i]) != GR_DEVICE) return 0;
    return 1;
}

/* One read of every shard by the fused kernel; each op it covers combined from its slot of the pieces'
 * tuples by the CPU finish its own call uses (done[k] set). */
static gr_status shards_fused(gr_context *ctx, gr_buffer *const *shards, size_t count, const gr_options *o,
                              const gr_image *fused, const gr_op *ops, int nops, size_t n, gr_result *results,
                              int *done) {
    gr_dtype t = shards[0]->dtype;
    gr_options f = gr_fused_options(o, fused);
    size_t as = fused->acc_size, used = 0;
    gr_shard_piece *pieces = whole_pieces(ctx, shards, NULL, count);
    char *tuples = malloc(count * as), *accs = malloc(count * GR_ACC_MAX);
    gr_status st = !pieces ? GR_ENOMEM : tuples && accs ? GR_OK : gr_fail(ctx, GR_ENOMEM, "out of host memory");
    if (st == GR_OK) st = pieces_on_devices(ctx, pieces, count, &f, as, tuples, &used, NULL);
    for (int k = 0; k < nops && st == GR_OK; k++) {
        int acc = gr_op_acc_dtype(ctx, ops[k], t, o->acc);
        int j = acc < 0 ? -1 : gr_fused_slot(fused, ops[k], t, acc);
        if (j < 0) continue;
        size_t bytes = gr_op_acc_size(ops[k], t, (gr_dtype)acc);
        for (size_t i = 0; i < used; i++) memcpy(accs + i * bytes, tuples + i * as + gr_fused_offset(fused, j), bytes);
        st = gr_cpu_finish(ctx, accs, used, (gr_dtype)acc, ops[k], t, n, o->ddof, &results[k]);
        done[k] = 1;
    }
    free(pieces);
    free(tuples);
    free(accs);
    return st;
}

gr_status gr_reduce_shards_ops(gr_context *ctx, gr_buffer *const *shards, size_t count, const gr_options *o,
                               const gr_op *ops, int nops, const gr_image *fused, gr_result *results) {
    gr_status st = gr_ops_check(ctx, o, ops, nops);
    gr_options one = *o;
    one.op = ops[0];
    if (st == GR_OK) st = gr_shards_check(ctx, shards, count, &one);
    if (st != GR_OK) return st;
    size_t n = 0;
    for (size_t i = 0; i < count; i++) n += shards[i]->n;
    int done[GR_OP_COUNT] = {0};
    if (shards_fusable(ctx, shards, count, o, fused, n) &&
        (st = shards_fused(ctx, shards, count, o, fused, ops, nops, n, results, done)) != GR_OK)
        return st;
    for (int k = 0; k < nops; k++) {
        if (done[k]) continue;
        one.op = ops[k];
        if ((st = gr_reduce_shards(ctx, shards, count, &one, &results[k])) != GR_OK) return st;
    }
    return GR_OK;
}
