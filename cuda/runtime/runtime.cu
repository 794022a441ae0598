/*
 * runtime.cu -- the engine's device interface (engine/base/device.h, gr_dev_*) on the CUDA runtime.
 *
 * The engine is plain C and never includes a CUDA header: every runtime call it needs passes through
 * here, returning the cudaError_t as an int (0 = success) so the engine can name it in its messages.
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#include <mutex>

#include "../../engine/base/device.h"
#include "../../engine/base/launch.h"
#include "../host/driver.cuh"

/* Every kernel of the catalogue, and the segmented and exact ones, named strongly. The engine names
 * them weakly (a CPU-only build has none), and a static link takes an archive's member only for a
 * symbol something needs: without this table, a program linked with libgpureduce.a would have no
 * kernels. This object is in every CUDA build, since the engine calls its gr_dev_* functions. */
#define GR_NAME_KERNEL(name) extern "C" const gr_kernel gr_kernel_##name;
GR_CATALOGUE_KERNELS(GR_NAME_KERNEL)
#undef GR_NAME_KERNEL
extern "C" const gr_seg_kernel gr_segmented;
extern "C" const gr_col_kernel gr_columns;
extern "C" const gr_exact_kernel gr_exact_gpu;
extern "C" const gr_dot_kernel gr_dot_gpu;
#define GR_KERNEL_ADDRESS(name) &gr_kernel_##name,
extern "C" __attribute__((used)) const void *const gr_kernels_linked[] = {
    GR_CATALOGUE_KERNELS(GR_KERNEL_ADDRESS) & gr_segmented, &gr_columns, &gr_exact_gpu, &gr_dot_gpu};
#undef GR_KERNEL_ADDRESS

extern "C" int gr_dev_present(void) {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
        cudaGetLastError();     /* clear it: no driver is not an error of ours */
        return 0;
    }
    return count > 0;
}

extern "C" int gr_dev_count(void) {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return count;
}

extern "C" int gr_dev_props(int dev, gr_device_info *info) {
    cudaDeviceProp p;
    cudaError_t e = cudaGetDeviceProperties(&p, dev);
    if (e != cudaSuccess) return e;
    snprintf(info->name, sizeof info->name, "%s", p.name);
    info->sms = p.multiProcessorCount;
    info->memory = p.totalGlobalMem;
    info->cc_major = p.major;
    info->cc_minor = p.minor;
    info->l2 = (size_t)p.l2CacheSize;
    info->max_threads_per_sm = p.maxThreadsPerMultiProcessor;
    int v = 0;
    cudaDeviceGetAttribute(&v, cudaDevAttrClockRate, dev);
    info->clock_khz = v;
    cudaDeviceGetAttribute(&v, cudaDevAttrMemoryClockRate, dev);
    info->mem_clock_khz = v;
    cudaDeviceGetAttribute(&v, cudaDevAttrGlobalMemoryBusWidth, dev);
    info->bus_width = v;
    cudaRuntimeGetVersion(&info->runtime_version);
    cudaDriverGetVersion(&info->driver_version);
    return 0;
}

/* The device this thread last made current through here: switching costs a runtime call, and while
 * one device is in use the engine never asks (engine/core/context.h). */
static thread_local int current_dev = -1;

extern "C" int gr_dev_use(int dev) {
    if (dev == current_dev) return 0;
    cudaError_t e = cudaSetDevice(dev);
    if (e == cudaSuccess) current_dev = dev;
    return e;
}

extern "C" int gr_dev_init_on(int dev, gr_device_info *info) {
    cudaError_t e = cudaSetDevice(dev);
    if (e != cudaSuccess) return e;
    current_dev = dev;
    int rc = gr_dev_props(dev, info);
    if (rc) return rc;
    return cudaFree(0);     /* creates the primary context now, not inside the first timed call */
}

extern "C" const char *gr_dev_error_name(int code) { return cudaGetErrorName((cudaError_t)code); }

extern "C" const char *gr_dev_error_string(int code) { return cudaGetErrorString((cudaError_t)code); }

extern "C" int gr_dev_error_is_oom(int code) { return code == cudaErrorMemoryAllocation; }

/* The runtime's documentation says of each: "the process ... must be terminated and relaunched". */
extern "C" int gr_dev_error_is_sticky(int code) {
    switch (code) {
    case cudaErrorIllegalAddress: case cudaErrorLaunchTimeout: case cudaErrorAssert:
    case cudaErrorHardwareStackError: case cudaErrorIllegalInstruction: case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace: case cudaErrorInvalidPc: case cudaErrorLaunchFailure:
        return 1;
    default:
        return 0;
    }
}

/* Device memory comes from each device's stream-ordered pool (cudaMallocAsync), which keeps what is
 * freed for the next allocation instead of giving it back to the driver: a cudaMalloc and cudaFree of
 * 512 MiB cost about 0.4 ms on an H100, most of b:astype's time for 2^28 float32 into bfloat16. Like
 * PyTorch's caching allocator, the pool then holds freed memory for this process; when an allocation
 * finds the device full, what the pool holds unused is given back and the allocation tried once more.
 * Each device's allocations run on a stream of their own, which nothing else uses, synchronised at once,
 * so the memory is ready for every stream when gr_dev_malloc returns; gr_dev_free first waits for the
 * device, as cudaFree does, so no kernel still reads memory that the pool hands out again. */
namespace {
constexpr int kMaxDevices = 64;
struct DevicePool {
    std::once_flag once;
    cudaStream_t stream = nullptr;
    cudaMemPool_t pool = nullptr;
    cudaError_t status = cudaSuccess;
};
DevicePool pools[kMaxDevices];

/* The current device's pool (its number in *dev), set up on first use: every freed byte kept (release
 * threshold 2^64 - 1). */
DevicePool *current_pool(cudaError_t *e, int *dev_out) {
    int dev = 0;
    if ((*e = cudaGetDevice(&dev)) != cudaSuccess) return nullptr;
    *dev_out = dev;
    if (dev < 0 || dev >= kMaxDevices) return nullptr;
    DevicePool *d = &pools[dev];
    std::call_once(d->once, [d, dev] {
        unsigned long long keep = ~0ull;
        d->status = cudaDeviceGetDefaultMemPool(&d->pool, dev);
        if (d->status == cudaSuccess) d->status = cudaMemPoolSetAttribute(d->pool, cudaMemPoolAttrReleaseThreshold, &keep);
        if (d->status == cudaSuccess) d->status = cudaStreamCreateWithFlags(&d->stream, cudaStreamNonBlocking);
    });
    *e = d->status;
    return d->status == cudaSuccess ? d : nullptr;
}

cudaError_t pool_alloc(DevicePool *d, void **p, size_t bytes) {
    cudaError_t e = cudaMallocAsync(p, bytes, d->stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(d->stream);
    return e;
}
}  // namespace

/* A failed allocation leaves an error that the next cudaGetLastError() would report against an
 * innocent launch: clear it here. A device without memory pools (or more devices than the table holds)
 * allocates with cudaMalloc. */
extern "C" int gr_dev_malloc(void **p, size_t bytes) {
    cudaError_t e;
    int dev;
    DevicePool *d = current_pool(&e, &dev);
    if (!d) {
        cudaGetLastError();
        e = cudaMalloc(p, bytes);
    } else if ((e = pool_alloc(d, p, bytes)) == cudaErrorMemoryAllocation) {
        cudaGetLastError();
        if (cudaDeviceSynchronize() == cudaSuccess && cudaMemPoolTrimTo(d->pool, 0) == cudaSuccess)
            e = pool_alloc(d, p, bytes);
    }
    if (e != cudaSuccess) { cudaGetLastError(); *p = NULL; }
    return e;
}
/* Memory of another device than the current one (or from cudaMalloc) goes back through cudaFree,
 * which takes pool memory too. */
extern "C" int gr_dev_free(void *p) {
    cudaError_t e;
    int dev = -1;
    cudaPointerAttributes at;
    DevicePool *d = current_pool(&e, &dev);
    if (d && cudaPointerGetAttributes(&at, p) == cudaSuccess && at.type == cudaMemoryTypeDevice && at.device == dev) {
        if ((e = cudaDeviceSynchronize()) != cudaSuccess) return e;
        return cudaFreeAsync(p, d->stream);
    }
    cudaGetLastError();
    return cudaFree(p);
}
extern "C" int gr_dev_host_alloc(void **p, size_t bytes) {
    cudaError_t e = cudaHostAlloc(p, bytes, cudaHostAllocMapped | cudaHostAllocPortable);
    if (e != cudaSuccess) { cudaGetLastError(); *p = NULL; }
    return e;
}
extern "C" int gr_dev_host_free(void *p) { return cudaFreeHost(p); }
extern "C" int gr_dev_memset(void *p, int v, size_t bytes, void *stream) {
    return cudaMemsetAsync(p, v, bytes, (cudaStream_t)stream);
}
extern "C" int gr_dev_copy(void *dst, const void *src, size_t bytes, void *stream) {
    return cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, (cudaStream_t)stream);
}
extern "C" int gr_dev_stream_create(void **s) {
    return cudaStreamCreateWithFlags((cudaStream_t *)s, cudaStreamNonBlocking);
}
extern "C" int gr_dev_stream_destroy(void *s) { return cudaStreamDestroy((cudaStream_t)s); }
extern "C" int gr_dev_stream_sync(void *s) { return cudaStreamSynchronize((cudaStream_t)s); }
extern "C" int gr_dev_event_create(void **e, int timing) {
    return cudaEventCreateWithFlags((cudaEvent_t *)e, timing ? cudaEventDefault : cudaEventDisableTiming);
}
extern "C" int gr_dev_event_destroy(void *e) { return cudaEventDestroy((cudaEvent_t)e); }
extern "C" int gr_dev_event_record(void *e, void *stream) {
    return cudaEventRecord((cudaEvent_t)e, (cudaStream_t)stream);
}
extern "C" int gr_dev_event_sync(void *e) { return cudaEventSynchronize((cudaEvent_t)e); }
extern "C" int gr_dev_event_query(void *e) {
    cudaError_t r = cudaEventQuery((cudaEvent_t)e);
    return r == cudaSuccess ? 0 : r == cudaErrorNotReady ? 1 : (int)r;
}
extern "C" int gr_dev_event_elapsed(float *ms, void *start, void *end) {
    return cudaEventElapsedTime(ms, (cudaEvent_t)start, (cudaEvent_t)end);
}
extern "C" int gr_dev_stream_wait_event(void *stream, void *e) {
    return cudaStreamWaitEvent((cudaStream_t)stream, (cudaEvent_t)e, 0);
}

extern "C" int gr_dev_stream_query(void *s) {
    cudaError_t r = cudaStreamQuery((cudaStream_t)s);
    return r == cudaSuccess ? 0 : r == cudaErrorNotReady ? 1 : (int)r;
}

/* Capture is thread-local: work other threads queue meanwhile is not swept into the graph. */
extern "C" int gr_dev_capture_begin(void *stream) {
    return cudaStreamBeginCapture((cudaStream_t)stream, cudaStreamCaptureModeThreadLocal);
}

extern "C" int gr_dev_capture_end(void *stream, void **exec) {
    *exec = NULL;
    cudaGraph_t graph = NULL;
    cudaError_t e = cudaStreamEndCapture((cudaStream_t)stream, &graph);
    if (e == cudaSuccess) e = cudaGraphInstantiate((cudaGraphExec_t *)exec, graph, 0);
    if (graph) cudaGraphDestroy(graph);
    if (e != cudaSuccess) {
        *exec = NULL;
        cudaGetLastError();
    }
    return e;
}

extern "C" int gr_dev_graph_launch(void *exec, void *stream) {
    return cudaGraphLaunch((cudaGraphExec_t)exec, (cudaStream_t)stream);
}

extern "C" int gr_dev_graph_destroy(void *exec) { return cudaGraphExecDestroy((cudaGraphExec_t)exec); }

/* cuStreamWriteValue32 from the driver (driver.cuh), looked up once; NULL when the driver lacks it. A
 * function-local static: initialised once even when several threads get here first together. */
static decltype(&cuStreamWriteValue32) write_value(void) {
    static const auto fn = gr::driver_entry<decltype(&cuStreamWriteValue32)>("cuStreamWriteValue32");
    return fn;
}

/* Queues a write of `value` to *flag (pinned, mapped host memory) once everything before it on the
 * stream is done and visible: the host can spin on the word instead of synchronising through the driver,
 * about a microsecond less per call (experiments/tuning/tune.cu). */
extern "C" int gr_dev_write_flag(void *stream, unsigned *flag, unsigned value) {
    auto fn = write_value();
    if (!fn) return cudaErrorNotSupported;
    CUresult r = fn((CUstream)stream, (CUdeviceptr)flag, value, CU_STREAM_WRITE_VALUE_DEFAULT);
    return r == CUDA_SUCCESS ? 0 : cudaErrorNotSupported;
}
