/*
 * v10_complete_unroll8.cu -- v09, with the whole in-block tree written out, one step per block size.
 *
 * What it does: as v09, each thread combines 8 elements of its block's tile while loading and stores
 * the one value to shared memory. The tree has no loop: one step per possible size
 * (`if (blockDim.x >= 1024 && tid < 512) s[tid] += s[tid + 512]`, then 512, 256, 128, each followed by
 * __syncthreads()), then the last warp unrolled as in v09 (gr::complete_unrolled_tree with
 * blockDim.x). Lane 0 ends with the block's value, one partial per block.
 *
 * What changed from v09, and why it is faster: the loop counter, its shift and its test are gone; what
 * remains per step is a comparison of blockDim.x (uniform across the block, so no divergence) and the
 * tid test. The comparisons are still made at run time, since blockDim.x is not known when compiling:
 * v11 moves them to compile time.
 *
 * The last warp uses volatile and __syncwarp() between its steps: volatile alone, as in the textbook,
 * is a race on Volta and later, where a warp's lanes are scheduled independently (see v09 and
 * gr::last_warp_unrolled).
 *
 * Needs: a power-of-two block of 64..1024 threads; blockDim.x * sizeof(accumulator) bytes of dynamic
 * shared memory. The textbook reduces in place in global memory; this one reduces a shared-memory copy,
 * so the input is read-only. No tail is dropped (a run that crosses n takes only the elements below n).
 * Reproduces: "reduceCompleteUnrollWarps8" (Professional CUDA C Programming, ch. 3) and "Reduce v5",
 * Harris's kernel 6 ("completely unrolled") with a run-time block size. No atomics.
 */
#include "../device/classic.cuh"
#include "../device/epilogue.cuh"
#include "../host/launch.cuh"

namespace {

constexpr int kUnroll = 8;

template <class Op, class In>
__global__ void complete_unroll8_kernel(const In *__restrict__ in, size_t n, typename Op::acc_t *partials,
                                        unsigned *counter, typename Op::acc_t *final_out) {
    using Acc = typename Op::acc_t;
    Acc *s = gr::dynamic_smem<Acc>();
    s[threadIdx.x] = gr::tile_load<Op, In, kUnroll>(in, n);
    __syncthreads();
    const Acc v = gr::complete_unrolled_tree<Op>(s, blockDim.x);
    gr::epilogue<Op>(v, partials, counter, final_out);
}

}  // namespace

static size_t grid(size_t n, int block, size_t /*elem_bytes*/, const gr_launch_device * /*dev*/) {
    return gr::grid_for_tiles(n, size_t(block) * kUnroll);
}

static int launch(gr_launch *L) { return GR_LAUNCH_PASS_DTYPES(L, complete_unroll8_kernel, true, GR_DTYPES_ARITHMETIC); }

extern "C" const gr_kernel gr_kernel_complete_unroll8 = {launch, grid, nullptr};
