/*
 * cpu.h -- the host backend (cpu_backend.c): every op on every dtype, threaded, deterministic.
 */
#ifndef GR_CPU_H
#define GR_CPU_H

#include "base/state.h"

/* Reduces n elements of t at p into one accumulator (written at acc_out, gr_op_acc_size bytes) with the
 * same semantics as the kernels, threaded, in an order fixed by n alone (the same bits whatever the
 * number of threads; float sums pairwise, as numpy sums); the element at p has the index `first`
 * (argmin, argmax). pairwise = 1 is the cpu_pairwise variant: the textbook's recursive interleaved
 * pairs, on this thread. */
gr_status gr_cpu_reduce(gr_context *ctx, const void *p, size_t n, uint64_t first, gr_dtype t, gr_op op,
                        gr_dtype acc, int pairwise, void *acc_out);
/* Combines `count` accumulators of op (the CPU finish of every mode that has one; gr_op_acc_size bytes
 * each) into the result of a reduction of n elements of in_dtype. */
gr_status gr_cpu_finish(gr_context *ctx, const void *partials, size_t count, gr_dtype acc, gr_op op,
                        gr_dtype in_dtype, size_t n, int ddof, gr_result *out);
void gr_cpu_fill(void *p, size_t n, gr_dtype t, const void *elem);
/* element i of p gets the value of index first + i (a shard of a larger buffer) */
void gr_cpu_iota(void *p, size_t n, gr_dtype t, uint64_t first, gr_scalar start, gr_scalar step);
void gr_cpu_random(void *p, size_t n, gr_dtype t, uint64_t first, uint64_t seed, gr_scalar lo, gr_scalar hi);
int gr_cpu_default_threads(void);

#endif
