/*
 * v12_warp_shuffle.cu -- grid-stride loads, several 16-byte loads in flight per thread, warp shuffles.
 *
 * What it does: a grid of at most one resident wave of blocks (SMs x blocks per SM) walks the input
 * with a grid-stride loop; each thread keeps kUnroll (2) independent 16-byte loads in flight and folds
 * each into its own register accumulator. Each warp then reduces its 32 values with __shfl_down_sync
 * (no shared memory, no barriers), the warps' values meet in a 32-slot shared array, and one warp
 * finishes.
 *
 * What changed from the unrolled kernels before it, and why it is faster: the classic kernels give each
 * thread one to eight elements, so the grid has n / (8 * block) blocks and the partials need another
 * pass per factor of a few thousand; their in-block tree runs log2(block) steps through shared memory
 * with a barrier each. Here the work per thread grows with n instead of the grid, loads are 16 bytes
 * wide (one instruction moves 4 floats or 16 bytes), enough are in flight to cover DRAM latency, and
 * the in-block tree costs five shuffles per warp plus one barrier. One pass leaves at most a few
 * thousand partials, which one more block (finish "device") or the last block of this same launch
 * (finish "single", the default of "auto") combines.
 *
 * Needs: a power-of-two block of 32..1024 threads (whole warps). Works on any alignment (the slice's
 * unaligned head and the tail are taken one element at a time) and any n up to 2^64.
 * Reproduces: "v7 shuffle", the optimised reduction of the multi-pass tutorials and of
 * "Faster Parallel Reductions on Kepler" (grid-stride loop + warp shuffle).
 */
#include "../device/epilogue.cuh"
#include "../host/launch.cuh"
#include "../device/thread_load.cuh"
#include "../device/warp_block.cuh"

namespace {

constexpr int kUnroll = 2;   /* loads in flight per thread per iteration: see thread_accumulate */

/* launch bounds of the largest block the registry offers: the ops with wide accumulators (norm's three
 * sums over int8 vectors) would otherwise take more registers than a block of 1024 threads can have */
template <class Op, class In>
__global__ void __launch_bounds__(1024) warp_shuffle_kernel(const In *__restrict__ in, size_t n, typename Op::acc_t *partials,
                                    unsigned *counter, typename Op::acc_t *final_out, gr::u64 first) {
    typename Op::acc_t v = gr::thread_accumulate<Op, In, kUnroll>(in, n, first);
    v = gr::block_reduce<Op>(v);
    gr::epilogue<Op>(v, partials, counter, final_out);
}

}  // namespace

static size_t grid(size_t n, int block, size_t elem_bytes, const gr_launch_device *dev) {
    return gr::grid_for(n, size_t(block) * (16 / elem_bytes) * kUnroll, block, dev);
}

/* every op, the classic ones and those of more values or an index */
static int launch(gr_launch *L) { return GR_LAUNCH_PASS_OPS(L, warp_shuffle_kernel, false, GR_OPS_ALL, true); }

extern "C" const gr_kernel gr_kernel_warp_shuffle = {launch, grid, nullptr};
