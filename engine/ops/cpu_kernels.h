/*
 * cpu_kernels.h -- the cpu backend's typed loops (cpu_kernels.c): one per op kind and dtype, each turning a
 * contiguous range into one accumulator in host_ops.c's layout. cpu_backend.c splits the data among
 * threads and combines the ranges' accumulators with gr_host_combine.
 */
#ifndef GR_CPU_KERNELS_H
#define GR_CPU_KERNELS_H

#include "ops/ops.h"

typedef struct gr_cpu_kernel gr_cpu_kernel;

/* The accumulator of the n elements at x (dtype k->t), whose first has the 0-based index `first`. */
typedef void (*gr_cpu_loop)(const void *x, size_t n, uint64_t first, void *acc, const gr_cpu_kernel *k);

struct gr_cpu_kernel {
    gr_cpu_loop loop;
    /* 0: the result is the same bits however the data is split (exact arithmetic, or a combine that keeps
     * the first of equals). Else the loop follows the tree of gr_cpu_split down to nodes of at most `leaf`
     * elements, and may be given only a node of that tree (the whole range or a subtree of it). */
    size_t leaf;
    const gr_op_desc *op;
    gr_dtype t, acc;
};

/* The loop of op over dtype t into an accumulator of dtype acc: 1, or 0 when there is none (the backend
 * then folds with the host functions, element by element). */
int gr_cpu_kernel_for(const gr_op_desc *op, gr_dtype t, gr_dtype acc, gr_cpu_kernel *k);

/* The tree of every order-dependent loop, fixed by n alone (numpy's pairwise summation): a node of more
 * than `leaf` elements has two children, the first of gr_cpu_split(n) elements (half, rounded down to a
 * multiple of 8), the second of the rest. */
size_t gr_cpu_split(size_t n);

#endif
