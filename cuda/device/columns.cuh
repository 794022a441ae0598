/*
 * columns.cuh -- the body of the column kernel: reductions along an axis that is not the innermost, where
 * adjacent outputs are adjacent in memory. The input is seen as A x R x C (element (a, r, c) at
 * a * sa + r * sr + c, in elements): every output (a, c) reduces the R elements of its column.
 *
 * Threads own columns: a thread takes P adjacent columns (16 bytes of them, 8 for 1-byte types, where the
 * layout allows; else one) and folds T = kColRows consecutive rows of them in order; 8 threads take 8
 * consecutive runs of T rows, a "group" of kColGroupRows rows, and combine their values in a fixed tree
 * through shared memory. A group's value is a result when the column has one group, else a partial that
 * the next pass, the same body over the partials (A x groups x C accumulators), takes as its rows. So the
 * order in which a column is combined depends on R alone: not on how many columns or batches the call
 * has, where the column sits, P, or the launch -- the batch invariance of issue 23, with the same kernels.
 *
 * A row reduction is the same order with C the rows and R their length (P = 0: a thread reads 16 bytes
 * along its row), so a result has the same bits whichever way its elements lie in memory.
 * How a thread folds one column of its run (RunFold): element by element, except var/std of floats (the
 * rows in aligned eights, one Chan merge each), min and max of small floats (the running value kept
 * widened) and argmin/argmax of every type (the running value widened, its row's place in the run) --
 * the same steps in every form, so the bits still depend on R alone.
 * Narrow rows (C * element < 16 bytes, rows back to back) are read a vector of several rows at a time
 * (P = C, the vector's q = 16 / (C * element) rows in order), so a (2^27, 2) matrix reads 16 bytes a load.
 * Where a thread's run is one stretch of memory (narrow rows whose every column it takes, up to 32 bytes a
 * row, or a contiguous column), a kernel of its own copies the runs through shared memory first, a warp's
 * loads whole lines ("Staged runs" below): the same rows to the same folds.
 * A block's 256 threads are 8 rows of up to 32 column-packs (lanes along the columns: the loads of a warp
 * are one run of memory when C is wide) and, where the columns are fewer, several groups side by side.
 * Reads the input only. NVRTC-clean (core.cuh).
 */
#pragma once

#include "core.cuh"
#include "ops.cuh"
#include "pipeline.cuh"
#include "results.cuh"

namespace gr {

constexpr int kColThreads = 256;                        /* a block */
constexpr int kColRows = 64;                            /* rows a thread folds in order */
constexpr int kColTree = 8;                             /* threads whose runs make a group */
constexpr int kColGroupRows = kColRows * kColTree;      /* rows of a group: what one pass divides R by */

struct ColArgs {
    const void *in;
    u64 A, R, C;                /* this pass's input: A x R x C (R: groups of the pass before, after the first) */
    long long sa, sr, sc;       /* strides of a, r and c in elements (c's is 1 where a thread takes P > 1) */
    u64 n;                      /* the reduced length of the call (a result's element count) */
    void *out0, *out1;          /* results: output (a, c) is element a * oa + c * oc */
    long long oa, oc;
    void *partials;             /* a pass that is not the last: A x groups x C accumulators, compact */
    int ddof;
    int pack;                   /* P: columns a thread takes (1, or 16 bytes' worth, or C); 0: one column whose
                                 * rows are contiguous (sr == 1), read 16 bytes along it */
    int tile;                   /* column-packs side by side in a block: a power of two */
    int tree;                   /* runs of a group: a power of two up to kColTree (fewer where R is short) */
    int staged;                 /* 1: a first pass whose runs are read staged (column_staged), else 0 */
};

/* Folds element x with its index into acc. */
template <class Op, class In> GR_DEV void fold_one(typename Op::acc_t &acc, const In &x, u64 i) {
    if constexpr (Op::kIndexed) acc = Op::combine(acc, Op::load(x, i));
    else acc = Op::combine(acc, Op::load(x));
}

/* Loads in flight per thread: a run's loads are issued kUnroll at a time, then folded in order. */
constexpr int kColUnroll = 8;

/* Says that row r of a main loop is a multiple of 8 (runs start at multiples of kColRows and the loops
 * step by multiples of 8), so that a fold's place among its eights (var's r & 7) is known at compile
 * time: without it every element tested its place and var's merge was inlined at every element. */
#define GR_ALIGNED_ROW(r) __builtin_assume(((r) & 7u) == 0)

/* How a thread folds one column of its run into that column's accumulator: element by element
 * (fold_one), except var/std of floats below. Every form of fold_columns hands a column's rows to add in
 * ascending order, from a multiple of kColRows, and calls finish after the run's last row. */
template <class Op> struct RunFold {
    template <class In> GR_DEV void add(typename Op::acc_t &acc, const In &x, u64 r) { fold_one<Op>(acc, x, r); }
    GR_DEV void finish(typename Op::acc_t &, u64) {}
};

/* The value a comparison reads: a small float widened (Min/Max/ArgExtreme's combines widen both sides at
 * every step, which held bfloat16 max to a third of the read kernel), other types as they are. */
template <class T> using Wide = conditional_t<is_small_float_v<T>, float, T>;
template <class T> GR_DEV Wide<T> wide(const T &x) {
    /* bfloat16 is float32's top half: its bits shifted up, without small_floats.h's quieting of a NaN
     * (five instructions to one); every use here compares the value or computes with it, and the
     * hardware's NaN result does not depend on the input NaN's bits */
    if constexpr (is_same_v<T, bf16>) return __uint_as_float(unsigned(x.bits) << 16);
    else if constexpr (is_small_float_v<T>) return float(x);
    else return x;
}

/* sum and mean of bfloat16: each element widened by the shift above, then added as Sum adds it. */
template <class Acc> struct RunFold<Sum<Acc>> {
    template <class In> GR_DEV void add(Acc &acc, const In &x, u64 r) {
        if constexpr (is_same_v<In, bf16>) acc = acc + Acc(wide(x));
        else fold_one<Sum<Acc>>(acc, x, r);
    }
    GR_DEV void finish(Acc &, u64) {}
};

/* min and max of small floats: the running value kept widened beside it, so each element is widened
 * once; the choices of Min/Max::combine (GR_EXTREME: a NaN in stays, a NaN wins, else the strictly more
 * extreme). The accumulator is the identity when a run starts (argmin/argmax below rely on it too). */
template <class T, bool kMin> struct ExtremeFold {
    Wide<T> w = wide(kMin ? Min<T>::identity() : Max<T>::identity());
    template <class In> GR_DEV void add(T &acc, const In &x, u64) {
        const T v = T(x);
        const Wide<T> b = wide(v);
        if (!(w != w) && (b != b || (kMin ? b < w : b > w))) {
            acc = v;
            w = b;
        }
    }
    GR_DEV void finish(T &, u64) {}
};
template <SmallFormat F> struct RunFold<Min<SmallFloat<F>>> : ExtremeFold<SmallFloat<F>, true> {};
template <SmallFormat F> struct RunFold<Max<SmallFloat<F>>> : ExtremeFold<SmallFloat<F>, false> {};

/* argmin / argmax: the rows come in ascending order, so GR_RETURN_ARG's choice against the running
 * element is: the run's first element, else a NaN in stays, a NaN wins, else the strictly more extreme.
 * The running value is kept widened and its row as its place in the run (a run is rows [r0, r0 +
 * kColRows), r0 a multiple of kColRows), and the accumulator is formed once, at the run's end: the
 * generic combine compared and selected 64-bit indexes at every element (0.60-0.83x the time down
 * columns, float32 and bfloat16, H200). */
template <class T, bool kMin> struct RunFold<ArgExtreme<T, kMin>> {
    static constexpr unsigned kNone = unsigned(kColRows);      /* no element yet */
    Wide<T> w;
    T v;                                /* the element itself, read where wide() does not give it back */
    unsigned at = kNone;                /* its row's place in the run */
    template <class In> GR_DEV void add(ArgAcc<T> &, const In &x, u64 r) {
        const T val = T(x);
        const Wide<T> b = wide(val);
        if (at == kNone || (!(w != w) && (b != b || (kMin ? b < w : b > w)))) {
            w = b;
            v = val;
            at = unsigned(r) & unsigned(kColRows - 1);
        }
    }
    GR_DEV void finish(ArgAcc<T> &acc, u64 r1) {
        if (at == kNone) return;
        T value;
        if constexpr (is_same_v<T, bf16>) value = bf16::of_bits(__float_as_uint(w) >> 16);   /* wide()'s shift back */
        else if constexpr (is_small_float_v<T>) value = v;
        else value = w;
        acc = ArgAcc<T>{((r1 - 1) & ~u64(kColRows - 1)) | at, value};     /* acc was the identity */
    }
};

/* Rounded float steps that the compiler may not fuse or reorder, for the eights below. */
GR_DEV float add_rn(float a, float b) { return __fadd_rn(a, b); }
GR_DEV double add_rn(double a, double b) { return __dadd_rn(a, b); }
GR_DEV float sub_rn(float a, float b) { return __fsub_rn(a, b); }
GR_DEV double sub_rn(double a, double b) { return __dsub_rn(a, b); }
GR_DEV float mul_rn(float a, float b) { return __fmul_rn(a, b); }
GR_DEV double mul_rn(double a, double b) { return __dmul_rn(a, b); }
GR_DEV float div_rn(float a, float b) { return __fdiv_rn(a, b); }
GR_DEV double div_rn(double a, double b) { return __ddiv_rn(a, b); }
GR_DEV float fma_rn(float a, float b, float c) { return __fmaf_rn(a, b, c); }
GR_DEV double fma_rn(double a, double b, double c) { return __fma_rn(a, b, c); }

/* var / std of floats: Welford's step divides at every element, which held the column kernel at 36-42% of
 * the read kernel (float32, H200). Each aligned eight rows of a column (rows 8j .. 8j + 7; fewer at the
 * column's end) are summed instead as deviations from the first of them (shifted sums: no division), and
 * merged once (Chan, as the whole-buffer kernel merges a vector, thread_load.cuh). The eights are the same
 * rows in every form, so a result still depends on R alone. Inf or NaN anywhere makes the sums NaN, as
 * Welford's step would. */
template <class F> struct RunFold<Welford<F>> {
    F x0, s1, s2;
    template <class In> GR_DEV void add(WelfordAcc<F> &acc, const In &x, u64 r) {
        const F v = F(wide(x));
        const unsigned k = unsigned(r) & 7u;
        if (k == 0) {
            x0 = v;
            s1 = sub_rn(v, v);                  /* 0, or NaN for inf and NaN */
            s2 = mul_rn(s1, s1);
        } else {
            const F d = sub_rn(v, x0);
            s1 = add_rn(s1, d);
            s2 = fma_rn(d, d, s2);
        }
        if (k == 7) merge(acc, 8);
    }
    GR_DEV void finish(WelfordAcc<F> &acc, u64 r1) {
        if (r1 & 7u) merge(acc, unsigned(r1 & 7u));
    }
    GR_DEV void merge(WelfordAcc<F> &acc, unsigned n) {
        /* the mean's offset from x0: a quotient by a power of two rounds the same value as the product
         * by its inverse (exact), which is cheaper */
        const F q = (n & (n - 1)) == 0 ? mul_rn(s1, n == 8 ? F(0.125) : n == 4 ? F(0.25) : n == 2 ? F(0.5) : F(1))
                                       : div_rn(s1, F(n));
        F m2 = sub_rn(s2, mul_rn(s1, q));
        m2 = m2 < F(0) ? F(0) : m2;             /* rounding below zero; NaN stays */
        acc = gr_welford_merge(acc, WelfordAcc<F>{u64(n), add_rn(x0, q), m2});
    }
};

/* Folds rows [r0, r1) of P = kP adjacent columns starting at column c0 into acc[0..kP): kP == 1 reads
 * element by element, kP > 1 16-byte (8-byte for 1-byte types) vectors of q = kV / kP rows, kP == 0
 * 16-byte vectors along one contiguous column. Every form folds the rows in ascending order. r0 is a
 * multiple of kColRows, so a vector never straddles it; the rows past the last whole vector are read
 * element by element. */
template <int kP, class Op, class In, bool kLater = false>
GR_DEV void fold_columns(const ColArgs &a, const In *base, u64 r0, u64 r1, typename Op::acc_t *acc) {
    RunFold<Op> f[kP > 1 ? kP : 1];
    if constexpr (kLater && sizeof(In) <= 8) {
        /* a pass over the groups' accumulators: little data, read 8 loads at a time, 8 times a run; here
         * the run's loads all in flight at once (32 or 64), the rows past the column's end masked. Sums
         * down narrow columns (three passes) took 0.98-0.99x the time, maxima the same (H100). Nor are
         * the later passes' launches their cost: launched early (programmatic dependent launch) they
         * measured 0.99-1.03x; ncu gives the two passes of a (2^27, 2) sum 8.4 and 6.5 us of their own
         * (performance.md) */
        constexpr int kU = sizeof(In) <= 4 ? 64 : 32;
        for (u64 r = r0; r < r1; r += kU) {
            In x[kU];
#pragma unroll
            for (int u = 0; u < kU; u++)
                if (r + u < r1) x[u] = base[(long long)(r + u) * a.sr];
#pragma unroll
            for (int u = 0; u < kU; u++)
                if (r + u < r1) f[0].add(acc[0], x[u], r + u);
        }
    } else if constexpr (kP == 0) {
        constexpr int kV = 16 / int(sizeof(In));
        struct alignas(16) Vec { In v[kV]; };
        u64 r = r0;
        if ((reinterpret_cast<uptr>(base + r0) & 15) == 0) {
            for (; r + kColUnroll * kV <= r1; r += kColUnroll * kV) {
                GR_ALIGNED_ROW(r);
                Vec w[kColUnroll];
#pragma unroll
                for (int u = 0; u < kColUnroll; u++) w[u] = *reinterpret_cast<const Vec *>(base + r + u * kV);
#pragma unroll
                for (int u = 0; u < kColUnroll; u++)
#pragma unroll
                    for (int e = 0; e < kV; e++) f[0].add(acc[0], w[u].v[e], r + u * kV + e);
            }
            for (; r + kV <= r1; r += kV) {
                const Vec w = *reinterpret_cast<const Vec *>(base + r);
#pragma unroll
                for (int e = 0; e < kV; e++) f[0].add(acc[0], w.v[e], r + e);
            }
        }
        for (; r < r1; r++) f[0].add(acc[0], base[r], r);
    } else if constexpr (kP == 1) {
        u64 r = r0;
        for (; r + kColUnroll <= r1; r += kColUnroll) {
            GR_ALIGNED_ROW(r);
            In x[kColUnroll];
#pragma unroll
            for (int u = 0; u < kColUnroll; u++) x[u] = base[(long long)(r + u) * a.sr];
#pragma unroll
            for (int u = 0; u < kColUnroll; u++) f[0].add(acc[0], x[u], r + u);
        }
        for (; r < r1; r++) f[0].add(acc[0], base[(long long)r * a.sr], r);
    } else {
        constexpr int kBytes = sizeof(In) == 1 ? 8 : 16;
        constexpr int kV = kBytes / int(sizeof(In));
        constexpr int q = kV / kP;                      /* rows per vector */
        constexpr int kU = kColUnroll;                  /* vectors in flight: kU * q rows */
        struct alignas(kBytes) Vec { In v[kV]; };
        u64 r = r0;
        for (; r + kU * q <= r1; r += kU * q) {
            GR_ALIGNED_ROW(r);
            Vec w[kU];
#pragma unroll
            for (int u = 0; u < kU; u++) w[u] = *reinterpret_cast<const Vec *>(base + (long long)(r + u * q) * a.sr);
#pragma unroll
            for (int u = 0; u < kU; u++)
#pragma unroll
                for (int e = 0; e < kV; e++) f[e % kP].add(acc[e % kP], w[u].v[e], r + u * q + e / kP);
        }
        for (; r + q <= r1; r += q) {
            const Vec w = *reinterpret_cast<const Vec *>(base + (long long)r * a.sr);
#pragma unroll
            for (int e = 0; e < kV; e++) f[e % kP].add(acc[e % kP], w.v[e], r + e / kP);
        }
        for (; r < r1; r++)
#pragma unroll
            for (int k = 0; k < kP; k++) f[k].add(acc[k], base[(long long)r * a.sr + k], r);
    }
#pragma unroll
    for (int k = 0; k < (kP > 1 ? kP : 1); k++) f[k].finish(acc[k], r1);
}

/* Staged runs. Where each lane's run is one stretch of memory -- a contiguous column (kP == 0), or
 * narrow rows back to back whose every column the lane takes (rows of up to 32 bytes: several rows a
 * vector, one, or two vectors a row) -- the lanes of a warp reading their own runs touch 32 lines a load,
 * which held (2^27, 2) float32 columns at 57% of the read kernel (H200). Here a warp copies its runs into
 * shared memory 128 bytes a lane at a time (cp.async: each load 4 whole lines), then every lane folds its
 * own vectors from there: each column's rows in the same order as fold_columns, so the bits do not
 * change. Slots are swizzled (vector j of lane o at o * 8 + (j ^ o % 8)) so that a lane's reads and the
 * copies are free of bank conflicts. Rows of 16 to 64 bytes read by 2 or 4 lanes side by side (the
 * packs of a tile) measured 1.2-1.6x slower staged than not (H100), so those stay unstaged. */
constexpr int kStageVecs = 8;                                   /* 16-byte vectors a lane takes a stage */
constexpr size_t kStageBytes = size_t(kColThreads) * kStageVecs * 16;    /* a block's: 4 KiB a warp */

/* The rows [r0, r1) of a run that is not whole, where the others are staged: one element at a time (the
 * same rows to RunFold in the same order as fold_columns; the registers of its unrolled loads would add
 * to the staged kernel's). */
template <int kP, class Op, class In>
GR_DEV void fold_plain(const ColArgs &a, const In *base, u64 r0, u64 r1, typename Op::acc_t *acc) {
    constexpr int kPer = kP == 0 ? 1 : kP;
    RunFold<Op> f[kPer];
#pragma unroll 1
    for (u64 r = r0; r < r1; r++)
#pragma unroll
        for (int k = 0; k < kPer; k++) f[k].add(acc[k], kP == 0 ? base[r] : base[(long long)r * a.sr + k], r);
#pragma unroll
    for (int k = 0; k < kPer; k++) f[k].finish(acc[k], r1);
}

/* Element sizes that may stage: 2 to 8 bytes, read in 16-byte vectors (1-byte types read 8). */
GR_HOSTDEV constexpr bool may_stage(int es) { return es >= 2 && es <= 8; }

/* Whether the op's running state for a 32-byte row (kP = 32 / es columns a lane) is light enough to
 * stage: its accumulators and folds at most 96 bytes (sums, extremes; not var or argmax, whose 8 to 16
 * columns a lane took 170-186 registers and would hold every staged form of the kernel to fewer blocks). */
template <class Op, class In> constexpr bool kRowOf32 =
    (32 / sizeof(In)) * (sizeof(typename Op::acc_t) + sizeof(RunFold<Op>)) <= 96;

/* Whether a first pass reads its runs staged, from its layout once shape() has set tile. The host picks
 * the staged kernel by it; rows of 32 bytes (pack * es == 32) exist only there. */
GR_HOSTDEV bool column_staged(const ColArgs &a, int es) {
    if (!may_stage(es) || a.pack == 1 || a.R < u64(kColRows)) return false;     /* no run is whole */
    if (a.pack == 0) return true;                                                /* one contiguous column */
    if (a.pack * es < 16) return a.sr == a.pack;                                 /* several rows a vector */
    return (a.pack * es == 16 || a.pack * es == 32) && a.sc == 1 && a.sr == a.pack && a.C == u64(a.pack);
}

/* Folds this lane's whole run [r0, r0 + kColRows) (where `whole`) through the warp's stage, as
 * fold_columns would; every lane of the warp calls it together (it copies for the others). lane_at: the
 * lane's first vector, its vector j at lane_at + j. Copy i of a stage (i = 0..7) takes the lane to vector
 * jj = lane % 8 of the stretch of lane o = 4 i + lane / 8, whose address a shuffle brings. */
template <int kP, class Op, class In>
GR_DEV void fold_staged(const In *lane_at, bool whole, uint4 *stage, u64 r0, typename Op::acc_t *acc) {
    constexpr int kV = 16 / int(sizeof(In));
    constexpr int kPer = kP == 0 ? 1 : kP;                      /* columns of a lane */
    constexpr int kRowVecs = kPer * int(sizeof(In)) > 16 ? kPer * int(sizeof(In)) / 16 : 1;   /* vectors a row */
    constexpr int kRowsPer = kRowVecs > 1 ? 1 : kV / kPer;      /* rows of a vector (elements, kP == 0) */
    constexpr int kVecs = kColRows * kPer * int(sizeof(In)) / 16;      /* a run's vectors */
    static_assert(kVecs % kStageVecs == 0 && kStageVecs % kRowVecs == 0, "a run is whole stages of whole rows");
    struct alignas(16) Vec { In v[kV]; };
    GR_ALIGNED_ROW(r0);
    const unsigned lane = threadIdx.x & 31u;
    const unsigned wholes = __ballot_sync(0xffffffffu, whole);
    const unsigned long long mine = reinterpret_cast<unsigned long long>(lane_at);
    RunFold<Op> f[kPer];
#pragma unroll 1
    for (int s = 0; s < kVecs / kStageVecs; s++) {
        unsigned long long from = mine;
        unsigned ln = lane;
        asm volatile("" : "+l"(from), "+r"(ln));        /* the copies' addresses and slots found anew each
                                                         * stage, not held across the loop (40 registers) */
        const unsigned jj = ln % kStageVecs;
#pragma unroll
        for (int i = 0; i < kStageVecs; i++) {
            const unsigned o = unsigned(i) * 4u + ln / kStageVecs;
            const unsigned long long at = __shfl_sync(0xffffffffu, from, int(o));
            if ((wholes >> o) & 1u)
                copy16_async(stage + o * kStageVecs + (jj ^ (o % kStageVecs)),
                             reinterpret_cast<const void *>(at + (unsigned long long)(s * kStageVecs + int(jj)) * 16u));
        }
        commit_copies();
        wait_copies<0>();
        __syncwarp();
        if (whole)
#pragma unroll
            for (int u = 0; u < kStageVecs; u++) {
                const Vec w = *reinterpret_cast<const Vec *>(stage + lane * kStageVecs + (unsigned(u) ^ (lane % kStageVecs)));
                const int j = s * kStageVecs + u;
                const u64 r = r0 + u64(j / kRowVecs) * kRowsPer;
#pragma unroll
                for (int e = 0; e < kV; e++) {
                    if constexpr (kP == 0) f[0].add(acc[0], w.v[e], r + e);
                    else if constexpr (kRowVecs > 1) f[(u % kRowVecs) * kV + e].add(acc[(u % kRowVecs) * kV + e], w.v[e], r);
                    else f[e % kP].add(acc[e % kP], w.v[e], r + e / kP);
                }
            }
        __syncwarp();                                   /* read before the next stage's copies land */
    }
    if (whole)
#pragma unroll
        for (int k = 0; k < kPer; k++) f[k].finish(acc[k], r0 + kColRows);
}

/* q = x / d and r = x % d, in 32 bits where both fit (64-bit division is a long software sequence). */
GR_DEV void divmod(u64 x, u64 d, u64 &q, u64 &r) {
    if ((x | d) <= 0xffffffffull) {
        const unsigned x32 = unsigned(x), d32 = unsigned(d);
        q = x32 / d32;
        r = x32 - unsigned(q) * d32;
    } else {
        q = x / d;
        r = x - q * d;
    }
}

/* One block's work for pass-input element type In (the data, or the accumulators of the pass before)
 * with P = kP, written by W (results.cuh's writers) when this pass has one group per column, else into
 * the partials. A block's 256 threads are `tile` column-packs x `tree` runs x groups side by side: the
 * runs of a column fastest when a thread reads along its column (kP == 0: the tree's threads read one
 * stretch of memory), the packs fastest otherwise (a warp's loads are one stretch of a row). tree: the
 * runs a group has (a power of two up to kColTree; fewer only where R is shorter than a group, and then
 * the tree over them is the full one's, its missing runs being identities). blocks: ceil(A x groups /
 * per_block) x ceil(packs / tile), walked by the grid; the groups side by side in a block are
 * consecutive (batch, group) pairs, so short columns of many batches fill the block too. The tree
 * combines every column of a pack at once where their values fit 16 KiB of shared memory. (An earlier
 * tile of rows loaded through shared memory with plain loads measured slower than each thread reading
 * its own run, 46-66% of the read kernel against 66-72% (H200); the staged runs above, copied with
 * cp.async a warp at a time, are faster where a run is one stretch: 87-89% against 64-68%, H100.) */
/* How a pass with P = kP uses shared memory: the tree's values, every column of a pack at once where
 * they fit 16 KiB (the exact moments' accumulators alone take 48 KiB for a block). */
template <int kP, class Op, class In> struct ColShared {
    using Acc = typename Op::acc_t;
    static constexpr u64 kCols = kP > 1 ? kP : 1;       /* columns a thread takes */
    static constexpr int kTreeCols = kColThreads * kCols * sizeof(Acc) <= 16384 ? int(kCols) : 1;
    static constexpr size_t kBytes = kColThreads * kTreeCols * sizeof(Acc);
};

template <int kP, class W, class Op, class In, bool kStaged, bool kLater = false>
GR_DEV void columns_pass(const ColArgs &a, unsigned char *raw) {
    using Acc = typename Op::acc_t;
    using S = ColShared<kP, Op, In>;
    constexpr u64 kCols = S::kCols;
    constexpr int kTreeCols = S::kTreeCols;
    Acc *sm = reinterpret_cast<Acc *>(raw);
    const In *in = static_cast<const In *>(a.in);
    const unsigned tile = unsigned(a.tile), tree = unsigned(a.tree), t = threadIdx.x;
    const bool along = kP == 0;
    const unsigned p = along ? t / tree % tile : t % tile, y = along ? t % tree : t / tile % tree;
    const unsigned v = t / (tile * tree), partner = along ? 1u : tile;     /* y + 1's thread is t + partner */
    const unsigned per_block = kColThreads / (tile * tree);              /* groups side by side */
    const u64 packs = (a.C + kCols - 1) / kCols, tiles = (packs + tile - 1) / tile;
    const u64 groups = (a.R + kColGroupRows - 1) / kColGroupRows, pairs = a.A * groups;   /* (batch, group) */
    const u64 blocks = (pairs + per_block - 1) / per_block * tiles;
    const bool last_pass = groups == 1;
    uint4 *stage = reinterpret_cast<uint4 *>(raw) + (t / 32u) * 32u * kStageVecs;
    for (u64 b = blockIdx.x; b < blocks; b += gridDim.x) {
        u64 xt, pb, ai, g;
        divmod(b, tiles, pb, xt);
        const u64 pair = pb * per_block + v;
        divmod(pair, groups, ai, g);
        const u64 pk = xt * tile + p, c0 = pk * kCols;
        const bool mine = pk < packs && pair < pairs;
        Acc acc[kCols];
#pragma unroll
        for (int k = 0; k < int(kCols); k++) acc[k] = Op::identity();
        const u64 r0 = g * kColGroupRows + u64(y) * kColRows;
        const u64 r1 = !mine || r0 >= a.R ? r0 : r0 + kColRows < a.R ? r0 + kColRows : a.R;
        const In *col = in + (long long)ai * a.sa + (long long)c0 * a.sc;
        if constexpr (kStaged) {
            const In *at = col + (kP == 0 ? (long long)r0 : (long long)r0 * a.sr);
            const bool whole = mine && r1 - r0 == u64(kColRows) && (reinterpret_cast<uptr>(at) & 15) == 0;
            fold_staged<kP, Op>(at, whole, stage, r0, acc);
            if (!whole && r0 < r1) fold_plain<kP, Op>(a, col, r0, r1, acc);
            if (tree > 1) __syncthreads();              /* the tree below reuses the stages' memory */
        } else if (r0 < r1) {
            fold_columns<kP, Op, In, kLater>(a, col, r0, r1, acc);
        }
        /* a pack's sums, whole 16-byte vectors of them, go out as vector stores where they lie side by
         * side and aligned: stored one by one, the lanes 16 or 32 bytes apart, every 32-byte sector of
         * the results was written in 4 or 8 pieces (ncu: 63.2 million sectors to L2 for 8.4 million of
         * bfloat16 sums' results), which held the (2^10, 2^2, 2^16) middle axis to 37% of the
         * read-plus-write limit (94% now, H100). Other results are stored one by one: float32 max took
         * the same stores at 0.89x its time there but 1.1-1.44x on other shapes (performance.md). */
        constexpr bool kVecOut = kCols > 1 && is_same_v<Op, Sum<Acc>> && is_same_v<W, Result<res_acc, Op, In>> &&
                                 is_arithmetic_v<Acc> && (sizeof(Acc) == 4 || sizeof(Acc) == 8) &&
                                 (kCols * sizeof(Acc)) % 16 == 0;
        bool vec_out = false;
        if constexpr (kVecOut)
            vec_out = last_pass && a.oc == 1 && c0 + kCols <= a.C &&
                      (reinterpret_cast<uptr>(static_cast<Acc *>(a.out0) + (ai * a.oa + c0)) & 15) == 0;
        /* the group's tree: y combines with y + d, d = tree / 2 .. 1 (kTreeCols columns of the pack at a
         * time) */
#pragma unroll
        for (int k0 = 0; k0 < int(kCols); k0 += kTreeCols) {
            if (tree > 1) {
#pragma unroll
                for (int k = 0; k < kTreeCols; k++) sm[k * kColThreads + t] = acc[k0 + k];
                __syncthreads();
                for (unsigned d = tree / 2; d > 0; d /= 2) {
                    if (y < d)
#pragma unroll
                        for (int k = 0; k < kTreeCols; k++)
                            sm[k * kColThreads + t] = Op::combine(sm[k * kColThreads + t], sm[k * kColThreads + t + d * partner]);
                    __syncthreads();
                }
#pragma unroll
                for (int k = 0; k < kTreeCols; k++) acc[k0 + k] = sm[k * kColThreads + t];
                __syncthreads();
            }
#pragma unroll
            for (int k = 0; k < kTreeCols; k++) {
                const u64 c = c0 + u64(k0 + k);
                if (y == 0 && mine && c < a.C && !vec_out) {
                    if (last_pass) W::write(acc[k0 + k], a.n, a.ddof, a.out0, a.out1, size_t(ai * a.oa + c * a.oc));
                    else static_cast<Acc *>(a.partials)[(ai * groups + g) * a.C + c] = acc[k0 + k];
                }
            }
        }
        if constexpr (kVecOut) {
            if (vec_out && y == 0 && mine) {
                uint4 *to = reinterpret_cast<uint4 *>(static_cast<Acc *>(a.out0) + (ai * a.oa + c0));
#pragma unroll
                for (int v = 0; v < int(kCols * sizeof(Acc) / 16); v++) {
                    uint4 w;
                    if constexpr (sizeof(Acc) == 4) {
                        w.x = bit_cast<unsigned>(acc[4 * v]), w.y = bit_cast<unsigned>(acc[4 * v + 1]);
                        w.z = bit_cast<unsigned>(acc[4 * v + 2]), w.w = bit_cast<unsigned>(acc[4 * v + 3]);
                    } else {
                        const u64 lo = bit_cast<u64>(acc[2 * v]), hi = bit_cast<u64>(acc[2 * v + 1]);
                        w.x = unsigned(lo), w.y = unsigned(lo >> 32), w.z = unsigned(hi), w.w = unsigned(hi >> 32);
                    }
                    to[v] = w;
                }
            }
        }
    }
}

/* The first pass (kData: In is the data) with its pack size chosen at run time, or a later one (In: the
 * accumulators, one column a thread). One shared buffer, as large as the largest pass's, serves them all
 * (each function's own array would add up past the 48 KiB a block may have). kStaged: a first pass whose
 * runs are read staged (a.staged > 0), a kernel of its own: the stages' registers in the kernel every
 * layout takes held it to two blocks an SM (128 registers a thread; argmax 168), which made argmax and
 * var down wide columns 1.7x slower (H200). */
template <class W, class Op, class In, bool kData, bool kStaged = false> GR_DEV void columns_body(const ColArgs &a) {
    constexpr size_t k0 = ColShared<0, Op, In>::kBytes, k1 = ColShared<1, Op, In>::kBytes;
    constexpr size_t k2 = ColShared<2, Op, In>::kBytes, k4 = ColShared<4, Op, In>::kBytes;
    constexpr size_t k8 = ColShared<8, Op, In>::kBytes;
    constexpr size_t kData01 = k0 > k1 ? k0 : k1, kData24 = k2 > k4 ? k2 : k4;
    constexpr size_t kAll = kData01 > kData24 ? (kData01 > k8 ? kData01 : k8) : (kData24 > k8 ? kData24 : k8);
    constexpr size_t k16 = ColShared<16, Op, In>::kBytes, kTrees = kAll > k16 ? kAll : k16;
    constexpr size_t kStagedAll = kTrees > kStageBytes ? kTrees : kStageBytes;
    __shared__ __align__(16) unsigned char raw[!kData ? k1 : kStaged ? kStagedAll : kAll];
    if constexpr (kStaged) {
        /* the staged forms: rows of up to 32 bytes (the packs of 32-byte rows exist only here) */
        static_assert(kData && may_stage(int(sizeof(In))), "only a first pass of 2- to 8-byte elements stages");
        switch (a.pack) {
        case 0: return columns_pass<0, W, Op, In, true>(a, raw);
        case 2: return columns_pass<2, W, Op, In, true>(a, raw);
        case 4: if constexpr (sizeof(In) <= 4 || kRowOf32<Op, In>) return columns_pass<4, W, Op, In, true>(a, raw); else break;
        case 8: if constexpr (sizeof(In) == 2 || (sizeof(In) == 4 && kRowOf32<Op, In>)) return columns_pass<8, W, Op, In, true>(a, raw); else break;
        case 16: if constexpr (sizeof(In) == 2 && kRowOf32<Op, In>) return columns_pass<16, W, Op, In, true>(a, raw); else break;
        default: break;
        }
        __trap();                                       /* the host stages only the forms above */
    } else {
        if constexpr (kData && sizeof(In) <= 8) {
            switch (a.pack) {
            case 0: return columns_pass<0, W, Op, In, false>(a, raw);
            case 2: return columns_pass<2, W, Op, In, false>(a, raw);
            case 4: if constexpr (sizeof(In) <= 4) return columns_pass<4, W, Op, In, false>(a, raw); else break;
            case 8: if constexpr (sizeof(In) <= 2) return columns_pass<8, W, Op, In, false>(a, raw); else break;
            default: break;
            }
        }
        columns_pass<1, W, Op, In, false, !kData>(a, raw);
    }
}

}  // namespace gr
