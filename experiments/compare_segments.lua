--- Compares runs of the segments lab (experiments/segments.lua --out DIR) taken in one GPU run with a
-- build before a change (A) and after it (B), alternated A B A B so that drift hits both sides. Per
-- segment size and layout: each side's best time (the minimum over its runs: noise only adds), B / A of
-- those, and the median over rounds of B_i / A_i (a round's drift falls on both of its runs).
--   lua5.4 experiments/compare_segments.lua A1/segments.json [A2/...] -- B1/segments.json [B2/...]
local here = (arg and arg[0] or ""):match("^(.*)/[^/]*$") or "."
package.path = here .. "/?.lua;" .. package.path
local json = require "dkjson"

local sides, side = { {}, {} }, 1
for _, a in ipairs(arg) do
  if a == "--" then side = 2 else table.insert(sides[side], a) end
end
if #sides[1] == 0 or #sides[1] ~= #sides[2] then
  io.stderr:write("usage: lua5.4 experiments/compare_segments.lua A1.json ... -- B1.json ... (as many of each)\n")
  os.exit(2)
end

--- ms by "layout segment" of one run, and the keys in the order the run printed them.
local function read(path)
  local f = assert(io.open(path))
  local doc = assert(json.decode(f:read("a")), path .. ": not JSON")
  f:close()
  local ms, order = {}, {}
  for _, r in ipairs(doc.results) do
    if r.valid and r.ms then
      local key = string.format("%s %d", r.layout, r.segment)
      if not ms[key] then order[#order + 1] = key end
      ms[key] = r.ms
    end
  end
  return ms, order
end

local runs = { {}, {} }
local order
for s = 1, 2 do
  for i, path in ipairs(sides[s]) do
    local ms, o = read(path)
    runs[s][i] = ms
    order = order or o
  end
end

local function median(t)
  table.sort(t)
  local n = #t
  return n % 2 == 1 and t[(n + 1) // 2] or (t[n // 2] + t[n // 2 + 1]) / 2
end

print(string.format("%-18s %10s %10s %8s %14s", "layout segment", "A ms", "B ms", "B / A", "median B_i/A_i"))
local worst, ratios = 0, {}
for _, key in ipairs(order) do
  local a, b, paired = math.huge, math.huge, {}
  for i = 1, #runs[1] do
    local x, y = runs[1][i][key], runs[2][i][key]
    if x and y then
      a, b = math.min(a, x), math.min(b, y)
      paired[#paired + 1] = y / x
    end
  end
  if #paired > 0 then
    local m = median(paired)
    ratios[#ratios + 1] = m
    worst = math.max(worst, math.abs(m - 1))
    print(string.format("%-18s %10.4f %10.4f %8.3f %14.3f", key, a, b, b / a, m))
  end
end
print(string.format("segments: %d sizes, median of the paired ratios %.3f, farthest from 1: %.3f", #ratios,
  #ratios > 0 and median(ratios) or 0 / 0, 1 + worst))
