/*
 * oneshot.cu -- one value combined across the ranks of a communicator whose GPUs reach each other's
 * memory (engine/multi/comm_oneshot.c): every rank writes its value into every rank's mailbox, then waits
 * for every rank's value in its own and folds them in rank order. One launch of one warp, no NCCL: what a
 * one-value c:reduce costs is then one kernel's latency and one round trip over NVLink, where a
 * 1-element ncclAllReduce took 60-80 us on an H100 pair (docs/performance.md).
 *
 * A mailbox is GR_ONESHOT_RANKS slots a parity, two parities; a slot is a value and the epoch it belongs to.
 * Calls alternate parities, so a rank that has finished call e and starts e + 1 writes slots that no
 * rank still reads: a rank reaches e + 2 only after every rank's value of e + 1, which each rank sends
 * after it has read all of e. The value is stored first and the epoch after it with release order at
 * system scope; a reader that sees the epoch (acquire) sees the value. A rank that never sends its value
 * leaves the others waiting until the deadline: then they write no value and say so in the status word.
 * Also the IPC handles that let the ranks open each other's mailboxes.
 */
#include <cuda_runtime.h>
#include <cuda/atomic>
#include <stdint.h>
#include <string.h>

#include "../../engine/base/device.h"

namespace {

typedef unsigned long long u64;

__device__ u64 now_ns() {
    u64 t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

template <class T> __device__ T fold(T a, T b, int op) {
    switch (op) {
    case GR_COMM_SUM: return a + b;
    case GR_COMM_PROD: return a * b;
    case GR_COMM_MIN: return b < a ? b : a;
    default: return a < b ? b : a;
    }
}

/* NCCL's fmin and fmax for floats (a NaN loses to a number): the same bits as the all-reduce path. */
template <> __device__ double fold<double>(double a, double b, int op) {
    switch (op) {
    case GR_COMM_SUM: return a + b;
    case GR_COMM_PROD: return a * b;
    case GR_COMM_MIN: return fmin(a, b);
    default: return fmax(a, b);
    }
}

template <class T> __device__ u64 fold_all(const u64 *words, int size, int op) {
    T acc;
    memcpy(&acc, &words[0], sizeof acc);
    for (int r = 1; r < size; r++) {
        T x;
        memcpy(&x, &words[r], sizeof x);
        acc = fold<T>(acc, x, op);
    }
    u64 w = 0;
    memcpy(&w, &acc, sizeof acc);
    return w;
}

/* The value as a word of the wire dtype: float32 widened to float64, narrower integers to 64 bits with
 * their sign, the wire's own bytes as they are (gr_dev_oneshot_widens says which). */
__device__ u64 wire_word(const void *value, int held) {
    switch (held) {
    case GR_FLOAT32: {
        const double d = double(*static_cast<const float *>(value));
        u64 w;
        memcpy(&w, &d, 8);
        return w;
    }
    case GR_INT32: return u64(static_cast<long long>(*static_cast<const int *>(value)));
    case GR_INT16: return u64(static_cast<long long>(*static_cast<const short *>(value)));
    case GR_INT8: return u64(static_cast<long long>(*static_cast<const signed char *>(value)));
    case GR_UINT32: return u64(*static_cast<const unsigned *>(value));
    case GR_UINT16: return u64(*static_cast<const unsigned short *>(value));
    case GR_UINT8: case GR_BOOL: return u64(*static_cast<const unsigned char *>(value));
    default: return *static_cast<const u64 *>(value);
    }
}

__global__ void oneshot_kernel(u64 *const *boxes, int rank, int size, u64 epoch, const void *value, int held, int wire,
                               int op, u64 *reply, u64 timeout_ns) {
    __shared__ u64 words[GR_ONESHOT_RANKS];
    __shared__ int late;
    const int q = threadIdx.x;
    const int parity = int(epoch & 1u) * GR_ONESHOT_RANKS;
    if (q == 0) late = 0;
    __syncthreads();
    if (q < size) {
        /* mine into rank q's mailbox */
        u64 *slot = boxes[q] + 2 * (parity + rank);
        slot[0] = wire_word(value, held);
        cuda::atomic_ref<u64, cuda::thread_scope_system>(slot[1]).store(epoch, cuda::memory_order_release);
        /* rank q's from mine */
        u64 *from = boxes[rank] + 2 * (parity + q);
        cuda::atomic_ref<u64, cuda::thread_scope_system> seen(from[1]);
        const u64 t0 = now_ns();
        for (unsigned spins = 0; seen.load(cuda::memory_order_acquire) != epoch; spins++) {
            if ((spins & 255u) == 255u && now_ns() - t0 > timeout_ns) {
                late = 1;
                break;
            }
        }
        words[q] = *const_cast<volatile u64 *>(&from[0]);
    }
    __syncthreads();
    if (q != 0) return;
    if (late) {
        reply[1] = 2;
        return;
    }
    switch (wire) {
    case GR_FLOAT64: reply[0] = fold_all<double>(words, size, op); break;
    case GR_INT64: reply[0] = fold_all<long long>(words, size, op); break;
    case GR_UINT64: reply[0] = fold_all<u64>(words, size, op); break;
    default: reply[0] = fold_all<unsigned char>(words, size, op); break;
    }
    reply[1] = 1;
}

}  // namespace

extern "C" int gr_dev_oneshot_widens(gr_dtype held, gr_dtype wire) {
    switch (held) {
    case GR_FLOAT32: return wire == GR_FLOAT64;
    case GR_INT8: case GR_INT16: case GR_INT32: return wire == GR_INT64;
    case GR_UINT16: case GR_UINT32: return wire == GR_UINT64;
    case GR_UINT8: return wire == GR_UINT64 || wire == GR_UINT8;
    case GR_BOOL: return wire == GR_UINT8;
    default: return held == wire;
    }
}

extern "C" int gr_dev_oneshot(unsigned long long *const *boxes, int rank, int size, unsigned long long epoch,
                              const void *value, gr_dtype held, gr_dtype wire, gr_comm_op op,
                              unsigned long long *reply, double timeout_s, void *stream) {
    if (size < 1 || size > GR_ONESHOT_RANKS || rank < 0 || rank >= size || !gr_dev_oneshot_widens(held, wire))
        return cudaErrorInvalidValue;
    const u64 timeout_ns = timeout_s >= 1e9 ? ~0ull : u64(timeout_s * 1e9);
    oneshot_kernel<<<1, 32, 0, (cudaStream_t)stream>>>(boxes, rank, size, epoch, value, int(held), int(wire), int(op),
                                                        reply, timeout_ns);
    return cudaGetLastError();
}

extern "C" int gr_dev_mailbox_new(void **box, void *handle) {
    /* cudaMalloc's memory, not the buffer pool's: only it has an IPC handle */
    *box = NULL;
    cudaError_t e = cudaMalloc(box, GR_ONESHOT_BOX_BYTES);
    cudaIpcMemHandle_t h;
    if (e == cudaSuccess) e = cudaMemset(*box, 0, GR_ONESHOT_BOX_BYTES);
    if (e == cudaSuccess) e = cudaIpcGetMemHandle(&h, *box);
    if (e != cudaSuccess) {
        cudaGetLastError();
        if (*box) cudaFree(*box);
        *box = NULL;
        return e;
    }
    memcpy(handle, &h, sizeof h);
    return 0;
}

extern "C" int gr_dev_mailbox_free(void *box) { return cudaFree(box); }

extern "C" int gr_dev_ipc_open(const void *handle, void **p) {
    cudaIpcMemHandle_t h;
    memcpy(&h, handle, sizeof h);
    cudaError_t e = cudaIpcOpenMemHandle(p, h, cudaIpcMemLazyEnablePeerAccess);
    if (e != cudaSuccess) {
        cudaGetLastError();
        *p = NULL;
    }
    return e;
}

extern "C" int gr_dev_ipc_close(void *p) { return cudaIpcCloseMemHandle(p); }
