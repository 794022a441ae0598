/*
 * fused_ops.cu -- where the six-op tuple (opts.ops = sum, min, max, count, mean, std over float32) spends
 * its time, and formulations of its folds that keep every bit. Each kernel is the engine's pass shape
 * (thread_accumulate with two accumulators, block_reduce, the last block finishing) at 1024 threads and
 * 2 blocks per SM, over 2^28 uniform floats in [-1, 1) with a few zeros; the tuple's parts are timed
 * alone and together, beside the read kernel's shape, and every variant's values (each slot's bytes, not
 * the padding between them) are compared bit for bit with the engine's tuple's. Run on the GPU host:
 *   nvcc -std=c++17 -O3 -arch=sm_90 -Xptxas -v experiments/tuning/fused_ops.cu -o build/fused_ops && build/fused_ops
 */
#include <cstdio>
#include <cstring>
#include <vector>

#include "../../cuda/device/epilogue.cuh"
#include "../../cuda/device/thread_load.cuh"
#include "../../cuda/device/warp_block.cuh"
#include "timing.cuh"

using gr::u64;
using V = gr::Vec16<float>;

/* ---- candidate folds, each a functor of the engine's op with its own ThreadAcc ---------------------- */

/* count: the vector's non-zero elements summed in 32 bits, one 64-bit add per vector */
struct CountV : gr::Count {};
/* min / max: the vector reduced as a tree first (the op is associative with its NaN and tie rules, so
 * the value and its bits are the chain's), then one combine into the running value */
struct MinT : gr::Min<float> {};
struct MaxT : gr::Max<float> {};
/* min / max in two compares and a select: b wins iff (b beyond a, or b NaN) and a is not NaN -- the same
 * choice as GR_EXTREME's three tests, spelled so that ptxas can emit FSETP.GTU/LTU, FSETP.NUM and FSEL */
template <bool kMin> GR_DEV float extreme2(float a, float b) {
    unsigned take;
    if (kMin)
        asm("{ .reg .pred p, q; setp.ltu.f32 p, %2, %1; setp.num.f32 q, %1, %1; and.pred p, p, q; selp.u32 %0, 1, 0, p; }"
            : "=r"(take) : "f"(a), "f"(b));
    else
        asm("{ .reg .pred p, q; setp.gtu.f32 p, %2, %1; setp.num.f32 q, %1, %1; and.pred p, p, q; selp.u32 %0, 1, 0, p; }"
            : "=r"(take) : "f"(a), "f"(b));
    return take ? b : a;
}
struct MinC : gr::Min<float> {
    static __device__ float combine(float a, float b) { return extreme2<true>(a, b); }
};
struct MaxC : gr::Max<float> {
    static __device__ float combine(float a, float b) { return extreme2<false>(a, b); }
};
/* the same two compares in plain C++, folded in the engine's chain (the generic ThreadAcc: no tree) */
struct MinP : gr::Min<float> {
    static __device__ float combine(float a, float b) { return (!(b >= a) && a == a) ? b : a; }
};
struct MaxP : gr::Max<float> {
    static __device__ float combine(float a, float b) { return (!(b <= a) && a == a) ? b : a; }
};
/* Welford: the weights 4/(n+4) and n*4/(n+4) from a 32-bit count and a correctly rounded reciprocal
 * (4 * RN(1/m) = RN(4/m): the same bits as the division) */
struct WelfordR : gr::Welford<float> {};

namespace gr {
template <> struct ThreadAcc<CountV, float> {
    using type = u64;
    static GR_DEV type init() { return 0; }
    static GR_DEV type fold(type a, const V &r, u64) {
        unsigned c = 0;
#pragma unroll
        for (int k = 0; k < 4; k++) c += r.v[k] != 0.0f;
        return a + c;
    }
    static GR_DEV type fold1(type a, float x, u64) { return a + (x != 0.0f); }
    static GR_DEV type merge(type a, type b) { return a + b; }
    static GR_DEV type value(type a) { return a; }
};
template <class Op> struct TreeAcc {
    using type = float;
    static GR_DEV type init() { return Op::identity(); }
    static GR_DEV type fold(type a, const V &r, u64) {
        return Op::combine(a, Op::combine(Op::combine(r.v[0], r.v[1]), Op::combine(r.v[2], r.v[3])));
    }
    static GR_DEV type fold1(type a, float x, u64) { return Op::combine(a, x); }
    static GR_DEV type merge(type a, type b) { return Op::combine(a, b); }
    static GR_DEV type value(type a) { return a; }
};
template <> struct ThreadAcc<MinT, float> : TreeAcc<MinT> {};
template <> struct ThreadAcc<MaxT, float> : TreeAcc<MaxT> {};
template <> struct ThreadAcc<MinC, float> : TreeAcc<MinC> {};
template <> struct ThreadAcc<MaxC, float> : TreeAcc<MaxC> {};
template <> struct ThreadAcc<WelfordR, float> {
    using Op = Welford<float>;
    using type = typename Op::acc_t;
    static GR_DEV type init() { return Op::identity(); }
    static GR_DEV type fold(type a, const V &r, u64) {
        float sum = 0.0f;
#pragma unroll
        for (int j = 0; j < 4; j++) sum += r.v[j];
        const float mean = sum * 0.25f;
        float m2 = 0.0f;
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const float d = r.v[j] - mean;
            m2 += d * d;
        }
        if (a.n == 0) return {4, mean, m2};
        const u64 n = a.n + 4;
        const float nf = n < (1ull << 32) ? float(unsigned(n)) : float(n);
        const float af = a.n < (1ull << 32) ? float(unsigned(a.n)) : float(a.n);
        const float wb = 4.0f * __frcp_rn(nf), wab = af * wb;
        const float delta = mean - a.mean;
        return {n, a.mean + delta * wb, (a.m2 + m2) + (delta * delta) * wab};
    }
    static GR_DEV type fold1(type a, float x, u64) { return Op::combine(a, Op::load(x)); }
    static GR_DEV type merge(type a, type b) { return Op::combine(a, b); }
    static GR_DEV type value(type a) { return a; }
};
}  // namespace gr

/* ---- a tuple of functors, flat as engine/user/fused_source.c generates it (Nothing fills unused places) ---- */

struct Nothing {
    struct acc_t {
        unsigned char c;
    };
    static constexpr bool kIndexed = false;
    static GR_DEV acc_t identity() { return {0}; }
    static GR_DEV acc_t combine(acc_t a, acc_t) { return a; }
};
namespace gr {
template <> struct ThreadAcc<Nothing, float> {
    using type = unsigned char;
    static GR_DEV type init() { return 0; }
    static GR_DEV type fold(type a, const V &, u64) { return a; }
    static GR_DEV type fold1(type a, float, u64) { return a; }
    static GR_DEV type merge(type a, type) { return a; }
    static GR_DEV Nothing::acc_t value(type a) { return {a}; }
};
}  // namespace gr

#define EACH(X) X(0) X(1) X(2) X(3) X(4)
template <class F0, class F1 = Nothing, class F2 = Nothing, class F3 = Nothing, class F4 = Nothing> struct Tuple {
    struct acc_t {
#define SLOT(k) alignas(16) typename F##k::acc_t a##k;
        EACH(SLOT)
#undef SLOT
    };
    static constexpr bool kIndexed = false;
    /* each slot's bytes of value (the rest of its 16 is padding, which the comparison skips) */
    static constexpr size_t kSlotBytes[5] = {sizeof(typename F0::acc_t), sizeof(typename F1::acc_t),
                                             sizeof(typename F2::acc_t), sizeof(typename F3::acc_t),
                                             sizeof(typename F4::acc_t)};
    static GR_DEV acc_t identity() {
        acc_t r;
#define ID(k) r.a##k = F##k::identity();
        EACH(ID)
#undef ID
        return r;
    }
    static GR_DEV acc_t combine(const acc_t a, const acc_t b) {
        acc_t r;
#define CB(k) r.a##k = F##k::combine(a.a##k, b.a##k);
        EACH(CB)
#undef CB
        return r;
    }
};

namespace gr {
template <class F0, class F1, class F2, class F3, class F4> struct ThreadAcc<Tuple<F0, F1, F2, F3, F4>, float> {
    using Tu = Tuple<F0, F1, F2, F3, F4>;
    struct type {
#define ST(k) typename ThreadAcc<F##k, float>::type t##k;
        EACH(ST)
#undef ST
    };
    static GR_DEV type init() {
        type a;
#define IN(k) a.t##k = ThreadAcc<F##k, float>::init();
        EACH(IN)
#undef IN
        return a;
    }
    static GR_DEV type fold(type a, const V &r, u64 i) {
#define FO(k) a.t##k = ThreadAcc<F##k, float>::fold(a.t##k, r, i);
        EACH(FO)
#undef FO
        return a;
    }
    static GR_DEV type fold1(type a, float x, u64 i) {
#define F1(k) a.t##k = ThreadAcc<F##k, float>::fold1(a.t##k, x, i);
        EACH(F1)
#undef F1
        return a;
    }
    static GR_DEV type merge(type a, type b) {
#define ME(k) a.t##k = ThreadAcc<F##k, float>::merge(a.t##k, b.t##k);
        EACH(ME)
#undef ME
        return a;
    }
    static GR_DEV typename Tu::acc_t value(type a) {
        typename Tu::acc_t v;
#define VA(k) v.a##k = ThreadAcc<F##k, float>::value(a.t##k);
        EACH(VA)
#undef VA
        return v;
    }
};
}  // namespace gr

template <class Op>
__global__ void __launch_bounds__(1024) pass(const float *__restrict__ in, size_t n, typename Op::acc_t *partials,
                                             unsigned *counter, typename Op::acc_t *final_out) {
    typename Op::acc_t v = gr::thread_accumulate<Op, float, 2>(in, n, 0);
    v = gr::block_reduce<Op>(v);
    gr::epilogue<Op>(v, partials, counter, final_out);
}

static const float *g_in;
static size_t g_n;
static int g_grid;
static void *g_scratch;
static unsigned *g_counter;
static float g_read_ms;

template <class Op> static void run(const char *name, std::vector<unsigned char> *bits = nullptr) {
    using Acc = typename Op::acc_t;
    Acc *partials = (Acc *)g_scratch, *out = partials + g_grid;
    int regs = 0;
    cudaFuncAttributes fa;
    CK(cudaFuncGetAttributes(&fa, pass<Op>));
    regs = fa.numRegs;
    float best = 1e30f;
    for (int round = 0; round < 3; round++) {
        float ms = median_ms([&] { pass<Op><<<g_grid, 1024>>>(g_in, g_n, partials, g_counter, out); }, 30);
        best = ms < best ? ms : best;
    }
    CK(cudaDeviceSynchronize());
    std::vector<unsigned char> raw(sizeof(Acc)), b;
    CK(cudaMemcpy(raw.data(), out, sizeof(Acc), cudaMemcpyDeviceToHost));
    if constexpr (sizeof(Acc) >= 80) {          /* a tuple: its slots' values, not their padding */
        for (int k = 0; k < 5; k++)
            b.insert(b.end(), raw.begin() + 16 * k, raw.begin() + 16 * k + Op::kSlotBytes[k]);
    } else {
        b = raw;
    }
    const char *same = "";
    if (bits) {
        if (bits->empty()) *bits = b;
        else same = (*bits == b) ? "  bits: same" : "  bits: DIFFER";
    }
    printf("%-34s %7.4f ms  %5.1f%% of read  %2d regs%s\n", name, best, 100.0 * g_read_ms / best, regs, same);
}

int main() {
    cudaDeviceProp p;
    CK(cudaGetDeviceProperties(&p, 0));
    g_n = size_t(1) << 28;
    g_grid = 2 * p.multiProcessorCount;
    std::vector<float> h(g_n);
    unsigned s = 12345;
    for (size_t i = 0; i < g_n; i++) {
        s = s * 1664525u + 1013904223u;
        h[i] = (s >> 8) % 97 == 0 ? 0.0f : float(int(s >> 8) - (1 << 23)) / float(1 << 23);
    }
    float *d;
    CK(cudaMalloc(&d, g_n * 4));
    CK(cudaMemcpy(d, h.data(), g_n * 4, cudaMemcpyHostToDevice));
    g_in = d;
    CK(cudaMalloc(&g_scratch, 1 << 20));
    CK(cudaMalloc(&g_counter, 4));
    CK(cudaMemset(g_counter, 0, 4));
    unsigned *sink;
    CK(cudaMalloc(&sink, 4));
    float r = 1e30f;
    for (int round = 0; round < 3; round++) {
        float ms = median_ms([&] { read_ceiling_kernel<<<p.multiProcessorCount * 8, 256>>>((const uint4 *)d, g_n / 4, sink); }, 30);
        r = ms < r ? ms : r;
    }
    g_read_ms = r;
    printf("%s, %d SMs; 2^28 float32; grid %d x 1024; best of 3 medians of 30\nread kernel %.4f ms\n", p.name,
           p.multiProcessorCount, g_grid, r);
    using namespace gr;
    using W = Welford<float>;
    std::vector<unsigned char> six, part;
    run<Sum<float>>("sum alone");
    run<Min<float>>("min alone");
    run<Count>("count alone");
    run<W>("std alone");
    run<Tuple<Sum<float>, Min<float>, Max<float>, Count, W>>("six (the engine's tuple)", &six);
    run<Tuple<Sum<float>, Min<float>, Max<float>, Count, W>>("six again", &six);
    run<Tuple<Sum<float>, Min<float>, Max<float>, CountV, W>>("six, count per vector", &six);
    run<Tuple<Sum<float>, MinT, MaxT, Count, W>>("six, min/max trees", &six);
    run<Tuple<Sum<float>, MinC, MaxC, Count, W>>("six, min/max 2-compare trees", &six);
    run<Tuple<Sum<float>, MinP, MaxP, Count, W>>("six, min/max 2-compare chain (C++)", &six);
    run<Tuple<Sum<float>, Min<float>, Max<float>, Count, WelfordR>>("six, welford rcp", &six);
    run<Tuple<Sum<float>, MinT, MaxT, CountV, WelfordR>>("six, all three", &six);
    run<Tuple<Sum<float>, MinC, MaxC, CountV, WelfordR>>("six, all three (2-compare)", &six);
    run<Tuple<Sum<float>, Min<float>, Max<float>, Count>>("no std");
    run<Tuple<Sum<float>, Count, W>>("no min/max");
    run<Tuple<Sum<float>, Min<float>, Max<float>, W>>("no count");
    run<Tuple<W>>("welford alone (tuple)", &part);
    run<Tuple<WelfordR>>("welford rcp alone (tuple)", &part);
    return 0;
}
