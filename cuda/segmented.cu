/*
 * segmented.cu -- many reductions in one launch: the segments of a buffer (fixed size or CSR offsets)
 * and the buffers of reduce_many, each reduced with every op and its result(s) written on the device.
 *
 * How a segment is shared out depends on its size, as CUB's segmented dispatch does (the choice is the
 * planner's, engine/policy.c): G lanes per segment (G = 1, 2, ..., 32) -- a segment of up to 16 bytes
 * is one thread's, a few hundred bytes a handful of lanes', a few KiB a warp's; a block per segment for
 * segments of many KiB; several blocks per segment for a few huge segments that would leave SMs idle.
 * The lanes read 16-byte vectors where the segment starts on a 16-byte boundary, elements otherwise.
 * Results come from the op's accumulator through results.cuh. Reads the input only.
 */
#include "epilogue.cuh"
#include "launch.cuh"
#include "results.cuh"
#include "thread_load.cuh"
#include "warp_block.cuh"

namespace {

using gr::u64;

/* Where segment s lies: its first element and its length. */
template <class In> struct Span {
    const In *p;
    u64 n;
};

template <class In>
__device__ __forceinline__ Span<In> segment(const In *in, u64 size, const long long *offsets,
                                            const gr_seg_item *items, u64 s) {
    if (size) return {in + s * size, size};
    if (offsets) {
        const long long lo = offsets[s], hi = offsets[s + 1];
        return {in + lo, u64(hi - lo)};
    }
    return {static_cast<const In *>(items[s].ptr), items[s].n};
}

/* The part of span sp that lane `lane` of `lanes` takes, folded into the thread's accumulator: 16-byte
 * vectors lane, lane + lanes, ... where the span starts on a 16-byte boundary (elements before the
 * boundary and after the last vector one by one), or elements lane, lane + lanes, ... otherwise. */
template <class Op, class In>
__device__ __forceinline__ typename Op::acc_t lane_share(Span<In> sp, unsigned lane, unsigned lanes) {
    using T = gr::ThreadAcc<Op, In>;
    typename T::type acc = T::init();
    if constexpr (gr::vectorizable_v<In>) {
        using V = gr::Vec16<In>;
        constexpr int kV = V::kCount;
        if ((reinterpret_cast<gr::uptr>(sp.p) & 15) == 0) {
            const V *v = reinterpret_cast<const V *>(sp.p);
            const u64 nvec = sp.n / kV;
            for (u64 i = lane; i < nvec; i += lanes) acc = T::fold(acc, v[i], i * kV);
            for (u64 i = nvec * kV + lane; i < sp.n; i += lanes) acc = T::fold1(acc, sp.p[i], i);
            return T::value(acc);
        }
    }
    for (u64 i = lane; i < sp.n; i += lanes) acc = T::fold1(acc, sp.p[i], i);
    return T::value(acc);
}

struct Args {
    const void *in;
    u64 k, size;
    const long long *offsets;
    const gr_seg_item *items;
    void *out0, *out1;
    int ddof;
};

/* One kernel for every way of sharing (a kernel per way would triple the instantiations: an op on a
 * dtype is already one kernel per pair):
 *   g <= 32   g lanes per segment (g a power of two); the warps of the grid walk the segments 32 / g
 *             at a time -- the walk is the warp's, not the group's, so that every lane of a warp reaches
 *             the shuffles (a group past the last segment takes part with the identity);
 *   g == 0    a block per segment, the blocks walking the segments (splits == 1), or `splits` blocks per
 *             segment: block b takes part b % splits of segment b / splits, and the last block of a
 *             segment to finish combines the parts in order (so the result does not depend on which
 *             came last), leaving the segment's counter zero again. */
/* launch bounds: blocks of up to 1024 threads (the policy's largest), so at most 64 registers */
template <int Kind, class Op, class In>
__global__ void __launch_bounds__(1024) segmented_kernel(Args a, int g, int splits, typename Op::acc_t *partials, unsigned *counters) {
    using Acc = typename Op::acc_t;
    const In *in = static_cast<const In *>(a.in);
    if (g > 0) {
        const unsigned per_warp = 32u / unsigned(g), lane = threadIdx.x % unsigned(g);
        const unsigned group = (threadIdx.x % 32) / unsigned(g);
        const u64 warp = (u64(blockIdx.x) * blockDim.x + threadIdx.x) / 32, warps = u64(gridDim.x) * (blockDim.x / 32);
        for (u64 s0 = warp * per_warp; s0 < a.k; s0 += warps * per_warp) {
            const u64 s = s0 + group;
            Acc v = Op::identity();
            Span<In> sp = {in, 0};
            if (s < a.k) {
                sp = segment(in, a.size, a.offsets, a.items, s);
                v = lane_share<Op>(sp, lane, unsigned(g));
            }
            for (unsigned d = unsigned(g) / 2; d > 0; d >>= 1) v = Op::combine(v, gr::shfl_xor(v, d));
            if (s < a.k && lane == 0) gr::Result<Kind, Op, In>::write(v, sp.n, a.ddof, a.out0, a.out1, s);
        }
        return;
    }
    if (splits <= 1) {
        for (u64 s = blockIdx.x; s < a.k; s += gridDim.x) {
            const Span<In> sp = segment(in, a.size, a.offsets, a.items, s);
            Acc v = gr::block_reduce<Op>(lane_share<Op>(sp, threadIdx.x, blockDim.x));
            if (threadIdx.x == 0) gr::Result<Kind, Op, In>::write(v, sp.n, a.ddof, a.out0, a.out1, s);
        }
        return;
    }
    __shared__ bool is_last;
    const u64 s = blockIdx.x / unsigned(splits), part = blockIdx.x % unsigned(splits);
    const Span<In> sp = segment(in, a.size, a.offsets, a.items, s);
    /* whole 16-byte runs per part keep every part's start aligned like the segment's */
    const u64 unit = gr::vectorizable_v<In> ? 16 / sizeof(In) : 1;
    const u64 units = (sp.n + unit - 1) / unit;          /* a part run short at the end is covered too */
    const u64 per = (units + unsigned(splits) - 1) / unsigned(splits) * unit;
    const u64 lo = part * per < sp.n ? part * per : sp.n, hi = lo + per < sp.n ? lo + per : sp.n;
    Acc v = gr::block_reduce<Op>(lane_share<Op>(Span<In>{sp.p + lo, hi - lo}, threadIdx.x, blockDim.x));
    if constexpr (Op::kIndexed) {
        /* lane_share counts indices from the part's start: move them to the segment's */
        if (threadIdx.x == 0 && v.index != ~0ull) v.index += lo;
    }
    if (threadIdx.x == 0) {
        partials[blockIdx.x] = v;
        __threadfence();
        is_last = atomicAdd(&counters[s], 1u) == unsigned(splits) - 1;
    }
    __syncthreads();
    if (!is_last || threadIdx.x != 0) return;
    __threadfence();
    Acc t = Op::identity();
    for (int i = 0; i < splits; i++) {
        Acc p;
        memcpy(&p, const_cast<const Acc *>(partials + s * unsigned(splits) + i), sizeof p);
        t = Op::combine(t, p);
    }
    gr::Result<Kind, Op, In>::write(t, sp.n, a.ddof, a.out0, a.out1, s);
    counters[s] = 0;
}

template <int Kind, class Op, class In> int launch_for(gr_seg_launch *L) {
    const Args a = {L->in, L->k, L->size, (const long long *)L->offsets, L->items, L->out[0], L->out[1], L->ddof};
    segmented_kernel<Kind, Op, In><<<unsigned(L->grid), unsigned(L->block), 0, (cudaStream_t)L->stream>>>(
        a, L->group, L->splits, (typename Op::acc_t *)L->partials, L->counters);
    return GR_CHECK_LAUNCH(L);
}

/* The op's functor and result kind as template arguments (mean and sum share a functor, not a result). */
template <class In, class Acc> int with_id(gr_seg_launch *L) {
    switch (L->op) {
#define GR_SEG_OP(E, name)                                                                                 \
    case GR_##E:                                                                                          \
        if constexpr (gr::OpOf<GR_##E, In, Acc>::valid)                                                   \
            return launch_for<gr::result_kind(GR_##E), typename gr::OpOf<GR_##E, In, Acc>::type, In>(L);  \
        else                                                                                              \
            return cudaErrorInvalidValue;
        GR_OP_LIST(GR_SEG_OP)
#undef GR_SEG_OP
    default: return cudaErrorInvalidValue;
    }
}

template <class In> int with_acc(gr_seg_launch *L) {
    switch (L->acc) {
#define GR_SEG_ACC(E, name, ctype, bytes, is_float, is_signed) case GR_##E: return with_id<In, ctype>(L);
        GR_DTYPE_LIST(GR_SEG_ACC)
#undef GR_SEG_ACC
    default: return cudaErrorInvalidValue;
    }
}

int launch(gr_seg_launch *L) {
    if (L->grid < 1 || L->grid > 0x7fffffff) return cudaErrorInvalidConfiguration;
    switch (L->in_dtype) {
#define GR_SEG_IN(E, name, ctype, bytes, is_float, is_signed) case GR_##E: return with_acc<ctype>(L);
        GR_DTYPE_LIST(GR_SEG_IN)
#undef GR_SEG_IN
    default: return cudaErrorInvalidValue;
    }
}

/* The boundaries' faults: a negative first one, a decrease, or one past n. The lowest index at fault
 * wins (atomicMin), so the message names the first. */
__global__ void check_kernel(const long long *offsets, u64 k, u64 n, unsigned long long *bad) {
    for (u64 i = u64(blockIdx.x) * blockDim.x + threadIdx.x; i <= k; i += u64(gridDim.x) * blockDim.x) {
        const long long v = offsets[i];
        const bool fault = v < 0 || u64(v) > n || (i > 0 && v < offsets[i - 1]);
        if (fault) atomicMin(bad, i + 1);
    }
}

int check_offsets(const int64_t *offsets, size_t k, size_t n, unsigned long long *bad, void *stream) {
    const cudaStream_t st = (cudaStream_t)stream;
    cudaError_t e = cudaMemsetAsync(bad, 0xff, sizeof *bad, st);
    if (e != cudaSuccess) return e;
    const u64 blocks = (u64(k) + 1 + 255) / 256;
    check_kernel<<<unsigned(blocks < 4096 ? blocks : 4096), 256, 0, st>>>((const long long *)offsets, k, n, bad);
    return cudaGetLastError();
}

}  // namespace

extern "C" const gr_seg_kernel gr_segmented = {launch, check_offsets};
