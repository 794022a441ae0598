/*
 * segmented.cuh -- the body of the segmented kernel: the segments of a buffer (fixed size or CSR
 * offsets) or the items of reduce_many, each reduced and its result written by a writer class W
 * (W::write(acc, n, ddof, out0, out1, s)). cuda/kernels/segmented.cu instantiates it for the built-in ops with
 * results.cuh's writers; a user operator's generated source (engine/user/operator_source.c) for its functor
 * with a writer of post's value. NVRTC-clean.
 *
 * How a segment is shared out depends on its size, as CUB's segmented dispatch does (the choice is the
 * planner's, engine/core/policy.c): G lanes per segment (G = 1, 2, ..., 32) -- a segment of up to 16 bytes
 * is one thread's, a few hundred bytes a handful of lanes', a few KiB a warp's; a block per segment for
 * segments of many KiB; several blocks per segment for a few huge segments that would leave SMs idle.
 * The lanes read 16-byte runs counted from the segment's start, wherever it lies (span_run).
 * Reads the input only.
 */
#pragma once

#include "thread_load.cuh"
#include "warp_block.cuh"

namespace gr {

/* One item of reduce_many: engine/base/launch.h's gr_seg_item, spelt without <stdint.h>. */
struct SegItem {
    const void *ptr;
    u64 n;
};

struct SegArgs {
    const void *in;
    u64 k, size;
    const long long *offsets;
    const SegItem *items;
    void *out0, *out1;
    int ddof;
    u64 pitch;          /* with size: segment s starts at element s * pitch (0: s * size) */
};

/* Where segment s lies: its first element and its length. */
template <class In> struct Span {
    const In *p;
    u64 n;
};

template <class In>
GR_DEV Span<In> segment_span(const In *in, u64 size, u64 pitch, const long long *offsets, const SegItem *items,
                             u64 s) {
    if (size) return {in + s * (pitch ? pitch : size), size};
    if (offsets) {
        const long long lo = offsets[s], hi = offsets[s + 1];
        return {in + lo, u64(hi - lo)};
    }
    return {static_cast<const In *>(items[s].ptr), items[s].n};
}

/* Run i of a span (its elements i * kV .. i * kV + kV - 1, kV to 16 bytes) that starts `off` (1..15)
 * bytes past a 16-byte boundary: the two aligned vectors that hold it, put together (a word select by
 * off's multiples of 4, then a funnel shift by the bytes beyond). Both vectors hold bytes of the run, so
 * the loads stay within the 16-byte blocks that hold the span's first and last bytes (device buffers are
 * allocated in whole 16-byte blocks, engine/core/buffer.c). The second vector is mostly the next lane's
 * first, which L1 has. */
template <class In> GR_DEV Vec16<In> span_run(const In *p, unsigned off, u64 i) {
    const uint4 *at = reinterpret_cast<const uint4 *>(reinterpret_cast<uptr>(p + i * Vec16<In>::kCount) - off);
    const uint4 a = at[0], b = at[1];
    unsigned w[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
    if (off & 8) {
#pragma unroll
        for (int k = 0; k < 6; k++) w[k] = w[k + 2];
    }
    if (off & 4) {
#pragma unroll
        for (int k = 0; k < 5; k++) w[k] = w[k + 1];
    }
    unsigned o[4];
#pragma unroll
    for (int k = 0; k < 4; k++) {
        if constexpr (sizeof(In) >= 4) o[k] = w[k];        /* off is a multiple of the element */
        else o[k] = __funnelshift_r(w[k], w[k + 1], (off & 3) * 8);
    }
    Vec16<In> r;
    memcpy(&r, o, sizeof o);
    return r;
}

/* The part of span sp that lane `lane` of `lanes` takes, folded into the thread's accumulator: runs of
 * 16 bytes counted from the span's start, lane, lane + lanes, ..., then the elements after the last whole
 * run one by one. A span on a 16-byte boundary reads its runs as vectors; one off a boundary puts each run
 * together from two vectors (span_run): the same runs, so a lane folds the same elements in the same order
 * at any address -- a row's bits do not depend on where it sits in a batch, nor a segment's on its offset
 * (issue 23). Element j of the span has index first + j (an index counts from its segment's start). */
template <class Op, class In>
GR_DEV typename Op::acc_t lane_share(Span<In> sp, unsigned lane, unsigned lanes, u64 first = 0) {
    using T = ThreadAcc<Op, In>;
    typename T::type acc = T::init();
    u64 tail = 0;           /* where the elements read one by one start */
    if constexpr (vectorizable_v<In>) {
        using V = Vec16<In>;
        constexpr int kV = V::kCount;
        const unsigned off = unsigned(reinterpret_cast<uptr>(sp.p) & 15);
        const u64 nvec = sp.n / kV;
        if (off == 0) {
            const V *v = reinterpret_cast<const V *>(sp.p);
            for (u64 i = lane; i < nvec; i += lanes) acc = T::fold(acc, v[i], first + i * kV);
        } else {
            for (u64 i = lane; i < nvec; i += lanes) acc = T::fold(acc, span_run(sp.p, off, i), first + i * kV);
        }
        tail = nvec * kV;
    }
    for (u64 i = tail + lane; i < sp.n; i += lanes) acc = T::fold1(acc, sp.p[i], first + i);
    return T::value(acc);
}

/* One walk for every way of sharing (a kernel per way would triple the instantiations: an op on a
 * dtype is already one kernel per pair):
 *   g <= 32   g lanes per segment (g a power of two); the warps of the grid walk the segments 32 / g
 *             at a time -- the walk is the warp's, not the group's, so that every lane of a warp reaches
 *             the shuffles (a group past the last segment takes part with the identity);
 *   g == 0    a block per segment, the blocks walking the segments (splits == 1), or `splits` blocks per
 *             segment: block b takes part b % splits of segment b / splits, and the last block of a
 *             segment to finish combines the parts in a fixed order (so the result does not depend on
 *             which came last), leaving the segment's counter zero again.
 * What a segment is and how a lane folds its share come from the reader R:
 *   R::span_t r.span(s)          segment s (span_t has its length n; a default one is empty)
 *   r.share(sp, lo, hi, l, ls)   lane l of ls's fold of the span's elements [lo, hi)
 *   R::kUnit                     the elements of a 16-byte run: parts start on multiples of it
 * (SegReader below, one input; gr.dot's reader of two inputs is cuda/kernels/dot.cu's). The kernel around
 * it takes blocks of up to 1024 threads (the policy's largest). */
template <class W, class Op, class R>
GR_DEV void walk_segments(const SegArgs &a, int g, int splits, typename Op::acc_t *partials, unsigned *counters,
                          const R &r) {
    using Acc = typename Op::acc_t;
    using S = typename R::span_t;
    if (g > 0) {
        const unsigned per_warp = 32u / unsigned(g), lane = threadIdx.x % unsigned(g);
        const unsigned group = (threadIdx.x % 32) / unsigned(g);
        const u64 warp = (u64(blockIdx.x) * blockDim.x + threadIdx.x) / 32, warps = u64(gridDim.x) * (blockDim.x / 32);
        for (u64 s0 = warp * per_warp; s0 < a.k; s0 += warps * per_warp) {
            const u64 s = s0 + group;
            Acc v = Op::identity();
            S sp{};
            if (s < a.k) {
                sp = r.span(s);
                v = r.share(sp, 0, sp.n, lane, unsigned(g));
            }
            for (unsigned d = unsigned(g) / 2; d > 0; d >>= 1) v = Op::combine(v, shfl_xor(v, d));
            if (s < a.k && lane == 0) W::write(v, sp.n, a.ddof, a.out0, a.out1, s);
        }
        return;
    }
    if (splits <= 1) {
        for (u64 s = blockIdx.x; s < a.k; s += gridDim.x) {
            const S sp = r.span(s);
            Acc v = block_reduce<Op>(r.share(sp, 0, sp.n, threadIdx.x, blockDim.x));
            if (threadIdx.x == 0) W::write(v, sp.n, a.ddof, a.out0, a.out1, s);
        }
        return;
    }
    __shared__ bool is_last;
    const u64 s = blockIdx.x / unsigned(splits), part = blockIdx.x % unsigned(splits);
    const S sp = r.span(s);
    /* whole 16-byte runs per part keep every part's start aligned like the segment's */
    const u64 unit = R::kUnit;
    const u64 units = (sp.n + unit - 1) / unit;          /* a part run short at the end is covered too */
    const u64 per = (units + unsigned(splits) - 1) / unsigned(splits) * unit;
    const u64 lo = part * per < sp.n ? part * per : sp.n, hi = lo + per < sp.n ? lo + per : sp.n;
    Acc v = block_reduce<Op>(r.share(sp, lo, hi, threadIdx.x, blockDim.x));
    if (threadIdx.x == 0) {
        partials[blockIdx.x] = v;
        __threadfence();
        is_last = atomicAdd(&counters[s], 1u) == unsigned(splits) - 1;
    }
    __syncthreads();
    if (!is_last) return;
    /* the whole last block combines the parts: thread t folds parts t, t + blockDim.x, ... in order, then
     * the block's tree (an axis reduction's row may have hundreds of parts; the order still depends only
     * on splits and the block) */
    __threadfence();
    Acc t = Op::identity();
    for (unsigned i = threadIdx.x; i < unsigned(splits); i += blockDim.x) {
        Acc p;
        memcpy(&p, const_cast<const Acc *>(partials + s * unsigned(splits) + i), sizeof p);
        t = Op::combine(t, p);
    }
    t = block_reduce<Op>(t);
    if (threadIdx.x != 0) return;
    W::write(t, sp.n, a.ddof, a.out0, a.out1, s);
    counters[s] = 0;
}

/* The segments of one input (or reduce_many's items), each lane's share folded by lane_share. */
template <class Op, class In> struct SegReader {
    using span_t = Span<In>;
    static constexpr u64 kUnit = vectorizable_v<In> ? 16 / sizeof(In) : 1;
    const SegArgs *a;
    GR_DEV span_t span(u64 s) const {
        return segment_span(static_cast<const In *>(a->in), a->size, a->pitch, a->offsets, a->items, s);
    }
    GR_DEV typename Op::acc_t share(const span_t &sp, u64 lo, u64 hi, unsigned lane, unsigned lanes) const {
        return lane_share<Op>(span_t{sp.p + lo, hi - lo}, lane, lanes, lo);
    }
};

/* Every segment of one input reduced with Op, its result written by W. */
template <class W, class Op, class In>
GR_DEV void segmented_body(const SegArgs &a, int g, int splits, typename Op::acc_t *partials, unsigned *counters) {
    walk_segments<W, Op>(a, g, splits, partials, counters, SegReader<Op, In>{&a});
}

}  // namespace gr
