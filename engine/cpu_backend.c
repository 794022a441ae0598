/*
 * cpu_backend.c -- the host backend: every op on every dtype, threaded, deterministic on a machine.
 *
 * It has three jobs: it is the backend of a machine without a GPU, it finishes the partials of the
 * "hybrid" and "host" modes, and it is the engine's reference. Float sums and products accumulate in
 * the accumulator's type, as the kernels do (float32 data in float32 unless acc = float64), so results
 * differ between backends by rounding only. The work is split into one contiguous run per thread and
 * the runs are combined in index order: the same data gives the same bits on every call.
 *
 * cpu_pairwise (pairwise = 1) is the textbook's recursive interleaved-pair reduction instead: tiles are
 * reduced by halving strides in the accumulator type, then the tile results the same way, recursively.
 * It never writes to its input (the textbook version reduces in place).
 */
#include "cpu.h"
#include "env.h"
#include "error.h"
#include "gen_element.h"
#include "ops.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The running value of one thread, in the widest form of the op's category. */
typedef union { uint64_t u; int64_t i; double f; } acc64;

enum category { CAT_UINT, CAT_INT, CAT_FLOAT };

/* The loops below work from the op's descriptor (ops.h): its map and its combine, never its name. */
static enum category category_of(const gr_op_desc *d, gr_dtype t) {
    if (d->map == GR_MAP_NONZERO) return CAT_UINT;
    if (gr_dtype_is_float(t)) return CAT_FLOAT;
    if (d->acc == GR_ACC_WIDE) return CAT_UINT;     /* wrapping 64-bit */
    return gr_dtype_is_signed(t) ? CAT_INT : CAT_UINT;
}

static acc64 identity64(const gr_op_desc *d, enum category c) {
    acc64 a;
    switch (d->combine) {
    case GR_COMBINE_ADD: case GR_COMBINE_OR: a.u = 0; if (c == CAT_FLOAT) a.f = 0.0; break;
    case GR_COMBINE_MUL: case GR_COMBINE_AND: a.u = 1; if (c == CAT_FLOAT) a.f = 1.0; break;
    case GR_COMBINE_MIN:
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

static acc64 combine64(const gr_op_desc *d, enum category c, acc64 a, acc64 b) {
    switch (d->combine) {
    case GR_COMBINE_ADD: if (c == CAT_FLOAT) a.f += b.f; else a.u += b.u; break;
    case GR_COMBINE_MUL: if (c == CAT_FLOAT) a.f *= b.f; else a.u *= b.u; break;
    case GR_COMBINE_MIN:
        if (c == CAT_FLOAT) a.f = fmin_nan(a.f, b.f);
        else if (c == CAT_INT) a.i = b.i < a.i ? b.i : a.i;
        else a.u = b.u < a.u ? b.u : a.u;
        break;
    case GR_COMBINE_MAX:
        if (c == CAT_FLOAT) a.f = fmax_nan(a.f, b.f);
        else if (c == CAT_INT) a.i = b.i > a.i ? b.i : a.i;
        else a.u = b.u > a.u ? b.u : a.u;
        break;
    case GR_COMBINE_AND: a.u = a.u && b.u; break;
    default: a.u = a.u || b.u; break;
    }
    return a;
}

/* One element of dtype t at p[k] in the op's category. */
static inline acc64 load64(const void *p, size_t k, gr_dtype t, const gr_op_desc *d, enum category c) {
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
    if (d->map == GR_MAP_NONZERO) {
        int nz = gr_dtype_is_float(t) ? a.f != 0.0 : a.u != 0;
        a.u = (uint64_t)nz;
    } else if (c == CAT_UINT && gr_dtype_is_signed(t)) {
        a.u = (uint64_t)a.i;      /* signed into the wrapping accumulator: two's complement */
    }
    return a;
}

/* ---- the per-dtype loops ---------------------------------------------------------------------------
 * One function per dtype, one loop per op, each over LANES independent running values combined in lane
 * order at the end: the lanes break the dependency chain of a single accumulator and let the compiler
 * vectorise (the file is built with -O3). The order is fixed by n alone, so results are reproducible.
 * and/or go chunk by chunk and stop at the first chunk that decides the answer. */

#define LANES 8
#define AND_OR_CHUNK 4096

#define ADD(a, v) ((a) + (v))
#define MUL(a, v) ((a) * (v))
#define MIN_INT(a, v) ((v) < (a) ? (v) : (a))
#define MAX_INT(a, v) ((v) > (a) ? (v) : (a))
#define MIN_FLT(a, v) fmin_nan(a, v)
#define MAX_FLT(a, v) fmax_nan(a, v)

/* W lanes initialised to INIT; every element widened by (W) and folded by OP; the result in OUT. */
#define LANE_LOOP(W, INIT, OP, OUT)                                                    \
    do {                                                                               \
        W lane_[LANES];                                                                \
        for (int j_ = 0; j_ < LANES; j_++) lane_[j_] = (INIT);                         \
        size_t k_ = lo;                                                                \
        for (; k_ + LANES <= hi; k_ += LANES)                                          \
            for (int j_ = 0; j_ < LANES; j_++) lane_[j_] = OP(lane_[j_], (W)x[k_ + j_]); \
        for (; k_ < hi; k_++) lane_[0] = OP(lane_[0], (W)x[k_]);                       \
        W all_ = lane_[0];                                                             \
        for (int j_ = 1; j_ < LANES; j_++) all_ = OP(all_, lane_[j_]);                 \
        OUT = all_;                                                                    \
    } while (0)

/* and/or over "x != 0" flags, a chunk at a time. */
#define FLAG_LOOP(IS_AND, OUT)                                                         \
    do {                                                                               \
        unsigned flag_ = (IS_AND);                                                     \
        for (size_t c_ = lo; c_ < hi && flag_ == (unsigned)(IS_AND); c_ += AND_OR_CHUNK) { \
            size_t e_ = hi - c_ < AND_OR_CHUNK ? hi : c_ + AND_OR_CHUNK;               \
            unsigned f_ = (IS_AND);                                                    \
            for (size_t k_ = c_; k_ < e_; k_++) {                                      \
                unsigned nz_ = x[k_] != 0;                                             \
                f_ = (IS_AND) ? (f_ & nz_) : (f_ | nz_);                               \
            }                                                                          \
            flag_ = f_;                                                                \
        }                                                                              \
        OUT = flag_;                                                                   \
    } while (0)

/* Integer sums and products wrap in 64 bits (signed values by their two's-complement bits); min/max
 * compare in int64 or uint64, floats with NaN propagating. Float sums and products run in FW, the
 * accumulator's own type: float32 data with the default accumulator is summed in float32, as on the
 * GPU, so that a result differs between backends by rounding only (an overflow to inf happens on both). */
#define DEFINE_RANGE(NAME, T, IS_FLOAT, IS_SIGNED, LO, HI, FW)                          \
    static acc64 range_##NAME(const T *x, size_t lo, size_t hi, const gr_op_desc *d) {\
        acc64 a;                                                                       \
        switch (d->combine) {                                                          \
        case GR_COMBINE_ADD:                                                           \
            if (IS_FLOAT) LANE_LOOP(FW, 0.0, ADD, a.f);                                \
            else if (IS_SIGNED) { int64_t r_; LANE_LOOP(int64_t, 0, ADD_WRAP, r_); a.u = (uint64_t)r_; } \
            else LANE_LOOP(uint64_t, 0, ADD, a.u);                                     \
            break;                                                                     \
        case GR_COMBINE_MUL:                                                           \
            if (IS_FLOAT) LANE_LOOP(FW, 1.0, MUL, a.f);                                \
            else if (IS_SIGNED) { int64_t r_; LANE_LOOP(int64_t, 1, MUL_WRAP, r_); a.u = (uint64_t)r_; } \
            else LANE_LOOP(uint64_t, 1, MUL, a.u);                                     \
            break;                                                                     \
        case GR_COMBINE_MIN:                                                           \
            if (IS_FLOAT) LANE_LOOP(double, INFINITY, MIN_FLT, a.f);                   \
            else if (IS_SIGNED) LANE_LOOP(int64_t, HI, MIN_INT, a.i);                  \
            else LANE_LOOP(uint64_t, HI, MIN_INT, a.u);                                \
            break;                                                                     \
        case GR_COMBINE_MAX:                                                           \
            if (IS_FLOAT) LANE_LOOP(double, -INFINITY, MAX_FLT, a.f);                  \
            else if (IS_SIGNED) LANE_LOOP(int64_t, LO, MAX_INT, a.i);                  \
            else LANE_LOOP(uint64_t, LO, MAX_INT, a.u);                                \
            break;                                                                     \
        case GR_COMBINE_AND: FLAG_LOOP(1, a.u); break;                                 \
        default: FLAG_LOOP(0, a.u); break;                                             \
        }                                                                              \
        return a;                                                                      \
    }

/* Signed wrapping arithmetic through unsigned (signed overflow would be undefined in C). */
#define ADD_WRAP(a, v) ((int64_t)((uint64_t)(a) + (uint64_t)(v)))
#define MUL_WRAP(a, v) ((int64_t)((uint64_t)(a) * (uint64_t)(v)))

DEFINE_RANGE(i8, int8_t, 0, 1, INT8_MIN, INT8_MAX, double)
DEFINE_RANGE(u8, uint8_t, 0, 0, 0, UINT8_MAX, double)
DEFINE_RANGE(i32, int32_t, 0, 1, INT32_MIN, INT32_MAX, double)
DEFINE_RANGE(u32, uint32_t, 0, 0, 0, UINT32_MAX, double)
DEFINE_RANGE(i64, int64_t, 0, 1, INT64_MIN, INT64_MAX, double)
DEFINE_RANGE(u64, uint64_t, 0, 0, 0, UINT64_MAX, double)
DEFINE_RANGE(f32, float, 1, 1, 0, 0, float)
DEFINE_RANGE(f32_wide, float, 1, 1, 0, 0, double)
DEFINE_RANGE(f64, double, 1, 1, 0, 0, double)

/* The per-dtype loops above serve one-value accumulators of a value folded by add, multiply, min or
 * max, and of a flag folded by and or or; every other op goes through its host functions (below). */
static int has_loop(const gr_op_desc *op) {
    if (op->family != GR_FAMILY_VALUE) return 0;
    if (op->map == GR_MAP_VALUE)
        return op->combine == GR_COMBINE_ADD || op->combine == GR_COMBINE_MUL || op->combine == GR_COMBINE_MIN ||
               op->combine == GR_COMBINE_MAX;
    return op->map == GR_MAP_NONZERO && (op->combine == GR_COMBINE_AND || op->combine == GR_COMBINE_OR);
}

static acc64 reduce_range(const void *p, size_t lo, size_t hi, gr_dtype t, const gr_op_desc *op, gr_dtype acc) {
    if (t == GR_FLOAT32 && acc == GR_FLOAT64) return range_f32_wide(p, lo, hi, op);
    switch (t) {
    case GR_INT8: return range_i8(p, lo, hi, op);
    case GR_UINT8: return range_u8(p, lo, hi, op);
    case GR_INT32: return range_i32(p, lo, hi, op);
    case GR_UINT32: return range_u32(p, lo, hi, op);
    case GR_INT64: return range_i64(p, lo, hi, op);
    case GR_UINT64: return range_u64(p, lo, hi, op);
    case GR_FLOAT32: return range_f32(p, lo, hi, op);
    default: return range_f64(p, lo, hi, op);
    }
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
    gr_dtype t, acc;
    const gr_op_desc *op;
    acc64 result;
} run_job;

static void *run_thread(void *arg) {
    run_job *j = arg;
    j->result = reduce_range(j->p, j->lo, j->hi, j->t, j->op, j->acc);
    return NULL;
}

int gr_cpu_default_threads(void) {
    long n = (long)gr_env_number_or(GR_ENV_CPU_THREADS, (uint64_t)sysconf(_SC_NPROCESSORS_ONLN));
    if (n < 1) n = 1;
    if (n > 64) n = 64;
    return (int)n;
}

#define MIN_ELEMENTS_PER_THREAD ((size_t)1 << 16)

static acc64 reduce_threaded(gr_context *ctx, const void *p, size_t n, gr_dtype t, const gr_op_desc *op,
                             gr_dtype acc) {
    int threads = ctx && ctx->cpu_threads > 0 ? ctx->cpu_threads : gr_cpu_default_threads();
    size_t useful = n / MIN_ELEMENTS_PER_THREAD;
    if ((size_t)threads > useful) threads = useful ? (int)useful : 1;
    if (threads == 1) return reduce_range(p, 0, n, t, op, acc);

    run_job jobs[64];
    pthread_t tids[64];
    int started[64] = {0};
    size_t per = n / (size_t)threads, rest = n % (size_t)threads, lo = 0;
    for (int i = 0; i < threads; i++) {
        size_t len = per + ((size_t)i < rest);
        jobs[i] = (run_job){p, lo, lo + len, t, acc, op, {0}};
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

/* ---- any op, through its host functions (host_ops.c) ------------------------------------------------
 * One accumulator per thread over a contiguous run, the runs combined in order: slower per element than
 * the loops above, but any op and any accumulator layout. */

typedef struct {
    const void *p;
    size_t lo, hi;
    uint64_t first;
    gr_dtype t, acc;
    const gr_op_desc *op;
    unsigned char a[GR_ACC_MAX];
} host_job;

static void *host_run(void *arg) {
    host_job *j = arg;
    unsigned char x[GR_ACC_MAX];
    size_t es = gr_dtype_size(j->t);
    gr_host_identity(j->op, j->t, j->acc, j->a);
    for (size_t k = j->lo; k < j->hi; k++) {
        gr_host_load(j->op, j->t, j->acc, (const char *)j->p + k * es, j->first + k, x);
        gr_host_combine(j->op, j->t, j->acc, j->a, x);
    }
    return NULL;
}

static void host_threaded(gr_context *ctx, const void *p, size_t n, uint64_t first, gr_dtype t,
                          const gr_op_desc *op, gr_dtype acc, void *out) {
    int threads = ctx && ctx->cpu_threads > 0 ? ctx->cpu_threads : gr_cpu_default_threads();
    size_t useful = n / (MIN_ELEMENTS_PER_THREAD / 16);    /* per element dearer than the loops' */
    if ((size_t)threads > useful) threads = useful ? (int)useful : 1;
    host_job jobs[64];
    pthread_t tids[64];
    int started[64] = {0};
    size_t per = n / (size_t)threads, rest = n % (size_t)threads, lo = 0;
    for (int i = 0; i < threads; i++) {
        size_t len = per + ((size_t)i < rest);
        jobs[i] = (host_job){p, lo, lo + len, first, t, acc, op, {0}};
        lo += len;
        if (i > 0) started[i] = pthread_create(&tids[i], NULL, host_run, &jobs[i]) == 0;
    }
    for (int i = 0; i < threads; i++)
        if (!started[i]) host_run(&jobs[i]);
    gr_host_identity(op, t, acc, out);
    for (int i = 0; i < threads; i++) {
        if (started[i]) pthread_join(tids[i], NULL);
        gr_host_combine(op, t, acc, out, jobs[i].a);
    }
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

gr_status gr_cpu_reduce(gr_context *ctx, const void *p, size_t n, uint64_t first, gr_dtype t, gr_op op,
                        gr_dtype acc, int pairwise, void *acc_out) {
    const gr_op_desc *d = gr_op_desc_get(op);
    if (!d) return gr_fail_arg(ctx, GR_EINVAL, "op", "unknown op");
    if (!has_loop(d)) {
        if (pairwise) return host_pairwise(ctx, p, n, first, t, d, acc, acc_out);
        host_threaded(ctx, p, n, first, t, d, acc, acc_out);
        return GR_OK;
    }
    acc64 a;
    if (pairwise) {
        gr_status st = reduce_pairwise(ctx, p, n, t, d, acc, &a);
        if (st != GR_OK) return st;
    } else {
        a = reduce_threaded(ctx, p, n, t, d, acc);
    }
    store_acc(a, category_of(d, t), acc, acc_out);
    return GR_OK;
}

gr_status gr_cpu_finish(gr_context *ctx, const void *partials, size_t count, gr_dtype acc, gr_op op,
                        gr_dtype in_dtype, size_t n, int ddof, gr_result *out) {
    const gr_op_desc *d = gr_op_desc_get(op);
    unsigned char value[GR_ACC_MAX];
    memset(value, 0, sizeof value);
    if (has_loop(d)) {
        /* partials of these ops are elements of the accumulator dtype whose load is themselves */
        gr_status st = gr_cpu_reduce(ctx, partials, count, 0, acc, op, acc, 0, value);
        if (st != GR_OK) return st;
    } else {
        size_t as = gr_op_acc_size(op, in_dtype, acc);
        gr_host_identity(d, in_dtype, acc, value);
        for (size_t i = 0; i < count; i++) gr_host_combine(d, in_dtype, acc, value, (const char *)partials + i * as);
    }
    *out = gr_op_result(op, value, acc, in_dtype, n, ddof);
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

void gr_cpu_iota(void *p, size_t n, gr_dtype t, uint64_t first, gr_scalar start, gr_scalar step) {
    for (size_t i = 0; i < n; i++) {
        if (gr_dtype_is_float(t)) {
            double f = start.v.f + (double)(first + i) * step.v.f;
            if (t == GR_FLOAT32) ((float *)p)[i] = (float)f; else ((double *)p)[i] = f;
        } else {
            store_bits(p, i, t, start.v.u + (first + i) * step.v.u);
        }
    }
}

void gr_cpu_random(void *p, size_t n, gr_dtype t, uint64_t first, uint64_t seed, gr_scalar lo, gr_scalar hi) {
    for (size_t i = 0; i < n; i++) {
        uint64_t h = gr_hash64(seed, first + i);
        if (t == GR_FLOAT32) ((float *)p)[i] = gr_random_real32(h, lo.v.f, hi.v.f);
        else if (t == GR_FLOAT64) ((double *)p)[i] = gr_random_real(h, lo.v.f, hi.v.f);
        else store_bits(p, i, t, gr_random_bits(seed, first + i, lo.v.u, hi.v.u));
    }
}
