/*
 * v05_atomic_shared.cu -- every thread atomically combines its element into one shared-memory slot.
 *
 * What it does: each thread loads one element of its block's tile (the identity past n); thread 0 sets
 * a __shared__ slot to the identity; after a barrier every thread combines its value into the slot with
 * gr::atomic_combine; after another barrier the slot is the block's value, one partial per block.
 *
 * What changed from v04, and why it is slower: no tree, no log2(block) barriers -- but the block's
 * blockDim.x updates all go to one address, and the hardware serialises them. A native shared atomic
 * costs one round per thread; a compare-and-swap loop is worse, because each round only one of the
 * contending lanes succeeds and the others retry (up to blockDim.x^2 / 2 attempts per block). It is
 * the naive alternative the tutorials show before trees, kept as a measurement of that cost.
 *
 * Atomics (gr::atomic_combine, atomics.cuh): native atomicAdd for float, double and 64-bit integer
 * sums; atomicMin/atomicMax for int32, uint32, int64, uint64; atomicAnd/atomicOr on the word holding the
 * and/or flag. CAS loops for every product, for float/double min/max (NaN propagates as in Op::combine)
 * and for int8/uint8 min/max (on the 32-bit word holding the byte). Float sums depend on the order in
 * which the threads' atomics land: not reproducible bit for bit from run to run (and atom.add.f32
 * flushes subnormals to zero).
 *
 * Needs: a power-of-two block of 32..1024 threads (whole warps, for the "single" finish); an 8-byte
 * static shared slot (its 32-bit word is its own, so a 1-byte CAS disturbs nothing else), no dynamic
 * shared memory. Reads the input only. Past n, threads contribute the identity: no tail is dropped.
 * Reproduces: the naive shared-memory atomic reduction ("atomicAdd to a __shared__ sum") that
 * reduction tutorials contrast with trees.
 */
#include "../device/classic.cuh"
#include "../device/atomics.cuh"
#include "../device/epilogue.cuh"
#include "../host/launch.cuh"

namespace {

template <class Op, class In>
__global__ void atomic_shared_kernel(const In *__restrict__ in, size_t n, typename Op::acc_t *partials,
                                     unsigned *counter, typename Op::acc_t *final_out) {
    using Acc = typename Op::acc_t;
    __shared__ __align__(8) unsigned char slot_bytes[8];
    Acc *slot = reinterpret_cast<Acc *>(slot_bytes);
    const Acc v = gr::tile_load<Op, In, 1>(in, n);
    if (threadIdx.x == 0) *slot = Op::identity();
    __syncthreads();
    gr::atomic_combine<Op>(slot, v);
    __syncthreads();
    gr::epilogue<Op>(*slot, partials, counter, final_out);
}

}  // namespace

static size_t grid(size_t n, int block, size_t /*elem_bytes*/, const gr_launch_device * /*dev*/) {
    return gr::grid_for_tiles(n, size_t(block));
}

static int launch(gr_launch *L) { return GR_LAUNCH_PASS_DTYPES(L, atomic_shared_kernel, false, GR_DTYPES_ARITHMETIC); }

extern "C" const gr_kernel gr_kernel_atomic_shared = {launch, grid, nullptr};
