/*
 * inputs.cuh -- the pieces of a user operator that reads several inputs (gr.operator's `inputs`), which
 * the generated source (engine/user/operator_source.c) puts together around its own gr_op_inputs: the
 * typed pointers of the inputs, with
 *   I::kRun                      the elements of a run (16 bytes of the narrowest input, up to 8)
 *   in.head()                    the elements before input 0's first run boundary
 *   in.aligned(j)                whether every input's element j starts on its run boundary
 *   in.load(j) / in.fold(acc, r, i)   a run of each input from element j, and its elements mapped and
 *                                folded in order (the first with index i)
 *   in.at(j, i)                  element j of each input mapped (index i)
 * The whole-buffer loop has warp_shuffle's shape (as gr.dot's kernel, cuda/kernels/dot.cu): a grid-stride
 * loop over runs, two runs of every input in flight, each into its own accumulator. Inputs whose offsets
 * from their run boundaries disagree (slices of different parity) are read one element at a time. The
 * combination order depends only on n and the launch shape. NVRTC-clean.
 */
#pragma once

#include "segmented.cuh"

namespace gr {

/* The inputs' addresses as a kernel argument: launch.h's GR_MAX_INPUTS of them (the unused ones NULL). */
struct InputPtrs {
    const void *p[8];
};

/* E elements of T, aligned as one load of them (up to 16 bytes) wants. */
template <class T, int E> struct alignas(E * sizeof(T) >= 16 ? 16 : E * sizeof(T)) Run {
    T v[E];
};

template <int E, class T> GR_DEV Run<T, E> load_run(const T *p) { return *reinterpret_cast<const Run<T, E> *>(p); }

template <int E, class T> GR_DEV bool run_aligned(const T *p) {
    return reinterpret_cast<uptr>(p) % alignof(Run<T, E>) == 0;
}

/* The elements before p's first run boundary. */
template <int E, class T> GR_DEV u64 run_head(const T *p) {
    constexpr uptr kAlign = alignof(Run<T, E>);
    return u64((kAlign - reinterpret_cast<uptr>(p) % kAlign) % kAlign / sizeof(T));
}

/* A thread's fold of elements [0, n) of the inputs, element j with index first + j. */
template <class Op, class I>
GR_DEV typename Op::acc_t thread_accumulate_inputs(const I &in, size_t n, u64 first) {
    using Acc = typename Op::acc_t;
    constexpr int kRun = I::kRun;
    const size_t tid = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
    const size_t threads = size_t(gridDim.x) * blockDim.x;
    Acc acc0 = Op::identity(), acc1 = Op::identity();
    size_t head = in.head();
    if (head > n) head = n;
    if (!in.aligned(head)) {
        for (size_t j = tid; j < n; j += threads) acc0 = Op::combine(acc0, in.at(j, first + j));
        return acc0;
    }
    if (tid < head) acc0 = Op::combine(acc0, in.at(tid, first + tid));
    const size_t runs = (n - head) / kRun;
    size_t r = tid;
    for (; r + threads < runs; r += 2 * threads) {
        const size_t j0 = head + r * kRun, j1 = head + (r + threads) * kRun;
        const auto a = in.load(j0);
        const auto b = in.load(j1);
        acc0 = in.fold(acc0, a, first + j0);
        acc1 = in.fold(acc1, b, first + j1);
    }
    if (r < runs) acc0 = in.fold(acc0, in.load(head + r * kRun), first + head + r * kRun);
    const size_t tail = head + runs * kRun;
    if (tid < n - tail) acc0 = Op::combine(acc0, in.at(tail + tid, first + tail + tid));
    return Op::combine(acc0, acc1);
}

/* walk_segments' reader (segmented.cuh) of several inputs: segment s is the same elements of each, where
 * SegArgs says (a size and pitch, or offsets; no items); a lane folds its elements one at a time, index j
 * counting from the segment's start. */
template <class Op, class I> struct InputsSegReader {
    struct span_t {
        u64 start, n;
    };
    static constexpr u64 kUnit = 1;
    const SegArgs *a;
    I in;
    GR_DEV span_t span(u64 s) const {
        if (a->size) return {s * (a->pitch ? a->pitch : a->size), a->size};
        const long long lo = a->offsets[s], hi = a->offsets[s + 1];
        return {u64(lo), u64(hi - lo)};
    }
    GR_DEV typename Op::acc_t share(const span_t &sp, u64 lo, u64 hi, unsigned lane, unsigned lanes) const {
        typename Op::acc_t acc = Op::identity();
        for (u64 j = lo + lane; j < hi; j += lanes) acc = Op::combine(acc, in.at(sp.start + j, j));
        return acc;
    }
};

}  // namespace gr
