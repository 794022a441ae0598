/*
 * plan.c -- turns options into passes: which variant, block size, grid of each pass, where it finishes.
 *
 * A kernel variant turns n inputs into one partial per block. The finishing mode decides what happens
 * to the partials (DESIGN.md):
 *   device  more passes of the same variant over the partials until one value remains;
 *   hybrid  device passes until at most `threshold` partials remain, then one copy and the CPU;
 *   host    one device pass, every partial copied back and finished on the CPU;
 *   single  one kernel: the last block to finish combines the partials itself.
 */
#include "internal.h"

#include <stdio.h>
#include <string.h>

#define DEFAULT_HYBRID_THRESHOLD 4096
#define AUTO_LARGE_BYTES ((size_t)64 << 20)

void gr_options_init(gr_options *o, gr_op op) {
    memset(o, 0, sizeof *o);
    o->op = op;
    o->variant = -1;
    o->finish = GR_FINISH_AUTO;
    o->acc = -1;
}

static int is_pow2(int x) { return x > 0 && (x & (x - 1)) == 0; }

gr_status gr_check_block(gr_context *ctx, const gr_variant *v, int block) {
    int ok = block >= v->block_min && block <= v->block_max &&
             (!(v->needs & GR_NEEDS_POW2_BLOCK) || is_pow2(block));
    if (ok) return GR_OK;
    char list[160] = "";
    size_t used = 0;
    if (v->needs & GR_NEEDS_POW2_BLOCK) {
        for (int b = v->block_min; b <= v->block_max && used < sizeof list; b *= 2)
            used += (size_t)snprintf(list + used, sizeof list - used, "%s%d", used ? ", " : "", b);
    } else if (v->block_min == v->block_max) {
        snprintf(list, sizeof list, "%d", v->block_min);
    } else {
        snprintf(list, sizeof list, "%d to %d", v->block_min, v->block_max);
    }
    return gr_fail_arg(ctx, GR_EINVAL, "block", "%d is not accepted by variant '%s' (accepted: %s)", block,
                       v->name, list);
}

static gr_status check_finish(gr_context *ctx, const gr_variant *v, gr_finish f) {
    if (v->finishes & (1u << f)) return GR_OK;
    char list[96] = "";
    size_t used = 0;
    for (int i = 1; i < GR_FINISH_COUNT && used < sizeof list; i++)
        if (v->finishes & (1u << i))
            used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", used ? ", " : "",
                                     gr_finish_name((gr_finish)i));
    return gr_fail_arg(ctx, GR_EINVAL, "finish", "'%s' is not supported by variant '%s' (accepted: auto, %s)",
                       gr_finish_name(f), v->name, list);
}

static void add_pass(gr_plan *p, size_t elements, size_t blocks, int block, gr_dtype in, int on_host) {
    gr_pass *ps = &p->pass[p->npasses++];
    ps->elements = elements;
    ps->blocks = blocks;
    ps->block = block;
    ps->in_dtype = in;
    ps->on_host = on_host;
}

gr_status gr_plan_make(gr_context *ctx, const gr_buffer *b, const gr_options *o, gr_plan *plan) {
    memset(plan, 0, sizeof *plan);
    if ((unsigned)o->op >= GR_OP_COUNT)
        return gr_fail_arg(ctx, GR_EINVAL, "op", "unknown op (accepted: %s)", gr_op_names());
    int vi = o->variant < 0 ? gr_variant_auto(ctx, b, o->op) : o->variant;
    const gr_variant *v = gr_variant_get(vi);
    const gr_variant_impl *impl = gr_variant_impl_get(vi);
    if (!v) return gr_fail_arg(ctx, GR_EINVAL, "variant", "unknown variant (accepted: %s)", gr_variant_names());
    if ((v->needs & GR_NEEDS_CUDA) && (ctx->backend != GR_BACKEND_CUDA || !impl->launch))
        return gr_fail_arg(ctx, GR_ENODEV, "variant", "'%s' needs a CUDA device (backend is %s)", v->name,
                       ctx->backend == GR_BACKEND_CUDA ? "cuda, but this build has no kernels" : "cpu");
    int block = o->block ? o->block : v->block_default;
    /* auto on a large buffer: 1024-thread blocks (two per SM) measured best or level for every dtype at
     * 2^28 on an H200, and 4-6% better for 1-byte types, whose 256 MiB leave fixed costs more weight
     * (experiments/tuning/byte_finish_probe.lua); small buffers keep the variant's default */
    if (!o->block && o->variant < 0 && (v->needs & GR_NEEDS_CUDA) && v->block_max >= 1024 &&
        b->n * gr_dtype_size(b->dtype) >= AUTO_LARGE_BYTES)
        block = 1024;
    gr_status st = gr_check_block(ctx, v, block);
    if (st != GR_OK) return st;
    /* auto picks the single-pass finish where it can: one launch, the value written straight to pinned
     * memory -- fastest at every size (experiments/tuning/tune.cu); a named variant keeps its own */
    gr_finish finish = o->finish != GR_FINISH_AUTO ? o->finish
                     : o->variant < 0 && (v->finishes & (1u << GR_FINISH_SINGLE)) ? GR_FINISH_SINGLE
                     : v->default_finish;
    if ((unsigned)finish >= GR_FINISH_COUNT)
        return gr_fail_arg(ctx, GR_EINVAL, "finish", "unknown mode (accepted: %s)", gr_finish_names());
    if ((st = check_finish(ctx, v, finish)) != GR_OK) return st;
    int acc = gr_acc_dtype(ctx, o->op, b->dtype, o->acc);
    if (acc < 0) return GR_EINVAL;

    plan->variant = vi;
    plan->finish = finish;
    plan->acc = (gr_dtype)acc;
    plan->threshold = o->threshold ? o->threshold : DEFAULT_HYBRID_THRESHOLD;
    size_t n = b->n;
    if (n == 0) return GR_OK;
    if (!impl->launch) {                      /* a host variant: one pass on the CPU */
        add_pass(plan, n, 0, block, b->dtype, 1);
        return GR_OK;
    }

    if (impl->scratch) plan->scratch = impl->scratch(n, b->dtype, o->op, plan->acc);
    size_t blocks = o->grid ? o->grid : impl->grid(n, block, b->dtype, &ctx->info);
    add_pass(plan, n, blocks, block, b->dtype, 0);
    size_t count = blocks;
    if (finish == GR_FINISH_SINGLE) return GR_OK;
    if (finish == GR_FINISH_DEVICE || finish == GR_FINISH_HYBRID) {
        size_t stop = finish == GR_FINISH_DEVICE ? 1 : plan->threshold;
        while (count > stop) {
            if (plan->npasses == GR_PLAN_MAX_PASSES - 1)
                return gr_fail(ctx, GR_EINVAL, "plan: more than %d passes", GR_PLAN_MAX_PASSES - 1);
            size_t next = impl->grid(count, block, plan->acc, &ctx->info);
            add_pass(plan, count, next, block, plan->acc, 0);
            count = next;
        }
    }
    if (count > 1) add_pass(plan, count, 0, block, plan->acc, 1);
    return GR_OK;
}

/* Ping-pong halves: odd passes write the first half, even passes the second. Each half is as large as
 * the most partials any of its passes writes, rounded to 256 bytes. */
static size_t half_bytes(const gr_plan *p, int parity) {
    size_t most = 0, es = gr_dtype_size(p->acc);
    for (int i = parity; i < p->npasses; i += 2)
        if (!p->pass[i].on_host && p->pass[i].blocks > most) most = p->pass[i].blocks;
    return (most * es + 255) / 256 * 256;
}

/* Layout: [first half | second half | the variant's own scratch] */
size_t gr_plan_scratch_bytes(const gr_plan *p) { return half_bytes(p, 0) + half_bytes(p, 1) + p->scratch; }
size_t gr_plan_extra_offset(const gr_plan *p) { return half_bytes(p, 0) + half_bytes(p, 1); }

size_t gr_plan_host_bytes(const gr_plan *p) {
    if (p->npasses == 0) return 0;
    const gr_pass *last = &p->pass[p->npasses - 1];
    return last->on_host && p->npasses > 1 ? last->elements * gr_dtype_size(p->acc) : 0;
}

size_t gr_plan_half_offset(const gr_plan *p) { return half_bytes(p, 0); }
