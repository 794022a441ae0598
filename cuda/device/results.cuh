/*
 * results.cuh -- an op's combined accumulator turned into its result(s) on the device, written to
 * result buffers: what segmented reductions and reduce_many return without a trip through the host.
 * The dtypes written are engine/ops/ops.c's gr_op_result_dtype; the arithmetic is engine/ops/op_math.h's,
 * which the host's gr_host_result (engine/ops/host_ops.c) calls too, so that a segment finished here and
 * one finished on the host (a sharded buffer's spanning segments, the cpu backend) have the same bits.
 * NVRTC-clean (core.cuh).
 */
#pragma once

#include "core.cuh"
#include "ops.cuh"

namespace gr {

/* What an op's result is made of: most ops write their accumulator as it is; the others are named.
 * Kernels are instantiated per kind, not per op, so that ops with the same functor and result (sum and
 * nansum of integers, min and nanmin of integers) share one. */
enum ResultKind : int { res_acc, res_mean, res_var, res_std, res_norm, res_nanmean, res_arg, res_minmax };
GR_HOSTDEV constexpr int result_kind(int id) {
    return id == op_mean ? res_mean : id == op_var ? res_var : id == op_std ? res_std : id == op_norm ? res_norm
         : id == op_nanmean ? res_nanmean : id == op_argmin || id == op_argmax ? res_arg
         : id == op_minmax ? res_minmax : res_acc;
}

/* Result<kind, Op, In>::write(a, n, ddof, out0, out1, s): segment s's result from its accumulator a over
 * n elements. The default writes the accumulator itself (sums, products, min, max, and, or, count, sum
 * of squares, nansum, nanmin, nanmax, absmax, asum): a 64-bit integer sum is written by its bits, which is
 * its value as int64 or uint64. */
template <int Kind, class Op, class In> struct Result {
    using Acc = typename Op::acc_t;
    static GR_DEV void write(const Acc &a, u64, int, void *out0, void *, size_t s) { static_cast<Acc *>(out0)[s] = a; }
};

/* mean: the sum over n; integer sums are exact 64-bit values, divided in double. */
template <class Op, class In> struct Result<res_mean, Op, In> {
    using Acc = typename Op::acc_t;
    static GR_DEV void write(const Acc &a, u64 n, int, void *out0, void *, size_t s) {
        if constexpr (is_float_v<Acc>) static_cast<Acc *>(out0)[s] = gr_mean(a, n);
        else static_cast<double *>(out0)[s] = gr_int_mean(a, is_signed_v<In>, n);
    }
};

/* The variance and the standard deviation, in the result's type: from exact sums (gr_moments_*, with
 * the unfused steps that keep the host's bits) or from Welford's accumulator. */
template <class In, class Acc> GR_DEV auto variance_of(const Acc &a, int ddof) {
    if constexpr (is_same_v<Acc, MomentsAcc>) return gr_moments_var(a, ddof, is_signed_v<In>);
    else return gr_welford_var(a, ddof);
}
template <class In, class Acc> GR_DEV auto deviation_of(const Acc &a, int ddof) {
    if constexpr (is_same_v<Acc, MomentsAcc>) return gr_moments_std(a, ddof, is_signed_v<In>);
    else return gr_welford_std(a, ddof);
}

template <class Op, class In> struct Result<res_var, Op, In> {
    using Acc = typename Op::acc_t;
    static GR_DEV void write(const Acc &a, u64, int ddof, void *out0, void *, size_t s) {
        using V = decltype(variance_of<In>(a, ddof));
        static_cast<V *>(out0)[s] = variance_of<In>(a, ddof);
    }
};

template <class Op, class In> struct Result<res_std, Op, In> {
    using Acc = typename Op::acc_t;
    static GR_DEV void write(const Acc &a, u64, int ddof, void *out0, void *, size_t s) {
        using V = decltype(deviation_of<In>(a, ddof));
        static_cast<V *>(out0)[s] = deviation_of<In>(a, ddof);
    }
};

template <class Op, class In> struct Result<res_norm, Op, In> {
    using Acc = typename Op::acc_t;
    static GR_DEV void write(const Acc &a, u64, int, void *out0, void *, size_t s) {
        if constexpr (is_same_v<Acc, SquaresAcc>) {
            static_cast<double *>(out0)[s] = gr_squares_norm(a);
        } else {
            using F = decltype(a.small);
            static_cast<F *>(out0)[s] = gr_norm_join(a);
        }
    }
};

template <class Op, class In> struct Result<res_nanmean, Op, In> {
    using Acc = typename Op::acc_t;
    static GR_DEV void write(const Acc &a, u64, int, void *out0, void *, size_t s) {
        using F = decltype(a.sum);
        static_cast<F *>(out0)[s] = gr_nanmean(a);
    }
};

/* argmin / argmax: the value, and the 1-based index (0 for an empty segment). */
template <class Op, class In> struct Result<res_arg, Op, In> {
    using Acc = typename Op::acc_t;
    static GR_DEV void write(const Acc &a, u64, int, void *out0, void *out1, size_t s) {
        static_cast<In *>(out0)[s] = a.value;
        static_cast<long long *>(out1)[s] = gr_arg_position(a.index);
    }
};

template <class Op, class In> struct Result<res_minmax, Op, In> {
    using Acc = typename Op::acc_t;
    static GR_DEV void write(const Acc &a, u64, int, void *out0, void *out1, size_t s) {
        static_cast<In *>(out0)[s] = a.lo;
        static_cast<In *>(out1)[s] = a.hi;
    }
};

/* bool data is uint8_t on the device (lists.h's C type), whose identities are uint8's: min, nanmin,
 * argmin and minmax's low end start from 255, where the host starts from bool's largest value, true
 * (host_ops.c's identity, from lists.h's limits). An empty segment would leave the byte 255 in a bool
 * result. BoolResult<R> writes R's result with every value of the input's dtype made 0 or 1 first --
 * the value itself for the 0 and 1 that bool data holds, true for the identity -- as the host writes
 * it. */
GR_DEV u8 as_bool(u8 v) { return u8(v != 0); }
GR_DEV ArgAcc<u8> as_bool(const ArgAcc<u8> &a) { return {a.index, u8(a.value != 0)}; }
GR_DEV MinMaxAcc<u8> as_bool(const MinMaxAcc<u8> &a) { return {u8(a.lo != 0), u8(a.hi != 0)}; }

/* Whether R writes a value of the input's dtype for bool input (an accumulator of bytes: min, max, their
 * nan forms, absmax, and/or; argmin/argmax; minmax), which BoolResult must make 0 or 1. */
template <class Acc> constexpr bool bool_valued_v =
    is_same_v<Acc, u8> || is_same_v<Acc, ArgAcc<u8>> || is_same_v<Acc, MinMaxAcc<u8>>;

template <class R> struct BoolResult {
    template <class Acc>
    static GR_DEV void write(const Acc &a, u64 n, int ddof, void *out0, void *out1, size_t s) {
        if constexpr (bool_valued_v<Acc>) R::write(as_bool(a), n, ddof, out0, out1, s);
        else R::write(a, n, ddof, out0, out1, s);
    }
};

}  // namespace gr
