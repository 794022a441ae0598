/*
 * cpu_pairwise.c -- the cpu_pairwise variant: the textbook's recursive interleaved-pair host reduction.
 *
 * Tiles of PAIR_TILE elements are reduced by halving strides in the accumulator type (v[i] op= v[i + half],
 * an odd element out folded into v[0] first, as the textbook's recursiveReduce does), then the tile
 * results the same way, recursively. It never writes to its input (the textbook version reduces in place).
 * The one-value ops that fold themselves (gr_op_folds_itself) run over a running value in the widest form
 * of the op's category, rounded to float32 after every step for float32 accumulators; every other op
 * over accumulators, through the host functions (host_ops.c). One thread: a lesson, not a fast path
 * (the cpu variant, cpu_backend.c, is that).
 */
#include "ops/cpu_pairwise.h"
#include "base/dtype.h"
#include "base/error.h"
#include "ops/op_math.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A running value in the widest form of the op's category. */
typedef union { uint64_t u; int64_t i; double f; } acc64;

enum category { CAT_UINT, CAT_INT, CAT_FLOAT };

/* The folds below work from the op's descriptor (ops.h): its map and its combine, never its name. */
static enum category category_of(const gr_op_desc *d, gr_dtype t) {
    if (d->map == GR_MAP_NONZERO) return CAT_UINT;
    if (gr_dtype_is_float(t)) return CAT_FLOAT;
    if (d->acc == GR_ACC_WIDE) return CAT_UINT;     /* wrapping 64-bit */
    return gr_dtype_is_signed(t) ? CAT_INT : CAT_UINT;
}

/* The identity of a fold. (Only the ops that fold themselves come here, nanmin and nanmax not among
 * them; they are written out so that the compiler can tell a new combine from a forgotten one.) */
static acc64 identity64(const gr_op_desc *d, enum category c) {
    acc64 a = {0};
    switch (d->combine) {
    case GR_COMBINE_ADD: case GR_COMBINE_OR: a.u = 0; if (c == CAT_FLOAT) a.f = 0.0; break;
    case GR_COMBINE_MUL: case GR_COMBINE_AND: a.u = 1; if (c == CAT_FLOAT) a.f = 1.0; break;
    case GR_COMBINE_MIN: case GR_COMBINE_NANMIN:
        if (c == CAT_FLOAT) a.f = d->combine == GR_COMBINE_MIN ? INFINITY : NAN;
        else if (c == CAT_INT) a.i = INT64_MAX;
        else a.u = UINT64_MAX;
        break;
    case GR_COMBINE_MAX: case GR_COMBINE_NANMAX:
        if (c == CAT_FLOAT) a.f = d->combine == GR_COMBINE_MAX ? -INFINITY : NAN;
        else if (c == CAT_INT) a.i = INT64_MIN;
        else a.u = 0;
        break;
    }
    return a;
}

/* The extremes of floats with op_math.h's NaN rules: a NaN wins min and max (once one is in, it stays)
 * and loses nanmin and nanmax. */
static inline double fmin_nan(double a, double b) { return GR_EXTREME(a, b, a != a, b != b, b < a); }
static inline double fmax_nan(double a, double b) { return GR_EXTREME(a, b, a != a, b != b, b > a); }
static inline double fnanmin(double a, double b) { GR_RETURN_NANEXTREME(a, b, a != a, b != b, b < a); }
static inline double fnanmax(double a, double b) { GR_RETURN_NANEXTREME(a, b, a != a, b != b, b > a); }

static acc64 combine64(const gr_op_desc *d, enum category c, acc64 a, acc64 b) {
    switch (d->combine) {
    case GR_COMBINE_ADD: if (c == CAT_FLOAT) a.f += b.f; else a.u += b.u; break;
    case GR_COMBINE_MUL: if (c == CAT_FLOAT) a.f *= b.f; else a.u *= b.u; break;
    case GR_COMBINE_MIN: case GR_COMBINE_NANMIN:
        if (c == CAT_FLOAT) a.f = d->combine == GR_COMBINE_MIN ? fmin_nan(a.f, b.f) : fnanmin(a.f, b.f);
        else if (c == CAT_INT) a.i = b.i < a.i ? b.i : a.i;
        else a.u = b.u < a.u ? b.u : a.u;
        break;
    case GR_COMBINE_MAX: case GR_COMBINE_NANMAX:
        if (c == CAT_FLOAT) a.f = d->combine == GR_COMBINE_MAX ? fmax_nan(a.f, b.f) : fnanmax(a.f, b.f);
        else if (c == CAT_INT) a.i = b.i > a.i ? b.i : a.i;
        else a.u = b.u > a.u ? b.u : a.u;
        break;
    case GR_COMBINE_AND: a.u = a.u && b.u; break;
    case GR_COMBINE_OR: a.u = a.u || b.u; break;
    }
    return a;
}

/* One element of dtype t at p[k] in the op's category, read by the dtype list's reader (base/dtype.c). */
static inline acc64 load64(const void *p, size_t k, gr_dtype t, const gr_op_desc *d, enum category c) {
    acc64 a = {0};
    gr_scalar s = gr_scalar_load((const char *)p + k * gr_dtype_size(t), t);
    switch (s.kind) {
    case GR_SCALAR_INT: a.i = s.v.i; break;
    case GR_SCALAR_UINT: a.u = s.v.u; break;
    case GR_SCALAR_FLOAT: a.f = s.v.f; break;
    case GR_SCALAR_BOOL: a.u = (uint64_t)(s.v.b != 0); break;
    }
    if (d->map == GR_MAP_NONZERO) {
        int nz = gr_dtype_is_float(t) ? a.f != 0.0 : a.u != 0;
        a.u = (uint64_t)nz;
    } else if (c == CAT_UINT && gr_dtype_is_signed(t)) {
        a.u = (uint64_t)a.i;      /* signed into the wrapping accumulator: two's complement */
    }
    return a;
}

/* Rounds the running value into the accumulator dtype's bytes (the dtype list's writer: a C cast). */
static void store_acc(acc64 a, enum category c, gr_dtype acc, void *out) {
    gr_scalar s = {GR_SCALAR_UINT, {.u = a.u}};
    if (c == CAT_FLOAT) s.kind = GR_SCALAR_FLOAT, s.v.f = a.f;
    else if (c == CAT_INT) s.kind = GR_SCALAR_INT, s.v.i = a.i;
    gr_scalar_put(out, acc, s);
}

#define PAIR_TILE 2048

/* Interleaved pairs in place over a small array of running values: v[i] op= v[i + half], halving;
 * an odd element out is folded into v[0] first, as the textbook's recursiveReduce does. */
static acc64 interleaved_pairs(acc64 *v, size_t n, const gr_op_desc *op, enum category c, int round_float32) {
    while (n > 1) {
        if (n & 1) {
            v[0] = combine64(op, c, v[0], v[n - 1]);
            if (round_float32) v[0].f = (float)v[0].f;
        }
        n /= 2;
        for (size_t i = 0; i < n; i++) {
            v[i] = combine64(op, c, v[i], v[i + n]);
            if (round_float32) v[i].f = (float)v[i].f;     /* stay in float32 like the textbook */
        }
    }
    return v[0];
}

static gr_status reduce_pairwise(gr_context *ctx, const void *p, size_t n, gr_dtype t, const gr_op_desc *op,
                                 gr_dtype acc, acc64 *out) {
    enum category c = category_of(op, t);
    int round32 = c == CAT_FLOAT && acc == GR_FLOAT32;
    size_t tiles = (n + PAIR_TILE - 1) / PAIR_TILE;
    acc64 tile[PAIR_TILE];
    acc64 *level = malloc((tiles ? tiles : 1) * sizeof *level);
    if (!level) return gr_fail(ctx, GR_ENOMEM, "cpu_pairwise: out of host memory for %zu tiles", tiles);
    for (size_t k = 0; k < tiles; k++) {
        size_t lo = k * PAIR_TILE, len = n - lo < PAIR_TILE ? n - lo : PAIR_TILE;
        for (size_t i = 0; i < len; i++) tile[i] = load64(p, lo + i, t, op, c);
        level[k] = interleaved_pairs(tile, len, op, c, round32);
    }
    *out = tiles ? interleaved_pairs(level, tiles, op, c, round32) : identity64(op, c);
    free(level);
    return GR_OK;
}

/* The textbook's recursive interleaved pairs over accumulators (cpu_pairwise for every op). */
static gr_status host_pairwise(gr_context *ctx, const void *p, size_t n, uint64_t first, gr_dtype t,
                               const gr_op_desc *op, gr_dtype acc, void *out) {
    size_t as = GR_ACC_MAX, es = gr_dtype_size(t), tiles = (n + PAIR_TILE - 1) / PAIR_TILE;
    unsigned char *v = malloc((PAIR_TILE + (tiles ? tiles : 1)) * as);
    if (!v) return gr_fail(ctx, GR_ENOMEM, "cpu_pairwise: out of host memory for %zu tiles", tiles);
    unsigned char *level = v + PAIR_TILE * as;
    for (size_t k = 0; k <= tiles; k++) {
        unsigned char *w = k < tiles ? v : level;
        size_t len = k < tiles ? (n - k * PAIR_TILE < PAIR_TILE ? n - k * PAIR_TILE : PAIR_TILE) : tiles;
        if (k < tiles)
            for (size_t i = 0; i < len; i++)
                gr_host_load(op, t, acc, (const char *)p + (k * PAIR_TILE + i) * es, first + k * PAIR_TILE + i,
                             w + i * as);
        while (len > 1) {
            if (len & 1) gr_host_combine(op, t, acc, w, w + (len - 1) * as);
            len /= 2;
            for (size_t i = 0; i < len; i++) gr_host_combine(op, t, acc, w + i * as, w + (i + len) * as);
        }
        if (k < tiles) memcpy(level + k * as, w, as);
        else if (tiles) memcpy(out, w, gr_host_acc_size(op, t, acc));    /* out holds one accumulator */
    }
    if (!tiles) gr_host_identity(op, t, acc, out);
    free(v);
    return GR_OK;
}

gr_status gr_cpu_pairwise(gr_context *ctx, const void *p, size_t n, uint64_t first, gr_dtype t, const gr_op_desc *d,
                          gr_dtype acc, void *acc_out) {
    if (!gr_op_folds_itself(d)) return host_pairwise(ctx, p, n, first, t, d, acc, acc_out);
    acc64 a;
    gr_status st = reduce_pairwise(ctx, p, n, t, d, acc, &a);
    if (st == GR_OK) store_acc(a, category_of(d, t), acc, acc_out);
    return st;
}
