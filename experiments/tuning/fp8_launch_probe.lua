-- Launch shapes for the 1-byte rows of issue 22 (FP8 absmax and sum at >= 95% of the read kernel): pipelined
-- and warp_shuffle over blocks 128..1024 and grids of 1..4 waves of blocks, float8_e4m3 absmax/sum/max and
-- uint8 max on 2^28 elements, interleaved with the read kernel; medians of the rounds, % of the median read.
--   lua experiments/tuning/fp8_launch_probe.lua [rounds]
local gr = require "gpureduce"
local rounds = tonumber(arg[1]) or 5
local n = 1 << 28
local sms = gr.device().sms
local function median(t)
  local c = {}
  for i, v in ipairs(t) do c[i] = v end
  table.sort(c)
  return c[(#c + 1) // 2]
end
local cases = {}
for _, v in ipairs({ "pipelined", "warp_shuffle" }) do
  for _, block in ipairs({ 128, 256, 512, 1024 }) do
    for _, waves in ipairs({ 0, 1, 2, 4 }) do     -- 0: the variant's own grid
      local grid = waves > 0 and sms * (2048 // block) * waves // 2 or nil
      cases[#cases + 1] = { variant = v, block = block, grid = grid, label = string.format("%-12s %5d %7s", v, block,
        grid and tostring(grid) or "own") }
    end
  end
end
local data = {
  { "float8_e4m3", { "absmax", "sum", "max" } },
  { "uint8", { "max" } },
}
for _, d in ipairs(data) do
  local b = gr.buffer(n, d[1]):random(7, d[1] == "uint8" and 0 or -1, d[1] == "uint8" and 255 or 1)
  local read, t = {}, {}
  local finish = gr.plan(b, { op = d[2][1] }).finish     -- auto's (a variant named alone takes its own default)
  for _ = 1, rounds do
    read[#read + 1] = gr.bench_read(b, { reps = 30, warmup = 5 }).ms
    for ci, c in ipairs(cases) do
      for _, op in ipairs(d[2]) do
        local key = ci .. op
        t[key] = t[key] or {}
        local ok, r = pcall(gr.bench, b, { op = op, variant = c.variant, block = c.block, grid = c.grid, finish = finish,
          reps = 30, warmup = 3 })
        t[key][#t[key] + 1] = ok and r.ms or math.huge
      end
    end
  end
  local r = median(read)
  local p = gr.plan(b, { op = d[2][1] })
  print(string.format("\n%s, read kernel %.4f ms; %% of it (auto: %s, %d blocks of %d, finish %s)", d[1], r, p.variant,
    p.passes[1].blocks, p.passes[1].block, p.finish))
  print(string.format("%-12s %5s %7s  %s", "variant", "block", "grid", table.concat(d[2], "  ")))
  for ci, c in ipairs(cases) do
    local cols = {}
    for _, op in ipairs(d[2]) do cols[#cols + 1] = string.format("%5.1f%%", 100 * r / median(t[ci .. op])) end
    print(c.label .. "  " .. table.concat(cols, "  "))
  end
  b:free()
end
