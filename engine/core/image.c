/*
 * image.c -- a compiled image's kernels on a device: its module loaded into the device's context (once
 * per device: a sharded reduction runs an operator on every shard's device), one pass launched like a
 * variant's, the segments of segments.c's launch, and the result read back (post's value computed on
 * the device).
 *
 * A user operator's generated gr_op_main has the shape of warp_shuffle's kernel, or pipelined's for
 * 1-byte elements (plan.c): grid-stride 16-byte loads (through a ring of async copies in shared memory
 * for bytes, L->smem of it), a block reduce, the shared epilogue -- so it takes the same grid, block and
 * finishing modes that end on the device. A user kernel's image has the same kernels around the user's
 * function (user/kernel_source.c). The images were compiled beforehand (jit/compile.c) and are found by
 * the plan (gr_options.user, gr_options.kernel), so nothing here compiles.
 */
#include "core/image.h"
#include "base/device.h"
#include "base/error.h"
#include "base/launch.h"
#include "core/op_pass.h"
#include "core/pool.h"
#include "core/registry.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

gr_status gr_image_load(gr_context *ctx, gr_image *img, const gr_image_kernels **out) {
    *out = NULL;
    gr_image_kernels *k = &img->kernels;
    if (k->module) {
        *out = k;
        return GR_OK;
    }
    if (ctx->base.backend != GR_BACKEND_CUDA)
        return gr_fail(ctx, GR_ENODEV, "an operator's kernels run on the cuda backend only (backend is cpu)");
    char log[1024], what[1200];
    /* a module loads into the current device's context, ctx's (the caller made it current) */
    img->device = ctx->device;
    int e = gr_dev_module_load(img->image, &k->module, log, sizeof log);
    if (e) {
        snprintf(what, sizeof what, "loading an operator's %s%s%s", img->ptx ? "PTX" : "CUBIN", *log ? ": " : "", log);
        return gr_fail_dev(ctx, e, what);
    }
    /* gr_op_segments only where the source has it (asked for by gr_operator_prepare_segments) */
    struct { const char *name; void **fn; } wanted[] = {{GR_OP_KERNEL_MAIN, &k->main},
        {GR_OP_KERNEL_PARTIALS, &k->partials}, {GR_OP_KERNEL_POST, &k->post}, {GR_OP_KERNEL_CHECK, &k->check},
        {GR_OP_KERNEL_SEGMENTS, &k->segments}};
    size_t count = sizeof wanted / sizeof wanted[0] - (img->has_segments ? 0 : 1);
    for (size_t w = 0; w < count; w++) {
        e = gr_dev_module_function(k->module, wanted[w].name, wanted[w].fn);
        if (e) {
            gr_dev_module_unload(k->module);
            *k = (gr_image_kernels){0};
            snprintf(what, sizeof what, "an operator's kernel %s", wanted[w].name);
            return gr_fail_dev(ctx, e, what);
        }
    }
    *out = k;
    return GR_OK;
}

gr_status gr_image_on(gr_context *ctx, const gr_image *img, const gr_image **out) {
    *out = img;
    if (!img->kernels.module || img->device == ctx->device) return GR_OK;
    gr_image *own = (gr_image *)img, **at = &own->elsewhere;
    for (; *at; at = &(*at)->elsewhere)
        if ((*at)->device == ctx->device) {
            *out = *at;
            return GR_OK;
        }
    gr_image *c = malloc(sizeof *c);
    if (!c) return gr_fail(ctx, GR_ENOMEM, "out of host memory");
    *c = *img;                          /* the same bytes and facts; its own module */
    c->kernels = (gr_image_kernels){0};
    c->elsewhere = NULL;
    const gr_image_kernels *k;
    gr_status st = gr_image_load(ctx, c, &k);
    if (st != GR_OK) {
        free(c);
        return st;
    }
    *at = c;
    *out = c;
    return GR_OK;
}

/* cuda/device/inputs.cuh's InputPtrs: the addresses of an operator's several inputs. */
typedef struct input_ptrs {
    const void *p[GR_MAX_INPUTS];
} input_ptrs;

/* in's addresses where it is the image's inputs, each contiguous and 1-D (as many as the image reads):
 * 1, else 0. */
static int image_inputs(const gr_inputs *in, const gr_image *img, input_ptrs *ptrs) {
    memset(ptrs, 0, sizeof *ptrs);
    if (in->count != img->inputs) return 0;
    for (int k = 0; k < in->count; k++) {
        if (in->at[k].ndim != 1 || in->at[k].strides[0] != 1) return 0;
        ptrs->p[k] = in->at[k].data;
    }
    return 1;
}

int gr_image_launch(gr_launch *L, const gr_image *img) {
    input_ptrs ptrs;
    int several = img->inputs > 1 && !L->partials_in;
    if (several ? !image_inputs(L->in, img, &ptrs) : !gr_inputs_contiguous(L->in))
        return 1;           /* cudaErrorInvalidValue: its kernels read plain inputs, as many as it says */
    unsigned long long n = L->n, first = L->first;
    const void *in = L->in->at[0].data;
    void *out = L->out, *final_out = L->final_out;
    unsigned *counter = L->counter;
    void *main_args[] = {several ? (void *)&ptrs : (void *)&in, &n, &out, &counter, &final_out, &first};
    void *partial_args[] = {&in, &n, &out, &counter, &final_out};
    int e = L->partials_in ? gr_dev_launch(img->kernels.partials, (unsigned)L->grid, (unsigned)L->block, 0, L->stream,
                                           partial_args)
                           : gr_dev_launch(img->kernels.main, (unsigned)L->grid, (unsigned)L->block, L->smem, L->stream,
                                           main_args);
    if (e) L->site = img->variant >= 0 ? (L->partials_in ? "gr_op_partials (a user kernel)" : "gr_op_main (a user kernel)")
                                       : (L->partials_in ? "gr_op_partials (a user operator)" : "gr_op_main (a user operator)");
    return e;
}

int gr_image_launch_segments(gr_seg_launch *L, const gr_image *img) {
    /* cuda/device/segmented.cuh's SegArgs, field for field */
    struct {
        const void *in;
        unsigned long long k, size;
        const void *offsets, *items;
        void *out0, *out1;
        int ddof;
        unsigned long long pitch;
    } a = {L->in->at[0].data, L->k, L->size, L->offsets, L->items, L->out[0], L->out[1], L->ddof, L->pitch};
    int g = L->group, splits = L->splits;
    void *partials = L->partials;
    unsigned *counters = L->counters;
    input_ptrs ptrs;
    void *args[] = {&a, &g, &splits, &partials, &counters, &ptrs};
    int several = img->inputs > 1;
    if (!img->kernels.segments || (several ? !image_inputs(L->in, img, &ptrs) || L->items : !gr_inputs_contiguous(L->in)))
        return 1;           /* cudaErrorInvalidValue: prepared without them (a caller's bug), or no plain inputs */
    int e = gr_dev_launch(img->kernels.segments, (unsigned)L->grid, (unsigned)L->block, 0, L->stream, args);
    if (e) L->site = "gr_op_segments (a user operator)";
    return e;
}

/* post's value, 8 bytes in the kind img->result_kind names (gr_op_post's and gr_op_segments' layout). */
static gr_scalar post_value(const gr_image *img, const void *p) {
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

gr_result gr_image_item_result(const gr_image *img, const void *out0, const void *out1, size_t i) {
    gr_result r;
    memset(&r, 0, sizeof r);
    r.count = 1;
    r.value[0] = img->has_post ? post_value(img, (const char *)out1 + 8 * i)
                               : gr_scalar_load((const char *)out0 + i * img->acc_size, (gr_dtype)img->acc_dtype);
    return r;
}

gr_status gr_image_result(gr_context *ctx, const gr_image *img, const void *acc, size_t n, void *post_out,
                          void *stream, gr_result *out) {
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

/* ---- behind the planner's interface (plan.h) ------------------------------------------------------------ */

/* A pass of run->image, with the dynamic shared memory its row's shape takes (a user operator's kernel
 * has pipelined's ring for bytes; a user kernel's row asks for none). */
static int launch(const gr_run *run, gr_launch *L) {
    const gr_kernel *k = run->row->kernel;
    L->smem = k->smem ? k->smem(L->block) : 0;
    return gr_image_launch(L, run->image);
}

/* The grid of the row whose shape the image's kernels have. */
static size_t grid(const gr_run *run, size_t n, int block, size_t elem_bytes, const gr_launch_device *dev) {
    return run->row->kernel->grid(n, block, elem_bytes, dev);
}

/* A user operator's result: its post on the device, or its accumulator; a user kernel's with a built-in
 * op: the op's. */
static gr_status result(gr_context *ctx, const gr_run *run, gr_slot *slot, const void *acc, size_t n,
                        gr_result *out) {
    if (!run->user) return gr_op_pass.result(ctx, run, slot, acc, n, out);
    return gr_image_result(ctx, run->user, acc, n, gr_slot_post_out(slot), slot->stream, out);
}

/* Partials on the host: a user operator's are folded by its cpu.reduce (run->fold) into the slot's
 * result area, then its post as ever; a built-in op's by the CPU finish. */
static gr_status finish(gr_context *ctx, const gr_run *run, gr_slot *slot, const void *accs, size_t count, size_t n,
                        gr_result *out) {
    if (!run->user) return gr_op_pass.finish(ctx, run, slot, accs, count, n, out);
    gr_status st = run->fold(run->fold_ud, accs, count, slot->result);
    return st != GR_OK ? st : result(ctx, run, slot, slot->result, n, out);
}

/* A user operator's accumulators, by its own gr_op_partials (a user kernel's may combine in another
 * order). */
static int combine(const gr_run *run, gr_launch *L) { return gr_image_launch(L, run->user); }

static gr_seg_shape shape(const gr_context *ctx, const gr_run *run, size_t n, size_t k) {
    return gr_policy_segments(ctx, n, k, gr_dtype_size(run->plan.in_dtype));
}

static int segments(gr_context *ctx, const gr_run *run, gr_seg_launch *L) {
    (void)ctx;
    return gr_image_launch_segments(L, run->user);
}

static gr_result item(const gr_run *run, const void *out0, const void *out1, size_t i) {
    return gr_image_item_result(run->user, out0, out1, i);
}

const gr_pass_kernel gr_image_pass = {
    .what = "variant '%s'", .launch = launch, .grid = grid, .result = result, .finish = finish, .combine = combine,
    .shape = shape, .segments = segments, .item = item,
};
