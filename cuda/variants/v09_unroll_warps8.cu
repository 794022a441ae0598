/*
 * v09_unroll_warps8.cu -- v08, with the last warp's six tree steps unrolled and no __syncthreads().
 *
 * What it does: as v08, each thread combines 8 elements of its block's tile while loading and stores
 * the one value to shared memory. The interleaved tree then runs only while stride > 32
 * (gr::interleaved_tree(s, 32)), leaving 64 values; warp 0 folds those in six unrolled steps
 * (stride 32, 16, 8, 4, 2, 1) with no block-wide barrier (gr::last_warp_unrolled). Lane 0 ends with
 * the block's value, one partial per block.
 *
 * What changed from v08, and why it is faster: once 32 threads or fewer work, v08 still pays a
 * __syncthreads(), a loop test and an idle-thread check per step. Those six steps now cost six
 * straight-line shared-memory steps inside one warp.
 *
 * Why __syncwarp(): the textbook marks the shared array volatile and relies on the warp running in
 * lockstep. Since Volta a warp's lanes are scheduled independently, so with volatile alone a lane can
 * read s[tid + d] before its owner has written the previous step, or overwrite s[tid] before a lower
 * lane has read it -- a race, which compute-sanitizer racecheck reports. Each step here reads into a
 * register, __syncwarp()s, writes, and __syncwarp()s again; volatile stays, as in the textbook.
 *
 * Needs: a power-of-two block of 64..1024 threads (the last warp reads s[tid + 32], so 64 values must
 * exist); blockDim.x * sizeof(accumulator) bytes of dynamic shared memory. The textbook reduces in
 * place in global memory; this one reduces a shared-memory copy, so the input is read-only. No tail is
 * dropped (a run that crosses n takes only the elements below n).
 * Reproduces: "reduceUnrollWarps8" (Professional CUDA C Programming, ch. 3) and "Reduce v4", Harris's
 * kernel 5 ("unroll the last warp"). No atomics.
 */
#include "../device/classic.cuh"
#include "../device/epilogue.cuh"
#include "../host/launch.cuh"

namespace {

constexpr int kUnroll = 8;

template <class Op, class In>
__global__ void unroll_warps8_kernel(const In *__restrict__ in, size_t n, typename Op::acc_t *partials,
                                     unsigned *counter, typename Op::acc_t *final_out) {
    using Acc = typename Op::acc_t;
    Acc *s = gr::dynamic_smem<Acc>();
    s[threadIdx.x] = gr::tile_load<Op, In, kUnroll>(in, n);
    __syncthreads();
    gr::interleaved_tree<Op>(s, 32);    /* for (stride = blockDim.x / 2; stride > 32; stride >>= 1) */
    Acc v = Op::identity();
    if (threadIdx.x < 32) v = gr::last_warp_unrolled<Op>(s);
    gr::epilogue<Op>(v, partials, counter, final_out);
}

}  // namespace

static size_t grid(size_t n, int block, size_t /*elem_bytes*/, const gr_launch_device * /*dev*/) {
    return gr::grid_for_tiles(n, size_t(block) * kUnroll);
}

static int launch(gr_launch *L) { return GR_LAUNCH_PASS_DTYPES(L, unroll_warps8_kernel, true, GR_DTYPES_ARITHMETIC); }

extern "C" const gr_kernel gr_kernel_unroll_warps8 = {launch, grid, nullptr};
