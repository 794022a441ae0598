/*
 * api_costs.cu -- what single CUDA runtime calls cost on this host (issue 25: where a sorted reduction by
 * key's fixed cost went; docs/performance.md quotes these): a kernel launch, a memset, copies to pinned
 * and pageable memory with and without their wait, an allocation from a pool like the engine's (release
 * threshold at the maximum, the two cross-stream reuse rules off) with its free, on a stream of its own
 * and waited for as memory.c's are, or on the stream that uses it. Mean wall microseconds of 2000 calls
 * after 100 warm-ups, one row per call or sequence.
 *   nvcc -O2 -arch=sm_90 -o build/api_costs experiments/tuning/api_costs.cu && build/api_costs
 */
#include <chrono>
#include <cstdio>
#include <cuda_runtime.h>

__global__ void noop(int *p) {
    if (p && threadIdx.x == 1023) p[0] = 1;
}

static double now_us() {
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/* name, repetitions, the statements timed: 100 warm-ups, then the mean wall time of `reps` */
#define T(name, reps, ...)                                                                  \
    do {                                                                                    \
        for (int i_ = 0; i_ < 100; i_++) { __VA_ARGS__; }                                   \
        cudaDeviceSynchronize();                                                            \
        const double t0 = now_us();                                                         \
        for (int i_ = 0; i_ < (reps); i_++) { __VA_ARGS__; }                                \
        const double t1 = now_us();                                                         \
        cudaDeviceSynchronize();                                                            \
        printf("%-48s %8.2f us\n", name, (t1 - t0) / (reps));                              \
    } while (0)

int main() {
    cudaFree(0);
    cudaStream_t s, a;      /* s: the work's stream; a: the pool's own allocation stream, as runtime.cu's */
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking);
    cudaMemPoolProps props = {};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = 0;
    cudaMemPool_t pool;
    cudaMemPoolCreate(&pool, &props);
    unsigned long long keep = ~0ull;
    int off = 0;
    cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep);
    cudaMemPoolSetAttribute(pool, cudaMemPoolReuseFollowEventDependencies, &off);
    cudaMemPoolSetAttribute(pool, cudaMemPoolReuseAllowInternalDependencies, &off);
    void *p, *h;
    int *d, x[4];
    cudaMalloc(&d, 1 << 20);
    cudaHostAlloc(&h, 4096, cudaHostAllocMapped);

    T("cudaStreamSynchronize (idle)", 2000, cudaStreamSynchronize(a));
    T("cudaMemPoolGetAttribute reserved", 2000, {
        unsigned long long v;
        cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &v);
    });
    T("MallocFromPoolAsync(alloc)+sync+FreeAsync(s)", 2000, {
        cudaMallocFromPoolAsync(&p, 4096, pool, a);
        cudaStreamSynchronize(a);
        cudaFreeAsync(p, s);
    });
    T("MallocFromPoolAsync(s)+FreeAsync(s)", 2000, {
        cudaMallocFromPoolAsync(&p, 4096, pool, s);
        cudaFreeAsync(p, s);
    });
    T("cudaPointerGetAttributes", 2000, {
        cudaPointerAttributes at;
        cudaPointerGetAttributes(&at, d);
    });
    T("cudaMemsetAsync 16 B", 2000, cudaMemsetAsync(d, 0, 16, s));
    T("cudaLaunchKernel noop", 2000, noop<<<1, 32, 0, s>>>(nullptr));
    T("cudaGetLastError", 2000, cudaGetLastError());
    T("cudaMemcpyAsync D2H 16 B pinned (no sync)", 2000, cudaMemcpyAsync(h, d, 16, cudaMemcpyDeviceToHost, s));
    T("cudaMemcpyAsync D2D 256 B (no sync)", 2000,
      cudaMemcpyAsync(d + 1024, d, 256, cudaMemcpyDeviceToDevice, s));
    T("D2H 16 B pageable + sync", 2000, {
        cudaMemcpyAsync(x, d, 16, cudaMemcpyDeviceToHost, s);
        cudaStreamSynchronize(s);
    });
    T("D2H 16 B pinned + sync", 2000, {
        cudaMemcpyAsync(h, d, 16, cudaMemcpyDeviceToHost, s);
        cudaStreamSynchronize(s);
    });
    T("launch noop + sync", 2000, {
        noop<<<1, 32, 0, s>>>(nullptr);
        cudaStreamSynchronize(s);
    });
    T("memset + 2 launches + D2H pinned + sync", 2000, {
        cudaMemsetAsync(d, 0, 16, s);
        noop<<<1, 256, 0, s>>>(nullptr);
        noop<<<1, 256, 0, s>>>(nullptr);
        cudaMemcpyAsync(h, d, 16, cudaMemcpyDeviceToHost, s);
        cudaStreamSynchronize(s);
    });
    T("3 memsets + 2 launches + D2H pageable + sync", 2000, {
        cudaMemsetAsync(d, 0, 16, s);
        cudaMemsetAsync(d + 8, 0, 16, s);
        cudaMemsetAsync(d + 16, 0, 16, s);
        noop<<<1, 256, 0, s>>>(nullptr);
        noop<<<1, 256, 0, s>>>(nullptr);
        cudaMemcpyAsync(x, d, 16, cudaMemcpyDeviceToHost, s);
        cudaStreamSynchronize(s);
    });
    T("D2D 256 B + sync", 2000, {
        cudaMemcpyAsync(d + 1024, d, 256, cudaMemcpyDeviceToDevice, s);
        cudaStreamSynchronize(s);
    });
    T("2x D2D 256 B + one sync", 2000, {
        cudaMemcpyAsync(d + 1024, d, 256, cudaMemcpyDeviceToDevice, s);
        cudaMemcpyAsync(d + 2048, d, 256, cudaMemcpyDeviceToDevice, s);
        cudaStreamSynchronize(s);
    });
    return 0;
}
