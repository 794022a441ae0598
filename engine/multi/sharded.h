/*
 * sharded.h -- reductions of sharded buffers: pieces of shards reduced on their devices and combined in
 * order (sharded.c), which the whole-buffer reduction (sharded.c) and the segments (sharded_segments.c)
 * share.
 */
#ifndef GR_SHARDED_H
#define GR_SHARDED_H

#include "core/handles.h"

/* Elements [at, at + n) of one shard; `first` is the index its first element has in the reduction (the
 * whole buffer's, or the segment's): argmin/argmax and an operator's i count from it. With `with` set
 * (gr.dot of two sharded buffers) the piece is the sum of the products of those elements and the same
 * span of `with`, a buffer of the shard's dtype on its device. */
typedef struct gr_shard_piece {
    gr_buffer *shard;
    size_t at, n;
    uint64_t first;
    gr_buffer *with;
} gr_shard_piece;

/* What every reduction of shards refuses, naming the option: no shard or more than GR_MAX_SLOTS, mixed
 * dtypes, opts.stream, finishes other than auto and single, an unknown op. */
gr_status gr_shards_check(gr_context *ctx, gr_buffer *const *shards, size_t count, const gr_options *o);
/* Whether the operator's functions (o->cpu) reduce the shards: the host reads them (the cpu backend, a
 * shard in host memory), or o has no kernels (o->user) for the devices. */
int gr_shards_by_cpu(const gr_context *ctx, gr_buffer *const *shards, size_t count, const gr_options *o);

/* The result buffers out[0..nres) of k results of dtypes want[] checked as a plain buffer's against every
 * shard (gr_segment_outs_check; offsets: a segmented call's, or NULL), on the first shard's device (else
 * GR_EINVAL naming "out" or "out2": "a sharded buffer's <what> go to its first shard's device"), and
 * waited for where queued work still reads them. */
gr_status gr_shards_outs_check(gr_context *ctx, gr_buffer *const *shards, size_t count, const gr_buffer *offsets,
                               gr_buffer *out[2], int nres, const gr_dtype want[2], size_t k, const char *what);
/* gr_dot_shards' checks of a pair of sharded buffers: a's as gr_shards_check's, b's shards compact, of
 * a's lengths, and each pair as gr_dot_check_pair's (errors naming "b" where the splits differ). */
gr_status gr_dot_shards_check(gr_context *ctx, gr_buffer *const *a, gr_buffer *const *b, size_t count,
                              const gr_options *o);

/* The pieces (at least one with elements; empty ones are skipped) reduced at once, each on its shard's
 * device into its accumulator, then combined in piece order into the result of `total` elements: the
 * CPU finish for the built-in ops, the exact sums merged and rounded once for gpu_to_gpu, a user
 * operator's own combine on the first piece's device (then its post). On the cpu backend and for host
 * shards the host reduces each piece (not a user operator's: the binding runs its cpu functions). */
gr_status gr_shard_pieces_reduce(gr_context *ctx, const gr_shard_piece *pieces, size_t count, const gr_options *o,
                                 size_t total, gr_result *out);

#endif
