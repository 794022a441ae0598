/*
 * exact.cu -- the kernels of opts.determinism = "gpu_to_gpu": exact sums, the same for every launch shape.
 *
 * Each thread keeps an error-free expansion of K doubles per sum (K = 2 for float32, float16 and bfloat16
 * input, whose elements are float32 values, 3 for float64):
 * an element x goes into e[0] by TwoSum (s = e[0] + x and the exact error r of that addition, so that
 * s + r = e[0] + x exactly), the error into e[1] the same way, and so on; what is left after e[K-1] --
 * rare on ordinary data: a float32 element almost always adds to e[0] exactly -- goes to the block's
 * long accumulator in shared memory (engine/ops/exact_acc.h: 64-bit words, digits added with atomicAdd,
 * which is exact and order-free). TwoSum is written with __dadd_rn/__dsub_rn so that nvcc can neither
 * contract nor reorder it. An addition that overflows (only near the largest double) leaves the
 * expansion alone and sends its operand to the accumulator instead; NaN and infinities only set flags.
 * At the end each warp merges its lanes' expansions (exactly, by the same TwoSums) and its first lane adds
 * the components to the block's accumulator; the block moves its carries up (two parallel steps leave each
 * word within [-1, 2^32]) and adds its words to the one accumulator in global memory. The sum of squares takes float32 squares whole (exact in a double) and
 * float64 squares as the two halves of an exact product (gr_x_square where it would underflow or
 * overflow). Nothing here depends on the order of the additions: every grid, block, GPU and the host
 * (engine/ops/exact.c) arrive at the same digits, which engine/core/exact_pass.c rounds with exact_acc.h's code.
 *
 * The segmented kernel gives each segment to one block in turn (a grid-stride over segments) and rounds
 * its result on the device with the same header; a segment longer than 2^30 elements is folded in rounds
 * with a carry step between them, as the plain kernel's inputs are split into launches (exact_pass.c).
 */
#include <cuda_runtime.h>

#include "../../engine/ops/exact_acc.h"
#include "../../engine/base/launch.h"
#include "../host/launch.cuh"
#include "../device/thread_load.cuh"

namespace gr {
namespace {

/* A term v 2^e2 added to the words w with 64-bit atomics (shared or global). */
__device__ __forceinline__ void atomic_term(int64_t *w, double v, int e2) {
    if (v == 0.0) return;
    int k;
    int64_t d[3];
    const int64_t sign = gr_x_split(v, e2, &k, d);
#pragma unroll
    for (int j = 0; j < 3; j++)
        if (d[j]) atomicAdd(reinterpret_cast<unsigned long long *>(&w[k + j]), (unsigned long long)(sign * d[j]));
}

__device__ __forceinline__ bool finite(double x) { return __dsub_rn(x, x) == 0.0; }

/* s = a + b rounded, and r the exact error: s + r = a + b (Knuth's TwoSum, six operations). */
__device__ __forceinline__ double two_sum(double a, double b, double &r) {
    const double s = __dadd_rn(a, b);
    const double bb = __dsub_rn(s, a);
    r = __dadd_rn(__dsub_rn(a, __dsub_rn(s, bb)), __dsub_rn(b, bb));
    return s;
}

/* One thread's expansion of K doubles; e[0] starts at -0.0 and stays -0.0 only while every element was
 * -0.0 (a sum of other values can never give -0.0 in round-to-nearest), which is the sum's sign rule. */
template <int K> struct Expansion {
    double e[K];

    __device__ __forceinline__ void init() {
        e[0] = -0.0;
#pragma unroll
        for (int i = 1; i < K; i++) e[i] = 0.0;
    }

    /* x finite or not; flags and the accumulator w take what the expansion cannot. */
    __device__ __forceinline__ void add(double x, int64_t *w, unsigned long long &flags, unsigned long long &nans,
                                        bool skip_nan) {
        double r;
        double s = two_sum(e[0], x, r);
        if (r == 0.0) {                 /* the common case; a NaN or inf makes r NaN and lands below */
            e[0] = s;
            return;
        }
        if (!finite(x)) {
            if (x != x && skip_nan) nans++;
            else flags |= gr_x_flag_of(x);
            return;
        }
        if (!finite(s) || !finite(r)) { /* e[0] + x overflowed: x goes to the accumulator whole */
            atomic_term(w, x, 0);
            return;
        }
        e[0] = s;
#pragma unroll
        for (int i = 1; i < K; i++) {
            double r2;
            s = two_sum(e[i], r, r2);
            if (!finite(s) || !finite(r2)) {
                atomic_term(w, r, 0);
                return;
            }
            e[i] = s;
            r = r2;
            if (r == 0.0) return;
        }
        atomic_term(w, r, 0);
    }

    /* Lanes below `delta` take the expansion of the lane `delta` above, exactly (what add cannot hold goes
     * to w); the others only lend theirs, which is then taken. Components past the first that are zero are
     * left out: a +0.0 would end e[0]'s -0.0. Every lane of the warp calls this. */
    __device__ __forceinline__ void merge_down(unsigned delta, int64_t *w, unsigned long long &flags) {
        double x[K];
#pragma unroll
        for (int i = 0; i < K; i++) x[i] = __shfl_down_sync(0xffffffffu, e[i], delta);
        if ((threadIdx.x & 31) >= delta) return;
        unsigned long long none = 0;
#pragma unroll
        for (int i = 0; i < K; i++)
            if (i == 0 || x[i] != 0.0) add(x[i], w, flags, none, false);
    }

    __device__ __forceinline__ void flush(int64_t *w) const {
#pragma unroll
        for (int i = 0; i < K; i++) atomic_term(w, e[i], 0);
    }

    __device__ __forceinline__ bool all_neg_zero() const {
        return __double_as_longlong(e[0]) == (long long)0x8000000000000000ull;
    }
};

/* What a thread folds: S (the elements, or with ABS their absolute values: asum), Q (their squares) or
 * both, each in its own expansion. */
template <class In, int SUMS, bool SKIP, bool ABS> struct ExactThread {
    static constexpr int K = sizeof(In) <= 4 ? 2 : 3;     /* the 2-byte floats are float32 values */
    Expansion<K> s, q;
    unsigned long long flags = 0, nans = 0;
    int64_t *ws, *wq;                   /* the block's words of S and Q */

    __device__ __forceinline__ ExactThread(int64_t *ws_, int64_t *wq_) : ws(ws_), wq(wq_) {
        s.init();
        q.init();
    }

    __device__ __forceinline__ void square(double x) {
        if constexpr (sizeof(In) <= 4) {
            q.add(__dmul_rn(x, x), wq, flags, nans, false);     /* at most 48 bits: exact */
        } else {
            const double a = fabs(x);
            if (a >= 0x1p-480 && a <= 0x1p500) {                /* hi + lo exact, nothing underflows */
                const double hi = __dmul_rn(x, x);
                q.add(hi, wq, flags, nans, false);
                q.add(__fma_rn(x, x, -hi), wq, flags, nans, false);
            } else if (!finite(x)) {
                flags |= x != x ? GR_X_NAN : GR_X_PINF;
            } else if (x != 0.0) {
                double hi, lo;
                int e2;
                gr_x_square(x, &hi, &lo, &e2);
                atomic_term(wq, hi, e2);
                atomic_term(wq, lo, e2);
            }
        }
    }

    /* The exact product x y into S (gr.dot), as exact.c's add_product adds it on the host. Elements of
     * at most 4 bytes multiply exactly in a double; float64 ones as hi + lo, or where that would underflow
     * or overflow as gr_x_product's scaled halves straight into the words. */
    __device__ __forceinline__ void product(double x, double y) {
        const double p = __dmul_rn(x, y);
        if constexpr (sizeof(In) <= 4) {
            s.add(p, ws, flags, nans, false);
        } else {
            const double a = fabs(p);
            if (a >= 0x1p-960 && a <= 0x1p1000) {               /* hi + lo exact, nothing underflows */
                s.add(p, ws, flags, nans, false);
                const double lo = __fma_rn(x, y, -p);
                if (lo != 0.0) s.add(lo, ws, flags, nans, false);
            } else if (!finite(x) || !finite(y) || x == 0.0 || y == 0.0) {
                s.add(p, ws, flags, nans, false);                /* NaN, +-inf or a signed zero */
            } else {
                double hi, lo;
                int e2;
                gr_x_product(x, y, &hi, &lo, &e2);
                atomic_term(ws, hi, e2);
                atomic_term(ws, lo, e2);
                flags |= GR_X_NOT_NEG_ZERO;
            }
        }
    }

    __device__ __forceinline__ void fold(In v) {
        const double x = ABS ? fabs(double(v)) : double(v);    /* fabs: -0.0 gives +0.0, NaN stays NaN */
        if constexpr ((SUMS & 1) != 0) s.add(x, ws, flags, nans, SKIP);
        if constexpr ((SUMS & 2) != 0) square(x);
    }

    /* The warp's expansions merged into lane 0's, which alone adds its terms to the block's words: every
     * thread's terms land on the same few words, and a block's worth of atomics on one shared word took
     * 57 us of a 410 us float32 sum of 2^28 (H100), beside 15 us merged. Whole warps call this. */
    __device__ __forceinline__ void finish() {
#pragma unroll
        for (unsigned d = 16; d > 0; d >>= 1) {
            if constexpr ((SUMS & 1) != 0) s.merge_down(d, ws, flags);
            if constexpr ((SUMS & 2) != 0) q.merge_down(d, wq, flags);
        }
        if ((threadIdx.x & 31) != 0) return;
        if constexpr ((SUMS & 1) != 0) {
            s.flush(ws);
            if (!s.all_neg_zero()) flags |= GR_X_NOT_NEG_ZERO;
        }
        if constexpr ((SUMS & 2) != 0) q.flush(wq);
    }
};

/* A thread's elements of in[0, n) in a grid-stride loop over `threads` threads: 16-byte vectors, FLIGHT in
 * flight, the unaligned head and the tail one by one (thread_load.cuh's layout). */
template <int FLIGHT = 2, class In, class F>
__device__ __forceinline__ void each_element(const In *__restrict__ in, size_t n, size_t tid, size_t threads, F &&f) {
    using V = Vec16<In>;
    constexpr int kV = V::kCount;
    size_t head = ((16 - (reinterpret_cast<uptr>(in) & 15)) & 15) / sizeof(In);
    if (head > n) head = n;
    if (tid < head) f(in[tid]);
    const V *vin = reinterpret_cast<const V *>(in + head);
    const size_t nvec = (n - head) / kV;
    size_t i = tid;
    for (; i + (FLIGHT - 1) * threads < nvec; i += FLIGHT * threads) {
        V a[FLIGHT];
#pragma unroll
        for (int u = 0; u < FLIGHT; u++) a[u] = vin[i + u * threads];
#pragma unroll
        for (int u = 0; u < FLIGHT; u++)
#pragma unroll
            for (int j = 0; j < kV; j++) f(a[u].v[j]);
    }
    for (; i < nvec; i += threads) {
        const V a = vin[i];
#pragma unroll
        for (int j = 0; j < kV; j++) f(a.v[j]);
    }
    const size_t tail = head + nvec * kV;
    if (tid < n - tail) f(in[tail + tid]);
}

/* The same over two inputs of one dtype, element i of each together: vectors where both share their
 * offset from a 16-byte boundary, else one element at a time. */
template <class In, class F>
__device__ __forceinline__ void each_pair(const In *__restrict__ x, const In *__restrict__ y, size_t n, size_t tid,
                                          size_t threads, F &&f) {
    using V = Vec16<In>;
    constexpr int kV = V::kCount;
    if ((reinterpret_cast<uptr>(x) & 15) != (reinterpret_cast<uptr>(y) & 15)) {
        for (size_t i = tid; i < n; i += threads) f(x[i], y[i]);
        return;
    }
    size_t head = ((16 - (reinterpret_cast<uptr>(x) & 15)) & 15) / sizeof(In);
    if (head > n) head = n;
    if (tid < head) f(x[tid], y[tid]);
    const V *vx = reinterpret_cast<const V *>(x + head), *vy = reinterpret_cast<const V *>(y + head);
    const size_t nvec = (n - head) / kV;
    for (size_t i = tid; i < nvec; i += threads) {
        const V a = vx[i], b = vy[i];
#pragma unroll
        for (int j = 0; j < kV; j++) f(a.v[j], b.v[j]);
    }
    const size_t tail = head + nvec * kV;
    if (tid < n - tail) f(x[tail + tid], y[tail + tid]);
}

constexpr int kWords = 2 * GR_XDIGITS;   /* a block's words: S then Q */

/* The block's words zeroed, with its flags. */
__device__ __forceinline__ void clear_block(int64_t *w, unsigned long long *flags) {
    for (int k = threadIdx.x; k < kWords; k += blockDim.x) w[k] = 0;
    if (threadIdx.x == 0) flags[0] = flags[1] = 0;
    __syncthreads();
}

/* Two parallel carry steps over each accumulator (top words keep theirs): every word ends within
 * [-1, 2^32], so 2^30 blocks can add theirs to a global word without overflow. */
__device__ __forceinline__ void carry_block(int64_t *w) {
    for (int step = 0; step < 2; step++) {
        __syncthreads();
        int64_t carry[(kWords + 31) / 32];
        int c = 0;
        for (int k = threadIdx.x; k < kWords; k += blockDim.x, c++) {
            const bool top = k % GR_XDIGITS == GR_XDIGITS - 1;
            carry[c] = top ? 0 : w[k] >> 32;
            w[k] -= carry[c] * ((int64_t)1 << 32);
        }
        __syncthreads();
        c = 0;
        for (int k = threadIdx.x; k < kWords; k += blockDim.x, c++)
            if (carry[c]) atomicAdd(reinterpret_cast<unsigned long long *>(&w[k + 1]), (unsigned long long)carry[c]);
    }
    __syncthreads();
}

/* Four vectors in flight a thread for float32 and float64, where each_element's default is two: 95-96% of
 * the read kernel against 91-95% (2^28, H100; experiments/tuning/exact_probe.lua). The 2-byte and FP8
 * kernels keep two: at four they spill 48-96 bytes a thread (32 registers), unmeasured. */
template <class In, int SUMS, bool SKIP, bool ABS>
__global__ void __launch_bounds__(1024) exact_kernel(const In *__restrict__ in, size_t n, gr_xsum *out) {
    __shared__ int64_t w[kWords];
    __shared__ unsigned long long block_flags[2];       /* flags, NaN elements skipped */
    clear_block(w, block_flags);
    ExactThread<In, SUMS, SKIP, ABS> t(w, w + GR_XDIGITS);
    each_element<sizeof(In) >= 4 ? 4 : 2>(in, n, size_t(blockIdx.x) * blockDim.x + threadIdx.x,
                                          size_t(gridDim.x) * blockDim.x, [&](In v) { t.fold(v); });
    t.finish();
    if (t.flags) atomicOr(&block_flags[0], t.flags);
    if (t.nans) atomicAdd(&block_flags[1], t.nans);
    carry_block(w);
    for (int k = threadIdx.x; k < kWords; k += blockDim.x)
        if (w[k]) atomicAdd(reinterpret_cast<unsigned long long *>(&out->w[0][0] + k), (unsigned long long)w[k]);
    if (threadIdx.x == 0) {
        if (block_flags[0]) atomicOr(reinterpret_cast<unsigned long long *>(&out->flags), block_flags[0]);
        if (block_flags[1]) atomicAdd(reinterpret_cast<unsigned long long *>(&out->nans), block_flags[1]);
    }
}

/* The exact dot product of x and y: every block's products into its words, as exact_kernel. */
template <class In>
__global__ void __launch_bounds__(1024) exact_dot_kernel(const In *__restrict__ x, const In *__restrict__ y, size_t n,
                                                         gr_xsum *out) {
    __shared__ int64_t w[kWords];
    __shared__ unsigned long long block_flags[2];
    clear_block(w, block_flags);
    ExactThread<In, 1, false, false> t(w, w + GR_XDIGITS);
    each_pair(x, y, n, size_t(blockIdx.x) * blockDim.x + threadIdx.x, size_t(gridDim.x) * blockDim.x,
              [&](In a, In b) { t.product(double(a), double(b)); });
    t.finish();
    if (t.flags) atomicOr(&block_flags[0], t.flags);
    carry_block(w);
    for (int k = threadIdx.x; k < GR_XDIGITS; k += blockDim.x)
        if (w[k]) atomicAdd(reinterpret_cast<unsigned long long *>(&out->w[0][0] + k), (unsigned long long)w[k]);
    if (threadIdx.x == 0 && block_flags[0])
        atomicOr(reinterpret_cast<unsigned long long *>(&out->flags), block_flags[0]);
}

/* One block per segment in turn: its sums in shared memory, rounded by thread 0 with exact_acc.h. */
template <class In, int SUMS, bool SKIP, bool ABS, class Out>
__global__ void __launch_bounds__(256) exact_segments_kernel(const In *__restrict__ in, size_t k, size_t size,
                                                             const int64_t *__restrict__ offsets, Out *out, int op,
                                                             int ddof, size_t round) {
    __shared__ gr_xsum acc;
    for (size_t seg = blockIdx.x; seg < k; seg += gridDim.x) {
        clear_block(&acc.w[0][0], reinterpret_cast<unsigned long long *>(&acc.flags));
        const size_t lo = offsets ? size_t(offsets[seg]) : seg * size;
        const size_t hi = offsets ? size_t(offsets[seg + 1]) : lo + size;
        ExactThread<In, SUMS, SKIP, ABS> t(acc.w[0], acc.w[1]);
        /* a long segment in rounds of `round` elements with a carry step between them: a word takes at
         * most 2^31 additions of a digit before it could overflow */
        for (size_t c = lo; c < hi; c += round) {
            each_element(in + c, hi - c < round ? hi - c : round, threadIdx.x, blockDim.x, [&](In v) { t.fold(v); });
            if (hi - c > round) carry_block(&acc.w[0][0]);
        }
        t.finish();
        if (t.flags) atomicOr(reinterpret_cast<unsigned long long *>(&acc.flags), t.flags);
        if (t.nans) atomicAdd(reinterpret_cast<unsigned long long *>(&acc.nans), t.nans);
        __syncthreads();
        if (threadIdx.x == 0) out[seg] = Out(gr_x_finish(&acc, op, hi - lo, ddof, sizeof(Out) == 4));
        __syncthreads();
    }
}

/* gr.dot per segment: the exact products of segment s of x and of y (the same elements of each), one
 * block per segment in turn, rounded on the device as exact_segments_kernel rounds a sum. */
template <class In, class Out>
__global__ void __launch_bounds__(256) exact_dot_segments_kernel(const In *__restrict__ x, const In *__restrict__ y,
                                                                 size_t k, size_t size,
                                                                 const int64_t *__restrict__ offsets, Out *out,
                                                                 size_t round) {
    __shared__ gr_xsum acc;
    for (size_t seg = blockIdx.x; seg < k; seg += gridDim.x) {
        clear_block(&acc.w[0][0], reinterpret_cast<unsigned long long *>(&acc.flags));
        const size_t lo = offsets ? size_t(offsets[seg]) : seg * size;
        const size_t hi = offsets ? size_t(offsets[seg + 1]) : lo + size;
        ExactThread<In, 1, false, false> t(acc.w[0], acc.w[1]);
        for (size_t c = lo; c < hi; c += round) {
            each_pair(x + c, y + c, hi - c < round ? hi - c : round, threadIdx.x, blockDim.x,
                      [&](In a, In b) { t.product(double(a), double(b)); });
            if (hi - c > round) carry_block(&acc.w[0][0]);
        }
        t.finish();
        if (t.flags) atomicOr(reinterpret_cast<unsigned long long *>(&acc.flags), t.flags);
        __syncthreads();
        if (threadIdx.x == 0) out[seg] = Out(gr_x_finish(&acc, GR_SUM, hi - lo, 0, sizeof(Out) == 4));
        __syncthreads();
    }
}

/* The input dtype and the op's sums as template arguments: f(Tag<In>, constant SUMS, constant SKIP,
 * constant ABS). */
template <class F> cudaError_t with_exact(const gr_exact_launch *L, F &&f) {
    const int sums = gr_x_sums_of(L->op);
    const bool skip = gr_x_skips_nan(L->op), absolute = gr_x_takes_abs(L->op);
    constexpr constant<bool, true> yes{};
    constexpr constant<bool, false> no{};
    auto by_sums = [&](auto in_tag) -> cudaError_t {
        switch (sums) {
        case 1: return skip ? f(in_tag, constant<int, 1>{}, yes, no)
                     : absolute ? f(in_tag, constant<int, 1>{}, no, yes) : f(in_tag, constant<int, 1>{}, no, no);
        case 2: return f(in_tag, constant<int, 2>{}, no, no);
        case 3: return f(in_tag, constant<int, 3>{}, no, no);
        default: return cudaErrorInvalidValue;
        }
    };
    switch (L->in_dtype) {
    case GR_FLOAT32: return by_sums(Tag<float>{});
    case GR_FLOAT64: return by_sums(Tag<double>{});
    /* widened exactly on load (small_float.cuh), as exact.c's read_of reads them on the host */
    case GR_FLOAT16: return by_sums(Tag<f16>{});
    case GR_BFLOAT16: return by_sums(Tag<bf16>{});
    case GR_FLOAT8_E4M3: return by_sums(Tag<e4m3>{});
    case GR_FLOAT8_E5M2: return by_sums(Tag<e5m2>{});
    default: return cudaErrorInvalidValue;
    }
}

/* f(Tag<In>) for a float dtype's device type; an invalid value for the others. */
template <class F> cudaError_t with_float_input(gr_dtype t, F &&f) {
    switch (t) {
    case GR_FLOAT32: return f(Tag<float>{});
    case GR_FLOAT64: return f(Tag<double>{});
    case GR_FLOAT16: return f(Tag<f16>{});
    case GR_BFLOAT16: return f(Tag<bf16>{});
    case GR_FLOAT8_E4M3: return f(Tag<e4m3>{});
    case GR_FLOAT8_E5M2: return f(Tag<e5m2>{});
    default: return cudaErrorInvalidValue;
    }
}

/* gr.dot's launch: two contiguous 1-D inputs of one dtype, summed. */
bool dot_pair(const gr_exact_launch *L) {
    const gr_inputs *in = L->in;
    return in->count == 2 && in->at[0].dtype == in->at[1].dtype && in->at[0].ndim == 1 && in->at[1].ndim == 1 &&
           in->at[0].strides[0] == 1 && in->at[1].strides[0] == 1 && L->op == GR_SUM;
}

/* Two contiguous 1-D inputs of one float dtype, n elements each: the exact dot product into L->sums. */
int launch_exact_dot(gr_exact_launch *L) {
    const gr_inputs *in = L->in;
    if (!dot_pair(L)) return cudaErrorInvalidValue;
    auto go = [&](auto in_tag) -> cudaError_t {
        using In = typename decltype(in_tag)::type;
        exact_dot_kernel<In><<<unsigned(L->grid), L->block, 0, (cudaStream_t)L->stream>>>(
            static_cast<const In *>(in->at[0].data), static_cast<const In *>(in->at[1].data), L->n, (gr_xsum *)L->sums);
        return GR_CHECK_LAUNCH(L);
    };
    return with_float_input(L->in_dtype, go);
}

int launch_exact(gr_exact_launch *L) {
    if (!grid_fits(L->grid) || L->block < 32 || L->block > 1024) return cudaErrorInvalidConfiguration;
    if (L->in->count == 2) return launch_exact_dot(L);                 /* gr.dot: the products */
    if (!gr_inputs_contiguous(L->in)) return cudaErrorInvalidValue;    /* one plain input */
    return with_exact(L, [&](auto in_tag, auto sums, auto skip, auto absolute) {
        using In = typename decltype(in_tag)::type;
        exact_kernel<In, decltype(sums)::value, decltype(skip)::value, decltype(absolute)::value>
            <<<unsigned(L->grid), L->block, 0, (cudaStream_t)L->stream>>>(first_input<In>(L), L->n, (gr_xsum *)L->sums);
        return GR_CHECK_LAUNCH(L);
    });
}

/* gr.dot per segment: two contiguous inputs of one float dtype (launch_exact_dot's checks). */
int launch_exact_dot_segments(gr_exact_launch *L) {
    const gr_inputs *in = L->in;
    if (!dot_pair(L)) return cudaErrorInvalidValue;
    auto go = [&](auto in_tag) -> cudaError_t {
        using In = typename decltype(in_tag)::type;
        const In *x = static_cast<const In *>(in->at[0].data), *y = static_cast<const In *>(in->at[1].data);
        const cudaStream_t stream = (cudaStream_t)L->stream;
        if (L->out_dtype == GR_FLOAT32)
            exact_dot_segments_kernel<In, float><<<unsigned(L->grid), 256, 0, stream>>>(
                x, y, L->k, L->size, L->offsets, (float *)L->out, L->round / 2);
        else
            exact_dot_segments_kernel<In, double><<<unsigned(L->grid), 256, 0, stream>>>(
                x, y, L->k, L->size, L->offsets, (double *)L->out, L->round / 2);
        return GR_CHECK_LAUNCH(L);
    };
    return with_float_input(L->in_dtype, go);
}

int launch_exact_segments(gr_exact_launch *L) {
    if (!grid_fits(L->grid) || L->block != 256 || L->round == 0 || L->round % 16 || L->round > (size_t(1) << 30))
        return cudaErrorInvalidConfiguration;
    if (L->in->count == 2) return launch_exact_dot_segments(L);       /* gr.dot: the products */
    if (!gr_inputs_contiguous(L->in)) return cudaErrorInvalidValue;    /* one plain input */
    return with_exact(L, [&](auto in_tag, auto sums, auto skip, auto absolute) {
        using In = typename decltype(in_tag)::type;
        constexpr int S = decltype(sums)::value;
        constexpr bool N = decltype(skip)::value, A = decltype(absolute)::value;
        const cudaStream_t stream = (cudaStream_t)L->stream;
        if (L->out_dtype == GR_FLOAT32)
            exact_segments_kernel<In, S, N, A, float><<<unsigned(L->grid), 256, 0, stream>>>(
                first_input<In>(L), L->k, L->size, L->offsets, (float *)L->out, int(L->op), L->ddof, L->round);
        else
            exact_segments_kernel<In, S, N, A, double><<<unsigned(L->grid), 256, 0, stream>>>(
                first_input<In>(L), L->k, L->size, L->offsets, (double *)L->out, int(L->op), L->ddof, L->round);
        return GR_CHECK_LAUNCH(L);
    });
}

}  // namespace
}  // namespace gr

extern "C" const gr_exact_kernel gr_exact_gpu = {gr::launch_exact, gr::launch_exact_segments};
