/*
 * small_floats.cu -- a testing hook's kernels (gr.h's gr_debug_float_device): the element conversions of
 * engine/base/small_floats.h compiled for the device, run next to CUDA's own conversions of the same
 * formats, so that a spec (spec/small_floats_spec.lua) can check that the device computes what the host
 * does for every pattern, and that both agree with cuda_fp16.h, cuda_bf16.h and cuda_fp8.h.
 *
 * CUDA's side: float16 __double2half, __float2half_rn, __half2float; bfloat16 __double2bfloat16,
 * __float2bfloat16_rn, __bfloat162float; FP8 __nv_cvt_double_to_fp8 with __NV_NOSAT (an overflow is the
 * infinity, or e4m3's NaN, as ours is), __nv_cvt_float_to_fp8 with __NV_SATFINITE (on sm_89 and later the
 * hardware's cvt.rn.satfinite; an overflow and an infinity saturate to the largest finite value), and
 * __nv_cvt_fp8_to_halfraw then __half2float. Nothing here is on a reduction's path.
 */
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <stdint.h>

#include "../../engine/base/device.h"
#include "../../engine/base/small_floats.h"

namespace {

/* CUDA's conversions of each format, named by the format's prefix in GR_SMALL_FLOAT_LIST. */
struct Cuda_f16 {
    static __device__ unsigned from_double(double x) { return __half_as_ushort(__double2half(x)); }
    static __device__ unsigned from_float(float x) { return __half_as_ushort(__float2half_rn(x)); }
    static __device__ float to_float(unsigned p) { return __half2float(__ushort_as_half((unsigned short)p)); }
};
struct Cuda_bf16 {
    static __device__ unsigned from_double(double x) { return __bfloat16_as_ushort(__double2bfloat16(x)); }
    static __device__ unsigned from_float(float x) { return __bfloat16_as_ushort(__float2bfloat16_rn(x)); }
    static __device__ float to_float(unsigned p) {
        return __bfloat162float(__ushort_as_bfloat16((unsigned short)p));
    }
};
template <__nv_fp8_interpretation_t kFormat> struct CudaFp8 {
    static __device__ unsigned from_double(double x) { return __nv_cvt_double_to_fp8(x, __NV_NOSAT, kFormat); }
    static __device__ unsigned from_float(float x) { return __nv_cvt_float_to_fp8(x, __NV_SATFINITE, kFormat); }
    static __device__ float to_float(unsigned p) {
        return __half2float(__half(__nv_cvt_fp8_to_halfraw((__nv_fp8_storage_t)p, kFormat)));
    }
};
using Cuda_e4m3 = CudaFp8<__NV_E4M3>;
using Cuda_e5m2 = CudaFp8<__NV_E5M2>;

/* Ours, the same four calls on small_floats.h's functions. */
#define OURS(name, p, bits)                                                                                   \
    struct Ours_##p {                                                                                         \
        static __device__ unsigned from_double(double x) { return gr_##p##_from_double(x); }                 \
        static __device__ unsigned from_float(float x) { return gr_##p##_from_float(x); }                    \
        static __device__ float to_float(unsigned v) { return gr_##p##_to_float(v); }                        \
        static __device__ double to_double(unsigned v) { return gr_##p##_to_double(v); }                     \
    };
GR_SMALL_FLOAT_LIST(OURS)
#undef OURS

constexpr int kBlock = 256;

/* Element i: ours and CUDA's from the double, ours and CUDA's from the double rounded to float32. */
template <class Ours, class Cuda>
__global__ void narrow_kernel(const double *in, size_t n, uint64_t *out) {
    for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
        const double x = in[i];
        const float f = (float)x;
        out[4 * i] = Ours::from_double(x);
        out[4 * i + 1] = Cuda::from_double(x);
        out[4 * i + 2] = Ours::from_float(f);
        out[4 * i + 3] = Cuda::from_float(f);
    }
}

/* Pattern i: our float32 bits and CUDA's, our double's bits and those of CUDA's float made a double. */
template <class Ours, class Cuda>
__global__ void widen_kernel(const uint32_t *in, size_t n, uint64_t *out) {
    for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
        const unsigned p = in[i];
        const float theirs = Cuda::to_float(p);
        out[4 * i] = __float_as_uint(Ours::to_float(p));
        out[4 * i + 1] = __float_as_uint(theirs);
        out[4 * i + 2] = (uint64_t)__double_as_longlong(Ours::to_double(p));
        out[4 * i + 3] = (uint64_t)__double_as_longlong((double)theirs);
    }
}

template <class Ours, class Cuda>
int launch(int widen, const void *in, size_t n, uint64_t *out, cudaStream_t stream) {
    const size_t want = (n + kBlock - 1) / kBlock;
    const unsigned grid = unsigned(want < 1024 ? want : 1024);
    if (widen) widen_kernel<Ours, Cuda><<<grid, kBlock, 0, stream>>>((const uint32_t *)in, n, out);
    else narrow_kernel<Ours, Cuda><<<grid, kBlock, 0, stream>>>((const double *)in, n, out);
    return cudaGetLastError();
}

/* One launcher per format, in GR_SMALL_FLOAT_LIST's order: the format number is the index. */
#define LAUNCHER(name, p, bits) launch<Ours_##p, Cuda_##p>,
int (*const launchers[])(int, const void *, size_t, uint64_t *, cudaStream_t) = {GR_SMALL_FLOAT_LIST(LAUNCHER)};
#undef LAUNCHER

}  // namespace

extern "C" int gr_dev_small_floats(int format, int widen, const void *in, size_t n, uint64_t *out, void *stream) {
    if (format < 0 || format >= int(sizeof launchers / sizeof launchers[0])) return cudaErrorInvalidValue;
    if (n == 0) return 0;
    return launchers[format](widen, in, n, out, (cudaStream_t)stream);
}
