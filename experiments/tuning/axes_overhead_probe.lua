--- What a reduction along an axis costs around its kernels: wall us per gr.reduce(m, {op = "sum", axis = 1,
-- out = o}) over (n/c, c) float32 matrices (c narrow columns), beside gr.sum of the same buffer, at a small
-- size (the kernels a few us: the rest is the call) and at 2^28 with gr.bench's device-event time of the
-- same call and the read ceiling. Run on the GPU host:
--   lua experiments/tuning/axes_overhead_probe.lua
local gr = require "gpureduce"
local here = (arg and arg[0] or ""):match("^(.*)/tuning/[^/]*$") or "experiments"
package.path = here .. "/?.lua;" .. package.path
local timing = require "lab.timing"
timing.need_gpu(gr, "axes_overhead_probe")

local reps = tonumber(os.getenv("BENCH_REPS") or "") or 30
for _, log2n in ipairs({ 12, 28 }) do
  local n = 1 << log2n
  local b = gr.buffer(n, "float32"):random(3, -1, 1)
  local read = gr.bench_read(b, { reps = reps, warmup = 5 }).ms
  print(string.format("\n2^%d float32, read ceiling %.2f us (events); gr.sum(b) %.2f us (wall)", log2n, read * 1000,
    1000 * timing.wall_ms(gr, function() return gr.sum(b) end, reps)))
  for _, c in ipairs({ 2, 4, 16, 256 }) do
    local m = b:view{ n // c, c }
    local o = gr.buffer(c, "float32")
    local wall = timing.wall_ms(gr, function() return gr.reduce(m, { op = "sum", axis = 1, out = o }) end, reps)
    local ev = gr.bench(m, { op = "sum", axis = 1, reps = reps, warmup = 5 }).ms
    print(string.format("  (2^%d, %3d) axis 1: wall %9.2f us, bench %9.2f us (%5.1f%% of read)", log2n - math.floor(math.log(c, 2) + 0.5),
      c, wall * 1000, ev * 1000, 100 * read / ev))
  end
end
