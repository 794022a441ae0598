/*
 * segments.c -- many reductions in one call: the segments of a buffer (fixed size or CSR offsets), and
 * many buffers at once (reduce_many).
 *
 * The planner chooses the kernel (gr_plan_segments: the policy's segmented kernel for a built-in op, a user
 * operator's gr_op_segments, gpu_to_gpu's exact one), which says how it shares the segments out. On the
 * cuda backend a device buffer's segments are reduced by one launch of it, and the results stay on the
 * device; host data, and everything on the cpu backend, is reduced segment by segment on the host with
 * the same ops (host_ops.c, exact.c), whose results land in the same dtypes. reduce_many on the GPU lays
 * the buffers out as the items of one segmented launch per dtype, its results in pinned memory.
 */
#include "core/segments.h"
#include "gr.h"
#include "base/device.h"
#include "base/error.h"
#include "base/launch.h"
#include "base/memory.h"
#include "core/buffer.h"
#include "core/context.h"
#include "core/op_pass.h"
#include "core/operator_cpu.h"
#include "core/plan.h"
#include "core/policy.h"
#include "core/pool.h"
#include "jit/compile.h"
#include "ops/ops.h"

#include <stdlib.h>
#include <string.h>

/* ---- options and shapes ---------------------------------------------------------------------------- */

gr_status gr_segment_result_dtypes(gr_context *ctx, const gr_options *o, gr_dtype in, gr_dtype out[2], int *count) {
    gr_run run;
    gr_options plain = *o;          /* the dtypes do not depend on the stream (axis reductions take one) */
    plain.stream = NULL;
    gr_status st = gr_plan_segments(ctx, &plain, in, 0, &run);
    out[0] = run.out_dtype[0];
    out[1] = run.out_dtype[1];
    *count = run.results;
    return st;
}

/* Copies the k + 1 boundaries to the host (only the cpu path reads them there). */
static gr_status host_offsets(gr_context *ctx, const gr_buffer *off, int64_t **out) {
    size_t count = gr_buffer_size(off);
    *out = malloc((count ? count : 1) * sizeof **out);
    if (!*out) return gr_fail(ctx, GR_ENOMEM, "out of host memory");
    gr_status st = gr_buffer_read(ctx, off, 0, *out, count);
    if (st != GR_OK) {
        free(*out);
        *out = NULL;
    }
    return st;
}

static gr_status bad_offset(gr_context *ctx, size_t i, int64_t v, size_t n) {
    return gr_fail_arg(ctx, GR_EINVAL, "offsets", "boundary %zu (%lld) is %s (boundaries are 0-based element "
                       "offsets, non-decreasing, at most the buffer's size %zu)", i + 1, (long long)v,
                       v < 0 ? "negative" : (uint64_t)v > n ? "past the end of the buffer" : "below the one before it", n);
}

gr_status gr_segment_count_of(gr_context *ctx, size_t n, const gr_segments *seg, size_t *k) {
    if (seg->size) {
        if (n % seg->size)
            return gr_fail_arg(ctx, GR_EINVAL, "segment", "%zu does not divide the buffer's size %zu", seg->size, n);
        *k = n / seg->size;
        return GR_OK;
    }
    const gr_buffer *off = seg->offsets;
    if (!off) return gr_fail_arg(ctx, GR_EINVAL, "segment", "give a segment size or offsets");
    if (gr_buffer_dtype(off) != GR_INT64)
        return gr_fail_arg(ctx, GR_EINVAL, "offsets", "must be an int64 buffer (got %s)", gr_dtype_name(gr_buffer_dtype(off)));
    if (gr_buffer_size(off) < 1)
        return gr_fail_arg(ctx, GR_EINVAL, "offsets", "needs k + 1 boundaries, at least one (got none)");
    *k = gr_buffer_size(off) - 1;
    return GR_OK;
}

gr_status gr_segment_count(gr_context *ctx, const gr_buffer *b, const gr_segments *seg, size_t *k) {
    return gr_segment_count_of(ctx, gr_buffer_size(b), seg, k);
}

/* Boundaries checked where they are: on the device by a small kernel, on the host by a loop. Both give
 * the longest segment too (*longest, elements, when the boundaries are good; the loop takes NULL), which
 * shapes a launch over very uneven offsets (queue). The first boundary at fault is the one named. */
static gr_status check_bounds(gr_context *ctx, const int64_t *host, size_t k, size_t n, size_t *longest) {
    size_t most = 0;
    for (size_t i = 0; i <= k; i++) {
        if (host[i] < 0 || (uint64_t)host[i] > n || (i > 0 && host[i] < host[i - 1]))
            return bad_offset(ctx, i, host[i], n);
        if (i > 0 && (size_t)(host[i] - host[i - 1]) > most) most = (size_t)(host[i] - host[i - 1]);
    }
    if (longest) *longest = most;
    return GR_OK;
}

static gr_status check_offsets(gr_context *ctx, const gr_buffer *b, const gr_buffer *off, const int64_t *host,
                               size_t *longest) {
    size_t n = gr_buffer_size(b), k = gr_buffer_size(off) - 1;
    if (host) return check_bounds(ctx, host, k, n, longest);
    gr_slot *slot;
    gr_status st = gr_slot_acquire(ctx, sizeof(unsigned long long), 0, &slot);
    if (st != GR_OK) return st;
    /* the first fault in the slot's pinned result area (rare atomics); the longest segment, which every
     * block of the check raises, in device memory (atomics over PCIe to pinned memory cost about a
     * microsecond each: 4096 blocks' took 4 ms on an H100), then copied beside it */
    unsigned long long *bad = (unsigned long long *)slot->result, *most = bad + 1;
    int rc = gr_fault_hit(ctx, GR_FAULT_LAUNCH);
    if (rc == 0) rc = gr_segmented.check_offsets(gr_buffer_data(off), k, n, bad, slot->dev, ctx->stream);
    if (rc == 0) rc = gr_dev_copy(most, slot->dev, sizeof *most, ctx->stream);
    if (rc == 0) rc = gr_dev_stream_sync(ctx->stream);
    unsigned long long at = *(volatile unsigned long long *)bad, seen = *(volatile unsigned long long *)most;
    gr_slot_release(ctx, slot);
    if (rc) return gr_fail_dev(ctx, rc, "checking the offsets");
    if (at == ~0ull) {
        *longest = (size_t)seen;
        return GR_OK;
    }
    int64_t v = 0;
    gr_buffer_read(ctx, off, (size_t)at - 1, &v, 1);
    return bad_offset(ctx, (size_t)at - 1, v, n);
}

gr_status gr_segment_bounds_read(gr_context *ctx, size_t n, const gr_segments *seg, int64_t **out) {
    size_t k;
    *out = NULL;
    gr_status st = gr_segment_count_of(ctx, n, seg, &k);
    if (st == GR_OK && seg->size)
        st = gr_fail_arg(ctx, GR_EINVAL, "offsets", "these segments have a size, not boundaries");
    if (st == GR_OK) st = host_offsets(ctx, seg->offsets, out);
    if (st == GR_OK && (st = check_bounds(ctx, *out, k, n, NULL)) != GR_OK) {
        free(*out);
        *out = NULL;
    }
    return st;
}

gr_status gr_segment_offsets_read(gr_context *ctx, const gr_buffer *b, const gr_segments *seg, int64_t **out) {
    return gr_segment_bounds_read(ctx, gr_buffer_size(b), seg, out);
}

/* Whether two buffers share bytes (views of one storage whose element ranges meet). */
static int overlap(const gr_buffer *a, const gr_buffer *b) {
    if (!a || !b || a->st != b->st) return 0;
    size_t alo = a->offset * gr_dtype_size(a->dtype), ahi = alo + a->n * gr_dtype_size(a->dtype);
    size_t blo = b->offset * gr_dtype_size(b->dtype), bhi = blo + b->n * gr_dtype_size(b->dtype);
    return alo < bhi && blo < ahi;
}

gr_status gr_segment_outs_check(gr_context *ctx, const gr_buffer *b, const gr_buffer *offsets, gr_buffer *out[2],
                                int count, const gr_dtype want[2], size_t k) {
    for (int i = 0; i < count; i++) {
        const char *arg = i ? "out2" : "out";
        if (!out[i]) return gr_fail_arg(ctx, GR_EINVAL, arg, "missing result buffer");
        if (gr_buffer_dtype(out[i]) != want[i] || gr_buffer_size(out[i]) != k)
            return gr_fail_arg(ctx, GR_EINVAL, arg, "must be %zu elements of %s (got %zu of %s)", k,
                               gr_dtype_name(want[i]), gr_buffer_size(out[i]), gr_dtype_name(gr_buffer_dtype(out[i])));
        if (gr_buffer_where(out[i]) != gr_buffer_where(b) && ctx->base.backend == GR_BACKEND_CUDA)
            return gr_fail_arg(ctx, GR_EINVAL, arg, "must be in %s memory, like the input",
                               gr_buffer_where(b) == GR_HOST ? "pinned host" : "device");
        /* results written while the input is read would change what is reduced */
        if (overlap(out[i], b) || overlap(out[i], offsets) || (i == 1 && overlap(out[0], out[1])))
            return gr_fail_arg(ctx, GR_EINVAL, arg, "shares memory with the %s: give a buffer of its own",
                               overlap(out[i], b) ? "input" : overlap(out[i], offsets) ? "offsets" : "first result");
    }
    return GR_OK;
}

/* ---- the host path ------------------------------------------------------------------------------- */

/* ---- entry points -------------------------------------------------------------------------------- */

gr_status gr_reduce_segments(gr_context *ctx, gr_buffer *b, const gr_options *o, const gr_segments *seg,
                             gr_buffer *out[2]) {
    gr_seg_wait w;
    gr_status st = gr_segments_queue(ctx, b, o, seg, out, &w);
    gr_status done = gr_segments_wait(&w);
    return st != GR_OK ? st : done;
}

gr_status gr_segments_wait(gr_seg_wait *w) {
    if (!w->ctx) return GR_OK;
    gr_context *ctx = gr_ctx_enter(w->ctx);
    int sync = gr_dev_stream_sync(ctx->stream);
    int rc = w->rc ? w->rc : sync;
    if (w->slot) gr_slot_release(ctx, w->slot);
    w->ctx = NULL;
    w->slot = NULL;
    return rc ? gr_fail_dev_at(ctx, rc, w->what, w->site) : GR_OK;
}

/* gr_segments_queue, and the rows of an axis reduction (pitch: row s starts at element s * pitch of b's
 * data, which need not be compact then; 0: compact segments): axis_rows takes the launch shape from the
 * row's length alone (gr_policy_axis_rows). */
static gr_status queue(gr_context *ctx, gr_buffer *b, const gr_options *o, const gr_segments *seg, size_t pitch,
                       int axis_rows, gr_buffer *out[2], gr_seg_wait *w, gr_buffer *const *more, int nmore,
                       const gr_pass_kernel *pair, size_t longest) {
    memset(w, 0, sizeof *w);
    ctx = gr_ctx_for(ctx, b);
    gr_status cs = pitch ? GR_OK : gr_buffer_check_compact(ctx, b, "b");
    if (cs != GR_OK) return cs;
    int on_device = ctx->base.backend == GR_BACKEND_CUDA && gr_buffer_where(b) == GR_DEVICE;
    int by_cpu = gr_operator_cpu_takes(ctx, o, b);
    gr_run run;
    size_t k;
    gr_status st = gr_plan_segments(ctx, o, gr_buffer_dtype(b), on_device && !by_cpu, &run);
    if (st == GR_OK) st = gr_segment_count(ctx, b, seg, &k);
    if (st == GR_OK)
        st = gr_segment_outs_check(ctx, b, seg->size ? NULL : seg->offsets, out, run.results, run.out_dtype, k);
    /* more inputs, element for element with b's (gr.dot's second, an operator's others): the results
     * share no memory with them either */
    gr_buffer *all[GR_MAX_INPUTS] = {b};
    for (int m = 0; m < nmore; m++) all[m + 1] = more[m];
    for (int m = 0; m < nmore && st == GR_OK; m++)
        st = gr_segment_outs_check(ctx, more[m], seg->size ? NULL : seg->offsets, out, run.results, run.out_dtype, k);
    for (int m = 0; m < nmore; m++) run.with[m] = gr_buffer_data(more[m]);
    run.nwith = nmore;
    if (pair) run.kernel = pair;
    if (st == GR_OK) st = gr_same_device(ctx, b, seg->size ? NULL : seg->offsets, "offsets");
    for (int i = 0; i < run.results && st == GR_OK; i++) st = gr_same_device(ctx, b, out[i], "out");
    if (st != GR_OK) return st;
    for (int i = 0; i < run.results; i++)
        if ((st = gr_storage_quiesce(ctx, out[i]->st)) != GR_OK) return st;
    if (k == 0) return GR_OK;

    if (!on_device && !by_cpu && !run.kernel->segments_host)
        return gr_fail_arg(ctx, GR_EINVAL, "op", "a user operator's kernels reduce the segments of device buffers "
                           "(give the operator cpu functions for host data and the cpu backend)");
    if ((!on_device || by_cpu) && pitch && pitch != seg->size)
        return gr_fail(ctx, GR_EINVAL, "rows with a pitch are reduced on the device only (an engine bug)");
    if (!on_device || by_cpu) {
        int64_t *offsets = NULL;
        if (!seg->size && (st = host_offsets(ctx, seg->offsets, &offsets)) != GR_OK) return st;
        st = seg->size ? GR_OK : check_offsets(ctx, b, seg->offsets, offsets, NULL);
        if (st == GR_OK && by_cpu && nmore)
            st = gr_operator_cpu_inputs_segments(ctx, o, all, nmore + 1, seg->size, offsets, k, out[0]);
        else if (st == GR_OK && by_cpu) st = gr_operator_cpu_segments(ctx, o, &b, 1, seg->size, offsets, k, out[0]);
        else if (st == GR_OK) st = run.kernel->segments_host(ctx, &run, gr_buffer_data(b), seg->size, offsets, k, out);
        free(offsets);
        return st;
    }
    if (!&gr_segmented || !gr_segmented.launch)
        return gr_fail(ctx, GR_ENODEV, "segmented reductions need the CUDA kernels (this build has none)");
    /* offsets: the check gives their longest segment, so that very uneven ones get the uneven shape
     * whoever calls (a caller's own longest, reduce_by_key's, is the same number) */
    size_t most = 0;
    if (!seg->size && (st = check_offsets(ctx, b, seg->offsets, NULL, &most)) != GR_OK) return st;
    if (most > longest) longest = most;

    gr_seg_shape shape = axis_rows ? gr_policy_axis_rows(ctx, seg->size, k, gr_dtype_size(gr_buffer_dtype(b)))
                                   : run.kernel->shape(ctx, &run, gr_buffer_size(b), k);
    if (longest && !axis_rows && !run.plan.exact)     /* the exact kernel shapes its launch its own way */
        shape = gr_policy_uneven_segments(ctx, gr_buffer_size(b), k, longest, gr_dtype_size(gr_buffer_dtype(b)), &shape);
    size_t as = run.plan.acc_size;
    size_t partials = shape.splits > 1 ? (shape.grid * as + 255) / 256 * 256 : 0;
    size_t counters = shape.splits > 1 ? k * sizeof(unsigned) : 0;
    gr_slot *slot;
    if ((st = gr_slot_acquire(ctx, partials + counters, 0, &slot)) != GR_OK) return st;
    int rc = 0;
    if (counters) rc = gr_dev_memset((char *)slot->dev + partials, 0, counters, ctx->stream);
    gr_inputs in;
    gr_buffer_inputs(&in, all, 1 + nmore);
    gr_seg_launch L = {
        .in = &in, .in_dtype = gr_buffer_dtype(b), .acc = run.plan.acc, .op = o->op, .ddof = o->ddof,
        .k = k, .size = seg->size, .pitch = seg->size ? pitch : 0,
        .offsets = seg->size ? NULL : gr_buffer_data(seg->offsets), .items = NULL,
        .out = {gr_buffer_data(out[0]), run.results > 1 ? gr_buffer_data(out[1]) : NULL},
        .group = shape.group, .block = shape.block, .splits = shape.splits, .grid = shape.grid,
        .partials = slot->dev, .counters = (unsigned *)((char *)slot->dev + partials), .stream = ctx->stream,
    };
    if (rc == 0) rc = gr_fault_hit(ctx, GR_FAULT_LAUNCH);
    if (rc == 0) rc = run.kernel->segments(ctx, &run, &L);
    *w = (gr_seg_wait){ctx, slot, rc, "segmented reduction", L.site};    /* a failure too: drained first */
    return GR_OK;
}

gr_status gr_segments_queue(gr_context *ctx, gr_buffer *b, const gr_options *o, const gr_segments *seg,
                            gr_buffer *out[2], gr_seg_wait *w) {
    return queue(ctx, b, o, seg, 0, 0, out, w, NULL, 0, NULL, 0);
}

gr_status gr_segments_inputs_queue(gr_context *ctx, gr_buffer *const *bufs, int count, const gr_pass_kernel *pair,
                                   const gr_options *o, const gr_segments *seg, int axis_rows, gr_buffer *out[2],
                                   gr_seg_wait *w) {
    return queue(ctx, bufs[0], o, seg, 0, axis_rows, out, w, bufs + 1, count - 1, pair, 0);
}

gr_status gr_segments_inputs(gr_context *ctx, gr_buffer *const *bufs, int count, const gr_pass_kernel *pair,
                             const gr_options *o, const gr_segments *seg, int axis_rows, gr_buffer *out[2]) {
    gr_seg_wait w;
    gr_status st = gr_segments_inputs_queue(ctx, bufs, count, pair, o, seg, axis_rows, out, &w);
    gr_status done = gr_segments_wait(&w);
    return st != GR_OK ? st : done;
}

gr_status gr_segments_uneven(gr_context *ctx, gr_buffer *b, const gr_options *o, const gr_segments *seg, size_t longest,
                             gr_buffer *out[2]) {
    gr_seg_wait w;
    gr_status st = queue(ctx, b, o, seg, 0, 0, out, &w, NULL, 0, NULL, longest);
    gr_status done = gr_segments_wait(&w);
    return st != GR_OK ? st : done;
}

gr_status gr_segments_rows(gr_context *ctx, gr_buffer *b, const gr_options *o, size_t row, size_t pitch,
                           const gr_buffer *offsets, gr_buffer *out[2]) {
    gr_segments seg = {row, offsets};
    gr_seg_wait w;
    gr_status st = queue(ctx, b, o, &seg, row ? pitch : 0, 1, out, &w, NULL, 0, NULL, 0);
    gr_status done = gr_segments_wait(&w);
    return st != GR_OK ? st : done;
}

gr_status gr_segments_rows_queue(gr_context *ctx, gr_buffer *b, const gr_options *o, size_t row, size_t pitch,
                                 gr_buffer *out[2], gr_seg_wait *w) {
    gr_segments seg = {row, NULL};
    return queue(ctx, b, o, &seg, pitch, 1, out, w, NULL, 0, NULL, 0);
}

static int is_alone(const gr_buffer *b, size_t bytes) {
    return gr_buffer_size(b) * gr_dtype_size(gr_buffer_dtype(b)) > bytes;
}

/* Whether b is an item of dtype t's batched launch. */
static int batched(const gr_buffer *b, int t, size_t alone) {
    return gr_buffer_dtype(b) == (gr_dtype)t && !is_alone(b, alone);
}

static gr_status many(gr_context *ctx, gr_buffer *const *bufs, size_t count, const gr_options *o, gr_result *results) {
    for (size_t i = 1; i < count; i++) {
        gr_status dst = gr_same_device(ctx, bufs[0], bufs[i], "bufs");
        if (dst != GR_OK) return dst;
    }
    if (count) ctx = gr_ctx_for(ctx, bufs[0]);
    const gr_op_desc *d = o->user ? NULL : gr_op_desc_get(o->op);
    if (!d && !o->user) return gr_fail_arg(ctx, GR_EINVAL, "op", "unknown op (accepted: %s)", gr_op_names());
    for (size_t i = 0; i < count && o->user; i++)     /* an operator's kernels are compiled per dtype */
        if (gr_buffer_dtype(bufs[i]) != o->user->in)
            return gr_fail_arg(ctx, GR_EINVAL, "op", "the operator was prepared for %s, buffer %zu is %s",
                               gr_dtype_name(o->user->in), i + 1, gr_dtype_name(gr_buffer_dtype(bufs[i])));
    for (size_t i = 0; i < count && d; i++)
        if (gr_buffer_size(bufs[i]) == 0 && !d->has_identity)
            return gr_fail(ctx, GR_EEMPTY, "%s of an empty buffer is undefined (it has no identity): buffer %zu",
                           d->name, i + 1);
    int gpu = ctx->base.backend == GR_BACKEND_CUDA && &gr_segmented && gr_segmented.launch;
    for (size_t i = 0; i < count && gpu; i++) gpu = gr_buffer_where(bufs[i]) == GR_DEVICE;
    if (!gpu || !gr_plan_items(o)) {
        /* one reduction after the other: the host, or options whose kernel takes no items */
        for (size_t i = 0; i < count; i++) {
            gr_status st = gr_reduce(ctx, bufs[i], o, &results[i]);
            if (st != GR_OK) return st;
        }
        return GR_OK;
    }
    /* large buffers on their own; the others, one launch per dtype: the buffers of that dtype as the
     * items of a segmented reduction */
    size_t alone = gr_policy_many_item_bytes();
    for (size_t i = 0; i < count; i++)
        if (is_alone(bufs[i], alone)) {
            gr_status st = gr_reduce(ctx, bufs[i], o, &results[i]);
            if (st != GR_OK) return st;
        }
    for (int t = 0; t < GR_DTYPE_COUNT; t++) {
        size_t k = 0, total = 0;
        for (size_t i = 0; i < count; i++)
            if (batched(bufs[i], t, alone)) {
                k++;
                total += gr_buffer_size(bufs[i]);
            }
        if (k == 0) continue;
        gr_run run;
        gr_status st = gr_plan_segments(ctx, o, (gr_dtype)t, 1, &run);
        if (st != GR_OK) return st;
        size_t items = (k * sizeof(gr_seg_item) + 255) / 256 * 256;
        size_t b1 = run.item_bytes[1];
        size_t outs[2] = {(k * run.item_bytes[0] + 255) / 256 * 256, (k * b1 + 255) / 256 * 256};
        gr_slot *slot;
        if ((st = gr_slot_acquire(ctx, 0, items + outs[0] + outs[1], &slot)) != GR_OK) return st;
        gr_seg_item *list = slot->host;
        char *o0 = (char *)slot->host + items, *o1 = o0 + outs[0];
        size_t j = 0;
        for (size_t i = 0; i < count; i++)
            if (batched(bufs[i], t, alone)) list[j++] = (gr_seg_item){gr_buffer_data(bufs[i]), gr_buffer_size(bufs[i])};
        gr_seg_shape shape = run.kernel->shape(ctx, &run, total, k);
        if (shape.splits > 1) {             /* items of one launch share no scratch: a block each */
            shape.splits = 1;
            shape.grid = k;
        }
        gr_inputs none;             /* the items name the runs */
        gr_inputs_one(&none, NULL, (gr_dtype)t, total);
        gr_seg_launch L = {
            .in = &none, .in_dtype = (gr_dtype)t, .acc = run.plan.acc, .op = o->op, .ddof = o->ddof, .k = k,
            .items = list, .out = {o0, b1 ? o1 : NULL}, .group = shape.group, .block = shape.block, .splits = 1, .grid = shape.grid,
            .stream = ctx->stream,
        };
        int rc = gr_fault_hit(ctx, GR_FAULT_LAUNCH);
        if (rc == 0) rc = run.kernel->segments(ctx, &run, &L);
        int sync = gr_dev_stream_sync(ctx->stream);
        if (rc == 0) rc = sync;
        if (rc == 0) {
            j = 0;
            for (size_t i = 0; i < count; i++)
                if (batched(bufs[i], t, alone))
                    results[i] = run.kernel->item(&run, o0, o1, j++);
        }
        gr_slot_release(ctx, slot);
        if (rc) return gr_fail_dev_at(ctx, rc, "reduce_many", L.site);
    }
    return GR_OK;
}

gr_status gr_reduce_many(gr_context *ctx, gr_buffer *const *bufs, size_t count, const gr_options *o,
                         gr_result *results) {
    for (size_t i = 0; i < count; i++)
        if (bufs[i] && !gr_buffer_is_compact(bufs[i]))
            return gr_fail_arg(ctx, GR_EINVAL, "bufs", "buffer %zu is a strided view (reduce its compact copy, "
                               "b:contiguous())", i + 1);
    if (o->cpu && !o->user) return gr_operator_cpu_many(ctx, o, bufs, count, results);
    if (!o->cpu && !o->fold) return many(ctx, bufs, count, o, results);
    /* a user's functions run between the buffers' reductions and may free them: the engine's own handles */
    gr_buffer **held;
    gr_status st = gr_buffers_hold(ctx, bufs, count, &held);
    if (st == GR_OK) st = many(ctx, held, count, o, results);
    gr_buffers_release(ctx, held, count);
    return st;
}
