/*
 * timing.cuh -- what the standalone tuning programs share: a checked CUDA call, the median time of a
 * launch sequence on the legacy stream (device events, 5 warm-ups, then `reps` timed runs), and the read
 * kernel's loop, the yardstick.
 */
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
    fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); exit(1); } } while (0)

template <class F> static float median_ms(F &&f, int reps = 50) {
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    for (int i = 0; i < 5; i++) f();
    std::vector<float> t;
    for (int i = 0; i < reps; i++) {
        CK(cudaEventRecord(a));
        f();
        CK(cudaEventRecord(b));
        CK(cudaEventSynchronize(b));
        float ms;
        CK(cudaEventElapsedTime(&ms, a, b));
        t.push_back(ms);
    }
    CK(cudaGetLastError());
    std::sort(t.begin(), t.end());
    CK(cudaEventDestroy(a));
    CK(cudaEventDestroy(b));
    return t[t.size() / 2];
}

/* cuda/runtime/read_bandwidth.cu's loop over whole 16-byte vectors: two loads in flight a thread, folded by
 * XOR; a thread writes only when its fold hits a magic value, which random data practically never does. */
__global__ void read_ceiling_kernel(const uint4 *__restrict__ v, size_t nvec, unsigned *sink) {
    const size_t tid = size_t(blockIdx.x) * blockDim.x + threadIdx.x, threads = size_t(gridDim.x) * blockDim.x;
    unsigned x = 0;
    size_t i = tid;
    for (; i + threads < nvec; i += 2 * threads) {
        const uint4 a = v[i], b = v[i + threads];
        x ^= a.x ^ a.y ^ a.z ^ a.w ^ b.x ^ b.y ^ b.z ^ b.w;
    }
    if (i < nvec) {
        const uint4 a = v[i];
        x ^= a.x ^ a.y ^ a.z ^ a.w;
    }
    if (x == 0x9E3779B9u) atomicAdd(sink, 1u);
}
