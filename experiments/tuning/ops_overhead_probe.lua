--- Where a fused `ops` call's wall time goes beyond its kernel: wall us per call of gr.reduce(b, {ops = six}),
-- gr.describe(b), the single std and sum calls, at a small size (the kernel a few us: the rest is the call) and
-- at 2^28 float32 beside the read ceiling (device events). Run on the GPU host:
--   lua experiments/tuning/ops_overhead_probe.lua
local gr = require "gpureduce"
local here = (arg and arg[0] or ""):match("^(.*)/tuning/[^/]*$") or "experiments"
package.path = here .. "/?.lua;" .. package.path
local timing = require "lab.timing"
timing.need_gpu(gr, "ops_overhead_probe")

local six = { "sum", "min", "max", "count", "mean", "std" }
local reps = tonumber(os.getenv("BENCH_REPS") or "") or 30
for _, log2n in ipairs({ 10, 20, 28 }) do
  local b = gr.buffer(1 << log2n, "float32"):random(7, -1, 1)
  local read = gr.bench_read(b, { reps = reps, warmup = 5 }).ms
  local cases = {
    { "gr.sum(b)", function() return gr.sum(b) end },
    { "std alone", function() return gr.reduce(b, { op = "std" }) end },
    { "ops = six", function() return gr.reduce(b, { ops = six }) end },
    { "gr.describe(b)", function() return gr.describe(b) end },
  }
  print(string.format("\n2^%d float32, read ceiling %.2f us (events)", log2n, read * 1000))
  for round = 1, 2 do
    for _, c in ipairs(cases) do
      local ms = timing.wall_ms(gr, c[2], reps)
      print(string.format("  round %d %-16s %9.2f us  %6.1f%% of read", round, c[1], ms * 1000, 100 * read / ms))
    end
  end
end
