/*
 * dot.cu -- the first pass of gr.dot: two inputs of one dtype read side by side, each pair's product
 * folded into the sum's accumulator (float32 for float32 and the small floats, float64 for float64 or
 * when asked, 64-bit wrapping integers for the integer dtypes and bool). Its partials are the sum's, so
 * the passes after it, the finishes and the result are the sum's own (engine/core/dot.c).
 *
 * The shape is warp_shuffle's (v12): a grid-stride loop of 16-byte vectors, two in flight per input and
 * thread, each into its own accumulator; block_reduce; the common epilogue (the single finish's last
 * block). Inputs whose offsets from a 16-byte boundary differ (slices of different parity) are read one
 * element at a time. Float products are fused into the accumulator (one rounding per element); int8 and
 * uint8 take __dp4a's four exact products and their sum in one instruction.
 *
 * A dot product per segment (gr.dot with segment, offsets or axis) walks the segments as the segmented
 * kernel does (segmented.cuh's walk_segments: lanes, a block or several blocks per segment, as the policy
 * shapes the launch) with a reader of both inputs.
 */
#include <cuda_runtime.h>

#include "../../engine/base/launch.h"
#include "../host/launch.cuh"
#include "../device/epilogue.cuh"
#include "../device/segmented.cuh"
#include "../device/thread_load.cuh"
#include "../device/warp_block.cuh"

namespace gr {
namespace {

constexpr int kUnroll = 2;

/* a b + c rounded once, in float or double. */
GR_DEV float fused(float a, float b, float c) { return __fmaf_rn(a, b, c); }
GR_DEV double fused(double a, double b, double c) { return __fma_rn(a, b, c); }

/* acc + x y in the accumulator Acc: fused for floats, modulo 2^64 for integers. */
template <class Acc, class In> GR_DEV Acc add_product(Acc acc, In x, In y) {
    if constexpr (is_small_float_v<In>) {
        return fused(Acc(float(x)), Acc(float(y)), acc);
    } else if constexpr (is_float_v<In>) {
        return fused(Acc(x), Acc(y), acc);
    } else {
        using W = conditional_t<is_signed_v<In>, long long, unsigned long long>;
        return acc + Acc((unsigned long long)W(x) * (unsigned long long)W(y));
    }
}

/* One vector of each input into acc. */
template <class Acc, class In> GR_DEV Acc fold_pair(Acc acc, const Vec16<In> &a, const Vec16<In> &b) {
    constexpr int kV = Vec16<In>::kCount;
    if constexpr (is_small_float_v<In>) {
        float fa[kV], fb[kV];
        widen_vec(a, fa);
        widen_vec(b, fb);
#pragma unroll
        for (int k = 0; k < kV; k++) acc = fused(Acc(fa[k]), Acc(fb[k]), acc);
    } else if constexpr (sizeof(In) == 1 && !is_float_v<In>) {
        /* four byte products and their sum exact in 32 bits (16 of them below 2^20) */
        using S = conditional_t<is_signed_v<In>, int, unsigned>;
        S s = 0;
#pragma unroll
        for (int w = 0; w < 4; w++) s = __dp4a(S(word_of(a, w)), S(word_of(b, w)), s);
        acc += Acc((long long)s);
    } else {
#pragma unroll
        for (int k = 0; k < kV; k++) acc = add_product(acc, a.v[k], b.v[k]);
    }
    return acc;
}

/* A thread's products of x[0, n) and y[0, n) in a grid-stride loop. */
template <class Acc, class In>
GR_DEV Acc thread_dot(const In *__restrict__ x, const In *__restrict__ y, size_t n) {
    const size_t tid = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
    const size_t threads = size_t(gridDim.x) * blockDim.x;
    Acc acc[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; u++) acc[u] = Acc(0);
    if ((reinterpret_cast<uptr>(x) & 15) != (reinterpret_cast<uptr>(y) & 15)) {
        for (size_t i = tid; i < n; i += threads) acc[0] = add_product(acc[0], x[i], y[i]);
        return acc[0];
    }
    using V = Vec16<In>;
    constexpr int kV = V::kCount;
    size_t head = ((16 - (reinterpret_cast<uptr>(x) & 15)) & 15) / sizeof(In);
    if (head > n) head = n;
    if (tid < head) acc[0] = add_product(acc[0], x[tid], y[tid]);
    const V *vx = reinterpret_cast<const V *>(x + head), *vy = reinterpret_cast<const V *>(y + head);
    const size_t nvec = (n - head) / kV;
    size_t i = tid;
    for (; i + (kUnroll - 1) * threads < nvec; i += kUnroll * threads) {
        V a[kUnroll], b[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; u++) {
            a[u] = vx[i + u * threads];
            b[u] = vy[i + u * threads];
        }
#pragma unroll
        for (int u = 0; u < kUnroll; u++) acc[u] = fold_pair(acc[u], a[u], b[u]);
    }
    for (; i < nvec; i += threads) acc[0] = fold_pair(acc[0], vx[i], vy[i]);
    const size_t tail = head + nvec * kV;
    if (tid < n - tail) acc[0] = add_product(acc[0], x[tail + tid], y[tail + tid]);
#pragma unroll
    for (int u = 1; u < kUnroll; u++) acc[0] += acc[u];
    return acc[0];
}

template <class Acc, class In>
__global__ void __launch_bounds__(1024) dot_kernel(const In *__restrict__ x, const In *__restrict__ y, size_t n,
                                                   Acc *partials, unsigned *counter, Acc *final_out) {
    using Op = Sum<Acc>;
    Acc v = thread_dot<Acc>(x, y, n);
    v = block_reduce<Op>(v);
    epilogue<Op>(v, partials, counter, final_out);
}

/* ---- a dot product per segment ------------------------------------------------------------------------ */

/* Segment s of both inputs: the same elements of each. */
template <class In> struct PairSpan {
    const In *x, *y;
    u64 n;
};

/* gr.dot's reader for walk_segments (segmented.cuh): x's segments as SegArgs says, y's at the same
 * offsets; a lane's products of [lo, hi) in 16-byte runs of both counted from lo (span_run: the same runs
 * wherever either input lies, so a row's bits do not depend on its place), then the rest pair by pair. */
template <class Acc, class In> struct DotReader {
    using span_t = PairSpan<In>;
    static constexpr u64 kUnit = 16 / sizeof(In);
    const SegArgs *a;
    const In *y;
    GR_DEV span_t span(u64 s) const {
        const In *x = static_cast<const In *>(a->in);
        const Span<In> sp = segment_span(x, a->size, a->pitch, a->offsets, a->items, s);
        return {sp.p, y + (sp.p - x), sp.n};
    }
    GR_DEV Acc share(const span_t &sp, u64 lo, u64 hi, unsigned lane, unsigned lanes) const {
        using V = Vec16<In>;
        constexpr int kV = V::kCount;
        const In *x = sp.x + lo, *y = sp.y + lo;
        const u64 n = hi - lo, nvec = n / kV;
        const unsigned ox = unsigned(reinterpret_cast<uptr>(x) & 15), oy = unsigned(reinterpret_cast<uptr>(y) & 15);
        /* two runs of each input in flight, into two running sums (as the whole-buffer kernel) */
        Acc acc = Acc(0), acc2 = Acc(0);
        u64 i = lane;
        if ((ox | oy) == 0) {
            const V *vx = reinterpret_cast<const V *>(x), *vy = reinterpret_cast<const V *>(y);
            for (; i + lanes < nvec; i += 2 * u64(lanes)) {
                const V a0 = vx[i], b0 = vy[i], a1 = vx[i + lanes], b1 = vy[i + lanes];
                acc = fold_pair(acc, a0, b0);
                acc2 = fold_pair(acc2, a1, b1);
            }
            if (i < nvec) acc = fold_pair(acc, vx[i], vy[i]);
        } else {
            /* the same runs put together (an aligned input still loads whole vectors); a loop of its own, so
             * that the aligned one above keeps its registers (the dot kernel has at most 64) */
            auto run = [](const In *p, unsigned off, u64 j) {
                return off ? span_run(p, off, j) : reinterpret_cast<const V *>(p)[j];
            };
            for (; i + lanes < nvec; i += 2 * u64(lanes)) {
                acc = fold_pair(acc, run(x, ox, i), run(y, oy, i));
                acc2 = fold_pair(acc2, run(x, ox, i + lanes), run(y, oy, i + lanes));
            }
            if (i < nvec) acc = fold_pair(acc, run(x, ox, i), run(y, oy, i));
        }
        for (u64 j = nvec * kV + lane; j < n; j += lanes) acc = add_product(acc, x[j], y[j]);
        return acc + acc2;
    }
};

/* A segment's dot product written as the sum's result: the accumulator itself. */
template <class Acc> struct DotResult {
    static GR_DEV void write(const Acc &a, u64, int, void *out0, void *, size_t s) { static_cast<Acc *>(out0)[s] = a; }
};

template <class Acc, class In>
__global__ void __launch_bounds__(1024) dot_segments_kernel(SegArgs a, const In *y, int g, int splits, Acc *partials,
                                                            unsigned *counters) {
    walk_segments<DotResult<Acc>, Sum<Acc>>(a, g, splits, partials, counters, DotReader<Acc, In>{&a, y});
}

/* The input's device type as a template argument: f(Tag<In>). */
template <class F> cudaError_t with_input(gr_dtype t, F &&f) {
    switch (t) {
#define GR_DOT_CASE(E, name, ctype, bytes, is_float, is_signed, kind, lowest, highest, float_acc, nccl, format) \
    case GR_##E: return f(Tag<GR_DEVICE_TYPE(format, ctype)>{});
        GR_DTYPE_LIST(GR_DOT_CASE)
#undef GR_DOT_CASE
    default: return cudaErrorInvalidValue;
    }
}

bool plain_1d(const gr_input &in, gr_dtype t) { return in.dtype == t && in.ndim == 1 && in.strides[0] == 1; }

/* f(Tag<In>, Tag<Acc>) for the launch's dtype and the sum's accumulators: float32 and float64 for the float
 * dtypes, 64-bit words for the others (uint64: the sum's wrapping accumulator; the result reads it as
 * signed where the dtype is). */
template <class F> cudaError_t with_types(gr_dtype t, gr_dtype acc, F &&f) {
    return with_input(t, [&](auto in_tag) -> cudaError_t {
        using In = typename decltype(in_tag)::type;
        if constexpr (is_float_v<In>) {
            if (acc == GR_FLOAT32 && sizeof(In) <= 4) return f(in_tag, Tag<float>{});
            if (acc == GR_FLOAT64) return f(in_tag, Tag<double>{});
            return cudaErrorInvalidValue;
        } else {
            return acc == GR_UINT64 ? f(in_tag, Tag<unsigned long long>{}) : cudaErrorInvalidValue;
        }
    });
}

bool pair_of(const gr_inputs *in, gr_dtype t) {
    return in && in->count == 2 && plain_1d(in->at[0], t) && plain_1d(in->at[1], t);
}

int launch(gr_launch *L) {
    const gr_inputs *in = L->in;
    if (!grid_fits(L->grid) || L->block < 32 || L->block > 1024 || (L->block & 31)) return cudaErrorInvalidConfiguration;
    if (!pair_of(in, L->in_dtype) || L->partials_in || L->op != GR_SUM) return cudaErrorInvalidValue;
    return with_types(L->in_dtype, L->acc, [&](auto in_tag, auto acc_tag) -> cudaError_t {
        using In = typename decltype(in_tag)::type;
        using Acc = typename decltype(acc_tag)::type;
        dot_kernel<Acc, In><<<unsigned(L->grid), L->block, 0, (cudaStream_t)L->stream>>>(
            static_cast<const In *>(in->at[0].data), static_cast<const In *>(in->at[1].data), L->n, (Acc *)L->out,
            L->counter, (Acc *)L->final_out);
        return GR_CHECK_LAUNCH(L);
    });
}

int launch_segments(gr_seg_launch *L) {
    const gr_inputs *in = L->in;
    if (!grid_fits(L->grid) || L->block < 32 || L->block > 1024 || (L->block & 31)) return cudaErrorInvalidConfiguration;
    if (!pair_of(in, L->in_dtype) || L->op != GR_SUM || L->items) return cudaErrorInvalidValue;
    return with_types(L->in_dtype, L->acc, [&](auto in_tag, auto acc_tag) -> cudaError_t {
        using In = typename decltype(in_tag)::type;
        using Acc = typename decltype(acc_tag)::type;
        const SegArgs a = {in->at[0].data, L->k, L->size, (const long long *)L->offsets, nullptr, L->out[0], nullptr,
                           0, L->pitch};
        dot_segments_kernel<Acc, In><<<unsigned(L->grid), unsigned(L->block), 0, (cudaStream_t)L->stream>>>(
            a, static_cast<const In *>(in->at[1].data), L->group, L->splits, (Acc *)L->partials, L->counters);
        return GR_CHECK_LAUNCH(L);
    });
}

}  // namespace
}  // namespace gr

extern "C" const gr_dot_kernel gr_dot_gpu = {gr::launch, gr::launch_segments};
