/*
 * v15_cub.cu -- NVIDIA CUB's cub::DeviceReduce: the yardstick the catalogue is measured against.
 *
 * What it does: sums of float32 into float32 and of float64 into float64 (the input type is the
 * accumulator) call cub::DeviceReduce::Sum exactly as a CUB user would. Everything else calls
 * cub::DeviceReduce::TransformReduce with our functors: Op::load as the transform (the widening to
 * 64 bits of integer sums and products, the x != 0 of and/or), Op::combine as the reduction (so a NaN
 * propagates through min and max as in every other variant) and Op::identity() as the initial value.
 * CUB picks its own block size, items per thread and grid per architecture, runs its passes, and
 * writes the one result straight to final_out (pinned, mapped host memory the device can write).
 *
 * What it shows: how far the hand-written kernels are from a tuned library. CUB's reduce is the same
 * idea as v12 (vectorised grid-stride loads, several per thread in flight, a block reduce), with
 * per-architecture tuning and a second, single-block kernel over the partials. Its results are
 * reproducible run to run on one device (no atomics).
 *
 * Needs: the temporary storage CUB asks for, queried with a null pointer for the same types and n
 * (gr_scratch_cub) and handed in by the engine as L->scratch; no block size of ours (the registry's
 * block is 1 and ignored). Finishes "single" only: CUB itself always runs to one value.
 * Reproduces: cub::DeviceReduce::Sum / ::TransformReduce (CCCL). No atomics of ours.
 */
#include <cub/device/device_reduce.cuh>

#include "../host/launch.cuh"

namespace {

/* One call for the size query (temp == nullptr: CUB only sets temp_bytes) and for the reduction, so
 * that both see the same types and the same n. */
template <class Op, class In>
cudaError_t cub_reduce(void *temp, size_t &temp_bytes, const In *in, typename Op::acc_t *out, size_t n,
                       cudaStream_t stream) {
    if constexpr (gr::is_same_v<Op, gr::Sum<In>>)
        return cub::DeviceReduce::Sum(temp, temp_bytes, in, out, n, stream);
    else
        return cub::DeviceReduce::TransformReduce(temp, temp_bytes, in, out, n, gr::CombineFn<Op>{},
                                                  gr::LoadFn<Op, In>{}, Op::identity(), stream);
}

}  // namespace

static size_t grid(size_t n, int /*block*/, size_t /*elem_bytes*/, const gr_launch_device * /*dev*/) {
    return n ? 1 : 0;
}

static size_t scratch(size_t n, gr_dtype t, gr_op op, gr_dtype acc) {
    size_t bytes = 0;
    gr_launch q = {};
    q.in_dtype = t;
    q.op = op;
    q.acc = acc;
    cudaError_t e = gr::dispatch<GR_OPS_CLASSIC, GR_DTYPES_ARITHMETIC>(&q, [&](auto o, auto in_tag) {
        using Op = decltype(o);
        using In = typename decltype(in_tag)::type;
        return cub_reduce<Op, In>(nullptr, bytes, nullptr, nullptr, n, 0);
    });
    return e == cudaSuccess ? bytes : 0;      /* 0: the launch then fails with CUB's own error */
}

static int launch(gr_launch *L) {
    if (!L->scratch) return cudaErrorInvalidValue;      /* a null pointer would make CUB only query */
    return gr::dispatch<GR_OPS_CLASSIC, GR_DTYPES_ARITHMETIC>(L, [&](auto op, auto in_tag) {
        using Op = decltype(op);
        using In = typename decltype(in_tag)::type;
        using Acc = typename Op::acc_t;
        /* finish "single": the result goes straight to final_out; as a plain pass, to out[0] */
        Acc *out = (Acc *)(L->final_out ? L->final_out : L->out);
        size_t temp_bytes = L->scratch_bytes;
        cudaError_t e = cub_reduce<Op, In>(L->scratch, temp_bytes, gr::first_input<In>(L), out, L->n,
                                           (cudaStream_t)L->stream);
        if (e != cudaSuccess) {
            (void)cudaGetLastError();         /* CUB may only have peeked at a launch error */
            L->site = __FILE__ ":" GR_STR_(__LINE__);
            return e;
        }
        return GR_CHECK_LAUNCH(L);
    });
}

extern "C" const gr_kernel gr_kernel_cub = {launch, grid, scratch};
