/*
 * c_api_host.c -- the engine used from plain C, without Lua (engine/gr.h).
 *
 * Creates a context, fills a buffer with iota, reduces it with each op and checks the values against
 * closed forms; reduces with a user operator given as C functions (gr_options.cpu) that free the buffer
 * while it runs; exchanges buffers through DLPack both ways (check_dlpack); then plans a reduction and
 * prints the passes. Prints one line and exits 0 on success.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gr.h"
/* The DLPack 1.x structures, as a host would take them from dmlc/dlpack's header: the engine's own
 * definitions, found from this file's folder (an installation has gr.h alone). */
#include "../../engine/core/dlpack.h"

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

/* ---- DLPack ------------------------------------------------------------------------------------------ */

static int dlpack_fail(const char *what, gr_context *ctx) {
    fprintf(stderr, "c_api_host: dlpack: %s%s%s\n", what, ctx ? ": " : "", ctx ? gr_errmsg(ctx) : "");
    return 0;
}

static size_t live_bytes(gr_context *ctx) {
    gr_pool_stats s;
    gr_pool_stats_get(ctx, &s);
    return s.live_device_bytes + s.live_pinned_bytes;
}

/* Our export, as a consumer sees it: a transposed {10, 100} view of 1..1000 (int32) on the device side is
 * a {100, 10} tensor with strides {1, 100} whose data is the view's first element; the memory outlives the
 * buffer's handles, and importing it back reads the same elements; its deleter, called by the import's
 * free, gives the memory back. */
static int check_export(gr_context *ctx) {
    size_t before = live_bytes(ctx);
    gr_buffer *b, *v2, *t;
    size_t shape[2] = {10, 100};
    int perm[2] = {1, 0};
    if (gr_buffer_new(ctx, 1000, GR_INT32, GR_DEVICE, &b) != GR_OK) return dlpack_fail("new", ctx);
    gr_buffer_iota(ctx, b, (gr_scalar){GR_SCALAR_INT, {.i = 1}}, (gr_scalar){GR_SCALAR_INT, {.i = 1}});
    if (gr_buffer_view(ctx, b, 2, shape, &v2) != GR_OK || gr_buffer_permute(ctx, v2, perm, &t) != GR_OK)
        return dlpack_fail("view", ctx);
    void *p;
    if (gr_buffer_to_dlpack(ctx, t, &p) != GR_OK) return dlpack_fail("export", ctx);
    DLManagedTensorVersioned *m = p;
    const DLTensor *d = &m->dl_tensor;
    int cuda = gr_context_backend(ctx) == GR_BACKEND_CUDA;
    int fields = m->version.major == 1 && m->version.minor == 1 && m->flags == 0 && m->deleter && d->ndim == 2 &&
                 d->shape[0] == 100 && d->shape[1] == 10 && d->strides[0] == 1 && d->strides[1] == 100 &&
                 d->dtype.code == kDLInt && d->dtype.bits == 32 && d->dtype.lanes == 1 && d->byte_offset == 0 &&
                 d->data == gr_buffer_data(t) && d->device.device_type == (cuda ? kDLCUDA : kDLCPU) &&
                 d->device.device_id == (cuda ? gr_buffer_device(t) - 1 : 0);
    if (!fields) return dlpack_fail("the exported tensor's fields", NULL);
    gr_buffer_free(ctx, t);
    gr_buffer_free(ctx, v2);
    gr_buffer_free(ctx, b);
    if (live_bytes(ctx) != before + 4000) return dlpack_fail("the export let its memory go", NULL);
    gr_buffer *in;
    if (gr_buffer_from_dlpack(ctx, p, &in) != GR_OK) return dlpack_fail("import of our export", ctx);
    int32_t got[1000];
    if (gr_buffer_read(ctx, in, 0, got, 1000) != GR_OK) return dlpack_fail("read", ctx);
    for (int i = 0; i < 100; i++)
        for (int j = 0; j < 10; j++)
            if (got[i * 10 + j] != j * 100 + i + 1) return dlpack_fail("the imported elements", NULL);
    gr_buffer_free(ctx, in);
    if (live_bytes(ctx) != before) return dlpack_fail("the deleter kept the memory", NULL);
    return 1;
}

/* A host application's tensors: six doubles in host memory, whose deleters count their calls. */
static int deleted, deleted_legacy;
static void count_deleter(DLManagedTensorVersioned *self) { deleted += self->manager_ctx == &deleted; }
static void count_legacy(DLManagedTensor *self) { deleted_legacy += self->manager_ctx == &deleted_legacy; }

static double host_data[6] = {1.5, 2.5, 3.5, 4.5, 5.5, 6.5};
static int64_t host_shape[2] = {2, 3}, host_strides[2] = {3, 1};

static DLManagedTensorVersioned foreign(void) {
    return (DLManagedTensorVersioned){{1, 1}, &deleted, count_deleter, 0,
                                      {host_data, {kDLCPU, 0}, 2, {kDLFloat, 64, 1}, host_shape, host_strides, 0}};
}

/* A tensor the import must refuse: GR_EINVAL naming "managed", with `words` in the message, and the
 * deleter not called (the caller keeps the tensor). */
static int refused(gr_context *ctx, DLManagedTensorVersioned m, const char *words, const char *what) {
    gr_buffer *b = NULL;
    int before = deleted;
    gr_status st = gr_buffer_from_dlpack(ctx, &m, &b);
    if (st == GR_EINVAL && b == NULL && deleted == before && strcmp(gr_errarg(ctx), "managed") == 0 &&
        strstr(gr_errmsg(ctx), words))
        return 1;
    fprintf(stderr, "c_api_host: dlpack: %s: status %d, message \"%s\" (expected \"%s\")\n", what, (int)st,
            gr_errmsg(ctx), words);
    gr_buffer_free(ctx, b);
    return 0;
}

static int check_import(gr_context *ctx) {
    int ok = 1;
    /* imported, sliced, the import freed: the slice still holds the memory; the deleter runs at its free */
    DLManagedTensorVersioned m = foreign();
    gr_buffer *in, *part;
    if (gr_buffer_from_dlpack(ctx, &m, &in) != GR_OK) return dlpack_fail("import", ctx);
    size_t shape[2];
    int64_t strides[2];
    gr_buffer_layout(in, shape, strides);
    ok &= gr_buffer_ndim(in) == 2 && shape[0] == 2 && shape[1] == 3 && strides[0] == 3 && strides[1] == 1 &&
          gr_buffer_dtype(in) == GR_FLOAT64 && gr_buffer_data(in) == (void *)host_data &&
          gr_buffer_where(in) == (gr_context_backend(ctx) == GR_BACKEND_CUDA ? GR_HOST : GR_DEVICE);
    gr_options o;
    gr_options_init(&o, GR_SUM);
    gr_result r;
    ok &= gr_reduce(ctx, in, &o, &r) == GR_OK && r.value[0].v.f == 24.0;
    if (gr_buffer_slice(ctx, in, 2, 3, &part) != GR_OK) return dlpack_fail("slice", ctx);
    gr_buffer_free(ctx, in);
    ok &= deleted == 0;
    double three[3];
    ok &= gr_buffer_read(ctx, part, 0, three, 3) == GR_OK && three[0] == 3.5 && three[2] == 5.5;
    gr_buffer_free(ctx, part);
    ok &= deleted == 1;
    if (!ok) return dlpack_fail("an imported host tensor (layout, sum, slice, one deleter call)", NULL);

    /* a 0-d tensor is {1}; a negative stride on an axis of length 1 does not matter; byte_offset counts */
    static int64_t one_shape[2] = {1, 2}, odd_strides[2] = {-7, 2};
    m = foreign();
    m.dl_tensor.ndim = 0;
    m.dl_tensor.byte_offset = 8;
    if (gr_buffer_from_dlpack(ctx, &m, &in) != GR_OK) return dlpack_fail("import of a 0-d tensor", ctx);
    gr_buffer_layout(in, shape, NULL);
    ok &= gr_buffer_ndim(in) == 1 && shape[0] == 1 && gr_buffer_data(in) == (void *)&host_data[1];
    gr_buffer_free(ctx, in);
    m = foreign();
    m.dl_tensor.shape = one_shape;
    m.dl_tensor.strides = odd_strides;
    if (gr_buffer_from_dlpack(ctx, &m, &in) != GR_OK) return dlpack_fail("import of a length-1 axis", ctx);
    ok &= gr_buffer_read(ctx, in, 0, three, 2) == GR_OK && three[0] == 1.5 && three[1] == 3.5;
    gr_buffer_free(ctx, in);
    ok &= deleted == 3;
    if (!ok) return dlpack_fail("0-d, length-1 axes and byte_offset", NULL);

    /* the pre-1.0 structure, through its own entry */
    DLManagedTensor legacy = {{host_data, {kDLCPU, 0}, 1, {kDLFloat, 64, 1}, &host_shape[1], NULL, 0},
                              &deleted_legacy, count_legacy};
    if (gr_buffer_from_dlpack_legacy(ctx, &legacy, &in) != GR_OK) return dlpack_fail("legacy import", ctx);
    ok &= gr_reduce(ctx, in, &o, &r) == GR_OK && r.value[0].v.f == 7.5;
    gr_buffer_free(ctx, in);
    ok &= deleted_legacy == 1;
    if (!ok) return dlpack_fail("a legacy tensor", NULL);

    /* what is refused, each by name */
    static int64_t negative[2] = {-3, 1}, many[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    m = foreign();
    m.version.major = 2;
    ok &= refused(ctx, m, "DLPack version 2.1 (accepted: 1.x", "another major version");
    m = foreign();
    m.flags = GR_DLPACK_FLAG_READ_ONLY;
    ok &= refused(ctx, m, "read-only", "a read-only tensor");
    m = foreign();
    m.dl_tensor.dtype.lanes = 2;
    ok &= refused(ctx, m, "2 lanes (accepted: 1 lane)", "a vector type");
    m = foreign();
    m.dl_tensor.dtype = (DLDataType){5, 64, 1};
    ok &= refused(ctx, m, "type code 5 with 64 bits (accepted: int8 (code 0, 8 bits)", "complex");
    m = foreign();
    m.dl_tensor.dtype = (DLDataType){kDLFloat, 8, 1};
    ok &= refused(ctx, m, "float8_e4m3 (code 10, 8 bits)", "a float of 8 bits with code 2");
    m = foreign();
    m.dl_tensor.strides = negative;
    ok &= refused(ctx, m, "stride -3 on axis 0 (accepted: strides >= 0", "a negative stride");
    m = foreign();
    m.dl_tensor.device = (DLDevice){kDLCUDAManaged, 0};
    ok &= refused(ctx, m, "device type 13 (kDLCUDAManaged", "managed memory");
    m = foreign();
    m.dl_tensor.device = (DLDevice){kDLCUDA, 99};
    ok &= refused(ctx, m, gr_context_backend(ctx) == GR_BACKEND_CUDA ? "CUDA device 99" : "while the backend is cpu",
                  "a device we lack");
    m = foreign();
    m.dl_tensor.ndim = 9;
    m.dl_tensor.shape = many;
    ok &= refused(ctx, m, "9 dimensions (accepted: 0 to 8)", "too many axes");
    m = foreign();
    m.dl_tensor.byte_offset = 4;
    ok &= refused(ctx, m, "not a multiple of 8", "a misaligned first element");
    m = foreign();
    m.dl_tensor.data = NULL;
    ok &= refused(ctx, m, "NULL data for 6 elements", "no data");
    gr_buffer *none = NULL;
    ok &= gr_buffer_from_dlpack(ctx, NULL, &none) == GR_EINVAL && none == NULL;
    return ok && deleted == 3;
}

static int check_dlpack(gr_context *ctx) {
    int ok = check_export(ctx) && check_import(ctx);
    printf("c_api_host: dlpack: %s (deleter calls: %d versioned, %d legacy)\n", ok ? "ok" : "FAILED", deleted,
           deleted_legacy);
    return ok;
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
    ok &= check_dlpack(ctx);

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
