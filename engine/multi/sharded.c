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
#include "core/exec.h"
#include "core/image.h"
#include "core/operator_cpu.h"
#include "core/policy.h"
#include "core/pool.h"
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
        if (exact(o)) {
            gr_exact_add_values(sums, data, p[i].n, t, o->op);
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
    if (!o->user && !exact(o) && co.variant < 0) co.variant = gr_policy_streamed_variant(t, o->op);
    gr_status st = gr_plan_run(c, p->n, t, GR_DEVICE, &co, run);
    if (st == GR_OK && (run->plan.npasses != 1 || run->plan.pass[0].on_host))
        st = gr_fail_arg(c, GR_EINVAL, "variant", "sharded reductions need a device variant with the 'single' "
                         "finish");
    return st;
}

/* Queues the piece's pass on its device's stream, its value to the slot (gr_run_value); its end is the
 * slot's event. */
static gr_status queue_piece(gr_context *c, const gr_shard_piece *p, const gr_run *run, gr_slot *slot) {
    gr_inputs in;
    gr_inputs_one(&in, (const char *)gr_buffer_data(p->shard) + p->at * gr_dtype_size(p->shard->dtype),
                  p->shard->dtype, p->n);
    return gr_exec_start(c, &in, p->first, run, slot, c->stream, 0);
}

static gr_status pieces_on_devices(gr_context *ctx, const gr_shard_piece *p, size_t count, const gr_options *o,
                                   size_t as, char *accs, size_t *used, gr_xsum *sums) {
    gr_slot **slot = calloc(count, sizeof *slot);
    gr_context **on = calloc(count, sizeof *on);
    gr_xsum *one = exact(o) ? malloc(sizeof *one) : NULL;
    if (!slot || !on || (exact(o) && !one)) {
        free(slot);
        free(on);
        free(one);
        return gr_fail(ctx, GR_ENOMEM, "out of host memory");
    }
    gr_status st = GR_OK;
    for (size_t i = 0; i < count && st == GR_OK; i++) {
        if (p[i].n == 0) continue;
        gr_context *c = gr_ctx_for(ctx, p[i].shard);
        gr_run run;
        st = plan_piece(c, &p[i], o, &run);
        if (st == GR_OK) st = gr_slot_acquire(c, run.plan.dev_bytes, run.plan.host_bytes, &slot[i]);
        if (st != GR_OK) break;
        on[i] = c;
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
            memcpy(accs + (*used)++ * as, slot[i]->result, as);
        }
        gr_slot_release(c, slot[i]);
    }
    gr_ctx_enter(ctx);
    free(slot);
    free(on);
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
    gr_shard_piece *pieces = malloc(count * sizeof *pieces);
    if (!pieces) return gr_fail(ctx, GR_ENOMEM, "out of host memory");
    uint64_t first = 0;
    for (size_t i = 0; i < count; first += shards[i]->n, i++)
        pieces[i] = (gr_shard_piece){shards[i], 0, shards[i]->n, first};
    st = gr_shard_pieces_reduce(ctx, pieces, count, o, n, out);
    free(pieces);
    return st;
}
