-- The fixed cost of a call beside the read kernel (issue 22: what holds FP8 absmax below 95%): device-event time
-- of gr.bench minus gr.bench_read over the same bytes, from 2^10 to 2^28, FP8 and float32.
--   lua experiments/tuning/fixed_tail_probe.lua
local gr = require "gpureduce"
for _, lg in ipairs({ 10, 16, 20, 24, 28 }) do
  for _, d in ipairs({ "float8_e4m3", "float32" }) do
    local b = gr.buffer(1 << lg, d):random(7, -1, 1)
    local r = gr.bench_read(b, { reps = 200, warmup = 20 }).ms
    local row = { string.format("2^%d %-12s read %8.4f", lg, d, r) }
    for _, op in ipairs({ "absmax", "sum", "max" }) do
      local t = gr.bench(b, { op = op, reps = 200, warmup = 20 }).ms
      row[#row + 1] = string.format("%s %8.4f (+%.2f us)", op, t, 1000 * (t - r))
    end
    print(table.concat(row, "  "), gr.plan(b, { op = "absmax" }).variant, gr.plan(b, { op = "absmax" }).finish)
    b:free()
  end
end
