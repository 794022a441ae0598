/*
 * exec.h -- running a run (exec.c): its device passes, then the CPU finish or the value the kernel
 * wrote, whatever kernel the planner chose (plan.h).
 */
#ifndef GR_EXEC_H
#define GR_EXEC_H

#include "core/plan.h"

/* Queues the device passes of a run over its input `in` (whose first element has the index `first`) on
 * `stream`; the CPU part runs in gr_exec_finish. The end is marked with the slot's event, or, with
 * `flag` set (synchronous calls), with a flag write when the driver offers one. On failure nothing is
 * left queued that still uses the slot once the stream has been waited for. */
gr_status gr_exec_start(gr_context *ctx, const gr_inputs *in, uint64_t first, const gr_run *run, gr_slot *slot,
                        void *stream, int flag);
/* Waits for the device part and produces the result. */
gr_status gr_exec_finish(gr_context *ctx, const gr_run *run, gr_slot *slot, gr_result *out);
/* gr_exec_start, then gr_exec_finish, in a slot of its own: a synchronous reduction. */
gr_status gr_exec(gr_context *ctx, const gr_inputs *in, const gr_run *run, void *stream, gr_result *out);
/* Queues the one pass of a run that ends on the device, over `in` (whose first element has the index
 * `first`), its value written to `final_out` (device memory; pinned too where the kernel ends in the
 * epilogue), with the run's scratch at `scratch` (its dev_bytes) and the slot's counter. For streamed
 * chunks, whose values stay on the device, and graphs. */
gr_status gr_exec_single_to(gr_context *ctx, const gr_inputs *in, uint64_t first, const gr_run *run, void *scratch,
                            unsigned *counter, void *final_out, void *stream);
/* Waits for a pass gr_exec_single_to queued on stream with slot's counter and final_out = slot->host,
 * after gr_slot_lower: spinning, as a synchronous reduction waits, until the last block replies (a value
 * of at most 32 bytes) or raises the flag after its fenced store (a wider one). *value is then where the
 * value lies: the slot's result area for a reply, slot->host for the flag. */
gr_status gr_exec_wait_single(gr_context *ctx, gr_slot *slot, void *stream, const void **value);
/* The result of n elements from `count` accumulators of the run's kernel at slot->dev (then 256 spare
 * bytes, and slot->host of their size), combined in order on ctx's stream and waited for: by the host,
 * or by one block of the kernel's own where the host cannot (run->device_combine). `what` names the
 * reduction in a failure's message. */
gr_status gr_exec_combine(gr_context *ctx, const gr_run *run, gr_slot *slot, size_t count, size_t n, const char *what,
                          gr_result *out);

#endif
