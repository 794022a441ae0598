/*
 * convert.cu -- conversions between dtypes on the device (gr_dev_convert; b:astype and gr.copy of device
 * buffers, engine/core/convert.c): one kernel per pair of dtypes, both generated from GR_DTYPE_LIST.
 *
 * The pass is memory-bound by design, a copy that converts: each thread takes chunks of
 * K = 16 / min(source size, destination size) elements, reads them with 16-byte loads and writes them
 * with 16-byte stores (float32 -> bfloat16: two loads and one store per 8 elements), grid-stride over
 * the chunks, then the n % K elements of the tail one by one. Loads and stores are streaming (__ldcs,
 * __stcs): nothing is read twice. Data that is not 16-byte aligned on both sides (a slice from an odd
 * element) takes the element-by-element loop throughout.
 *
 * The elements convert by engine/ops/convert_element.h, the macros the host's loops (ops/cpu_convert.c)
 * expand, so both backends give the same bits. The commonest pairs have short forms, each the same
 * function of the bits as the general one:
 *   float32 -> bfloat16  gr_cv_bf16_of_float_bits: rounding to nearest even as an add on the bits
 *                        (checked against gr_bf16_from_float for all 2^32 inputs when it was written);
 *   float32 -> float16   the hardware's cvt.rn.f16.f32 (what __float2half_rn is: round to nearest even,
 *                        subnormals kept; spec/small_floats_spec.lua checks it against small_floats.h
 *                        for every pattern on a GPU), its infinity from a finite input reported as not
 *                        fitting, and a NaN made the quiet NaN of its sign;
 *   float16, bfloat16 -> float32  cvt.f32.f16 and the shift, exact, a NaN made the quiet NaN of its sign.
 * Compiled without -ftz (nvcc's default): a float32 subnormal is a value, not zero.
 *
 * Failure: with GR_CV_CHECK a chunk with an element that does not fit lowers *first_bad to that
 * element's index (atomicMin, the lowest index wins whatever the order of the blocks); the pass does not
 * stop. Whether the destination may be written at the same time is the caller's choice (mode).
 */
#include <cuda_runtime.h>
#include <stdint.h>
#include <type_traits>

#include "../../engine/base/device.h"
#include "../../engine/ops/convert_element.h"

namespace {

constexpr int kBlock = 256;

/* A dtype's element type and its reading and writing, from its line of the list. */
template <gr_dtype E> struct Dtype;
#define GR_CV_DTYPE(E, name, ctype, bytes, is_float, is_signed, kind, lowest, highest, float_acc, nccl, format) \
    template <> struct Dtype<GR_##E> {                                                                         \
        using T = ctype;                                                                                       \
        static __device__ __forceinline__ gr_cv_value read(T e) { return GR_CV_READ_##kind(format, e); }       \
        static __device__ __forceinline__ T write(gr_cv_value v, int &bad) {                                   \
            T e;                                                                                               \
            GR_CV_WRITE_##kind(format, ctype, bytes, is_signed, v, e, bad);                                    \
            return e;                                                                                          \
        }                                                                                                      \
    };
GR_DTYPE_LIST(GR_CV_DTYPE)
#undef GR_CV_DTYPE

/* The quiet NaN of float32 with the sign of a 16-bit pattern's top bit. */
__device__ __forceinline__ float nan32_of16(unsigned p) { return __uint_as_float(((p & 0x8000u) << 16) | 0x7fc00000u); }

/* One element of S as D; bad where it does not fit. */
template <gr_dtype S, gr_dtype D>
__device__ __forceinline__ typename Dtype<D>::T convert(typename Dtype<S>::T x, int &bad) {
    using TD = typename Dtype<D>::T;
    if constexpr (S == GR_FLOAT32 && D == GR_BFLOAT16) {
        const unsigned p = gr_cv_bf16_of_float_bits(__float_as_uint(x));
        bad = (p & GR_SF_NOFIT) != 0;
        return TD(p & 0xffffu);
    } else if constexpr (S == GR_FLOAT32 && D == GR_FLOAT16) {
        unsigned short h;
        asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(x));
        const unsigned u = __float_as_uint(x), a = u & 0x7fffffffu;
        const bool nan = a > 0x7f800000u;
        bad = !nan && a != 0x7f800000u && (h & 0x7fffu) == 0x7c00u;
        return TD(nan ? ((u >> 16) & 0x8000u) | 0x7e00u : h);
    } else if constexpr (S == GR_FLOAT16 && D == GR_FLOAT32) {
        float f;
        asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"((unsigned short)x));
        bad = 0;
        return (x & 0x7fffu) > 0x7c00u ? nan32_of16(x) : f;
    } else if constexpr (S == GR_BFLOAT16 && D == GR_FLOAT32) {
        bad = 0;
        return (x & 0x7fffu) > 0x7f80u ? nan32_of16(x) : __uint_as_float(unsigned(x) << 16);
    } else {
        return Dtype<D>::write(Dtype<S>::read(x), bad);
    }
}

/* *first_bad = min(*first_bad, i). A plain read first: where every element fails (NaN into an integer)
 * most threads then skip the atomic, which would otherwise queue on one address. The word only ever
 * goes down, so a stale read can only cost an atomic that changes nothing. */
__device__ __forceinline__ void lower(unsigned long long *first_bad, size_t i) {
    if ((unsigned long long)i < *(volatile unsigned long long *)first_bad) atomicMin(first_bad, (unsigned long long)i);
}

template <gr_dtype S, gr_dtype D>
__global__ void __launch_bounds__(kBlock)
convert_kernel(const typename Dtype<S>::T *__restrict__ src, typename Dtype<D>::T *__restrict__ dst, size_t n,
               int mode, unsigned long long *first_bad, bool vector) {
    using TS = typename Dtype<S>::T;
    using TD = typename Dtype<D>::T;
    constexpr int K = 16 / (sizeof(TS) < sizeof(TD) ? sizeof(TS) : sizeof(TD));
    constexpr int NS = K * sizeof(TS) / 16, ND = K * sizeof(TD) / 16;
    const size_t stride = size_t(gridDim.x) * blockDim.x, t = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
    size_t tail = 0;
    if (vector) {
        const size_t chunks = n / K;
        const uint4 *in = reinterpret_cast<const uint4 *>(src);
        uint4 *out = reinterpret_cast<uint4 *>(dst);
        for (size_t c = t; c < chunks; c += stride) {
            union { uint4 v[NS]; TS e[K]; } a;
            union { uint4 v[ND]; TD e[K]; } b;
#pragma unroll
            for (int j = 0; j < NS; j++) a.v[j] = __ldcs(in + c * NS + j);
            unsigned mask = 0;
#pragma unroll
            for (int k = 0; k < K; k++) {
                int bad;
                b.e[k] = convert<S, D>(a.e[k], bad);
                mask |= unsigned(bad != 0) << k;
            }
            if ((mode & GR_CV_CHECK) && mask) lower(first_bad, c * K + __ffs(mask) - 1);
            if (mode & GR_CV_WRITE) {
#pragma unroll
                for (int j = 0; j < ND; j++) __stcs(out + c * ND + j, b.v[j]);
            }
        }
        tail = chunks * K;
    }
    for (size_t i = tail + t; i < n; i += stride) {
        int bad;
        const TD e = convert<S, D>(src[i], bad);
        if ((mode & GR_CV_CHECK) && bad) lower(first_bad, i);
        if (mode & GR_CV_WRITE) dst[i] = e;
    }
}

/* f(std::integral_constant<gr_dtype, t>) for a dtype of the list. */
template <class F> cudaError_t by_dtype(gr_dtype t, F &&f) {
    switch (t) {
#define GR_CV_CASE(E, ...) \
    case GR_##E: return f(std::integral_constant<gr_dtype, GR_##E>{});
        GR_DTYPE_LIST(GR_CV_CASE)
#undef GR_CV_CASE
    default: return cudaErrorInvalidValue;
    }
}

}  // namespace

extern "C" int gr_dev_convert(void *dst, gr_dtype to, const void *src, gr_dtype from, size_t n, int mode,
                              unsigned long long *first_bad, void *stream) {
    if (n == 0) return 0;
    const bool vector = (((uintptr_t)dst | (uintptr_t)src) & 15u) == 0;
    return by_dtype(from, [&](auto s) {
        return by_dtype(to, [&](auto d) {
            constexpr gr_dtype S = decltype(s)::value, D = decltype(d)::value;
            using TS = typename Dtype<S>::T;
            using TD = typename Dtype<D>::T;
            constexpr size_t K = 16 / (sizeof(TS) < sizeof(TD) ? sizeof(TS) : sizeof(TD));
            const size_t work = vector ? n / K + n % K : n;
            const size_t blocks = (work + kBlock - 1) / kBlock;
            const unsigned grid = unsigned(blocks < 65535u * 8 ? blocks : 65535u * 8);   /* grid-stride past that */
            convert_kernel<S, D><<<grid, kBlock, 0, (cudaStream_t)stream>>>(
                (const TS *)src, (TD *)dst, n, mode, first_bad, vector);
            return cudaGetLastError();
        });
    });
}
