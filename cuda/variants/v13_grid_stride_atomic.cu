/*
 * v13_grid_stride_atomic.cu -- v12's grid-stride loads and block reduce, then one atomic per block.
 *
 * What it does: a one-thread kernel sets a device accumulator (out[0]) to the identity; then, in the
 * same stream, a grid of at most one resident wave of blocks walks the input as v12 does
 * (gr::thread_accumulate: 16-byte loads, two in flight per thread, two accumulators), each block reduces its threads'
 * values with warp shuffles (gr::block_reduce), and thread 0 combines the block's value into the
 * accumulator with ONE atomic (gr::atomic_combine). When the kernel ends, out[0] is the whole result;
 * for finish "single" it is copied to final_out with cudaMemcpyAsync on the stream.
 *
 * What changed from v12, and why: v12's "single" finish has every block store its partial, fence, take
 * a ticket, and the last block read all partials back; here the partials never exist, each block just
 * makes one atomic update of one address. The grid is at most SMs x blocks per SM (a few thousand), so
 * the updates are few and mostly overlap with other blocks' loads; a CAS loop (see below) retries under
 * contention, which shows for products and float min/max. It costs one extra tiny kernel launch.
 *
 * Atomics (gr::atomic_combine, atomics.cuh): native atomicAdd for float, double and 64-bit integer
 * sums; atomicMin/atomicMax for int32, uint32, int64, uint64; atomicAnd/atomicOr on the word holding the
 * and/or flag. CAS loops for every product, for float/double min/max (NaN propagates as in Op::combine)
 * and for int8/uint8 min/max (on the 32-bit word holding the byte). Float and double sums (and
 * products) depend on the order in which blocks arrive: not reproducible bit for bit from run to run,
 * unlike v12, which combines partials in block order. atom.add.f32 also flushes subnormals to zero.
 *
 * Needs: a power-of-two block of 32..1024 threads (whole warps); 32 accumulators of static shared
 * memory (block_reduce). Works on any alignment and any n up to 2^64. Reads the input only; writes
 * out[0] (the first accumulator of the pass's partials), never more.
 * Reproduces: the grid-stride reduction with one atomicAdd per block ("Faster Parallel Reductions on
 * Kepler", deviceReduceBlockAtomicKernel).
 */
#include "../device/atomics.cuh"
#include "../host/launch.cuh"
#include "../device/thread_load.cuh"
#include "../device/warp_block.cuh"

namespace {

constexpr int kUnroll = 2;   /* loads in flight per thread per iteration: see thread_accumulate */

template <class Acc> __global__ void set_identity(Acc *total, Acc identity) { *total = identity; }

template <class Op, class In>
__global__ void grid_stride_atomic_kernel(const In *__restrict__ in, size_t n, typename Op::acc_t *total) {
    typename Op::acc_t v = gr::thread_accumulate<Op, In, kUnroll>(in, n);
    v = gr::block_reduce<Op>(v);
    if (threadIdx.x == 0) gr::atomic_combine<Op>(total, v);
}

}  // namespace

static size_t grid(size_t n, int block, size_t elem_bytes, const gr_launch_device *dev) {
    return gr::grid_for(n, size_t(block) * (16 / elem_bytes) * kUnroll, block, dev);
}

static int launch(gr_launch *L) {
    if (!gr::grid_fits(L->grid)) return cudaErrorInvalidConfiguration;
    return gr::dispatch<GR_OPS_CLASSIC, GR_DTYPES_ARITHMETIC>(L, [&](auto op, auto in_tag) {
        using Op = decltype(op);
        using In = typename decltype(in_tag)::type;
        using Acc = typename Op::acc_t;
        const cudaStream_t stream = (cudaStream_t)L->stream;
        Acc *total = (Acc *)L->out;
        set_identity<Acc><<<1, 1, 0, stream>>>(total, Op::identity());
        cudaError_t e = GR_CHECK_LAUNCH(L);
        if (e != cudaSuccess) return e;
        grid_stride_atomic_kernel<Op, In><<<unsigned(L->grid), L->block, 0, stream>>>(gr::first_input<In>(L),
                                                                                      L->n, total);
        if ((e = GR_CHECK_LAUNCH(L)) != cudaSuccess) return e;
        if (L->final_out) {
            e = cudaMemcpyAsync(L->final_out, total, sizeof(Acc), cudaMemcpyDefault, stream);
            if (e != cudaSuccess) L->site = __FILE__ ":" GR_STR_(__LINE__);
        }
        return e;
    });
}

extern "C" const gr_kernel gr_kernel_grid_stride_atomic = {launch, grid, nullptr};
