/*
 * v02_neighbored.cu -- neighbored pairs in shared memory, picked by the divergent `tid % (2 * stride)`.
 *
 * What it does: each thread loads one element of its block's tile (the identity past n) into shared
 * memory. Then, for stride = 1, 2, 4, ..., every thread whose index is a multiple of 2 * stride folds in
 * its neighbour at distance stride, with a __syncthreads() after each step; s[0] ends with the block's
 * value, one partial per block.
 *
 * Why it is slow (it is the first GPU step after the CPU's recursive reduction, cpu_pairwise, and the
 * baseline the catalogue improves on): in step k one thread in 2^(k+1) works, but the workers are
 * spread over every warp, so every warp stays busy running a divergent branch for a few lanes until
 * the last steps; the `%` by a run-time value is an integer division per thread per step; and with one
 * element per thread the grid has n / block blocks, so the partials need more passes.
 *
 * Needs: a power-of-two block of 32..1024 threads; blockDim.x * sizeof(accumulator) bytes of dynamic
 * shared memory. The textbook reduces in place in global memory; this one reduces a shared-memory copy,
 * so the input is read-only. The textbook also returns early for idx >= n and drops nothing only when
 * n is a multiple of the block; here out-of-range threads carry the identity through every barrier.
 * Reproduces: "reduceNeighbored" (Cheng et al., Professional CUDA C Programming, ch. 3) and "Reduce v0",
 * Harris's kernel 1 ("interleaved addressing with divergent branching"). No atomics.
 */
#include "../device/classic.cuh"
#include "../device/epilogue.cuh"
#include "../host/launch.cuh"

namespace {

template <class Op, class In>
__global__ void neighbored_kernel(const In *__restrict__ in, size_t n, typename Op::acc_t *partials,
                                  unsigned *counter, typename Op::acc_t *final_out) {
    using Acc = typename Op::acc_t;
    Acc *s = gr::dynamic_smem<Acc>();
    const unsigned tid = threadIdx.x;
    s[tid] = gr::tile_load<Op, In, 1>(in, n);
    __syncthreads();
    for (unsigned stride = 1; stride < blockDim.x; stride *= 2) {
        if (tid % (2 * stride) == 0) s[tid] = Op::combine(s[tid], s[tid + stride]);
        __syncthreads();
    }
    gr::epilogue<Op>(s[0], partials, counter, final_out);
}

}  // namespace

static size_t grid(size_t n, int block, size_t /*elem_bytes*/, const gr_launch_device * /*dev*/) {
    return gr::grid_for_tiles(n, size_t(block));
}

static int launch(gr_launch *L) { return GR_LAUNCH_PASS(L, neighbored_kernel, true); }

extern "C" const gr_kernel gr_kernel_neighbored = {launch, grid, nullptr};
