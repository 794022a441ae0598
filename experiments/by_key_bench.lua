--- Issue 25's table: gr.reduce_by_key over 2^26 float32 values with int32 keys of 2^4 ... 2^24 distinct
-- values, uniform and Zipf-skewed (log-uniform: floor(K^u) - 1, u uniform in [0, 1)), unsorted, and with
-- sorted = true over keys already grouped (uniform: floor(i K / n); zipf: the unsorted case's keys in
-- ascending order -- the same multiset, each key's run n / 2^20 times its count in the 2^20-key pattern);
-- against the read ceiling of keys plus values (and the two ends: every key equal, every key distinct),
-- CUB's SortPairs + ReduceByKey and its ReduceByKey alone over the same grouped keys
-- (experiments/tuning/cub_by_key.cu, which makes them by the same formulas; its lines in the file CUB_TIMES
-- names) and PyTorch's index_add_ / scatter_reduce_ (experiments/peers/torch_by_key.py, TORCH_TIMES), from
-- the same run. Each case is checked first on a 2^20-element prefix against a reference in Lua (values
-- small integers, so every sum is exact): sum, max, argmax and count; the grouped zipf keys also on their
-- sorted pattern (every distinct key), and by their counts over all n against the pattern's. Times: whole
-- synchronous calls (the call returns its buffers), medians of BENCH_REPS (default 30) after 5 warm-ups.
--   BY_KEY_LOG2N=26 lua experiments/by_key_bench.lua     (scripts/gpu-batch.sh by_key runs it with the peers)
-- Comparisons in one device run: GPUREDUCE_RUNS_ITEMS=8 or 16 (the pass over runs' tile shape; default 16 for
-- values of 4 bytes or fewer) and GPUREDUCE_BY_KEY_RUNS=0 (every op as segments); the header names them.
local gr = require "gpureduce"
local here = (arg and arg[0] or ""):match("^(.*)/[^/]*$") or "."
package.path = here .. "/?.lua;" .. package.path
local timing = require "lab.timing"

local reps = timing.start(gr, "by_key_bench", "BY_KEY_LOG2N")
local log2n = tonumber(os.getenv("BY_KEY_LOG2N") or "") or 26
local n = 1 << log2n
local PATTERN = math.min(n, 1 << 20)          -- keys are generated on the host this many at a time

-- CUB: "by_key <dist> <log2K> unsorted_ms=<m> sorted_ms=<m> runs=<r>"; PyTorch: "<dist> <log2K> <op> <mode> <ms>"
local cub, torch = {}, {}
local f = os.getenv("CUB_TIMES") and io.open(os.getenv("CUB_TIMES"))
for line in f and f:lines() or function() end do
  local dist, lk, u, s = line:match("^by_key (%S+) (%d+) unsorted_ms=(%S+) sorted_ms=(%S+)")
  if dist then cub[dist .. lk] = { unsorted = tonumber(u), sorted = tonumber(s) } end
end
if f then f:close() end
f = os.getenv("TORCH_TIMES") and io.open(os.getenv("TORCH_TIMES"))
for line in f and f:lines() or function() end do
  local dist, lk, op, mode, ms = line:match("^(%S+) (%d+) (%S+) (%S+) (%S+)$")
  if dist and tonumber(ms) then torch[dist .. lk .. op .. mode] = tonumber(ms) end
end
if f then f:close() end

--- PATTERN keys of distribution `dist` with K distinct values, as a Lua table (a fixed LCG: the same each run).
local function key_pattern(dist, K)
  local t, x = {}, 12345
  for i = 1, PATTERN do
    x = (x * 6364136223846793005 + 1442695040888963407) & 0x7fffffffffffffff
    local u = (x >> 11) / 2 ^ 52
    t[i] = dist == "uniform" and math.floor(u * K) or math.min(K - 1, math.floor(K ^ u) - 1)
  end
  return t
end

--- n int32 keys: the pattern repeated on the device.
local function keys_of(pattern)
  local k = gr.buffer(n, "int32")
  local p = gr.buffer(pattern, "int32")
  for at = 0, n - 1, PATTERN do gr.copy(k:slice(at + 1, PATTERN), p) end
  p:free()
  return k
end

--- Keys grouped in ascending order, floor(i K / n): K runs of n / K.
local function sorted_keys(K)
  return gr.buffer(n, "float64"):iota(0, K / n):astype("int32")
end

--- The keys of `pattern` grouped in ascending order, n of them: the same multiset as keys_of(pattern), each
-- key n / PATTERN times its count in the pattern. The pattern sorted (returned too), each element then
-- repeated n / PATTERN times: copied into every column of an (PATTERN, n / PATTERN) view of the keys.
local function grouped_keys(pattern)
  local sorted = table.move(pattern, 1, #pattern, 1, {})
  table.sort(sorted)
  local p = gr.buffer(sorted, "int32")
  local times = n // PATTERN
  if times == 1 then return p, sorted end
  local k = gr.buffer(n, "int32")
  local grid, column = k:view({ PATTERN, times }), p:view({ PATTERN, 1 })
  for j = 1, times do gr.copy(grid:narrow(2, j, 1), column) end
  p:free()
  return k, sorted
end

--- Whether the n grouped keys hold each key of the sorted pattern n / PATTERN times as often as it does
-- (their counts by reduce_by_key over ones, sorted = true, which refuses keys not grouped): the multiset of
-- the unsorted case, grouped.
local function same_multiset(grouped, sorted)
  local want, order = {}, {}
  for _, key in ipairs(sorted) do
    if not want[key] then order[#order + 1] = key end
    want[key] = (want[key] or 0) + n // PATTERN
  end
  local ones = gr.buffer(n, "float32"):fill(1)
  local ok, k, c = pcall(gr.reduce_by_key, grouped, ones, { op = "count", sorted = true })
  ones:free()
  if not ok then return false end
  local kk, cc = k:totable(), c:totable()
  if #kk ~= #order then return false end
  for j, key in ipairs(order) do
    if kk[j] ~= key or cc[j] ~= want[key] then return false end
  end
  return true
end

--- Whether reduce_by_key's sum, max, argmax and count over the prefix match the reference.
local function valid(pattern, sorted)
  local m = #pattern
  local keys = gr.buffer(pattern, "int32")
  local vals = gr.buffer(m, "int32"):random(5, -8, 9):astype("float32")
  local v = vals:totable()
  local ref = {}
  for i = 1, m do
    local r = ref[pattern[i]]
    if not r then
      r = { sum = 0, max = -math.huge, at = 0, count = 0 }
      ref[pattern[i]] = r
    end
    r.sum = r.sum + v[i]
    if v[i] > r.max then r.max, r.at = v[i], i end
    if v[i] ~= 0 then r.count = r.count + 1 end
  end
  local k, t = gr.reduce_by_key(keys, vals, { ops = { "sum", "max", "argmax", "count" }, sorted = sorted })
  local kk, sum, max, at, count = k:totable(), t.sum:totable(), t.max:totable(), t.argmax[2]:totable(), t.count:totable()
  local last
  for j, key in ipairs(kk) do
    local r = ref[key]
    if not r or (last and key <= last) or sum[j] ~= r.sum or max[j] ~= r.max or at[j] ~= r.at or count[j] ~= r.count then
      return false
    end
    last = key
    ref[key] = nil
  end
  return next(ref) == nil
end

local failures = 0
local read
do
  local c = gr.buffer(2 * n, "float32")
  read = gr.bench_read(c, { reps = reps, warmup = 5 }).gbps
  c:free()
end

print(string.format("\n## n = 2^%d float32 values, int32 keys: gr.reduce_by_key (sum; whole calls) beside CUB and PyTorch",
  log2n))
print(string.format("read ceiling of keys + values: %.1f GB/s", read))
print(string.format("GPUREDUCE_RUNS_ITEMS=%s GPUREDUCE_BY_KEY_RUNS=%s", os.getenv("GPUREDUCE_RUNS_ITEMS") or "(default)",
  os.getenv("GPUREDUCE_BY_KEY_RUNS") or "(default)"))
print(string.format("%-8s %6s %10s %8s %10s %9s %10s %8s %19s %12s %8s  %s", "keys", "K", "unsorted", "/ CUB", "sorted",
  "vs read", "CUB sort+", "CUB RBK", "gr sorted / CUB RBK", "torch det.", "/ torch", "valid"))
for _, dist in ipairs({ "uniform", "zipf" }) do
  for _, lk in ipairs({ 4, 8, 12, 16, 20, 24 }) do
    local K = 1 << lk
    local ok, err = pcall(function()
      local pattern = key_pattern(dist, K)
      local good = valid(pattern, false)
      local keys = keys_of(pattern)
      local vals = gr.buffer(n, "float32"):random(11, -1, 1)
      local unsorted = timing.wall_ms(gr, function() gr.reduce_by_key(keys, vals, { op = "sum" }) end, reps)
      -- grouped: uniform floor(i K / n), zipf this case's keys in ascending order (checked to be their multiset)
      local grouped, sorted = nil, nil
      if dist == "uniform" then grouped = sorted_keys(K) else grouped, sorted = grouped_keys(pattern) end
      good = good and valid(grouped:slice(1, PATTERN):totable(), true)
      if sorted then good = good and valid(sorted, true) and same_multiset(grouped, sorted) end
      local sorted_ms = timing.wall_ms(gr, function() gr.reduce_by_key(grouped, vals, { op = "sum", sorted = true }) end,
        reps)
      local vs_read = 8 * n / (sorted_ms * 1e6) / read
      grouped:free()
      if not good then failures = failures + 1 end
      local c = cub[dist .. lk]
      local t = torch[dist .. lk .. "index_add" .. "deterministic"]
      print(string.format("%-8s %6s %10.3f %8s %10.3f %8.1f%% %10s %8s %19s %12s %8s  %s", dist, "2^" .. lk, unsorted,
        c and string.format("%.3f", unsorted / c.unsorted) or "-", sorted_ms, 100 * vs_read,
        c and string.format("%.3f", c.unsorted) or "-", c and string.format("%.3f", c.sorted) or "-",
        c and string.format("%.3f", sorted_ms / c.sorted) or "-", t and string.format("%.3f", t) or "-",
        t and string.format("%.3f", unsorted / t) or "-", good and "ok" or "WRONG"))
      keys:free()
      vals:free()
    end)
    if not ok then print(string.format("%s 2^%d failed: %s", dist, lk, err)) end
    collectgarbage()
  end
end
-- The two ends: every key equal, and every key distinct (i * 1640531527 wrapped to int32: a bijection, so
-- 2^n distinct keys in a shuffled order; sorted, the keys 0 .. n - 1).
print(string.format("\n%-8s %10s %10s %9s  %s", "keys", "unsorted", "sorted", "vs read", "valid"))
for _, dist in ipairs({ "equal", "distinct" }) do
  local ok, err = pcall(function()
    local step = 1640531527
    local pattern = {}
    for i = 1, PATTERN do
      local w = ((i - 1) * step) & 0xffffffff
      pattern[i] = dist == "equal" and 7 or (w >= 0x80000000 and w - 0x100000000 or w)
    end
    local keys = dist == "equal" and gr.buffer(n, "int32"):fill(7) or gr.buffer(n, "int32"):iota(0, step)
    local grouped = dist == "equal" and keys or gr.buffer(n, "int32"):iota(0, 1)
    local tbl = grouped:slice(1, PATTERN):totable()
    local good = valid(pattern, false) and valid(tbl, true)
    if not good then failures = failures + 1 end
    local vals = gr.buffer(n, "float32"):random(11, -1, 1)
    local unsorted = timing.wall_ms(gr, function() gr.reduce_by_key(keys, vals, { op = "sum" }) end, reps)
    local sorted_ms = timing.wall_ms(gr, function() gr.reduce_by_key(grouped, vals, { op = "sum", sorted = true }) end,
      reps)
    print(string.format("%-8s %10.3f %10.3f %8.1f%%  %s", dist, unsorted, sorted_ms, 100 * 8 * n / (sorted_ms * 1e6) / read,
      good and "ok" or "WRONG"))
  end)
  if not ok then print(string.format("%s failed: %s", dist, err)) end
  collectgarbage()
end

if failures > 0 then
  print(string.format("\n%d WRONG", failures))
  os.exit(1)
end
