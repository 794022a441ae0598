/*
 * sharded_segments.c -- the segments of a sharded buffer (gr_reduce_shards_segments).
 *
 * Each segment is owned by the shard that holds its first element (an empty segment at the very end by
 * the last shard with elements), so every shard owns a run of consecutive segments. A shard's run,
 * less a last segment that spills into the shards after it, is one segmented reduction on its device
 * (segments.c: the policy's kernel, gpu_to_gpu's exact one, an operator's gr_op_segments) over its own
 * boundaries, into buffers on that device; every shard's is queued before any is waited for, so the
 * devices work at once, and each is then copied into place in the results (peer to peer where the GPUs
 * allow it). A segment that spans shards is reduced piece by piece, each piece on
 * its shard's device with its offset in the segment as first index, and combined in piece order
 * (sharded.c): the CPU finish, the exact sums merged, or the operator's combine; its value is written
 * into place. Every result lands on the first shard's device.
 *
 * Integer results, min/max and the indices of argmin/argmax (1-based in their segment, as for one
 * buffer) equal one buffer's; gpu_to_gpu gives one buffer's bits; float sums are the same on every run
 * but may differ from one buffer's in the last bits (each shard's launch shape is its own, and a spanning
 * segment is summed piece by piece).
 */
#include "multi/sharded.h"
#include "core/context.h"
#include "base/error.h"
#include "core/operator_cpu.h"
#include "core/op_pass.h"
#include "core/plan.h"
#include "core/segments.h"
#include "core/buffer.h"

#include <stdlib.h>
#include <string.h>

/* The segments and the shards' places in the array. */
typedef struct layout {
    size_t size;                /* fixed-size segments, or 0 */
    const int64_t *bounds;      /* else the k + 1 boundaries, in host memory */
    size_t k, count;
    gr_buffer *const *shards;
    uint64_t *first;            /* first[i]: the index of shard i's first element; first[count] = n */
} layout;

static uint64_t seg_lo(const layout *l, size_t s) { return l->size ? (uint64_t)s * l->size : (uint64_t)l->bounds[s]; }
static uint64_t seg_hi(const layout *l, size_t s) { return seg_lo(l, s + 1); }
static uint64_t shard_end(const layout *l, size_t i) { return l->first[i + 1]; }

/* start[i]: the first segment shard i owns; shard i owns [start[i], start[i + 1]). */
static void owners(const layout *l, size_t *start) {
    size_t last = 0, next = 0, i = 0;
    for (size_t j = 0; j < l->count; j++)
        if (l->shards[j]->n) last = j;
    for (size_t s = 0; s < l->k; s++) {
        uint64_t lo = seg_lo(l, s);
        while (i < l->count && lo >= shard_end(l, i)) i++;
        size_t owner = i < l->count ? i : last;
        while (next <= owner) start[next++] = s;
    }
    while (next <= l->count) start[next++] = l->k;
}

/* Segment s, which begins in shard i and ends past it: its pieces reduced and combined, its result(s)
 * written as element s of out. */
static gr_status spanning(gr_context *ctx, const layout *l, size_t i, size_t s, const gr_options *o, gr_buffer *out[2],
                          int nres, const gr_dtype want[2]) {
    uint64_t lo = seg_lo(l, s), hi = seg_hi(l, s);
    gr_shard_piece *pieces = malloc((l->count - i) * sizeof *pieces);
    if (!pieces) return gr_fail(ctx, GR_ENOMEM, "out of host memory");
    size_t np = 0;
    for (size_t j = i; j < l->count && l->first[j] < hi; j++) {
        uint64_t from = lo > l->first[j] ? lo : l->first[j], to = hi < shard_end(l, j) ? hi : shard_end(l, j);
        if (to > from) pieces[np++] = (gr_shard_piece){l->shards[j], from - l->first[j], to - from, from - lo, NULL};
    }
    gr_result r;
    gr_status st = gr_shard_pieces_reduce(ctx, pieces, np, o, hi - lo, &r);
    free(pieces);
    for (int j = 0; j < nres && st == GR_OK; j++) {
        unsigned char bytes[8];
        st = gr_segment_result_store(ctx, bytes, 0, want[j], r.value[j]);
        if (st == GR_OK) st = gr_buffer_write(ctx, out[j], s, bytes, 1);
    }
    return st;
}

/* A shard's run of segments that lie inside it: its boundaries and results on its device, in flight. */
typedef struct inner {
    size_t a, k;                /* the run: segments a .. a + k - 1 */
    gr_buffer *bounds, *tmp[2];
    gr_seg_wait wait;
} inner;

/* Segments [a, e) of shard i, all inside it: its own segmented reduction over local boundaries, into
 * buffers on its device, queued on that device's stream (not waited for: every shard's runs at once). */
static gr_status inside_queue(gr_context *ctx, const layout *l, size_t i, size_t a, size_t e, const gr_options *o,
                              int nres, const gr_dtype want[2], inner *r) {
    gr_buffer *shard = l->shards[i];
    gr_where where = gr_buffer_where(shard);
    int device = gr_buffer_device(shard);
    r->a = a;
    r->k = e - a;
    int64_t *local = malloc((r->k + 1) * sizeof *local);
    if (!local) return gr_fail(ctx, GR_ENOMEM, "out of host memory");
    for (size_t s = a; s < e; s++) local[s - a] = (int64_t)(seg_lo(l, s) - l->first[i]);
    local[r->k] = (int64_t)(seg_hi(l, e - 1) - l->first[i]);
    gr_status st = gr_buffer_new_on(ctx, r->k + 1, GR_INT64, where, device, &r->bounds);
    if (st == GR_OK) st = gr_buffer_write(ctx, r->bounds, 0, local, r->k + 1);
    free(local);
    for (int j = 0; j < nres && st == GR_OK; j++) st = gr_buffer_new_on(ctx, r->k, want[j], where, device, &r->tmp[j]);
    gr_segments seg = {0, r->bounds};          /* an operator's kernels: segments.c loads them there */
    if (st == GR_OK) st = gr_segments_queue(ctx, shard, o, &seg, r->tmp, &r->wait);
    return st;
}

/* A queued run waited for, its results copied into elements a .. a + k - 1 of out (peer to peer), its
 * buffers freed; st is the status so far (after a failure the run is only waited for and freed). */
static gr_status inside_finish(gr_context *ctx, inner *r, gr_buffer *out[2], int nres, gr_status st) {
    gr_status done = gr_segments_wait(&r->wait);
    if (st == GR_OK) st = done;
    for (int j = 0; j < nres && st == GR_OK && r->tmp[j]; j++) {
        gr_buffer *view = NULL;
        st = gr_buffer_slice(ctx, out[j], r->a, r->k, &view);
        if (st == GR_OK) st = gr_buffer_copy(ctx, view, r->tmp[j]);
        gr_buffer_free(ctx, view);
    }
    gr_buffer_free(ctx, r->bounds);
    for (int j = 0; j < 2; j++) gr_buffer_free(ctx, r->tmp[j]);
    return st;
}

gr_status gr_reduce_shards_segments(gr_context *ctx, gr_buffer *const *shards, size_t count, const gr_options *o,
                                    const gr_segments *seg, gr_buffer *out[2]) {
    gr_status st = gr_shards_check(ctx, shards, count, o);
    if (st != GR_OK) return st;
    gr_dtype want[2];
    int nres;
    if ((st = gr_segment_result_dtypes(ctx, o, shards[0]->dtype, want, &nres)) != GR_OK) return st;
    layout l = {.size = seg->size, .count = count, .shards = shards};
    if (!(l.first = malloc((count + 1) * sizeof *l.first))) return gr_fail(ctx, GR_ENOMEM, "out of host memory");
    l.first[0] = 0;
    for (size_t i = 0; i < count; i++) l.first[i + 1] = l.first[i] + shards[i]->n;
    size_t n = l.first[count], *start = NULL;
    int64_t *bounds = NULL;
    st = gr_segment_count_of(ctx, n, seg, &l.k);
    if (st == GR_OK && o->determinism == GR_DET_GPU_TO_GPU) {
        gr_plan plan;               /* an op or dtype gpu_to_gpu does not take, refused as for one buffer */
        st = gr_plan_make(ctx, shards[0], o, &plan);
    }
    if (st == GR_OK) st = gr_shards_outs_check(ctx, shards, count, seg->size ? NULL : seg->offsets, out, nres, want, l.k,
                                                   "segment results");
    if (st == GR_OK && !seg->size) st = gr_segment_bounds_read(ctx, n, seg, &bounds);
    if (st == GR_OK && gr_shards_by_cpu(ctx, shards, count, o)) {
        /* the operator's functions over the shards as one array */
        st = gr_operator_cpu_segments(ctx, o, shards, count, seg->size, bounds, l.k, out[0]);
        free(bounds);
        free(l.first);
        return st;
    }
    l.bounds = bounds;
    if (st == GR_OK && l.k && !(start = malloc((count + 1) * sizeof *start)))
        st = gr_fail(ctx, GR_ENOMEM, "out of host memory");
    if (st == GR_OK && l.k) owners(&l, start);
    inner *runs = st == GR_OK && l.k ? calloc(count, sizeof *runs) : NULL;
    if (st == GR_OK && l.k && !runs) st = gr_fail(ctx, GR_ENOMEM, "out of host memory");
    /* every shard's inner run queued on its device, then the spanning segments (their pieces at once on
     * their devices), then the runs waited for and copied into place */
    for (size_t i = 0; i < count && st == GR_OK && runs; i++) {
        size_t a = start[i], b = start[i + 1];
        if (a == b) continue;
        int spills = seg_hi(&l, b - 1) > shard_end(&l, i);
        if (b - spills > a) st = inside_queue(ctx, &l, i, a, b - spills, o, nres, want, &runs[i]);
    }
    for (size_t i = 0; i < count && st == GR_OK && runs; i++) {
        size_t a = start[i], b = start[i + 1];
        if (a != b && seg_hi(&l, b - 1) > shard_end(&l, i)) st = spanning(ctx, &l, i, b - 1, o, out, nres, want);
    }
    for (size_t i = 0; i < count && runs; i++) st = inside_finish(ctx, &runs[i], out, nres, st);
    gr_ctx_enter(ctx);
    free(runs);
    free(start);
    free(bounds);
    free(l.first);
    return st;
}
