/*
 * epilogue.cuh -- the end of every kernel's block: its value becomes a partial, or, in the "single"
 * finish, the last block to arrive combines all the partials and writes the result. Every variant
 * with partials calls epilogue(); its finishing modes follow from that (engine/core/finish.c).
 * NVRTC-clean (core.cuh).
 */
#pragma once

#include "core.cuh"
#include "warp_block.cuh"

namespace gr {

/* ---- the "single" finish ------------------------------------------------------------------------ */

/* Every block stores its value; the last block to arrive (a ticket from an atomic counter, after a
 * fence that publishes the store) combines all of them in block order -- so the result does not
 * depend on which block came last -- and writes it to final_out (pinned, mapped host memory). It
 * resets the counter for the next reduction that uses this scratch slot. */
/* A value another block wrote, read past the caches (word by word for an accumulator struct). */
template <class T> GR_DEV T load_volatile(const T *p) {
    if constexpr (is_arithmetic_v<T>) {
        return *reinterpret_cast<volatile const T *>(p);
    } else if constexpr (sizeof(T) < 4) {           /* a small float element (small_float.cuh): its bits */
        using B = conditional_t<sizeof(T) == 1, u8, u16>;
        const B bits = *reinterpret_cast<volatile const B *>(p);
        return bit_cast<T>(bits);
    } else {
        static_assert(sizeof(T) % 4 == 0, "load_volatile: whole 32-bit words");
        unsigned w[sizeof(T) / 4];
#pragma unroll
        for (unsigned k = 0; k < sizeof(T) / 4; k++) w[k] = reinterpret_cast<volatile const unsigned *>(p)[k];
        T v;
        memcpy(&v, w, sizeof v);
        return v;
    }
}

/* The slot's counter words (engine/core/pool.c lays them out): [0] the ticket of the last-block finish,
 * [2..3] a completion flag in pinned host memory (null: none), [4..5] the reply words beside it. A
 * synchronous call lowers both before the launch and spins until one is raised (engine/core/exec.c).
 *
 * The reply is the result itself, 4 bytes in each 8-byte word whose high half holds the number of words:
 * an aligned 8-byte store lands whole, so the host knows every word it has read is this result's, and
 * needs no other sign. A flag would have to follow a __threadfence_system(), which waits about a
 * microsecond for the result's store to reach host memory (experiments/tuning/resident_probe.cu: a small
 * call's round trip 7.0 against 8.0 us on an H100). Accumulators wider than the reply still take the
 * fence and the flag. Raising either from the kernel itself spares the stream a memory operation after
 * the kernel, and works inside a CUDA graph. */
constexpr unsigned kReplyWords = 8;

template <class Acc> GR_DEV void signal_done(unsigned *counter, const Acc &v) {
    unsigned *flag = *reinterpret_cast<unsigned *const *>(counter + 2);
    if (!flag) return;
    if constexpr (sizeof(Acc) <= 4 * kReplyWords) {
        constexpr unsigned kWords = (sizeof(Acc) + 3) / 4;
        unsigned w[kWords] = {};
        memcpy(w, &v, sizeof(Acc));
        volatile u64 *reply = *reinterpret_cast<volatile u64 *const *>(counter + 4);
#pragma unroll
        for (unsigned k = 0; k < kWords; k++) reply[k] = u64(kWords) << 32 | w[k];
    } else {
        __threadfence_system();
        *reinterpret_cast<volatile unsigned *>(flag) = 1u;
    }
}

template <class Op>
__device__ void finish_last_block(typename Op::acc_t block_value, typename Op::acc_t *partials,
                                  unsigned *counter, typename Op::acc_t *final_out) {
    using Acc = typename Op::acc_t;
    __shared__ bool is_last;
    if (threadIdx.x == 0) {
        partials[blockIdx.x] = block_value;
        __threadfence();
        is_last = atomicAdd(counter, 1u) == gridDim.x - 1;
        /* reset for the slot's next reduction before the fence below: the reply needs no fence of its own,
         * and the next launch may come as soon as the host has it */
        if (is_last) *counter = 0;
    }
    __syncthreads();
    if (!is_last) return;
    __threadfence();
    Acc v = Op::identity();
    for (unsigned i = threadIdx.x; i < gridDim.x; i += blockDim.x) v = Op::combine(v, load_volatile(partials + i));
    v = block_reduce<Op>(v);
    if (threadIdx.x == 0) {
        *final_out = v;
        signal_done(counter, v);
    }
}

/* The end of a block: thread 0's value becomes partials[blockIdx.x], or, when the reduction finishes in
 * this launch (final_out set), goes through finish_last_block. Every thread must call it (it syncs:
 * finish_last_block has a barrier, and a block must reach it whole). */
template <class Op>
__device__ void epilogue(typename Op::acc_t v, typename Op::acc_t *partials, unsigned *counter,
                         typename Op::acc_t *final_out) {
    if (final_out) finish_last_block<Op>(v, partials, counter, final_out);
    else if (threadIdx.x == 0) partials[blockIdx.x] = v;
}

}  // namespace gr
