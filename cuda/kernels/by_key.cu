/*
 * by_key.cu -- the device steps of a reduction by key (engine/core/by_key.c puts them together): keys
 * turned into ordered words, a stable radix sort of (key, value) pairs, the runs of equal keys and their
 * offsets, gathers, and the checks a grouped input needs. The reduction of each run is the segmented
 * kernel's (over CSR offsets), so every op, operator and determinism level of segments serves.
 *
 * Keys travel as unsigned words of their width whose unsigned order is the key's order (the sign bit
 * flipped for the signed dtypes; bool is a byte of 0 or 1): one radix sort per pair of widths -- the key's
 * and the value's, moved as opaque words -- serves every dtype. CUB does the sort (DeviceRadixSort::
 * SortPairs: stable, so each key's values keep their order and the results are the same bits every run),
 * the runs (DeviceRunLengthEncode::Encode) and the scan of their lengths (DeviceScan::ExclusiveSum).
 */
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_run_length_encode.cuh>
#include <cub/device/device_scan.cuh>

#include "../../engine/base/launch.h"
#include "../device/runs.cuh"
#include "../device/runs_fixup.cuh"
#include "../host/launch.cuh"

namespace {

using u64 = unsigned long long;

template <int B> struct WordOf;
template <> struct WordOf<1> { using type = unsigned char; };
template <> struct WordOf<2> { using type = unsigned short; };
template <> struct WordOf<4> { using type = unsigned; };
template <> struct WordOf<8> { using type = u64; };

/* f(Tag<word>) for a width of 1, 2, 4 or 8 bytes. */
template <class F> cudaError_t with_width(int bytes, F &&f) {
    switch (bytes) {
    case 1: return f(gr::Tag<WordOf<1>::type>{});
    case 2: return f(gr::Tag<WordOf<2>::type>{});
    case 4: return f(gr::Tag<WordOf<4>::type>{});
    case 8: return f(gr::Tag<WordOf<8>::type>{});
    default: return cudaErrorInvalidValue;
    }
}

unsigned blocks_for(size_t n) {
    size_t b = (n + 255) / 256;
    return unsigned(b < 65535 * 16 ? (b ? b : 1) : 65535 * 16);
}

/* Forward: (key ^ mask) - base, the key's ordered word less the smallest one; back: the inverse. */
template <class W> __global__ void flip_kernel(const W *from, W *to, size_t n, W mask, W base, bool back) {
    for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
        to[i] = back ? W(W(from[i] + base) ^ mask) : W(W(from[i] ^ mask) - base);
}

/* A key dtype's width in bytes and whether it is a signed integer, from gr.h's list (a kernel file calls no
 * function of the engine). */
#define GR_BY_KEY_WIDTH(E, name, ctype, bytes, is_float, is_signed, ...) case GR_##E: return bytes;
#define GR_BY_KEY_SIGNED(E, name, ctype, bytes, is_float, is_signed, ...) case GR_##E: return is_signed && !is_float;
int width_of(gr_dtype t) {
    switch (t) {
        GR_DTYPE_LIST(GR_BY_KEY_WIDTH)
    default: return 0;
    }
}
bool signed_integer(gr_dtype t) {
    switch (t) {
        GR_DTYPE_LIST(GR_BY_KEY_SIGNED)
    default: return false;
    }
}
#undef GR_BY_KEY_WIDTH
#undef GR_BY_KEY_SIGNED

int order_bits(const void *from, void *to, size_t n, gr_dtype t, unsigned long long base, int back, void *stream) {
    const int bytes = width_of(t);
    const bool is_signed = signed_integer(t);
    return with_width(bytes, [&](auto tag) -> cudaError_t {
        using W = typename decltype(tag)::type;
        const W mask = is_signed ? W(W(1) << (8 * sizeof(W) - 1)) : W(0);
        if (n) flip_kernel<W><<<blocks_for(n), 256, 0, (cudaStream_t)stream>>>(static_cast<const W *>(from),
                                                                             static_cast<W *>(to), n, mask, W(base),
                                                                             back != 0);
        return cudaGetLastError();
    });
}

__global__ void iota_kernel(unsigned *idx, size_t n) {
    for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
        idx[i] = unsigned(i);
}

int iota(unsigned *idx, size_t n, void *stream) {
    if (n) iota_kernel<<<blocks_for(n), 256, 0, (cudaStream_t)stream>>>(idx, n);
    return cudaGetLastError();
}

int sort_pairs(void *temp, size_t *temp_bytes, const void *keys_in, void *keys_out, const void *vals_in,
               void *vals_out, size_t n, int kbytes, int vbytes, int bits, void *stream) {
    return with_width(kbytes, [&](auto ktag) -> cudaError_t {
        using K = typename decltype(ktag)::type;
        return with_width(vbytes, [&](auto vtag) -> cudaError_t {
            using V = typename decltype(vtag)::type;
            return cub::DeviceRadixSort::SortPairs(temp, *temp_bytes, static_cast<const K *>(keys_in),
                                                   static_cast<K *>(keys_out), static_cast<const V *>(vals_in),
                                                   static_cast<V *>(vals_out), n, 0,
                                                   bits > 0 && bits < int(8 * sizeof(K)) ? bits : int(8 * sizeof(K)),
                                                   (cudaStream_t)stream);
        });
    });
}

int runs(void *temp, size_t *temp_bytes, const void *keys, void *unique, unsigned *counts, u64 *nruns, size_t n,
         int kbytes, void *stream) {
    if (n > 0x7fffffff) return cudaErrorInvalidValue;       /* CUB's run-length encoding counts in int */
    return with_width(kbytes, [&](auto tag) -> cudaError_t {
        using W = typename decltype(tag)::type;
        return cub::DeviceRunLengthEncode::Encode(temp, *temp_bytes, static_cast<const W *>(keys),
                                                  static_cast<W *>(unique), counts, nruns, int(n),
                                                  (cudaStream_t)stream);
    });
}

__global__ void last_offset_kernel(long long *offsets, size_t k, size_t n) { offsets[k] = (long long)n; }

int offsets(void *temp, size_t *temp_bytes, const unsigned *counts, long long *offsets_out, size_t k, size_t n,
            void *stream) {
    cudaError_t e = cub::DeviceScan::ExclusiveSum(temp, *temp_bytes, counts, offsets_out, k, (cudaStream_t)stream);
    if (e != cudaSuccess || !temp) return e;
    last_offset_kernel<<<1, 1, 0, (cudaStream_t)stream>>>(offsets_out, k, n);
    return cudaGetLastError();
}

template <class W> __global__ void gather_kernel(const W *in, const unsigned *perm, W *out, size_t n) {
    for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
        out[i] = in[perm[i]];
}

int gather(const void *in, const unsigned *perm, void *out, size_t n, int ebytes, void *stream) {
    return with_width(ebytes, [&](auto tag) -> cudaError_t {
        using W = typename decltype(tag)::type;
        if (n) gather_kernel<W><<<blocks_for(n), 256, 0, (cudaStream_t)stream>>>(static_cast<const W *>(in), perm,
                                                                                 static_cast<W *>(out), n);
        return cudaGetLastError();
    });
}

/* *flag |= 1 where some word is not below the next (strict: equal words count). */
template <class W> __global__ void ascending_kernel(const W *w, size_t k, unsigned *flag) {
    for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i + 1 < k; i += size_t(gridDim.x) * blockDim.x)
        if (!(w[i] < w[i + 1])) atomicOr(flag, 1u);
}

int ascending(const void *words, size_t k, int kbytes, unsigned *flag, void *stream) {
    return with_width(kbytes, [&](auto tag) -> cudaError_t {
        using W = typename decltype(tag)::type;
        if (k > 1) ascending_kernel<W><<<blocks_for(k), 256, 0, (cudaStream_t)stream>>>(static_cast<const W *>(words),
                                                                                        k, flag);
        return cudaGetLastError();
    });
}

/* idx[s], 1-based within run s, becomes the 1-based position of that element in the input: through the
 * sort's permutation where there was one. */
__global__ void global_index_kernel(long long *idx, const long long *offsets, const unsigned *perm, size_t k) {
    for (size_t s = size_t(blockIdx.x) * blockDim.x + threadIdx.x; s < k; s += size_t(gridDim.x) * blockDim.x) {
        const long long j = offsets[s] + idx[s] - 1;
        idx[s] = (perm ? (long long)perm[j] : j) + 1;
    }
}

int global_index(long long *idx, const long long *offsets_in, const unsigned *perm, size_t k, void *stream) {
    if (k) global_index_kernel<<<blocks_for(k), 256, 0, (cudaStream_t)stream>>>(idx, offsets_in, perm, k);
    return cudaGetLastError();
}

__global__ void longest_kernel(const unsigned *counts, size_t k, unsigned *out) {
    unsigned most = 0;
    for (size_t s = size_t(blockIdx.x) * blockDim.x + threadIdx.x; s < k; s += size_t(gridDim.x) * blockDim.x)
        most = counts[s] > most ? counts[s] : most;
    atomicMax(out, most);
}

int longest(const unsigned *counts, size_t k, unsigned *out, void *stream) {
    cudaError_t e = cudaMemsetAsync(out, 0, sizeof *out, (cudaStream_t)stream);
    if (e == cudaSuccess && k) longest_kernel<<<blocks_for(k), 256, 0, (cudaStream_t)stream>>>(counts, k, out);
    return e != cudaSuccess ? e : cudaGetLastError();
}

/* The pass over runs (runs.cuh) and its fixup (runs_fixup.cuh), for Items = 8 or 16 a thread. */
template <class W, class Op, class In, int Items>
__global__ void __launch_bounds__(gr::kRunThreads) runs_kernel(gr::RunArgs a) {
    gr::runs_body<W, Op, In, Items>(a);
}

template <class W, class Op, int Items> __global__ void __launch_bounds__(gr::kRunThreads) runs_fixup_kernel(gr::RunArgs a) {
    gr::runs_fixup_body<W, Op, Items>(a);
}

/* The ops a pass over runs takes: every op whose load does not want the element's index. */
static_assert(gr::kRunTileMin == GR_RUN_TILE, "the engine sizes the scratch for the smallest tile");

constexpr unsigned kRunOps = GR_OPS_ALL & ~(GR_OP_BIT(GR_ARGMIN) | GR_OP_BIT(GR_ARGMAX));

template <int Items, class W, class Op, class In> cudaError_t launch_runs(gr_runs_launch *L, const gr::RunArgs &a) {
    const cudaStream_t st = (cudaStream_t)L->stream;
    const u64 tile = u64(gr::kRunThreads) * Items, tiles = (L->n + tile - 1) / tile;
    /* the header and the look-back words, which lie together at the scratch's start */
    cudaError_t e = cudaMemsetAsync(L->scratch, 0, sizeof(gr_runs_header) + (tiles + 1) * 8, st);
    if (e != cudaSuccess) return e;
    runs_kernel<W, Op, In, Items><<<unsigned(tiles), gr::kRunThreads, 0, st>>>(a);
    e = GR_CHECK_LAUNCH(L);
    if (e != cudaSuccess) return e;
    const u64 groups = (tiles + gr::kRunThreads - 1) / gr::kRunThreads;
    runs_fixup_kernel<W, Op, Items><<<unsigned(groups < 1024 ? groups : 1024), gr::kRunThreads, 0, st>>>(a);
    return GR_CHECK_LAUNCH(L);
}

int reduce_runs(gr_runs_launch *L) {
    if (L->n == 0 || (L->n + GR_RUN_TILE - 1) / GR_RUN_TILE > 0x7fffffff || (L->items != 8 && L->items != 16))
        return cudaErrorInvalidValue;
    /* the answer in the scratch's header, the kernels' own scratch after it */
    gr_runs_header *head = static_cast<gr_runs_header *>(L->scratch);
    const gr::RunArgs a = {L->keys, L->kbytes, L->flip, L->values, L->n, L->aligned != 0, L->keys_out, L->out[0],
                           L->out[1], L->capacity, L->ddof, head + 1, L->acc_bytes, &head->runs, &head->disorder};
    return gr::with_writer<kRunOps>(L->in_dtype, L->acc, L->op, [&](auto w_tag, auto op, auto in_tag) -> cudaError_t {
        using W = typename decltype(w_tag)::type;
        using Op = decltype(op);
        using In = typename decltype(in_tag)::type;
        if (L->acc_bytes < sizeof(typename Op::acc_t)) return cudaErrorInvalidValue;
        return L->items == 16 ? launch_runs<16, W, Op, In>(L, a) : launch_runs<8, W, Op, In>(L, a);
    });
}

}  // namespace

extern "C" const gr_by_key_kernel gr_by_key_gpu = {order_bits, iota, sort_pairs, runs, offsets, gather, ascending,
                                                   global_index, longest, reduce_runs};
