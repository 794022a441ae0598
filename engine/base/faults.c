/*
 * faults.c -- injected failures, for testing the paths that handle real ones.
 *
 * gr_debug_fault(ctx, "launch", 3) (or GPUREDUCE_FAULT=launch:3 when the context is made) makes the
 * third kernel launch from then on fail as the CUDA runtime would report it, and every launch after it
 * until the fault is disarmed (k = 0): a retry -- the binding tries an allocation again after a full
 * collection -- meets the same failure. "alloc" and "copy" do the same for device or pinned
 * allocations and for copies. gr_debug_events counts the events of each kind, so a test can walk k
 * over every event of a call and check that each failure leaves buffers, pool and context as they were.
 */
#include "base/memory.h"
#include "base/env.h"
#include "base/error.h"

#include <string.h>

/* What each kind fails with: cudaErrorMemoryAllocation, cudaErrorLaunchOutOfResources, cudaErrorUnknown
 * (none of them sticky, like the failures they stand for). */
static const int fault_codes[GR_FAULT_KINDS] = {2, 701, 999};

/* The kinds' names are GPUREDUCE_FAULT's words, in gr_fault_kind's order. */
int gr_fault_from_name(const char *name) {
    const char *const *names = gr_env_words(GR_ENV_FAULT);
    for (int k = 0; k < GR_FAULT_KINDS; k++)
        if (strcmp(name, names[k]) == 0) return k;
    return -1;
}

gr_status gr_debug_fault(gr_context *ctx, const char *kind, long k) {
    int f = gr_fault_from_name(kind);
    if (f < 0) return gr_fail_arg(ctx, GR_EINVAL, "kind", "unknown fault '%s' (accepted: alloc, launch, copy)", kind);
    if (k < 0) return gr_fail_arg(ctx, GR_EINVAL, "k", "must be at least 0 (got %ld)", k);
    gr_base *b = gr_base_of(ctx);
    b->fault.at[f] = k ? b->fault.count[f] + (size_t)k : 0;
    return GR_OK;
}

void gr_debug_events(const gr_context *ctx, size_t counts[GR_FAULT_KINDS]) {
    for (int k = 0; k < GR_FAULT_KINDS; k++) counts[k] = gr_base_of(ctx)->fault.count[k];
}

int gr_fault_hit(gr_context *ctx, gr_fault_kind kind) {
    gr_base *b = gr_base_of(ctx);
    size_t n = ++b->fault.count[kind];
    if (b->fault.at[kind] == 0 || n < b->fault.at[kind]) return 0;
    b->fault.injected = 1;
    return fault_codes[kind];
}

/* gr_context_create has checked the value: one it does not accept never comes here. */
void gr_fault_init_from_env(gr_context *ctx) {
    gr_env_value v;
    if (gr_env_get(GR_ENV_FAULT, &v, NULL, 0) == GR_ENV_SET)
        gr_base_of(ctx)->fault.at[v.word] = v.n ? gr_base_of(ctx)->fault.count[v.word] + (size_t)v.n : 0;
}
