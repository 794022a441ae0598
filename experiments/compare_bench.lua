--- Compares two or more logs of experiments/bench.lua taken in the same GPU run: a build before a change
-- (A) and after it (B), ideally alternated (A B A B) so that drift hits both. For each row it takes the
-- best of each side's logs (the minimum time: noise only adds) and prints B against A, and where there
-- are several rounds, the median over rounds of B_i against A_i (A1 with B1, ...: a round's drift falls on
-- both of its logs; see COMPARE_ROUNDS in scripts/gpu-batch.sh):
--   the 2^28 table: auto's ms, B / A (within 1% means 0.99..1.01);
--   small n: wall us per gr.sum call, B - A;
--   streamed: GB/s, B / A;
--   2^28 wall: us per synchronous call, B / A.
--   lua5.4 experiments/compare_bench.lua A1.log [A2.log ...] -- B1.log [B2.log ...]
local sides, side = { {}, {} }, 1
for _, a in ipairs(arg) do
  if a == "--" then side = 2 else table.insert(sides[side], a) end
end
if #sides[1] == 0 or #sides[2] == 0 then
  io.stderr:write("usage: lua5.4 experiments/compare_bench.lua A.log ... -- B.log ...\n")
  os.exit(2)
end

--- The rows of one log: large[dtype/op] = ms, small[n] = us, streamed[chunk/streams] = GB/s.
local function parse(path)
  local t = { large = {}, small = {}, streamed = {}, wall = {} }
  local section
  for l in io.lines(path) do
    if l:find("^## n = 2%^28 wall") then section = "wall"
    elseif l:find("^## n = 2%^28") then section = "large"
    elseif l:find("^## small n") then section = "small"
    elseif l:find("^## streamed") then section = "streamed"
    elseif section == "large" then
      local dtype, op, ms = l:match("^(%w+)%s+(%w+)%s+([%d.]+)%s")
      if dtype and dtype ~= "dtype" then t.large[dtype .. " " .. op] = tonumber(ms) end
    elseif section == "wall" then
      local dtype, op, us = l:match("^(%w+)%s+(%w+)%s+([%d.]+)%s")
      if dtype and dtype ~= "dtype" then t.wall[dtype .. " " .. op] = tonumber(us) end
    elseif section == "small" then
      local n, us = l:match("^%s*(%d+)%s+([%d.]+)%s")
      if n then t.small[tonumber(n)] = tonumber(us) end
    elseif section == "streamed" then
      local chunk, streams, _, gbps = l:match("^%s*(%d+)%s+(%d+)%s+([%d.]+)%s+([%d.]+)")
      if chunk then t.streamed[chunk .. " MiB / " .. streams] = tonumber(gbps) end
    end
  end
  return t
end

local function best(logs, section, key, better)
  local v
  for _, t in ipairs(logs) do
    local x = t[section][key]
    if x and (not v or better(x, v)) then v = x end
  end
  return v
end
local lower = function(x, y) return x < y end
local higher = function(x, y) return x > y end

local A, B = {}, {}
for _, p in ipairs(sides[1]) do A[#A + 1] = parse(p) end
for _, p in ipairs(sides[2]) do B[#B + 1] = parse(p) end

local function keys(section)
  local seen, list = {}, {}
  for _, t in ipairs(A) do
    for k in pairs(t[section]) do if not seen[k] then seen[k] = true; list[#list + 1] = k end end
  end
  table.sort(list, function(x, y)
    if type(x) == "number" then return x < y end
    return x < y
  end)
  return list
end

--- The median over rounds of f(A_i, B_i) for a row (rounds where both logs have it), and how many.
local function paired(section, key, f)
  local d = {}
  for i = 1, math.min(#A, #B) do
    local a, b = A[i][section][key], B[i][section][key]
    if a and b then d[#d + 1] = f(a, b) end
  end
  if #d == 0 then return nil, 0 end
  table.sort(d)
  local m = #d % 2 == 1 and d[(#d + 1) // 2] or 0.5 * (d[#d // 2] + d[#d // 2 + 1])
  return m, #d
end
local ratio = function(a, b) return b / a end
local diff = function(a, b) return b - a end
local rounds = math.min(#A, #B)

local worst, worst_paired = 0, 0
print(string.format("## n = 2^28, auto: ms (best of each side), B / A%s", rounds > 1 and
  string.format("; median of %d rounds' B_i / A_i", rounds) or ""))
print(string.format("%-16s %9s %9s %8s %8s", "dtype op", "A ms", "B ms", "B/A", "paired"))
for _, k in ipairs(keys("large")) do
  local a, b = best(A, "large", k, lower), best(B, "large", k, lower)
  if a and b then
    local m = paired("large", k, ratio)
    print(string.format("%-16s %9.4f %9.4f %8.4f %8.4f", k, a, b, b / a, m or 0 / 0))
    worst = math.max(worst, b / a)
    worst_paired = math.max(worst_paired, m or 0)
  end
end
print(string.format("worst B/A: %.4f (best of each side), %.4f (paired median)", worst, worst_paired))

print(string.format("\n## small n: wall us per gr.sum call (best of each side), B - A%s", rounds > 1 and
  string.format("; median of %d rounds' B_i - A_i", rounds) or ""))
print(string.format("%10s %9s %9s %8s %8s", "n", "A us", "B us", "B-A", "paired"))
for _, k in ipairs(keys("small")) do
  local a, b = best(A, "small", k, lower), best(B, "small", k, lower)
  if a and b then
    print(string.format("%10d %9.2f %9.2f %+8.2f %+8.2f", k, a, b, b - a, paired("small", k, diff) or 0 / 0))
  end
end

print("\n## streamed: GB/s (best of each side), B / A")
for _, k in ipairs(keys("streamed")) do
  local a, b = best(A, "streamed", k, higher), best(B, "streamed", k, higher)
  if a and b then print(string.format("%-16s %9.1f %9.1f %8.4f", k, a, b, b / a)) end
end

print("\n## n = 2^28 wall: us per synchronous call (best of each side), B / A")
for _, k in ipairs(keys("wall")) do
  local a, b = best(A, "wall", k, lower), best(B, "wall", k, lower)
  if a and b then print(string.format("%-16s %9.2f %9.2f %8.4f", k, a, b, b / a)) end
end
