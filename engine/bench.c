/*
 * bench.c -- timing a reduction the way METHOD.md and llm.c's benchmark_kernel do: warm-up first, then
 * many repetitions each bracketed by device events, median reported with the minimum and maximum.
 * On the cpu backend the monotonic clock stands in for events.
 */
#include "internal.h"

#include <stdlib.h>
#include <time.h>

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static void summarise(double *ms, int reps, gr_bench_result *out) {
    qsort(ms, (size_t)reps, sizeof *ms, cmp_double);
    out->ms_min = ms[0];
    out->ms_max = ms[reps - 1];
    out->ms = reps % 2 ? ms[reps / 2] : 0.5 * (ms[reps / 2 - 1] + ms[reps / 2]);
}

gr_status gr_bench(gr_context *ctx, gr_buffer *b, const gr_options *o, int warmup, int reps,
                   gr_bench_result *out) {
    if (reps < 1) return gr_fail(ctx, GR_EINVAL, "opts.reps: must be at least 1 (got %d)", reps);
    if (warmup < 0) return gr_fail(ctx, GR_EINVAL, "opts.warmup: must be at least 0 (got %d)", warmup);
    gr_plan plan;
    gr_status st = gr_plan_make(ctx, b, o, &plan);
    if (st != GR_OK) return st;
    double *ms = malloc((size_t)reps * sizeof *ms);
    if (!ms) return gr_fail(ctx, GR_ENOMEM, "out of host memory");
    gr_scalar value;
    for (int i = 0; i < warmup && st == GR_OK; i++) st = gr_reduce(ctx, b, o, &value);

    int device_timed = plan.npasses > 0 && !plan.pass[0].on_host;
    void *start = NULL, *stop = NULL;
    if (st == GR_OK && device_timed) {
        int rc = gr_dev_event_create(&start, 1);
        if (rc == 0) rc = gr_dev_event_create(&stop, 1);
        if (rc) st = gr_fail_dev(ctx, rc, "bench events");
    }
    void *stream = o->stream && o->stream->handle ? o->stream->handle : ctx->stream;
    gr_slot *slot = NULL;
    if (st == GR_OK && device_timed)
        st = gr_slot_acquire(ctx, gr_plan_scratch_bytes(&plan), gr_plan_host_bytes(&plan), &slot);
    for (int i = 0; i < reps && st == GR_OK; i++) {
        if (!device_timed) {
            double t0 = now_ms();
            st = gr_reduce(ctx, b, o, &value);
            ms[i] = now_ms() - t0;
            continue;
        }
        /* the events bracket every device pass and the copy back, queued back to back; the CPU finish
         * of the hybrid and host modes runs after `stop` and is outside the figure */
        gr_dev_event_record(start, stream);
        st = gr_exec_start(ctx, b, &plan, o->op, slot, stream);
        gr_dev_event_record(stop, stream);
        if (st == GR_OK) st = gr_exec_finish(ctx, b, &plan, o->op, slot, &value);
        float f = 0;
        int rc = gr_dev_event_sync(stop);
        if (rc == 0) rc = gr_dev_event_elapsed(&f, start, stop);
        if (rc && st == GR_OK) st = gr_fail_dev(ctx, rc, "bench timing");
        ms[i] = f;
    }
    if (slot) gr_slot_release(ctx, slot);
    if (start) gr_dev_event_destroy(start);
    if (stop) gr_dev_event_destroy(stop);
    if (st == GR_OK) {
        summarise(ms, reps, out);
        out->reps = reps;
        out->warmup = warmup;
        double bytes = (double)b->n * (double)gr_dtype_size(b->dtype);
        out->gbps = out->ms > 0 ? bytes / (out->ms * 1e6) : 0;
    }
    free(ms);
    return st;
}
