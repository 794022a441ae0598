/*
 * operator_cpu.c -- a user operator run by the host through the functions its caller gives
 * (gr_operator_cpu, gr.h): the cpu backend's and host memory's counterpart of the operator's kernels.
 *
 * A run does what the kernels do with the expressions (operator_source.c): each element converted to
 * the accumulator's dtype before map, every value kept in that dtype (the generated code stores each in
 * a `const gr_op_acc`), each fold begun at the identity -- so an empty buffer or segment gives post of
 * the identity on both sides -- and post's value the result. The functions are the caller's code, so
 * each value they give is checked, and they may free what the run reads: it holds handles of its own
 * on every buffer (gr_buffers_hold) and a reference on the operator until it returns.
 */
#include "core/operator_cpu.h"
#include "base/dtype.h"
#include "base/error.h"
#include "ops/user_op.h"
#include "core/plan.h"
#include "core/buffer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- conversions ----------------------------------------------------------------------------------- */

/* A dtype's facts as the conversion needs them, looked up once per run (it runs for every value). */
typedef struct form {
    int is_float, is_signed;
    unsigned bits;
    double top;             /* integers: 2^bits (unsigned) or 2^(bits - 1) (signed), where truncation ends */
    gr_dtype dtype;
} form;

static form form_of(gr_dtype t) {
    form f = {gr_dtype_is_float(t), gr_dtype_is_signed(t), 8u * (unsigned)gr_dtype_size(t), 0, t};
    f.top = ldexp(1.0, (int)f.bits - f.is_signed);
    return f;
}

/* v as C stores it in a dtype of form t, which is what the device does: 1 and *out in its kind, or 0
 * where C leaves the conversion undefined (NaN, or a float that truncates outside an integer dtype) or
 * v is a bool. Integers wrap to the width; a float32 is rounded once from v (an int64 straight to it). */
static int convert(gr_scalar v, const form *t, gr_scalar *out) {
    if (v.kind == GR_SCALAR_BOOL) return 0;
    if (t->is_float) {
        out->kind = GR_SCALAR_FLOAT;
        if (t->bits < 32) {             /* float16, bfloat16: rounded once by the dtype's writer */
            unsigned char e[8];
            gr_scalar d = {GR_SCALAR_FLOAT, {.f = v.kind == GR_SCALAR_FLOAT ? v.v.f
                                                  : v.kind == GR_SCALAR_UINT ? (double)v.v.u : (double)v.v.i}};
            gr_scalar_put(e, t->dtype, d);
            *out = gr_scalar_load(e, t->dtype);
        } else if (t->bits == 32)
            out->v.f = v.kind == GR_SCALAR_FLOAT ? (float)v.v.f : v.kind == GR_SCALAR_UINT ? (float)v.v.u : (float)v.v.i;
        else
            out->v.f = v.kind == GR_SCALAR_FLOAT ? v.v.f : v.kind == GR_SCALAR_UINT ? (double)v.v.u : (double)v.v.i;
        return 1;
    }
    uint64_t u;
    if (v.kind == GR_SCALAR_FLOAT) {
        double d = trunc(v.v.f);
        if (!(d >= (t->is_signed ? -t->top : 0.0) && d < t->top)) return 0;
        u = d < 0 ? (uint64_t)(int64_t)d : (uint64_t)d;
    } else {
        u = v.kind == GR_SCALAR_UINT ? v.v.u : (uint64_t)v.v.i;
    }
    if (t->bits < 64) {
        u &= (1ull << t->bits) - 1;
        if (t->is_signed && u >> (t->bits - 1)) u |= ~0ull << t->bits;
    }
    out->kind = t->is_signed ? GR_SCALAR_INT : GR_SCALAR_UINT;
    if (t->is_signed) out->v.i = (int64_t)u;
    else out->v.u = u;
    return 1;
}

/* v as a message shows it: the shortest decimal that reads back the same for a float. */
static void show(char *s, size_t len, gr_scalar v) {
    switch (v.kind) {
    case GR_SCALAR_FLOAT:
        if (isnan(v.v.f)) {
            snprintf(s, len, "nan");
            break;
        }
        for (int digits = 15; digits <= 17; digits++) {
            snprintf(s, len, "%.*g", digits, v.v.f);
            if (strtod(s, NULL) == v.v.f) break;
        }
        break;
    case GR_SCALAR_INT: snprintf(s, len, "%lld", (long long)v.v.i); break;
    case GR_SCALAR_UINT: snprintf(s, len, "%llu", (unsigned long long)v.v.u); break;
    case GR_SCALAR_BOOL: snprintf(s, len, "%s", v.v.b ? "true" : "false"); break;
    }
}

/* ---- a run ----------------------------------------------------------------------------------------- */

typedef struct run {
    gr_context *ctx;
    const gr_operator_cpu *f;
    int acc;                /* the accumulator's dtype, or -1 for a struct (the caller's slots) */
    form acc_form;
    int has_id;             /* the identity as the host reads it, in id; else f->identity gives it */
    gr_scalar id;
    int has_post;
} run;

/* The value a function gave in *v, as the accumulator keeps it (a struct's is in the caller's slot). */
static gr_status settle(const run *r, gr_cpu_acc *v, const char *fn) {
    if (r->acc < 0) return GR_OK;
    gr_dtype t = (gr_dtype)r->acc;
    if (v->value.kind == GR_SCALAR_BOOL)
        return gr_fail_arg(r->ctx, GR_EINVAL, "op", "the operator's %s gave a boolean, not a number (its accumulator "
                           "is %s)", fn, gr_dtype_name(t));
    if (convert(v->value, &r->acc_form, &v->value)) return GR_OK;
    char shown[64];
    show(shown, sizeof shown, v->value);
    return gr_fail_arg(r->ctx, GR_EINVAL, "op", "the operator's %s gave %s, which its %s accumulator cannot hold (the "
                       "device's conversion is undefined there)", fn, shown, gr_dtype_name(t));
}

static gr_status start(const run *r, gr_cpu_acc *acc) {
    if (r->has_id) {
        acc->value = r->id;
        return GR_OK;
    }
    gr_status st = r->f->identity(r->f->ud, acc);
    return st == GR_OK ? settle(r, acc, "cpu.identity") : st;
}

/* acc = reduce(acc, map(x, i)) for element x, whose ordinal in the whole array is `at` (for messages). */
static gr_status step(const run *r, gr_cpu_acc *acc, gr_scalar x, uint64_t i, size_t at) {
    /* a bool element is the number 0 or 1, as the device's unsigned char is */
    if (x.kind == GR_SCALAR_BOOL) x = (gr_scalar){GR_SCALAR_UINT, {.u = (uint64_t)(x.v.b != 0)}};
    if (r->acc >= 0 && !convert(x, &r->acc_form, &x)) {
        char shown[64];
        show(shown, sizeof shown, x);
        return gr_fail_arg(r->ctx, GR_EINVAL, "op", "element %zu (%s) has no value in its %s accumulator (the device's "
                           "conversion is undefined there)", at + 1, shown, gr_dtype_name((gr_dtype)r->acc));
    }
    gr_cpu_acc m = {.slot = 1}, c = {.slot = acc->slot};
    gr_status st = r->f->map(r->f->ud, x, i, &m);
    if (st == GR_OK) st = settle(r, &m, "cpu.map");
    if (st == GR_OK) st = r->f->reduce(r->f->ud, acc, &m, &c);
    if (st == GR_OK) st = settle(r, &c, "cpu.reduce");
    if (st == GR_OK) *acc = c;
    return st;
}

/* acc = reduce(acc, map(xs..., i)) for the elements xs of several inputs at one position, the `at`-th of
 * the whole array (for messages). */
static gr_status step_inputs(const run *r, gr_cpu_acc *acc, gr_scalar *xs, int count, uint64_t i, size_t at) {
    for (int k = 0; k < count; k++) {
        if (xs[k].kind == GR_SCALAR_BOOL) xs[k] = (gr_scalar){GR_SCALAR_UINT, {.u = (uint64_t)(xs[k].v.b != 0)}};
        if (r->acc >= 0 && !convert(xs[k], &r->acc_form, &xs[k])) {
            char shown[64];
            show(shown, sizeof shown, xs[k]);
            return gr_fail_arg(r->ctx, GR_EINVAL, "op", "element %zu of input %d (%s) has no value in its %s "
                               "accumulator (the device's conversion is undefined there)", at + 1, k + 1, shown,
                               gr_dtype_name((gr_dtype)r->acc));
        }
    }
    gr_cpu_acc m = {.slot = 1}, c = {.slot = acc->slot};
    gr_status st = r->f->map_inputs(r->f->ud, xs, count, i, &m);
    if (st == GR_OK) st = settle(r, &m, "cpu.map");
    if (st == GR_OK) st = r->f->reduce(r->f->ud, acc, &m, &c);
    if (st == GR_OK) st = settle(r, &c, "cpu.reduce");
    if (st == GR_OK) *acc = c;
    return st;
}

/* Elements [at, at + len) of the array the parts make, into dst. */
static gr_status read_parts(gr_context *ctx, gr_buffer *const *parts, size_t count, size_t at, unsigned char *dst,
                            size_t len) {
    size_t es = gr_dtype_size(gr_buffer_dtype(parts[0]));
    for (size_t i = 0; i < count && len; i++) {
        size_t n = gr_buffer_size(parts[i]);
        if (at >= n) {
            at -= n;
            continue;
        }
        size_t take = n - at < len ? n - at : len;
        gr_status st = gr_buffer_read(ctx, parts[i], at, dst, take);
        if (st != GR_OK) return st;
        dst += take * es;
        len -= take;
        at = 0;
    }
    return GR_OK;
}

enum { CHUNK = 512 };       /* elements read from the buffers at a time (on the stack: callbacks may nest) */

/* Elements [lo, lo + n) of the array folded from the identity, i counting from 0 at lo; the result --
 * post's value, or the accumulator -- in *out. */
static gr_status fold(const run *r, gr_buffer *const *parts, size_t count, size_t lo, size_t n, gr_scalar *out) {
    gr_cpu_acc acc = {.slot = 0};
    gr_status st = start(r, &acc);
    gr_dtype t = gr_buffer_dtype(parts[0]);
    size_t es = gr_dtype_size(t);
    unsigned char chunk[CHUNK * 8];
    for (size_t at = 0; at < n && st == GR_OK; at += CHUNK) {
        size_t len = n - at < CHUNK ? n - at : CHUNK;
        st = read_parts(r->ctx, parts, count, lo + at, chunk, len);
        for (size_t k = 0; k < len && st == GR_OK; k++)
            st = step(r, &acc, gr_scalar_load(chunk + k * es, t), at + k, lo + at + k);
    }
    if (st != GR_OK) return st;
    if (!r->has_post) {
        *out = acc.value;
        return GR_OK;
    }
    memset(out, 0, sizeof *out);
    return r->f->post(r->f->ud, &acc, n, out);
}

enum { INPUTS_CHUNK = 128 };    /* elements of each input at a time (8 of them on the stack) */

/* Elements [lo, lo + n) of the inputs bufs[0..count) folded side by side, as fold does. */
static gr_status fold_inputs(const run *r, gr_buffer *const *bufs, int count, size_t lo, size_t n, gr_scalar *out) {
    gr_cpu_acc acc = {.slot = 0};
    gr_status st = start(r, &acc);
    unsigned char chunk[GR_OPERATOR_INPUTS][INPUTS_CHUNK * 8];
    for (size_t at = 0; at < n && st == GR_OK; at += INPUTS_CHUNK) {
        size_t len = n - at < INPUTS_CHUNK ? n - at : INPUTS_CHUNK;
        for (int k = 0; k < count && st == GR_OK; k++) st = gr_buffer_read(r->ctx, bufs[k], lo + at, chunk[k], len);
        for (size_t j = 0; j < len && st == GR_OK; j++) {
            gr_scalar xs[GR_OPERATOR_INPUTS];
            for (int k = 0; k < count; k++) {
                gr_dtype t = gr_buffer_dtype(bufs[k]);
                xs[k] = gr_scalar_load(chunk[k] + j * gr_dtype_size(t), t);
            }
            st = step_inputs(r, &acc, xs, count, at + j, lo + at + j);
        }
    }
    if (st != GR_OK) return st;
    if (!r->has_post) {
        *out = acc.value;
        return GR_OK;
    }
    memset(out, 0, sizeof *out);
    return r->f->post(r->f->ud, &acc, n, out);
}

/* ---- what a run holds ------------------------------------------------------------------------------ */

typedef struct held {
    gr_buffer **b;          /* the engine's own handles on the buffers */
    size_t count;
    gr_operator *op;
} held;

static gr_status hold(gr_context *ctx, const gr_options *o, gr_buffer *const *bufs, size_t count, held *h) {
    h->count = count;
    h->op = NULL;
    gr_status st = gr_buffers_hold(ctx, bufs, count, &h->b);
    if (st == GR_OK) {
        h->op = o->cpu->op;
        gr_operator_hold(h->op);
    }
    return st;
}

static void let_go(gr_context *ctx, held *h) {
    gr_buffers_release(ctx, h->b, h->count);
    gr_operator_free(h->op);
}

/* The run's facts from the operator, after its options are checked. */
static gr_status begin(gr_context *ctx, const gr_options *o, run *r) {
    gr_status st = gr_operator_cpu_options(ctx, o);
    if (st != GR_OK) return st;
    const gr_operator *op = o->cpu->op;
    *r = (run){.ctx = ctx, .f = o->cpu, .acc = op->acc_dtype, .has_post = op->spec.post != NULL};
    if (r->acc >= 0) r->acc_form = form_of((gr_dtype)r->acc);
    r->has_id = gr_operator_identity_value(op, &r->id);
    return GR_OK;
}

static gr_status one_dtype(gr_context *ctx, gr_buffer *const *parts, size_t count) {
    for (size_t i = 1; i < count; i++)
        if (gr_buffer_dtype(parts[i]) != gr_buffer_dtype(parts[0]))
            return gr_fail_arg(ctx, GR_EINVAL, "shards", "shard %zu is %s, shard 1 %s (a sharded buffer has one dtype)",
                               i + 1, gr_dtype_name(gr_buffer_dtype(parts[i])), gr_dtype_name(gr_buffer_dtype(parts[0])));
    return count ? GR_OK : gr_fail_arg(ctx, GR_EINVAL, "shards", "no buffer to reduce");
}

static size_t total_of(gr_buffer *const *parts, size_t count) {
    size_t n = 0;
    for (size_t i = 0; i < count; i++) n += gr_buffer_size(parts[i]);
    return n;
}

static gr_result one_value(gr_scalar v) {
    gr_result res;
    memset(&res, 0, sizeof res);
    res.count = 1;
    res.value[0] = v;
    return res;
}

/* ---- entry points ---------------------------------------------------------------------------------- */

int gr_operator_cpu_takes(const gr_context *ctx, const gr_options *o, const gr_buffer *b) {
    return o->cpu && (!o->user || ctx->base.backend != GR_BACKEND_CUDA || gr_buffer_where(b) == GR_HOST);
}

gr_status gr_operator_cpu_options(gr_context *ctx, const gr_options *o) {
    const char *way = gr_options_way(o);
    if (!way && o->acc >= 0) way = "acc";
    if (way)
        return gr_fail_arg(ctx, GR_EINVAL, way, "a user operator's cpu functions take no variant, block, grid, finish, "
                           "threshold or acc");
    if (o->determinism == GR_DET_GPU_TO_GPU)
        return gr_fail_arg(ctx, GR_EINVAL, "determinism", "'gpu_to_gpu' has no form for a user operator (its combine "
                           "is the user's) (accepted with operators: not_guaranteed, run_to_run)");
    const gr_operator_cpu *f = o->cpu;
    const gr_operator *op = f->op;
    if (!op || !f->map || !f->reduce)
        return gr_fail_arg(ctx, GR_EINVAL, "op", "a user operator's cpu functions need the operator, map and reduce");
    int given = o->ninputs > 1 ? o->ninputs : 1;
    if (gr_operator_inputs(op) != given)
        return gr_fail_arg(ctx, GR_EINVAL, "bufs", "operator %s reads %d input%s: give it %s (%d given)", op->spec.name,
                           gr_operator_inputs(op), gr_operator_inputs(op) > 1 ? "s" : "",
                           gr_operator_inputs(op) > 1 ? "a list of that many buffers" : "one buffer", given);
    if (gr_operator_inputs(op) > 1 && !f->map_inputs)
        return gr_fail_arg(ctx, GR_EINVAL, "op", "operator %s reads %d inputs: its cpu functions need map_inputs",
                           op->spec.name, gr_operator_inputs(op));
    if (op->spec.post && !f->post)
        return gr_fail_arg(ctx, GR_EINVAL, "op", "operator %s has post: its cpu functions need one too", op->spec.name);
    gr_scalar id;
    if (!f->identity && !gr_operator_identity_value(op, &id))
        return gr_fail_arg(ctx, GR_EINVAL, "op", "the host cannot read operator %s's identity '%s': its cpu functions "
                           "need one", op->spec.name, op->spec.identity);
    return GR_OK;
}

gr_status gr_operator_cpu_reduce(gr_context *ctx, const gr_options *o, gr_buffer *const *parts, size_t count,
                                 gr_result *out) {
    run r;
    held h;
    gr_status st = begin(ctx, o, &r);
    if (st == GR_OK) st = one_dtype(ctx, parts, count);
    if (st != GR_OK || (st = hold(ctx, o, parts, count, &h)) != GR_OK) return st;
    gr_scalar v;
    st = fold(&r, h.b, count, 0, total_of(h.b, count), &v);
    let_go(ctx, &h);
    if (st == GR_OK) *out = one_value(v);
    return st;
}

/* A segment's value as element s of results, in the results' dtype rt: post's value converted to
 * float64 as the segmented kernel writes it (double(post)), or the accumulator itself. */
static gr_status store(gr_context *ctx, gr_scalar v, gr_dtype rt, unsigned char *results, size_t s) {
    unsigned char *p = results + s * gr_dtype_size(rt);
    if (rt != GR_FLOAT64 || v.kind == GR_SCALAR_FLOAT) return gr_scalar_store(ctx, v, rt, p, "result");
    double d = v.kind == GR_SCALAR_INT ? (double)v.v.i : v.kind == GR_SCALAR_UINT ? (double)v.v.u : (double)v.v.b;
    memcpy(p, &d, sizeof d);
    return GR_OK;
}

/* The segments of the array the parts make (inputs 0), or of the inputs parts[0..count) side by side
 * (inputs 1), into element s of out. */
static gr_status segments_of(gr_context *ctx, const gr_options *o, gr_buffer *const *parts, size_t count, int inputs,
                             size_t size, const int64_t *bounds, size_t k, gr_buffer *out) {
    run r;
    held h, ho;
    gr_status st = begin(ctx, o, &r);
    if (st == GR_OK && !inputs) st = one_dtype(ctx, parts, count);
    int rt = st == GR_OK ? gr_operator_segment_dtype(ctx, r.has_post, r.acc) : 0;
    if (st != GR_OK || rt < 0) return rt < 0 ? GR_EINVAL : st;
    unsigned char *results = malloc(k ? k * gr_dtype_size((gr_dtype)rt) : 1);
    if (!results) return gr_fail(ctx, GR_ENOMEM, "out of host memory");
    if ((st = hold(ctx, o, parts, count, &h)) != GR_OK) {
        free(results);
        return st;
    }
    if ((st = hold(ctx, o, &out, 1, &ho)) != GR_OK) {
        let_go(ctx, &h);
        free(results);
        return st;
    }
    for (size_t s = 0; s < k && st == GR_OK; s++) {
        size_t lo = size ? s * size : (size_t)bounds[s], hi = size ? lo + size : (size_t)bounds[s + 1];
        gr_scalar v;
        st = inputs ? fold_inputs(&r, h.b, (int)count, lo, hi - lo, &v) : fold(&r, h.b, count, lo, hi - lo, &v);
        if (st == GR_OK) st = store(ctx, v, (gr_dtype)rt, results, s);
    }
    if (st == GR_OK) st = gr_buffer_write(ctx, ho.b[0], 0, results, k);
    let_go(ctx, &ho);
    let_go(ctx, &h);
    free(results);
    return st;
}

gr_status gr_operator_cpu_segments(gr_context *ctx, const gr_options *o, gr_buffer *const *parts, size_t count,
                                   size_t size, const int64_t *bounds, size_t k, gr_buffer *out) {
    return segments_of(ctx, o, parts, count, 0, size, bounds, k, out);
}

gr_status gr_operator_cpu_inputs_reduce(gr_context *ctx, const gr_options *o, gr_buffer *const *bufs, int count,
                                        gr_result *out) {
    run r;
    held h;
    gr_status st = begin(ctx, o, &r);
    if (st != GR_OK || (st = hold(ctx, o, bufs, (size_t)count, &h)) != GR_OK) return st;
    gr_scalar v;
    st = fold_inputs(&r, h.b, count, 0, gr_buffer_size(h.b[0]), &v);
    let_go(ctx, &h);
    if (st == GR_OK) *out = one_value(v);
    return st;
}

gr_status gr_operator_cpu_inputs_segments(gr_context *ctx, const gr_options *o, gr_buffer *const *bufs, int count,
                                          size_t size, const int64_t *bounds, size_t k, gr_buffer *out) {
    return segments_of(ctx, o, bufs, (size_t)count, 1, size, bounds, k, out);
}

gr_status gr_operator_cpu_many(gr_context *ctx, const gr_options *o, gr_buffer *const *bufs, size_t count,
                               gr_result *results) {
    run r;
    held h;
    gr_status st = begin(ctx, o, &r);
    if (st != GR_OK || (st = hold(ctx, o, bufs, count, &h)) != GR_OK) return st;
    for (size_t i = 0; i < count && st == GR_OK; i++) {
        gr_scalar v;
        st = fold(&r, &h.b[i], 1, 0, gr_buffer_size(h.b[i]), &v);
        if (st == GR_OK) results[i] = one_value(v);
    }
    let_go(ctx, &h);
    return st;
}

gr_status gr_operator_cpu_fold(gr_context *ctx, const gr_operator_cpu *f, gr_dtype acc, const void *partials,
                               size_t count, void *out) {
    if ((unsigned)acc >= GR_DTYPE_COUNT || !f->reduce || count == 0)
        return gr_fail_arg(ctx, GR_EINVAL, "op", "the CPU's fold needs cpu.reduce, a dtype accumulator and a partial");
    run r = {.ctx = ctx, .f = f, .acc = (int)acc, .acc_form = form_of(acc)};
    size_t es = gr_dtype_size(acc);
    gr_cpu_acc a = {gr_scalar_load(partials, acc), 0};
    gr_status st = GR_OK;
    for (size_t i = 1; i < count && st == GR_OK; i++) {
        gr_cpu_acc b = {gr_scalar_load((const char *)partials + i * es, acc), 1}, c = {.slot = 0};
        st = f->reduce(f->ud, &a, &b, &c);
        if (st == GR_OK) st = settle(&r, &c, "cpu.reduce");
        if (st == GR_OK) a = c;
    }
    return st == GR_OK ? gr_scalar_store(ctx, a.value, acc, out, "cpu.reduce's value") : st;
}
