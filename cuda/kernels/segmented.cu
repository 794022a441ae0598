/*
 * segmented.cu -- many reductions in one launch: the segments of a buffer (fixed size or CSR offsets)
 * and the buffers of reduce_many, each reduced with every op and its result(s) written on the device.
 * The kernel's body, and how it shares a segment out, is segmented.cuh's; results come from the op's
 * accumulator through results.cuh. Also the check of CSR boundaries on the device, which measures the
 * longest segment on the way.
 */
#include "../host/launch.cuh"
#include "../device/results.cuh"
#include "../device/segmented.cuh"

namespace {

using gr::u64;

static_assert(sizeof(gr::SegItem) == sizeof(gr_seg_item) && alignof(gr::SegItem) == alignof(gr_seg_item),
              "segmented.cuh's item is gr_seg_item");

/* launch bounds: blocks of up to 1024 threads (the policy's largest), so at most 64 registers. kBool:
 * the results of bool data written as bool (results.cuh's BoolResult: 0 or 1, never uint8's 255). */
template <int Kind, class Op, class In, bool kBool>
__global__ void __launch_bounds__(1024) segmented_kernel(gr::SegArgs a, int g, int splits, typename Op::acc_t *partials,
                                                         unsigned *counters) {
    using R = gr::Result<Kind, Op, In>;
    using W = gr::conditional_t<kBool, gr::BoolResult<R>, R>;
    gr::segmented_body<W, Op, In>(a, g, splits, partials, counters);
}

template <int Kind, class Op, class In, bool kBool> int launch_for(gr_seg_launch *L) {
    const gr::SegArgs a = {L->in->at[0].data, L->k, L->size, (const long long *)L->offsets,
                           (const gr::SegItem *)L->items, L->out[0], L->out[1], L->ddof, L->pitch};
    /* only the results of the input's dtype differ for bool: sums, counts and means share uint8's kernels */
    constexpr bool as_bool = kBool && gr::bool_valued_v<typename Op::acc_t>;
    segmented_kernel<Kind, Op, In, as_bool><<<unsigned(L->grid), unsigned(L->block), 0, (cudaStream_t)L->stream>>>(
        a, L->group, L->splits, (typename Op::acc_t *)L->partials, L->counters);
    return GR_CHECK_LAUNCH(L);
}

/* The op's functor and result kind as template arguments (mean and sum share a functor, not a result). */
template <class In, class Acc, bool kBool> int with_id(gr_seg_launch *L) {
    switch (L->op) {
#define GR_SEG_OP(E, name)                                                                                 \
    case GR_##E:                                                                                          \
        if constexpr (gr::OpOf<GR_##E, In, Acc>::valid)                                                   \
            return launch_for<gr::result_kind(GR_##E), typename gr::OpOf<GR_##E, In, Acc>::type, In, kBool>(L); \
        else                                                                                              \
            return cudaErrorInvalidValue;
        GR_OP_LIST(GR_SEG_OP)
#undef GR_SEG_OP
    default: return cudaErrorInvalidValue;
    }
}

template <class In, bool kBool> int with_acc(gr_seg_launch *L) {
    switch (L->acc) {
#define GR_SEG_ACC(E, name, ctype, bytes, is_float, is_signed, kind, lowest, highest, float_acc, nccl, format) \
    case GR_##E: return with_id<In, GR_DEVICE_TYPE(format, ctype), kBool>(L);
        GR_DTYPE_LIST(GR_SEG_ACC)
#undef GR_SEG_ACC
    default: return cudaErrorInvalidValue;
    }
}

int launch(gr_seg_launch *L) {
    if (L->grid < 1 || L->grid > 0x7fffffff) return cudaErrorInvalidConfiguration;
    if (!gr_inputs_contiguous(L->in)) return cudaErrorInvalidValue;    /* one plain input (or the items) */
    switch (L->in_dtype) {
#define GR_SEG_IN(E, name, ctype, bytes, is_float, is_signed, kind, lowest, highest, float_acc, nccl, format) \
    case GR_##E: return with_acc<GR_DEVICE_TYPE(format, ctype), GR_##E == GR_BOOL>(L);
        GR_DTYPE_LIST(GR_SEG_IN)
#undef GR_SEG_IN
    default: return cudaErrorInvalidValue;
    }
}

/* The boundaries' faults: a negative first one, a decrease, or one past n. The lowest index at fault
 * wins (atomicMin), so the message names the first. The same pass finds the longest segment, which the
 * planner shapes very uneven offsets by (gr_policy_uneven_segments): each thread keeps its largest
 * difference of neighbouring boundaries, the block combines them (block_reduce), and one thread a block
 * raises *longest (atomicMax; at most 4096 of them). Blocks of 256 threads (block_reduce's multiple of 32). */
__global__ void __launch_bounds__(256) check_kernel(const long long *offsets, u64 k, u64 n, unsigned long long *bad,
                                                    unsigned long long *longest) {
    u64 most = 0;
    for (u64 i = u64(blockIdx.x) * blockDim.x + threadIdx.x; i <= k; i += u64(gridDim.x) * blockDim.x) {
        const long long v = offsets[i], before = i > 0 ? offsets[i - 1] : 0;
        const bool fault = v < 0 || u64(v) > n || (i > 0 && v < before);
        if (fault) atomicMin(bad, i + 1);
        else if (i > 0 && u64(v) - u64(before) > most) most = u64(v) - u64(before);
    }
    most = gr::block_reduce<gr::Max<u64>>(most);
    if (threadIdx.x == 0 && most) atomicMax(longest, most);
}

int check_offsets(const int64_t *offsets, size_t k, size_t n, unsigned long long *bad, unsigned long long *longest,
                  void *stream) {
    const cudaStream_t st = (cudaStream_t)stream;
    cudaError_t e = cudaMemsetAsync(bad, 0xff, sizeof *bad, st);
    if (e == cudaSuccess) e = cudaMemsetAsync(longest, 0, sizeof *longest, st);
    if (e != cudaSuccess) return e;
    const u64 blocks = (u64(k) + 1 + 255) / 256;
    check_kernel<<<unsigned(blocks < 4096 ? blocks : 4096), 256, 0, st>>>((const long long *)offsets, k, n, bad,
                                                                          longest);
    return cudaGetLastError();
}

}  // namespace

extern "C" const gr_seg_kernel gr_segmented = {launch, check_offsets};
