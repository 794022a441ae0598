/*
 * runs.cuh -- one pass over keys whose equal values are consecutive (runs) and the values beside them:
 * each run's key and its op's result written at the run's rank, with no offsets in between. What a
 * reduction by key over grouped (or freshly sorted) keys runs (cuda/kernels/by_key.cu); it replaces the
 * run-length encoding, the scan of the lengths and the segmented pass over them, which read the keys and
 * the values in separate passes and synchronised between them.
 *
 * A block takes a tile of kRunThreads * Items elements (tiles in the order blocks start, through a
 * counter), each thread Items consecutive ones (8 or 16: a template argument, so that one device run can
 * compare both). A head is an element whose key differs from the one before it.
 *   - Keys are read once, as words of their width, into a head mask; the key before a thread's first item
 *     is the previous lane's last (a shuffle), lane 0's a load. Only heads' keys are read again, where
 *     they are written: no key word stays live through the scans.
 *   - The ranks: a head's rank is the number of heads before it. Within the block a scan of the threads'
 *     head counts; across tiles the count of the tiles before, by runs_lookback.cuh's chained scan of
 *     integers, so it is exact whatever the timing. A tile publishes its count right after the first
 *     barrier, before it looks back itself.
 *   - A tile without a head (most tiles where groups are long) folds its values, leaves the fold in
 *     `lead`, publishes a count of 0 and is done: it never waits for the tiles before it.
 *   - The values: a thread folds its items in order; the open run a thread starts in comes from an
 *     exclusive segmented scan over the threads (a part with a head replaces what came before it, one
 *     without extends it). Its shape depends on the tile's geometry alone, so the results are the same
 *     bits every run -- no partial accumulator crosses tiles through the look-back, whose combination
 *     order would depend on which tiles had published. No fold starts from the op's identity (parts know
 *     when they are empty), so a run of -0.0 sums to -0.0.
 *   - A run that ends in its head's tile is written there. One that goes on past the tile leaves its part
 *     (its accumulator, start and rank) in `tail`; every tile leaves the part before its first head in
 *     `lead`. runs_fixup.cuh then folds, for each run that crossed tiles, its head tile's tail with the
 *     leads of the tiles it covers, in a fixed order, and counts the runs.
 * Keys are words of 1, 2, 4 or 8 bytes compared for equality (the width a run-time argument: one kernel
 * per op and dtype, not four); `flip` makes their unsigned order the keys' (the sign bit of signed keys),
 * for the check that runs ascend. Results and keys are written for ranks below `capacity` only (a caller
 * that sizes them by the keys' range learns from the check where runs repeat a key). Reads the keys and
 * values only.
 */
#pragma once

#include "runs_lookback.cuh"
#include "warp_block.cuh"

namespace gr {

constexpr int kRunThreads = 256, kRunWarps = kRunThreads / 32;
/* The smallest tile (8 items a thread): the engine sizes the scratch for it (GR_RUN_TILE). */
constexpr int kRunTileMin = kRunThreads * 8;

/* One pass: engine/base/launch.h's gr_runs_launch, as the kernel takes it. */
struct RunArgs {
    const void *keys;
    int kbytes;
    u64 flip;
    const void *values;
    u64 n;
    bool aligned;
    void *keys_out;
    void *out0, *out1;
    u64 capacity;
    int ddof;
    void *scratch;
    u64 acc_bytes;
    u64 *runs;
    unsigned *disorder;
};

/* The scratch of one launch, laid out as gr_runs_scratch_bytes counts it (engine/base/launch.h) for the
 * smallest tile; a larger tile uses the first part of each array. */
template <class Acc> struct RunScratch {
    u64 *status;                /* [0] the tile counter, [1 + t] tile t's look-back word; zero before */
    long long *first_head;      /* tile t's first head, -1 where it has none */
    long long *tail_start;      /* where the run crossing tile t's end starts */
    long long *tail_rank;       /* its rank, -1 where no run of tile t goes past its end */
    Acc *lead;                  /* tile t's elements before its first head (all of them without one) */
    Acc *tail;                  /* the crossing run's elements in tile t */
};

template <class Acc> GR_DEV RunScratch<Acc> run_scratch(void *base, u64 tiles, size_t acc_bytes) {
    char *p = static_cast<char *>(base);
    RunScratch<Acc> s;
    s.status = reinterpret_cast<u64 *>(p);
    p += (tiles + 1) * 8;
    s.first_head = reinterpret_cast<long long *>(p);
    s.tail_start = s.first_head + tiles;
    s.tail_rank = s.tail_start + tiles;
    p += 3 * tiles * 8;
    s.lead = reinterpret_cast<Acc *>(p);
    s.tail = reinterpret_cast<Acc *>(p + tiles * acc_bytes);
    return s;
}

/* N elements of T from p, aligned to their whole size up to 16 bytes: in 16- or 8-byte loads. */
template <class T, int N> GR_DEV void load_run(const T *p, T (&x)[N]) {
    constexpr int bytes = N * int(sizeof(T));
    if constexpr (bytes % 16 == 0) {
        uint4 v[bytes / 16];
#pragma unroll
        for (int i = 0; i < bytes / 16; i++) v[i] = reinterpret_cast<const uint4 *>(p)[i];
        memcpy(x, v, bytes);
    } else if constexpr (bytes % 8 == 0) {
        uint2 v[bytes / 8];
#pragma unroll
        for (int i = 0; i < bytes / 8; i++) v[i] = reinterpret_cast<const uint2 *>(p)[i];
        memcpy(x, v, bytes);
    } else {
#pragma unroll
        for (int i = 0; i < N; i++) x[i] = p[i];
    }
}

/* Where thread threadIdx.x's items of tile t lie, and how many it has. */
template <int Items> struct RunSpan {
    static constexpr int kTile = kRunThreads * Items;
    u64 start, m, pos0;
    int items;
    GR_DEV RunSpan(u64 t, u64 n) {
        start = t * kTile;
        m = n - start < u64(kTile) ? n - start : u64(kTile);
        const u64 mine = u64(threadIdx.x) * Items;
        pos0 = start + mine;
        items = mine >= m ? 0 : m - mine >= u64(Items) ? Items : int(m - mine);
    }
};

/* This thread's elements of an input: whole vectors where it has all of its items and the inputs are
 * aligned (the tile's geometry, not the path, decides every fold: both give the same bits). */
template <class T, int Items> GR_DEV void load_items(const T *base, const RunSpan<Items> &r, bool aligned, T (&x)[Items]) {
    if (r.items == Items && aligned) {
        load_run(base + r.pos0, x);
    } else {
#pragma unroll
        for (int j = 0; j < Items; j++) x[j] = j < r.items ? base[r.pos0 + j] : T{};
    }
}

/* This thread's heads (bit j: item j's key differs from the one before it; element 0 is one), from keys
 * of type K; *disorder set where a head's key is below the one before it. */
template <class K, int Items> GR_DEV unsigned heads_of(const RunArgs &a, const RunSpan<Items> &r, unsigned lane) {
    const K *keys = static_cast<const K *>(a.keys);
    const K edge = lane == 0 && r.items && r.pos0 ? keys[r.pos0 - 1] : K(0);
    K k[Items];
    load_items(keys, r, a.aligned, k);
    /* the previous lane holds all its items wherever this one has any */
    const K up = shfl_up(k[Items - 1], 1);
    K prev = lane ? up : edge;
    const K flip = K(a.flip);
    unsigned heads = 0;
    bool descends = false;
#pragma unroll
    for (int j = 0; j < Items; j++) {
        if (j < r.items && (k[j] != prev || r.pos0 + j == 0)) {
            heads |= 1u << j;
            descends |= r.pos0 + j > 0 && K(k[j] ^ flip) < K(prev ^ flip);
        }
        prev = k[j];
    }
    if (descends) atomicOr(a.disorder, 1u);
    return heads;
}

template <int Items> GR_DEV unsigned tile_heads(const RunArgs &a, const RunSpan<Items> &r, unsigned lane) {
    switch (a.kbytes) {
    case 1: return heads_of<u8>(a, r, lane);
    case 2: return heads_of<unsigned short>(a, r, lane);
    case 4: return heads_of<unsigned>(a, r, lane);
    default: return heads_of<u64>(a, r, lane);
    }
}

/* The heads' keys (read again: L1 or L2 holds them) at their ranks, from `rank` on. */
template <class K, int Items>
GR_DEV void store_head_keys(const RunArgs &a, const RunSpan<Items> &r, unsigned heads, u64 rank) {
    K k[Items];
    load_items(static_cast<const K *>(a.keys), r, a.aligned, k);
#pragma unroll
    for (int j = 0; j < Items; j++) {
        if ((heads >> j) & 1u) {
            if (rank < a.capacity) static_cast<K *>(a.keys_out)[rank] = k[j];
            rank++;
        }
    }
}

template <int Items> GR_DEV void tile_keys_out(const RunArgs &a, const RunSpan<Items> &r, unsigned heads, u64 rank) {
    switch (a.kbytes) {
    case 1: store_head_keys<u8>(a, r, heads, rank); break;
    case 2: store_head_keys<unsigned short>(a, r, heads, rank); break;
    case 4: store_head_keys<unsigned>(a, r, heads, rank); break;
    default: store_head_keys<u64>(a, r, heads, rank); break;
    }
}

/* A thread's part of the open run. start: the tile-relative position of its last head; kNoHead where it
 * has elements but no head, kEmpty where it has no elements (then acc is nothing). */
constexpr int kNoHead = -1, kEmpty = -2;
template <class Acc> struct RunPart {
    Acc acc;
    int start;
};

/* a then b: b alone where it has a head or a is empty, a alone where b is empty. */
template <class Op> GR_DEV RunPart<typename Op::acc_t> join_parts(const RunPart<typename Op::acc_t> &a,
                                                                 const RunPart<typename Op::acc_t> &b) {
    if (b.start >= 0 || a.start == kEmpty) return b;
    if (b.start == kEmpty) return a;
    return {Op::combine(a.acc, b.acc), a.start};
}

template <class Acc> GR_DEV RunPart<Acc> shfl_up_part(const RunPart<Acc> &p, unsigned d) {
    return {shfl_up(p.acc, d), __shfl_up_sync(kFullMask, p.start, d)};
}

/* One tile per block, in the order blocks take them from a counter (the look-back's order). */
template <class W, class Op, class In, int Items> GR_DEV void runs_body(const RunArgs &a) {
    using Acc = typename Op::acc_t;
    using Part = RunPart<Acc>;
    constexpr int kTile = RunSpan<Items>::kTile;
    const u64 n = a.n, tiles = (n + kTile - 1) / kTile;
    const RunScratch<Acc> sc = run_scratch<Acc>(a.scratch, tiles, a.acc_bytes);
    __shared__ u64 tile_s, before_s;
    __shared__ Part warp_parts[kRunWarps];
    __shared__ unsigned warp_counts[kRunWarps];
    if (threadIdx.x == 0) tile_s = atomicAdd(reinterpret_cast<unsigned long long *>(sc.status), 1ull);
    __syncthreads();
    const u64 t = tile_s;
    const RunSpan<Items> r(t, n);
    const unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int rel0 = int(threadIdx.x) * Items;          /* this thread's first item, in the tile */
    In v[Items];
    load_items(static_cast<const In *>(a.values), r, a.aligned, v);
    const unsigned heads = tile_heads(a, r, lane);

    /* this thread's part: from its last head on, or all of its items without one */
    const int last = heads ? 31 - __clz(int(heads)) : -1;
    Part part = {Op::identity(), last >= 0 ? rel0 + last : r.items ? kNoHead : kEmpty};
    const int from = last > 0 ? last : 0;
#pragma unroll
    for (int j = 0; j < Items; j++)
        if (j < r.items && j >= from) part.acc = j == from ? Op::load(v[j]) : Op::combine(part.acc, Op::load(v[j]));

    /* the warps' scans: the open run each thread starts in, and the heads before each thread */
    const unsigned count = __popc(heads);
    Part incl = part;
    unsigned incl_count = count;
#pragma unroll
    for (unsigned d = 1; d < 32; d <<= 1) {
        const Part up = shfl_up_part(incl, d);
        const unsigned up_count = __shfl_up_sync(kFullMask, incl_count, d);
        if (lane >= d) {
            incl = join_parts<Op>(up, incl);
            incl_count += up_count;
        }
    }
    if (lane == 31) {
        warp_parts[warp] = incl;
        warp_counts[warp] = incl_count;
    }
    const Part up = shfl_up_part(incl, 1);
    const unsigned up_count = __shfl_up_sync(kFullMask, incl_count, 1);
    __syncthreads();
    unsigned block_count = 0;
#pragma unroll
    for (int k = 0; k < kRunWarps; k++) block_count += warp_counts[k];

    if (block_count == 0) {
        /* no head (never tile 0): the whole tile belongs to a run from before; nothing to wait for */
        if (threadIdx.x == 0) {
            Part all = warp_parts[0];
#pragma unroll
            for (int k = 1; k < kRunWarps; k++) all = join_parts<Op>(all, warp_parts[k]);
            sc.lead[t] = all.acc;
            sc.first_head[t] = -1;
            sc.tail_rank[t] = -1;
            publish_count(sc.status, t, 0);
        }
        return;
    }
    if (warp == 0) {
        if (lane == 0) publish_count(sc.status, t, block_count);
        const u64 before = t ? look_back(sc.status, t, block_count, lane) : 0;
        if (lane == 0) before_s = before;
    }
    Part carry = {Op::identity(), kEmpty};
    unsigned before_thread = 0;
    for (unsigned k = 0; k < warp; k++) {
        carry = join_parts<Op>(carry, warp_parts[k]);
        before_thread += warp_counts[k];
    }
    if (lane > 0) {
        carry = join_parts<Op>(carry, up);
        before_thread += up_count;
    }
    __syncthreads();

    /* the runs: each closed where the next head is, written at its rank */
    const u64 first_rank = before_s + before_thread;   /* the rank of this thread's first head */
    u64 rank = first_rank;                              /* the rank of this thread's next head */
    Acc cur = carry.acc;
    int cur_start = carry.start;
#pragma unroll
    for (int j = 0; j < Items; j++) {
        if (j >= r.items) break;
        const int rel = rel0 + j;
        if ((heads >> j) & 1u) {
            if (cur_start >= 0) {
                if (rank - 1 < a.capacity) W::write(cur, u64(rel - cur_start), a.ddof, a.out0, a.out1, size_t(rank - 1));
            } else {            /* the tile's first head: what came before it belongs to a run of tiles before */
                sc.lead[t] = cur;
                sc.first_head[t] = (long long)(r.start + rel);
            }
            rank++;
            cur = Op::load(v[j]);
            cur_start = rel;
        } else {
            cur = cur_start == kEmpty ? Op::load(v[j]) : Op::combine(cur, Op::load(v[j]));
            if (cur_start == kEmpty) cur_start = kNoHead;
        }
    }
    if (a.keys_out && heads) tile_keys_out(a, r, heads, first_rank);
    /* the tile's last element's thread: the run it ends in (the tile has a head, so cur_start >= 0) */
    if (r.items && u64(rel0 + r.items) == r.m) {
        if (r.start + r.m == n) {
            if (rank - 1 < a.capacity) W::write(cur, r.m - u64(cur_start), a.ddof, a.out0, a.out1, size_t(rank - 1));
            sc.tail_rank[t] = -1;
        } else {                /* whether it ends at the tile's end: the fixup sees the next tile's first head */
            sc.tail[t] = cur;
            sc.tail_start[t] = (long long)(r.start + u64(cur_start));
            sc.tail_rank[t] = (long long)(rank - 1);
        }
    }
}

}  // namespace gr
