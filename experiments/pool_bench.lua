--- Issue 26's table: calls that return a new buffer against the same calls writing into a buffer given as
-- `out =` (or gr.copy into one, for astype), on the GPU. b is 2^26 float32 (POOL_LOG2N to change); the
-- cases are gr.reduce(b, {op = "sum", segment = S}) for S = 4, 16, 128, gr.sum along each axis of b viewed
-- as (n / 1024, 1024), and b:astype("float64") beside gr.copy into a float64 buffer (a widening that cannot
-- fail, so both are one pass: a pair that can fail is checked first by gr.copy). Each pair is checked
-- first (the new buffer's bytes are the out buffer's), then timed: wall time of whole synchronous calls
-- (gr.clock; the call returns its result, and a new result is dropped at once, as a loop would), the two
-- forms alternating call by call, medians and minima of BENCH_REPS (default 30) after 5 warm-ups each.
-- The new/out ratio is the cost of making the result: about 1 with the buffer pool. The buffer pool's hits
-- and misses over the timed calls are shown too (misses: memory taken from the driver).
--   lua experiments/pool_bench.lua                             (with the pool, the default)
--   GPUREDUCE_BUFFER_POOL=0 lua experiments/pool_bench.lua     (cudaMalloc and cudaFree per result: the A/B)
local gr = require "gpureduce"
local here = (arg and arg[0] or ""):match("^(.*)/[^/]*$") or "."
package.path = here .. "/?.lua;" .. package.path
local timing = require "lab.timing"
local WARMUP, ROW = 5, 1024         -- untimed calls of each form; the row length of the axis cases

local log2n = tonumber(os.getenv("POOL_LOG2N") or "") or 26      -- timing.start's default is 28
local reps = timing.start(gr, "pool_bench", "POOL_LOG2N")
local n = 1 << log2n

local b = gr.buffer(n, "float32"):random(26, -1, 1)
local m = b:view { n // ROW, ROW }

--- A case: `new()` returns a fresh buffer, `into(out)` writes the same result into out (made by `make()`).
local cases = {}
for _, s in ipairs { 4, 16, 128 } do
  cases[#cases + 1] = {
    name = ("segment = %d"):format(s),
    new = function() return gr.reduce(b, { op = "sum", segment = s }) end,
    make = function() return gr.buffer(n // s, "float32") end,
    into = function(o) return gr.reduce(b, { op = "sum", segment = s, out = o }) end,
  }
end
for _, axis in ipairs { 2, 1 } do
  local kept = axis == 2 and n // ROW or ROW
  cases[#cases + 1] = {
    name = ("sum axis = %d (%d results)"):format(axis, kept),
    new = function() return gr.sum(m, { axis = axis }) end,
    make = function() return gr.buffer(kept, "float32") end,
    into = function(o) return gr.sum(m, { axis = axis, out = o }) end,
  }
end
cases[#cases + 1] = {
  name = "astype float64 / copy",
  new = function() return b:astype("float64") end,
  make = function() return gr.buffer(n, "float64") end,
  into = function(o) return gr.copy(o, b) end,
}

local failures = 0
for _, c in ipairs(cases) do
  c.out = c.make()
  c.into(c.out)
  local fresh = c.new()
  if fresh:tobytes() ~= c.out:tobytes() then
    failures = failures + 1
    print("WRONG: " .. c.name .. ": the new buffer's bytes are not the out buffer's")
  end
end
if failures > 0 then os.exit(1) end

local function pool() local s = gr.pool_stats() return s.buffer_hits, s.buffer_misses, s.buffer_pool end

print(("\n## n = 2^%d float32: results in a new buffer against out = (wall us per whole call; buffer pool %s)")
  :format(log2n, select(3, pool()) and "on" or ("off, GPUREDUCE_BUFFER_POOL=" .. (os.getenv("GPUREDUCE_BUFFER_POOL") or "unset"))))
print(("%-28s %10s %10s %10s %10s %8s %8s %8s"):format("case", "new us", "min", "out us", "min", "new/out",
  "hits", "misses"))
for _, c in ipairs(cases) do
  local function new_call() local r = c.new() return #r end
  local function out_call() return #c.into(c.out) end
  for _ = 1, WARMUP do new_call() out_call() end
  local h0, m0 = pool()
  local tn, to = {}, {}
  for i = 1, reps do
    local t0 = gr.clock()
    new_call()
    local t1 = gr.clock()
    out_call()
    local t2 = gr.clock()
    tn[i], to[i] = (t1 - t0) * 1e6, (t2 - t1) * 1e6
  end
  local h1, m1 = pool()
  local mn, mo = timing.median(tn), timing.median(to)
  print(("%-28s %10.1f %10.1f %10.1f %10.1f %8.3f %8d %8d"):format(c.name, mn, tn[1], mo, to[1], mn / mo,
    h1 - h0, m1 - m0))
end
print("valid: every new buffer holds the out buffer's bytes")
