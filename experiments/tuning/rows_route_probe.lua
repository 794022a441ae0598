-- Rows along the contiguous axis: the column kernel's along-row mode (gr.bench with axis = 2) beside the
-- segmented kernel over the same bytes (segment = c), as % of the read kernel, for the route in
-- engine/core/axes.c (issue 23: long rows read at 51-59% through the column kernel).
--   lua experiments/tuning/rows_route_probe.lua [log2 n]
local gr = require "gpureduce"
local lgn = tonumber(arg[1]) or 28
local n = 1 << lgn
for _, d in ipairs({ "float32", "bfloat16" }) do
  local b = gr.buffer(n, d):random(7, -1, 1)
  local r = gr.bench_read(b, { reps = 50, warmup = 5 }).ms
  print(string.format("# %s 2^%d read %.4f ms", d, lgn, r))
  for _, lc in ipairs({ 1, 2, 4, 6, 8, 10, 14, 20 }) do
    local c = 1 << lc
    local v = b:view{ n // c, c }
    local row = { string.format("%-9s c=2^%-2d", d, lc) }
    for _, op in ipairs({ "sum", "max", "argmax", "var" }) do
      local ta = gr.bench(v, { op = op, axis = 2, reps = 20, warmup = 3 }).ms
      local ok, s = pcall(gr.bench, b, { op = op, segment = c, reps = 20, warmup = 3 })
      local ts = ok and s.ms or 0 / 0
      row[#row + 1] = string.format("%s col %5.1f%% seg %5.1f%%", op, 100 * r / ta, 100 * r / ts)
    end
    print(table.concat(row, " | "))
  end
  b:free()
end
