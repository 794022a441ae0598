/*
 * strided.cu -- element access of strided views on the device: a gather of a view's elements, in
 * row-major order of its shape, into compact memory, and the scatter back (engine/core/buffer.c's
 * reads, writes, generators and copies of a view that is not compact; core/layout.c says which are).
 *
 * A simple generic kernel, not a fast one: each thread takes one row-major index, splits it into
 * coordinates by the shape (up to GR_MAX_DIMS axes, passed by value in gr_dev_layout) and adds up
 * coordinate * stride. Elements move as unsigned words of their size (1, 2, 4 or 8 bytes), so one
 * instantiation serves every dtype of that size and no value is converted. The axis reductions of issue
 * 23 will read strided views in their own kernels; this one only backs element access and copies.
 */
#include <cuda_runtime.h>
#include <stdint.h>

#include "../../engine/base/device.h"

namespace {

constexpr int kBlock = 256;

unsigned blocks_for(size_t n) {
    size_t b = (n + kBlock - 1) / kBlock;
    return unsigned(b < 65535u * 8 ? (b ? b : 1) : 65535u * 8);   /* grid-stride past that */
}

/* the offset in elements of row-major index i of the view */
__device__ size_t view_offset(const gr_dev_layout &l, size_t i) {
    size_t off = 0;
    for (int d = l.ndim - 1; d >= 0; d--) {
        size_t len = l.shape[d];
        off += (i % len) * l.strides[d];
        i /= len;
    }
    return off;
}

template <class W> __global__ void strided_kernel(W *base, gr_dev_layout l, size_t first, size_t count, W *compact,
                                                  int gather) {
    for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += size_t(gridDim.x) * blockDim.x) {
        W *v = base + view_offset(l, first + i);
        if (gather) compact[i] = *v;
        else *v = compact[i];
    }
}

template <class W> cudaError_t launch(void *base, const gr_dev_layout &l, size_t first, size_t count, void *compact,
                                      int gather, void *stream) {
    strided_kernel<W><<<blocks_for(count), kBlock, 0, (cudaStream_t)stream>>>((W *)base, l, first, count,
                                                                            (W *)compact, gather);
    return cudaGetLastError();
}

}  // namespace

extern "C" int gr_dev_strided(void *base, gr_dev_layout layout, size_t es, size_t first, size_t count, void *compact,
                              int gather, void *stream) {
    if (count == 0) return 0;
    if (layout.ndim < 1 || layout.ndim > GR_MAX_DIMS) return cudaErrorInvalidValue;
    switch (es) {
    case 1: return launch<uint8_t>(base, layout, first, count, compact, gather, stream);
    case 2: return launch<uint16_t>(base, layout, first, count, compact, gather, stream);
    case 4: return launch<uint32_t>(base, layout, first, count, compact, gather, stream);
    case 8: return launch<uint64_t>(base, layout, first, count, compact, gather, stream);
    default: return cudaErrorInvalidValue;
    }
}
