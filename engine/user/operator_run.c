/*
 * operator_run.c -- reductions with a user operator: one pass of a plan launched with its kernels, and
 * the result read back (post's value computed on the device).
 *
 * A plan with gr_options.user runs like warp_shuffle's, or pipelined's for 1-byte elements (plan.c): the
 * generated gr_op_main has that variant's shape -- grid-stride 16-byte loads (through a ring of async
 * copies in shared memory for bytes, L->smem of it), a block reduce, the shared epilogue -- so it takes
 * the same grid, block and finishing modes that end on the device. exec.c calls in here where it
 * would call a variant's launcher or an op's host result; the kernels were found beforehand by
 * gr_operator_prepare (operator.c), so nothing here reaches back to the context.
 */
#include "user/operator.h"
#include "base/device.h"
#include "base/error.h"
#include "base/launch.h"

#include <string.h>

int gr_operator_launch(gr_launch *L, const gr_operator_image *img) {
    unsigned long long n = L->n, first = L->first;
    const void *in = L->in;
    void *out = L->out, *final_out = L->final_out;
    unsigned *counter = L->counter;
    void *main_args[] = {&in, &n, &out, &counter, &final_out, &first};
    void *partial_args[] = {&in, &n, &out, &counter, &final_out};
    int e = L->partials_in ? gr_dev_launch(img->kernels.partials, (unsigned)L->grid, (unsigned)L->block, 0, L->stream,
                                           partial_args)
                           : gr_dev_launch(img->kernels.main, (unsigned)L->grid, (unsigned)L->block, L->smem, L->stream,
                                           main_args);
    if (e) L->site = img->variant >= 0 ? (L->partials_in ? "gr_op_partials (a user kernel)" : "gr_op_main (a user kernel)")
                                       : (L->partials_in ? "gr_op_partials (a user operator)" : "gr_op_main (a user operator)");
    return e;
}

int gr_operator_segment_dtype(gr_context *ctx, int has_post, int acc_dtype) {
    if (has_post) return GR_FLOAT64;
    if (acc_dtype >= 0) return acc_dtype;
    gr_fail_arg(ctx, GR_EINVAL, "op", "segments of an operator with a struct accumulator need a post (results "
                "are its value, or the accumulator itself where it is a dtype)");
    return -1;
}

int gr_operator_launch_segments(gr_seg_launch *L, const gr_operator_image *img) {
    /* cuda/device/segmented.cuh's SegArgs, field for field */
    struct {
        const void *in;
        unsigned long long k, size;
        const void *offsets, *items;
        void *out0, *out1;
        int ddof;
    } a = {L->in, L->k, L->size, L->offsets, L->items, L->out[0], L->out[1], L->ddof};
    int g = L->group, splits = L->splits;
    void *partials = L->partials;
    unsigned *counters = L->counters;
    void *args[] = {&a, &g, &splits, &partials, &counters};
    if (!img->kernels.segments) return 1;      /* cudaErrorInvalidValue: prepared without them (a caller's bug) */
    int e = gr_dev_launch(img->kernels.segments, (unsigned)L->grid, (unsigned)L->block, 0, L->stream, args);
    if (e) L->site = "gr_op_segments (a user operator)";
    return e;
}

/* post's value, 8 bytes in the kind img->result_kind names (gr_op_post's and gr_op_segments' layout). */
static gr_scalar post_value(const gr_operator_image *img, const void *p) {
    gr_scalar s = {0};
    s.kind = img->result_kind;
    switch (img->result_kind) {
    case GR_SCALAR_FLOAT: memcpy(&s.v.f, p, 8); break;
    case GR_SCALAR_INT: memcpy(&s.v.i, p, 8); break;
    case GR_SCALAR_BOOL: {
        unsigned long long b;
        memcpy(&b, p, 8);
        s.v.b = b != 0;
        break;
    }
    default: memcpy(&s.v.u, p, 8); break;
    }
    return s;
}

gr_result gr_operator_item_result(const gr_operator_image *img, const void *out0, const void *out1, size_t i) {
    gr_result r;
    memset(&r, 0, sizeof r);
    r.count = 1;
    r.value[0] = img->has_post ? post_value(img, (const char *)out1 + 8 * i)
                               : gr_scalar_load((const char *)out0 + i * img->acc_size, (gr_dtype)img->acc_dtype);
    return r;
}

gr_status gr_operator_result(gr_context *ctx, const gr_operator_image *img, const void *acc, size_t n,
                             void *post_out, void *stream, gr_result *out) {
    memset(out, 0, sizeof *out);
    out->count = 1;
    if (!img->has_post) {                   /* a dtype accumulator (a struct one needs post) */
        out->value[0] = gr_scalar_load(acc, (gr_dtype)img->acc_dtype);
        return GR_OK;
    }
    unsigned long long count = n;
    void *args[] = {&acc, &count, &post_out};
    int e = gr_dev_launch(img->kernels.post, 1, 1, 0, stream, args);
    if (e == 0) e = gr_dev_stream_sync(stream);
    if (e) return gr_fail_dev(ctx, e, "the operator's post");
    out->value[0] = post_value(img, post_out);
    return GR_OK;
}
