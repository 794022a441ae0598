/*
 * cpu_exact.c -- the cpu backend's exact loops: integer sums, products, sums of squares and sums of
 * absolute values (64-bit, wrapping), counts, and/or, the extremes and their indices, absmax, and the
 * exact sums behind var/std/norm of integers of up to 32 bits. Any split of the data gives the same bits, so the backend's threads split
 * it anyhow (cpu_backend.c).
 *
 * Extremes are found a block at a time: the block's lesser and greater value in lanes (NaN skipped) and
 * whether it holds a NaN; only where a block changes the answer is it searched for the first index of
 * its value. Equal values keep the first, the first NaN wins min, max, minmax, argmin and argmax, and a
 * float result of zero is the first zero's (its sign), as an element-by-element fold gives.
 */
#include "ops/cpu_lanes.h"

#include <math.h>

#define SCAN_BLOCK 2048         /* extremes: found per block, then the block searched for the first index */
#define FLAG_CHUNK 4096         /* and/or: stop after the first chunk that decides */
#define COUNT_CHUNK ((size_t)1 << 30)   /* counts and exact squares in 32-bit lanes, a chunk at a time */

/* ---- extremes ---------------------------------------------------------------------------------- */

/* What a span is asked for: the lesser value, the greater, whether a NaN is there. */
enum { SPAN_LO = 1, SPAN_HI = 2, SPAN_NAN = 4 };

/* The lesser and greater value of x[0 .. n) (NaN skipped: TOP and BOTTOM where all are NaN) and whether a
 * NaN is there, as far as `want` asks (the rest is left at TOP, BOTTOM, 0). Integers in lanes of T (the
 * compiler vectorises their min and max); floats in vectors. */
#define DEFINE_SPAN(N, T, TOP, BOTTOM)                                                           \
    static void span_##N(const T *x, size_t n, T *lo, T *hi, int *nan, int want) {               \
        T l = TOP, h = BOTTOM;                                                                   \
        if (want & SPAN_LO) FOLD(T, T, TOP, LESSER, v, n, l);                                    \
        if (want & SPAN_HI) FOLD(T, T, BOTTOM, GREATER, v, n, h);                                \
        *lo = l, *hi = h, *nan = 0;                                                              \
    }

#define DEFINE_VSPAN(N, T, VT, MT, VL)                                                           \
    static void span_##N(const T *x, size_t n, T *lo, T *hi, int *nan, int want) {               \
        VT l_[2], h_[2], q_ = {0};                                                               \
        l_[0] = l_[1] = (VT){0} + INFINITY;                                                      \
        h_[0] = h_[1] = (VT){0} - INFINITY;                                                      \
        size_t k_ = 0;                                                                           \
        for (; k_ + 2 * VL <= n; k_ += 2 * VL)                                                   \
            for (int i_ = 0; i_ < 2; i_++) {                                                     \
                VT v_;                                                                           \
                memcpy(&v_, x + k_ + i_ * VL, sizeof v_);                                        \
                if (want & SPAN_LO) l_[i_] = VSEL(VT, MT, v_ < l_[i_], v_, l_[i_]);              \
                if (want & SPAN_HI) h_[i_] = VSEL(VT, MT, v_ > h_[i_], v_, h_[i_]);              \
                if (want & SPAN_NAN) q_ += v_ - v_;    /* NaN from a NaN or an infinity on */    \
            }                                                                                    \
        T l = INFINITY, h = -INFINITY;                                                           \
        int odd = 0;                                                                             \
        for (int i_ = 0; i_ < 2; i_++)                                                           \
            for (int j_ = 0; j_ < VL; j_++) {                                                    \
                l = LESSER(l, l_[i_][j_]);                                                       \
                h = GREATER(h, h_[i_][j_]);                                                      \
            }                                                                                    \
        for (int j_ = 0; j_ < VL; j_++) odd |= q_[j_] != q_[j_];                                 \
        for (; k_ < n; k_++) {                                                                   \
            l = LESSER(l, x[k_]);                                                                \
            h = GREATER(h, x[k_]);                                                               \
            odd |= x[k_] - x[k_] != 0;                                                           \
        }                                                                                        \
        int any = 0;                                                                             \
        if (want & SPAN_NAN)                            /* a NaN, or only an infinity? */        \
            for (size_t i_ = 0; odd && i_ < n && !any; i_++) any = x[i_] != x[i_];               \
        *lo = l, *hi = h, *nan = any;                                                            \
    }

/* The first index in [b, e) of m (find) or of a NaN (find_nan), in a block known to hold it. */
#define DEFINE_FIND(N, T, IS_NAN, SIGNED_ZERO)                                                   \
    static size_t find_##N(const T *x, size_t b, size_t e, T m) {                                \
        while (b < e - 1 && x[b] != m) b++;                                                      \
        return b;                                                                                \
    }                                                                                            \
    static size_t find_nan_##N(const T *x, size_t b, size_t e) {                                 \
        while (b < e - 1 && !IS_NAN(x[b])) b++;                                                  \
        return b;                                                                                \
    }                                                                                            \
    /* m, or the first element equal to it where that may differ in bits (a zero's sign) */      \
    static T first_of_##N(const T *x, size_t b, size_t e, T m) {                                 \
        return SIGNED_ZERO && m == 0 ? x[find_##N(x, b, e, m)] : m;                              \
    }

/* argmin/argmax: {u64 index, the value}; a block is searched only when it holds a better value */
#define DEFINE_ARG(N, T, TOP, BOTTOM, ACC_MINMAX)                                                \
    static void arg_##N(const T *x, size_t n, uint64_t first, void *acc, int max) {              \
        T best = max ? BOTTOM : TOP;                                                             \
        size_t at = (size_t)-1;                                                                  \
        for (size_t b_ = 0; b_ < n; b_ += SCAN_BLOCK) {                                          \
            size_t e_ = n - b_ < SCAN_BLOCK ? n : b_ + SCAN_BLOCK;                               \
            T lo_, hi_;                                                                          \
            int nan_;                                                                            \
            span_##N(x + b_, e_ - b_, &lo_, &hi_, &nan_, (max ? SPAN_HI : SPAN_LO) | SPAN_NAN);  \
            if (nan_) {                                                                          \
                at = find_nan_##N(x, b_, e_);                                                    \
                break;                                                                           \
            }                                                                                    \
            T m_ = max ? hi_ : lo_;                                                              \
            if (at == (size_t)-1 || (max ? m_ > best : m_ < best))                               \
                at = find_##N(x, b_, e_, m_), best = m_;                                         \
        }                                                                                        \
        uint64_t i_ = first + at;                                                                \
        memset(acc, 0, 16);                                                                      \
        memcpy(acc, &i_, 8);                                                                     \
        memcpy((char *)acc + 8, &x[at], sizeof(T));                                              \
    }                                                                                            \
    static void argmin_##N(LOOP_ARGS) { (void)kn; arg_##N(xp, n, first, acc, 0); }               \
    static void argmax_##N(LOOP_ARGS) { (void)kn; arg_##N(xp, n, first, acc, 1); }               \
    /* minmax: {lo, hi} at 0 and at the element size, 4 bytes at least */                        \
    static void minmax_##N(LOOP_ARGS) {                                                          \
        const T *x = xp;                                                                         \
        T blo = TOP, bhi = BOTTOM;                                                               \
        UNUSED_ARGS;                                                                             \
        for (size_t b_ = 0; b_ < n; b_ += SCAN_BLOCK) {                                          \
            size_t e_ = n - b_ < SCAN_BLOCK ? n : b_ + SCAN_BLOCK;                               \
            T lo_, hi_;                                                                          \
            int nan_;                                                                            \
            span_##N(x + b_, e_ - b_, &lo_, &hi_, &nan_, SPAN_LO | SPAN_HI | SPAN_NAN);          \
            if (nan_) {                                                                          \
                blo = bhi = x[find_nan_##N(x, b_, e_)];                                          \
                break;                                                                           \
            }                                                                                    \
            if (lo_ < blo) blo = first_of_##N(x, b_, e_, lo_);                                   \
            if (hi_ > bhi) bhi = first_of_##N(x, b_, e_, hi_);                                   \
        }                                                                                        \
        memset(acc, 0, ACC_MINMAX);                                                              \
        memcpy(acc, &blo, sizeof blo);                                                           \
        memcpy((char *)acc + sizeof(T), &bhi, sizeof bhi);                                       \
    }

/* Float min/max (NaN wins: the first NaN) and nanmin/nanmax (NaN skipped). */
#define DEFINE_FLOAT_EXTREMES(N, T, VT, MT, VL)                                                  \
    DEFINE_VSPAN(N, T, VT, MT, VL)                                                               \
    DEFINE_FIND(N, T, IS_NAN_FLOAT, 1)                                                           \
    DEFINE_ARG(N, T, INFINITY, -INFINITY, 2 * sizeof(T))                                         \
    static int has_number_##N(const T *x, size_t b, size_t e) {                                  \
        while (b < e && x[b] != x[b]) b++;                                                       \
        return b < e;                                                                            \
    }                                                                                            \
    static T extreme_##N(const T *x, size_t n, int max, int nan_loses) {                         \
        T none = max ? -INFINITY : INFINITY, best = none;                                        \
        int have = 0;                                                                            \
        for (size_t b_ = 0; b_ < n; b_ += SCAN_BLOCK) {                                          \
            size_t e_ = n - b_ < SCAN_BLOCK ? n : b_ + SCAN_BLOCK;                               \
            T lo_, hi_;                                                                          \
            int nan_;                                                                            \
            int want_ = (max ? SPAN_HI : SPAN_LO) | (nan_loses ? 0 : SPAN_NAN);                  \
            span_##N(x + b_, e_ - b_, &lo_, &hi_, &nan_, want_);                                 \
            if (nan_) return x[find_nan_##N(x, b_, e_)];                                         \
            T m_ = max ? hi_ : lo_;                                                              \
            if (m_ == none && !has_number_##N(x, b_, e_)) continue;      /* NaN only */          \
            if (!have || (max ? m_ > best : m_ < best)) best = first_of_##N(x, b_, e_, m_);      \
            have = 1;                                                                            \
        }                                                                                        \
        /* nanmin/nanmax of NaN only: the last NaN, as the host fold from its NaN identity gives */ \
        return have ? best : x[n - 1];                                                           \
    }                                                                                            \
    DEFINE_EXTREME_LOOP(min_##N, T, extreme_##N, 0, 0)                                           \
    DEFINE_EXTREME_LOOP(max_##N, T, extreme_##N, 1, 0)                                           \
    DEFINE_EXTREME_LOOP(nanmin_##N, T, extreme_##N, 0, 1)                                        \
    DEFINE_EXTREME_LOOP(nanmax_##N, T, extreme_##N, 1, 1)
#define DEFINE_EXTREME_LOOP(NAME, T, EXTREME, MAX, NAN_LOSES)                                    \
    static void NAME(LOOP_ARGS) {                                                                \
        T m_ = EXTREME(xp, n, MAX, NAN_LOSES);                                                   \
        UNUSED_ARGS;                                                                             \
        memcpy(acc, &m_, sizeof m_);                                                             \
    }

/* ---- the rest of the exact kinds -------------------------------------------------------------------- */

/* and/or over x != 0, a chunk at a time, stopping at the first chunk that decides. */
#define DEFINE_FLAGS(N, T)                                                                       \
    static unsigned flags_##N(const T *x, size_t n, unsigned is_and) {                           \
        unsigned flag = is_and;                                                                  \
        for (size_t c_ = 0; c_ < n && flag == is_and; c_ += FLAG_CHUNK) {                        \
            size_t e_ = n - c_ < FLAG_CHUNK ? n : c_ + FLAG_CHUNK;                               \
            unsigned f_ = is_and;                                                                \
            if (is_and)                                                                          \
                for (size_t k_ = c_; k_ < e_; k_++) f_ &= x[k_] != 0;                            \
            else                                                                                 \
                for (size_t k_ = c_; k_ < e_; k_++) f_ |= x[k_] != 0;                            \
            flag = f_;                                                                           \
        }                                                                                        \
        return flag;                                                                             \
    }                                                                                            \
    static void and_##N(LOOP_ARGS) {                                                             \
        UNUSED_ARGS;                                                                             \
        *(uint8_t *)acc = (uint8_t)flags_##N(xp, n, 1);                                          \
    }                                                                                            \
    static void or_##N(LOOP_ARGS) {                                                              \
        UNUSED_ARGS;                                                                             \
        *(uint8_t *)acc = (uint8_t)flags_##N(xp, n, 0);                                          \
    }                                                                                            \
    /* count: in 32-bit lanes (64-bit ones for 8-byte elements), a chunk at a time */            \
    static void count_##N(LOOP_ARGS) {                                                           \
        const T *all = xp;                                                                       \
        uint64_t total = 0;                                                                      \
        UNUSED_ARGS;                                                                             \
        for (size_t c_ = 0; c_ < n; c_ += COUNT_CHUNK) {                                         \
            const T *x = all + c_;                                                               \
            size_t m_ = n - c_ < COUNT_CHUNK ? n - c_ : COUNT_CHUNK;                             \
            uint64_t part_;                                                                      \
            if (sizeof(T) == 8) FOLD(T, uint64_t, 0, ADD, v != 0, m_, part_);                    \
            else FOLD(T, uint32_t, 0, ADD, v != 0, m_, part_);                                   \
            total += part_;                                                                      \
        }                                                                                        \
        gr_put_u64(acc, total);                                                                  \
    }

/* absmax of floats: the greatest |x| in vectors (the sign bit masked off: |-0.0| = +0.0), the tail by
 * FMAG; where a NaN or an infinity made some x - x NaN, the first NaN if there is one (it wins, as
 * GR_EXTREME's first NaN does, as it is in the data). */
#define DEFINE_FLOAT_ABSMAX(N, T, VT, MT, VL, MAGNITUDE)                                         \
    static void absmax_##N(LOOP_ARGS) {                                                          \
        const T *x = xp;                                                                         \
        VT m_[2] = {{0}}, q_ = {0};                                                              \
        UNUSED_ARGS;                                                                             \
        size_t k_ = 0;                                                                           \
        for (; k_ + 2 * VL <= n; k_ += 2 * VL)                                                   \
            for (int i_ = 0; i_ < 2; i_++) {                                                     \
                VT v_;                                                                           \
                memcpy(&v_, x + k_ + i_ * VL, sizeof v_);                                        \
                VT a_ = VAND(VT, MT, v_, MAGNITUDE);                                             \
                m_[i_] = VSEL(VT, MT, a_ > m_[i_], a_, m_[i_]);                                  \
                q_ += v_ - v_;                                                                   \
            }                                                                                    \
        T m = 0;                                                                                 \
        int odd = 0;                                                                             \
        for (int i_ = 0; i_ < 2; i_++)                                                           \
            for (int j_ = 0; j_ < VL; j_++) m = GREATER(m, m_[i_][j_]);                          \
        for (int j_ = 0; j_ < VL; j_++) odd |= q_[j_] != q_[j_];                                 \
        for (; k_ < n; k_++) {                                                                   \
            m = GREATER(m, FMAG(x[k_]));                                                         \
            odd |= x[k_] - x[k_] != 0;                                                           \
        }                                                                                        \
        for (size_t i_ = 0; odd && i_ < n; i_++)                                                 \
            if (x[i_] != x[i_]) {                                                                \
                m = x[i_];                                                                       \
                break;                                                                           \
            }                                                                                    \
        memcpy(acc, &m, sizeof m);                                                               \
    }

/* |v| of an integer as W, an unsigned type at least as wide: |INT_MIN| fits (-128 is 128 in a uint8) */
#define MAG_S(W, v) ((v) < 0 ? (W)((W)0 - (W)(v)) : (W)(v))
#define MAG_U(W, v) ((W)(v))

/* Integer sums, products, sums of squares and sums of |x|: 64-bit, wrapping (a signed value by its two's
 * complement); absmax in UT, the unsigned type of T's width (ops.c's GR_ACC_MAGNITUDE). */
#define DEFINE_INT(N, T, TMIN, TMAX, SQ, UT, MAG)                                                \
    DEFINE_FLAGS(N, T)                                                                           \
    DEFINE_SPAN(N, T, TMAX, TMIN)                                                                \
    DEFINE_FIND(N, T, IS_NAN_INT, 0)                                                             \
    DEFINE_ARG(N, T, TMAX, TMIN, (sizeof(T) < 4 ? 4 : 2 * sizeof(T)))                            \
    DEFINE_INT_FOLD(isum_##N, T, uint64_t, 0, ADD, v)                                            \
    DEFINE_INT_FOLD(iprod_##N, T, uint64_t, 1, MUL, v)                                           \
    DEFINE_INT_FOLD(isumsq_##N, T, uint64_t, 0, ADD, SQ(v))                                      \
    DEFINE_INT_FOLD(iasum_##N, T, uint64_t, 0, ADD, MAG(uint64_t, v))                            \
    DEFINE_INT_FOLD(iabsmax_##N, T, UT, 0, GREATER, MAG(UT, v))                                  \
    /* plain min/max: no NaN, no signed zero, so no block search */                              \
    DEFINE_INT_FOLD(imin_##N, T, T, TMAX, LESSER, v)                                             \
    DEFINE_INT_FOLD(imax_##N, T, T, TMIN, GREATER, v)
/* A loop whose accumulator is one value of W: the fold by OP of MAP over the elements, from INIT. */
#define DEFINE_INT_FOLD(NAME, T, W, INIT, OP, MAP)                                               \
    static void NAME(LOOP_ARGS) {                                                                \
        const T *x = xp;                                                                         \
        W out_;                                                                                  \
        UNUSED_ARGS;                                                                             \
        FOLD(T, W, INIT, OP, MAP, n, out_);                                                      \
        memcpy(acc, &out_, sizeof out_);                                                         \
    }
#define IS_NAN_INT(v) ((void)(v), 0)
#define IS_NAN_FLOAT(v) ((v) != (v))

typedef unsigned __int128 u128;

/* |v| of an integer of up to 32 bits (|INT32_MIN| = 2^31 fits) */
#define ABS_S(v) ((v) < 0 ? 0u - (uint32_t)(v) : (uint32_t)(v))
#define ABS_U(v) ((uint32_t)(v))
#define SQ_S32(v) ((uint64_t)ABS_S(v) * ABS_S(v))
#define SQ_U32(v) ((uint64_t)ABS_U(v) * ABS_U(v))
#define SQ_64(v) ((uint64_t)(v) * (uint64_t)(v))

/* var/std and norm of integers of up to 32 bits: exact sums (ops.h's moments and squares): the wrapping
 * 64-bit sum of the elements and the 128-bit sum of their squares. 8- and 16-bit data in 64-bit lanes,
 * where squares below 2^32 cannot overflow within a chunk of COUNT_CHUNK elements; the chunks' sums of
 * squares add in 128 bits (16-bit squares reach 2^32: 2^32 elements would wrap a 64-bit sum). */
#define DEFINE_BYTE_SUMS(N, T, ABS)                                                              \
    static void squares_sums_##N(const T *all, size_t n, uint64_t *sum, u128 *sq) {              \
        uint64_t s = 0;                                                                          \
        u128 qq = 0;                                                                             \
        for (size_t c_ = 0; c_ < n; c_ += COUNT_CHUNK) {                                         \
            const T *x = all + c_;                                                               \
            size_t m_ = n - c_ < COUNT_CHUNK ? n - c_ : COUNT_CHUNK;                             \
            uint64_t s_[LANES] = {0}, q_[LANES] = {0}, q = 0;                                    \
            size_t k_ = 0;                                                                       \
            for (; k_ + LANES <= m_; k_ += LANES)                                                \
                for (int j_ = 0; j_ < LANES; j_++) {                                             \
                    T v = x[k_ + j_];                                                            \
                    s_[j_] += (uint64_t)v;                                                       \
                    q_[j_] += (uint64_t)ABS(v) * ABS(v);                                         \
                }                                                                                \
            for (; k_ < m_; k_++) s += (uint64_t)x[k_], q += (uint64_t)ABS(x[k_]) * ABS(x[k_]);  \
            for (int j_ = 0; j_ < LANES; j_++) s += s_[j_], q += q_[j_];                         \
            qq += q;                                                                             \
        }                                                                                        \
        *sum = s, *sq = qq;                                                                      \
    }

/* 32-bit data in vectors of 4: |x| squared two at a time (the even and the odd elements, each in the
 * low half of a 64-bit lane: one 32 x 32 -> 64 multiply), the squares added wrapping in 64 bits beside
 * the sum of their high halves, from which the wrapped-off part comes back: with H the high halves' sum,
 * the low halves' sum is acc - H 2^32 modulo 2^64 (it is below 2^64). The sum of the elements is the
 * sum of their 32-bit patterns less 2^32 per negative one. */
typedef uint32_t vu32 __attribute__((vector_size(16)));
typedef uint64_t vu64 __attribute__((vector_size(16)));
/* a * b of the low 32 bits of each 64-bit lane (the high ones are 0 here): SSE2's pmuludq, which the
 * compiler does not find by itself (it multiplies all 64 bits: three multiplies) */
#if defined(__SSE2__)
#include <emmintrin.h>
#define MUL32(a, b) ((vu64)_mm_mul_epu32((__m128i)(a), (__m128i)(b)))
#else
#define MUL32(a, b) ((a) * (b))
#endif
#define DEFINE_WORD_SUMS(N, T, SIGNED)                                                           \
    static void squares_sums_##N(const T *all, size_t n, uint64_t *sum, u128 *sq) {              \
        uint64_t s = 0;                                                                          \
        u128 q = 0;                                                                              \
        for (size_t c_ = 0; c_ < n; c_ += COUNT_CHUNK) {                                         \
            const T *x = all + c_;                                                               \
            size_t m_ = n - c_ < COUNT_CHUNK ? n - c_ : COUNT_CHUNK;                             \
            vu64 acc_ = {0}, hi_ = {0}, bits_ = {0};                                             \
            gr_vm32 neg_ = {0};                                                                  \
            size_t k_ = 0;                                                                       \
            for (; k_ + 4 <= m_; k_ += 4) {                                                      \
                gr_vm32 v_;                                                                      \
                memcpy(&v_, x + k_, sizeof v_);                                                  \
                gr_vm32 sign_ = SIGNED ? v_ >> 31 : (gr_vm32){0};                                \
                vu32 a_ = (vu32)(v_ ^ sign_) - (vu32)sign_;                                      \
                vu64 ae_ = (vu64)a_ & 0xffffffffu, ao_ = (vu64)a_ >> 32;                         \
                vu64 se_ = MUL32(ae_, ae_), so_ = MUL32(ao_, ao_);                               \
                acc_ += se_ + so_;                                                               \
                hi_ += (se_ >> 32) + (so_ >> 32);                                                \
                bits_ += ((vu64)v_ & 0xffffffffu) + ((vu64)v_ >> 32);                            \
                neg_ -= sign_;                                                                   \
            }                                                                                    \
            uint64_t a = acc_[0] + acc_[1], h = hi_[0] + hi_[1], b = bits_[0] + bits_[1];        \
            uint64_t negs = (uint64_t)(uint32_t)neg_[0] + (uint32_t)neg_[1] + (uint32_t)neg_[2] + \
                            (uint32_t)neg_[3];                                                   \
            for (; k_ < m_; k_++) {                                                              \
                uint64_t sq_ = SQ_##N(x[k_]);                                                    \
                a += sq_, h += sq_ >> 32, b += (uint32_t)x[k_], negs += (int64_t)x[k_] < 0;      \
            }                                                                                    \
            s += b - (negs << 32);                                                               \
            q += ((u128)h << 32) + (a - (h << 32));                                              \
        }                                                                                        \
        *sum = s, *sq = q;                                                                       \
    }

/* The exact moments and squares from those sums. */
#define DEFINE_SMALL_INT(N)                                                                      \
    static void moments_##N(LOOP_ARGS) {                                                         \
        uint64_t s_, w_[2];                                                                      \
        u128 q_;                                                                                 \
        UNUSED_ARGS;                                                                             \
        squares_sums_##N(xp, n, &s_, &q_);                                                       \
        w_[0] = (uint64_t)q_, w_[1] = (uint64_t)(q_ >> 64);                                      \
        gr_put_u64(acc, n);                                                                      \
        gr_put_u64((char *)acc + 8, s_);                                                         \
        memcpy((char *)acc + 16, w_, 16);                                                        \
    }                                                                                            \
    static void squares_##N(LOOP_ARGS) {                                                         \
        uint64_t s_, w_[2];                                                                      \
        u128 q_;                                                                                 \
        UNUSED_ARGS;                                                                             \
        squares_sums_##N(xp, n, &s_, &q_);                                                       \
        w_[0] = (uint64_t)q_, w_[1] = (uint64_t)(q_ >> 64);                                      \
        memcpy(acc, w_, 16);                                                                     \
    }

/* ---- the instances ------------------------------------------------------------------------------- */

DEFINE_FLAGS(f32, float)
DEFINE_FLAGS(f64, double)
DEFINE_FLOAT_EXTREMES(f32, float, gr_vf32, gr_vm32, 4)
DEFINE_FLOAT_EXTREMES(f64, double, gr_vf64, gr_vm64, 2)
DEFINE_FLOAT_ABSMAX(f32, float, gr_vf32, gr_vm32, 4, (gr_vm32){0} + INT32_MAX)
DEFINE_FLOAT_ABSMAX(f64, double, gr_vf64, gr_vm64, 2, (gr_vm64){0} + INT64_MAX)
DEFINE_INT(i8, int8_t, INT8_MIN, INT8_MAX, SQ_S32, uint8_t, MAG_S)
DEFINE_INT(u8, uint8_t, 0, UINT8_MAX, SQ_U32, uint8_t, MAG_U)
DEFINE_INT(i16, int16_t, INT16_MIN, INT16_MAX, SQ_S32, uint16_t, MAG_S)
DEFINE_INT(u16, uint16_t, 0, UINT16_MAX, SQ_U32, uint16_t, MAG_U)
DEFINE_INT(i32, int32_t, INT32_MIN, INT32_MAX, SQ_S32, uint32_t, MAG_S)
DEFINE_INT(u32, uint32_t, 0, UINT32_MAX, SQ_U32, uint32_t, MAG_U)
DEFINE_INT(i64, int64_t, INT64_MIN, INT64_MAX, SQ_64, uint64_t, MAG_S)
DEFINE_INT(u64, uint64_t, 0, UINT64_MAX, SQ_64, uint64_t, MAG_U)
#define SQ_i32(v) SQ_S32(v)
#define SQ_u32(v) SQ_U32(v)
DEFINE_BYTE_SUMS(i8, int8_t, ABS_S)
DEFINE_BYTE_SUMS(u8, uint8_t, ABS_U)
DEFINE_BYTE_SUMS(i16, int16_t, ABS_S)
DEFINE_BYTE_SUMS(u16, uint16_t, ABS_U)
DEFINE_WORD_SUMS(i32, int32_t, 1)
DEFINE_WORD_SUMS(u32, uint32_t, 0)
DEFINE_SMALL_INT(i8)
DEFINE_SMALL_INT(u8)
DEFINE_SMALL_INT(i16)
DEFINE_SMALL_INT(u16)
DEFINE_SMALL_INT(i32)
DEFINE_SMALL_INT(u32)

/* Floats: the sums (asum too), var/std, norm and nanmean are cpu_trees.c's. */
#define FLOAT_ROW(N)                                                                             \
    static const gr_cpu_loop row_##N[GR_K_KINDS] = {                                             \
        [GR_K_COUNT] = count_##N, [GR_K_MIN] = min_##N, [GR_K_MAX] = max_##N,                    \
        [GR_K_NANMIN] = nanmin_##N, [GR_K_NANMAX] = nanmax_##N, [GR_K_AND] = and_##N,            \
        [GR_K_OR] = or_##N, [GR_K_ARGMIN] = argmin_##N, [GR_K_ARGMAX] = argmax_##N,              \
        [GR_K_MINMAX] = minmax_##N, [GR_K_ABSMAX] = absmax_##N,                                  \
    };
FLOAT_ROW(f32)
FLOAT_ROW(f64)

/* Integers: the nan ops are the plain ones; var/std/norm exact for the narrow ones (64-bit ones and
 * nanmean: cpu_trees.c). */
#define INT_ROW(N, ...)                                                                          \
    static const gr_cpu_loop row_##N[GR_K_KINDS] = {                                             \
        [GR_K_SUM] = isum_##N, [GR_K_NANSUM] = isum_##N, [GR_K_SUMSQ] = isumsq_##N,              \
        [GR_K_PROD] = iprod_##N, [GR_K_COUNT] = count_##N, [GR_K_MIN] = imin_##N,                \
        [GR_K_MAX] = imax_##N, [GR_K_NANMIN] = imin_##N, [GR_K_NANMAX] = imax_##N,               \
        [GR_K_AND] = and_##N, [GR_K_OR] = or_##N, [GR_K_ARGMIN] = argmin_##N,                    \
        [GR_K_ARGMAX] = argmax_##N, [GR_K_MINMAX] = minmax_##N, [GR_K_ABSMAX] = iabsmax_##N,     \
        [GR_K_ASUM] = iasum_##N, __VA_ARGS__                                                     \
    };
INT_ROW(i8, [GR_K_MOMENTS] = moments_i8, [GR_K_SQUARES] = squares_i8)
INT_ROW(u8, [GR_K_MOMENTS] = moments_u8, [GR_K_SQUARES] = squares_u8)
INT_ROW(i16, [GR_K_MOMENTS] = moments_i16, [GR_K_SQUARES] = squares_i16)
INT_ROW(u16, [GR_K_MOMENTS] = moments_u16, [GR_K_SQUARES] = squares_u16)
INT_ROW(i32, [GR_K_MOMENTS] = moments_i32, [GR_K_SQUARES] = squares_i32)
INT_ROW(u32, [GR_K_MOMENTS] = moments_u32, [GR_K_SQUARES] = squares_u32)
INT_ROW(i64, )
INT_ROW(u64, )

/* By dtype; a dtype without a row (one added later) gets the host functions (cpu_backend.c). */
static const gr_cpu_loop *const rows[GR_DTYPE_COUNT] = {
    [GR_INT8] = row_i8, [GR_UINT8] = row_u8, [GR_INT16] = row_i16, [GR_UINT16] = row_u16,
    [GR_INT32] = row_i32, [GR_UINT32] = row_u32, [GR_BOOL] = row_u8,    /* bool: bytes 0 and 1 */
    [GR_INT64] = row_i64, [GR_UINT64] = row_u64, [GR_FLOAT32] = row_f32, [GR_FLOAT64] = row_f64,
};

const gr_cpu_loop *gr_cpu_exact_row(gr_dtype t) { return (unsigned)t < GR_DTYPE_COUNT ? rows[t] : NULL; }
