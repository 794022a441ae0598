/*
 * streamed.c -- reducing host data as it streams to the device, and buffer-to-buffer copies.
 *
 * The host buffer is cut into chunks. Chunk i goes to stream i % k: a copy into that stream's device
 * staging area, then a single-pass kernel that leaves the chunk's value in slot i of a device array.
 * Work on one stream runs in order, so a staging area is never overwritten while its kernel still
 * reads it; across streams the copy engine moves chunk i+1 while the SMs reduce chunk i. At the end the
 * chunk values come back in one copy and the CPU combines them in chunk order, so the result does not
 * depend on which stream finished first.
 */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_CHUNK ((size_t)64 << 20)
#define DEFAULT_STREAMS 4

/* The options of a streamed reduction, checked the same way on every backend (a script gets the same
 * errors with or without a GPU). Returns the variant that reduces each chunk on the device. */
static gr_status check_streamed(gr_context *ctx, const gr_buffer *h, const gr_options *o, size_t chunk,
                                int streams, int *variant) {
    if (gr_buffer_where(h) != GR_HOST)
        return gr_fail_arg(ctx, GR_EINVAL, "streamed", "needs host data (a pinned host buffer, a table or a "
                           "byte string); this buffer is on the device");
    if (chunk && chunk < 4096)
        return gr_fail_arg(ctx, GR_EINVAL, "chunk", "must be at least 4096 bytes (got %zu)", chunk);
    if (streams < 0 || streams > GR_MAX_AUX_STREAMS)
        return gr_fail_arg(ctx, GR_EINVAL, "streams", "must be 1 to %d (got %d)", GR_MAX_AUX_STREAMS, streams);
    if ((unsigned)o->op >= GR_OP_COUNT)
        return gr_fail_arg(ctx, GR_EINVAL, "op", "unknown op (accepted: %s)", gr_op_names());
    int vi = o->variant < 0 ? gr_variant_find(gr_dtype_size(h->dtype) == 1 ? "pipelined" : "warp_shuffle")
                            : o->variant;
    const gr_variant *v = gr_variant_get(vi);
    if (!v) return gr_fail_arg(ctx, GR_EINVAL, "variant", "unknown variant (accepted: %s)", gr_variant_names());
    if (!(v->needs & GR_NEEDS_CUDA) || !(v->finishes & (1u << GR_FINISH_SINGLE)))
        return gr_fail_arg(ctx, GR_EINVAL, "variant", "streamed reductions need a device variant with the "
                           "'single' finish ('%s' has none)", v->name);
    if (o->variant >= 0 && ctx->backend != GR_BACKEND_CUDA)
        return gr_fail_arg(ctx, GR_ENODEV, "variant", "'%s' needs a CUDA device (backend is cpu)", v->name);
    if (o->finish != GR_FINISH_AUTO && o->finish != GR_FINISH_SINGLE)
        return gr_fail_arg(ctx, GR_EINVAL, "finish", "streamed reductions finish each chunk in one kernel "
                           "(accepted: auto, single)");
    gr_status st = gr_check_block(ctx, v, o->block ? o->block : v->block_default);
    if (st != GR_OK) return st;
    if (gr_acc_dtype(ctx, o->op, h->dtype, o->acc) < 0) return GR_EINVAL;
    *variant = vi;
    return GR_OK;
}

gr_status gr_reduce_streamed(gr_context *ctx, gr_buffer *h, const gr_options *o, size_t chunk_bytes,
                             int streams, gr_scalar *out) {
    int vi = -1;
    gr_status st = check_streamed(ctx, h, o, chunk_bytes, streams, &vi);
    if (st != GR_OK) return st;
    if (ctx->backend != GR_BACKEND_CUDA) {           /* the data is already where the CPU reduces it */
        gr_options cpu = *o;
        cpu.variant = gr_variant_find("cpu");
        cpu.finish = GR_FINISH_AUTO;
        cpu.block = 0;
        return gr_reduce(ctx, h, &cpu, out);
    }
    int acc = gr_acc_dtype(ctx, o->op, h->dtype, o->acc);
    if (acc < 0) return GR_EINVAL;
    size_t n = h->n, es = gr_dtype_size(h->dtype), aes = gr_dtype_size((gr_dtype)acc);
    if (n == 0) {                                    /* the identity, or the empty min/max error */
        if (o->op == GR_MIN || o->op == GR_MAX)
            return gr_fail(ctx, GR_EEMPTY, "%s of an empty buffer is undefined (it has no identity)",
                           gr_op_name(o->op));
        *out = gr_identity_scalar(o->op, h->dtype, (gr_dtype)acc);
        return GR_OK;
    }

    /* whole 16-byte vectors per chunk keep every chunk's start aligned for the kernel's wide loads */
    size_t per = (chunk_bytes ? chunk_bytes : DEFAULT_CHUNK) / 16 * 16 / es;
    if (per == 0) per = 16 / es;
    size_t chunks = (n + per - 1) / per;
    int k = streams ? streams : DEFAULT_STREAMS;
    if ((size_t)k > chunks) k = (int)chunks;
    const gr_variant *v = gr_variant_get(vi);
    const gr_variant_impl *impl = gr_variant_impl_get(vi);
    int block = o->block ? o->block : v->block_default;
    size_t max_grid = impl->grid(per < n ? per : n, block, h->dtype, &ctx->info);
    size_t staging = (per * es + 255) / 256 * 256;
    size_t extra = impl->scratch ? impl->scratch(per, h->dtype, o->op, (gr_dtype)acc) : 0;

    gr_slot *slot[GR_MAX_AUX_STREAMS + 1] = {0};
    int got = 0;
    void *stream[GR_MAX_AUX_STREAMS];
    /* slot k holds the chunk values; slots 0..k-1 a staging area, partials and counter each */
    st = gr_slot_acquire(ctx, chunks * aes, chunks * aes, &slot[k]);
    for (int s = 0; s < k && st == GR_OK; s++) {
        st = gr_slot_acquire(ctx, staging + max_grid * aes + 256 + extra, 0, &slot[s]);
        if (st == GR_OK) st = gr_aux_stream(ctx, s, &stream[s]);
        if (st == GR_OK) got++;         /* only the streams whose slot and stream exist are waited for */
    }
    int rc = 0;
    for (size_t c = 0; c < chunks && st == GR_OK; c++) {
        int s = (int)(c % (size_t)k);
        size_t lo = c * per, len = n - lo < per ? n - lo : per;
        char *stage = slot[s]->dev;
        rc = gr_copy(ctx, stage, (const char *)gr_buffer_data(h) + lo * es, len * es, stream[s]);
        if (rc) { st = gr_fail_dev(ctx, rc, "streamed copy to the device"); break; }
        st = gr_launch_single(ctx, vi, stage, len, h->dtype, o->op, (gr_dtype)acc, block, slot[s],
                              stage + staging, (char *)slot[k]->dev + c * aes, stream[s]);
    }
    /* the context's stream waits for every chunk, then brings the chunk values back */
    for (int s = 0; s < got && rc == 0; s++) {
        rc = gr_dev_event_record(slot[s]->done, stream[s]);
        if (rc == 0) rc = gr_dev_stream_wait_event(ctx->stream, slot[s]->done);
    }
    if (rc == 0 && st == GR_OK) rc = gr_copy(ctx, slot[k]->host, slot[k]->dev, chunks * aes, ctx->stream);
    if (rc == 0) rc = gr_dev_stream_sync(ctx->stream);
    if (rc && st == GR_OK) st = gr_fail_dev(ctx, rc, "streamed reduction");
    if (st == GR_OK) {
        st = gr_cpu_finish(ctx, slot[k]->host, chunks, (gr_dtype)acc, o->op, h->dtype, out);
    } else {
        for (int s = 0; s < got; s++) gr_dev_stream_sync(stream[s]);
    }
    for (int s = 0; s <= k; s++) gr_slot_release(ctx, slot[s]);
    return st;
}

/* A bounce area for copies between overlapping device ranges: at most this many bytes at a time. */
#define BOUNCE_BYTES ((size_t)16 << 20)

/* memmove between device ranges that overlap, through a scratch area: forward when dst is below src,
 * backward otherwise, so no chunk overwrites bytes that a later chunk still has to read. */
static gr_status move_overlapping(gr_context *ctx, char *dst, const char *src, size_t bytes) {
    size_t step = bytes < BOUNCE_BYTES ? bytes : BOUNCE_BYTES;
    gr_slot *slot;
    gr_status st = gr_slot_acquire(ctx, step, 0, &slot);
    if (st != GR_OK) return st;
    int rc = 0;
    size_t chunks = (bytes + step - 1) / step;
    for (size_t k = 0; k < chunks && rc == 0; k++) {
        size_t i = dst < src ? k : chunks - 1 - k;
        size_t lo = i * step, len = bytes - lo < step ? bytes - lo : step;
        rc = gr_copy(ctx, slot->dev, src + lo, len, ctx->stream);
        if (rc == 0) rc = gr_copy(ctx, dst + lo, slot->dev, len, ctx->stream);
    }
    int sync = gr_dev_stream_sync(ctx->stream);
    if (rc == 0) rc = sync;
    gr_slot_release(ctx, slot);
    return rc ? gr_fail_dev(ctx, rc, "copy") : GR_OK;
}

gr_status gr_buffer_copy(gr_context *ctx, gr_buffer *dst, const gr_buffer *src) {
    if (dst->dtype != src->dtype || dst->n != src->n)
        return gr_fail_arg(ctx, GR_EINVAL, "src", "source is %zu %s, destination %zu %s (they must match)",
                           src->n, gr_dtype_name(src->dtype), dst->n, gr_dtype_name(dst->dtype));
    gr_status st = gr_storage_quiesce(ctx, dst->st);
    if (st != GR_OK || dst->n == 0) return st;
    size_t bytes = dst->n * gr_dtype_size(dst->dtype);
    char *d = gr_buffer_data(dst);
    const char *s = gr_buffer_data(src);
    if (d == s) return GR_OK;
    /* cudaMemcpy is undefined for overlapping ranges (slices of one buffer); memmove is not */
    int overlap = d < s + bytes && s < d + bytes;
    if (overlap && ctx->backend == GR_BACKEND_CUDA && gr_buffer_where(dst) == GR_DEVICE)
        return move_overlapping(ctx, d, s, bytes);
    if (overlap || ctx->backend != GR_BACKEND_CUDA) {
        memmove(d, s, bytes);     /* host memory on both sides */
        return GR_OK;
    }
    int rc = gr_copy(ctx, d, s, bytes, ctx->stream);
    if (rc == 0) rc = gr_dev_stream_sync(ctx->stream);
    return rc ? gr_fail_dev(ctx, rc, "copy") : GR_OK;
}
