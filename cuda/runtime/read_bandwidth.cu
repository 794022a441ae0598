/*
 * read_bandwidth.cu -- the ceiling the benchmarks compare against: a kernel that only reads.
 *
 * Every byte of the buffer is loaded once with 16-byte loads in a grid-stride loop of the same shape as
 * the fast variants (one resident wave of 256-thread blocks, two 16-byte loads in flight per thread)
 * and folded with XOR, the cheapest operation that keeps the loads alive; a thread writes only when its fold hits
 * one magic value, which random data practically never does. A reduction cannot read faster than this.
 */
#include <cuda_runtime.h>
#include <stdint.h>

#include "../../engine/base/device.h"

namespace {

constexpr int kBlock = 256;
constexpr int kUnroll = 2;    /* loads per iteration: the shape of gr::thread_accumulate */

__global__ void read_all_kernel(const unsigned char *__restrict__ p, size_t bytes, unsigned *sink) {
    const size_t tid = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
    const size_t threads = size_t(gridDim.x) * blockDim.x;
    size_t head = (16 - (reinterpret_cast<uintptr_t>(p) & 15)) & 15;
    if (head > bytes) head = bytes;
    const uint4 *v = reinterpret_cast<const uint4 *>(p + head);
    const size_t nvec = (bytes - head) / 16;
    unsigned x = 0;
    size_t i = tid;
    for (; i + threads < nvec; i += 2 * threads) {      /* as plain as a loop can be: two loads, XOR */
        const uint4 a = v[i], b = v[i + threads];
        x ^= a.x ^ a.y ^ a.z ^ a.w ^ b.x ^ b.y ^ b.z ^ b.w;
    }
    if (i < nvec) {
        const uint4 a = v[i];
        x ^= a.x ^ a.y ^ a.z ^ a.w;
    }
    const size_t tail = head + nvec * 16;               /* the odd bytes at either end, once each */
    if (tid < head) x ^= p[tid];
    if (tid < bytes - tail) x ^= p[tail + tid];
    if (x == 0x9E3779B9u) atomicAdd(sink, 1u);
}

}  // namespace

extern "C" int gr_dev_read_all(const void *p, size_t bytes, unsigned *sink, int sms, void *stream) {
    size_t per_block = size_t(kBlock) * 16 * kUnroll;
    size_t want = (bytes + per_block - 1) / per_block;
    size_t full = size_t(sms) * (2048 / kBlock);
    unsigned grid = unsigned(want < 1 ? 1 : want < full ? want : full);
    read_all_kernel<<<grid, kBlock, 0, (cudaStream_t)stream>>>((const unsigned char *)p, bytes, sink);
    return cudaGetLastError();
}
