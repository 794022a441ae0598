-- The fixed cost of a sorted reduction by key: wall us per gr.reduce_by_key(keys, values, {sorted = true})
-- from a Lua loop, int32 keys in runs of 16, float32 values, n from 2^10 to 2^22 (issue 25: what a sorted call
-- waits for besides its pass), for one op (sum) and for a list of five (ops = {sum, min, max, count, mean}:
-- one pass each). Medians of 21 batches of 20 calls after 20 warm-ups; each result checked first: the
-- count of keys and the first key's total.
--   lua experiments/tuning/by_key_sorted_probe.lua
local gr = require "gpureduce"
local FIVE = { "sum", "min", "max", "count", "mean" }

local function per_call(fn)
  for _ = 1, 20 do fn() end
  local t = {}
  for b = 1, 21 do
    local t0 = gr.clock()
    for _ = 1, 20 do fn() end
    t[b] = (gr.clock() - t0) / 20 * 1e6
  end
  table.sort(t)
  return t[11]
end

print(string.format("# sorted reduce_by_key on %s: wall us per call", (gr.device() or { name = "cpu" }).name))
print(string.format("%-5s %10s %14s", "n", "sum", "ops (five)"))
for _, lg in ipairs({ 10, 14, 18, 22 }) do
  local n = 1 << lg
  local kt = {}
  for i = 1, n do kt[i] = (i - 1) // 16 end
  local keys = gr.buffer(kt, "int32")
  local values = gr.buffer(n, "float32"):random(5, -1, 1)
  local k, sums = gr.reduce_by_key(keys, values, { op = "sum", sorted = true })
  local _, r = gr.reduce_by_key(keys, values, { ops = FIVE, sorted = true })
  local first = gr.reduce(values:slice(1, 16), { op = "sum", acc = "float64" })
  local ok = #k == n // 16 and math.abs(sums:get(1) - first) < 1e-5 and r.sum:get(1) == sums:get(1)
    and r.count:get(#k) == gr.reduce(values:slice(n - 15, 16), { op = "count" })
  local one = per_call(function() gr.reduce_by_key(keys, values, { op = "sum", sorted = true }) end)
  local five = per_call(function() gr.reduce_by_key(keys, values, { ops = FIVE, sorted = true }) end)
  print(string.format("2^%-3d %10.1f %14.1f  %s", lg, one, five, ok and "ok" or "WRONG"))
end
