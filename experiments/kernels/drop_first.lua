--- A wrong kernel, for the lab's self-test on the GPU: a plain grid-stride fold that leaves out the
-- element at index 0 of every pass. The sweep must mark it ✗ and exit 1 wherever that element matters:
--
--   lua5.4 experiments/sweep.lua --kernels experiments/kernels/drop_first.lua --variants drop_first \
--       --ops sum,max --dtypes float64,int32 --sizes 2^20+3
--
-- An integer sum misses x[1] exactly; a float64 sum misses about 0.5 where the bound of 2^20 uniform
-- values is about 1e-6 (lab/validate.lua). A float32 sum of that size may pass: its bound (about 500)
-- is larger than one element, which is the most any a-priori bound of a float32 sum of 2^20 values
-- can say.
return {
  {
    name = "drop_first",
    summary = "wrong on purpose: a grid-stride fold that leaves out element 0 (the lab's self-test)",
    block = { min = 32, max = 1024, default = 256 },
    source = [[
template <class Op, class In>
__device__ typename Op::acc_t drop_first(const In *in, size_t n, unsigned long long first) {
    using Acc = typename Op::acc_t;
    const size_t tid = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
    const size_t threads = size_t(gridDim.x) * blockDim.x;
    Acc acc = Op::identity();
    for (size_t i = tid; i < n; i += threads)
        if (first + i != 0) acc = Op::combine(acc, gr::load_at<Op>(in[i], first + i));
    return gr::block_reduce<Op>(acc);
}
]],
  },
}
