/*
 * c_api_host.c -- the engine used from plain C, without Lua (engine/gr.h).
 *
 * Creates a context, fills a buffer with iota, reduces it with each op and checks the values against
 * closed forms; reduces with a user operator given as C functions (gr_options.cpu) that free the buffer
 * while it runs; then plans a reduction and prints the passes. Prints one line and exits 0 on success.
 */
#include <stdio.h>

#include "gr.h"

static int check(gr_context *ctx, gr_buffer *b, gr_op op, gr_scalar want) {
    gr_options o;
    gr_options_init(&o, op);
    gr_result r;
    if (gr_reduce(ctx, b, &o, &r) != GR_OK) {
        fprintf(stderr, "c_api_host: %s failed: %s\n", gr_op_name(op), gr_errmsg(ctx));
        return 0;
    }
    /* compare the member the kind says is valid, and only that one */
    gr_scalar got = r.value[0];
    int same = r.count == 1 && got.kind == want.kind;
    if (same) {
        switch (want.kind) {
        case GR_SCALAR_INT: same = got.v.i == want.v.i; break;
        case GR_SCALAR_UINT: same = got.v.u == want.v.u; break;
        case GR_SCALAR_FLOAT: same = got.v.f == want.v.f; break;
        default: same = got.v.b == want.v.b; break;
        }
    }
    if (!same)
        fprintf(stderr, "c_api_host: %s gave kind %d (int %lld, bool %d), expected kind %d\n", gr_op_name(op),
                (int)got.kind, (long long)got.v.i, got.v.b, (int)want.kind);
    return same;
}

/* A mean as a user operator whose struct accumulator the functions keep in the engine's slots; map
 * frees the buffer being reduced on its first call (the engine holds its own handle meanwhile). */
typedef struct { double s; long long n; } mean_acc;
typedef struct {
    mean_acc slot[GR_CPU_ACC_SLOTS];
    gr_context *ctx;
    gr_buffer *victim;
} mean_state;

static gr_status mean_map(void *ud, gr_scalar x, uint64_t i, gr_cpu_acc *out) {
    mean_state *m = ud;
    (void)i;
    gr_buffer_free(m->ctx, m->victim);
    m->victim = NULL;
    m->slot[out->slot] = (mean_acc){(double)x.v.i, 1};
    return GR_OK;
}

static gr_status mean_reduce(void *ud, const gr_cpu_acc *a, const gr_cpu_acc *b, gr_cpu_acc *out) {
    mean_state *m = ud;
    mean_acc p = m->slot[a->slot], q = m->slot[b->slot];
    m->slot[out->slot] = (mean_acc){p.s + q.s, p.n + q.n};
    return GR_OK;
}

static gr_status mean_post(void *ud, const gr_cpu_acc *a, uint64_t n, gr_scalar *out) {
    mean_state *m = ud;
    mean_acc p = m->slot[a->slot];
    out->kind = GR_SCALAR_FLOAT;
    out->v.f = p.n == (long long)n && n ? p.s / (double)n : -1.0;
    return GR_OK;
}

static gr_status mean_identity(void *ud, gr_cpu_acc *out) {
    ((mean_state *)ud)->slot[out->slot] = (mean_acc){0, 0};
    return GR_OK;
}

static int check_cpu_functions(gr_context *ctx) {
    const gr_operator_spec spec = {.name = "cmean", .map = "{x, 1}", .reduce = "{a.s + b.s, a.n + b.n}",
                                   .post = "a.s / a.n", .identity = "{0, 0}", .acc = "P",
                                   .preamble = "struct P { double s; unsigned long long n; };"};
    gr_operator *op;
    gr_buffer *b;
    if (gr_operator_create(ctx, &spec, &op) != GR_OK || gr_buffer_new(ctx, 10, GR_INT32, GR_DEVICE, &b) != GR_OK) {
        fprintf(stderr, "c_api_host: operator: %s\n", gr_errmsg(ctx));
        return 0;
    }
    gr_scalar one = {GR_SCALAR_INT, {.i = 1}};
    gr_buffer_iota(ctx, b, one, one);
    mean_state m = {.ctx = ctx, .victim = b};
    gr_operator_cpu f = {.op = op, .map = mean_map, .reduce = mean_reduce, .post = mean_post,
                         .identity = mean_identity, .ud = &m};
    gr_options o;
    gr_options_init(&o, GR_SUM);
    o.cpu = &f;
    gr_result r;
    gr_status st = gr_reduce(ctx, b, &o, &r);
    gr_operator_free(op);
    if (st != GR_OK || r.value[0].kind != GR_SCALAR_FLOAT || r.value[0].v.f != 5.5) {
        fprintf(stderr, "c_api_host: the operator's functions gave %s %g, expected 5.5\n",
                st == GR_OK ? "" : gr_errmsg(ctx), st == GR_OK ? r.value[0].v.f : 0.0);
        return 0;
    }
    return m.victim == NULL;
}

int main(void) {
    gr_context *ctx;
    if (gr_context_create(&ctx) != GR_OK) {
        /* a GPUREDUCE_* variable it does not accept: the context says which, and what it accepts */
        fprintf(stderr, "c_api_host: %s\n", ctx ? gr_errmsg(ctx) : "out of host memory");
        gr_context_destroy(ctx);
        return 1;
    }
    const size_t n = 3000017;
    gr_buffer *b;
    if (gr_buffer_new(ctx, n, GR_INT32, GR_DEVICE, &b) != GR_OK) {
        fprintf(stderr, "c_api_host: %s\n", gr_errmsg(ctx));
        return 1;
    }
    gr_scalar one = {GR_SCALAR_INT, {.i = 1}};
    gr_buffer_iota(ctx, b, one, one);   /* 1, 2, ..., n */
    int ok = 1;
    ok &= check(ctx, b, GR_SUM, (gr_scalar){GR_SCALAR_INT, {.i = (int64_t)(n * (n + 1) / 2)}});
    ok &= check(ctx, b, GR_MIN, (gr_scalar){GR_SCALAR_INT, {.i = 1}});
    ok &= check(ctx, b, GR_MAX, (gr_scalar){GR_SCALAR_INT, {.i = (int64_t)n}});
    ok &= check(ctx, b, GR_AND, (gr_scalar){GR_SCALAR_BOOL, {.b = 1}});
    ok &= check(ctx, b, GR_OR, (gr_scalar){GR_SCALAR_BOOL, {.b = 1}});

    /* 0, 1, ..., n - 1: "and" is false now, "or" still true */
    gr_scalar zero = {GR_SCALAR_INT, {.i = 0}};
    gr_buffer_iota(ctx, b, zero, one);
    ok &= check(ctx, b, GR_AND, (gr_scalar){GR_SCALAR_BOOL, {.b = 0}});
    ok &= check(ctx, b, GR_OR, (gr_scalar){GR_SCALAR_BOOL, {.b = 1}});
    ok &= check_cpu_functions(ctx);

    gr_options o;
    gr_options_init(&o, GR_SUM);
    gr_plan plan;
    if (gr_plan_make(ctx, b, &o, &plan) != GR_OK) ok = 0;
    else
        for (int i = 0; i < plan.npasses; i++)
            printf("c_api_host: pass %d: %zu elements, %zu blocks (%s)\n", i + 1, plan.pass[i].elements,
                   plan.pass[i].blocks, plan.pass[i].on_host ? "host" : "device");
    gr_buffer_free(ctx, b);
    printf("c_api_host: %s (backend %s)\n", ok ? "ok" : "FAILED",
           gr_context_backend(ctx) == GR_BACKEND_CUDA ? "cuda" : "cpu");
    gr_context_destroy(ctx);
    return ok ? 0 : 1;
}
