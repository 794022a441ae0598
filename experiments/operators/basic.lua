--- User operators for the lab (lua5.4 experiments/sweep.lua --operators experiments/operators/basic.lua):
-- C expressions compiled at run time by NVRTC, each checked against the built-in op it stands for
-- (`like`, on that op's data, with its tolerance: exact but for float sums and products) and timed
-- beside the catalogue; float64 accumulators, for float data. docs/api.md ("User operators") says what
-- the fields mean.
local gr = require "gpureduce"

return {
  -- the sum written as an operator: as fast as the built-in one (docs/performance.md)
  { like = "sum", operator = gr.operator { name = "op_sum", map = "x", reduce = "a + b", identity = "0",
                                           acc = "float64" } },
  -- the maximum, NaN-propagating like the built-in max
  { like = "max", operator = gr.operator { name = "op_max", map = "x",
                                           reduce = "(a != a || b != b) ? a + b : (a > b ? a : b)",
                                           identity = "-INFINITY", acc = "float64" } },
}
