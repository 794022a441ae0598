/*
 * runs.cuh -- one pass over keys whose equal values are consecutive (runs) and the values beside them:
 * each run's key and its op's result written at the run's rank, with no offsets in between. What a
 * reduction by key over grouped (or freshly sorted) keys runs (cuda/kernels/by_key.cu); it replaces the
 * run-length encoding, the scan of the lengths and the segmented pass over them, which read the keys and
 * the values in separate passes and synchronised between them.
 *
 * A block takes a tile of kRunTile elements (tiles in the order blocks start, through a counter), each
 * thread kRunItems consecutive ones. A head is an element whose key differs from the one before it.
 *   - The ranks: a head's rank is the number of heads before it. Within the block an exclusive scan of
 *     the threads' head counts; across tiles the count of the tiles before, by a single-pass chained scan
 *     (decoupled look-back, as CUB's scans do) over integers only, so it is exact whatever the timing.
 *   - The values: a thread folds its items in order; the open run a thread starts in comes from an
 *     exclusive segmented scan over the threads (a part with a head replaces what came before it, one
 *     without extends it). Its shape depends on the tile's geometry alone, so the results are the same
 *     bits every run -- no partial accumulator crosses tiles through the look-back, whose combination
 *     order would depend on which tiles had published.
 *   - A run that ends in its head's tile is written there. One that goes on past the tile leaves its part
 *     (its accumulator, start and rank) in `tail`; every tile leaves the part before its first head in
 *     `lead`. runs_fixup then folds, for each run that crossed tiles, its head tile's tail with the leads
 *     of the tiles it covers, in a fixed order.
 * Keys are words of 1, 2, 4 or 8 bytes compared for equality (the width a run-time argument: one kernel
 * per op and dtype, not four); `flip` makes their unsigned order the keys' (the sign bit of signed keys),
 * for the check that runs ascend. Results and keys are written for ranks below `capacity` only (a caller
 * that sizes them by the keys' range learns from the check where runs repeat a key). Reads the keys and
 * values only.
 */
#pragma once

#include "warp_block.cuh"

namespace gr {

constexpr int kRunThreads = 256, kRunItems = 8, kRunTile = kRunThreads * kRunItems;
static_assert(kRunItems == 8, "the key loads below read eight words a thread");

/* A look-back word: the status in the top two bits, the head count below. */
constexpr u64 kRunAggregate = 1ull << 62, kRunPrefix = 2ull << 62, kRunCount = (1ull << 62) - 1;

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

/* The scratch of one launch, laid out as gr_runs_scratch_bytes counts it (engine/base/launch.h). */
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

/* Key word i of width kbytes. */
GR_DEV u64 key_word(const void *keys, u64 i, int kbytes) {
    switch (kbytes) {
    case 1: return static_cast<const u8 *>(keys)[i];
    case 2: return static_cast<const unsigned short *>(keys)[i];
    case 4: return static_cast<const unsigned *>(keys)[i];
    default: return static_cast<const u64 *>(keys)[i];
    }
}

GR_DEV void store_key_word(void *keys, u64 i, u64 w, int kbytes) {
    switch (kbytes) {
    case 1: static_cast<u8 *>(keys)[i] = u8(w); break;
    case 2: static_cast<unsigned short *>(keys)[i] = (unsigned short)w; break;
    case 4: static_cast<unsigned *>(keys)[i] = unsigned(w); break;
    default: static_cast<u64 *>(keys)[i] = w; break;
    }
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

template <class W> GR_DEV void widen_keys(const W *p, u64 (&w)[kRunItems]) {
    W k[kRunItems];
    load_run(p, k);
#pragma unroll
    for (int i = 0; i < kRunItems; i++) w[i] = u64(k[i]);
}

/* A thread's part of the open run: `has` where a head lies in it (then start is the head's position). */
template <class Acc> struct RunPart {
    Acc acc;
    long long start;
    int has;
};

template <class Op> GR_DEV RunPart<typename Op::acc_t> join_parts(const RunPart<typename Op::acc_t> &a,
                                                                 const RunPart<typename Op::acc_t> &b) {
    if (b.has) return b;
    return {Op::combine(a.acc, b.acc), a.start, a.has};
}

template <class Acc> GR_DEV RunPart<Acc> shfl_up_part(const RunPart<Acc> &p, unsigned d) {
    return {shfl_up(p.acc, d), __shfl_up_sync(kFullMask, p.start, d), __shfl_up_sync(kFullMask, p.has, d)};
}

/* The head count of the tiles before tile t, by the block's first warp, which publishes tile t's own count
 * first: its lanes read 32 tiles' words at a time, back from t - 1, waiting for each until it is published,
 * and add the counts up to the nearest tile whose inclusive count is there. Returned to lane 0. (Lanes that
 * read 8 words each, 256 a round, measured slower on an H100: 0.77 against 0.59 ms a pass over 2^26.) */
GR_DEV u64 look_back(u64 *status, u64 t, u64 count, unsigned lane) {
    volatile u64 *word = status + 1;
    if (t == 0) {
        if (lane == 0) word[0] = kRunPrefix | count;
        return 0;
    }
    if (lane == 0) word[t] = kRunAggregate | count;
    u64 before = 0;
    for (long long top = (long long)t - 1;; top -= 32) {
        const long long p = top - (long long)lane;
        u64 s = p >= 0 ? u64(word[p]) : u64(kRunPrefix);    /* before tile 0: a count of none */
        while (__any_sync(kFullMask, s == 0))
            if (s == 0) s = word[p];
        const unsigned prefixes = __ballot_sync(kFullMask, (s & kRunPrefix) != 0);
        const unsigned stop = prefixes ? unsigned(__ffs(int(prefixes)) - 1) : 31u;
        u64 c = lane <= stop ? (s & kRunCount) : 0;
#pragma unroll
        for (unsigned d = 16; d > 0; d >>= 1) c += __shfl_xor_sync(kFullMask, c, d);
        before += c;
        if (prefixes) break;
    }
    if (lane == 0) word[t] = kRunPrefix | (before + count);
    return before;
}

/* Where thread threadIdx.x's items of tile t lie, and how many it has. */
struct RunSpan {
    u64 start, m, pos0;
    int items;
    GR_DEV RunSpan(u64 t, u64 n) {
        start = t * kRunTile;
        m = n - start < u64(kRunTile) ? n - start : u64(kRunTile);
        const u64 mine = u64(threadIdx.x) * kRunItems;
        pos0 = start + mine;
        items = mine >= m ? 0 : m - mine >= u64(kRunItems) ? kRunItems : int(m - mine);
    }
};

/* This thread's keys (as words) and values of a tile: whole vectors where it has all of its items and
 * the inputs are aligned. */
template <class In> GR_DEV void load_tile(const RunArgs &a, const RunSpan &r, u64 (&w)[kRunItems], In (&v)[kRunItems]) {
    const In *vals = static_cast<const In *>(a.values);
    if (r.items == kRunItems && a.aligned) {
        switch (a.kbytes) {
        case 1: widen_keys(static_cast<const u8 *>(a.keys) + r.pos0, w); break;
        case 2: widen_keys(static_cast<const unsigned short *>(a.keys) + r.pos0, w); break;
        case 4: widen_keys(static_cast<const unsigned *>(a.keys) + r.pos0, w); break;
        default: widen_keys(static_cast<const u64 *>(a.keys) + r.pos0, w); break;
        }
        load_run(vals + r.pos0, v);
    } else {
#pragma unroll
        for (int j = 0; j < kRunItems; j++) {
            w[j] = j < r.items ? key_word(a.keys, r.pos0 + j, a.kbytes) : 0;
            v[j] = j < r.items ? vals[r.pos0 + j] : In{};
        }
    }
}

/* Tile t, whose items this thread holds in w and v. */
template <class W, class Op, class In>
GR_DEV void run_tile(const RunArgs &a, const RunScratch<typename Op::acc_t> &sc, u64 t, const RunSpan &r,
                     const u64 (&w)[kRunItems], const In (&v)[kRunItems]) {
    using Acc = typename Op::acc_t;
    using Part = RunPart<Acc>;
    const u64 n = a.n, tiles = (n + kRunTile - 1) / kRunTile;
    __shared__ u64 before_s;
    __shared__ Part warp_parts[kRunThreads / 32];
    __shared__ unsigned warp_counts[kRunThreads / 32];
    const u64 start = r.start, m = r.m, pos0 = r.pos0;
    const int items = r.items;
    /* heads, and the check that runs ascend (a key below the one before it) */
    unsigned heads = 0;
    if (items) {
        u64 prev = pos0 ? key_word(a.keys, pos0 - 1, a.kbytes) : ~w[0];
        bool descends = false;
#pragma unroll
        for (int j = 0; j < kRunItems; j++) {
            if (j < items && w[j] != prev) {
                heads |= 1u << j;
                descends |= pos0 + j > 0 && (w[j] ^ a.flip) < (prev ^ a.flip);
            }
            prev = w[j];
        }
        if (descends) atomicOr(a.disorder, 1u);
    }
    const int first = heads ? __ffs(int(heads)) - 1 : kRunItems, last = heads ? 31 - __clz(int(heads)) : -1;

    /* this thread's part: from its last head on, or all of it without a head */
    Part part = {Op::identity(), last >= 0 ? (long long)(pos0 + last) : -1, heads != 0};
#pragma unroll
    for (int j = 0; j < kRunItems; j++)
        if (j < items && j >= last) part.acc = Op::combine(part.acc, Op::load(v[j]));

    /* the block's scans: the open run each thread starts in, and the heads before each thread */
    const unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
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
    Part carry = {Op::identity(), -1, 0};
    unsigned before_thread = 0, block_count = 0;
    for (unsigned k = 0; k < kRunThreads / 32; k++) {
        if (k < warp) {
            carry = join_parts<Op>(carry, warp_parts[k]);
            before_thread += warp_counts[k];
        }
        block_count += warp_counts[k];
    }
    if (lane > 0) {
        carry = join_parts<Op>(carry, up);
        before_thread += up_count;
    }
    if (warp == 0) {
        const u64 before = look_back(sc.status, t, block_count, lane);
        if (lane == 0) {
            before_s = before;
            if (t == tiles - 1) *a.runs = before + block_count;
        }
    }
    __syncthreads();

    /* the runs: each closed where the next head is, written at its rank */
    u64 rank = before_s + before_thread;           /* the rank of this thread's next head */
    Acc cur = carry.acc;
    long long cur_start = carry.start;
    bool cur_has = carry.has != 0;
#pragma unroll
    for (int j = 0; j < kRunItems; j++) {
        if (j >= items) break;
        const u64 pos = pos0 + j;
        if ((heads >> j) & 1u) {
            if (cur_has) {
                if (rank - 1 < a.capacity)
                    W::write(cur, pos - u64(cur_start), a.ddof, a.out0, a.out1, size_t(rank - 1));
            } else {            /* the tile's first head: what came before it belongs to a run of tiles before */
                sc.lead[t] = cur;
                sc.first_head[t] = (long long)pos;
            }
            if (a.keys_out && rank < a.capacity) store_key_word(a.keys_out, rank, w[j], a.kbytes);
            rank++;
            cur = Op::load(v[j]);
            cur_start = (long long)pos;
            cur_has = true;
        } else {
            cur = Op::combine(cur, Op::load(v[j]));
        }
    }
    /* the tile's last element's thread: the run it ends in */
    if (items && pos0 - start + u64(items) == m) {
        const u64 end = start + m;
        sc.tail_rank[t] = -1;
        if (!cur_has) {
            sc.lead[t] = cur;
            sc.first_head[t] = -1;
        } else if (end == n || key_word(a.keys, end, a.kbytes) != w[items - 1]) {
            if (rank - 1 < a.capacity) W::write(cur, end - u64(cur_start), a.ddof, a.out0, a.out1, size_t(rank - 1));
        } else {
            sc.tail[t] = cur;
            sc.tail_start[t] = cur_start;
            sc.tail_rank[t] = (long long)(rank - 1);
        }
    }
}

/* One tile per block, in the order blocks take them from a counter (the look-back's order). */
template <class W, class Op, class In> GR_DEV void runs_body(const RunArgs &a) {
    using Acc = typename Op::acc_t;
    const u64 n = a.n, tiles = (n + kRunTile - 1) / kRunTile;
    const RunScratch<Acc> sc = run_scratch<Acc>(a.scratch, tiles, a.acc_bytes);
    __shared__ u64 tile_s;
    if (threadIdx.x == 0) tile_s = atomicAdd(reinterpret_cast<unsigned long long *>(sc.status), 1ull);
    __syncthreads();
    const u64 t = tile_s;
    u64 w[kRunItems];
    In v[kRunItems];
    const RunSpan r(t, n);
    load_tile(a, r, w, v);
    run_tile<W, Op, In>(a, sc, t, r, w, v);
}

/* The runs that crossed a tile's end: the head tile's tail, then the leads of the tiles the run covers up
 * to the one holding the next head (or the last tile), folded by the block in a fixed order. A block takes
 * kRunThreads tiles: their open tails found at once, then each such run in turn. */
template <class W, class Op> GR_DEV void runs_fixup_body(const RunArgs &a) {
    using Acc = typename Op::acc_t;
    const u64 n = a.n, tiles = (n + kRunTile - 1) / kRunTile;
    const RunScratch<Acc> sc = run_scratch<Acc>(a.scratch, tiles, a.acc_bytes);
    __shared__ unsigned long long next_s;
    __shared__ unsigned open_count;
    __shared__ unsigned short open[kRunThreads];
    for (u64 base = u64(blockIdx.x) * kRunThreads; base < tiles; base += u64(gridDim.x) * kRunThreads) {
        if (threadIdx.x == 0) open_count = 0;
        __syncthreads();
        const u64 mine = base + threadIdx.x;
        if (mine < tiles) {
            const long long rank = sc.tail_rank[mine];
            if (rank >= 0 && u64(rank) < a.capacity) open[atomicAdd(&open_count, 1u)] = (unsigned short)threadIdx.x;
        }
        __syncthreads();
        const unsigned count = open_count;
        for (unsigned o = 0; o < count; o++) {
            const u64 t = base + open[o];
            /* e: the first tile after t with a head, or the last tile */
            u64 e = tiles - 1;
            for (u64 from = t + 1; from < tiles; from += blockDim.x) {
                if (threadIdx.x == 0) next_s = tiles;
                __syncthreads();
                const u64 u = from + threadIdx.x;
                if (u < tiles && sc.first_head[u] >= 0) atomicMin(&next_s, (unsigned long long)u);
                __syncthreads();
                const u64 found = next_s;
                __syncthreads();
                if (found < tiles) {
                    e = found;
                    break;
                }
            }
            Acc x = Op::identity();
            for (u64 u = t + 1 + threadIdx.x; u <= e; u += blockDim.x) x = Op::combine(x, sc.lead[u]);
            x = block_reduce<Op>(x);
            if (threadIdx.x == 0) {
                const long long head = sc.first_head[e];
                const u64 end = head >= 0 ? u64(head) : n;
                W::write(Op::combine(sc.tail[t], x), end - u64(sc.tail_start[t]), a.ddof, a.out0, a.out1,
                         size_t(sc.tail_rank[t]));
            }
        }
        __syncthreads();
    }
}

}  // namespace gr
