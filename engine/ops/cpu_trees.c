/*
 * cpu_trees.c -- the cpu backend's order-dependent loops: float sums (and means), nansum, asum, sumsq,
 * products, var/std, norm and nanmean, whose bits depend on the order of the operations.
 *
 * They all follow one tree fixed by n alone, numpy's pairwise summation (gr_cpu_split): a range of at
 * most 128 elements is a leaf, summed in 8 lanes (lane j takes elements j, j + 8, ...; the lanes meet as
 * ((0+1)+(2+3))+((4+5)+(6+7)), the tail of fewer than 8 is added after); a larger range is halved, the
 * first half rounded down to a multiple of 8. An element's error then grows with log2(n / 128), not
 * with n -- the error bound of numpy's np.sum is this tree's -- and the backend's threads take subtrees
 * without changing a bit: a result does not depend on the number of threads. Products take the same
 * tree with leaves of 16384 (below).
 *
 * The leaves work in F, the accumulator's float type. Data of another type (float32 with acc =
 * "float64", 64-bit integers for var/std/norm, integers for nanmean) is converted a leaf at a time, each
 * element once and as the host functions convert it.
 *
 * var/std: leaves of up to 1024 elements, in two passes while they sit in L1: the leaf's mean from its
 * pairwise sum, then the pairwise sum of the squared deviations from that mean (equal elements: exactly
 * 0); the leaves merge up the tree by Chan's formula, op_math.h's merge, which host_ops.c and the kernels
 * use too. A leaf whose sum is not finite (an infinity, a NaN, an overflow) folds one element at a time,
 * as the host functions do, so that every edge keeps their result.
 * norm: Blue's three sums of squares (op_math.h's thresholds and scales), each pairwise; a leaf where every
 * |x| is 0, NaN or in the middle range -- nearly always -- sums only the middle one.
 */
#include "ops/cpu_lanes.h"
#include "ops/op_math.h"

#include <math.h>

#define PW_BLOCK GR_PW_BLOCK
#define TREE8(r) ((((r)[0] + (r)[1]) + ((r)[2] + (r)[3])) + (((r)[4] + (r)[5]) + ((r)[6] + (r)[7])))
#define FABS(x) _Generic((x), float: fabsf, double: fabs)(x)

size_t gr_cpu_split(size_t n) {
    size_t h = n / 2;
    return h - h % LANES;
}

/* ---- leaves: at most PW_BLOCK elements of F ------------------------------------------------------ */

/* The sum of MAP (of the element v and the constant c) in numpy's 8 lanes. */
#define DEFINE_LEAF(NAME, F, MAP)                                                                \
    static F NAME(const F *x, size_t n, F c) {                                                   \
        F r_[LANES] = {0};                                                                       \
        size_t k_ = 0;                                                                           \
        for (; k_ + LANES <= n; k_ += LANES)                                                     \
            for (int j_ = 0; j_ < LANES; j_++) {                                                 \
                F v = x[k_ + j_];                                                                \
                r_[j_] += (MAP);                                                                 \
            }                                                                                    \
        F s_ = TREE8(r_);                                                                        \
        for (; k_ < n; k_++) {                                                                   \
            F v = x[k_];                                                                         \
            s_ += (MAP);                                                                         \
        }                                                                                        \
        (void)c;                                                                                 \
        return s_;                                                                               \
    }

/* nanmean: the sum of the numbers (the same bits as nansum's) and, into *count, how many there are (the
 * NaNs counted in F lanes: exact, at most 16 per lane). */
#define DEFINE_COUNTED_LEAF(N, F, VT, MT, VL)                                                    \
    static F counted_leaf_##N(const F *x, size_t n, uint64_t *count) {                           \
        VT r_[LANES / VL] = {0}, q_[LANES / VL] = {0};                                           \
        size_t k_ = 0;                                                                           \
        for (; k_ + LANES <= n; k_ += LANES)                                                     \
            for (int i_ = 0; i_ < LANES / VL; i_++) {                                            \
                VT v_;                                                                           \
                memcpy(&v_, x + k_ + i_ * VL, sizeof v_);                                        \
                MT num_ = v_ == v_;                                                              \
                r_[i_] += VAND(VT, MT, v_, num_);                                                \
                q_[i_] += VAND(VT, MT, (VT){0} + 1, ~num_);                                      \
            }                                                                                    \
        F r[LANES], q[LANES];                                                                    \
        LANES_OF(VL, r_, r);                                                                     \
        LANES_OF(VL, q_, q);                                                                     \
        F s_ = TREE8(r), nans_ = TREE8(q);                                                       \
        for (; k_ < n; k_++) {                                                                   \
            s_ += x[k_] == x[k_] ? x[k_] : 0;                                                    \
            nans_ += x[k_] == x[k_] ? 0 : 1;                                                     \
        }                                                                                        \
        *count += n - (uint64_t)nans_;                                                           \
        return s_;                                                                               \
    }

/* norm: each |x| lands, scaled by ssml (below tsml) or by sbig (above tbig) or as it is, in one of three
 * sums; a NaN in the middle one. The other two get 0 * 0 (the element itself, scaled, could overflow or
 * underflow there). c = {tsml, tbig, ssml, sbig}. */
#define NORM_STEP(F, X, SM, MD, BG)                                                              \
    do {                                                                                         \
        F ax_ = FABS(X);                                                                         \
        F s_ = (ax_ < tsml ? ax_ : 0) * ssml, b_ = (ax_ > tbig ? ax_ : 0) * sbig;                \
        F m_ = (ax_ < tsml) | (ax_ > tbig) ? 0 : ax_;                                            \
        SM += s_ * s_;                                                                           \
        BG += b_ * b_;                                                                           \
        MD += m_ * m_;                                                                           \
    } while (0)

/* Two passes through a leaf, from one text: the three sums (norm3), or the middle sum alone (norm_leaf),
 * checked after -- a square above tbig^2 in it, or a magnitude in (0, tsml) in the tiny sum, and the leaf
 * takes the three sums; else those two would have stayed 0 and the middle one has the same bits. */
#define DEFINE_NORM_PASS(NAME, N, F, VT, MT, VL, MAGNITUDE, three)                               \
    static void NAME(const F *x, size_t n, const F *c, F *s) {                                   \
        F tsml = c[0], tbig = c[1], ssml = c[2], sbig = c[3];                                    \
        VT sm_[LANES / VL] = {0}, md_[LANES / VL] = {0}, bg_[LANES / VL] = {0}, tn_ = {0};       \
        size_t k_ = 0;                                                                           \
        for (; k_ + LANES <= n; k_ += LANES)                                                     \
            for (int i_ = 0; i_ < LANES / VL; i_++) {                                            \
                VT v_;                                                                           \
                memcpy(&v_, x + k_ + i_ * VL, sizeof v_);                                        \
                VT ax_ = VAND(VT, MT, v_, MAGNITUDE);                                            \
                MT lo_ = ax_ < tsml;                                                             \
                if (three) {                                                                     \
                    MT hi_ = ax_ > tbig;                                                         \
                    VT a_ = VAND(VT, MT, ax_, lo_) * ssml, b_ = VAND(VT, MT, ax_, hi_) * sbig;   \
                    VT m_ = VAND(VT, MT, ax_, ~(lo_ | hi_));                                     \
                    sm_[i_] += a_ * a_;                                                          \
                    bg_[i_] += b_ * b_;                                                          \
                    md_[i_] += m_ * m_;                                                          \
                } else {                                                                         \
                    md_[i_] += ax_ * ax_;                                                        \
                    tn_ += VAND(VT, MT, ax_, lo_);                                               \
                }                                                                                \
            }                                                                                    \
        F sm[LANES], md[LANES], bg[LANES], tiny = 0;                                             \
        LANES_OF(VL, sm_, sm);                                                                   \
        LANES_OF(VL, md_, md);                                                                   \
        LANES_OF(VL, bg_, bg);                                                                   \
        for (int j_ = 0; j_ < VL; j_++) tiny += tn_[j_];                                         \
        F a_[3] = {TREE8(sm), TREE8(md), TREE8(bg)};                                             \
        for (; k_ < n; k_++) {                                                                   \
            if (three) {                                                                         \
                NORM_STEP(F, x[k_], a_[0], a_[1], a_[2]);                                        \
            } else {                                                                             \
                F ax_ = FABS(x[k_]);                                                             \
                a_[1] += ax_ * ax_;                                                              \
                tiny += ax_ < tsml ? ax_ : 0;                                                    \
            }                                                                                    \
        }                                                                                        \
        if (!three && (!(a_[1] < tbig * tbig) || tiny != 0)) {                                   \
            norm3_##N(x, n, c, s);                                                               \
            return;                                                                              \
        }                                                                                        \
        memcpy(s, a_, sizeof a_);                                                                \
    }
#define DEFINE_NORM_LEAF(N, F, VT, MT, VL, MAGNITUDE)                                            \
    DEFINE_NORM_PASS(norm3_##N, N, F, VT, MT, VL, MAGNITUDE, 1)                                  \
    DEFINE_NORM_PASS(norm_leaf_##N, N, F, VT, MT, VL, MAGNITUDE, 0)

/* Products: leaves of GR_PROD_LEAF elements in 8 lanes, one product after another, converted as they
 * come (a float product's error grows with the number of factors however they are grouped, numpy's too;
 * long lanes go past an underflow once, where short ones would each pay the slow subnormal step). */
#define DEFINE_PROD_LOOP(N, T, F)                                                                \
    static F prod_tree_##N(const T *x, size_t n) {                                               \
        if (n > GR_PROD_LEAF) {                                                                  \
            size_t h_ = gr_cpu_split(n);                                                         \
            F a_ = prod_tree_##N(x, h_);                                                         \
            return a_ * prod_tree_##N(x + h_, n - h_);                                           \
        }                                                                                        \
        F r_[LANES] = {1, 1, 1, 1, 1, 1, 1, 1};                                                  \
        size_t k_ = 0;                                                                           \
        for (; k_ + LANES <= n; k_ += LANES)                                                     \
            for (int j_ = 0; j_ < LANES; j_++) r_[j_] *= (F)x[k_ + j_];                          \
        F s_ = ((r_[0] * r_[1]) * (r_[2] * r_[3])) * ((r_[4] * r_[5]) * (r_[6] * r_[7]));        \
        for (; k_ < n; k_++) s_ *= (F)x[k_];                                                     \
        return s_;                                                                               \
    }                                                                                            \
    static void prod_##N(LOOP_ARGS) {                                                            \
        F s_ = prod_tree_##N(xp, n);                                                             \
        UNUSED_ARGS;                                                                             \
        memcpy(acc, &s_, sizeof s_);                                                             \
    }

/* The leaves of one float type F, and the trees over F data (the pairwise sums var/std's leaves use). */
#define DEFINE_LEAVES(N, F, VT, MT, VL, MAGNITUDE)                                               \
    DEFINE_LEAF(sum_leaf_##N, F, v)                                                              \
    DEFINE_LEAF(nansum_leaf_##N, F, v == v ? v : 0)                                              \
    DEFINE_LEAF(asum_leaf_##N, F, FMAG(v))                                                       \
    DEFINE_LEAF(sumsq_leaf_##N, F, v * v)                                                        \
    DEFINE_LEAF(dev2_leaf_##N, F, (v - c) * (v - c))                                             \
    DEFINE_COUNTED_LEAF(N, F, VT, MT, VL)                                                        \
    DEFINE_NORM_LEAF(N, F, VT, MT, VL, MAGNITUDE)                                                \
    DEFINE_TREE(sum_tree_##N, F, F, same, -, sum_leaf_##N, ADD)                                  \
    DEFINE_TREE(dev2_tree_##N, F, F, same, -, dev2_leaf_##N, ADD)                                \
    static gr_welford_##N welford_leaf_##N(const F *x, size_t n) {                               \
        size_t k_ = 1;                                                                           \
        while (k_ < n && x[k_] == x[0]) k_++;                                                    \
        if (k_ == n && x[0] - x[0] == 0) {          /* equal finite elements */                  \
            gr_welford_##N w_ = {n, x[0], 0};                                                    \
            return w_;                                                                           \
        }                                                                                        \
        F s_ = sum_tree_##N(x, n, 0, NULL);                                                      \
        if (s_ - s_ == 0) {                                                                      \
            F mean_ = s_ / (F)n;                                                                 \
            gr_welford_##N w_ = {n, mean_, dev2_tree_##N(x, n, mean_, NULL)};                    \
            return w_;                                                                           \
        }                                                                                        \
        gr_welford_##N w_ = {0, 0, 0};                                                           \
        for (size_t i_ = 0; i_ < n; i_++) w_ = gr_welford_merge_##N(w_, gr_welford_load_##N(x[i_])); \
        return w_;                                                                               \
    }

/* ---- trees over T data --------------------------------------------------------------------------- */

/* A leaf's n elements of T at x as F data: x itself (KIND same), or converted by VIEW into the buffer
 * b_ that the loop's entry declares (KIND conv) and hands down the tree. */
#define BUFFER_same(F) F *b_ = NULL;
#define BUFFER_conv(F) F b_[GR_WELFORD_LEAF]; memset(b_, 0, (n < GR_WELFORD_LEAF ? n : GR_WELFORD_LEAF) * sizeof *b_);
#define DATA_same(VIEW, x, n) ((void)b_, (x))
#define DATA_conv(VIEW, x, n) VIEW(x, n, b_)
#define DEFINE_CONV(N, T, F)                                                                     \
    static inline const F *conv_##N(const T *x, size_t n, F *buf) {                              \
        for (size_t i_ = 0; i_ < n; i_++) buf[i_] = (F)x[i_];                                    \
        return buf;                                                                              \
    }

/* NAME(x, n, c): x[0 .. n) folded by OP up the tree, over LEAF of each leaf's data through VIEW. */
#define DEFINE_TREE(NAME, T, F, KIND, VIEW, LEAF, OP)                                            \
    static F NAME(const T *x, size_t n, F c, F *b_) {                                            \
        if (n > PW_BLOCK) {                                                                      \
            size_t h_ = gr_cpu_split(n);                                                         \
            F a_ = NAME(x, h_, c, b_);                                                           \
            return OP(a_, NAME(x + h_, n - h_, c, b_));                                          \
        }                                                                                        \
        return LEAF(DATA_##KIND(VIEW, x, n), n, c);                                              \
    }

/* The loops of one (T, F) pair; LF names F's leaves. nanmean: */
#define DEFINE_COUNTED_LOOP(N, T, F, KIND, VIEW, LF)                                             \
    static F counted_tree_##N(const T *x, size_t n, uint64_t *count, F *b_) {                    \
        if (n > PW_BLOCK) {                                                                      \
            size_t h_ = gr_cpu_split(n);                                                         \
            F a_ = counted_tree_##N(x, h_, count, b_);                                           \
            return a_ + counted_tree_##N(x + h_, n - h_, count, b_);                             \
        }                                                                                        \
        return counted_leaf_##LF(DATA_##KIND(VIEW, x, n), n, count);                             \
    }                                                                                            \
    static void counted_##N(LOOP_ARGS) {                                                         \
        uint64_t k_ = 0;                                                                         \
        BUFFER_##KIND(F)                                                                         \
        F s_ = counted_tree_##N(xp, n, &k_, b_);                                                 \
        UNUSED_ARGS;                                                                             \
        memset(acc, 0, 16);                                                                      \
        gr_put_u64(acc, k_);                                                                     \
        memcpy((char *)acc + 8, &s_, sizeof s_);                                                 \
    }

/* var/std and norm: */
#define DEFINE_MOMENT_LOOPS(N, T, F, KIND, VIEW, LF)                                             \
    static void norm_tree_##N(const T *x, size_t n, const F *c, F *s, F *b_) {                   \
        if (n > PW_BLOCK) {                                                                      \
            size_t h_ = gr_cpu_split(n);                                                         \
            F r_[3];                                                                             \
            norm_tree_##N(x, h_, c, s, b_);                                                      \
            norm_tree_##N(x + h_, n - h_, c, r_, b_);                                            \
            for (int i_ = 0; i_ < 3; i_++) s[i_] += r_[i_];                                      \
            return;                                                                              \
        }                                                                                        \
        norm_leaf_##LF(DATA_##KIND(VIEW, x, n), n, c, s);                                        \
    }                                                                                            \
    static gr_welford_##LF welford_tree_##N(const T *x, size_t n, F *b_) {                       \
        if (n > GR_WELFORD_LEAF) {                                                               \
            size_t h_ = gr_cpu_split(n);                                                         \
            gr_welford_##LF a_ = welford_tree_##N(x, h_, b_);                                    \
            return gr_welford_merge_##LF(a_, welford_tree_##N(x + h_, n - h_, b_));              \
        }                                                                                        \
        return welford_leaf_##LF(DATA_##KIND(VIEW, x, n), n);                                    \
    }                                                                                            \
    static void norm_##N(LOOP_ARGS) {                                                            \
        const F c_[4] = {GR_BLUE_TSML_##LF, GR_BLUE_TBIG_##LF, GR_BLUE_SSML_##LF, GR_BLUE_SBIG_##LF}; \
        F s_[3];                                                                                 \
        UNUSED_ARGS;                                                                             \
        BUFFER_##KIND(F)                                                                         \
        norm_tree_##N(xp, n, c_, s_, b_);                                                        \
        memcpy(acc, s_, sizeof s_);     /* op_math.h's gr_norm_##LF: small, medium, big */       \
    }                                                                                            \
    static void welford_##N(LOOP_ARGS) {                                                         \
        UNUSED_ARGS;                                                                             \
        BUFFER_##KIND(F)                                                                         \
        gr_welford_##LF w_ = welford_tree_##N(xp, n, b_);                                        \
        memcpy(acc, &w_, sizeof w_);                                                             \
    }

/* A loop whose accumulator is the value of TREE. */
#define DEFINE_VALUE_LOOP(NAME, F, KIND, TREE)                                                   \
    static void NAME(LOOP_ARGS) {                                                                \
        BUFFER_##KIND(F)                                                                         \
        F s_ = TREE(xp, n, 0, b_);                                                               \
        UNUSED_ARGS;                                                                             \
        memcpy(acc, &s_, sizeof s_);                                                             \
    }

/* ...and, for float data, the sums and the product. */
#define DEFINE_FLOAT_LOOPS(N, T, F, KIND, VIEW, LF)                                              \
    DEFINE_COUNTED_LOOP(N, T, F, KIND, VIEW, LF)                                                 \
    DEFINE_MOMENT_LOOPS(N, T, F, KIND, VIEW, LF)                                                 \
    DEFINE_TREE(sumt_##N, T, F, KIND, VIEW, sum_leaf_##LF, ADD)                                  \
    DEFINE_TREE(nansumt_##N, T, F, KIND, VIEW, nansum_leaf_##LF, ADD)                            \
    DEFINE_TREE(sumsqt_##N, T, F, KIND, VIEW, sumsq_leaf_##LF, ADD)                              \
    DEFINE_TREE(asumt_##N, T, F, KIND, VIEW, asum_leaf_##LF, ADD)                                \
    DEFINE_PROD_LOOP(N, T, F)                                                                    \
    DEFINE_VALUE_LOOP(sum_##N, F, KIND, sumt_##N)                                                \
    DEFINE_VALUE_LOOP(nansum_##N, F, KIND, nansumt_##N)                                          \
    DEFINE_VALUE_LOOP(sumsq_##N, F, KIND, sumsqt_##N)                                            \
    DEFINE_VALUE_LOOP(asum_##N, F, KIND, asumt_##N)                                              \
    static const gr_cpu_loop row_##N[GR_K_KINDS] = {                                             \
        [GR_K_SUM] = sum_##N, [GR_K_NANSUM] = nansum_##N, [GR_K_SUMSQ] = sumsq_##N,              \
        [GR_K_PROD] = prod_##N, [GR_K_WELFORD] = welford_##N, [GR_K_NORM] = norm_##N,            \
        [GR_K_COUNTED] = counted_##N, [GR_K_ASUM] = asum_##N,                                    \
    };

/* ---- the instances ------------------------------------------------------------------------------- */

DEFINE_LEAVES(f32, float, gr_vf32, gr_vm32, 4, (gr_vm32){0} + INT32_MAX)
DEFINE_LEAVES(f64, double, gr_vf64, gr_vm64, 2, (gr_vm64){0} + INT64_MAX)

DEFINE_FLOAT_LOOPS(f32, float, float, same, -, f32)
DEFINE_FLOAT_LOOPS(f64, double, double, same, -, f64)
DEFINE_CONV(f32w, float, double)                /* float32 data, acc = "float64" */
DEFINE_FLOAT_LOOPS(f32w, float, double, conv, conv_f32w, f64)

/* Integers: nanmean (in float64) for every width; var/std/norm of 64-bit ones (narrower ones keep
 * exact integer sums: cpu_exact.c). Up to 32 bits, a leaf's sum in float64 lanes is exact (below 2^39):
 * it is the leaf's integer sum, converted once. */
#define DEFINE_EXACT_LEAF_COUNTED(N, T, W)                                                       \
    static double counted_tree_##N(const T *x, size_t n, uint64_t *count) {                      \
        if (n > PW_BLOCK) {                                                                      \
            size_t h_ = gr_cpu_split(n);                                                         \
            double a_ = counted_tree_##N(x, h_, count);                                          \
            return a_ + counted_tree_##N(x + h_, n - h_, count);                                 \
        }                                                                                        \
        W s_;                                                                                    \
        FOLD(T, W, 0, ADD, v, n, s_);                                                            \
        *count += n;                                                                             \
        return (double)s_;                                                                       \
    }                                                                                            \
    static void counted_##N(LOOP_ARGS) {                                                         \
        uint64_t k_ = 0;                                                                         \
        double s_ = counted_tree_##N(xp, n, &k_);                                                \
        UNUSED_ARGS;                                                                             \
        memset(acc, 0, 16);                                                                      \
        gr_put_u64(acc, k_);                                                                     \
        memcpy((char *)acc + 8, &s_, sizeof s_);                                                 \
    }
DEFINE_EXACT_LEAF_COUNTED(i8, int8_t, int32_t)
DEFINE_EXACT_LEAF_COUNTED(u8, uint8_t, int32_t)
DEFINE_EXACT_LEAF_COUNTED(i16, int16_t, int32_t)
DEFINE_EXACT_LEAF_COUNTED(u16, uint16_t, int32_t)
DEFINE_EXACT_LEAF_COUNTED(i32, int32_t, int64_t)
DEFINE_EXACT_LEAF_COUNTED(u32, uint32_t, int64_t)

/* 64-bit integers to double, rounded once as a cast does, two at a time: the high and low halves are
 * placed in the significands of 2^84 and 2^52, the biases taken off the high one (exact), and the two
 * added (the one rounding). A signed high half is biased by 2^31 first. */
typedef uint64_t vu64 __attribute__((vector_size(16)));
#define DEFINE_CONV64(N, T, HIGH_BIAS, OFFSET)                                                   \
    static inline const double *conv_##N(const T *x, size_t n, double *buf) {                    \
        size_t i_ = 0;                                                                           \
        for (; i_ + 2 <= n; i_ += 2) {                                                           \
            vu64 v_;                                                                             \
            memcpy(&v_, x + i_, sizeof v_);                                                      \
            vu64 lo_ = (v_ & 0xffffffffu) | 0x4330000000000000u;                                 \
            vu64 hi_ = ((v_ >> 32) ^ (HIGH_BIAS)) | 0x4530000000000000u;                         \
            gr_vf64 d_ = ((gr_vf64)hi_ - (OFFSET)) + (gr_vf64)lo_;                               \
            memcpy(buf + i_, &d_, sizeof d_);                                                    \
        }                                                                                        \
        for (; i_ < n; i_++) buf[i_] = (double)x[i_];                                            \
        return buf;                                                                              \
    }
DEFINE_CONV64(i64, int64_t, 0x80000000u, 0x1p84 + 0x1p63 + 0x1p52)
DEFINE_CONV64(u64, uint64_t, 0u, 0x1p84 + 0x1p52)
DEFINE_COUNTED_LOOP(i64, int64_t, double, conv, conv_i64, f64)
DEFINE_COUNTED_LOOP(u64, uint64_t, double, conv, conv_u64, f64)
DEFINE_MOMENT_LOOPS(i64, int64_t, double, conv, conv_i64, f64)
DEFINE_MOMENT_LOOPS(u64, uint64_t, double, conv, conv_u64, f64)
static const gr_cpu_loop row_i8[GR_K_KINDS] = {[GR_K_COUNTED] = counted_i8};
static const gr_cpu_loop row_u8[GR_K_KINDS] = {[GR_K_COUNTED] = counted_u8};
static const gr_cpu_loop row_i16[GR_K_KINDS] = {[GR_K_COUNTED] = counted_i16};
static const gr_cpu_loop row_u16[GR_K_KINDS] = {[GR_K_COUNTED] = counted_u16};
static const gr_cpu_loop row_i32[GR_K_KINDS] = {[GR_K_COUNTED] = counted_i32};
static const gr_cpu_loop row_u32[GR_K_KINDS] = {[GR_K_COUNTED] = counted_u32};
static const gr_cpu_loop row_i64[GR_K_KINDS] = {[GR_K_COUNTED] = counted_i64, [GR_K_WELFORD] = welford_i64,
                                                [GR_K_NORM] = norm_i64};
static const gr_cpu_loop row_u64[GR_K_KINDS] = {[GR_K_COUNTED] = counted_u64, [GR_K_WELFORD] = welford_u64,
                                                [GR_K_NORM] = norm_u64};

/* By dtype; a dtype without a row (one added later) gets the host functions (cpu_backend.c). */
static const gr_cpu_loop *const rows[GR_DTYPE_COUNT] = {
    [GR_INT8] = row_i8, [GR_UINT8] = row_u8, [GR_INT16] = row_i16, [GR_UINT16] = row_u16,
    [GR_INT32] = row_i32, [GR_UINT32] = row_u32, [GR_BOOL] = row_u8,    /* bool: bytes 0 and 1 */
    [GR_INT64] = row_i64, [GR_UINT64] = row_u64, [GR_FLOAT32] = row_f32, [GR_FLOAT64] = row_f64,
};

const gr_cpu_loop *gr_cpu_tree_row(gr_dtype t, gr_dtype acc) {
    if (t == GR_FLOAT32 && acc == GR_FLOAT64) return row_f32w;
    return (unsigned)t < GR_DTYPE_COUNT ? rows[t] : NULL;
}
