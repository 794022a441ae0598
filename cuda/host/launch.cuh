/*
 * launch.cuh -- the host side of a launch, shared by every variant's file: from the run-time values of
 * engine/base/launch.h to template arguments, once.
 *   - dispatch(op, in, acc, f): calls f(Op{}, Tag<In>{}) with the functor of the op (ops.cuh's OpOf)
 *     for the input and accumulator dtypes, both generated from gr.h's lists (a dtype's device type is
 *     its C type, or for float16 and bfloat16 small_float.cuh's element), for a launch whose input
 *     descriptor is one contiguous input (launch.h: what every kernel here takes);
 *   - first_input<In>(L): that input's address, read once on the host;
 *   - with_block_size(block, f): calls f(constant<int, B>{}) for B in 32..1024;
 *   - the grid rules of the grid-stride and tile kernels;
 *   - GR_CHECK_LAUNCH(L): cudaGetLastError() after a launch, the launch's file and line kept in L->site;
 *   - launch_pass: the whole launcher of a variant whose kernel has the common signature.
 * Every switch has a default that reports an invalid value: a dispatcher never falls through silently.
 * This header is for nvcc only (it includes the CUDA runtime); the device headers it pulls in are not.
 */
#pragma once

#include <cuda_runtime.h>
#include <stdint.h>

#include "../../engine/base/launch.h"
#include "../device/core.cuh"
#include "../device/ops.cuh"
#include "../device/results.cuh"

namespace gr {

template <class T> struct Tag { using type = T; };

/* The functor of op Id for inputs In and accumulator C type Acc, called as f(functor, Tag<input>): the
 * elements themselves, or, in a pass over partials, the op's own accumulators -- through the op
 * itself where its load keeps an accumulator as it is (the classic ops, as the catalogue's kernels
 * always ran them), else through AccInput. kOps masks the ops a variant takes: the others are not
 * instantiated and report an invalid value. */
template <unsigned kOps, int Id, class In, class Acc, class F> cudaError_t with_functor(bool partials_in, F &&f) {
    if constexpr (((kOps >> Id) & 1u) && OpOf<Id, In, Acc>::valid) {
        using Op = typename OpOf<Id, In, Acc>::type;
        if (!partials_in) return f(Op{}, Tag<In>{});
        if constexpr (load_keeps_acc_v<Op>) return f(Op{}, Tag<Acc>{});
        else return f(AccInput<Op>{}, Tag<typename Op::acc_t>{});
    } else {
        return cudaErrorInvalidValue;
    }
}

/* The accumulator dtype's C type, then the op's functor. */
template <unsigned kOps, class In, class F> cudaError_t with_acc(gr_op op, gr_dtype acc, bool partials_in, F &&f) {
    switch (acc) {
#define GR_ACC_CASE(E, name, ctype, bytes, is_float, is_signed, kind, lowest, highest, float_acc, nccl, format)        \
    case GR_##E: {                                                                                        \
        using AccT = GR_DEVICE_TYPE(format, ctype);                                                                             \
        switch (op) {                                                                                     \
            GR_OP_LIST(GR_OP_CASE)                                                                        \
        default: return cudaErrorInvalidValue;                                                            \
        }                                                                                                 \
    }
#define GR_OP_CASE(OE, oname) case GR_##OE: return with_functor<kOps, GR_##OE, In, AccT>(partials_in, f);
        GR_DTYPE_LIST(GR_ACC_CASE)
#undef GR_OP_CASE
#undef GR_ACC_CASE
    default: return cudaErrorInvalidValue;
    }
}

/* The first input's elements: every kernel here reads one contiguous input, whose address the launcher
 * reads from the descriptor once and passes as the kernel's pointer (no per-element cost). */
template <class In, class Launch> const In *first_input(const Launch *L) {
    return static_cast<const In *>(L->in->at[0].data);
}

/* dispatch<kOps, kDtypes>(L, f): f(functor, Tag<input type>) for the launch's op, dtypes and kind of
 * input; an invalid value for an input descriptor other than one contiguous input (a query with none,
 * CUB's scratch sizing, passes), and for an input dtype outside kDtypes (GR_DTYPE_BIT each: the set the
 * variant's registry row takes), which is not instantiated. */
template <unsigned kOps, unsigned kDtypes = GR_DTYPES_ALL, class F> cudaError_t dispatch(const gr_launch *L, F &&f) {
    if (L->in && !gr_inputs_contiguous(L->in)) return cudaErrorInvalidValue;
    switch (L->in_dtype) {
#define GR_IN_CASE(E, name, ctype, bytes, is_float, is_signed, kind, lowest, highest, float_acc, nccl, format) \
    case GR_##E:                                                                                          \
        if constexpr ((kDtypes & GR_DTYPE_BIT(GR_##E)) != 0)                                              \
            return with_acc<kOps, GR_DEVICE_TYPE(format, ctype)>(L->op, L->acc, L->partials_in != 0, f);  \
        else                                                                                              \
            return cudaErrorInvalidValue;
        GR_DTYPE_LIST(GR_IN_CASE)
#undef GR_IN_CASE
    default: return cudaErrorInvalidValue;
    }
}

template <class F> cudaError_t with_block_size(int block, F &&f) {
    switch (block) {
    case 32: return f(constant<int, 32>{});
    case 64: return f(constant<int, 64>{});
    case 128: return f(constant<int, 128>{});
    case 256: return f(constant<int, 256>{});
    case 512: return f(constant<int, 512>{});
    case 1024: return f(constant<int, 1024>{});
    default: return cudaErrorInvalidConfiguration;
    }
}

/* f(Tag<W>, functor, Tag<input>) for a kernel that writes each result on the device (results.cuh): W is
 * the op's result writer for the input dtype (bool data's through BoolResult where the result is a value of
 * the input's dtype), for the ops in kOps; an invalid value for the others and for pairs the engine never
 * asks for. */
template <unsigned kOps, class In, bool kBool, class F> cudaError_t with_writer_of(gr_dtype acc, gr_op op, F &&f) {
    switch (acc) {
#define GR_WACC_CASE(E, name, ctype, bytes, is_float, is_signed, kind, lowest, highest, float_acc, nccl, format)      \
    case GR_##E: {                                                                                        \
        using AccT = GR_DEVICE_TYPE(format, ctype);                                                       \
        switch (op) {                                                                                     \
            GR_OP_LIST(GR_WOP_CASE)                                                                       \
        default: return cudaErrorInvalidValue;                                                            \
        }                                                                                                 \
    }
#define GR_WOP_CASE(OE, oname)                                                                            \
    case GR_##OE:                                                                                         \
        if constexpr (((kOps >> GR_##OE) & 1u) && OpOf<GR_##OE, In, AccT>::valid) {                       \
            using Op = typename OpOf<GR_##OE, In, AccT>::type;                                            \
            using R = Result<result_kind(GR_##OE), Op, In>;                                               \
            using W = conditional_t<kBool && bool_valued_v<typename Op::acc_t>, BoolResult<R>, R>;        \
            return f(Tag<W>{}, Op{}, Tag<In>{});                                                          \
        } else {                                                                                          \
            return cudaErrorInvalidValue;                                                                 \
        }
        GR_DTYPE_LIST(GR_WACC_CASE)
#undef GR_WOP_CASE
#undef GR_WACC_CASE
    default: return cudaErrorInvalidValue;
    }
}

template <unsigned kOps, class F> cudaError_t with_writer(gr_dtype in, gr_dtype acc, gr_op op, F &&f) {
    switch (in) {
#define GR_WIN_CASE(E, name, ctype, bytes, is_float, is_signed, kind, lowest, highest, float_acc, nccl, format) \
    case GR_##E: return with_writer_of<kOps, GR_DEVICE_TYPE(format, ctype), GR_##E == GR_BOOL>(acc, op, f);
        GR_DTYPE_LIST(GR_WIN_CASE)
#undef GR_WIN_CASE
    default: return cudaErrorInvalidValue;
    }
}

/* ---- grids ------------------------------------------------------------------------------------------ */

/* Blocks for n elements when one block takes `per_block` of them per round of a grid-stride loop:
 * never more than fill the device (so the first pass leaves few partials), at least one. */
inline size_t grid_for(size_t n, size_t per_block, int block, const gr_launch_device *dev) {
    size_t want = (n + per_block - 1) / per_block;
    size_t full = size_t(dev->sms) * size_t(dev->max_threads_per_sm / block);
    if (full < 1) full = 1;
    return want < 1 ? 1 : want < full ? want : full;
}

/* Blocks of a classic kernel for n elements, per_block = blockDim.x * F of them per block:
 * ceil(n / per_block) (0 for n = 0), at most gridDim.x's limit 2^31 - 1 (tile_load takes the tiles
 * beyond it in a second round). */
inline size_t grid_for_tiles(size_t n, size_t per_block) {
    const size_t most = 0x7fffffff;
    const size_t want = n / per_block + (n % per_block != 0);
    return want < most ? want : most;
}

/* A grid the launchers can pass to <<<>>> as it is (a caller may ask for any grid). */
inline bool grid_fits(size_t grid) { return grid >= 1 && grid <= 0x7fffffff; }

/* ---- launching ------------------------------------------------------------------------------------- */

#define GR_STR2_(x) #x
#define GR_STR_(x) GR_STR2_(x)
/* The last launch's error, with its file and line kept in the gr_launch for the engine's message. */
#define GR_CHECK_LAUNCH(L) ::gr::check_launch((L), __FILE__ ":" GR_STR_(__LINE__))

template <class Launch> cudaError_t check_launch(Launch *L, const char *site) {
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) L->site = site;
    return e;
}

/* One pass of a variant whose kernel has the common signature
 *     kernel<Op, In>(const In *in, size_t n, Acc *partials, unsigned *counter, Acc *final_out)
 * -- or, with kIndexed, one more parameter, the index of in[0] (u64 first) -- dispatched on op and
 * dtypes for the ops in kOps, with one accumulator of dynamic shared memory per thread when
 * smem_per_thread is set (the shared-memory trees of v02-v10). The block size was checked against the
 * variant's row by the planner. */
template <unsigned kOps, bool kIndexed, unsigned kDtypes = GR_DTYPES_ALL, class KernelOf>
int launch_pass(gr_launch *L, KernelOf kernel_of, bool smem_per_thread, const char *site) {
    if (!grid_fits(L->grid)) return cudaErrorInvalidConfiguration;
    return dispatch<kOps, kDtypes>(L, [&](auto op, auto in_tag) {
        using In = typename decltype(in_tag)::type;
        using Acc = typename decltype(op)::acc_t;
        const size_t smem = smem_per_thread ? size_t(L->block) * sizeof(Acc) : 0;
        const unsigned grid = unsigned(L->grid);
        const cudaStream_t stream = (cudaStream_t)L->stream;
        const In *in = first_input<In>(L);
        if constexpr (kIndexed)
            kernel_of(op, in_tag)<<<grid, L->block, smem, stream>>>(in, L->n, (Acc *)L->out, L->counter,
                                                                    (Acc *)L->final_out, L->first);
        else
            kernel_of(op, in_tag)<<<grid, L->block, smem, stream>>>(in, L->n, (Acc *)L->out, L->counter,
                                                                    (Acc *)L->final_out);
        return check_launch(L, site);
    });
}

/* The op functors as function objects, for CUB and Thrust. */
template <class Op> struct CombineFn {
    GR_HOSTDEV typename Op::acc_t operator()(typename Op::acc_t a, typename Op::acc_t b) const {
        return Op::combine(a, b);
    }
};

template <class Op, class In> struct LoadFn {
    GR_HOSTDEV typename Op::acc_t operator()(In x) const { return Op::load(x); }
};

}  // namespace gr

/* The launcher body of such a variant: GR_LAUNCH_PASS(L, unroll2_kernel, true) for the classic ops;
 * GR_LAUNCH_PASS_OPS(L, kernel, false, GR_OPS_ALL, true) for a kernel of every op that takes `first`;
 * GR_LAUNCH_PASS_DTYPES(L, kernel, true, GR_DTYPES_ARITHMETIC) for the classic ops of a variant whose
 * row takes only those dtypes. */
#define GR_LAUNCH_PASS_SET(L, KERNEL, SMEM_PER_THREAD, OPS, INDEXED, DTYPES)                                \
    ::gr::launch_pass<OPS, INDEXED, DTYPES>(                                                                \
        L, [](auto op, auto in_tag) { return KERNEL<decltype(op), typename decltype(in_tag)::type>; },      \
        SMEM_PER_THREAD, __FILE__ ":" GR_STR_(__LINE__))
#define GR_LAUNCH_PASS_OPS(L, KERNEL, SMEM_PER_THREAD, OPS, INDEXED)                                        \
    GR_LAUNCH_PASS_SET(L, KERNEL, SMEM_PER_THREAD, OPS, INDEXED, GR_DTYPES_ALL)
#define GR_LAUNCH_PASS(L, KERNEL, SMEM_PER_THREAD) GR_LAUNCH_PASS_OPS(L, KERNEL, SMEM_PER_THREAD, GR_OPS_CLASSIC, false)
#define GR_LAUNCH_PASS_DTYPES(L, KERNEL, SMEM_PER_THREAD, DTYPES)                                           \
    GR_LAUNCH_PASS_SET(L, KERNEL, SMEM_PER_THREAD, GR_OPS_CLASSIC, false, DTYPES)
