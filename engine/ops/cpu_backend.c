/*
 * cpu_backend.c -- the host backend: every op on every dtype, threaded, the same bits on every run.
 *
 * It has three jobs: it is the backend of a machine without a GPU, it finishes the partials of the
 * "hybrid" and "host" modes, and it is the engine's reference. Float data accumulates in the
 * accumulator's type, as the kernels do (float32 data in float32 unless acc = "float64"), so results
 * differ between backends by rounding only.
 *
 * The loops are cpu_kernels.c's, one per op kind and dtype. Here the data is cut into tasks that the
 * threads take in turn, and the tasks' accumulators are combined (host_ops.c) in a fixed order: for the
 * exact loops any cut gives the same bits; the order-dependent ones (float sums, var, norm, ...) follow a
 * tree fixed by n alone, and the tasks are its subtrees at one depth, combined up the same tree. So a
 * result does not depend on the number of threads (GPUREDUCE_CPU_THREADS), nor on which thread ran what.
 * An op or dtype without a loop (float16 and bfloat16 have none yet) folds element by element with the
 * host functions on one thread, in index order, so its results do not depend on the number of threads
 * either (slowly: tens of times slower than a loop).
 *
 * The cpu_pairwise variant (pairwise = 1) is the textbook's recursive interleaved pairs (cpu_pairwise.c).
 */
#include "ops/cpu_backend.h"
#include "base/dtype.h"
#include "base/env.h"
#include "ops/cpu_kernels.h"
#include "ops/cpu_pairwise.h"
#include "base/error.h"
#include "ops/gen_element.h"
#include "ops/ops.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int gr_cpu_default_threads(void) {
    long n = (long)gr_env_number_or(GR_ENV_CPU_THREADS, (uint64_t)sysconf(_SC_NPROCESSORS_ONLN));
    if (n < 1) n = 1;
    if (n > 64) n = 64;
    return (int)n;
}

/* Below this many elements per thread a thread costs more than it saves. */
#define MIN_ELEMENTS_PER_THREAD ((size_t)1 << 16)
#define MAX_THREADS 64
/* Tasks per thread: several, so that a thread slowed by other work on the machine leaves its share to
 * the others (they take the next task as they finish one). */
#define TASKS_PER_THREAD 4
#define MAX_TASKS (MAX_THREADS * TASKS_PER_THREAD)

/* An op without a loop: the host functions, element by element (the same bits for exact ops only). */
static void host_fold(const void *x, size_t n, uint64_t first, void *acc, const gr_cpu_kernel *k) {
    unsigned char e[GR_ACC_MAX];
    size_t es = gr_dtype_size(k->t);
    gr_host_identity(k->op, k->t, k->acc, acc);
    for (size_t i = 0; i < n; i++) {
        gr_host_load(k->op, k->t, k->acc, (const char *)x + i * es, first + i, e);
        gr_host_combine(k->op, k->t, k->acc, acc, e);
    }
}

typedef struct {
    const gr_cpu_kernel *k;
    const char *p;
    size_t es, as;
    uint64_t first;
    size_t count, lo[MAX_TASKS], len[MAX_TASKS];
    unsigned char *accs;        /* count accumulators of as bytes, in task order */
    atomic_size_t next;
} task_list;

/* The nodes at `depth` below (lo, n) of the kernel's tree, left to right (a leaf above that depth is
 * one task itself). */
static void cut(task_list *t, size_t lo, size_t n, int depth) {
    if (depth == 0 || (t->k->leaf && n <= t->k->leaf)) {
        t->lo[t->count] = lo;
        t->len[t->count++] = n;
        return;
    }
    size_t h = gr_cpu_split(n);
    cut(t, lo, h, depth - 1);
    cut(t, lo + h, n - h, depth - 1);
}

/* The tasks' accumulators combined up the tree that cut() walked down. */
static void join(const task_list *t, size_t n, int depth, size_t *next, void *out) {
    if (depth == 0 || (t->k->leaf && n <= t->k->leaf)) {
        memcpy(out, t->accs + (*next)++ * t->as, t->as);
        return;
    }
    unsigned char b[GR_ACC_MAX];
    size_t h = gr_cpu_split(n);
    join(t, h, depth - 1, next, out);
    join(t, n - h, depth - 1, next, b);
    gr_host_combine(t->k->op, t->k->t, t->k->acc, out, b);
}

static void *work(void *arg) {
    task_list *t = arg;
    for (size_t i; (i = atomic_fetch_add(&t->next, 1)) < t->count;)
        t->k->loop(t->p + t->lo[i] * t->es, t->len[i], t->first + t->lo[i], t->accs + i * t->as, t->k);
    return NULL;
}

static void run(gr_context *ctx, const gr_cpu_kernel *k, const void *p, size_t n, uint64_t first, void *out) {
    int threads = ctx ? gr_base_of(ctx)->cpu_threads : 0;
    if (threads <= 0) threads = gr_cpu_default_threads();
    size_t useful = n / MIN_ELEMENTS_PER_THREAD;
    if ((size_t)threads > useful) threads = useful ? (int)useful : 1;
    if (threads > MAX_THREADS) threads = MAX_THREADS;
    if (threads == 1) {
        k->loop(p, n, first, out, k);   /* the whole tree: the same bits as its subtrees combined */
        return;
    }
    int depth = 0;
    while ((1 << depth) < threads * TASKS_PER_THREAD) depth++;
    unsigned char accs[MAX_TASKS * GR_ACC_MAX];
    task_list t = {k, p, gr_dtype_size(k->t), gr_host_acc_size(k->op, k->t, k->acc), first, 0, {0}, {0}, accs, 0};
    cut(&t, 0, n, depth);
    pthread_t tids[MAX_THREADS];
    int started[MAX_THREADS] = {0};
    /* this thread works too; a thread that cannot start leaves its tasks to the others */
    for (int i = 1; i < threads; i++) started[i] = pthread_create(&tids[i], NULL, work, &t) == 0;
    work(&t);
    for (int i = 1; i < threads; i++)
        if (started[i]) pthread_join(tids[i], NULL);
    size_t next = 0;
    join(&t, n, depth, &next, out);
}

gr_status gr_cpu_reduce(gr_context *ctx, const void *p, size_t n, uint64_t first, gr_dtype t, gr_op op,
                        gr_dtype acc, int pairwise, void *acc_out) {
    const gr_op_desc *d = gr_op_desc_get(op);
    if (!d) return gr_fail_arg(ctx, GR_EINVAL, "op", "unknown op");
    if (pairwise) return gr_cpu_pairwise(ctx, p, n, first, t, d, acc, acc_out);
    if (n == 0) {
        gr_host_identity(d, t, acc, acc_out);
        return GR_OK;
    }
    gr_cpu_kernel k;
    if (!gr_cpu_kernel_for(d, t, acc, &k)) {
        /* no loop (float16 and bfloat16 have none yet): one fold on this thread, so that the bits do not
         * depend on the number of threads */
        k = (gr_cpu_kernel){host_fold, 0, d, t, acc};
        host_fold(p, n, first, acc_out, &k);
        return GR_OK;
    }
    run(ctx, &k, p, n, first, acc_out);
    return GR_OK;
}

gr_status gr_cpu_finish(gr_context *ctx, const void *partials, size_t count, gr_dtype acc, gr_op op,
                        gr_dtype in_dtype, size_t n, int ddof, gr_result *out) {
    const gr_op_desc *d = gr_op_desc_get(op);
    unsigned char value[GR_ACC_MAX];
    memset(value, 0, sizeof value);
    if (gr_op_folds_itself(d)) {
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

/* Element i of a buffer of dtype t, by the dtype list's writer: a float rounded once from a double, 64
 * integer bits truncated to the dtype (wrapping). */
static void put_float(void *p, size_t i, gr_dtype t, double f) {
    gr_scalar v = {GR_SCALAR_FLOAT, {.f = f}};
    gr_scalar_put((char *)p + i * gr_dtype_size(t), t, v);
}
static void put_bits(void *p, size_t i, gr_dtype t, uint64_t bits) {
    gr_scalar v = {GR_SCALAR_UINT, {.u = bits}};
    gr_scalar_put((char *)p + i * gr_dtype_size(t), t, v);
}

/* Floats: start + i * step in double, rounded once. Integers: 64-bit wrapping, truncated to the type (as
 * cuda/runtime/generate.cu's iota_kernel). */
void gr_cpu_iota(void *p, size_t n, gr_dtype t, uint64_t first, gr_scalar start, gr_scalar step) {
    int f = gr_dtype_is_float(t);
    for (size_t i = 0; i < n; i++) {
        if (f) put_float(p, i, t, gr_iota_real(start.v.f, first + i, step.v.f));
        else put_bits(p, i, t, start.v.u + (first + i) * step.v.u);
    }
}

/* Each float dtype draws in its own precision (a value that would round up to hi folds to lo), so a new
 * one must say how: the switch names every dtype. The small float formats round the double draw once
 * (gen_element.h's gr_random_f16 and the like), the same code as the device's random_kernel. */
void gr_cpu_random(void *p, size_t n, gr_dtype t, uint64_t first, uint64_t seed, gr_scalar lo, gr_scalar hi) {
    for (size_t i = 0; i < n; i++) {
        uint64_t h = gr_hash64(seed, first + i);
        switch (t) {
        case GR_FLOAT32: ((float *)p)[i] = gr_random_real32(h, lo.v.f, hi.v.f); break;
        case GR_FLOAT64: ((double *)p)[i] = gr_random_real(h, lo.v.f, hi.v.f); break;
        case GR_FLOAT16: ((uint16_t *)p)[i] = (uint16_t)gr_random_f16(h, lo.v.f, hi.v.f); break;
        case GR_BFLOAT16: ((uint16_t *)p)[i] = (uint16_t)gr_random_bf16(h, lo.v.f, hi.v.f); break;
        case GR_INT8: case GR_UINT8: case GR_INT32: case GR_UINT32: case GR_INT64: case GR_UINT64:
            put_bits(p, i, t, gr_random_bits(seed, first + i, lo.v.u, hi.v.u));
            break;
        case GR_DTYPE_COUNT: break;
        }
    }
}
