/*
 * cpu_backend.c -- the host backend: every op on every dtype, threaded, deterministic on a machine.
 *
 * It has three jobs: it is the backend of a machine without a GPU, it finishes the partials of the
 * "hybrid" and "host" modes, and it is the engine's reference. Float sums and products accumulate in
 * float64 whatever the accumulator type and round to it once at the end, so the reference is more
 * accurate than the kernels it checks. The work is split into one contiguous run per thread and the
 * runs are combined in index order: the same data gives the same bits on every call.
 *
 * cpu_pairwise (pairwise = 1) is the textbook's recursive interleaved-pair reduction instead: tiles are
 * reduced by halving strides in the accumulator type, then the tile results the same way, recursively.
 * It never writes to its input (the textbook version reduces in place).
 */
#include "internal.h"
#include "gen_element.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The running value of one thread, in the widest form of the op's category. */
typedef union { uint64_t u; int64_t i; double f; } acc64;

enum category { CAT_UINT, CAT_INT, CAT_FLOAT };

static enum category category_of(gr_op op, gr_dtype t) {
    if (op == GR_AND || op == GR_OR) return CAT_UINT;
    if (gr_dtype_is_float(t)) return CAT_FLOAT;
    if (op == GR_SUM || op == GR_PROD) return CAT_UINT;     /* wrapping 64-bit */
    return gr_dtype_is_signed(t) ? CAT_INT : CAT_UINT;
}

static acc64 identity64(gr_op op, enum category c) {
    acc64 a;
    switch (op) {
    case GR_SUM: case GR_OR: a.u = 0; if (c == CAT_FLOAT) a.f = 0.0; break;
    case GR_PROD: case GR_AND: a.u = 1; if (c == CAT_FLOAT) a.f = 1.0; break;
    case GR_MIN:
        if (c == CAT_FLOAT) a.f = INFINITY; else if (c == CAT_INT) a.i = INT64_MAX; else a.u = UINT64_MAX;
        break;
    default:
        if (c == CAT_FLOAT) a.f = -INFINITY; else if (c == CAT_INT) a.i = INT64_MIN; else a.u = 0;
        break;
    }
    return a;
}

/* NaN wins min and max: once a NaN is in, it stays. */
static inline double fmin_nan(double a, double b) { return a != a ? a : b != b ? b : (b < a ? b : a); }
static inline double fmax_nan(double a, double b) { return a != a ? a : b != b ? b : (b > a ? b : a); }

static acc64 combine64(gr_op op, enum category c, acc64 a, acc64 b) {
    switch (op) {
    case GR_SUM: if (c == CAT_FLOAT) a.f += b.f; else a.u += b.u; break;
    case GR_PROD: if (c == CAT_FLOAT) a.f *= b.f; else a.u *= b.u; break;
    case GR_MIN:
        if (c == CAT_FLOAT) a.f = fmin_nan(a.f, b.f);
        else if (c == CAT_INT) a.i = b.i < a.i ? b.i : a.i;
        else a.u = b.u < a.u ? b.u : a.u;
        break;
    case GR_MAX:
        if (c == CAT_FLOAT) a.f = fmax_nan(a.f, b.f);
        else if (c == CAT_INT) a.i = b.i > a.i ? b.i : a.i;
        else a.u = b.u > a.u ? b.u : a.u;
        break;
    case GR_AND: a.u = a.u && b.u; break;
    default: a.u = a.u || b.u; break;
    }
    return a;
}

/* One element of dtype t at p[k] in the op's category. */
static inline acc64 load64(const void *p, size_t k, gr_dtype t, gr_op op, enum category c) {
    acc64 a;
    switch (t) {
    case GR_INT8: a.i = ((const int8_t *)p)[k]; break;
    case GR_UINT8: a.u = ((const uint8_t *)p)[k]; break;
    case GR_INT32: a.i = ((const int32_t *)p)[k]; break;
    case GR_UINT32: a.u = ((const uint32_t *)p)[k]; break;
    case GR_INT64: a.i = ((const int64_t *)p)[k]; break;
    case GR_UINT64: a.u = ((const uint64_t *)p)[k]; break;
    case GR_FLOAT32: a.f = ((const float *)p)[k]; break;
    default: a.f = ((const double *)p)[k]; break;
    }
    if (op == GR_AND || op == GR_OR) {
        int nz = gr_dtype_is_float(t) ? a.f != 0.0 : a.u != 0;
        a.u = (uint64_t)nz;
    } else if (c == CAT_UINT && gr_dtype_is_signed(t)) {
        a.u = (uint64_t)a.i;      /* signed into the wrapping accumulator: two's complement */
    }
    return a;
}

/* The loop, specialised per op so the compiler vectorises the common cases. */
static acc64 reduce_range(const void *p, size_t lo, size_t hi, gr_dtype t, gr_op op) {
    enum category c = category_of(op, t);
    acc64 a = identity64(op, c);
#define LOOP(EXPR) for (size_t k = lo; k < hi; k++) { acc64 x = load64(p, k, t, op, c); EXPR; }
    switch (op) {
    case GR_SUM:
        if (c == CAT_FLOAT) { LOOP(a.f += x.f) } else { LOOP(a.u += x.u) }
        break;
    case GR_PROD:
        if (c == CAT_FLOAT) { LOOP(a.f *= x.f) } else { LOOP(a.u *= x.u) }
        break;
    case GR_AND:
        LOOP(a.u &= x.u; if (!a.u) break)
        break;
    case GR_OR:
        LOOP(a.u |= x.u; if (a.u) break)
        break;
    default:
        LOOP(a = combine64(op, c, a, x))
        break;
    }
#undef LOOP
    return a;
}

/* Rounds the running value into the accumulator dtype's bytes. */
static void store_acc(acc64 a, enum category c, gr_dtype acc, void *out) {
    switch (acc) {
    case GR_FLOAT32: *(float *)out = (float)a.f; break;
    case GR_FLOAT64: *(double *)out = a.f; break;
    case GR_INT8: *(int8_t *)out = (int8_t)a.i; break;
    case GR_UINT8: *(uint8_t *)out = (uint8_t)a.u; break;
    case GR_INT32: *(int32_t *)out = (int32_t)a.i; break;
    case GR_UINT32: *(uint32_t *)out = (uint32_t)a.u; break;
    case GR_INT64: *(int64_t *)out = a.i; break;
    default: *(uint64_t *)out = c == CAT_INT ? (uint64_t)a.i : a.u; break;
    }
}

/* ---- threaded per-run reduction ----------------------------------------------------------------- */

typedef struct {
    const void *p;
    size_t lo, hi;
    gr_dtype t;
    gr_op op;
    acc64 result;
} run_job;

static void *run_thread(void *arg) {
    run_job *j = arg;
    j->result = reduce_range(j->p, j->lo, j->hi, j->t, j->op);
    return NULL;
}

int gr_cpu_default_threads(void) {
    const char *env = getenv("GPUREDUCE_CPU_THREADS");
    long n = env ? strtol(env, NULL, 10) : sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1) n = 1;
    if (n > 64) n = 64;
    return (int)n;
}

#define MIN_ELEMENTS_PER_THREAD ((size_t)1 << 16)

static acc64 reduce_threaded(gr_context *ctx, const void *p, size_t n, gr_dtype t, gr_op op) {
    int threads = ctx && ctx->cpu_threads > 0 ? ctx->cpu_threads : gr_cpu_default_threads();
    size_t useful = n / MIN_ELEMENTS_PER_THREAD;
    if ((size_t)threads > useful) threads = useful ? (int)useful : 1;
    if (threads == 1) return reduce_range(p, 0, n, t, op);

    run_job jobs[64];
    pthread_t tids[64];
    int started[64] = {0};
    size_t per = n / (size_t)threads, rest = n % (size_t)threads, lo = 0;
    for (int i = 0; i < threads; i++) {
        size_t len = per + ((size_t)i < rest);
        jobs[i] = (run_job){p, lo, lo + len, t, op, {0}};
        lo += len;
        /* thread 0's run is done on this thread; a thread that cannot start runs here too */
        if (i > 0) started[i] = pthread_create(&tids[i], NULL, run_thread, &jobs[i]) == 0;
    }
    for (int i = 0; i < threads; i++)
        if (!started[i]) run_thread(&jobs[i]);
    enum category c = category_of(op, t);
    acc64 a = identity64(op, c);
    for (int i = 0; i < threads; i++) {
        if (started[i]) pthread_join(tids[i], NULL);
        a = combine64(op, c, a, jobs[i].result);
    }
    return a;
}

/* ---- recursive interleaved pairs (cpu_pairwise) -------------------------------------------------- */

#define PAIR_TILE 2048

/* Interleaved pairs in place over a small array of running values: v[i] op= v[i + half], halving;
 * an odd element out is folded into v[0] first, as the textbook's recursiveReduce does. */
static acc64 interleaved_pairs(acc64 *v, size_t n, gr_op op, enum category c, int round_float32) {
    while (n > 1) {
        if (n & 1) v[0] = combine64(op, c, v[0], v[n - 1]);
        n /= 2;
        for (size_t i = 0; i < n; i++) {
            v[i] = combine64(op, c, v[i], v[i + n]);
            if (round_float32) v[i].f = (float)v[i].f;     /* stay in float32 like the textbook */
        }
    }
    return v[0];
}

static gr_status reduce_pairwise(gr_context *ctx, const void *p, size_t n, gr_dtype t, gr_op op,
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

gr_status gr_cpu_reduce(gr_context *ctx, const void *p, size_t n, gr_dtype t, gr_op op, gr_dtype acc,
                        int pairwise, void *acc_out) {
    acc64 a;
    if (pairwise) {
        gr_status st = reduce_pairwise(ctx, p, n, t, op, acc, &a);
        if (st != GR_OK) return st;
    } else {
        a = reduce_threaded(ctx, p, n, t, op);
    }
    store_acc(a, category_of(op, t), acc, acc_out);
    return GR_OK;
}

/* ---- generators --------------------------------------------------------------------------------- */

void gr_cpu_fill(void *p, size_t n, gr_dtype t, const void *elem) {
    size_t es = gr_dtype_size(t);
    if (es == 1) { memset(p, *(const uint8_t *)elem, n); return; }
    for (size_t i = 0; i < n; i++) memcpy((char *)p + i * es, elem, es);
}

/* Stores 64 integer bits into element i of an integer buffer of dtype t (truncating: wrapping). */
static void store_bits(void *p, size_t i, gr_dtype t, uint64_t bits) {
    switch (gr_dtype_size(t)) {
    case 1: ((uint8_t *)p)[i] = (uint8_t)bits; break;
    case 4: ((uint32_t *)p)[i] = (uint32_t)bits; break;
    default: ((uint64_t *)p)[i] = bits; break;
    }
}

void gr_cpu_iota(void *p, size_t n, gr_dtype t, gr_scalar start, gr_scalar step) {
    for (size_t i = 0; i < n; i++) {
        if (gr_dtype_is_float(t)) {
            double f = start.v.f + (double)i * step.v.f;
            if (t == GR_FLOAT32) ((float *)p)[i] = (float)f; else ((double *)p)[i] = f;
        } else {
            store_bits(p, i, t, start.v.u + (uint64_t)i * step.v.u);
        }
    }
}

void gr_cpu_random(void *p, size_t n, gr_dtype t, uint64_t seed, gr_scalar lo, gr_scalar hi) {
    for (size_t i = 0; i < n; i++) {
        uint64_t h = gr_hash64(seed, i);
        if (t == GR_FLOAT32) ((float *)p)[i] = gr_random_real32(h, lo.v.f, hi.v.f);
        else if (t == GR_FLOAT64) ((double *)p)[i] = gr_random_real(h, lo.v.f, hi.v.f);
        else store_bits(p, i, t, gr_random_bits(h, lo.v.u, hi.v.u));
    }
}
