/*
 * exact_pass.h -- the kernel of opts.determinism = "gpu_to_gpu" (exact_pass.c) behind the planner's
 * interface (plan.h): the exact sums of exact_acc.h, on the device (cuda/kernels/exact.cu) or on the
 * host (ops/exact.c), rounded once by the same code -- the same bits whatever the path, the launch shape,
 * the GPU or the backend.
 */
#ifndef GR_EXACT_PASS_H
#define GR_EXACT_PASS_H

#include "core/plan.h"
#include "ops/exact.h"

/* The most elements a block folds before its shared words are carried: a word takes 2^31 additions of a
 * 32-bit digit before it could overflow (longer inputs take several launches, long segments rounds). */
#define GR_EXACT_MOST_PER_BLOCK ((size_t)1 << 30)
/* The exact kernel's default block (cuda/kernels/exact.cu keeps 8 per SM), and the most blocks a launch
 * takes (the global words then cannot overflow). */
#define GR_EXACT_BLOCK 512
#define GR_EXACT_MOST_BLOCKS ((size_t)1 << 30)

/* cuda/kernels/exact.cu's launcher; absent (NULL) in a build without kernels. */
extern const gr_exact_kernel gr_exact_gpu __attribute__((weak));

/* Its accumulator is a gr_xsum (2.3 KB): one per pass, which every block adds into. No items form. */
extern const gr_pass_kernel gr_exact_pass;

#endif
