/*
 * tune.cu -- the measurements behind warp_shuffle's shape and the small-n completion path.
 *
 * Standalone (no Lua): times candidate kernel shapes against cub::DeviceReduce and a read-only kernel
 * at n = 2^28, and the ways a host can learn that a tiny reduction finished. Device events, 5 warm-ups,
 * median of 50. Build and run on the GPU host:
 *   nvcc -std=c++17 -O3 -arch=sm_90 -Iengine experiments/tuning/tune.cu -o build/tune && build/tune
 * Candidates (grid-stride loop, 16-byte loads, last-block finish unless noted):
 *   U = 16-byte loads in flight per thread per iteration, A = independent accumulators, P = software
 *   pipelined (the next iteration's loads issued before this one's are folded), B = block size,
 *   W = blocks per SM, "2k" = two kernels (partials, then one block) instead of the last-block finish.
 */
#include <cub/cub.cuh>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "../../cuda/device/epilogue.cuh"
#include "../../cuda/host/launch.cuh"
#include "../../cuda/device/thread_load.cuh"
#include "../../cuda/device/warp_block.cuh"
#include "timing.cuh"

static int g_sms = 0;

/* A thread's share with A accumulators and U loads per iteration, optionally pipelined. */
template <class Op, class In, int U, int A, bool P>
__device__ typename Op::acc_t share(const In *__restrict__ in, size_t n) {
    using Acc = typename Op::acc_t;
    using V = gr::Vec16<In>;
    const size_t tid = size_t(blockIdx.x) * blockDim.x + threadIdx.x, threads = size_t(gridDim.x) * blockDim.x;
    Acc acc[A];
#pragma unroll
    for (int a = 0; a < A; a++) acc[a] = Op::identity();
    const V *v = reinterpret_cast<const V *>(in);     /* cudaMalloc'd: aligned, n a multiple of 16 bytes */
    const size_t nvec = n / V::kCount;
    size_t i = tid;
    if constexpr (P) {
        V cur[U], nxt[U];
        if (i + (U - 1) * threads < nvec) {
#pragma unroll
            for (int u = 0; u < U; u++) cur[u] = v[i + u * threads];
            i += U * threads;
            for (; i + (U - 1) * threads < nvec; i += U * threads) {
#pragma unroll
                for (int u = 0; u < U; u++) nxt[u] = v[i + u * threads];
#pragma unroll
                for (int u = 0; u < U; u++) acc[u % A] = gr::fold_vec<Op, In>(acc[u % A], cur[u], 0);
#pragma unroll
                for (int u = 0; u < U; u++) cur[u] = nxt[u];
            }
#pragma unroll
            for (int u = 0; u < U; u++) acc[u % A] = gr::fold_vec<Op, In>(acc[u % A], cur[u], 0);
        }
    } else {
        for (; i + (U - 1) * threads < nvec; i += U * threads) {
            V r[U];
#pragma unroll
            for (int u = 0; u < U; u++) r[u] = v[i + u * threads];
#pragma unroll
            for (int u = 0; u < U; u++) acc[u % A] = gr::fold_vec<Op, In>(acc[u % A], r[u], 0);
        }
    }
    for (; i < nvec; i += threads) acc[0] = gr::fold_vec<Op, In>(acc[0], v[i], 0);
#pragma unroll
    for (int a = 1; a < A; a++) acc[0] = Op::combine(acc[0], acc[a]);
    return acc[0];
}

template <class Op, class In, int U, int A, bool P>
__global__ void cand_kernel(const In *in, size_t n, typename Op::acc_t *partials, unsigned *counter,
                            typename Op::acc_t *final_out) {
    typename Op::acc_t x = share<Op, In, U, A, P>(in, n);
    x = gr::block_reduce<Op>(x);
    if (final_out) gr::finish_last_block<Op>(x, partials, counter, final_out);
    else if (threadIdx.x == 0) partials[blockIdx.x] = x;
}

template <class Op> __global__ void second_pass(const typename Op::acc_t *p, unsigned m, typename Op::acc_t *out) {
    typename Op::acc_t x = Op::identity();
    for (unsigned i = threadIdx.x; i < m; i += blockDim.x) x = Op::combine(x, p[i]);
    x = gr::block_reduce<Op>(x);
    if (threadIdx.x == 0) *out = x;
}

__global__ void read_kernel(const uint4 *v, size_t nvec, unsigned *sink) {
    const size_t tid = size_t(blockIdx.x) * blockDim.x + threadIdx.x, threads = size_t(gridDim.x) * blockDim.x;
    unsigned x = 0;
    size_t i = tid;
    for (; i + 3 * threads < nvec; i += 4 * threads) {
        uint4 r[4];
#pragma unroll
        for (int u = 0; u < 4; u++) r[u] = v[i + u * threads];
#pragma unroll
        for (int u = 0; u < 4; u++) x ^= r[u].x ^ r[u].y ^ r[u].z ^ r[u].w;
    }
    for (; i < nvec; i += threads) { uint4 r = v[i]; x ^= r.x ^ r.y ^ r.z ^ r.w; }
    if (x == 0x9E3779B9u) atomicAdd(sink, 1u);
}

struct Scratch {
    void *partials;
    unsigned *counter;
    void *final_dev;
    void *final_host;
};

template <class Op, class In, int U, int A, bool P>
static float run_cand(const In *in, size_t n, int block, int per_sm, bool two, Scratch &s) {
    using Acc = typename Op::acc_t;
    size_t want = (n + size_t(block) * (16 / sizeof(In)) * U - 1) / (size_t(block) * (16 / sizeof(In)) * U);
    unsigned grid = unsigned(std::min(want, size_t(g_sms) * per_sm));
    return median_ms([&] {
        if (two) {
            cand_kernel<Op, In, U, A, P><<<grid, block>>>(in, n, (Acc *)s.partials, s.counter, nullptr);
            second_pass<Op><<<1, 1024>>>((Acc *)s.partials, grid, (Acc *)s.final_dev);
        } else {
            cand_kernel<Op, In, U, A, P><<<grid, block>>>(in, n, (Acc *)s.partials, s.counter, (Acc *)s.final_host);
        }
    });
}

template <class Op, class In> static float run_cub(const In *in, size_t n, Scratch &s) {
    using Acc = typename Op::acc_t;
    static void *temp = nullptr;
    static size_t temp_bytes = 0;
    auto call = [&](void *t, size_t &b) {
        if constexpr (std::is_same_v<Op, gr::Sum<In>>)
            return cub::DeviceReduce::Sum(t, b, in, (Acc *)s.final_host, n);
        else
            return cub::DeviceReduce::TransformReduce(t, b, in, (Acc *)s.final_host, n, gr::CombineFn<Op>{},
                                                      gr::LoadFn<Op, In>{}, Op::identity());
    };
    size_t need = 0;
    CK(call(nullptr, need));
    if (need > temp_bytes) {
        if (temp) cudaFree(temp);
        CK(cudaMalloc(&temp, need));
        temp_bytes = need;
    }
    return median_ms([&] { call(temp, temp_bytes); });
}

template <class Op, class In> static void table(const char *name, size_t n, Scratch &s, float read_ms) {
    In *in;
    CK(cudaMalloc(&in, n * sizeof(In)));
    CK(cudaMemset(in, 1, n * sizeof(In)));
    double bytes = double(n) * sizeof(In);
    float cub = run_cub<Op, In>(in, n, s);
    auto row = [&](const char *label, float ms) {
        printf("%-8s %-28s %8.4f ms %8.1f GB/s  %6.1f%% of cub  %6.1f%% of read\n", name, label, ms,
               bytes / ms / 1e6, 100 * cub / ms, 100 * read_ms * (bytes / (1u << 30) / sizeof(char)) / ms);
    };
    row("cub", cub);
    row("U4 A1 B256 W8 (current)", run_cand<Op, In, 4, 1, false>(in, n, 256, 8, false, s));
    row("U4 A4 B256 W8", run_cand<Op, In, 4, 4, false>(in, n, 256, 8, false, s));
    row("U4 A1 P B256 W8", run_cand<Op, In, 4, 1, true>(in, n, 256, 8, false, s));
    row("U4 A4 P B256 W8", run_cand<Op, In, 4, 4, true>(in, n, 256, 8, false, s));
    row("U8 A1 B256 W8", run_cand<Op, In, 8, 1, false>(in, n, 256, 8, false, s));
    row("U8 A4 B256 W8", run_cand<Op, In, 8, 4, false>(in, n, 256, 8, false, s));
    row("U4 A4 B512 W4", run_cand<Op, In, 4, 4, false>(in, n, 512, 4, false, s));
    row("U4 A4 B256 W4", run_cand<Op, In, 4, 4, false>(in, n, 256, 4, false, s));
    row("U4 A4 B128 W16", run_cand<Op, In, 4, 4, false>(in, n, 128, 16, false, s));
    row("U4 A4 B256 W8 2k", run_cand<Op, In, 4, 4, false>(in, n, 256, 8, true, s));
    row("U2 A2 B256 W8", run_cand<Op, In, 2, 2, false>(in, n, 256, 8, false, s));
    CK(cudaFree(in));
}

/* ---- completion of a tiny reduction ---- */

__global__ void empty_kernel() {}

__global__ void flag_kernel(volatile unsigned *flag, unsigned seq) {
    if (threadIdx.x == 0 && blockIdx.x == 0) { __threadfence_system(); *flag = seq; }
}

static void latency(Scratch &s) {
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    cudaEvent_t ev;
    CK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    volatile unsigned *flag = (volatile unsigned *)s.final_host + 8;
    auto wall = [&](const char *label, auto &&f) {
        for (int i = 0; i < 2000; i++) f(i);
        std::vector<double> t;
        for (int r = 0; r < 41; r++) {
            auto t0 = std::chrono::steady_clock::now();
            for (int i = 0; i < 200; i++) f(i);
            t.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / 200);
        }
        std::sort(t.begin(), t.end());
        printf("%-52s median %6.2f us  min %6.2f us\n", label, t[20], t[0]);
    };
    wall("empty kernel + cudaStreamSynchronize", [&](int) { empty_kernel<<<1, 32, 0, st>>>(); cudaStreamSynchronize(st); });
    wall("empty kernel + event record + cudaEventSynchronize", [&](int) {
        empty_kernel<<<1, 32, 0, st>>>(); cudaEventRecord(ev, st); cudaEventSynchronize(ev); });
    unsigned seq = 0;
    wall("flag kernel + host spins on mapped flag", [&](int) {
        ++seq; flag_kernel<<<1, 32, 0, st>>>(flag, seq); while (*flag != seq) {} });
    /* the real thing at 2^16 floats: last-block finish writing the mapped result */
    float *in;
    CK(cudaMalloc(&in, (1 << 16) * sizeof(float)));
    CK(cudaMemset(in, 0, (1 << 16) * sizeof(float)));
    using Op = gr::Sum<float>;
    unsigned grid = (1 << 16) / (256 * 16);
    wall("2^16 sum, last-block finish + cudaStreamSynchronize", [&](int) {
        cand_kernel<Op, float, 4, 1, false><<<grid, 256, 0, st>>>(in, 1 << 16, (float *)s.partials, s.counter,
                                                                 (float *)s.final_host);
        cudaStreamSynchronize(st); });
    wall("2^16 sum, last-block finish + event sync", [&](int) {
        cand_kernel<Op, float, 4, 1, false><<<grid, 256, 0, st>>>(in, 1 << 16, (float *)s.partials, s.counter,
                                                                 (float *)s.final_host);
        cudaEventRecord(ev, st); cudaEventSynchronize(ev); });
    wall("2^16 sum, 1 block of 1024 + cudaStreamSynchronize", [&](int) {
        cand_kernel<Op, float, 4, 1, false><<<1, 1024, 0, st>>>(in, 1 << 16, (float *)s.partials, s.counter,
                                                               (float *)s.final_host);
        cudaStreamSynchronize(st); });
    CK(cudaFree(in));
}

int main() {
    cudaDeviceProp p;
    CK(cudaGetDeviceProperties(&p, 0));
    g_sms = p.multiProcessorCount;
    printf("# %s, %d SMs; n = 2^28; medians of 50 after 5 warm-ups (device events)\n", p.name, g_sms);
    Scratch s;
    CK(cudaMalloc(&s.partials, 1 << 20));
    CK(cudaMalloc(&s.counter, 64));
    CK(cudaMemset(s.counter, 0, 64));
    CK(cudaMalloc(&s.final_dev, 64));
    CK(cudaHostAlloc(&s.final_host, 4096, cudaHostAllocMapped));
    const size_t n = size_t(1) << 28;
    /* the read ceiling per GiB, scaled to each table's bytes */
    void *buf;
    CK(cudaMalloc(&buf, n * 4));
    CK(cudaMemset(buf, 1, n * 4));
    float read_gib = median_ms([&] { read_kernel<<<g_sms * 8, 256>>>((const uint4 *)buf, n * 4 / 16, s.counter + 4); });
    float read_quarter = median_ms([&] { read_kernel<<<g_sms * 8, 256>>>((const uint4 *)buf, n / 16, s.counter + 4); });
    printf("read kernel: 1 GiB %.4f ms (%.1f GB/s), 256 MiB %.4f ms (%.1f GB/s)\n", read_gib, 4.0 * n / read_gib / 1e6,
           read_quarter, 1.0 * n / read_quarter / 1e6);
    CK(cudaFree(buf));
    table<gr::Sum<float>, float>("f32 sum", n, s, read_gib);
    table<gr::Max<float>, float>("f32 max", n, s, read_gib);
    table<gr::Sum<unsigned long long>, int32_t>("i32 sum", n, s, read_gib);
    table<gr::Sum<double>, double>("f64 sum", n, s, read_gib);
    table<gr::Sum<unsigned long long>, int8_t>("i8 sum", n, s, read_quarter * 4);
    table<gr::Min<int8_t>, int8_t>("i8 min", n, s, read_quarter * 4);
    table<gr::And, int8_t>("i8 and", n, s, read_quarter * 4);
    table<gr::Prod<unsigned long long>, int8_t>("i8 prod", n, s, read_quarter * 4);
    latency(s);
    return 0;
}
