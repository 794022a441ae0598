/*
 * cpu_pairwise.h -- the cpu_pairwise variant's reduction (cpu_pairwise.c): the textbook's recursive
 * interleaved pairs on the host, one thread.
 */
#ifndef GR_CPU_PAIRWISE_H
#define GR_CPU_PAIRWISE_H

#include "ops/ops.h"

/* gr_cpu_reduce's contract (cpu.h), in the recursive interleaved-pair order. */
gr_status gr_cpu_pairwise(gr_context *ctx, const void *p, size_t n, uint64_t first, gr_dtype t, const gr_op_desc *op,
                          gr_dtype acc, void *acc_out);

#endif
