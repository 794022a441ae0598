/*
 * plan.h -- from options to passes (plan.c), and running them (exec.c).
 */
#ifndef GR_PLAN_H
#define GR_PLAN_H

#include "core/handles.h"

/* The first option that names a way of reducing -- "variant", "block", "grid", "finish", "threshold" --
 * or NULL: what the paths that choose their own (segments, reduce_many's one launch, gpu_to_gpu) refuse
 * or step aside for. */
const char *gr_options_way(const gr_options *o);

/* Queues the device passes of a plan over the n elements at `in` on `stream`; the CPU part runs in
 * gr_exec_finish. The end is marked with the slot's event, or, with `flag` set (synchronous calls),
 * with a flag write when the driver offers one. On failure nothing is left queued that still uses
 * the slot once the stream has been waited for. */
gr_status gr_exec_start(gr_context *ctx, const void *in, const gr_plan *plan, gr_slot *slot, void *stream,
                        int flag);
/* Waits for the device part and produces the result. */
gr_status gr_exec_finish(gr_context *ctx, const gr_plan *plan, gr_slot *slot, gr_result *out);
/* Queues the single-finish pass of a plan over `in` (whose first element has the index `first`), its
 * value written to `final_out` (device or pinned memory), with the plan's scratch at `scratch`
 * (plan->dev_bytes of it) and the slot's counter. For streamed chunks, whose values stay on the device. */
gr_status gr_exec_single_to(gr_context *ctx, const void *in, uint64_t first, const gr_plan *plan, void *scratch,
                            unsigned *counter, void *final_out, void *stream);

#endif
