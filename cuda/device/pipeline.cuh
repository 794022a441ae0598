/*
 * pipeline.cuh -- a thread's share of the input, with its loads running ahead of its folds.
 *
 * thread_accumulate (thread_load.cuh) issues two 16-byte loads, waits for them, folds them, and only
 * then issues the next two: while a warp folds, it has nothing in flight. That costs little when a
 * fold is a few instructions (float sums), but a 1-byte product folds 16 elements with about 40
 * instructions, and there it held the kernel to 74% of the read kernel although the issue slots were
 * far from full and every kernel ran at full occupancy.
 *
 * Here each thread copies its 16-byte vectors into its own slots of a shared-memory ring with the
 * asynchronous copy (cp.async, sm_80 and later): kStages copies are in flight when a thread waits for
 * the oldest, the newest issued into the slot that was read one iteration earlier. A thread reads only
 * the slots it filled, so no barrier is needed (cp.async.wait_group makes a thread's own copies
 * visible to it), and the ring costs shared memory, not registers. NVRTC-clean (core.cuh).
 */
#pragma once

#include "core.cuh"
#include "thread_load.cuh"

namespace gr {

/* Three stages measured best at 1024 threads (experiments/tuning/byte_pipeline.cu, H200): four to six
 * hold more in flight but no more bandwidth came of it. */
constexpr int kStages = 3;

/* The ring starts on a 128-byte boundary. Dynamic shared memory begins right after the kernel's static
 * shared memory (272 bytes for block_reduce and finish_last_block), which left the ring 16 bytes off a
 * 32-byte sector: every copy then straddled two sectors of shared memory, and the kernel ran at 84-87%
 * of the read kernel instead of 97-100% (experiments/tuning/byte_pipeline.cu, H200). */
constexpr size_t kRingAlign = 128;

/* Dynamic shared memory of the ring for a block of `block` threads, with room to align it. */
GR_HOSTDEV size_t ring_bytes(int block) { return size_t(kStages) * size_t(block) * 16 + kRingAlign; }

/* The ring inside the dynamic shared memory `smem` (ring_bytes(blockDim.x) of it). */
GR_DEV uint4 *ring_in(void *smem) {
    const uptr at = (reinterpret_cast<uptr>(smem) + kRingAlign - 1) & ~uptr(kRingAlign - 1);
    return reinterpret_cast<uint4 *>(at);
}

/* One 16-byte copy from global to shared memory, in flight until wait_copies. Before sm_80 (no
 * cp.async) it is an ordinary load and store, done at once. */
GR_DEV void copy16_async(uint4 *smem, const void *gmem) {
#if __CUDA_ARCH__ >= 800
    const unsigned s = unsigned(__cvta_generic_to_shared(smem));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s), "l"(gmem) : "memory");
#else
    *smem = *reinterpret_cast<const uint4 *>(gmem);
#endif
}

/* Closes the group of copies issued since the last commit (an empty group is fine: it keeps the count
 * of groups in step with the stages). */
GR_DEV void commit_copies() {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}

/* Waits until at most `pending` of this thread's groups are still in flight. */
template <int pending> GR_DEV void wait_copies() {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %0;" ::"n"(pending) : "memory");
#endif
}

/* The elements thread_accumulate<Op, In, ...>(in, n) takes: the unaligned head and the tail one element
 * at a time by the first threads, the 16-byte vectors i = tid, tid + threads, ... in between, here
 * folded in that order into one accumulator (the order depends only on n and the launch shape, so
 * results are reproducible). `smem` is ring_bytes(blockDim.x) of dynamic shared memory;
 * thread t owns ring[s * blockDim.x + t] for each stage s, so a warp's 32 slots are 512 consecutive
 * bytes (no bank conflicts). */
template <class Op, class In>
GR_DEV typename Op::acc_t thread_accumulate_pipelined(const In *__restrict__ in, size_t n, void *smem,
                                                      u64 first = 0) {
    if constexpr (!vectorizable_v<In>) {
        return thread_accumulate<Op, In, 1>(in, n, first);     /* passes over wide accumulators */
    } else {
    using T = ThreadAcc<Op, In>;
    using V = Vec16<In>;
    constexpr int kV = V::kCount;
    const size_t tid = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
    const size_t threads = size_t(gridDim.x) * blockDim.x;
    typename T::type acc = T::init();

    size_t head = ((16 - (reinterpret_cast<uptr>(in) & 15)) & 15) / sizeof(In);
    if (head > n) head = n;
    if (tid < head) acc = T::fold1(acc, in[tid], first + tid);

    const V *vin = reinterpret_cast<const V *>(in + head);
    const size_t nvec = (n - head) / kV;
    uint4 *mine = ring_in(smem) + threadIdx.x;
#pragma unroll
    for (int s = 0; s < kStages - 1; s++) {
        const size_t j = tid + s * threads;
        if (j < nvec) copy16_async(mine + s * blockDim.x, vin + j);
        commit_copies();
    }
    int slot = 0;
    for (size_t i = tid; i < nvec; i += threads) {
        /* the slot read in the previous iteration (long since read) takes the vector kStages - 1 ahead,
         * then the oldest group, vector i, is waited for */
        const int fill = slot == 0 ? kStages - 1 : slot - 1;
        const size_t ahead = i + (kStages - 1) * threads;
        if (ahead < nvec) copy16_async(mine + fill * blockDim.x, vin + ahead);
        commit_copies();
        wait_copies<kStages - 1>();
        const uint4 w = mine[slot * blockDim.x];
        acc = T::fold(acc, *reinterpret_cast<const V *>(&w), first + head + i * kV);
        slot = slot == kStages - 1 ? 0 : slot + 1;
    }

    const size_t tail = head + nvec * kV;
    if (tid < n - tail) acc = T::fold1(acc, in[tail + tid], first + tail + tid);
    return T::value(acc);
    }
}

}  // namespace gr
