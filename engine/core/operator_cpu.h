/*
 * operator_cpu.h -- a user operator's functions run by the host (operator_cpu.c): what the reduction
 * paths call where gr_options.cpu is set -- whole buffers (reduce.c), segments and reduce_many
 * (segments.c), sharded buffers (sharded.c, sharded_segments.c). gr.h says the functions' contract.
 *
 * Each entry point holds its own handles on every buffer it reads or writes and a reference on the
 * operator for the call's duration: the functions may free the caller's.
 */
#ifndef GR_OPERATOR_CPU_H
#define GR_OPERATOR_CPU_H

#include "core/handles.h"

/* Whether a reduction of b with o runs the operator's functions: o->cpu is set, and b is in memory
 * the host reads or o has no kernels (o->user) to run on the device. */
int gr_operator_cpu_takes(const gr_context *ctx, const gr_options *o, const gr_buffer *b);

/* The options the functions take: GR_EINVAL naming the first other one (variant, block, grid, finish,
 * threshold, acc; determinism gpu_to_gpu) or the function the operator needs and o->cpu lacks. */
gr_status gr_operator_cpu_options(gr_context *ctx, const gr_options *o);

/* The elements of parts[0..count) in order, as one array (a buffer is one part; a sharded buffer's
 * shards are its parts), reduced into *out: post's value, or the accumulator. */
gr_status gr_operator_cpu_reduce(gr_context *ctx, const gr_options *o, gr_buffer *const *parts, size_t count,
                                 gr_result *out);

/* The segments of that array -- of `size` elements, or with size 0 between the k + 1 boundaries at
 * bounds (host memory, checked) -- into element s of out (checked by the caller: gr_segment_outs_check),
 * in the dtype gr_operator_segment_dtype says. */
gr_status gr_operator_cpu_segments(gr_context *ctx, const gr_options *o, gr_buffer *const *parts, size_t count,
                                   size_t size, const int64_t *bounds, size_t k, gr_buffer *out);

/* An operator of several inputs: bufs[0..count), one buffer each (of one length, checked by the caller),
 * their elements side by side through the functions' map_inputs -- whole, or per segment as above. */
gr_status gr_operator_cpu_inputs_reduce(gr_context *ctx, const gr_options *o, gr_buffer *const *bufs, int count,
                                        gr_result *out);
gr_status gr_operator_cpu_inputs_segments(gr_context *ctx, const gr_options *o, gr_buffer *const *bufs, int count,
                                          size_t size, const int64_t *bounds, size_t k, gr_buffer *out);

/* results[i]: bufs[i] reduced as gr_operator_cpu_reduce does, for reduce_many. */
gr_status gr_operator_cpu_many(gr_context *ctx, const gr_options *o, gr_buffer *const *bufs, size_t count,
                               gr_result *results);

#endif
