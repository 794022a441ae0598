/*
 * pool.h -- scratch for reductions in flight (pool.c), and the context's auxiliary streams.
 */
#ifndef GR_POOL_H
#define GR_POOL_H

#include "core/handles.h"

gr_status gr_slot_acquire(gr_context *ctx, size_t dev_bytes, size_t host_bytes, gr_slot **out);
void gr_slot_release(gr_context *ctx, gr_slot *s);
/* The slot's completion flag: a word of its pinned result area, after the value (the single-pass
 * kernels raise it through the counter's words [2..3], which point here). */
static inline unsigned *gr_slot_flag(gr_slot *s) { return (unsigned *)((char *)s->result + 32); }
/* 8 bytes of the pinned result area after the flag: a user operator's post value (core/image.c). */
static inline void *gr_slot_post_out(gr_slot *s) { return (char *)s->result + 40; }
/* The reply words (cuda/device/epilogue.cuh): up to GR_REPLY_WORDS 8-byte words at result + 64, each 4 bytes
 * of the result under a high half that counts the words; the counter's words [4..5] point here. */
#define GR_REPLY_WORDS 8
#define GR_SLOT_PINNED_BYTES 128
static inline volatile unsigned long long *gr_slot_reply(gr_slot *s) {
    return (volatile unsigned long long *)((char *)s->result + 64);
}
/* Lowers the flag and the reply before a launch that raises one of them. */
static inline void gr_slot_lower(gr_slot *s) {
    *(volatile unsigned *)gr_slot_flag(s) = 0;
    for (int k = 0; k < GR_REPLY_WORDS; k++) gr_slot_reply(s)[k] = 0;
}
void gr_pool_destroy(gr_context *ctx);
/* Frees every slot that is not busy (gr_pool_trim, after the graphs have given theirs back). */
void gr_pool_release_idle(gr_context *ctx);
/* The context's auxiliary stream i (0 <= i < GR_MAX_AUX_STREAMS), created on first use. */
gr_status gr_aux_stream(gr_context *ctx, int i, void **out);

#endif
