/*
 * lists.h -- the axes of the engine written once, as X-macros: the dtypes and the built-in ops.
 *
 * Included by gr.h (which makes the enums), by the engine's tables, and by the kernels' headers
 * (cuda/device/ops.cuh, cuda/host/launch.cuh): it includes nothing, so NVRTC can compile it too.
 */
#ifndef GR_LISTS_H
#define GR_LISTS_H

/* The dtypes, written once, with every fact the engine keeps per dtype:
 *   X(ENUM, name, C type, bytes, is_float, is_signed, kind, lowest, highest, float_acc, nccl, format)
 *   C type     what an element is stored as: the value itself, or (format not C) its bit pattern
 *   kind       the gr_scalar kind its elements read as (INT, UINT, FLOAT or BOOL: GR_SCALAR_<kind>); a
 *              BOOL dtype is one byte holding 0 or 1, an unsigned integer to every kernel and fold (its
 *              values are already 0 and 1), Lua booleans in and out (base/dtype.c)
 *   lowest, highest  the smallest and largest values it holds (floats: the infinities; float8_e4m3,
 *              which has none: +-448), as <stdint.h> and <math.h> name them: only expanders that
 *              include those use these columns (min and max start from them)
 *   float_acc  the float dtype its float accumulations take by default (sums of floats, means of
 *              integers): a dtype of this list
 *   nccl       NCCL's ncclDataType_t for it, -1 where NCCL has none (ncclFloat8e4m3 = 10 and
 *              ncclFloat8e5m2 = 11 since NCCL 2.24)
 *   format     how an element converts to and from its kind: C, a C cast of its C type; or the prefix
 *              of the small float format whose bits it holds (engine/base/small_floats.h: f16, bf16,
 *              e4m3, e5m2),
 *              converted by gr_<format>_to_double and gr_<format>_from_double, never by a cast
 * The engine's tables (base/dtype.c) and the kernels' dispatch are generated from this list; a new dtype
 * is a new line here (docs/extending.md) and the build's -Wswitch-enum names each switch that must learn
 * it. An expander takes the columns it uses and `...` for the rest, so that a column can be added. */
#define GR_DTYPE_LIST(X)                                                                        \
    X(INT8, int8, int8_t, 1, 0, 1, INT, INT8_MIN, INT8_MAX, FLOAT64, 0, C)                      \
    X(UINT8, uint8, uint8_t, 1, 0, 0, UINT, 0, UINT8_MAX, FLOAT64, 1, C)                        \
    X(INT32, int32, int32_t, 4, 0, 1, INT, INT32_MIN, INT32_MAX, FLOAT64, 2, C)                 \
    X(UINT32, uint32, uint32_t, 4, 0, 0, UINT, 0, UINT32_MAX, FLOAT64, 3, C)                    \
    X(INT64, int64, int64_t, 8, 0, 1, INT, INT64_MIN, INT64_MAX, FLOAT64, 4, C)                 \
    X(UINT64, uint64, uint64_t, 8, 0, 0, UINT, 0, UINT64_MAX, FLOAT64, 5, C)                    \
    X(FLOAT32, float32, float, 4, 1, 1, FLOAT, -INFINITY, INFINITY, FLOAT32, 7, C)              \
    X(FLOAT64, float64, double, 8, 1, 1, FLOAT, -INFINITY, INFINITY, FLOAT64, 8, C)             \
    X(FLOAT16, float16, uint16_t, 2, 1, 1, FLOAT, -INFINITY, INFINITY, FLOAT32, 6, f16)         \
    X(BFLOAT16, bfloat16, uint16_t, 2, 1, 1, FLOAT, -INFINITY, INFINITY, FLOAT32, 9, bf16)      \
    X(INT16, int16, int16_t, 2, 0, 1, INT, INT16_MIN, INT16_MAX, FLOAT64, -1, C)                \
    X(UINT16, uint16, uint16_t, 2, 0, 0, UINT, 0, UINT16_MAX, FLOAT64, -1, C)                  \
    X(BOOL, bool, uint8_t, 1, 0, 0, BOOL, 0, 1, FLOAT64, -1, C)                                 \
    X(FLOAT8_E4M3, float8_e4m3, uint8_t, 1, 1, 1, FLOAT, -448.0, 448.0, FLOAT32, 10, e4m3)      \
    X(FLOAT8_E5M2, float8_e5m2, uint8_t, 1, 1, 1, FLOAT, -INFINITY, INFINITY, FLOAT32, 11, e5m2)

/* Sets of dtypes, as bit masks over gr_dtype (a variant's row says which it takes): every dtype, and the
 * dtypes whose element is a C arithmetic type -- all but the small float formats (format not C), whose
 * device element is a 1- or 2-byte struct (cuda/device/small_float.cuh) that atomics, the textbook's
 * volatile last warp and pipelined's byte path do not take. */
#define GR_DTYPE_BIT(t) (1u << (t))
#define GR_SMALL_FLOAT_C 0
#define GR_SMALL_FLOAT_f16 1
#define GR_SMALL_FLOAT_bf16 1
#define GR_SMALL_FLOAT_e4m3 1
#define GR_SMALL_FLOAT_e5m2 1
#define GR_DTYPE_SMALL_BIT_(E, name, ctype, bytes, is_float, is_signed, kind, lowest, highest, float_acc, nccl, \
                            format)                                                                            \
    | (GR_SMALL_FLOAT_##format ? GR_DTYPE_BIT(GR_##E) : 0u)
#define GR_DTYPES_SMALL_FLOAT (0u GR_DTYPE_LIST(GR_DTYPE_SMALL_BIT_))
#define GR_DTYPES_ALL ((1u << GR_DTYPE_COUNT) - 1u)
#define GR_DTYPES_ARITHMETIC (GR_DTYPES_ALL & ~GR_DTYPES_SMALL_FLOAT)
/* pipelined's: every dtype but the 2-byte small floats (its ring pays for itself on 1-byte elements,
 * whose folds stall the loads; the 2-byte floats go to warp_shuffle) */
#define GR_DTYPES_PIPELINED (GR_DTYPES_ARITHMETIC | GR_DTYPE_BIT(GR_FLOAT8_E4M3) | GR_DTYPE_BIT(GR_FLOAT8_E5M2))

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
 * and auto sends there for the 1-byte dtypes: the classic ones, count, the extremes, and absmax and asum
 * (FP8 scaling's). */
#define GR_OPS_PIPELINED (GR_OPS_CLASSIC | GR_OP_BIT(GR_COUNT) | GR_OP_BIT(GR_ARGMIN) | GR_OP_BIT(GR_ARGMAX) | \
                          GR_OP_BIT(GR_MINMAX) | GR_OP_BIT(GR_NANMIN) | GR_OP_BIT(GR_NANMAX) |                  \
                          GR_OP_BIT(GR_ABSMAX) | GR_OP_BIT(GR_ASUM))

#endif
