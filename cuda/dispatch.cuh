/*
 * dispatch.cuh -- run-time values to template arguments, once for every variant:
 *   - dispatch(op, in_dtype, acc, f): calls f(Op{}, Tag<In>{}) with the op functor and input type;
 *   - with_block_size(block, f): calls f(std::integral_constant<int, B>{}) for B in 32..1024;
 *   - GR_CHECK_LAUNCH(): cudaGetLastError() after a launch, with the file and line kept for the message.
 * Every switch has a default that reports an invalid value: a dispatcher never falls through silently.
 */
#pragma once

#include <type_traits>

#include "primitives.cuh"

namespace gr {

template <class T> struct Tag { using type = T; };

template <template <class> class OpT, class In, class F> cudaError_t with_arith(gr_dtype acc, F &&f) {
    if constexpr (std::is_floating_point_v<In>) {
        if (acc == GR_FLOAT64) return f(OpT<double>{}, Tag<In>{});
        if constexpr (std::is_same_v<In, float>)
            if (acc == GR_FLOAT32) return f(OpT<float>{}, Tag<In>{});
        return cudaErrorInvalidValue;
    } else {
        return f(OpT<unsigned long long>{}, Tag<In>{});
    }
}

template <class In, class F> cudaError_t with_op(gr_op op, gr_dtype acc, F &&f) {
    switch (op) {
    case GR_SUM: return with_arith<Sum, In>(acc, f);
    case GR_PROD: return with_arith<Prod, In>(acc, f);
    case GR_MIN: return f(Min<In>{}, Tag<In>{});
    case GR_MAX: return f(Max<In>{}, Tag<In>{});
    case GR_AND: return f(And{}, Tag<In>{});
    case GR_OR: return f(Or{}, Tag<In>{});
    default: return cudaErrorInvalidValue;
    }
}

template <class F> cudaError_t dispatch(gr_op op, gr_dtype in, gr_dtype acc, F &&f) {
    switch (in) {
    case GR_INT8: return with_op<int8_t>(op, acc, f);
    case GR_UINT8: return with_op<uint8_t>(op, acc, f);
    case GR_INT32: return with_op<int32_t>(op, acc, f);
    case GR_UINT32: return with_op<uint32_t>(op, acc, f);
    case GR_INT64: return with_op<int64_t>(op, acc, f);
    case GR_UINT64: return with_op<uint64_t>(op, acc, f);
    case GR_FLOAT32: return with_op<float>(op, acc, f);
    case GR_FLOAT64: return with_op<double>(op, acc, f);
    default: return cudaErrorInvalidValue;
    }
}

template <class F> cudaError_t with_block_size(int block, F &&f) {
    switch (block) {
    case 32: return f(std::integral_constant<int, 32>{});
    case 64: return f(std::integral_constant<int, 64>{});
    case 128: return f(std::integral_constant<int, 128>{});
    case 256: return f(std::integral_constant<int, 256>{});
    case 512: return f(std::integral_constant<int, 512>{});
    case 1024: return f(std::integral_constant<int, 1024>{});
    default: return cudaErrorInvalidConfiguration;
    }
}

/* Blocks for n elements when one block takes `per_block` of them per round of a grid-stride loop:
 * never more than fill the device (so the first pass leaves few partials), at least one. */
inline size_t grid_for(size_t n, size_t per_block, int block, const gr_device_info *dev) {
    size_t want = (n + per_block - 1) / per_block;
    size_t full = size_t(dev->sms) * size_t(dev->max_threads_per_sm / block);
    if (full < 1) full = 1;
    return want < 1 ? 1 : want < full ? want : full;
}

}  // namespace gr

/* Keeps the site of the last failed launch for the engine's message. */
extern "C" void gr_dev_note_site(const char *file, int line);

static inline cudaError_t gr_check_launch(const char *file, int line) {
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) gr_dev_note_site(file, line);
    return e;
}
#define GR_CHECK_LAUNCH() gr_check_launch(__FILE__, __LINE__)

namespace gr {

/* One pass of a variant whose kernel has the common signature
 *     kernel<Op, In>(const In *in, size_t n, Acc *partials, unsigned *counter, Acc *final_out)
 * dispatched on op and dtype, with one accumulator of dynamic shared memory per thread when
 * smem_per_thread is set (the shared-memory trees of v02-v10). A failure is recorded at the variant's
 * own file and line. */
template <class KernelOf>
int launch_pass(const gr_launch *L, KernelOf kernel_of, bool smem_per_thread, int min_block, const char *file,
                int line) {
    if (!grid_fits(L->grid) || L->block < min_block) return cudaErrorInvalidConfiguration;
    return dispatch(L->op, L->in_dtype, L->acc, [&](auto op, auto in_tag) {
        using In = typename decltype(in_tag)::type;
        using Acc = typename decltype(op)::acc_t;
        const size_t smem = smem_per_thread ? size_t(L->block) * sizeof(Acc) : 0;
        kernel_of(op, in_tag)<<<unsigned(L->grid), L->block, smem, (cudaStream_t)L->stream>>>(
            (const In *)L->in, L->n, (Acc *)L->out, L->counter, (Acc *)L->final_out);
        return gr_check_launch(file, line);
    });
}

}  // namespace gr

/* The launcher body of such a variant: GR_LAUNCH_PASS(L, unroll2_kernel, true, 32). */
#define GR_LAUNCH_PASS(L, KERNEL, SMEM_PER_THREAD, MIN_BLOCK)                                               \
    gr::launch_pass(                                                                                        \
        L, [](auto op, auto in_tag) { return KERNEL<decltype(op), typename decltype(in_tag)::type>; },      \
        SMEM_PER_THREAD, MIN_BLOCK, __FILE__, __LINE__)
