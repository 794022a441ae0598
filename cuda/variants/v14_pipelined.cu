/*
 * v14_pipelined.cu -- warp_shuffle's kernel with its loads copied ahead into shared memory (cp.async).
 *
 * What it does: the same grid-stride walk, one resident wave of blocks, warp shuffles and last-block
 * finish as warp_shuffle (v12), but a thread's 16-byte vectors reach it through a ring of shared memory
 * filled by the asynchronous copy: three copies are in flight when the thread waits for the oldest, and
 * the copy into the slot it just read goes out right after the fold (cuda/device/pipeline.cuh).
 *
 * What changed from warp_shuffle, and why it is faster: v12 issues its two loads, waits, folds, and only
 * then issues the next ones, so a warp has nothing in flight while it folds. With a cheap fold (float
 * sums) that hardly shows; with a dear one it does: an int8 product folds 16 bytes with about 40
 * instructions, and v12 reached 74% of the read kernel on it, int8 min 89%, at full occupancy and far
 * from the issue limit. Here the loads keep going through the folds: 93-97% of the read kernel for every
 * op on int8 and uint8 at 2^28 (make bench and experiments/tuning/pipelined_probe.lua, H200), which is
 * why auto takes it for 1-byte types. On wider types, whose folds are cheap, it is level with v12 at
 * 2^28 and behind it below 2^24. The ring costs shared memory (48 KB for 1024 threads), not registers,
 * so occupancy stays full.
 *
 * Needs: a power-of-two block of 32..1024 threads (whole warps); cp.async needs sm_80 or later (older
 * devices get plain loads and stores through the same ring). Any alignment and any n, like v12.
 * Reproduces: the multi-stage cp.async pipelines of CUTLASS and of the CUDA programming guide's
 * "asynchronous data copies", applied to a reduction's loads.
 */
#include <atomic>

#include "../device/epilogue.cuh"
#include "../host/launch.cuh"
#include "../device/pipeline.cuh"
#include "../device/warp_block.cuh"

namespace {

/* launch bounds of the largest block the registry offers: the ops with wide accumulators (norm's three
 * sums over int8 vectors) would otherwise take more registers than a block of 1024 threads can have */
template <class Op, class In>
__global__ void __launch_bounds__(1024) pipelined_kernel(const In *__restrict__ in, size_t n, typename Op::acc_t *partials,
                                 unsigned *counter, typename Op::acc_t *final_out, gr::u64 first) {
    extern __shared__ uint4 smem[];
    typename Op::acc_t v = gr::thread_accumulate_pipelined<Op, In>(in, n, smem, first);
    v = gr::block_reduce<Op>(v);
    gr::epilogue<Op>(v, partials, counter, final_out);
}

/* A 1024-thread block's ring (48 KB, and 128 bytes to align it) is over the default limit on dynamic
 * shared memory: raise the limit once per kernel and device (an attribute of the function in the
 * device's context). One flag per instantiation of the kernel, not per function type:
 * kernels of different ops can share a type. */
template <class Op, class In> cudaError_t allow_ring() {
    static std::atomic<unsigned long long> raised{0};
    auto kernel = pipelined_kernel<Op, In>;
    int dev = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e != cudaSuccess) return e;
    const unsigned long long bit = dev < 64 ? 1ull << dev : 0;
    if (bit && (raised.load(std::memory_order_relaxed) & bit)) return cudaSuccess;
    e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(gr::ring_bytes(1024)));
    if (e == cudaSuccess) raised.fetch_or(bit, std::memory_order_relaxed);
    return e;
}

}  // namespace

static size_t grid(size_t n, int block, size_t elem_bytes, const gr_launch_device *dev) {
    return gr::grid_for(n, size_t(block) * (16 / elem_bytes) * gr::kStages, block, dev);
}

static int launch(gr_launch *L) {
    if (!gr::grid_fits(L->grid)) return cudaErrorInvalidConfiguration;
    return gr::dispatch<GR_OPS_PIPELINED, GR_DTYPES_PIPELINED>(L, [&](auto op, auto in_tag) {
        using Op = decltype(op);
        using In = typename decltype(in_tag)::type;
        using Acc = typename Op::acc_t;
        cudaError_t e = allow_ring<Op, In>();
        if (e != cudaSuccess) return e;
        pipelined_kernel<Op, In><<<unsigned(L->grid), L->block, gr::ring_bytes(L->block), (cudaStream_t)L->stream>>>(
            gr::first_input<In>(L), L->n, (Acc *)L->out, L->counter, (Acc *)L->final_out, L->first);
        return GR_CHECK_LAUNCH(L);
    });
}

/* the ring, for a user operator's kernel of this shape (engine/user/operator.c generates it for 1-byte data) */
static size_t smem(int block) { return gr::ring_bytes(block); }

extern "C" const gr_kernel gr_kernel_pipelined = {launch, grid, nullptr, smem};
