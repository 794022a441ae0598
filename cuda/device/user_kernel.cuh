/*
 * user_kernel.cuh -- what a user kernel (gr.kernel, engine/user/kernel.c) may use of the engine's device
 * code: the stable surface, in one include. NVRTC-clean (core.cuh): embedded in the module, and
 * included by every user kernel's generated source before the user's text.
 *
 * A user kernel is a device function template the engine calls from its own kernels (the generated
 * gr_op_main and gr_op_partials, engine/user/kernel_source.c):
 *
 *     template <class Op, class In>
 *     __device__ typename Op::acc_t NAME(const In *in, size_t n, unsigned long long first);
 *
 * Every thread of every block calls it; it returns the block's value in thread 0 (the other threads'
 * values are not read), and the engine's epilogue makes that a partial or, in the single finish, lets the
 * last block combine the partials. The blocks together must take each of in[0, n) exactly once, for
 * any grid of at least one block and any block size of the kernel's range: a grid-stride loop does.
 * `first` is the index of in[0] among the reduction's elements (argmin and argmax return it). In a pass
 * over partials the engine calls the same function with Op = AccInput<op> and In = the accumulator
 * (a struct for argmin, var, ...: not vectorizable_v), and first = 0.
 *
 * Stable (documented in docs/api.md, "User kernels"; kept as they are, or changed with a note there):
 *   Op::acc_t, Op::identity(), Op::combine(a, b)    the reduction (ops.cuh's functors, or an operator's)
 *   load_at<Op>(x, i)                  an element x with 0-based index i as an accumulator
 *   warp_reduce<Op>(v), block_reduce<Op>(v)        lane 0 / thread 0 gets the warp's / block's value
 *   shfl_down(v, d), shfl_xor(v, m)    values of any accumulator type across a warp
 *   thread_accumulate<Op, In, UNROLL>(in, n, first) the catalogue's grid-stride loop of 16-byte loads
 *   Vec16<In>, vectorizable_v<In>, fold_vec<Op, In>(acc, vec, i)   a 16-byte vector and its fold
 *   head_elements(in, n)               the elements before in's first 16-byte boundary (below)
 *   limits<T>, is_float_v<T>, u64, kFullMask       types and facts
 * Everything else in the headers is the engine's and may change.
 */
#pragma once

#include "core.cuh"
#include "epilogue.cuh"
#include "ops.cuh"
#include "thread_load.cuh"
#include "warp_block.cuh"

namespace gr {

/* How many elements of in[0, n) come before the first 16-byte boundary: a slice may start anywhere,
 * and a vector loop starts after them (take them one at a time). */
template <class In> GR_DEV size_t head_elements(const In *in, size_t n) {
    const size_t head = ((16 - (reinterpret_cast<uptr>(in) & 15)) & 15) / sizeof(In);
    return head < n ? head : n;
}

}  // namespace gr
