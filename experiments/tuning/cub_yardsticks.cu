/*
 * cub_yardsticks.cu -- the toolkit's CUB on the shapes the lab compares gpureduce with, timed the way
 * gr.bench times (device events, warm-up, median of the repetitions):
 *   argmin DTYPE N / argmax DTYPE N     cub::DeviceReduce::ArgMin / ArgMax over N random elements
 *   segsum M N                          cub::DeviceSegmentedReduce::Sum of float32 over N elements in
 *                                       segments of M (begin and end offsets from one int64 array)
 * Each prints one line: "<what> ms=<median> gbps=<bytes read / median>" with the bytes of the input, and
 * for segsum also "mem_gbps=" counting the results written too. Used by experiments/bench.lua
 * and experiments/segments.lua (which build it: make build/cub_yardsticks).
 *   build/cub_yardsticks argmin float32 268435456 [reps]
 */
#include <cub/device/device_reduce.cuh>
#include <cub/device/device_segmented_reduce.cuh>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "timing.cuh"

/* Random data by a counter hash, as gpureduce's random fill does: every element independent. */
template <class T> __global__ void fill_random(T *p, size_t n, unsigned long long seed) {
    for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
        unsigned long long z = seed * 0x9E3779B97F4A7C15ull + (i + 1) * 0xD1B54A32D192ED03ull;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        if constexpr (std::is_floating_point_v<T>) p[i] = T(double(z >> 11) * (1.0 / 9007199254740992.0) * 2 - 1);
        else p[i] = T(z);
    }
}

__global__ void fill_offsets(long long *o, size_t k, long long m) {
    for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i <= k; i += size_t(gridDim.x) * blockDim.x)
        o[i] = (long long)i * m;
}

static int reps_of(int argc, char **argv, int at) { return argc > at ? std::atoi(argv[at]) : 50; }

template <class T> static void arg_extreme(bool is_min, size_t n, int reps) {
    T *in, *value;
    int64_t *index;
    CK(cudaMalloc(&in, n * sizeof(T)));
    CK(cudaMalloc(&value, sizeof *value));
    CK(cudaMalloc(&index, sizeof *index));
    fill_random<<<4096, 256>>>(in, n, 7);
    CK(cudaGetLastError());
    size_t temp_bytes = 0;
    void *temp = nullptr;
    auto run = [&]() {
        if (is_min) return cub::DeviceReduce::ArgMin(temp, temp_bytes, in, value, index, (int64_t)n);
        return cub::DeviceReduce::ArgMax(temp, temp_bytes, in, value, index, (int64_t)n);
    };
    CK(run());
    CK(cudaMalloc(&temp, temp_bytes ? temp_bytes : 1));
    const float ms = median_ms([&]() { CK(run()); }, reps);
    std::printf("%s ms=%.5f gbps=%.1f\n", is_min ? "argmin" : "argmax", ms, double(n) * sizeof(T) / (ms * 1e6));
    CK(cudaFree(in));
    CK(cudaFree(value));
    CK(cudaFree(index));
    CK(cudaFree(temp));
}

static void segsum(size_t m, size_t n, int reps) {
    size_t k = n / m;
    float *in, *out;
    long long *off;
    CK(cudaMalloc(&in, n * sizeof(float)));
    CK(cudaMalloc(&out, k * sizeof(float)));
    CK(cudaMalloc(&off, (k + 1) * sizeof(long long)));
    fill_random<<<4096, 256>>>(in, n, 7);
    fill_offsets<<<4096, 256>>>(off, k, (long long)m);
    CK(cudaGetLastError());
    size_t temp_bytes = 0;
    void *temp = nullptr;
    auto run = [&]() { return cub::DeviceSegmentedReduce::Sum(temp, temp_bytes, in, out, (int64_t)k, off, off + 1); };
    CK(run());
    CK(cudaMalloc(&temp, temp_bytes ? temp_bytes : 1));
    const float ms = median_ms([&]() { CK(run()); }, reps);
    double read = double(n) * sizeof(float), written = double(k) * sizeof(float);
    std::printf("segsum m=%zu ms=%.5f gbps=%.1f mem_gbps=%.1f\n", m, ms, read / (ms * 1e6), (read + written) / (ms * 1e6));
    CK(cudaFree(in));
    CK(cudaFree(out));
    CK(cudaFree(off));
    CK(cudaFree(temp));
}

int main(int argc, char **argv) {
    if (argc >= 4 && (!std::strcmp(argv[1], "argmin") || !std::strcmp(argv[1], "argmax"))) {
        bool is_min = !std::strcmp(argv[1], "argmin");
        size_t n = std::strtoull(argv[3], nullptr, 10);
        int reps = reps_of(argc, argv, 4);
        const char *t = argv[2];
        if (!std::strcmp(t, "float32")) arg_extreme<float>(is_min, n, reps);
        else if (!std::strcmp(t, "float64")) arg_extreme<double>(is_min, n, reps);
        else if (!std::strcmp(t, "int32")) arg_extreme<int32_t>(is_min, n, reps);
        else if (!std::strcmp(t, "int8")) arg_extreme<int8_t>(is_min, n, reps);
        else if (!std::strcmp(t, "uint8")) arg_extreme<uint8_t>(is_min, n, reps);
        else if (!std::strcmp(t, "int64")) arg_extreme<int64_t>(is_min, n, reps);
        else {
            std::fprintf(stderr, "cub_yardsticks: dtype %s (accepted: float32, float64, int32, int8, uint8, int64)\n", t);
            return 2;
        }
        return 0;
    }
    if (argc >= 4 && !std::strcmp(argv[1], "segsum")) {
        segsum(std::strtoull(argv[2], nullptr, 10), std::strtoull(argv[3], nullptr, 10), reps_of(argc, argv, 4));
        return 0;
    }
    std::fprintf(stderr, "usage: cub_yardsticks argmin|argmax DTYPE N [reps] | segsum M N [reps]\n");
    return 2;
}
