/*
 * v03_neighbored_less.cu -- neighbored pairs with the index remapped to 2 * stride * tid.
 *
 * What it does: the same pairs as v02 (s[i] folds in s[i + stride] for i a multiple of 2 * stride),
 * but thread tid now handles the pair at index = 2 * stride * tid, and only threads with
 * index < blockDim.x work; s[0] ends with the block's value, one partial per block.
 *
 * What changed from v02, and why it is faster: in each step the workers are the first
 * blockDim.x / (2 * stride) threads, packed into as few warps as possible, so the other warps idle as a
 * whole instead of running a divergent branch, and the `%` is gone. Why it is still slow: lane tid
 * touches element 2 * stride * tid, so for 4-byte values lanes 16 / stride apart hit the same
 * shared-memory bank: 2-way conflicts at stride 1, 4-way at 2, 8-way at 4, and so on (narrower and
 * wider values move where the conflicts start, not whether they happen), and conflicting accesses are
 * serialised. The access pattern is kept on purpose: it is what v04's contiguous layout fixes. One
 * element per thread, n / block partials, as in v02.
 *
 * Needs: a power-of-two block of 32..1024 threads; blockDim.x * sizeof(accumulator) bytes of dynamic
 * shared memory. The textbook reduces in place in global memory; this one reduces a shared-memory copy,
 * so the input is read-only. Past n, threads load the identity: no tail is dropped.
 * Reproduces: "reduceNeighboredLess" (Professional CUDA C Programming, ch. 3) and "Reduce v1", Harris's
 * kernel 2 ("interleaved addressing with a strided index and bank conflicts"). No atomics.
 */
#include "../device/classic.cuh"
#include "../device/epilogue.cuh"
#include "../host/launch.cuh"

namespace {

template <class Op, class In>
__global__ void neighbored_less_kernel(const In *__restrict__ in, size_t n, typename Op::acc_t *partials,
                                       unsigned *counter, typename Op::acc_t *final_out) {
    using Acc = typename Op::acc_t;
    Acc *s = gr::dynamic_smem<Acc>();
    const unsigned tid = threadIdx.x;
    s[tid] = gr::tile_load<Op, In, 1>(in, n);
    __syncthreads();
    for (unsigned stride = 1; stride < blockDim.x; stride *= 2) {
        const unsigned index = 2 * stride * tid;    /* < 2^20 for blocks up to 1024: no overflow */
        if (index < blockDim.x) s[index] = Op::combine(s[index], s[index + stride]);
        __syncthreads();
    }
    gr::epilogue<Op>(s[0], partials, counter, final_out);
}

}  // namespace

static size_t grid(size_t n, int block, size_t /*elem_bytes*/, const gr_launch_device * /*dev*/) {
    return gr::grid_for_tiles(n, size_t(block));
}

static int launch(gr_launch *L) { return GR_LAUNCH_PASS(L, neighbored_less_kernel, true); }

extern "C" const gr_kernel gr_kernel_neighbored_less = {launch, grid, nullptr};
