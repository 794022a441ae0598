/*
 * generate.cu -- fill, iota and random contents of device buffers, generated on the device.
 *
 * random() uses the same counter-based hash as the CPU backend (engine/ops/gen_element.h): the same seed
 * gives the same bits on every backend and for every launch shape. float16, bfloat16 and FP8 elements
 * (cuda/device/small_float.cuh) are written as patterns by the host's code: fill's value and iota's
 * start + i * step narrowed once to nearest even by the element's constructor (small_floats.h's
 * narrowing), keeping the pattern's low bits where the value does not fit (the infinity, as the host's
 * unchecked writer gr_scalar_put does), and random's by gen_element.h's gr_random_f16 / gr_random_bf16,
 * the code of gr_cpu_random.
 */
#include <cuda_runtime.h>
#include <type_traits>

#include "../../engine/base/device.h"
#include "../../engine/ops/gen_element.h"
#include "../host/launch.cuh"     /* the device element types (cuda/device/small_float.cuh) */

namespace {

constexpr int kBlock = 256;

unsigned blocks_for(size_t n) {
    size_t b = (n + kBlock - 1) / kBlock;
    return unsigned(b < 65535u * 8 ? (b ? b : 1) : 65535u * 8);   /* grid-stride past that */
}

template <class T> __global__ void fill_kernel(T *p, size_t n, T v) {
    for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
        p[i] = v;
}

/* Floats: start + i * step in double (gen_element.h's gr_iota_real, unfused as on the host), rounded once
 * to the type. Integers: 64-bit wrapping, truncated to the type. */
template <class T> __global__ void iota_kernel(T *p, size_t n, size_t first, double fstart, double fstep,
                                               uint64_t istart, uint64_t istep) {
    for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
        if constexpr (std::is_floating_point_v<T> || gr::is_small_float_v<T>)
            p[i] = T(gr_iota_real(fstart, first + i, fstep));
        else p[i] = T(istart + uint64_t(first + i) * istep);
    }
}

template <class T> __global__ void random_kernel(T *p, size_t n, uint64_t seed, size_t first, double flo,
                                                 double fhi, uint64_t ilo, uint64_t ihi) {
    for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
        uint64_t h = gr_hash64(seed, first + i);
        if constexpr (std::is_same_v<T, float>) p[i] = gr_random_real32(h, flo, fhi);
        else if constexpr (std::is_same_v<T, double>) p[i] = gr_random_real(h, flo, fhi);
        else if constexpr (std::is_same_v<T, gr::f16>) p[i] = T::of_bits(gr_random_f16(h, flo, fhi));
        else if constexpr (std::is_same_v<T, gr::bf16>) p[i] = T::of_bits(gr_random_bf16(h, flo, fhi));
        else if constexpr (std::is_same_v<T, gr::e4m3>) p[i] = T::of_bits(gr_random_e4m3(h, flo, fhi));
        else if constexpr (std::is_same_v<T, gr::e5m2>) p[i] = T::of_bits(gr_random_e5m2(h, flo, fhi));
        else p[i] = T(gr_random_bits(seed, first + i, ilo, ihi));
    }
}

template <class T> struct Tag { using type = T; };

/* Calls f(Tag<T>{}) for the element type of a dtype (gr.h's list; small_float.cuh's for the small floats). */
template <class F> cudaError_t by_dtype(gr_dtype t, F &&f) {
    switch (t) {
#define GR_DTYPE_CASE(E, name, ctype, bytes, is_float, is_signed, kind, lowest, highest, float_acc, nccl, format) \
    case GR_##E: return f(Tag<GR_DEVICE_TYPE(format, ctype)>{});
        GR_DTYPE_LIST(GR_DTYPE_CASE)
#undef GR_DTYPE_CASE
    default: return cudaErrorInvalidValue;
    }
}

}  // namespace

extern "C" int gr_dev_fill(void *p, size_t n, gr_dtype t, gr_scalar v, void *stream) {
    return by_dtype(t, [&](auto tag) {
        using T = typename decltype(tag)::type;
        /* a small float: its constructor rounds once, keeping the pattern's low bits (gr_scalar_put's rule) */
        const T value = std::is_floating_point_v<T> || gr::is_small_float_v<T> ? T(v.v.f) : T(v.v.u);
        fill_kernel<T><<<blocks_for(n), kBlock, 0, (cudaStream_t)stream>>>((T *)p, n, value);
        return cudaGetLastError();
    });
}

extern "C" int gr_dev_iota(void *p, size_t n, gr_dtype t, size_t first, gr_scalar start, gr_scalar step,
                           void *stream) {
    return by_dtype(t, [&](auto tag) {
        using T = typename decltype(tag)::type;
        iota_kernel<T><<<blocks_for(n), kBlock, 0, (cudaStream_t)stream>>>((T *)p, n, first, start.v.f, step.v.f,
                                                                         start.v.u, step.v.u);
        return cudaGetLastError();
    });
}

extern "C" int gr_dev_random(void *p, size_t n, gr_dtype t, uint64_t seed, size_t first, gr_scalar lo,
                             gr_scalar hi, void *stream) {
    return by_dtype(t, [&](auto tag) {
        using T = typename decltype(tag)::type;
        random_kernel<T><<<blocks_for(n), kBlock, 0, (cudaStream_t)stream>>>((T *)p, n, seed, first, lo.v.f,
                                                                           hi.v.f, lo.v.u, hi.v.u);
        return cudaGetLastError();
    });
}
