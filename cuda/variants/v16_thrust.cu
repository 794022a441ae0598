/*
 * v16_thrust.cu -- thrust::reduce / thrust::transform_reduce, called as application code would call them.
 *
 * What it does: one Thrust call over the device pointer with the execution policy
 * thrust::cuda::par.on(stream). When loading an element is the identity (the input type is the
 * accumulator of a sum, product, min or max) it is thrust::reduce(first, last, Op::identity(), combine);
 * otherwise thrust::transform_reduce(first, last, load, Op::identity(), combine) -- the same functors as every
 * other variant (Op::load, Op::combine, Op::identity()), so NaN propagation and 64-bit integer
 * accumulation match. Thrust returns the value on the host; the launcher stores it to final_out.
 *
 * What it shows, next to v15 (CUB, which Thrust calls underneath): the price of the convenient
 * interface. Every call allocates and frees its temporary storage (cudaMalloc / cudaFree through
 * Thrust's default allocator; cudaFree synchronises the device), and returning the value by value
 * means waiting for the stream: the call is synchronous even when the reduction was asked to be
 * asynchronous. Results are reproducible run to run on one device (no atomics).
 *
 * Needs: nothing of ours (no block size: the registry's block is 1 and ignored; no scratch). Finishes
 * "single" only: Thrust always runs to one value. Thrust reports failures by throwing; the launcher
 * catches everything and returns the CUDA error code, so no exception crosses into the C engine.
 * Reproduces: thrust::reduce / thrust::transform_reduce (CCCL). No atomics of ours.
 */
#include <new>

/* One offset type (64-bit) instead of Thrust's default of both 32- and 64-bit dispatch paths: half the
 * instantiations, half this file's build time. Every size works; buffers above 2^31 elements need it. */
#define THRUST_FORCE_64_BIT_OFFSET_TYPE

#include <thrust/device_ptr.h>
#include <thrust/execution_policy.h>
#include <thrust/reduce.h>
#include <thrust/system/cuda/error.h>
#include <thrust/system_error.h>
#include <thrust/transform_reduce.h>

#include "../host/launch.cuh"

namespace {

template <class Op, class In>
typename Op::acc_t thrust_reduce(const In *in, size_t n, cudaStream_t stream) {
    using Acc = typename Op::acc_t;
    const auto first = thrust::device_pointer_cast(in);
    const auto last = first + n;
    /* and/or load x != 0: their accumulator is a byte, but a uint8 input is not yet a flag (values 1 and 2
     * are both true, and 1 & 2 is 0) */
    if constexpr (gr::plain_load_v<Op, In>)
        return thrust::reduce(thrust::cuda::par.on(stream), first, last, Op::identity(), gr::CombineFn<Op>{});
    else
        return thrust::transform_reduce(thrust::cuda::par.on(stream), first, last, gr::LoadFn<Op, In>{},
                                        Op::identity(), gr::CombineFn<Op>{});
}

}  // namespace

static size_t grid(size_t n, int /*block*/, size_t /*elem_bytes*/, const gr_launch_device * /*dev*/) {
    return n ? 1 : 0;
}

static int launch(gr_launch *L) {
    try {
        return gr::dispatch<GR_OPS_CLASSIC, GR_DTYPES_ARITHMETIC>(L, [&](auto op, auto in_tag) {
            using Op = decltype(op);
            using In = typename decltype(in_tag)::type;
            using Acc = typename Op::acc_t;
            const cudaStream_t stream = (cudaStream_t)L->stream;
            const Acc value = thrust_reduce<Op, In>(gr::first_input<In>(L), L->n, stream);
            /* finish "single": final_out, which may be pinned host memory or device memory (a streamed
             * chunk's value stays on the device), so it is copied, not stored; as a plain pass, the one
             * partial goes to out[0]. `value` lives on this stack: wait for the copy. */
            void *dst = L->final_out ? L->final_out : L->out;
            cudaError_t e = cudaMemcpyAsync(dst, &value, sizeof value, cudaMemcpyDefault, stream);
            return e == cudaSuccess ? cudaStreamSynchronize(stream) : e;
        });
    } catch (const thrust::system_error &e) {
        L->site = __FILE__ ":" GR_STR_(__LINE__);
        (void)cudaGetLastError();
        return e.code().category() == thrust::cuda_category() ? e.code().value() : int(cudaErrorUnknown);
    } catch (const std::bad_alloc &) {
        L->site = __FILE__ ":" GR_STR_(__LINE__);
        (void)cudaGetLastError();
        return cudaErrorMemoryAllocation;
    } catch (...) {
        L->site = __FILE__ ":" GR_STR_(__LINE__);
        return cudaErrorUnknown;
    }
}

extern "C" const gr_kernel gr_kernel_thrust = {launch, grid, nullptr};
