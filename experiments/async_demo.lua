--- Asynchronous reductions on several streams, and what they overlap.
--
--   lua5.4 experiments/async_demo.lua [--buffers 4] [--sizes 2^16,2^20,2^24] [--reps 10]
--
-- For each size, k buffers of different random data are reduced three ways, wall time by gr.clock:
--   sync       gr.reduce on each in turn: every call waits for its result before the next launch;
--   async x1   all issued with {async = true} on one stream, then waited: launches pipeline, kernels
--              still run one after another;
--   async xk   one stream per buffer: kernels may also run side by side.
-- Small buffers gain most (a reduction there is mostly launch and copy latency); a large one fills the
-- GPU alone, so overlap has little left to win. Every result is checked against the cpu variant first.
local here = (arg and arg[0] or ""):match("^(.*)/[^/]*$") or "."
package.path = here .. "/?.lua;" .. package.path

local argparse = require "argparse"
local gr = require "gpureduce"
local sizes = require "lab.sizes"
local validate = require "lab.validate"

local positive = sizes.converter

local backend = gr.backend()
local parser = argparse("async_demo.lua", "k buffers reduced synchronously one after another vs issued "
  .. "asynchronously on one stream and on k streams; wall time and correctness.")
parser:help_max_width(100)
parser:option("--buffers", "Buffers (and streams)."):argname("<k>"):default("4")
  :convert(positive("--buffers"))
parser:option("--sizes", "Elements per buffer. (default: 2^16,2^20,2^24; 2^16,2^20 on the CPU backend)")
  :argname("<list>"):convert(sizes.list_converter("--sizes"))
parser:option("--dtype", "Element type."):default("float32"):choices(gr.dtypes())
parser:option("--op", "Operator."):default("sum"):choices(gr.ops())
parser:option("--variant", "Variant (auto: warp_shuffle on the GPU)."):default("auto")
parser:option("--reps", "Repetitions of each measurement (median reported)."):argname("<n>"):default("10")
  :convert(positive("--reps"))
local args = parser:parse(arg)
local list = args.sizes or (backend == "cuda" and { 1 << 16, 1 << 20, 1 << 24 } or { 1 << 16, 1 << 20 })
local k, op, dtype = args.buffers, args.op, args.dtype

print(string.format("gpureduce %s, backend %s%s; %d buffers of %s, %s, variant %s", gr.version, backend,
  backend == "cuda" and " (" .. gr.device().name .. ")" or " (no CUDA device: nothing runs concurrently)",
  k, dtype, op, args.variant))

local function median(t)
  table.sort(t)
  local m = #t
  return m % 2 == 1 and t[(m + 1) // 2] or (t[m // 2] + t[m // 2 + 1]) / 2
end

local streams = {}
for i = 1, k do streams[i] = gr.stream() end
local one_stream = gr.stream()

-- the three ways; each returns the k results (each a list: argmin, argmax and minmax give two values)
local function sync(bufs)
  local out = {}
  for i, b in ipairs(bufs) do out[i] = { gr.reduce(b, { op = op, variant = args.variant }) } end
  return out
end

local function async_on(bufs, stream_of)
  local pending, out = {}, {}
  for i, b in ipairs(bufs) do
    pending[i] = gr.reduce(b, { op = op, variant = args.variant, async = true, stream = stream_of(i) })
  end
  for i, p in ipairs(pending) do
    out[i] = { p:wait() }
    p:free()
  end
  return out
end

local ways = {
  { name = "sync", run = sync },
  { name = "async x1", run = function(bufs) return async_on(bufs, function() return one_stream end) end },
  { name = "async x" .. k,
    run = function(bufs) return async_on(bufs, function(i) return streams[i] end) end },
}

print(string.format("\n%-10s %12s %12s %12s %9s %9s  %s", "n", "sync ms", "async x1 ms",
  "async x" .. k .. " ms", "x1 gain", "xk gain", "check"))
local failed = 0
for _, n in ipairs(list) do
  local bufs, want = {}, {}
  for i = 1, k do
    bufs[i] = validate.fill(gr.buffer(n, dtype), dtype, op, 100 + i)
    want[i] = validate.checker(gr, bufs[i], dtype, op)
  end
  -- check every way once, before timing any
  local bad = {}
  for _, w in ipairs(ways) do
    local ok, got = pcall(w.run, bufs)
    for i = 1, k do
      local good, why = false, tostring(got)
      if ok then good, why = want[i](got[i][1], got[i][2], { op = op, variant = args.variant }) end
      if not good then
        bad[#bad + 1] = string.format("%s buffer %d: %s", w.name, i, why)
        if not ok then break end
      end
    end
  end
  local ms = {}
  if #bad == 0 then
    for wi, w in ipairs(ways) do
      w.run(bufs)                                   -- warm-up: pools, scratch, first launches
      local t = {}
      for r = 1, args.reps do
        local t0 = gr.clock()
        w.run(bufs)
        t[r] = (gr.clock() - t0) * 1e3
      end
      ms[wi] = median(t)
    end
    print(string.format("%-10s %12.4f %12.4f %12.4f %8.2fx %8.2fx  ✓", sizes.format(n), ms[1], ms[2], ms[3],
      ms[1] / ms[2], ms[1] / ms[3]))
  else
    failed = failed + #bad
    print(string.format("%-10s %12s %12s %12s %9s %9s  ✗ (not timed)", sizes.format(n),
      "-", "-", "-", "-", "-"))
    for _, msg in ipairs(bad) do io.stderr:write("async_demo: ✗ ", msg, "\n") end
  end
  for _, b in ipairs(bufs) do b:free() end
end
print("\nwall time of all k reductions, results in Lua; gain = sync / async (median of " .. args.reps .. ")")
if failed > 0 then os.exit(1) end
