--- A vectorised two-stage kernel for the lab (lua5.4 experiments/sweep.lua --kernels
-- experiments/kernels/two_stage.lua), and a worked example of gr.kernel (README.md in this folder walks
-- through it).
--
-- Stage 1: each thread folds its grid-stride share of the input in 16-byte vectors with four loads in
-- flight, each into its own accumulator (four independent chains: the loads of one round are all issued
-- before any is folded). Stage 2: the block's values meet -- shuffles within each warp, then warp 0 over
-- the warps' values (gr::block_reduce) -- and the engine's epilogue takes thread 0's value.
--
-- Against warp_shuffle (two loads in flight): more bytes in flight per thread, so fewer threads are
-- needed to cover DRAM latency, at the price of registers (four accumulators). The function is written
-- for every op: Op gives the accumulator, identity and combine, gr::load_at makes an accumulator of an
-- element (with its index, for argmin/argmax), and passes over partials -- where In is the accumulator,
-- a struct for argmin or var that does not fit a 16-byte vector -- take the scalar loop.
return {
  {
    name = "two_stage",
    summary = "16-byte loads, four in flight per thread into four accumulators, then warp shuffles and the block",
    block = { min = 32, max = 1024, default = 256 },
    source = [[
template <class Op, class In>
__device__ typename Op::acc_t two_stage(const In *in, size_t n, unsigned long long first) {
    using Acc = typename Op::acc_t;
    constexpr int kInFlight = 4;
    const size_t tid = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
    const size_t threads = size_t(gridDim.x) * blockDim.x;
    Acc acc[kInFlight];
#pragma unroll
    for (int u = 0; u < kInFlight; u++) acc[u] = Op::identity();

    // stage 1: this thread's share, in order of index
    if constexpr (gr::vectorizable_v<In>) {
        using V = gr::Vec16<In>;
        constexpr int kV = V::kCount;
        const size_t head = gr::head_elements(in, n);          // before the first 16-byte boundary
        if (tid < head) acc[0] = Op::combine(acc[0], gr::load_at<Op>(in[tid], first + tid));
        const V *vin = reinterpret_cast<const V *>(in + head);
        const size_t nvec = (n - head) / kV;
        const unsigned long long at = first + head;            // the index of vin[0]'s first element
        size_t i = tid;
        for (; i + (kInFlight - 1) * threads < nvec; i += kInFlight * threads) {
            V r[kInFlight];
#pragma unroll
            for (int u = 0; u < kInFlight; u++) r[u] = vin[i + u * threads];      // all loads first
#pragma unroll
            for (int u = 0; u < kInFlight; u++) acc[u] = gr::fold_vec<Op, In>(acc[u], r[u], at + (i + u * threads) * kV);
        }
        for (; i < nvec; i += threads) acc[0] = gr::fold_vec<Op, In>(acc[0], vin[i], at + i * kV);
        const size_t tail = head + nvec * kV;                   // after the last whole vector
        if (tid < n - tail) acc[0] = Op::combine(acc[0], gr::load_at<Op>(in[tail + tid], first + tail + tid));
    } else {
        for (size_t i = tid; i < n; i += threads) acc[0] = Op::combine(acc[0], gr::load_at<Op>(in[i], first + i));
    }

    // stage 2: the four accumulators, then the block (thread 0 holds its value)
    const Acc v = Op::combine(Op::combine(acc[0], acc[1]), Op::combine(acc[2], acc[3]));
    return gr::block_reduce<Op>(v);
}
]],
  },
}
