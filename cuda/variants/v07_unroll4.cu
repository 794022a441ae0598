/*
 * v07_unroll4.cu -- v04's interleaved tree, after each thread combines 4 elements while loading.
 *
 * What it does: block b takes a tile of 4 * blockDim.x elements; thread t loads elements t,
 * t + blockDim.x, t + 2 * blockDim.x and t + 3 * blockDim.x of it (each a coalesced row; the four
 * loads are issued before any is combined), combines them in a register (gr::tile_load) and stores the
 * one value to shared memory; then v04's interleaved tree (gr::interleaved_tree) leaves the block's
 * value in s[0], one partial per block.
 *
 * What changed from v06, and why it is faster: four loads in flight per thread instead of two hide more
 * of the DRAM latency, the grid has 4 times fewer blocks than v04's, so the tree is paid once per
 * 4 * block elements, and the next pass has a quarter of v04's partials.
 *
 * Needs: a power-of-two block of 32..1024 threads; blockDim.x * sizeof(accumulator) bytes of dynamic
 * shared memory. The textbook adds the 4 elements into the first of them and reduces in place in global
 * memory; this one combines them in a register and reduces a shared-memory copy, so the input is
 * read-only. The textbook drops the last n mod (4 * block) elements; here a run that crosses n takes
 * only the elements below n (the identity stands in for the rest).
 * Reproduces: "reduceUnrolling4" (Professional CUDA C Programming, ch. 3), the "add during load" step
 * ("Reduce v3", Harris's kernel 4 with 4 elements per thread). No atomics.
 */
#include "../device/classic.cuh"
#include "../device/epilogue.cuh"
#include "../host/launch.cuh"

namespace {

constexpr int kUnroll = 4;

template <class Op, class In>
__global__ void unroll4_kernel(const In *__restrict__ in, size_t n, typename Op::acc_t *partials,
                               unsigned *counter, typename Op::acc_t *final_out) {
    using Acc = typename Op::acc_t;
    Acc *s = gr::dynamic_smem<Acc>();
    s[threadIdx.x] = gr::tile_load<Op, In, kUnroll>(in, n);
    __syncthreads();
    gr::interleaved_tree<Op>(s, 0);
    gr::epilogue<Op>(s[0], partials, counter, final_out);
}

}  // namespace

static size_t grid(size_t n, int block, size_t /*elem_bytes*/, const gr_launch_device * /*dev*/) {
    return gr::grid_for_tiles(n, size_t(block) * kUnroll);
}

static int launch(gr_launch *L) { return GR_LAUNCH_PASS(L, unroll4_kernel, true); }

extern "C" const gr_kernel gr_kernel_unroll4 = {launch, grid, nullptr};
