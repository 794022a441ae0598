/*
 * volatile_race.cu -- why the catalogue's last-warp unrolling uses __syncwarp (scripts/sanitize.sh).
 *
 * Two copies of the textbook's "unroll the last warp" step (reduceUnrollWarps8, Reduce v4): one with the
 * classic volatile pointer alone, one as gr::last_warp_unrolled does it (volatile, plus __syncwarp()
 * between each read and write). Since Volta the lanes of a warp are scheduled independently, so the
 * first is a data race on shared memory; compute-sanitizer --tool racecheck reports hazards for it and
 * none for the second. Run:  compute-sanitizer --tool racecheck build/volatile_race {classic|synced}
 */
#include <cstdio>
#include <cstring>

__global__ void classic(const int *in, int *out) {
    __shared__ int s[64];
    const unsigned tid = threadIdx.x;
    s[tid] = in[tid];
    __syncthreads();
    if (tid < 32) {
        volatile int *v = s;        /* the textbook: volatile alone, no barrier inside the warp */
        v[tid] += v[tid + 32];
        v[tid] += v[tid + 16];
        v[tid] += v[tid + 8];
        v[tid] += v[tid + 4];
        v[tid] += v[tid + 2];
        v[tid] += v[tid + 1];
    }
    if (tid == 0) *out = s[0];
}

__global__ void synced(const int *in, int *out) {
    __shared__ int s[64];
    const unsigned tid = threadIdx.x;
    s[tid] = in[tid];
    __syncthreads();
    if (tid < 32) {
        volatile int *v = s;
        int x = v[tid];
        for (unsigned d = 32; d > 0; d >>= 1) {   /* read, wait for the warp, write, wait again */
            x += v[tid + d];
            __syncwarp();
            v[tid] = x;
            __syncwarp();
        }
    }
    if (tid == 0) *out = s[0];
}

int main(int argc, char **argv) {
    const bool use_classic = argc > 1 && strcmp(argv[1], "classic") == 0;
    int h[64], *in, *out, sum = 0, got = 0;
    for (int i = 0; i < 64; i++) sum += h[i] = i + 1;
    cudaMalloc(&in, sizeof h);
    cudaMalloc(&out, sizeof(int));
    cudaMemcpy(in, h, sizeof h, cudaMemcpyHostToDevice);
    if (use_classic) classic<<<1, 64>>>(in, out);
    else synced<<<1, 64>>>(in, out);
    cudaMemcpy(&got, out, sizeof got, cudaMemcpyDeviceToHost);
    printf("%s last warp: sum %d (expected %d)\n", use_classic ? "classic volatile-only" : "volatile + __syncwarp",
           got, sum);
    return 0;
}
