/*
 * cpu_lanes.h -- what the cpu backend's two loop files share (cpu_exact.c, cpu_trees.c): the kinds of
 * loop, the lanes and 16-byte vectors they fold in, and each file's row of loops per dtype.
 *
 * Private to those files and cpu_kernels.c, which picks a loop from the rows.
 */
#ifndef GR_CPU_LANES_H
#define GR_CPU_LANES_H

#include "ops/cpu_kernels.h"

#include <string.h>

/* What a loop computes, read from the op's descriptor (cpu_kernels.c): a row has one loop per kind. */
enum gr_cpu_kind {
    GR_K_SUM, GR_K_NANSUM, GR_K_SUMSQ, GR_K_PROD, GR_K_COUNT, GR_K_MIN, GR_K_MAX, GR_K_NANMIN, GR_K_NANMAX,
    GR_K_AND, GR_K_OR, GR_K_ARGMIN, GR_K_ARGMAX, GR_K_MINMAX, GR_K_WELFORD, GR_K_NORM, GR_K_COUNTED,
    GR_K_MOMENTS, GR_K_SQUARES, GR_K_ABSMAX, GR_K_ASUM, GR_K_KINDS
};

/* The exact loops of dtype t (integer sums, products and sums of squares, counts, extremes, and/or,
 * exact moments, absmax, integer asum); NULL entries where the kind takes a float accumulator. */
const gr_cpu_loop *gr_cpu_exact_row(gr_dtype t);
/* The order-dependent loops of dtype t into a float accumulator acc (float sums, products, var/std,
 * norm, nanmean, asum), on the tree of gr_cpu_split; NULL for a pair that has none. */
const gr_cpu_loop *gr_cpu_tree_row(gr_dtype t, gr_dtype acc);
/* The leaves of the tree a loop of that kind follows. */
#define GR_PW_BLOCK 128             /* numpy's PW_BLOCKSIZE */
#define GR_WELFORD_LEAF 1024        /* var/std: blocks folded in two passes while in L1 */
#define GR_PROD_LEAF 16384          /* products: long lanes, one underflow each */

/* Independent running values per loop: they break the dependency chain of one accumulator and let the
 * compiler vectorise; combined in lane order, so the order is fixed by n alone. */
#define LANES 8

#define LOOP_ARGS const void *xp, size_t n, uint64_t first, void *acc, const gr_cpu_kernel *kn
#define UNUSED_ARGS ((void)first, (void)kn)

#define ADD(a, b) ((a) + (b))
#define MUL(a, b) ((a) * (b))
/* b < a: a NaN b never replaces a (the compiler makes pminub and the like of these on integers) */
#define LESSER(a, b) ((b) < (a) ? (b) : (a))
#define GREATER(a, b) ((b) > (a) ? (b) : (a))
/* |v| of a float as host_ops.c's GR_MAP_ABS and the device's magnitude() take it: |-0.0| = +0.0, a NaN
 * stays as it is */
#define FMAG(v) ((v) <= 0 ? 0 - (v) : (v))

/* OUT = the fold by OP of the W values MAP (of the element v, of type T, at x[k]) over x[0 .. N), in
 * LANES running values combined in lane order at the end. */
#define FOLD(T, W, INIT, OP, MAP, N, OUT)                                                        \
    do {                                                                                         \
        W l_[LANES];                                                                             \
        for (int j_ = 0; j_ < LANES; j_++) l_[j_] = (INIT);                                      \
        size_t k_ = 0;                                                                           \
        for (; k_ + LANES <= (N); k_ += LANES)                                                   \
            for (int j_ = 0; j_ < LANES; j_++) {                                                 \
                T v = x[k_ + j_];                                                                \
                l_[j_] = OP(l_[j_], (W)(MAP));                                                   \
            }                                                                                    \
        for (; k_ < (N); k_++) {                                                                 \
            T v = x[k_];                                                                         \
            l_[0] = OP(l_[0], (W)(MAP));                                                         \
        }                                                                                        \
        W a_ = l_[0];                                                                            \
        for (int j_ = 1; j_ < LANES; j_++) a_ = OP(a_, l_[j_]);                                  \
        OUT = a_;                                                                                \
    } while (0)

/* 16-byte vectors (GCC and Clang's vector extensions: SSE2 on x86-64, NEON on arm64) for the loops
 * whose float compares and selects the compiler leaves scalar: a compare gives a mask of the same width,
 * all ones where it holds. */
typedef float gr_vf32 __attribute__((vector_size(16)));
typedef int32_t gr_vm32 __attribute__((vector_size(16)));
typedef double gr_vf64 __attribute__((vector_size(16)));
typedef int64_t gr_vm64 __attribute__((vector_size(16)));
/* a where the mask m is set, else b; a where m is set, else 0 */
#define VSEL(VT, MT, m, a, b) ((VT)(((MT)(a) & (m)) | ((MT)(b) & ~(m))))
#define VAND(VT, MT, a, m) ((VT)((MT)(a) & (m)))
/* LANES values of F held as LANES / VL vectors, read out in lane order into R */
#define LANES_OF(VL, V, R)                                                                       \
    for (int j_ = 0; j_ < LANES; j_++) (R)[j_] = (V)[j_ / (VL)][j_ % (VL)]

static inline void gr_put_u64(void *p, uint64_t v) { memcpy(p, &v, 8); }

#endif
