/*
 * jit.cu -- code compiled at run time (engine/jit/nvrtc.c) loaded and launched behind the engine's device
 * interface (gr_dev_module_*, gr_dev_launch), with the driver API: the runtime has no call that loads
 * a CUBIN or PTX image from memory. The driver's functions come through the runtime (driver.cuh), so
 * the module still never links libcuda.
 *
 * Modules load into the context the runtime made current on this thread (its primary context, which
 * gr_dev_init_on created), so a kernel of a module shares streams and memory with the catalogue's.
 */
#include <limits.h>
#include <stdint.h>
#include <string.h>

#include "../../engine/base/device.h"
#include "../host/driver.cuh"

namespace {

struct Driver {
    decltype(&cuModuleLoadDataEx) load;
    decltype(&cuModuleGetFunction) function;
    decltype(&cuModuleUnload) unload;
    decltype(&cuLaunchKernel) launch;
    decltype(&cuFuncSetAttribute) set_attribute;
};

/* Looked up on first use, once (a function-local static, safe when threads race to it). */
const Driver &driver() {
    static const Driver d = {
        gr::driver_entry<decltype(&cuModuleLoadDataEx)>("cuModuleLoadDataEx"),
        gr::driver_entry<decltype(&cuModuleGetFunction)>("cuModuleGetFunction"),
        gr::driver_entry<decltype(&cuModuleUnload)>("cuModuleUnload"),
        gr::driver_entry<decltype(&cuLaunchKernel)>("cuLaunchKernel"),
        gr::driver_entry<decltype(&cuFuncSetAttribute)>("cuFuncSetAttribute"),
    };
    return d;
}

/* The engine names codes with the runtime's words (gr_dev_error_name). The driver's codes are the
 * runtime's numbers for the same failures (CUDA_ERROR_INVALID_PTX and cudaErrorInvalidPtx are both
 * 218); the few with no runtime twin become cudaErrorUnknown rather than an unnamed number. */
int from_driver(CUresult r) {
    if (r == CUDA_SUCCESS) return 0;
    return strcmp(cudaGetErrorName(cudaError_t(r)), "unrecognized error code") == 0 ? cudaErrorUnknown : int(r);
}

constexpr int kNoDriverFunction = cudaErrorCallRequiresNewerDriver;

/* Dynamic shared memory past the default 48 KiB must be asked for, per function, before the launch. */
constexpr size_t kDefaultSmem = 48 * 1024;

}  // namespace

extern "C" int gr_dev_module_load(const void *image, void **module, char *log, size_t loglen) {
    *module = nullptr;
    if (log && loglen) *log = '\0';
    const Driver &d = driver();
    if (!d.load) return kNoDriverFunction;
    cudaError_t e = cudaFree(0);   /* the runtime's context current on this thread, for the driver */
    if (e != cudaSuccess) return e;
    CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void *values[] = {log, (void *)(uintptr_t)(loglen < UINT_MAX ? loglen : UINT_MAX)};
    CUmodule m = nullptr;
    CUresult r = d.load(&m, image, log && loglen ? 2 : 0, options, values);
    if (r != CUDA_SUCCESS) return from_driver(r);
    *module = m;
    return 0;
}

extern "C" int gr_dev_module_function(void *module, const char *name, void **fn) {
    *fn = nullptr;
    const Driver &d = driver();
    if (!d.function) return kNoDriverFunction;
    CUfunction f = nullptr;
    CUresult r = d.function(&f, CUmodule(module), name);
    if (r != CUDA_SUCCESS) return from_driver(r);
    *fn = f;
    return 0;
}

extern "C" int gr_dev_module_unload(void *module) {
    const Driver &d = driver();
    if (!d.unload) return kNoDriverFunction;
    return from_driver(d.unload(CUmodule(module)));
}

extern "C" int gr_dev_launch(void *fn, unsigned grid, unsigned block, size_t smem, void *stream, void **args) {
    const Driver &d = driver();
    if (!d.launch || !d.set_attribute) return kNoDriverFunction;
    if (smem > INT_MAX) return cudaErrorInvalidValue;
    CUfunction f = CUfunction(fn);
    if (smem > kDefaultSmem) {
        CUresult r = d.set_attribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, int(smem));
        if (r != CUDA_SUCCESS) return from_driver(r);
    }
    return from_driver(d.launch(f, grid, 1, 1, block, 1, 1, unsigned(smem), CUstream(stream), args, nullptr));
}
