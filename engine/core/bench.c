/*
 * bench.c -- timing a reduction the way llm.c's benchmark_kernel does: warm-up first, then
 * many repetitions each bracketed by device events, median reported with the minimum and maximum.
 * On the cpu backend the monotonic clock stands in for events.
 */
#include "core/exec.h"
#include "base/clock.h"
#include "base/device.h"
#include "core/buffer.h"
#include "core/context.h"
#include "core/dot.h"
#include "base/error.h"
#include "core/pool.h"

#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void summarise(double *ms, int reps, gr_bench_result *out) {
    qsort(ms, (size_t)reps, sizeof *ms, cmp_double);
    out->ms_min = ms[0];
    out->ms_max = ms[reps - 1];
    out->ms = reps % 2 ? ms[reps / 2] : 0.5 * (ms[reps / 2 - 1] + ms[reps / 2]);
}

/* Times `reps` calls of run(ctx, arg) after `warmup` untimed ones. With a stream, device events bracket
 * the work run() queues there, and complete(), if given, finishes each call after the closing event is
 * queued (so host-side waiting stays out of the figure); without one, the monotonic clock times
 * run() and complete() together. */
typedef gr_status (*timed_fn)(gr_context *ctx, void *arg);

static gr_status time_reps(gr_context *ctx, timed_fn run, timed_fn complete, void *arg, void *stream,
                           int warmup, int reps, double bytes, gr_bench_result *out) {
    if (warmup < 0) return gr_fail_arg(ctx, GR_EINVAL, "warmup", "must be at least 0 (got %d)", warmup);
    if (reps < 1) return gr_fail_arg(ctx, GR_EINVAL, "reps", "must be at least 1 (got %d)", reps);
    double *ms = malloc((size_t)reps * sizeof *ms);
    if (!ms) return gr_fail(ctx, GR_ENOMEM, "out of host memory");
    gr_status st = GR_OK;
    for (int i = 0; i < warmup && st == GR_OK; i++) {
        st = run(ctx, arg);
        if (st == GR_OK && complete) st = complete(ctx, arg);
    }
    void *start = NULL, *stop = NULL;
    if (st == GR_OK && stream) {
        int rc = gr_dev_event_create(&start, 1);
        if (rc == 0) rc = gr_dev_event_create(&stop, 1);
        if (rc) st = gr_fail_dev(ctx, rc, "bench events");
    }
    for (int i = 0; i < reps && st == GR_OK; i++) {
        if (!stream) {
            double t0 = gr_now_ms();
            st = run(ctx, arg);
            if (st == GR_OK && complete) st = complete(ctx, arg);
            ms[i] = gr_now_ms() - t0;
            continue;
        }
        float f = 0;
        gr_dev_event_record(start, stream);
        st = run(ctx, arg);
        gr_dev_event_record(stop, stream);
        if (st == GR_OK && complete) st = complete(ctx, arg);
        int rc = gr_dev_event_sync(stop);
        if (rc == 0) rc = gr_dev_event_elapsed(&f, start, stop);
        if (rc && st == GR_OK) st = gr_fail_dev(ctx, rc, "bench timing");
        ms[i] = f;
    }
    if (start) gr_dev_event_destroy(start);
    if (stop) gr_dev_event_destroy(stop);
    if (st == GR_OK) {
        summarise(ms, reps, out);
        out->reps = reps;
        out->warmup = warmup;
        out->gbps = out->ms > 0 ? bytes / (out->ms * 1e6) : 0;
    }
    free(ms);
    return st;
}

typedef struct { gr_buffer *b; gr_slot *slot; } read_job;

static gr_status run_read(gr_context *ctx, void *arg) {
    read_job *j = arg;
    int rc = gr_dev_read_all(gr_buffer_data(j->b), j->b->n * gr_dtype_size(j->b->dtype), j->slot->counter + 8,
                             ctx->info.sms, ctx->stream);
    return rc ? gr_fail_dev(ctx, rc, "read-bandwidth kernel") : GR_OK;
}

gr_status gr_bench_read(gr_context *ctx, gr_buffer *b, int warmup, int reps, gr_bench_result *out) {
    ctx = gr_ctx_for(ctx, b);
    if (ctx->base.backend != GR_BACKEND_CUDA) return gr_fail(ctx, GR_ENODEV, "bench_read: needs a CUDA device");
    if (gr_buffer_check_compact(ctx, b, "b") != GR_OK) return GR_EINVAL;
    read_job j = {b, NULL};
    gr_status st = gr_slot_acquire(ctx, 0, 0, &j.slot);
    if (st != GR_OK) return st;
    st = time_reps(ctx, run_read, NULL, &j, ctx->stream, warmup, reps, (double)b->n * gr_dtype_size(b->dtype), out);
    gr_dev_stream_sync(ctx->stream);
    gr_slot_release(ctx, j.slot);
    return st;
}

typedef struct { gr_buffer *b; const gr_options *o; const gr_segments *seg; gr_buffer **out; } segments_job;

static gr_status run_segments(gr_context *ctx, void *arg) {
    segments_job *j = arg;
    return gr_reduce_segments(ctx, j->b, j->o, j->seg, j->out);
}

gr_status gr_bench_segments(gr_context *ctx, gr_buffer *b, const gr_options *o, const gr_segments *seg,
                            gr_buffer *out[2], int warmup, int reps, gr_bench_result *result) {
    ctx = gr_ctx_for(ctx, b);
    segments_job j = {b, o, seg, out};
    int device = ctx->base.backend == GR_BACKEND_CUDA && gr_buffer_where(b) == GR_DEVICE;
    return time_reps(ctx, run_segments, NULL, &j, device ? ctx->stream : NULL, warmup, reps,
                     (double)b->n * gr_dtype_size(b->dtype), result);
}

typedef struct { gr_buffer *b; const gr_options *o; unsigned axes; gr_buffer **out; } axes_job;

static gr_status run_axes(gr_context *ctx, void *arg) {
    axes_job *j = arg;
    return gr_reduce_axes(ctx, j->b, j->o, j->axes, j->out);
}

gr_status gr_bench_axes(gr_context *ctx, gr_buffer *b, const gr_options *o, unsigned axes, gr_buffer *out[2],
                        int warmup, int reps, gr_bench_result *result) {
    ctx = gr_ctx_for(ctx, b);
    axes_job j = {b, o, axes, out};
    int device = ctx->base.backend == GR_BACKEND_CUDA && gr_buffer_where(b) == GR_DEVICE;
    return time_reps(ctx, run_axes, NULL, &j, device ? ctx->stream : NULL, warmup, reps,
                     (double)b->n * gr_dtype_size(b->dtype), result);
}

typedef struct { gr_buffer *a, *b; const gr_options *o; unsigned axes; gr_buffer **out; } dot_axes_job;

static gr_status run_dot_axes(gr_context *ctx, void *arg) {
    dot_axes_job *j = arg;
    return gr_dot_axes(ctx, j->a, j->b, j->o, j->axes, j->out);
}

gr_status gr_bench_dot_axes(gr_context *ctx, gr_buffer *a, gr_buffer *b, const gr_options *o, unsigned axes,
                            gr_buffer *out[2], int warmup, int reps, gr_bench_result *result) {
    ctx = gr_ctx_for(ctx, a);
    dot_axes_job j = {a, b, o, axes, out};
    int device = ctx->base.backend == GR_BACKEND_CUDA && gr_buffer_where(a) == GR_DEVICE;
    return time_reps(ctx, run_dot_axes, NULL, &j, device ? ctx->stream : NULL, warmup, reps,
                     2.0 * (double)a->n * gr_dtype_size(a->dtype), result);
}

typedef struct { gr_buffer *h; const gr_options *o; size_t chunk; int streams; } streamed_job;

static gr_status run_streamed(gr_context *ctx, void *arg) {
    streamed_job *j = arg;
    gr_result value;
    return gr_reduce_streamed(ctx, j->h, j->o, j->chunk, j->streams, &value);
}

gr_status gr_bench_streamed(gr_context *ctx, gr_buffer *h, const gr_options *o, size_t chunk_bytes,
                            int streams, int warmup, int reps, gr_bench_result *out) {
    ctx = gr_ctx_for(ctx, h);
    streamed_job j = {h, o, chunk_bytes, streams};
    return time_reps(ctx, run_streamed, NULL, &j, NULL, warmup, reps, (double)h->n * gr_dtype_size(h->dtype), out);
}

/* A reduction: with device passes, events bracket the queued passes and the copy back; the CPU finish
 * of the hybrid and host modes runs after the closing event and is outside the figure, as in the
 * textbook's timing. Host variants are timed with the clock. */
typedef struct {
    gr_buffer *const *bufs; /* the inputs: one buffer, gr.dot's pair, an operator's several */
    int count;
    int dot;                /* the pair is gr.dot's */
    const gr_options *o;
    gr_run run;
    gr_slot *slot;
    void *stream;
} reduce_job;

static gr_status run_reduce(gr_context *ctx, void *arg) {
    reduce_job *j = arg;
    if (!j->slot) {
        gr_result value;
        return j->dot ? gr_dot(ctx, j->bufs[0], j->bufs[1], j->o, &value)
             : j->count > 1 ? gr_reduce_inputs(ctx, j->bufs, j->count, j->o, &value)
                            : gr_reduce(ctx, j->bufs[0], j->o, &value);
    }
    gr_inputs in;
    gr_buffer_inputs(&in, j->bufs, j->count);
    return gr_exec_start(ctx, &in, 0, &j->run, j->slot, j->stream, 0);
}

static gr_status complete_reduce(gr_context *ctx, void *arg) {
    reduce_job *j = arg;
    gr_result value;
    return j->slot ? gr_exec_finish(ctx, &j->run, j->slot, &value) : GR_OK;
}

/* The job's passes timed with events where the device runs them, else with the clock. */
static gr_status bench_job(gr_context *ctx, reduce_job *j, int warmup, int reps, double bytes, gr_bench_result *out) {
    const gr_plan *plan = &j->run.plan;
    int device_timed = plan->npasses > 0 && !plan->pass[0].on_host;
    if (device_timed) {
        j->stream = j->o->stream && j->o->stream->handle ? j->o->stream->handle : ctx->stream;
        gr_status st = gr_slot_acquire(ctx, plan->dev_bytes, plan->host_bytes, &j->slot);
        if (st != GR_OK) return st;
    }
    gr_status st = time_reps(ctx, run_reduce, complete_reduce, j, j->stream, warmup, reps, bytes, out);
    if (j->slot) gr_slot_release(ctx, j->slot);
    return st;
}

gr_status gr_bench(gr_context *ctx, gr_buffer *b, const gr_options *o, int warmup, int reps,
                   gr_bench_result *out) {
    ctx = gr_ctx_for(ctx, b);
    reduce_job j = {.bufs = &b, .count = 1, .o = o};
    gr_status st = gr_buffer_check_compact(ctx, b, "b");
    if (st == GR_OK) st = gr_plan_run(ctx, b->n, b->dtype, gr_buffer_where(b), o, &j.run);
    if (st != GR_OK) return st;
    return bench_job(ctx, &j, warmup, reps, (double)b->n * gr_dtype_size(b->dtype), out);
}

gr_status gr_bench_dot(gr_context *ctx, gr_buffer *a, gr_buffer *b, const gr_options *o, int warmup, int reps,
                       gr_bench_result *out) {
    ctx = gr_ctx_for(ctx, a);
    gr_buffer *pair[2] = {a, b};
    reduce_job j = {.bufs = pair, .count = 2, .dot = 1, .o = o};
    int host;
    gr_status st = gr_dot_plan(ctx, a, b, o, &j.run, &host);
    if (st != GR_OK) return st;
    if (host) memset(&j.run, 0, sizeof j.run);      /* no passes: gr_dot itself, timed with the clock */
    return bench_job(ctx, &j, warmup, reps, 2.0 * (double)a->n * gr_dtype_size(a->dtype), out);
}

gr_status gr_bench_inputs(gr_context *ctx, gr_buffer *const *bufs, int count, const gr_options *o, int warmup,
                          int reps, gr_bench_result *out) {
    if (count < 1 || count > GR_OPERATOR_INPUTS || !bufs[0])
        return gr_fail_arg(ctx, GR_EINVAL, "bufs", "an operator reads 1 to %d inputs", GR_OPERATOR_INPUTS);
    ctx = gr_ctx_for(ctx, bufs[0]);
    gr_options c = *o;
    c.ninputs = count;
    reduce_job j = {.bufs = bufs, .count = count, .o = &c};
    double bytes = 0;
    gr_status st = GR_OK;
    for (int k = 0; k < count && st == GR_OK; k++) {
        if (!bufs[k] || bufs[k]->n != bufs[0]->n)
            return gr_fail_arg(ctx, GR_EINVAL, "bufs", "buffer %d: the inputs of an operator have one length", k + 1);
        st = gr_buffer_check_compact(ctx, bufs[k], "bufs");
        bytes += (double)bufs[k]->n * gr_dtype_size(bufs[k]->dtype);
    }
    int device = ctx->base.backend == GR_BACKEND_CUDA && gr_buffer_where(bufs[0]) == GR_DEVICE && c.user;
    if (st == GR_OK && device) st = gr_plan_run(ctx, bufs[0]->n, bufs[0]->dtype, GR_DEVICE, &c, &j.run);
    if (st != GR_OK) return st;
    if (!device) memset(&j.run, 0, sizeof j.run);  /* the cpu functions, timed with the clock */
    return bench_job(ctx, &j, warmup, reps, bytes, out);
}
