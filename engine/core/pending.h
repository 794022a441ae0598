/*
 * pending.h -- the record of asynchronous work (gr_pending): a whole-buffer reduction (core/reduce.c), a
 * reduction along axes (core/axes.c) or one op's share of a fused pass (core/reduce_ops.c), which share
 * its ready, wait and free.
 */
#ifndef GR_PENDING_H
#define GR_PENDING_H

#include "core/plan.h"

struct gr_pending {
    gr_context *ctx;        /* the context of the buffer's device (devices.h) */
    gr_buffer *b;           /* a handle of our own on the buffer's memory */
    gr_buffer *more[GR_MAX_INPUTS - 1];     /* the other inputs (gr.dot's second, an operator's), the same;
                                             * NULL past the last */
    gr_slot *slot;          /* a whole buffer's run: its scratch and its `done` event */
    gr_run run;
    int finished;
    gr_status status;
    gr_result value;
    char err[512];          /* the failure's message, kept for repeated waits */
    /* along axes (else NULL): how it settles (axes.c's, through this pointer so that reduce.c calls
     * nothing there), the event after the queued kernels, and what they use until it has passed */
    void (*settle)(gr_context *ctx, gr_pending *p);
    void *done;
    gr_slot *held[2];
    gr_buffer *temps[2];    /* a regrouped view and its compact copy; gr.dot's two inputs as read */
    const char *what;       /* the work, for a failure's message ("axis reduction") */
    /* one op's share of a fused pass of several (core/reduce_ops.c; else NULL): the pass, whose tuple
     * holds every share's result, and the op's place in the ops asked; settle and done are the share's */
    struct gr_ops_pass *pass;
    int pass_op;
};

/* A pending for such work (below), not yet queued (finished until it is); NULL, failed, when out of memory. */
gr_pending *gr_pending_new_queued(gr_context *ctx, const char *what);
/* Puts such a pending in flight once its kernels are queued on ctx->stream: one sequence for every
 * caller (axes.c, dot.c, ops_rows.c), so that their order of steps cannot drift apart. A handle on the
 * whole of `whole` kept (NULL: the caller's temps hold its inputs), an event recorded after the kernels
 * (`end` names a failure to record it), the storage of read[0..nread) (inputs, then results; NULL
 * skipped) marked as read by the work. `launched`: the launch's own failure, reported already (else
 * GR_OK), which skips those steps. On a failure the stream has been waited for; the caller gives p back. */
gr_status gr_pending_start_queued(gr_context *ctx, gr_pending *p, gr_status launched, gr_buffer *whole,
                                  gr_buffer *const *read, int nread, const char *end);
/* The settle of queued work that holds slots and copies (along axes; gr.dot per segment or row): waits
 * for p->done, then gives back p->held and p->temps. */
void gr_pending_settle_queued(gr_context *ctx, gr_pending *p);

#endif
