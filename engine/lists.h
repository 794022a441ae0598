/*
 * lists.h -- the axes of the engine written once, as X-macros: the dtypes and the built-in ops.
 *
 * Included by gr.h (which makes the enums), by the engine's tables, and by the kernels' headers
 * (cuda/device/ops.cuh, cuda/host/launch.cuh): it includes nothing, so NVRTC can compile it too.
 */
#ifndef GR_LISTS_H
#define GR_LISTS_H

/* The dtypes, written once, with every fact the engine keeps per dtype:
 *   X(ENUM, name, C type, bytes, is_float, is_signed, kind, lowest, highest, float_acc, nccl)
 *   kind       the gr_scalar kind its elements read as (INT, UINT, FLOAT or BOOL: GR_SCALAR_<kind>);
 *              an element converts to and from that kind by a C cast of its C type
 *   lowest, highest  the smallest and largest values it holds (floats: the infinities), as <stdint.h>
 *              and <math.h> name them: only expanders that include those use these columns
 *   float_acc  the float dtype its float accumulations take by default (sums of floats, means of
 *              integers): a dtype of this list
 *   nccl       NCCL's ncclDataType_t for it, -1 where NCCL has none
 * The engine's tables (base/dtype.c) and the kernels' dispatch are generated from this list; a new dtype
 * is a new line here (docs/extending.md) and the build's -Wswitch-enum names each switch that must learn
 * it. An expander takes the columns it uses and `...` for the rest, so that a column can be added. */
#define GR_DTYPE_LIST(X)                                                                        \
    X(INT8, int8, int8_t, 1, 0, 1, INT, INT8_MIN, INT8_MAX, FLOAT64, 0)                         \
    X(UINT8, uint8, uint8_t, 1, 0, 0, UINT, 0, UINT8_MAX, FLOAT64, 1)                           \
    X(INT32, int32, int32_t, 4, 0, 1, INT, INT32_MIN, INT32_MAX, FLOAT64, 2)                    \
    X(UINT32, uint32, uint32_t, 4, 0, 0, UINT, 0, UINT32_MAX, FLOAT64, 3)                       \
    X(INT64, int64, int64_t, 8, 0, 1, INT, INT64_MIN, INT64_MAX, FLOAT64, 4)                    \
    X(UINT64, uint64, uint64_t, 8, 0, 0, UINT, 0, UINT64_MAX, FLOAT64, 5)                       \
    X(FLOAT32, float32, float, 4, 1, 1, FLOAT, -INFINITY, INFINITY, FLOAT32, 7)                 \
    X(FLOAT64, float64, double, 8, 1, 1, FLOAT, -INFINITY, INFINITY, FLOAT64, 8)

/* The built-in ops, written once: X(ENUM, name). What each one does -- its accumulator, identity,
 * combine and result -- is its descriptor (engine/ops/ops.c) and its device functor (cuda/device/ops.cuh). The
 * first six are the classic ones every kernel variant takes; the registry says which variants take
 * the others. */
#define GR_OP_LIST(X)                                                                                     \
    X(SUM, sum) X(PROD, prod) X(MIN, min) X(MAX, max) X(AND, and) X(OR, or)                               \
    X(COUNT, count) X(MEAN, mean) X(VAR, var) X(STD, std) X(ARGMIN, argmin) X(ARGMAX, argmax)              \
    X(MINMAX, minmax) X(SUMSQ, sumsq) X(NORM, norm) X(NANSUM, nansum) X(NANMIN, nanmin) X(NANMAX, nanmax) \
    X(NANMEAN, nanmean) X(ABSMAX, absmax) X(ASUM, asum)

/* Sets of ops, as bit masks over gr_op (a variant's row says which it takes). */
#define GR_OP_BIT(op) (1u << (op))
#define GR_OPS_CLASSIC (GR_OP_BIT(GR_SUM) | GR_OP_BIT(GR_PROD) | GR_OP_BIT(GR_MIN) | GR_OP_BIT(GR_MAX) | \
                        GR_OP_BIT(GR_AND) | GR_OP_BIT(GR_OR))
#define GR_OPS_ALL ((1u << GR_OP_COUNT) - 1u)
/* The ops whose folds are dear on 1-byte data, which the pipelined variant takes (cuda/variants/v14_pipelined.cu)
 * and auto sends there for int8 and uint8: the classic ones, count, and the extremes. */
#define GR_OPS_PIPELINED (GR_OPS_CLASSIC | GR_OP_BIT(GR_COUNT) | GR_OP_BIT(GR_ARGMIN) | GR_OP_BIT(GR_ARGMAX) | \
                          GR_OP_BIT(GR_MINMAX) | GR_OP_BIT(GR_NANMIN) | GR_OP_BIT(GR_NANMAX))

#endif
