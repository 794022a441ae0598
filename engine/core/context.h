/*
 * devices.h -- one context, several devices (context.c).
 *
 * The context a caller makes is the root: it drives the default device. A buffer remembers the CUDA
 * ordinal of the context that made it (gr_storage.device); the first use of another device makes an
 * inner context for it -- its own stream, slots, graphs, pools and memory counts -- which the entry
 * points reach through gr_ctx_for. Failures of an inner context are written to the root (error.c).
 *
 * While only the default device has been used (root->multi is 0) these are a load and a test: the
 * one-device path neither switches devices nor asks the runtime which one is current.
 */
#ifndef GR_DEVICES_H
#define GR_DEVICES_H

#include "core/handles.h"

/* The context of device `ordinal` (0-based), made on first use; GR_EINVAL naming "device" when the
 * machine has no such device. Leaves that device current. */
gr_status gr_context_on(gr_context *ctx, int ordinal, gr_context **out);
/* The root's context of an ordinal that has one, made current. */
gr_context *gr_ctx_switch(gr_context *root, int ordinal);

/* The failure of a reduction given a stream of another device than its buffer's (GR_EINVAL, "stream"). */
gr_status gr_stream_misplaced(gr_context *ctx, const gr_stream *s);

/* GR_OK when `other` (NULL: none) is on b's device; else GR_EINVAL naming `arg`. */
gr_status gr_device_differs(gr_context *ctx, const gr_buffer *b, const gr_buffer *other, const char *arg);
static inline gr_status gr_same_device(gr_context *ctx, const gr_buffer *b, const gr_buffer *other, const char *arg) {
    return !other || other->st->device == b->st->device ? GR_OK : gr_device_differs(ctx, b, other, arg);
}

/* The context that drives b's device, made current: what every entry point taking a buffer runs on. */
static inline gr_context *gr_ctx_for(gr_context *ctx, const gr_buffer *b) {
    gr_context *root = gr_ctx_root(ctx);
    return root->multi ? gr_ctx_switch(root, b->st->device) : ctx;
}

/* ctx itself, its device made current: for entry points that take no buffer. */
static inline gr_context *gr_ctx_enter(gr_context *ctx) {
    gr_context *root = gr_ctx_root(ctx);
    return root->multi ? gr_ctx_switch(root, ctx->device) : ctx;
}

#endif
