/*
 * by_key.c -- gr_reduce_by_key: values grouped by their keys, each group reduced as a segment.
 *
 * First the grouping: the values in key order (a stable sort, so each key's values keep their order), the
 * CSR offsets of the groups and the distinct keys in ascending order -- on the device by by_key.cu's steps
 * (keys as ordered words, CUB's radix sort of (key, value) pairs, or of (key, position) pairs and a gather
 * where the positions are wanted, run-length encoding, a scan), on the host by a sort of positions. With
 * `sorted` the caller's grouping is taken as it is where its runs ascend; runs in another order are checked
 * to be distinct keys and then laid out by the sort (so `sorted` never changes a result's bits). Then every
 * op is the segmented reduction of the grouped values over the offsets (core/segments.c): every op, user
 * operator and determinism level that segments take, the same bits every run. argmin/argmax indices, 1-based within
 * a group there, become positions in the input through the sort's permutation.
 */
#include "gr.h"
#include "base/device.h"
#include "base/error.h"
#include "base/launch.h"
#include "base/memory.h"
#include "core/buffer.h"
#include "core/context.h"
#include "core/policy.h"
#include "core/pool.h"
#include "core/segments.h"
#include "ops/ops.h"

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The device steps (cuda/kernels/by_key.cu), a weak reference: a CPU-only build has none. */
extern const gr_by_key_kernel gr_by_key_gpu __attribute__((weak));

/* The groups of one call. */
typedef struct grouping {
    int device;             /* the values are on the GPU (cuda backend, device memory) */
    size_t n, k;            /* elements, groups */
    size_t longest;         /* the largest group's elements (the segments' launch shape) */
    gr_buffer *values;      /* the values grouped: the input itself (sorted), or a sorted copy */
    gr_buffer *offsets;     /* k + 1 int64 boundaries into values */
    gr_buffer *perm;        /* uint32, grouped position -> input position, where a sort moved them; else NULL */
    gr_buffer *keys;        /* the k distinct keys, ascending, of the keys' dtype */
} grouping;

static void grouping_free(gr_context *ctx, grouping *g) {
    gr_buffer_free(ctx, g->values);
    gr_buffer_free(ctx, g->offsets);
    gr_buffer_free(ctx, g->perm);
    gr_buffer_free(ctx, g->keys);
    memset(g, 0, sizeof *g);
}

/* ---- checks --------------------------------------------------------------------------------------------- */

static gr_status check_inputs(gr_context *ctx, const gr_buffer *keys, const gr_buffer *values) {
    gr_dtype kt = gr_buffer_dtype(keys);
    if (gr_dtype_is_float(kt))
        return gr_fail_arg(ctx, GR_EINVAL, "keys", "keys are an integer dtype or bool (got %s: convert them with "
                           "astype)", gr_dtype_name(kt));
    int same = gr_buffer_ndim(keys) == gr_buffer_ndim(values) && gr_buffer_size(keys) == gr_buffer_size(values);
    for (int d = 0; same && d < keys->ndim; d++) same = keys->shape[d] == values->shape[d];
    char sk[200], sv[200];
    if (!same)      /* views of several axes are read in row-major order, element for element */
        return gr_fail_arg(ctx, GR_EINVAL, "values", "keys and values have one length and shape (keys %s, values %s)",
                           gr_buffer_shape_text(keys, sk, sizeof sk), gr_buffer_shape_text(values, sv, sizeof sv));
    if (gr_buffer_where(keys) != gr_buffer_where(values))
        return gr_fail_arg(ctx, GR_EINVAL, "values", "keys and values are on one side (keys in %s memory, values in "
                           "%s)", gr_buffer_where(keys) == GR_DEVICE ? "device" : "host",
                           gr_buffer_where(values) == GR_DEVICE ? "device" : "host");
    return gr_same_device(ctx, keys, values, "values");
}

/* ---- the grouping on the device ------------------------------------------------------------------------ */

/* A device buffer of `bytes` bytes (at least one), left as the allocator gives it: every buffer here is
 * written whole before it is read, and zeroing hundreds of MiB would cost as much as the work. */
static gr_status scratch(gr_context *ctx, size_t bytes, gr_buffer **out) {
    return gr_buffer_new_unset(ctx, bytes ? bytes : 1, GR_UINT8, GR_DEVICE, out);
}

static gr_status step(gr_context *ctx, int rc, const char *what) {
    return rc ? gr_fail_dev(ctx, rc, what) : GR_OK;
}

/* The runs of n key words at `words` (kbytes each) into g: offsets, and the run words at *unique (k of
 * them, a new buffer). */
static gr_status device_runs(gr_context *ctx, const void *words, size_t n, int kbytes, grouping *g,
                             gr_buffer **unique) {
    const gr_by_key_kernel *K = &gr_by_key_gpu;
    void *s = ctx->stream;
    gr_buffer *counts = NULL, *nruns = NULL, *temp = NULL;
    size_t bytes = 0, scan_bytes = 0;
    unsigned long long k = 0;
    gr_status st = scratch(ctx, n * (size_t)kbytes, unique);      /* n runs at most */
    if (st == GR_OK) st = gr_buffer_new_unset(ctx, n ? n : 1, GR_UINT32, GR_DEVICE, &counts);
    if (st == GR_OK) st = gr_buffer_new_unset(ctx, 1, GR_UINT64, GR_DEVICE, &nruns);
    if (st == GR_OK) st = step(ctx, K->runs(NULL, &bytes, words, NULL, NULL, NULL, n, kbytes, s), "the runs' size");
    if (st == GR_OK) st = scratch(ctx, bytes, &temp);
    if (st == GR_OK)
        st = step(ctx, K->runs(gr_buffer_data(temp), &bytes, words, gr_buffer_data(*unique), gr_buffer_data(counts),
                               gr_buffer_data(nruns), n, kbytes, s), "the runs of equal keys");
    if (st == GR_OK) st = gr_buffer_read(ctx, nruns, 0, &k, 1);
    g->k = (size_t)k;
    if (st == GR_OK) st = gr_buffer_new_unset(ctx, g->k + 1, GR_INT64, GR_DEVICE, &g->offsets);
    if (st == GR_OK) st = step(ctx, K->offsets(NULL, &scan_bytes, NULL, NULL, g->k, n, s), "the offsets' size");
    gr_buffer_free(ctx, temp);
    temp = NULL;
    if (st == GR_OK) st = scratch(ctx, scan_bytes, &temp);
    if (st == GR_OK)
        st = step(ctx, K->offsets(gr_buffer_data(temp), &scan_bytes, gr_buffer_data(counts),
                                  gr_buffer_data(g->offsets), g->k, n, s), "the groups' offsets");
    /* the longest group: the segments' launch shape depends on it */
    gr_buffer *most = NULL;
    unsigned longest = 0;
    if (st == GR_OK) st = gr_buffer_new_unset(ctx, 1, GR_UINT32, GR_DEVICE, &most);
    if (st == GR_OK) st = step(ctx, K->longest(gr_buffer_data(counts), g->k, gr_buffer_data(most), s), "the longest group");
    if (st == GR_OK) st = gr_buffer_read(ctx, most, 0, &longest, 1);
    g->longest = longest;
    gr_buffer_free(ctx, most);
    gr_buffer_free(ctx, temp);
    gr_buffer_free(ctx, counts);
    gr_buffer_free(ctx, nruns);
    return st;
}

/* A stable sort of n (word, value) pairs into keys_out and vals_out (device memory of n words each). */
static gr_status device_sort(gr_context *ctx, const void *words, const void *vals, size_t n, int kbytes, int vbytes,
                             int bits, void *keys_out, void *vals_out) {
    const gr_by_key_kernel *K = &gr_by_key_gpu;
    size_t bytes = 0;
    gr_buffer *temp = NULL;
    gr_status st = step(ctx, K->sort_pairs(NULL, &bytes, NULL, NULL, NULL, NULL, n, kbytes, vbytes, bits, ctx->stream),
                        "the sort's size");
    if (st == GR_OK) st = scratch(ctx, bytes, &temp);
    if (st == GR_OK)
        st = step(ctx, K->sort_pairs(gr_buffer_data(temp), &bytes, words, keys_out, vals, vals_out, n, kbytes, vbytes,
                                     bits, ctx->stream), "the sort by key");
    /* the scratch goes back to the pool once the sort is done */
    if (st == GR_OK) st = step(ctx, gr_dev_stream_sync(ctx->stream), "the sort by key");
    gr_buffer_free(ctx, temp);
    return st;
}

/* A key's ordered word in its own width: the sign bit flipped for the signed dtypes. */
static uint64_t word_of(gr_scalar s, gr_dtype t) {
    unsigned bits = 8u * (unsigned)gr_dtype_size(t);
    uint64_t mask = bits == 64 ? ~0ull : (1ull << bits) - 1;
    if (s.kind == GR_SCALAR_INT) return ((uint64_t)s.v.i ^ (1ull << (bits - 1))) & mask;
    if (s.kind == GR_SCALAR_BOOL) return s.v.b ? 1 : 0;
    return s.v.u & mask;
}

/* The keys' range: the smallest ordered word (what the sort's words are taken from) and the bits their
 * differences from it need (1 at least): a radix sort of fewer bits takes fewer passes. */
static gr_status key_range(gr_context *ctx, gr_buffer *keys, uint64_t *base, int *bits) {
    gr_options o;
    gr_options_init(&o, GR_MINMAX);
    gr_result r;
    gr_status st = gr_reduce(ctx, keys, &o, &r);
    if (st != GR_OK) return st;
    gr_dtype t = gr_buffer_dtype(keys);
    uint64_t lo = word_of(r.value[0], t), span = word_of(r.value[1], t) - lo;
    *base = lo;
    *bits = 1;
    while (*bits < 64 && (span >> *bits)) (*bits)++;
    return GR_OK;
}

/* The keys sorted with their values (or their positions, with_perm, then the values gathered) into
 * *sorted (ordered words less *base, kbytes each) and g->values (and g->perm). The keys' range is measured
 * here, or taken from *base and *range_bits where *range_bits is already set (over 0). */
static gr_status device_sort_by_key(gr_context *ctx, gr_buffer *keys, gr_buffer *values, int with_perm, grouping *g,
                                    gr_buffer **sorted, uint64_t *base, int *range_bits) {
    const gr_by_key_kernel *K = &gr_by_key_gpu;
    gr_dtype kt = gr_buffer_dtype(keys), vt = gr_buffer_dtype(values);
    int kbytes = (int)gr_dtype_size(kt), vbytes = (int)gr_dtype_size(vt);
    size_t n = g->n;
    int bits = 8 * kbytes;
    gr_buffer *ordered = NULL, *positions = NULL;
    gr_status st = GR_OK;
    if (range_bits && *range_bits > 0) {
        bits = *range_bits;
    } else {
        *base = 0;
        if (n) st = key_range(ctx, keys, base, &bits);
    }
    if (st == GR_OK) st = scratch(ctx, n * (size_t)kbytes, &ordered);
    if (st == GR_OK) st = scratch(ctx, n * (size_t)kbytes, sorted);
    if (st == GR_OK) st = gr_buffer_new_unset(ctx, n, vt, GR_DEVICE, &g->values);
    if (st == GR_OK)
        st = step(ctx, K->order_bits(gr_buffer_data(keys), gr_buffer_data(ordered), n, kt, *base, 0, ctx->stream),
                  "the keys' order");
    if (st == GR_OK && with_perm) {
        /* (key, position) pairs sorted, the values gathered through the permutation */
        st = gr_buffer_new_unset(ctx, n, GR_UINT32, GR_DEVICE, &positions);
        if (st == GR_OK) st = gr_buffer_new_unset(ctx, n, GR_UINT32, GR_DEVICE, &g->perm);
        if (st == GR_OK) st = step(ctx, K->iota(gr_buffer_data(positions), n, ctx->stream), "the positions");
        if (st == GR_OK)
            st = device_sort(ctx, gr_buffer_data(ordered), gr_buffer_data(positions), n, kbytes, 4, bits,
                             gr_buffer_data(*sorted), gr_buffer_data(g->perm));
        if (st == GR_OK)
            st = step(ctx, K->gather(gr_buffer_data(values), gr_buffer_data(g->perm), gr_buffer_data(g->values), n,
                                     vbytes, ctx->stream), "the values' gather");
    } else if (st == GR_OK) {
        /* (key, value) pairs sorted, the values moved as words of their width */
        st = device_sort(ctx, gr_buffer_data(ordered), gr_buffer_data(values), n, kbytes, vbytes, bits,
                         gr_buffer_data(*sorted), gr_buffer_data(g->values));
    }
    gr_buffer_free(ctx, ordered);
    gr_buffer_free(ctx, positions);
    if (range_bits) *range_bits = bits;
    return st;
}

static gr_status device_group(gr_context *ctx, gr_buffer *keys, gr_buffer *values, int with_perm, grouping *g,
                              const uint64_t *range) {
    gr_dtype kt = gr_buffer_dtype(keys);
    int kbytes = (int)gr_dtype_size(kt);
    uint64_t base = 0;
    gr_buffer *sorted = NULL, *unique = NULL;
    int bits = range ? (int)range[1] : 0;
    if (range) base = range[0];
    gr_status st = device_sort_by_key(ctx, keys, values, with_perm, g, &sorted, &base, &bits);
    if (st == GR_OK) st = device_runs(ctx, gr_buffer_data(sorted), g->n, kbytes, g, &unique);
    if (st == GR_OK) st = gr_buffer_new_unset(ctx, g->k, kt, GR_DEVICE, &g->keys);
    if (st == GR_OK)
        st = step(ctx, gr_by_key_gpu.order_bits(gr_buffer_data(unique), gr_buffer_data(g->keys), g->k, kt, base, 1,
                                                ctx->stream), "the distinct keys");
    if (st == GR_OK) st = step(ctx, gr_dev_stream_sync(ctx->stream), "the grouping by key");
    gr_buffer_free(ctx, unique);
    gr_buffer_free(ctx, sorted);
    return st;
}

/* *flag of the ascending step over k words: 1 where they are not strictly ascending. */
static gr_status device_not_ascending(gr_context *ctx, const void *words, size_t k, int kbytes, unsigned *flag) {
    gr_buffer *f = NULL;
    *flag = 0;
    gr_status st = gr_buffer_new_unset(ctx, 1, GR_UINT32, GR_DEVICE, &f);
    if (st == GR_OK) st = gr_buffer_write(ctx, f, 0, flag, 1);
    if (st == GR_OK)
        st = step(ctx, gr_by_key_gpu.ascending(words, k, kbytes, gr_buffer_data(f), ctx->stream), "the keys' order check");
    if (st == GR_OK) st = gr_buffer_read(ctx, f, 0, flag, 1);
    gr_buffer_free(ctx, f);
    return st;
}

/* Keys the caller grouped: their runs, checked to be distinct keys. Runs already in ascending order are the
 * groups as they lie (the values copied only where they start off a 16-byte boundary, so that every group
 * starts where the sorted path's does and the results are the same bits); runs in another order leave
 * *resort set, for the sort to lay them out as it does any keys. */
static gr_status device_grouped(gr_context *ctx, gr_buffer *keys, gr_buffer *values, grouping *g, int *resort) {
    const gr_by_key_kernel *K = &gr_by_key_gpu;
    gr_dtype kt = gr_buffer_dtype(keys), vt = gr_buffer_dtype(values);
    int kbytes = (int)gr_dtype_size(kt);
    gr_buffer *unique = NULL, *ordered = NULL, *runs = NULL, *sorted = NULL, *order = NULL;
    *resort = 0;
    gr_status st = device_runs(ctx, gr_buffer_data(keys), g->n, kbytes, g, &unique);
    if (st == GR_OK) st = scratch(ctx, g->k * (size_t)kbytes, &ordered);
    if (st == GR_OK)
        st = step(ctx, K->order_bits(gr_buffer_data(unique), gr_buffer_data(ordered), g->k, kt, 0, 0, ctx->stream),
                  "the keys' order");
    unsigned out_of_order = 0;
    if (st == GR_OK) st = device_not_ascending(ctx, gr_buffer_data(ordered), g->k, kbytes, &out_of_order);
    if (st == GR_OK && out_of_order) {
        /* the runs sorted by key: a key in two runs is then next to itself */
        st = gr_buffer_new_unset(ctx, g->k, GR_UINT32, GR_DEVICE, &runs);
        if (st == GR_OK) st = gr_buffer_new_unset(ctx, g->k, GR_UINT32, GR_DEVICE, &order);
        if (st == GR_OK) st = scratch(ctx, g->k * (size_t)kbytes, &sorted);
        if (st == GR_OK) st = step(ctx, K->iota(gr_buffer_data(runs), g->k, ctx->stream), "the runs' positions");
        if (st == GR_OK)
            st = device_sort(ctx, gr_buffer_data(ordered), gr_buffer_data(runs), g->k, kbytes, 4, 0,
                             gr_buffer_data(sorted), gr_buffer_data(order));
        unsigned repeated = 0;
        if (st == GR_OK) st = device_not_ascending(ctx, gr_buffer_data(sorted), g->k, kbytes, &repeated);
        if (st == GR_OK && repeated)
            st = gr_fail_arg(ctx, GR_EINVAL, "sorted", "the keys are not grouped (a key appears in two runs of equal "
                             "keys): leave sorted out, and they are sorted");
        *resort = st == GR_OK;
    } else if (st == GR_OK) {
        st = gr_buffer_new_unset(ctx, g->k, kt, GR_DEVICE, &g->keys);
        if (st == GR_OK && g->k)
            st = step(ctx, gr_dev_copy(gr_buffer_data(g->keys), gr_buffer_data(unique), g->k * (size_t)kbytes,
                                       ctx->stream), "the distinct keys");
        if (st == GR_OK && (uintptr_t)gr_buffer_data(values) % 16 == 0) {
            st = gr_buffer_slice(ctx, values, 0, g->n, &g->values);
        } else if (st == GR_OK) {
            st = gr_buffer_new_unset(ctx, g->n, vt, GR_DEVICE, &g->values);
            if (st == GR_OK && g->n)
                st = step(ctx, gr_dev_copy(gr_buffer_data(g->values), gr_buffer_data(values),
                                           g->n * gr_dtype_size(vt), ctx->stream), "the values' copy");
        }
    }
    if (st == GR_OK) st = step(ctx, gr_dev_stream_sync(ctx->stream), "the grouping by key");
    gr_buffer_free(ctx, unique);
    gr_buffer_free(ctx, ordered);
    gr_buffer_free(ctx, runs);
    gr_buffer_free(ctx, sorted);
    gr_buffer_free(ctx, order);
    return st;
}

/* ---- one pass over runs ------------------------------------------------------------------------------- */

/* Whether the call's ops run as one pass over runs of keys (gr_by_key_kernel.reduce_runs): built-in ops that
 * do not want an element's index, on the device, short of gpu_to_gpu (whose exact sums the segmented kernel
 * gives). The others group the keys into offsets and reduce them as segments. */
static int runs_pass_takes(gr_context *ctx, const gr_options *o, const gr_op *ops, int nops) {
    if (!&gr_by_key_gpu || !gr_by_key_gpu.reduce_runs || o->user || o->cpu || o->determinism == GR_DET_GPU_TO_GPU ||
        gr_ctx_root(ctx)->by_key_segments)
        return 0;
    for (int k = 0; k < (nops ? nops : 1); k++) {
        gr_op op = nops ? ops[k] : o->op;
        if (op == GR_ARGMIN || op == GR_ARGMAX) return 0;
    }
    return 1;
}

/* Elements a thread of the pass over runs takes: GPUREDUCE_RUNS_ITEMS=8 or 16, for comparing the two tile
 * shapes in one device run (each its own order of combination, so its own bits); else 16 for values of up
 * to 4 bytes (a tile reads 32 KiB of 4-byte keys and values: more bytes in flight a block, half the tiles
 * to look back over; 1.0-1.3x faster than 8 on an H100, docs/performance.md) and 8 for wider ones (their
 * registers). Chosen from the value dtype alone, so that sorted and unsorted calls, and an op alone or in
 * a list, take the same shape. */
static int runs_items(gr_context *ctx, size_t value_bytes) {
    int forced = gr_ctx_root(ctx)->runs_items;
    return forced ? forced : value_bytes <= 4 ? 16 : 8;
}

/* The bytes of op's accumulator on values of vt as the pass over runs keeps it (a multiple of 8), or 0 where
 * the op takes no accumulator on them (the error set). */
static size_t runs_acc_bytes(gr_context *ctx, const gr_options *o, gr_dtype vt) {
    int acc = gr_op_acc_dtype(ctx, o->op, vt, o->acc);
    return acc < 0 ? 0 : (gr_op_acc_size(o->op, vt, (gr_dtype)acc) + 7) / 8 * 8;
}

/* The runs of n key words (kbytes wide; flip: the sign bit of signed keys) at `words` and `values`, op's
 * results into out[0..count) and the run words into words_out, `cap` elements each (the runs of higher
 * ranks are left out). Its scratch is the caller's slot (pool.c: kept between calls, no allocation once
 * warm), of gr_runs_scratch_bytes for the op at least. With `answer`, the pass's answer -- the scratch's
 * header: *k the number of runs, *disorder set where a run's key is below the one before it -- comes back
 * through the slot's pinned result area, one wait; without, the pass is only queued (a later op of the
 * call, whose count is known), and the caller waits for it with the rest. */
static gr_status runs_pass(gr_context *ctx, gr_slot *slot, int answer, const void *words, int kbytes, uint64_t flip,
                           gr_buffer *values, const gr_options *o, gr_buffer *out[2], void *words_out, size_t cap,
                           size_t *k, unsigned *disorder) {
    gr_dtype vt = gr_buffer_dtype(values);
    size_t n = gr_buffer_size(values), acc_bytes = runs_acc_bytes(ctx, o, vt);
    if (!acc_bytes) return GR_EINVAL;
    const void *vdata = gr_buffer_data(values);
    gr_runs_launch L = {
        .keys = words, .kbytes = kbytes, .flip = flip, .values = vdata, .in_dtype = vt,
        .acc = (gr_dtype)gr_op_acc_dtype(ctx, o->op, vt, o->acc), .op = o->op, .ddof = o->ddof, .n = n,
        .aligned = (uintptr_t)words % 16 == 0 && (uintptr_t)vdata % 16 == 0,
        .items = runs_items(ctx, gr_dtype_size(vt)),
        .keys_out = words_out, .out = {gr_buffer_data(out[0]), out[1] ? gr_buffer_data(out[1]) : NULL},
        .capacity = cap, .scratch = slot->dev, .acc_bytes = acc_bytes, .stream = ctx->stream};
    gr_status st = step(ctx, gr_by_key_gpu.reduce_runs(&L), "the pass over runs of keys");
    if (!answer) return st;
    gr_runs_header info = {0, 0, 0};
    if (st == GR_OK) st = step(ctx, gr_copy(ctx, slot->result, slot->dev, sizeof info, ctx->stream), "the count of runs");
    if (st == GR_OK) st = step(ctx, gr_dev_stream_sync(ctx->stream), "the pass over runs of keys");
    if (st == GR_OK) memcpy(&info, slot->result, sizeof info);
    *k = (size_t)info.runs;
    *disorder = info.disorder;
    return st;
}

/* ---- the grouping on the host ---------------------------------------------------------------------------- */

/* A key as an ordered 64-bit word: its unsigned order is the key's. */
static uint64_t ordered_word(gr_scalar s) {
    if (s.kind == GR_SCALAR_INT) return (uint64_t)s.v.i ^ (1ull << 63);
    if (s.kind == GR_SCALAR_BOOL) return s.v.b ? 1 : 0;
    return s.v.u;
}

typedef struct { uint64_t word; uint32_t pos; } keyed;

static int by_word(const void *a, const void *b) {
    const uint64_t *x = a, *y = b;
    return *x < *y ? -1 : *x > *y;
}

static int by_word_then_pos(const void *a, const void *b) {
    const keyed *x = a, *y = b;
    if (x->word != y->word) return x->word < y->word ? -1 : 1;
    return x->pos < y->pos ? -1 : x->pos > y->pos;
}

/* The runs of equal words in e[0..n): their starts at offsets[0..k), offsets[k] = n; returns k. */
static size_t runs_of(const keyed *e, size_t n, int64_t *offsets) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (i == 0 || e[i].word != e[i - 1].word) offsets[k++] = (int64_t)i;
    offsets[k] = (int64_t)n;
    return k;
}

/* Host data: positions sorted by (key, position) -- stable -- or, sorted, the caller's runs as they lie where
 * they ascend; runs in another order are checked distinct and then laid out by the sort, as on the device. */
static gr_status host_group(gr_context *ctx, gr_buffer *keys, gr_buffer *values, int sorted, grouping *g) {
    gr_dtype kt = gr_buffer_dtype(keys), vt = gr_buffer_dtype(values);
    size_t n = g->n, ks = gr_dtype_size(kt), vs = gr_dtype_size(vt);
    gr_where where = gr_buffer_where(values);
    unsigned char *kb = malloc(n ? n * ks : 1), *vb = malloc(n ? n * vs : 1), *grouped = malloc(n ? n * vs : 1);
    keyed *e = malloc((n ? n : 1) * sizeof *e);
    int64_t *offsets = malloc((n + 1) * sizeof *offsets);
    uint64_t *run_words = NULL;
    uint32_t *perm = NULL;
    gr_status st = kb && vb && grouped && e && offsets ? GR_OK : gr_fail(ctx, GR_ENOMEM, "out of host memory");
    if (st == GR_OK) st = gr_buffer_read(ctx, keys, 0, kb, n);
    if (st == GR_OK) st = gr_buffer_read(ctx, values, 0, vb, n);
    for (size_t i = 0; i < n && st == GR_OK; i++) e[i] = (keyed){ordered_word(gr_scalar_load(kb + i * ks, kt)), (uint32_t)i};
    size_t k = 0;
    int moved = !sorted;
    if (st == GR_OK && sorted) {
        /* the caller's runs: where their words do not ascend, sorted words show a key in two runs */
        k = runs_of(e, n, offsets);
        for (size_t s = 1; s < k && !moved; s++) moved = !(e[offsets[s - 1]].word < e[offsets[s]].word);
        if (moved && !(run_words = malloc(k * sizeof *run_words))) st = gr_fail(ctx, GR_ENOMEM, "out of host memory");
        for (size_t s = 0; s < k && moved && st == GR_OK; s++) run_words[s] = e[offsets[s]].word;
        if (moved && st == GR_OK) qsort(run_words, k, sizeof *run_words, by_word);
        for (size_t s = 1; s < k && moved && st == GR_OK; s++)
            if (run_words[s - 1] == run_words[s])
                st = gr_fail_arg(ctx, GR_EINVAL, "sorted", "the keys are not grouped (a key appears in two runs of "
                                 "equal keys): leave sorted out, and they are sorted");
    }
    if (st == GR_OK && moved) qsort(e, n, sizeof *e, by_word_then_pos);
    if (st == GR_OK) k = runs_of(e, n, offsets);
    g->k = k;
    for (size_t i = 0; i < n && st == GR_OK; i++) memcpy(grouped + i * vs, vb + (size_t)e[i].pos * vs, vs);
    /* the buffers: grouped values, offsets, the distinct keys ascending, the permutation where there was a sort */
    if (st == GR_OK) st = gr_buffer_new_unset(ctx, n, vt, where, &g->values);
    if (st == GR_OK) st = gr_buffer_write(ctx, g->values, 0, grouped, n);
    if (st == GR_OK) st = gr_buffer_new_unset(ctx, k + 1, GR_INT64, where, &g->offsets);
    if (st == GR_OK) st = gr_buffer_write(ctx, g->offsets, 0, offsets, k + 1);
    if (st == GR_OK) st = gr_buffer_new_unset(ctx, k, kt, where, &g->keys);
    for (size_t s = 0; s < k && st == GR_OK; s++) st = gr_buffer_write(ctx, g->keys, s, kb + (size_t)e[offsets[s]].pos * ks, 1);
    if (st == GR_OK && moved && !(perm = malloc((n ? n : 1) * sizeof *perm))) st = gr_fail(ctx, GR_ENOMEM, "out of host memory");
    for (size_t i = 0; i < n && st == GR_OK && moved; i++) perm[i] = e[i].pos;
    if (st == GR_OK && moved) st = gr_buffer_new_unset(ctx, n, GR_UINT32, where, &g->perm);
    if (st == GR_OK && moved) st = gr_buffer_write(ctx, g->perm, 0, perm, n);
    free(kb);
    free(vb);
    free(grouped);
    free(e);
    free(offsets);
    free(run_words);
    free(perm);
    return st;
}

/* ---- the reductions of the groups ---------------------------------------------------------------------- */

/* argmin/argmax indices, 1-based within their group, as 1-based positions in the input. */
static gr_status input_positions(gr_context *ctx, const grouping *g, gr_buffer *idx) {
    size_t k = gr_buffer_size(idx);
    if (!k) return GR_OK;
    if (g->device) {
        gr_status st = step(ctx, gr_by_key_gpu.global_index(gr_buffer_data(idx), gr_buffer_data(g->offsets),
                                                            g->perm ? gr_buffer_data(g->perm) : NULL, k, ctx->stream),
                            "the indices' positions");
        return st == GR_OK ? step(ctx, gr_dev_stream_sync(ctx->stream), "the indices' positions") : st;
    }
    int64_t *v = malloc(k * sizeof *v), *off = malloc((k + 1) * sizeof *off);
    uint32_t *p = g->perm ? malloc(g->n * sizeof *p) : NULL;
    gr_status st = v && off && (p || !g->perm) ? GR_OK : gr_fail(ctx, GR_ENOMEM, "out of host memory");
    if (st == GR_OK) st = gr_buffer_read(ctx, idx, 0, v, k);
    if (st == GR_OK) st = gr_buffer_read(ctx, g->offsets, 0, off, k + 1);
    if (st == GR_OK && p) st = gr_buffer_read(ctx, g->perm, 0, p, g->n);
    for (size_t s = 0; s < k && st == GR_OK; s++) {
        int64_t j = off[s] + v[s] - 1;
        v[s] = (p ? (int64_t)p[j] : j) + 1;
    }
    if (st == GR_OK) st = gr_buffer_write(ctx, idx, 0, v, k);
    free(v);
    free(off);
    free(p);
    return st;
}

/* The caller's buffer for k results (its first k elements, a new handle), or a new one of dtype t. */
static gr_status target(gr_context *ctx, gr_buffer *given, size_t k, gr_dtype t, gr_where where, gr_buffer **out) {
    if (!given) return gr_buffer_new_unset(ctx, k, t, where, out);
    if (gr_buffer_size(given) < k)
        return gr_fail_arg(ctx, GR_EINVAL, "out", "holds %zu elements, and there are %zu distinct keys",
                           gr_buffer_size(given), k);
    if (gr_buffer_dtype(given) != t)
        return gr_fail_arg(ctx, GR_EINVAL, "out", "is %s; this result is %s", gr_dtype_name(gr_buffer_dtype(given)),
                           gr_dtype_name(t));
    gr_status st = gr_buffer_check_compact(ctx, given, "out");
    return st == GR_OK ? gr_buffer_slice(ctx, given, 0, k, out) : st;
}

/* Every buffer the caller gave -- the keys' and each op's -- checked for k results before any is written,
 * so that a refused call leaves them all as they were. */
static gr_status check_given(gr_context *ctx, const gr_options *o, const gr_op *ops, int nops, gr_dtype kt,
                             gr_dtype vt, gr_buffer *keys_out, gr_buffer *(*results)[2], size_t k) {
    gr_buffer *view = NULL;
    gr_status st = keys_out ? target(ctx, keys_out, k, kt, GR_DEVICE, &view) : GR_OK;
    gr_buffer_free(ctx, view);
    for (int j = 0; j < (nops ? nops : 1) && st == GR_OK; j++) {
        gr_options one = *o;
        if (nops) one.op = ops[j];
        gr_dtype dt[2];
        int count = 1;
        st = gr_segment_result_dtypes(ctx, &one, vt, dt, &count);
        for (int i = 0; i < count && st == GR_OK; i++) {
            view = NULL;
            if (results[j][i]) st = target(ctx, results[j][i], k, dt[i], GR_DEVICE, &view);
            gr_buffer_free(ctx, view);
        }
    }
    return st;
}

/* One op (o's) over the groups, into results[0..1] (the caller's buffers or new ones). */
static gr_status reduce_groups(gr_context *ctx, const grouping *g, const gr_options *o, gr_buffer *results[2]) {
    gr_dtype dt[2];
    int count = 1;
    gr_status st = gr_segment_result_dtypes(ctx, o, gr_buffer_dtype(g->values), dt, &count);
    if (st != GR_OK) return st;
    gr_where where = gr_buffer_where(g->values);
    gr_buffer *out[2] = {NULL, NULL};
    for (int i = 0; i < count && st == GR_OK; i++) st = target(ctx, results[i], g->k, dt[i], where, &out[i]);
    /* the segmented kernel over the offsets (an op the pass over runs takes never comes here: by_runs) */
    gr_segments seg = {0, g->offsets};
    if (st == GR_OK) st = gr_segments_uneven(ctx, g->values, o, &seg, g->longest, out);
    if (st == GR_OK && o->op != GR_MINMAX && count == 2) st = input_positions(ctx, g, out[1]);
    for (int i = 0; i < count; i++) {
        if (st == GR_OK && !results[i]) results[i] = out[i];    /* a new buffer: the caller's now */
        else gr_buffer_free(ctx, out[i]);
    }
    return st;
}

/* A result of k elements from a buffer `full` that holds n: into the caller's buffer (copied), or `full`'s
 * first k elements -- a view where k is more than an eighth of n or `full` is small (no copy; the rest of
 * `full` stays held with it), else a copy of its own (the large buffer freed). A copy into a buffer made
 * here is only queued on the context's stream, and *queued set: the caller waits once for all of them. */
#define TRIM_VIEW_BYTES 65536
static gr_status trim(gr_context *ctx, gr_buffer *full, size_t k, gr_buffer *given, gr_dtype t, gr_buffer **out,
                      int *queued) {
    gr_buffer *head = NULL;
    gr_status st = gr_buffer_slice(ctx, full, 0, k, &head);
    size_t n = gr_buffer_size(full);
    if (st == GR_OK && !given && (k > n / 8 || n * gr_dtype_size(t) <= TRIM_VIEW_BYTES)) {
        *out = head;
        return GR_OK;
    }
    if (st == GR_OK) st = target(ctx, given, k, t, GR_DEVICE, out);
    if (st == GR_OK && given) st = gr_buffer_copy(ctx, *out, head);
    if (st == GR_OK && !given && k) {
        st = step(ctx, gr_copy(ctx, gr_buffer_data(*out), gr_buffer_data(head), k * gr_dtype_size(t), ctx->stream),
                  "a result's copy");
        *queued = 1;
    }
    if (st != GR_OK && *out != given) {
        gr_buffer_free(ctx, *out);
        *out = NULL;
    }
    gr_buffer_free(ctx, head);
    return st;
}

/* The call's ops (of `all`, whose given buffers are checked first) as passes over runs of keys, one per op:
 * over the keys as they lie (sorted; *disorder set, and
 * nothing made, where their runs do not ascend) or as the sort lays them out with their values. The first
 * pass writes into buffers of as many elements as there can be distinct keys -- n, or fewer where the keys'
 * width (sorted) or range (the sort's) says so -- and gives the count of runs, k; later ones into buffers
 * of k. Values in the sort's order are the input's own where the keys were already grouped, so `sorted`
 * gives the same bits as the sort does. */
static gr_status by_runs(gr_context *ctx, gr_buffer *keys, gr_buffer *values, const gr_options *o, int sorted,
                         const gr_op *ops, int nops, gr_buffer **keys_out, gr_buffer *(*results)[2], size_t *k,
                         int *disorder, const gr_op *all, int nall, gr_buffer *(*all_results)[2],
                         const uint64_t range[2]) {
    gr_dtype kt = gr_buffer_dtype(keys), vt = gr_buffer_dtype(values);
    int kbytes = (int)gr_dtype_size(kt);
    size_t n = gr_buffer_size(values);
    uint64_t flip = sorted && gr_dtype_is_signed(kt) ? 1ull << (8 * kbytes - 1) : 0, base = range ? range[0] : 0;
    grouping g = {.device = 1, .n = n};
    gr_buffer *words = NULL, *run_words = NULL, *kout = NULL;
    int bits = range ? (int)range[1] : 8 * kbytes, queued = 0;
    gr_status st = sorted ? GR_OK : device_sort_by_key(ctx, keys, values, 0, &g, &words, &base, &bits);
    const void *kw = sorted ? gr_buffer_data(keys) : gr_buffer_data(words);
    gr_buffer *vals = sorted ? values : g.values;
    size_t cap = bits < 40 && ((size_t)1 << bits) < n ? (size_t)1 << bits : n;
    if (st == GR_OK) st = gr_buffer_new_unset(ctx, cap, kt, GR_DEVICE, &run_words);
    /* one slot for every op's pass: the scratch of the widest accumulator, reused pass after pass on the
     * context's stream, so that the passes after the first (their count known) queue without a wait */
    gr_slot *slot = NULL;
    size_t scratch_bytes = 0;
    for (int j = 0; j < (nops ? nops : 1) && st == GR_OK; j++) {
        gr_options one = *o;
        if (nops) one.op = ops[j];
        size_t b = runs_acc_bytes(ctx, &one, vt);
        if (!b) st = GR_EINVAL;
        else if (gr_runs_scratch_bytes(n, b) > scratch_bytes) scratch_bytes = gr_runs_scratch_bytes(n, b);
    }
    if (st == GR_OK) st = gr_slot_acquire(ctx, scratch_bytes, 0, &slot);
    *disorder = 0;
    for (int j = 0; j < (nops ? nops : 1) && st == GR_OK; j++) {
        gr_options one = *o;
        if (nops) one.op = ops[j];
        gr_dtype dt[2];
        int count = 1;
        gr_buffer *out[2] = {NULL, NULL};
        unsigned flag = 0;
        size_t runs = 0;
        st = gr_segment_result_dtypes(ctx, &one, vt, dt, &count);
        for (int i = 0; i < count && st == GR_OK; i++)
            st = j ? target(ctx, results[j][i], *k, dt[i], GR_DEVICE, &out[i])
                   : gr_buffer_new_unset(ctx, cap, dt[i], GR_DEVICE, &out[i]);
        if (st == GR_OK)
            st = runs_pass(ctx, slot, j == 0, kw, kbytes, flip, vals, &one, out, gr_buffer_data(run_words),
                           j ? *k : cap, &runs, &flag);
        if (j > 0) queued = 1;
        if (st == GR_OK && j == 0) {
            *k = runs;
            *disorder = flag != 0 || runs > cap;
            if (!*disorder) st = check_given(ctx, o, all, nall, kt, vt, *keys_out, all_results, runs);
        }
        for (int i = 0; i < count && st == GR_OK && j == 0 && !*disorder; i++) {
            gr_buffer *full = out[i];
            out[i] = NULL;
            st = trim(ctx, full, *k, results[j][i], dt[i], &out[i], &queued);
            gr_buffer_free(ctx, full);
        }
        for (int i = 0; i < count; i++) {
            if (st == GR_OK && !*disorder && !results[j][i]) results[j][i] = out[i];
            else gr_buffer_free(ctx, out[i]);
        }
        if (*disorder) break;
    }
    /* the distinct keys: the run words as they are, or turned back from the sort's words */
    if (st == GR_OK && !*disorder && sorted) st = trim(ctx, run_words, *k, *keys_out, kt, &kout, &queued);
    if (st == GR_OK && !*disorder && !sorted) {
        st = target(ctx, *keys_out, *k, kt, GR_DEVICE, &kout);
        if (st == GR_OK && *k)
            st = step(ctx, gr_by_key_gpu.order_bits(gr_buffer_data(run_words), gr_buffer_data(kout), *k, kt, base, 1,
                                                    ctx->stream), "the distinct keys");
        queued = 1;
    }
    /* the passes and copies queued above are done before the call returns, like every synchronous call's work */
    if (queued && st == GR_OK) st = step(ctx, gr_dev_stream_sync(ctx->stream), "the results and keys");
    if (slot && st != GR_OK) gr_dev_stream_sync(ctx->stream);     /* the slot goes back idle: nothing queued may use it */
    gr_slot_release(ctx, slot);
    if (st == GR_OK && !*disorder && !*keys_out) *keys_out = kout;
    else gr_buffer_free(ctx, kout);
    grouping_free(ctx, &g);
    gr_buffer_free(ctx, words);
    gr_buffer_free(ctx, run_words);
    return st;
}

/* The call's ops (of `all`, whose given buffers are checked first unless `checked`) over the keys grouped
 * into CSR offsets: on the host, or on the device by the sort (the caller's runs where `sorted`), each op
 * then a segmented reduction. */
static gr_status by_groups(gr_context *ctx, gr_buffer *keys, gr_buffer *values, const gr_options *o, int sorted,
                           const gr_op *ops, int nops, gr_buffer **keys_out, gr_buffer *(*results)[2], size_t *k,
                           const gr_op *all, int nall, gr_buffer *(*all_results)[2], int checked,
                           const uint64_t *range, int *disorder) {
    grouping g = {.n = gr_buffer_size(values)};
    g.device = ctx->base.backend == GR_BACKEND_CUDA && gr_buffer_where(values) == GR_DEVICE;
    int with_perm = 0, resort = 0;
    for (int j = 0; j < nops; j++) with_perm |= !o->user && !o->cpu && (ops[j] == GR_ARGMIN || ops[j] == GR_ARGMAX);
    gr_status st = GR_OK;
    if (!g.device) st = host_group(ctx, keys, values, sorted, &g);
    else if (sorted) st = device_grouped(ctx, keys, values, &g, &resort);
    if (st == GR_OK && resort) {        /* runs out of order: the caller goes the unsorted way */
        *disorder = 1;
        grouping_free(ctx, &g);
        return GR_OK;
    }
    if (st == GR_OK && g.device && !sorted) st = device_group(ctx, keys, values, with_perm, &g, range);
    gr_buffer *kout = NULL;
    if (st == GR_OK && !checked)
        st = check_given(ctx, o, all, nall, gr_buffer_dtype(keys), gr_buffer_dtype(values), *keys_out, all_results, g.k);
    if (st == GR_OK) st = target(ctx, *keys_out, g.k, gr_buffer_dtype(keys), gr_buffer_where(values), &kout);
    if (st == GR_OK) st = gr_buffer_copy(ctx, kout, g.keys);
    for (int j = 0; j < nops && st == GR_OK; j++) {
        gr_options one = *o;
        one.op = ops[j];
        st = reduce_groups(ctx, &g, &one, results[j]);
    }
    if (st == GR_OK && !*keys_out) *keys_out = kout;
    else gr_buffer_free(ctx, kout);
    *k = g.k;
    grouping_free(ctx, &g);
    return st;
}

gr_status gr_reduce_by_key(gr_context *ctx, gr_buffer *keys, gr_buffer *values, const gr_options *o, int sorted,
                           const gr_op *ops, int nops, gr_buffer **keys_out, gr_buffer *(*results)[2], size_t *count) {
    *count = 0;
    ctx = gr_ctx_for(ctx, values);
    gr_status st = check_inputs(ctx, keys, values);
    if (st != GR_OK) return st;
    if (nops < 0 || nops > GR_OP_COUNT) return gr_fail_arg(ctx, GR_EINVAL, "ops", "0 to %d ops", GR_OP_COUNT);
    if (o->stream)
        return gr_fail_arg(ctx, GR_EINVAL, "stream", "a reduction by key runs on the context's stream, synchronously "
                           "(leave opts.stream out)");
    size_t n = gr_buffer_size(values);
    int device = ctx->base.backend == GR_BACKEND_CUDA && gr_buffer_where(values) == GR_DEVICE;
    if (device && (!&gr_by_key_gpu || !gr_by_key_gpu.sort_pairs))
        return gr_fail(ctx, GR_ENODEV, "reductions by key of device data need the CUDA kernels (this build has none)");
    /* each op on its own path -- the pass over runs where it takes the op, segments otherwise -- so that an
     * op's results are the same bits alone and in a list */
    int nall = nops ? nops : 1, on_runs[GR_OP_COUNT], nr = 0;
    gr_buffer *ck = NULL, *cv = NULL;           /* compact handles: strided views through copies */
    gr_op all[GR_OP_COUNT];
    for (int j = 0; j < nall; j++) {
        all[j] = nops ? ops[j] : o->op;
        on_runs[j] = device && n && runs_pass_takes(ctx, o, &all[j], 1);
        nr += on_runs[j];
    }
    if (device && n > INT_MAX && nr < nall)
        return gr_fail_arg(ctx, GR_EINVAL, "values", "a reduction by key on the device with argmin, argmax, an operator "
                           "or gpu_to_gpu takes up to 2^31 - 1 elements (got %zu; the other ops take any length)", n);
    if (!device && n > UINT32_MAX)
        return gr_fail_arg(ctx, GR_EINVAL, "values", "a reduction by key takes up to 2^32 - 1 elements (got %zu)", n);
    /* what the caller gave (the rest is made here, and freed again on a failure) */
    gr_buffer *given_keys = *keys_out, *given[GR_OP_COUNT][2];
    for (int j = 0; j < nall; j++) given[j][0] = results[j][0], given[j][1] = results[j][1];
    st = gr_buffer_contiguous(ctx, keys, &ck);
    if (st == GR_OK) st = gr_buffer_contiguous(ctx, values, &cv);
    /* The ops the pass takes run as passes over runs alone (no offsets) past 2^31 - 1 elements (CUB's
     * run-length encoding stops there), and where gr_policy_by_runs_alone says so from the keys' range
     * (today: always); otherwise the grouping picks per op (reduce_groups). Unsorted keys are measured for
     * their sort anyway; sorted ones are not (two waits for two keys), which the policy, deciding without
     * their range, does not need. Sorted runs out of order go the unsorted way whole, below. */
    uint64_t range[2] = {0, 0};
    int have_range = 0, alone = n > INT_MAX;
    if (st == GR_OK && nr && !alone) {
        int bits = 0;               /* 0: not measured */
        if (!sorted) st = key_range(ctx, ck, &range[0], &bits);
        range[1] = (uint64_t)bits;
        have_range = !sorted;
        alone = gr_policy_by_runs_alone(n, bits);
    }
    for (int j = 0; j < nall && !alone; j++) {
        nr -= on_runs[j];
        on_runs[j] = 0;
    }
    /* the ops of each path, with their result slots */
    gr_op part_ops[2][GR_OP_COUNT];
    gr_buffer *part_res[2][GR_OP_COUNT][2];
    int count_of[2] = {0, 0};
    for (int j = 0; j < nall; j++) {
        int p = on_runs[j] ? 0 : 1, m = count_of[p]++;
        part_ops[p][m] = all[j];
        part_res[p][m][0] = results[j][0];
        part_res[p][m][1] = results[j][1];
    }
    size_t k = 0;
    int unsorted = 0;           /* sorted keys whose runs do not ascend: the call again without sorted */
    if (st == GR_OK && nr) {
        int disorder = 0;
        st = by_runs(ctx, ck, cv, o, sorted, part_ops[0], nr, keys_out, part_res[0], &k, &disorder, all, nall, results,
                     have_range ? range : NULL);
        if (st == GR_OK && disorder) {
            /* runs that do not ascend: checked to be distinct keys (an error names `sorted` if not) */
            grouping g = {.device = 1, .n = n};
            int resort = 0;
            st = device_grouped(ctx, ck, cv, &g, &resort);
            grouping_free(ctx, &g);
            unsorted = st == GR_OK;
        }
    }
    if (st == GR_OK && nr < nall && !unsorted) {
        gr_buffer *extra_keys = NULL;           /* the keys once more, where the runs gave them already */
        st = by_groups(ctx, ck, cv, o, sorted, part_ops[1], nall - nr, nr ? &extra_keys : keys_out, part_res[1], &k,
                       all, nall, results, nr > 0, have_range ? range : NULL, &unsorted);
        gr_buffer_free(ctx, extra_keys);
    }
    for (int j = 0, m[2] = {0, 0}; j < nall; j++) {
        int p = on_runs[j] ? 0 : 1;
        results[j][0] = part_res[p][m[p]][0];
        results[j][1] = part_res[p][m[p]][1];
        m[p]++;
    }
    for (int j = 0; j < nall && st != GR_OK; j++)
        for (int i = 0; i < 2; i++)
            if (results[j][i] != given[j][i]) {
                gr_buffer_free(ctx, results[j][i]);
                results[j][i] = given[j][i];
            }
    if (st != GR_OK && *keys_out != given_keys) {
        gr_buffer_free(ctx, *keys_out);
        *keys_out = given_keys;
    }
    if (st == GR_OK) *count = k;
    gr_buffer_free(ctx, ck);
    gr_buffer_free(ctx, cv);
    /* nothing was made where the runs were found out of order (both paths check before they write) */
    if (st == GR_OK && unsorted) return gr_reduce_by_key(ctx, keys, values, o, 0, ops, nops, keys_out, results, count);
    return st;
}
