/*
 * v04_interleaved.cu -- interleaved pairs: the stride halves from blockDim.x / 2, threads stay contiguous.
 *
 * What it does: each thread loads one element of its block's tile (the identity past n) into shared
 * memory; then, for stride = blockDim.x / 2, ..., 2, 1, the first `stride` threads fold s[tid + stride]
 * into s[tid], with a __syncthreads() after each step (gr::interleaved_tree). s[0] ends with the
 * block's value, one partial per block.
 *
 * What changed from v03, and why it is faster: the pairs are (tid, tid + stride) instead of
 * (2 * stride * tid, 2 * stride * tid + stride). The workers are still the first threads (whole warps
 * idle, no divergence until fewer than 32 are left), and now a warp reads and writes 32 consecutive
 * words: no shared-memory bank conflicts. What is still slow: half of the threads idle from the very
 * first step, each thread loads a single element (little memory-level parallelism, a log2(block)-step
 * tree with a barrier per step for every `block` elements), and there are n / block partials. v06-v08
 * combine several elements while loading.
 *
 * Needs: a power-of-two block of 32..1024 threads; blockDim.x * sizeof(accumulator) bytes of dynamic
 * shared memory. The textbook reduces in place in global memory; this one reduces a shared-memory copy,
 * so the input is read-only. Past n, threads load the identity: no tail is dropped.
 * Reproduces: "reduceInterleaved" (Professional CUDA C Programming, ch. 3) and "Reduce v2", Harris's
 * kernel 3 ("sequential addressing"). No atomics.
 */
#include "../device/classic.cuh"
#include "../device/epilogue.cuh"
#include "../host/launch.cuh"

namespace {

template <class Op, class In>
__global__ void interleaved_kernel(const In *__restrict__ in, size_t n, typename Op::acc_t *partials,
                                   unsigned *counter, typename Op::acc_t *final_out) {
    using Acc = typename Op::acc_t;
    Acc *s = gr::dynamic_smem<Acc>();
    s[threadIdx.x] = gr::tile_load<Op, In, 1>(in, n);
    __syncthreads();
    gr::interleaved_tree<Op>(s, 0);     /* for (stride = blockDim.x / 2; stride > 0; stride >>= 1) */
    gr::epilogue<Op>(s[0], partials, counter, final_out);
}

}  // namespace

static size_t grid(size_t n, int block, size_t /*elem_bytes*/, const gr_launch_device * /*dev*/) {
    return gr::grid_for_tiles(n, size_t(block));
}

static int launch(gr_launch *L) { return GR_LAUNCH_PASS(L, interleaved_kernel, true); }

extern "C" const gr_kernel gr_kernel_interleaved = {launch, grid, nullptr};
