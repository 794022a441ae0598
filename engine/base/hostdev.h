/*
 * hostdev.h -- GR_HD, the mark of a function written once for host and device: __host__ __device__ and
 * always inlined under CUDA (nvcc and NVRTC), static inline in the engine's C.
 *
 * The headers whose code both sides compile include it: engine/ops/op_math.h, exact_acc.h and
 * gen_element.h, and engine/base/small_floats.h. It includes nothing, so NVRTC compiles it too: the
 * module embeds it with the device headers (the Makefile's NVRTC_HEADERS). NVRTC finds an embedded header
 * by the exact name an include gives, so every header that NVRTC may read includes it as
 * "../../engine/base/hostdev.h", the name it is embedded under, which is also the right path from any
 * folder two levels down (engine/ops/, engine/base/, cuda/device/).
 */
#ifndef GR_HOSTDEV_H
#define GR_HOSTDEV_H

#ifndef GR_HD
#ifdef __CUDACC__
#define GR_HD __host__ __device__ __forceinline__
#else
#define GR_HD static inline
#endif
#endif

#endif
