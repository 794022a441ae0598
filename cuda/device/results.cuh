/*
 * results.cuh -- an op's combined accumulator turned into its result(s) on the device, written to
 * result buffers: what segmented reductions and reduce_many return without a trip through the host.
 * The dtypes written are engine/ops/ops.c's gr_op_result_dtype, and the arithmetic is engine/ops/host_ops.c's
 * gr_host_result (the host's, for whole-buffer reductions): keep the three in step.
 * NVRTC-clean (core.cuh).
 */
#pragma once

#include "core.cuh"
#include "ops.cuh"

namespace gr {

/* Blue's three sums joined into the norm (engine/ops/host_ops.c, blue_norm). */
template <class F> GR_DEV F blue_join(NormAcc<F> a) {
    const F sbig = Blue<F>::sbig(), ssml = Blue<F>::ssml();
    F scale, sumsq;
    if (a.big > F(0) || a.big != a.big) {
        if (a.medium > F(0) || a.medium != a.medium) a.big = a.big + (a.medium * sbig) * sbig;
        scale = F(1) / sbig;
        sumsq = a.big;
    } else if (a.small > F(0)) {
        if (a.medium > F(0) || a.medium != a.medium) {
            const F m = sqrt(a.medium), s = sqrt(a.small) / ssml;
            const F lo = s > m ? m : s, hi = s > m ? s : m;
            scale = F(1);
            sumsq = (hi * hi) * (F(1) + (lo / hi) * (lo / hi));
        } else {
            scale = F(1) / ssml;
            sumsq = a.small;
        }
    } else {
        scale = F(1);
        sumsq = a.medium;
    }
    return scale * sqrt(sumsq);
}

/* What an op's result is made of: most ops write their accumulator as it is; the others are named.
 * Kernels are instantiated per kind, not per op, so that ops with the same functor and result (sum and
 * nansum of integers, min and nanmin of integers) share one. */
enum ResultKind : int { res_acc, res_mean, res_var, res_std, res_norm, res_nanmean, res_arg, res_minmax };
constexpr int result_kind(int id) {
    return id == op_mean ? res_mean : id == op_var ? res_var : id == op_std ? res_std : id == op_norm ? res_norm
         : id == op_nanmean ? res_nanmean : id == op_argmin || id == op_argmax ? res_arg
         : id == op_minmax ? res_minmax : res_acc;
}

/* Result<kind, Op, In>::write(a, n, ddof, out0, out1, s): segment s's result from its accumulator a over
 * n elements. The default writes the accumulator itself (sums, products, min, max, and, or, count, sum
 * of squares, nansum, nanmin, nanmax): a 64-bit integer sum is written by its bits, which is its value
 * as int64 or uint64. */
template <int Kind, class Op, class In> struct Result {
    using Acc = typename Op::acc_t;
    static GR_DEV void write(const Acc &a, u64, int, void *out0, void *, size_t s) { static_cast<Acc *>(out0)[s] = a; }
};

/* mean: the sum over n; integer sums are exact 64-bit values, divided in double. */
template <class Op, class In> struct Result<res_mean, Op, In> {
    using Acc = typename Op::acc_t;
    static GR_DEV void write(const Acc &a, u64 n, int, void *out0, void *, size_t s) {
        if constexpr (is_float_v<Acc>) {
            static_cast<Acc *>(out0)[s] = Acc(double(a) / double(n));
        } else {
            const double sum = is_signed_v<In> ? double((long long)a) : double(a);
            static_cast<double *>(out0)[s] = sum / double(n);
        }
    }
};

/* Rounded once: the high word's part is exact while it is below 2^53 (engine/ops/host_ops.c, the same).
 * The products and sums here and in moments_m2 are written with the _rn intrinsics: a plain a * b + c
 * may be fused into one fma by nvcc or ptxas, which rounds once where the host rounds twice, and the
 * results of segments computed here must equal those the host finishes (a sharded buffer's spanning
 * segments, the cpu backend) bit for bit. */
GR_DEV double u128_double(U128 v) { return __dadd_rn(__dmul_rn(double(v.hi), 0x1p64), double(v.lo)); }


/* The sum of squared deviations of n integers from their exact sums (engine/ops/host_ops.c, moments_m2,
 * step for step): with q the floor of the mean and r = sum - q n, sum (x - q)^2 = s2 - n q^2 - 2 q r
 * exactly (modulo 2^128, where it fits), less r^2 / n. */
template <class In> GR_DEV double moments_m2(const MomentsAcc &a) {
    const u64 n = a.n;
    u64 uq, r;
    bool neg = false;
    if constexpr (is_signed_v<In>) {
        const long long s = (long long)a.sum;
        long long q = s / (long long)n, rr = s % (long long)n;
        if (rr < 0) {
            q -= 1;
            rr += (long long)n;
        }
        neg = q < 0;
        uq = neg ? u64(0) - u64(q) : u64(q);
        r = u64(rr);
    } else {
        uq = a.sum / n;
        r = a.sum % n;
    }
    U128 m = sub128(a.sumsq, mul_wide(n, uq * uq));
    U128 t = mul_wide(uq, r);
    t = {t.lo << 1, t.hi << 1 | t.lo >> 63};
    m = neg ? add128(m, t) : sub128(m, t);
    const double dev = __dsub_rn(u128_double(m), __dmul_rn(double(r), double(r) / double(n)));
    return dev > 0 ? dev : 0.0;
}

/* The variance over n - ddof degrees of freedom, in the result's type (NaN when there are none). */
template <class In, class Acc> GR_DEV auto variance_of(const Acc &a, int ddof) {
    const double dof = double(a.n) - double(ddof);
    if constexpr (is_same_v<Acc, MomentsAcc>) {
        return dof > 0 ? moments_m2<In>(a) / dof : limits<double>::infinity() - limits<double>::infinity();
    } else {
        using F = decltype(a.mean);
        return dof > 0 ? F(a.m2 / F(dof)) : F(limits<F>::infinity() - limits<F>::infinity());
    }
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
        using V = decltype(variance_of<In>(a, ddof));
        static_cast<V *>(out0)[s] = V(sqrt(variance_of<In>(a, ddof)));
    }
};

template <class Op, class In> struct Result<res_norm, Op, In> {
    using Acc = typename Op::acc_t;
    static GR_DEV void write(const Acc &a, u64, int, void *out0, void *, size_t s) {
        if constexpr (is_same_v<Acc, SquaresAcc>) {
            static_cast<double *>(out0)[s] = sqrt(u128_double(a.sumsq));
        } else {
            using F = decltype(a.small);
            static_cast<F *>(out0)[s] = blue_join<F>(a);
        }
    }
};

template <class Op, class In> struct Result<res_nanmean, Op, In> {
    using Acc = typename Op::acc_t;
    static GR_DEV void write(const Acc &a, u64, int, void *out0, void *, size_t s) {
        using F = decltype(a.sum);
        static_cast<F *>(out0)[s] = a.n ? F(double(a.sum) / double(a.n)) : F(limits<F>::infinity() - limits<F>::infinity());
    }
};

/* argmin / argmax: the value, and the 1-based index (0 for an empty segment). */
template <class Op, class In> struct Result<res_arg, Op, In> {
    using Acc = typename Op::acc_t;
    static GR_DEV void write(const Acc &a, u64, int, void *out0, void *out1, size_t s) {
        static_cast<In *>(out0)[s] = a.value;
        static_cast<long long *>(out1)[s] = a.index == ~0ull ? 0 : (long long)(a.index + 1);
    }
};

template <class Op, class In> struct Result<res_minmax, Op, In> {
    using Acc = typename Op::acc_t;
    static GR_DEV void write(const Acc &a, u64, int, void *out0, void *out1, size_t s) {
        static_cast<In *>(out0)[s] = a.lo;
        static_cast<In *>(out1)[s] = a.hi;
    }
};

}  // namespace gr
