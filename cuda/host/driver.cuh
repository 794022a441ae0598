/*
 * driver.cuh -- functions of the CUDA driver API, reached through the runtime
 * (cudaGetDriverEntryPointByVersion) for runtime.cu and jit.cu: the module never links libcuda, so
 * that it loads on machines without a driver. For nvcc only, like launch.cuh.
 */
#pragma once

#include <cuda.h>          /* the driver's types: its functions are looked up, never linked */
#include <cuda_runtime.h>

namespace gr {

/* The driver's function `name` with the ABI of CUDA 12.0, or nullptr when this driver lacks it (the
 * runtime's error of the failed lookup is cleared: it is no error of the caller's next call). */
template <class Fn> Fn driver_entry(const char *name) {
    void *p = nullptr;
    cudaDriverEntryPointQueryResult found;
    if (cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
        cudaGetLastError();
        return nullptr;
    }
    return reinterpret_cast<Fn>(p);
}

}  // namespace gr
