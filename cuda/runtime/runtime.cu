/*
 * runtime.cu -- the engine's device interface (engine/base/device.h, gr_dev_*) on the CUDA runtime.
 *
 * The engine is plain C and never includes a CUDA header: every runtime call it needs passes through
 * here, returning the cudaError_t as an int (0 = success) so the engine can name it in its messages.
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#include <atomic>
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

/* ---- the buffer pool ------------------------------------------------------------------------------
 *
 * Device memory comes from a caching, stream-ordered pool per device (a cudaMemPool_t of our own, made on
 * the device's first allocation), which keeps what is freed for the next allocation instead of giving it
 * back to the driver (release threshold 2^64 - 1): a cudaMalloc and cudaFree of 512 MiB cost about 0.4 ms
 * on an H100, and a segmented sum that returns a new buffer paid for one of each per call (issue 26).
 * Like PyTorch's and CuPy's caching allocators the process then keeps that memory (nvidia-smi counts it);
 * gr_dev_pool_trim gives back what is idle, and an allocation that finds the device full waits for the
 * device, gives back what is idle and tries once more. A pool of our own, not the device's default one,
 * so that its settings and statistics are ours alone (other libraries in the process use the default).
 *
 * Why freed memory is never handed out while queued work may still use it:
 *   - A free is queued, not waited for: gr_dev_free(p, stream, after) makes `stream` wait for the event
 *     `after` (the storage's last recorded reader, on whatever stream it ran: buffer.c's
 *     gr_storage_mark_read) and calls cudaFreeAsync(p, stream). The engine passes the context's stream of
 *     p's device, where every synchronous call queues its work, so the free's point in stream order comes
 *     after every use the engine knows of. (A call on a user stream either waits for its work before it
 *     returns or records it in the storage's event.)
 *   - Allocations run on a stream of the pool's own (`alloc` below) that nothing else uses and on which
 *     nothing is ever freed while work may be queued, and the pool's two cross-stream reuse rules that
 *     rely on stream order (cudaMemPoolReuseFollowEventDependencies, ...AllowInternalDependencies) are
 *     off. What is left is cudaMemPoolReuseAllowOpportunistic: memory freed on another stream is reused
 *     only once its free has *completed* on the device, i.e. once everything the free was ordered after
 *     has finished. So an allocation gets either fresh memory or memory that no queued work touches, and
 *     never gains a dependency on other streams' work; a free that has not completed yet just leaves the
 *     pool to take (or, at worst, map) other memory -- a miss, never a wait.
 *   - The allocation itself is ordered on `alloc`, which is synchronised before gr_dev_malloc returns
 *     (it holds nothing else, so that costs a call, not a wait), so the memory is ready for any stream,
 *     as cudaMalloc's is. The same holds across threads: a pool's streams and counters are safe to share.
 *   - A free without a stream (the scratch slots, gr_mem_free) first waits for the whole device, as
 *     cudaFree does, and then nothing can use the memory any more, whichever stream frees it.
 * GPUREDUCE_BUFFER_POOL=0 (memory.c passes it as `pooled`) makes a device's first allocation choose
 * cudaMalloc and cudaFree for the process instead; a device without memory pools does the same. */
namespace {
constexpr int kMaxDevices = 64;
struct DevicePool {
    std::once_flag once;
    std::atomic<bool> made{false};    /* set up (pool or not): pool and alloc below may be read */
    cudaMemPool_t pool = nullptr;     /* NULL: this device allocates with cudaMalloc */
    cudaStream_t alloc = nullptr;     /* the allocations' stream; nothing else is queued on it */
};
DevicePool pools[kMaxDevices];
std::atomic<unsigned long long> pool_hits{0}, pool_misses{0};

/* Pool memory is its own device's alone until cudaMemPoolSetAccess grants another device (without it,
 * copies between two GPUs failed with invalid values on the H100 x2). So a device pools only when every
 * other device can reach it peer to peer (else cudaMalloc, whose memory the runtime copies between any
 * two devices), and the grants are made between the devices this process has used (`made`), as each
 * starts: granting every device up front would start a context on GPUs the process never touches (each
 * rank of a job on an 8-GPU host would hold 8). */
std::mutex grants;

bool peers_all_reach(int dev) {
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess) return false;
    for (int o = 0; o < devices; o++) {
        int can = 0;
        if (o != dev && (cudaDeviceCanAccessPeer(&can, o, dev) != cudaSuccess || !can)) return false;
    }
    return true;
}

cudaError_t grant(cudaMemPool_t pool, int to) {
    cudaMemAccessDesc desc = {};
    desc.location.type = cudaMemLocationTypeDevice;
    desc.location.id = to;
    desc.flags = cudaMemAccessFlagsProtReadWrite;
    return cudaMemPoolSetAccess(pool, &desc, 1);
}

/* A pool that keeps everything and reuses across streams only what is no longer in use (above). */
cudaError_t pool_make(DevicePool *d, int dev) {
    int supported = 0;
    cudaError_t e = cudaDeviceGetAttribute(&supported, cudaDevAttrMemoryPoolsSupported, dev);
    if (e != cudaSuccess || !supported) return e;
    if (!peers_all_reach(dev)) return cudaErrorPeerAccessUnsupported;
    cudaMemPoolProps props = {};
    props.allocType = cudaMemAllocationTypePinned;
    props.handleTypes = cudaMemHandleTypeNone;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = dev;
    cudaMemPool_t pool = nullptr;
    if ((e = cudaMemPoolCreate(&pool, &props)) != cudaSuccess) return e;
    unsigned long long keep = ~0ull;
    int on = 1, off = 0;
    e = cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep);
    if (e == cudaSuccess) e = cudaMemPoolSetAttribute(pool, cudaMemPoolReuseFollowEventDependencies, &off);
    if (e == cudaSuccess) e = cudaMemPoolSetAttribute(pool, cudaMemPoolReuseAllowInternalDependencies, &off);
    if (e == cudaSuccess) e = cudaMemPoolSetAttribute(pool, cudaMemPoolReuseAllowOpportunistic, &on);
    if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&d->alloc, cudaStreamNonBlocking);
    if (e != cudaSuccess) {
        cudaMemPoolDestroy(pool);
        return e;
    }
    d->pool = pool;
    return cudaSuccess;
}

/* The current device's entry (its number in *dev), set up by its first allocation, which says whether it
 * pools; NULL when the device cannot be asked or is past the table. */
DevicePool *current_entry(int pooled, int *dev_out) {
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= kMaxDevices) return nullptr;
    *dev_out = dev;
    DevicePool *d = &pools[dev];
    if (pooled >= 0) {
        std::call_once(d->once, [d, dev, pooled] {
            if (pooled && pool_make(d, dev) != cudaSuccess) cudaGetLastError();   /* cudaMalloc, then */
            std::lock_guard<std::mutex> hold(grants);
            for (int o = 0; o < kMaxDevices; o++) {
                DevicePool *p = &pools[o];
                if (o == dev || !p->made.load(std::memory_order_acquire)) continue;
                /* a failed grant leaves that pair's copies to fail loudly, as they did before the grants */
                if (p->pool && grant(p->pool, dev) != cudaSuccess) cudaGetLastError();
                if (d->pool && grant(d->pool, o) != cudaSuccess) cudaGetLastError();
            }
            d->made.store(true, std::memory_order_release);
        });
    }
    return d->made.load(std::memory_order_acquire) ? d : nullptr;
}

unsigned long long reserved_bytes(cudaMemPool_t pool) {
    unsigned long long v = 0;
    cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &v);
    return v;
}

/* A hit when the pool did not grow to serve it. */
cudaError_t pool_alloc(DevicePool *d, void **p, size_t bytes) {
    unsigned long long before = reserved_bytes(d->pool);
    cudaError_t e = cudaMallocFromPoolAsync(p, bytes, d->pool, d->alloc);
    if (e == cudaSuccess) e = cudaStreamSynchronize(d->alloc);
    if (e == cudaSuccess) (reserved_bytes(d->pool) > before ? pool_misses : pool_hits)++;
    return e;
}
}  // namespace

/* A failed allocation leaves an error that the next cudaGetLastError() would report against an
 * innocent launch: clear it here. */
extern "C" int gr_dev_malloc(void **p, size_t bytes, int pooled) {
    cudaError_t e;
    int dev = -1;
    DevicePool *d = current_entry(pooled ? 1 : 0, &dev);
    if (!d || !d->pool) {
        cudaGetLastError();
        e = cudaMalloc(p, bytes);
    } else if ((e = pool_alloc(d, p, bytes)) == cudaErrorMemoryAllocation) {
        /* what the pool holds idle, and what frees still queued return to it, goes back to the driver */
        cudaGetLastError();
        if (cudaDeviceSynchronize() == cudaSuccess && cudaMemPoolTrimTo(d->pool, 0) == cudaSuccess)
            e = pool_alloc(d, p, bytes);
    }
    if (e != cudaSuccess) { cudaGetLastError(); *p = NULL; }
    return e;
}

/* Pool memory of the current device goes back to its pool, ordered after `stream`'s work so far and the
 * event `after` (the comment above says why that is safe), or after the whole device when stream is NULL.
 * Memory of another device than the current one, or from cudaMalloc, goes back through cudaFree (which
 * takes pool memory too, waiting for the device). */
extern "C" int gr_dev_free(void *p, void *stream, void *after) {
    int dev = -1;
    cudaPointerAttributes at;
    DevicePool *d = current_entry(-1, &dev);
    cudaError_t e;
    if (d && d->pool && cudaPointerGetAttributes(&at, p) == cudaSuccess && at.type == cudaMemoryTypeDevice &&
        at.device == dev) {
        if (!stream) {
            if ((e = cudaDeviceSynchronize()) != cudaSuccess) return e;
            return cudaFreeAsync(p, d->alloc);      /* nothing uses p any more: any stream is safe */
        }
        if (after && (e = cudaStreamWaitEvent((cudaStream_t)stream, (cudaEvent_t)after, 0)) != cudaSuccess)
            return e;
        return cudaFreeAsync(p, (cudaStream_t)stream);
    }
    cudaGetLastError();
    if (after && (e = cudaEventSynchronize((cudaEvent_t)after)) != cudaSuccess) return e;
    return cudaFree(p);
}

/* The pools of every device set up so far, added together. */
extern "C" int gr_dev_pool_info(gr_dev_pool_stats *out) {
    *out = gr_dev_pool_stats{};
    for (int dev = 0; dev < kMaxDevices; dev++) {
        DevicePool *d = &pools[dev];
        if (!d->made.load(std::memory_order_acquire)) continue;
        if (!d->pool) {
            out->plain_devices++;
            continue;
        }
        unsigned long long used = 0;
        out->pooled_devices++;
        out->reserved += reserved_bytes(d->pool);
        cudaMemPoolGetAttribute(d->pool, cudaMemPoolAttrUsedMemCurrent, &used);
        out->used += used;
    }
    out->hits = pool_hits.load();
    out->misses = pool_misses.load();
    return 0;
}

/* Waits for each pooled device (its queued frees then complete) and gives back all its idle memory. The
 * caller's current device is made current again. */
extern "C" int gr_dev_pool_trim(void) {
    int current = -1;
    cudaError_t first = cudaGetDevice(&current);
    for (int dev = 0; dev < kMaxDevices && first == cudaSuccess; dev++) {
        DevicePool *d = &pools[dev];
        if (!d->made.load(std::memory_order_acquire) || !d->pool) continue;
        cudaError_t e = cudaSetDevice(dev);
        if (e == cudaSuccess) e = cudaDeviceSynchronize();
        if (e == cudaSuccess) e = cudaMemPoolTrimTo(d->pool, 0);
        if (e != cudaSuccess) first = e;
    }
    if (current >= 0) cudaSetDevice(current);
    return first;
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
