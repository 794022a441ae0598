/*
 * cccl_segments.cu -- the segmented sum of the newest CCCL beside the toolkit's, on the shapes of issue 26's
 * small segments: float32 sums of N elements in segments of M, timed as gr.bench times (device events, 5
 * warm-ups, the median of the repetitions), the results written to a buffer made beforehand.
 *   fixed M N     cub::DeviceSegmentedReduce::Sum with a fixed segment size (CCCL 3.4 on: it picks a
 *                 sub-warp, warp or block kernel by the size)
 *   offsets M N   the same sum over begin and end offsets (one int64 array), as the toolkit's CUB takes them
 * Each prints "<what> M N ms=<median> gbps=<bytes read / median> mem_gbps=<with the results written>" and the
 * CCCL version it was built with. The toolkit's own CUB compiles the offsets form only.
 * Build against a CCCL checkout (its cub, libcudacxx/include and thrust folders, before the toolkit's):
 *   nvcc -O3 -std=c++17 -arch=sm_90 -I CCCL/cub -I CCCL/libcudacxx/include -I CCCL/thrust \
 *        -o build/cccl_segments experiments/tuning/cccl_segments.cu
 */
#include <cub/device/device_segmented_reduce.cuh>
#include <cub/version.cuh>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "timing.cuh"

__global__ void fill_values(float *p, size_t n) {
    for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
        unsigned long long z = (i + 1) * 0xD1B54A32D192ED03ull;
        z = (z ^ (z >> 29)) * 0xBF58476D1CE4E5B9ull;
        p[i] = float(double(z >> 11) * (1.0 / 9007199254740992.0) * 2 - 1);
    }
}

__global__ void fill_offsets(long long *o, size_t k, long long m) {
    for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i <= k; i += size_t(gridDim.x) * blockDim.x)
        o[i] = (long long)i * m;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s fixed|offsets M N [reps]\n", argv[0]);
        return 2;
    }
    const bool fixed = strcmp(argv[1], "fixed") == 0;
    const long long m = atoll(argv[2]);
    const size_t n = strtoull(argv[3], nullptr, 0), k = n / size_t(m);
    const int reps = argc > 4 ? atoi(argv[4]) : 50;
    float *in, *out;
    long long *off;
    CK(cudaMalloc(&in, n * sizeof(float)));
    CK(cudaMalloc(&out, k * sizeof(float)));
    CK(cudaMalloc(&off, (k + 1) * sizeof(long long)));
    fill_values<<<1024, 256>>>(in, n);
    fill_offsets<<<1024, 256>>>(off, k, m);
    CK(cudaDeviceSynchronize());
    void *temp = nullptr;
    size_t temp_bytes = 0;
    auto run = [&]() -> cudaError_t {
#if CUB_VERSION >= 300400
        if (fixed) return cub::DeviceSegmentedReduce::Sum(temp, temp_bytes, in, out, (int64_t)k, int(m));
#else
        if (fixed) return cudaErrorNotSupported;
#endif
        return cub::DeviceSegmentedReduce::Sum(temp, temp_bytes, in, out, (int64_t)k, off, off + 1);
    };
    if (run() != cudaSuccess) {
        printf("%s %lld %zu: not in CCCL %d\n", argv[1], m, n, CUB_VERSION);
        return 0;
    }
    CK(cudaMalloc(&temp, temp_bytes ? temp_bytes : 1));
    const float ms = median_ms([&]() { CK(run()); }, reps);
    const double read = double(n) * sizeof(float), written = double(k) * sizeof(float);
    printf("%s %lld %zu ms=%.4f gbps=%.1f mem_gbps=%.1f cccl=%d\n", argv[1], m, n, ms, read / ms / 1e6,
           (read + written) / ms / 1e6, CUB_VERSION);
    return 0;
}
