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
 * Narrow rows (C * element < 16 bytes, rows back to back) are read a vector of several rows at a time
 * (P = C, the vector's q = 16 / (C * element) rows in order), so a (2^27, 2) matrix reads 16 bytes a load.
 * A block's 256 threads are 8 rows of up to 32 column-packs (lanes along the columns: the loads of a warp
 * are one run of memory when C is wide) and, where the columns are fewer, several groups side by side.
 * Reads the input only. NVRTC-clean (core.cuh).
 */
#pragma once

#include "core.cuh"
#include "ops.cuh"

namespace gr {

constexpr int kColThreads = 256;                        /* a block */
constexpr int kColRows = 32;                            /* rows a thread folds in order */
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
    int tile;                   /* column-packs side by side in a block: a power of two up to 32 */
};

/* Folds rows [r0, r1) of P = kP adjacent columns starting at column c0 into acc[0..kP): kP == 1 reads
 * element by element, else 16-byte (8-byte for 1-byte types) vectors of q = kV / kP rows. r0 is a
 * multiple of q (runs start at multiples of kColRows); the last vector may pass r1 only where the rows
 * run out, and is then read element by element. */
template <int kP, class Op, class In>
GR_DEV void fold_columns(const ColArgs &a, const In *base, u64 r0, u64 r1, typename Op::acc_t *acc) {
    if constexpr (kP == 0) {
        /* one column along contiguous rows (a row reduction seen as columns): vectors along r, in order */
        constexpr int kV = 16 / int(sizeof(In));
        struct alignas(16) Vec { In v[kV]; };
        u64 r = r0;
        if ((reinterpret_cast<uptr>(base + r0) & 15) == 0)
            for (; r + kV <= r1; r += kV) {
                const Vec w = *reinterpret_cast<const Vec *>(base + r);
#pragma unroll
                for (int e = 0; e < kV; e++) {
                    if constexpr (Op::kIndexed) acc[0] = Op::combine(acc[0], Op::load(w.v[e], r + e));
                    else acc[0] = Op::combine(acc[0], Op::load(w.v[e]));
                }
            }
        for (; r < r1; r++) {
            if constexpr (Op::kIndexed) acc[0] = Op::combine(acc[0], Op::load(base[r], r));
            else acc[0] = Op::combine(acc[0], Op::load(base[r]));
        }
    } else if constexpr (kP == 1) {
        for (u64 r = r0; r < r1; r++) {
            const In x = base[(long long)r * a.sr];
            if constexpr (Op::kIndexed) acc[0] = Op::combine(acc[0], Op::load(x, r));
            else acc[0] = Op::combine(acc[0], Op::load(x));
        }
    } else {
        constexpr int kBytes = sizeof(In) == 1 ? 8 : 16;
        constexpr int kV = kBytes / int(sizeof(In));
        constexpr int q = kV / kP;                      /* rows per vector */
        struct alignas(kBytes) Vec { In v[kV]; };
        u64 r = r0;
        for (; r + q <= r1; r += q) {
            const Vec w = *reinterpret_cast<const Vec *>(base + (long long)r * a.sr);
#pragma unroll
            for (int e = 0; e < kV; e++) {
                if constexpr (Op::kIndexed) acc[e % kP] = Op::combine(acc[e % kP], Op::load(w.v[e], r + e / kP));
                else acc[e % kP] = Op::combine(acc[e % kP], Op::load(w.v[e]));
            }
        }
        for (; r < r1; r++)
#pragma unroll
            for (int k = 0; k < kP; k++) {
                const In x = base[(long long)r * a.sr + k];
                if constexpr (Op::kIndexed) acc[k] = Op::combine(acc[k], Op::load(x, r));
                else acc[k] = Op::combine(acc[k], Op::load(x));
            }
    }
}

/* One block's work for pass-input element type In (the data, or the accumulators of the pass before)
 * with P = kP, written by W (results.cuh's writers) when this pass has one group per column, else into
 * the partials. blocks: A x ceil(groups / per_block) x ceil(packs / tile), walked by the grid. */
template <int kP, class W, class Op, class In>
GR_DEV void columns_pass(const ColArgs &a) {
    using Acc = typename Op::acc_t;
    __shared__ __align__(16) unsigned char raw[kColThreads * sizeof(Acc)];
    Acc *sm = reinterpret_cast<Acc *>(raw);
    const In *in = static_cast<const In *>(a.in);
    const unsigned tile = unsigned(a.tile), t = threadIdx.x;
    const unsigned p = t % tile, j = t / tile, y = j % kColTree, v = j / kColTree;
    const unsigned per_block = kColThreads / (tile * kColTree);         /* groups side by side */
    constexpr u64 kCols = kP > 1 ? kP : 1;              /* columns a thread takes */
    const u64 packs = (a.C + kCols - 1) / kCols, tiles = (packs + tile - 1) / tile;
    const u64 groups = (a.R + kColGroupRows - 1) / kColGroupRows;
    const u64 gblocks = (groups + per_block - 1) / per_block;
    const u64 blocks = a.A * gblocks * tiles;
    const bool last_pass = groups == 1;
    for (u64 b = blockIdx.x; b < blocks; b += gridDim.x) {
        const u64 xt = b % tiles, rest = b / tiles, gb = rest % gblocks, ai = rest / gblocks;
        const u64 pk = xt * tile + p, g = gb * per_block + v, c0 = pk * kCols;
        Acc acc[kCols];
#pragma unroll
        for (int k = 0; k < int(kCols); k++) acc[k] = Op::identity();
        if (pk < packs && g < groups) {
            const u64 r0 = g * kColGroupRows + u64(y) * kColRows;
            const u64 r1 = r0 + kColRows < a.R ? r0 + kColRows : a.R;
            if (r0 < r1) fold_columns<kP, Op>(a, in + (long long)ai * a.sa + (long long)c0 * a.sc, r0, r1, acc);
        }
        /* the group's tree, one column of the pack at a time: y combines with y + d for d = 4, 2, 1 */
#pragma unroll
        for (int k = 0; k < int(kCols); k++) {
            sm[t] = acc[k];
            __syncthreads();
            for (unsigned d = kColTree / 2; d > 0; d /= 2) {
                if (y < d) sm[t] = Op::combine(sm[t], sm[t + d * tile]);
                __syncthreads();
            }
            const u64 c = c0 + u64(k);
            if (y == 0 && pk < packs && g < groups && c < a.C) {
                if (last_pass) W::write(sm[t], a.n, a.ddof, a.out0, a.out1, size_t(ai * a.oa + c * a.oc));
                else static_cast<Acc *>(a.partials)[(ai * groups + g) * a.C + c] = sm[t];
            }
            __syncthreads();
        }
    }
}

/* The first pass (kData: In is the data) with its pack size chosen at run time, or a later one (In: the
 * accumulators, one column a thread). */
template <class W, class Op, class In, bool kData> GR_DEV void columns_body(const ColArgs &a) {
    if constexpr (kData && sizeof(In) <= 8) {
        switch (a.pack) {
        case 0: return columns_pass<0, W, Op, In>(a);
        case 2: return columns_pass<2, W, Op, In>(a);
        case 4: if constexpr (sizeof(In) <= 4) return columns_pass<4, W, Op, In>(a); else break;
        case 8: if constexpr (sizeof(In) <= 2) return columns_pass<8, W, Op, In>(a); else break;
        default: break;
        }
    }
    columns_pass<1, W, Op, In>(a);
}

}  // namespace gr
