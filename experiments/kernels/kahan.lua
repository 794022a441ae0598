--- A compensated sum as a user operator with a struct accumulator, for the lab
-- (lua5.4 experiments/sweep.lua --operators experiments/kernels/kahan.lua, alone or with --kernels) and
-- for a user kernel (gr.reduce(b, {op = <this operator>, variant = "two_stage"})).
--
-- The accumulator carries the sum and the rounding error the sum has lost so far (Neumaier's variant of
-- Kahan's summation): each step adds two accumulators with Fast2Sum, whose error term is exact when the
-- larger of the two sums goes first, and adds the errors up apart. The result, sum + carry, is then
-- about as accurate as a sum in twice the precision (for float32 data in a float64 accumulator, far
-- more than the float32 sum it stands for). The step is commutative, as reduce must be: swapping a and b
-- takes the same branch of the comparison. Infinities make the carry NaN (inf - inf): this operator is
-- for finite data.
local gr = require "gpureduce"

local function kahan_add(a, b)             -- the same step in Lua, for the cpu backend
  local s = a[1] + b[1]
  local e = math.abs(a[1]) >= math.abs(b[1]) and (a[1] - s) + b[1] or (b[1] - s) + a[1]
  return { s, (a[2] + b[2]) + e }
end

return {
  {
    like = "sum",
    operator = gr.operator {
      name = "kahan_sum",
      acc = "KahanAcc",
      preamble = [[
struct KahanAcc {
    double sum;      // the running sum
    double carry;    // what the additions into sum have rounded away
};
// a + b, the rounding error of the one addition recovered exactly (Fast2Sum, larger operand first)
__device__ KahanAcc kahan_add(KahanAcc a, KahanAcc b) {
    const double s = a.sum + b.sum;
    const double e = fabs(a.sum) >= fabs(b.sum) ? (a.sum - s) + b.sum : (b.sum - s) + a.sum;
    return KahanAcc{s, (a.carry + b.carry) + e};
}
]],
      map = "KahanAcc{double(x), 0.0}",
      reduce = "kahan_add(a, b)",
      identity = "{0.0, 0.0}",
      post = "a.sum + a.carry",
      cpu = {
        map = function(x) return { x + 0.0, 0.0 } end,
        reduce = kahan_add,
        post = function(a) return a[1] + a[2] end,
        identity = function() return { 0.0, 0.0 } end,     -- a fresh accumulator for each fold
      },
    },
  },
}
