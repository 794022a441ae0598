/*
 * byte_pipeline.cu -- does decoupling the loads from the folds lift the 1-byte reductions to the read
 * kernel? int8 product and min stayed at 74% and 89% of the read kernel with register loads (two 16-byte
 * loads per thread per iteration, folded before the next are issued), although every kernel uses at
 * most 32 registers (full occupancy) and the issue slots are far from busy: a warp has nothing in
 * flight while it folds. Here each thread copies its own 16-byte vectors into a ring of shared memory
 * with cp.async (LDGSTS), S stages deep, and folds stage k while stages k+1 .. k+S-1 are on their way:
 * loads stay in flight through the folds, at no register cost.
 *
 * Candidates, per op, on 2^28 int8 elements: the engine's register loop (gr::thread_accumulate with 2
 * and 4 loads per iteration), the cp.async ring at 3..8 stages, at 256 and 1024 threads, the same ring
 * set 16 bytes off a 32-byte sector of shared memory (how the first engine build lost 13%: see
 * cuda/device/pipeline.cuh), and the engine's ring itself (gr::thread_accumulate_pipelined), each with one
 * resident wave of blocks; the read kernel (the engine's, two loads per iteration) as the yardstick.
 * Every candidate's partials are combined on the host and checked against a CPU reference.
 *   nvcc -std=c++17 -O3 -arch=sm_90 -Iengine experiments/tuning/byte_pipeline.cu -o build/byte_pipeline
 *   build/byte_pipeline
 */
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "../../cuda/device/epilogue.cuh"
#include "../../cuda/device/pipeline.cuh"
#include "../../cuda/device/warp_block.cuh"
#include "timing.cuh"


using In = int8_t;
using V = gr::Vec16<In>;

/* ---- register loads: the engine's loop -------------------------------------------------------- */
template <class Op, int U>
__global__ void reg_kernel(const In *in, size_t n, typename Op::acc_t *partials) {
    typename Op::acc_t v = gr::thread_accumulate<Op, In, U>(in, n);
    v = gr::block_reduce<Op>(v);
    if (threadIdx.x == 0) partials[blockIdx.x] = v;
}

/* ---- cp.async ring (the candidates: S stages; Off = 1 sets the ring 16 bytes off a sector) ---- */
/* Thread t owns ring[s * blockDim.x + t] for each stage s: it copies into and reads only its own slots,
 * so no barrier is needed, and a warp's 32 slots are 512 consecutive bytes (no bank conflicts). n is a
 * multiple of 16 and the buffer aligned here (the engine's head/tail handling is not the question). */
template <class Op, int S, int Off = 0>
__global__ void async_kernel(const In *in, size_t n, typename Op::acc_t *partials) {
    using gr::commit_copies;
    using gr::copy16_async;
    using gr::wait_copies;
    using T = gr::ThreadAcc<Op, In>;
    extern __shared__ uint4 smem[];
    uint4 *ring = gr::ring_in(smem) + Off;
    const V *vin = reinterpret_cast<const V *>(in);
    const size_t nvec = n / 16;
    const size_t tid = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
    const size_t threads = size_t(gridDim.x) * blockDim.x;
    uint4 *mine = ring + threadIdx.x;
#pragma unroll
    for (int s = 0; s < S - 1; s++) {
        const size_t j = tid + s * threads;
        if (j < nvec) copy16_async(mine + s * blockDim.x, vin + j);
        commit_copies();
    }
    typename T::type acc = T::init();
    int slot = 0;
    for (size_t i = tid; i < nvec; i += threads) {
        const size_t ahead = i + (S - 1) * threads;
        int fill = slot == 0 ? S - 1 : slot - 1;      /* the slot read in the previous iteration */
        if (ahead < nvec) copy16_async(mine + fill * blockDim.x, vin + ahead);
        commit_copies();
        wait_copies<S - 1>();                          /* this iteration's group has landed */
        const uint4 w = mine[slot * blockDim.x];
        acc = T::fold(acc, *reinterpret_cast<const V *>(&w), 0);
        slot = slot == S - 1 ? 0 : slot + 1;
    }
    typename Op::acc_t v = gr::block_reduce<Op>(T::value(acc));
    if (threadIdx.x == 0) partials[blockIdx.x] = v;
}

/* ---- the engine's ring (cuda/device/pipeline.cuh, as the pipelined variant runs it) ------------------- */
template <class Op>
__global__ void engine_ring_kernel(const In *in, size_t n, typename Op::acc_t *partials) {
    extern __shared__ uint4 smem[];
    typename Op::acc_t v = gr::thread_accumulate_pipelined<Op, In>(in, n, smem);
    v = gr::block_reduce<Op>(v);
    if (threadIdx.x == 0) partials[blockIdx.x] = v;
}

/* ---- the table ---------------------------------------------------------------------------------- */
struct Bench {
    size_t n;
    int sms;
    float read_ms;
    void *partials;

    template <class Op> void row(const char *op, const char *name, const In *d, const std::vector<In> &h,
                                 void (*k)(const In *, size_t, typename Op::acc_t *), int block, size_t smem) {
        using Acc = typename Op::acc_t;
        if (smem > 0) CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
        int per_sm = 0;
        CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k, block, smem));
        cudaFuncAttributes fa;
        CK(cudaFuncGetAttributes(&fa, k));
        const unsigned grid = unsigned(sms * per_sm);
        const float ms = median_ms([&] { k<<<grid, block, smem>>>(d, n, (Acc *)partials); }, 40);
        std::vector<Acc> p(grid);
        CK(cudaMemcpy(p.data(), partials, grid * sizeof(Acc), cudaMemcpyDeviceToHost));
        Acc got = Op::identity(), want = Op::identity();
        for (Acc x : p) got = Op::combine(got, x);
        for (In x : h) want = Op::combine(want, Op::load(x));
        printf("%-5s %-12s %5d %3d %3d %9.4f %8.1f %6.1f%% %s\n", op, name, block, per_sm, fa.numRegs, ms,
               n / ms / 1e6, 100 * read_ms / ms, got == want ? "ok" : "WRONG");
    }

    template <class Op> void op_rows(const char *op, const In *d, const std::vector<In> &h) {
        row<Op>(op, "reg u2", d, h, reg_kernel<Op, 2>, 1024, 0);
        row<Op>(op, "reg u2", d, h, reg_kernel<Op, 2>, 256, 0);
        row<Op>(op, "reg u4", d, h, reg_kernel<Op, 4>, 1024, 0);
        row<Op>(op, "reg u4", d, h, reg_kernel<Op, 4>, 256, 0);
        /* ring bytes: S stages, 128 to align the ring, 16 for the misaligned row */
        auto ring = [](int S, int block) { return size_t(S) * block * 16 + 128 + 16; };
        row<Op>(op, "async s3", d, h, async_kernel<Op, 3>, 1024, ring(3, 1024));
        row<Op>(op, "async s4", d, h, async_kernel<Op, 4>, 1024, ring(4, 1024));
        row<Op>(op, "async s5", d, h, async_kernel<Op, 5>, 1024, ring(5, 1024));
        row<Op>(op, "async s6", d, h, async_kernel<Op, 6>, 1024, ring(6, 1024));
        row<Op>(op, "async s4", d, h, async_kernel<Op, 4>, 256, ring(4, 256));
        row<Op>(op, "async s6", d, h, async_kernel<Op, 6>, 256, ring(6, 256));
        row<Op>(op, "async s8", d, h, async_kernel<Op, 8>, 256, ring(8, 256));
        row<Op>(op, "s3 16B off", d, h, async_kernel<Op, 3, 1>, 1024, ring(3, 1024));
        row<Op>(op, "engine ring", d, h, engine_ring_kernel<Op>, 1024, gr::ring_bytes(1024));
        row<Op>(op, "engine ring", d, h, engine_ring_kernel<Op>, 256, gr::ring_bytes(256));
    }
};

int main() {
    cudaDeviceProp p;
    CK(cudaGetDeviceProperties(&p, 0));
    const size_t n = size_t(1) << 28;
    /* two data sets: bytes in -100..100 with -117 and 113 planted (min, max, sum), and odd bytes, mostly
     * +-1 with a few +-3 (a product that stays non-zero modulo 2^64, so the check means something) */
    std::vector<In> wide(n), odd(n);
    unsigned long long s = 0x9E3779B97F4A7C15ull;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13; s ^= s >> 7; s ^= s << 17;
        wide[i] = In(int(s % 201) - 100);
        odd[i] = In(((s >> 20) & 1 ? 1 : -1) * (((s >> 24) & 255) == 0 ? 3 : 1));
    }
    wide[n / 3] = -117;
    wide[n / 5 * 4] = 113;
    In *dw, *dodd;
    unsigned *sink;
    Bench b{n, p.multiProcessorCount, 0, nullptr};
    CK(cudaMalloc(&dw, n));
    CK(cudaMalloc(&dodd, n));
    CK(cudaMalloc(&sink, 4));
    CK(cudaMalloc(&b.partials, 8 * 65536));
    CK(cudaMemcpy(dw, wide.data(), n, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dodd, odd.data(), n, cudaMemcpyHostToDevice));
    const unsigned rgrid = p.multiProcessorCount * 8;
    b.read_ms = median_ms([&] { read_ceiling_kernel<<<rgrid, 256>>>((const uint4 *)dw, n / 16, sink); }, 40);
    const float read2 = median_ms([&] { read_ceiling_kernel<<<rgrid, 256>>>((const uint4 *)dodd, n / 16, sink); }, 40);
    b.read_ms = std::min(b.read_ms, read2);
    printf("# %s, %d SMs; int8 n = 2^28, medians of 40; read kernel %.4f ms (%.1f GB/s)\n", p.name,
           p.multiProcessorCount, b.read_ms, n / b.read_ms / 1e6);
    printf("%-5s %-12s %5s %3s %3s %9s %8s %7s\n", "op", "kernel", "block", "bps", "reg", "ms", "GB/s", "vs read");
    b.op_rows<gr::Prod<unsigned long long>>("prod", dodd, odd);
    b.op_rows<gr::Min<In>>("min", dw, wide);
    b.op_rows<gr::Max<In>>("max", dw, wide);
    b.op_rows<gr::Sum<unsigned long long>>("sum", dw, wide);
    b.op_rows<gr::And>("and", dw, wide);
    return 0;
}
