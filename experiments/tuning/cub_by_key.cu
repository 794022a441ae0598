/*
 * cub_by_key.cu -- issue 25's yardstick: the toolkit's CUB summing float32 values by int32 key, timed the
 * way gr.bench times (device events, 5 warm-ups, median of the repetitions). For each key distribution
 * and K = 2^4, 2^8, ..., 2^24 distinct keys over n = 2^log2n pairs:
 *   unsorted   cub::DeviceRadixSort::SortPairs of (keys, values), then cub::DeviceReduce::ReduceByKey
 *              (sum) over the sorted pairs: what a reduction by key costs from scratch
 *   sorted     ReduceByKey alone over the keys gpureduce's lab times with sorted = true
 *              (experiments/by_key_bench.lua), made here by the same formulas: uniform floor(i K / n); zipf the
 *              lab's 2^20-key pattern (its LCG and floor(K^u) - 1) in ascending order, each key repeated
 *              n / 2^20 times -- the multiset of the lab's unsorted zipf keys, grouped. The floor once the
 *              keys are grouped, over the very keys of the lab's sorted column, so its ratio is like for like.
 * The sort takes all 32 key bits, as gpureduce's by-key sort does (it is not told K).
 * Prints one line per case: "by_key <dist> <log2K> unsorted_ms=<m> sorted_ms=<m> runs=<unique keys>".
 *   build/cub_by_key [log2n] [reps]      (defaults 26 and 20)
 */
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_reduce.cuh>
#include <cuda/std/functional>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "timing.cuh"

/* The counter hash of gpureduce's random fill (splitmix64 of seed and index): every element independent. */
__device__ unsigned long long mix(unsigned long long seed, size_t i) {
    unsigned long long z = seed * 0x9E3779B97F4A7C15ull + (i + 1) * 0xD1B54A32D192ED03ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* 53 random bits as a double uniform in [0, 1). */
__device__ double unit(unsigned long long z) { return double(z >> 11) * (1.0 / 9007199254740992.0); }

__global__ void fill_values(float *v, size_t n, unsigned long long seed) {
    for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
        v[i] = float(unit(mix(seed, i)) * 2 - 1);
}

/*
 * Keys in [0, K), K = 2^log2k. uniform: hash(i) mod K. zipf (skewed): key = floor(K^u) - 1 with u uniform
 * in [0, 1), i.e. log-uniform, so key k has probability log_K((k + 2) / (k + 1)): key 0 takes log_K 2 of
 * all pairs, and the top of the range is sparse. Clamped to [0, K - 1] against rounding in exp2.
 */
__global__ void fill_keys(int32_t *k, size_t n, int log2k, bool zipf, unsigned long long seed) {
    const long long K = 1ll << log2k;
    for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
        unsigned long long z = mix(seed, i);
        long long key = zipf ? (long long)floor(exp2(unit(z) * log2k)) - 1 : (long long)(z % (unsigned long long)K);
        k[i] = int32_t(key < 0 ? 0 : key > K - 1 ? K - 1 : key);
    }
}

/*
 * The lab's keys (experiments/by_key_bench.lua's key_pattern, grouped_keys and sorted_keys), on the host.
 * Its pattern: min(n, 2^20) keys from a 63-bit LCG, u = 52 of its bits over 2^52, uniform floor(u K), zipf
 * min(K - 1, floor(pow(K, u)) - 1) (Lua's K ^ u is C's pow). Grouped: uniform floor(i K / n) (the lab's
 * float64 iota of step K / n, exact for powers of two, truncated); zipf the pattern sorted, each element
 * then repeated n / 2^20 times.
 */
static void lab_grouped_keys(std::vector<int32_t> &out, size_t n, int log2k, bool zipf) {
    const long long K = 1ll << log2k;
    out.resize(n);
    if (!zipf) {
        for (size_t i = 0; i < n; i++) out[i] = int32_t((unsigned long long)i * (unsigned long long)K / n);
        return;
    }
    const size_t pattern = std::min(n, size_t(1) << 20), times = n / pattern;
    std::vector<int32_t> p(pattern);
    unsigned long long x = 12345;
    for (size_t i = 0; i < pattern; i++) {
        x = (x * 6364136223846793005ull + 1442695040888963407ull) & 0x7fffffffffffffffull;
        const double u = double(x >> 11) / 4503599627370496.0;
        p[i] = int32_t(std::min(K - 1, (long long)std::floor(std::pow(double(K), u)) - 1));
    }
    std::sort(p.begin(), p.end());
    for (size_t i = 0; i < pattern; i++) std::fill_n(out.begin() + i * times, times, p[i]);
}

int main(int argc, char **argv) {
    const int log2n = argc > 1 ? std::atoi(argv[1]) : 26;
    const int reps = argc > 2 ? std::atoi(argv[2]) : 20;
    if (log2n < 1 || log2n > 30 || reps < 1) {
        std::fprintf(stderr, "usage: cub_by_key [log2n (1..30)] [reps]\n");
        return 2;
    }
    const int n = 1 << log2n;
    const int max_log2k = 24;
    // Runs never outnumber the pairs nor the keys: the outputs fit the smaller.
    const size_t max_runs = std::min(size_t(n), size_t(1) << max_log2k);

    int32_t *keys, *keys_sorted, *unique, *num_runs;
    float *values, *values_sorted, *sums;
    CK(cudaMalloc(&keys, n * sizeof(int32_t)));
    CK(cudaMalloc(&keys_sorted, n * sizeof(int32_t)));
    CK(cudaMalloc(&values, n * sizeof(float)));
    CK(cudaMalloc(&values_sorted, n * sizeof(float)));
    CK(cudaMalloc(&unique, max_runs * sizeof(int32_t)));
    CK(cudaMalloc(&sums, max_runs * sizeof(float)));
    CK(cudaMalloc(&num_runs, sizeof(int32_t)));
    fill_values<<<4096, 256>>>(values, n, 7);
    CK(cudaGetLastError());

    std::printf("# cub_by_key: n = 2^%d float32 values, int32 keys, medians of %d after 5 warm-ups (CUDA events)\n",
                log2n, reps);
    const char *dists[] = {"uniform", "zipf"};
    std::vector<int32_t> grouped;
    for (int d = 0; d < 2; d++) {
        for (int log2k = 4; log2k <= max_log2k; log2k += 4) {
            // A seed per case, apart from the values' seed, so keys and values are independent.
            fill_keys<<<4096, 256>>>(keys, n, log2k, d == 1, 1000 + 100 * d + log2k);
            CK(cudaGetLastError());

            void *temp = nullptr;
            size_t sort_bytes = 0, reduce_bytes = 0, temp_bytes = 0;
            auto sort = [&]() {
                return cub::DeviceRadixSort::SortPairs(temp, temp_bytes, keys, keys_sorted, values, values_sorted, n);
            };
            auto reduce = [&]() {
                return cub::DeviceReduce::ReduceByKey(temp, temp_bytes, keys_sorted, unique, values_sorted, sums,
                                                      num_runs, cuda::std::plus<float>{}, n);
            };
            // Each call asks its size with a null buffer; both then share one buffer of the larger size.
            CK(sort());
            sort_bytes = temp_bytes;
            temp_bytes = 0;
            CK(reduce());
            reduce_bytes = temp_bytes;
            temp_bytes = std::max(sort_bytes, reduce_bytes);
            CK(cudaMalloc(&temp, temp_bytes ? temp_bytes : 1));

            const float unsorted_ms = median_ms([&]() { CK(sort()); CK(reduce()); }, reps);
            // The sorted case: the lab's grouped keys in place of the sorted ones, beside the sorted values.
            lab_grouped_keys(grouped, size_t(n), log2k, d == 1);
            CK(cudaMemcpy(keys_sorted, grouped.data(), n * sizeof(int32_t), cudaMemcpyHostToDevice));
            const float sorted_ms = median_ms([&]() { CK(reduce()); }, reps);
            int32_t runs = 0;
            CK(cudaMemcpy(&runs, num_runs, sizeof runs, cudaMemcpyDeviceToHost));
            std::printf("by_key %s %d unsorted_ms=%.5f sorted_ms=%.5f runs=%d\n", dists[d], log2k, unsorted_ms,
                        sorted_ms, runs);
            std::fflush(stdout);
            CK(cudaFree(temp));
        }
    }
    CK(cudaFree(keys));
    CK(cudaFree(keys_sorted));
    CK(cudaFree(values));
    CK(cudaFree(values_sorted));
    CK(cudaFree(unique));
    CK(cudaFree(sums));
    CK(cudaFree(num_runs));
    return 0;
}
