/*
 * v11_template_unroll8.cu -- v10, with the block size a template parameter chosen at run time.
 *
 * What it does: exactly v10's kernel (8 elements combined per thread while loading, the tree written
 * out one step per block size, the last warp unrolled), but the block size is the template parameter
 * kBlock, and the launcher picks the instantiation for the requested block through
 * gr::with_block_size. Lane 0 ends with the block's value, one partial per block.
 *
 * What changed from v10, and why it is faster: `kBlock >= 512` is now a constant, so the compiler
 * drops the steps this block size doesn't have along with their tests, and __launch_bounds__(kBlock)
 * tells it how many threads share the registers. What it costs: one instantiation per block size
 * (64, 128, 256, 512, 1024) for every op and type, five times v10's compile time and code size; block
 * 32 is never instantiated, since the last warp needs 64 values.
 *
 * The last warp uses volatile and __syncwarp() between its steps: volatile alone, as in the textbook,
 * is a race on Volta and later, where a warp's lanes are scheduled independently (see v09 and
 * gr::last_warp_unrolled).
 *
 * Needs: a power-of-two block of 64..1024 threads; kBlock * sizeof(accumulator) bytes of dynamic
 * shared memory. The textbook reduces in place in global memory; this one reduces a shared-memory copy,
 * so the input is read-only. No tail is dropped (a run that crosses n takes only the elements below n).
 * Reproduces: "reduceCompleteUnroll<iBlockSize>" (Professional CUDA C Programming, ch. 3) and Harris's
 * kernel 6 ("completely unrolled", block size as a template parameter). No atomics.
 */
#include "../device/classic.cuh"
#include "../device/epilogue.cuh"
#include "../host/launch.cuh"

namespace {

constexpr int kUnroll = 8;

template <class Op, class In, int kBlock>
__global__ void __launch_bounds__(kBlock)
template_unroll8_kernel(const In *__restrict__ in, size_t n, typename Op::acc_t *partials, unsigned *counter,
                        typename Op::acc_t *final_out) {
    using Acc = typename Op::acc_t;
    Acc *s = gr::dynamic_smem<Acc>();
    s[threadIdx.x] = gr::tile_load<Op, In, kUnroll>(in, n);
    __syncthreads();
    const Acc v = gr::complete_unrolled_tree<Op>(s, kBlock);
    gr::epilogue<Op>(v, partials, counter, final_out);
}

}  // namespace

static size_t grid(size_t n, int block, size_t /*elem_bytes*/, const gr_launch_device * /*dev*/) {
    return gr::grid_for_tiles(n, size_t(block) * kUnroll);
}

static int launch(gr_launch *L) {
    if (!gr::grid_fits(L->grid)) return cudaErrorInvalidConfiguration;
    return gr::with_block_size(L->block, [&](auto block) {
        constexpr int kBlock = decltype(block)::value;
        if constexpr (kBlock < 64) {
            return cudaErrorInvalidConfiguration;   /* below the row's block_min: the tree needs 64 values */
        } else {
            return gr::dispatch<GR_OPS_CLASSIC, GR_DTYPES_ARITHMETIC>(L, [&](auto op, auto in_tag) {
                using Op = decltype(op);
                using In = typename decltype(in_tag)::type;
                using Acc = typename Op::acc_t;
                template_unroll8_kernel<Op, In, kBlock><<<unsigned(L->grid), kBlock, kBlock * sizeof(Acc),
                                                          (cudaStream_t)L->stream>>>(
                    gr::first_input<In>(L), L->n, (Acc *)L->out, L->counter, (Acc *)L->final_out);
                return GR_CHECK_LAUNCH(L);
            });
        }
    });
}

extern "C" const gr_kernel gr_kernel_template_unroll8 = {launch, grid, nullptr};
