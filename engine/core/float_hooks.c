/*
 * float_hooks.c -- the testing hooks of the float formats narrower than float32 (gr.h's
 * gr_debug_float_encode, gr_debug_float_decode, gr_debug_float_device): engine/base/small_floats.h's
 * conversions reached by name from the specs (spec/small_floats_spec.lua), on the host and, next to
 * CUDA's own conversions, on the device, until the formats are dtypes.
 */
#include "base/device.h"
#include "base/dtype.h"
#include "base/error.h"
#include "base/memory.h"
#include "base/small_floats.h"
#include "core/buffer.h"
#include "core/context.h"

#include <string.h>

/* One row per format of GR_SMALL_FLOAT_LIST, in its order: the device's format number is the index. */
static const struct {
    const char *name;
    int bits;
    unsigned (*from_double)(double);
    unsigned (*from_float)(float);
    double (*to_double)(unsigned);
    float (*to_float)(unsigned);
} formats[] = {
#define ROW(name, p, bits) \
    {#name, bits, gr_##p##_from_double, gr_##p##_from_float, gr_##p##_to_double, gr_##p##_to_float},
    GR_SMALL_FLOAT_LIST(ROW)
#undef ROW
};
enum { FORMATS = sizeof formats / sizeof formats[0] };
#define NAME(name, p, bits) ", " #name
static const char *const names = GR_SMALL_FLOAT_LIST(NAME) + 2;     /* "float16, bfloat16, ..." */
#undef NAME

static int format_of(gr_context *ctx, const char *name, gr_status *st) {
    for (int i = 0; i < FORMATS; i++)
        if (strcmp(name, formats[i].name) == 0) return i;
    *st = gr_fail_arg(ctx, GR_EINVAL, "format", "unknown format '%s' (%s)", name, names);
    return -1;
}

static gr_status check_width(gr_context *ctx, int width, const char *arg) {
    return width == 32 || width == 64 ? GR_OK : gr_fail_arg(ctx, GR_EINVAL, arg, "expected 32 or 64, got %d", width);
}

gr_status gr_debug_float_encode(gr_context *ctx, const char *format, double x, int from, unsigned *bits) {
    gr_status st = GR_OK;
    int f = format_of(ctx, format, &st);
    if (f < 0 || (st = check_width(ctx, from, "from")) != GR_OK) return st;
    unsigned r = from == 32 ? formats[f].from_float((float)x) : formats[f].from_double(x);
    if (r & GR_SF_NOFIT) {
        char v[64];
        gr_format_float(v, sizeof v, x);
        return gr_fail_arg(ctx, GR_EINVAL, "x", "%s does not fit in %s", v, format);
    }
    *bits = r;
    return GR_OK;
}

gr_status gr_debug_float_decode(gr_context *ctx, const char *format, unsigned bits, int to, double *x) {
    gr_status st = GR_OK;
    int f = format_of(ctx, format, &st);
    if (f < 0 || (st = check_width(ctx, to, "to")) != GR_OK) return st;
    if (bits >> formats[f].bits)
        return gr_fail_arg(ctx, GR_EINVAL, "bits", "0x%x is not a pattern of %s", bits, format);
    *x = to == 32 ? (double)formats[f].to_float(bits) : formats[f].to_double(bits);
    return GR_OK;
}

gr_status gr_debug_float_device(gr_context *ctx, const char *format, const gr_buffer *in, gr_buffer *out) {
    gr_status st = GR_OK;
    int f = format_of(ctx, format, &st);
    if (f < 0) return st;
    ctx = gr_ctx_for(ctx, in);
    if (ctx->base.backend != GR_BACKEND_CUDA || gr_buffer_where(in) != GR_DEVICE)
        return gr_fail(ctx, GR_ENODEV, "debug_float_device: needs a device buffer on a CUDA device");
    if (in->dtype != GR_FLOAT64 && in->dtype != GR_UINT32)
        return gr_fail_arg(ctx, GR_EINVAL, "in", "expected float64 values or uint32 patterns, got %s",
                           gr_dtype_name(in->dtype));
    if (out->dtype != GR_UINT64 || gr_buffer_where(out) != GR_DEVICE || out->n != 4 * in->n)
        return gr_fail_arg(ctx, GR_EINVAL, "out", "expected a device uint64 buffer of %zu elements", 4 * in->n);
    if ((st = gr_same_device(ctx, in, out, "out")) != GR_OK) return st;
    if (in->n == 0) return GR_OK;
    if ((st = gr_storage_quiesce(ctx, out->st)) != GR_OK) return st;
    int rc = gr_fault_hit(ctx, GR_FAULT_LAUNCH);
    if (rc == 0)
        rc = gr_dev_small_floats(f, in->dtype == GR_UINT32, gr_buffer_data(in), in->n, gr_buffer_data(out),
                                 ctx->stream);
    if (rc == 0) rc = gr_dev_stream_sync(ctx->stream);
    return rc ? gr_fail_dev(ctx, rc, "debug_float_device") : GR_OK;
}
