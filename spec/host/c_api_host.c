/*
 * c_api_host.c -- the engine used from plain C, without Lua (engine/gr.h).
 *
 * Creates a context, fills a buffer with iota, reduces it with each op and checks the values against
 * closed forms; then plans a reduction and prints the passes. Prints one line and exits 0 on success.
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
