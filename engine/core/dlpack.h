/*
 * dlpack.h -- the DLPack 1.x exchange structures, as dlpack.c writes and reads them (the C API:
 * gr_buffer_to_dlpack, gr_buffer_from_dlpack and gr_buffer_from_dlpack_legacy in gr.h, which pass them as
 * void *).
 *
 * Our own definitions of the ABI of dmlc/dlpack's include/dlpack/dlpack.h, version 1.1: the names are the
 * standard's, so that code written against that header reads the same here, and the layout is the one
 * every producer and consumer shares (the order of the fields is the ABI; nothing may be reordered or
 * added). Only what the engine uses is named: the device types it exports or accepts and the type codes
 * of its dtypes. Includes only <stdint.h>, so that a C host (spec/host/c_api_host.c) can make a tensor of
 * its own with it.
 */
#ifndef GR_DLPACK_H
#define GR_DLPACK_H

#include <stdint.h>

/* The version a DLManagedTensorVersioned carries. A consumer must not read anything but the version,
 * manager_ctx and deleter of a tensor whose major differs from its own (the rest may lie elsewhere). */
#define GR_DLPACK_MAJOR 1
#define GR_DLPACK_MINOR 1

typedef struct {
    uint32_t major;
    uint32_t minor;
} DLPackVersion;

/* Where the memory is (DLDevice.device_type; an int32 enum in the standard). */
enum {
    kDLCPU = 1,             /* plain host memory */
    kDLCUDA = 2,            /* device memory; device_id is the CUDA ordinal */
    kDLCUDAHost = 3,        /* pinned host memory (cudaMallocHost) */
    kDLCUDAManaged = 13     /* unified memory (cudaMallocManaged): refused on import */
};

typedef struct {
    int32_t device_type;
    int32_t device_id;      /* 0 for host, pinned and managed memory */
} DLDevice;

/* DLDataType.code: how the bits of an element are read. */
enum {
    kDLInt = 0,
    kDLUInt = 1,
    kDLFloat = 2,           /* IEEE binary16/32/64 */
    kDLBfloat = 4,
    kDLBool = 6,            /* 8 bits per element, 0 or 1 */
    kDLFloat8_e4m3fn = 10,  /* 4 exponent bits, no infinities, one NaN pattern (our float8_e4m3) */
    kDLFloat8_e5m2 = 12     /* IEEE-like: infinities and NaNs (our float8_e5m2) */
};

typedef struct {
    uint8_t code;
    uint8_t bits;           /* per lane */
    uint16_t lanes;         /* 1 for scalars; more for vector types (refused on import) */
} DLDataType;

/* The tensor itself: element (i0, i1, ...) lies at data + byte_offset + (i0 * strides[0] + ...) * size. */
typedef struct {
    void *data;
    DLDevice device;
    int32_t ndim;
    DLDataType dtype;
    const int64_t *shape;   /* ndim entries */
    const int64_t *strides; /* ndim entries, in elements; NULL: compact, row-major */
    uint64_t byte_offset;
} DLTensor;

/* flags of DLManagedTensorVersioned */
#define GR_DLPACK_FLAG_READ_ONLY ((uint64_t)1 << 0)     /* the consumer must not write */
#define GR_DLPACK_FLAG_IS_COPIED ((uint64_t)1 << 1)     /* the producer made a copy for the consumer */

/* The DLPack 1.x exchange: the consumer calls deleter(self) once when it no longer needs the memory
 * (deleter may be NULL when there is nothing to release); that frees self too. */
typedef struct DLManagedTensorVersioned {
    DLPackVersion version;
    void *manager_ctx;      /* the producer's */
    void (*deleter)(struct DLManagedTensorVersioned *self);
    uint64_t flags;
    DLTensor dl_tensor;
} DLManagedTensorVersioned;

/* The exchange before DLPack 1.0 (still what older producers hand out): no version, no flags, the tensor
 * first. Nothing in the memory tells the two apart, so the caller says which it holds. */
typedef struct DLManagedTensor {
    DLTensor dl_tensor;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensor *self);
} DLManagedTensor;

#endif
