--[[
opts.ops along segments and rows (issue 24: several results in one read): one call with ops = {...}
against the same ops called one by one, and against one sum (what one read of the data costs), on a
device buffer of 2^n elements. Wall time of whole calls (each returns its result buffers, so it waits),
median of `reps` after 5 warm-ups (experiments/lab/timing.lua's wall_ms).

  lua experiments/tuning/ops_rows_bench.lua [log2 n = 28] [reps = 20]
]]
local gr = require "gpureduce"
local here = (arg and arg[0] or ""):match("^(.*)/[^/]*$") or "."
package.path = here .. "/../?.lua;" .. package.path
local timing = require "lab.timing"

local log2n = tonumber(arg[1]) or 28
local reps = tonumber(arg[2]) or 20
local n = 1 << log2n
local OPS = { "sum", "min", "max", "count", "mean", "std" }

local function median_ms(f) return timing.wall_ms(gr, f, reps) end

print(string.format("# %s, n = 2^%d, ops = {%s}, wall ms (median of %d)", gr.devices()[1].name, log2n,
  table.concat(OPS, ", "), reps))
print(string.format("%-9s %-24s %9s %9s %9s %8s %8s", "dtype", "layout", "one sum", "ops", "one by one", "ops/sum",
  "1by1/ops"))
for _, dtype in ipairs({ "float32", "bfloat16" }) do
  local b = gr.buffer(n, dtype, { where = "device" }):random(3, -1, 1)
  for _, layout in ipairs({ { "segment = 1024", { segment = 1024 } }, { "segment = 64", { segment = 64 } },
                            { "axis 2 of (n/4096, 4096)", { axis = 2 }, { n // 4096, 4096 } } }) do
    local x = layout[3] and b:view(layout[3]) or b
    local function opts(extra)
      local o = {}
      for k, v in pairs(layout[2]) do o[k] = v end
      for k, v in pairs(extra) do o[k] = v end
      return o
    end
    local one = median_ms(function() gr.reduce(x, opts { op = "sum" }) end)
    local fused = median_ms(function() gr.reduce(x, opts { ops = OPS }) end)
    local each = median_ms(function()
      for _, op in ipairs(OPS) do gr.reduce(x, opts { op = op }) end
    end)
    print(string.format("%-9s %-24s %9.3f %9.3f %9.3f %8.2f %8.2f", dtype, layout[1], one, fused, each, fused / one,
      each / fused))
  end
  b:free()
end
