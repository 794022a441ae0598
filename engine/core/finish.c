/*
 * finish.c -- the finishing modes: what each does with the partials, and which variants can use it.
 *
 * A kernel turns n inputs into one partial per block; the finishing mode decides what happens to the
 * partials (docs/api.md):
 *   device  more passes of the same variant over the partials until one value remains;
 *   hybrid  device passes until at most `threshold` partials remain, then one copy and the CPU;
 *   host    one device pass, every partial copied back and finished on the CPU;
 *   single  one kernel: the device epilogue of the last block to finish combines the partials.
 * A variant supports the modes whose shapes include its own (registry.h), so a new variant gets its
 * modes from what its kernel does, and a new mode is a row here plus its case in the planner.
 */
#include "core/registry.h"
#include "base/error.h"

#include <stdio.h>
#include <string.h>

static const gr_finish_row finishes[GR_FINISH_COUNT] = {
    [GR_FINISH_AUTO] = {"auto", 0, GR_PASSES_ONE, 0},
    [GR_FINISH_DEVICE] = {"device", GR_SHAPE_PARTIALS, GR_PASSES_TO_ONE, 0},
    [GR_FINISH_HYBRID] = {"hybrid", GR_SHAPE_PARTIALS, GR_PASSES_TO_THRESHOLD, 0},
    [GR_FINISH_HOST] = {"host", GR_SHAPE_PARTIALS | GR_SHAPE_HOST, GR_PASSES_ONE, 0},
    [GR_FINISH_SINGLE] = {"single", GR_SHAPE_EPILOGUE | GR_SHAPE_ONE_VALUE, GR_PASSES_ONE, 1},
};

const gr_finish_row *gr_finish_row_get(gr_finish f) {
    return (unsigned)f < GR_FINISH_COUNT ? &finishes[f] : NULL;
}

const char *gr_finish_name(gr_finish f) { return (unsigned)f < GR_FINISH_COUNT ? finishes[f].name : "?"; }

int gr_finish_from_name(const char *name) {
    for (int i = 0; i < GR_FINISH_COUNT; i++)
        if (strcmp(name, finishes[i].name) == 0) return i;
    return -1;
}

static const char *finish_name_at(int i) { return finishes[i].name; }

const char *gr_finish_names(void) {
    static char buf[128];
    return gr_join_names(buf, sizeof buf, GR_FINISH_COUNT, finish_name_at);
}

unsigned gr_finishes_of(unsigned shape) {
    unsigned mask = 0;
    for (int f = 1; f < GR_FINISH_COUNT; f++)
        if (finishes[f].shapes & shape) mask |= 1u << f;
    return mask;
}

gr_status gr_check_finish(gr_context *ctx, const gr_variant *v, gr_finish f) {
    if ((unsigned)f >= GR_FINISH_COUNT)
        return gr_fail_arg(ctx, GR_EINVAL, "finish", "unknown mode (accepted: %s)", gr_finish_names());
    if (v->finishes & (1u << f)) return GR_OK;
    char list[96] = "";
    size_t used = 0;
    for (int i = 1; i < GR_FINISH_COUNT && used < sizeof list; i++)
        if (v->finishes & (1u << i))
            used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", used ? ", " : "", finishes[i].name);
    return gr_fail_arg(ctx, GR_EINVAL, "finish", "'%s' is not supported by variant '%s' (accepted: auto, %s)",
                       finishes[f].name, v->name, list);
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
