--- The segments lab: segmented reductions over segment sizes 1 .. 2^20, against CUB in the same run.
--
--   lua5.4 experiments/segments.lua [--n 2^28] [--sizes 2^0,2^2,...] [--op sum] [--dtype float32]
--                                  [--reps 20] [--offsets] [--cub build/cub_yardsticks] [--quick]
--
-- 1. Validate: every size is reduced once (fixed-size segments and, with --offsets, CSR boundaries)
--    and compared, segment by segment, with the host backend's reduction of the same segments (the cpu
--    variant over each slice). A size that fails is marked and not timed; the lab then exits 1.
-- 2. Time: gr.bench with device events (warm-up, median of --reps), the read ceiling (gr.bench_read) of
--    the same buffer, and CUB's DeviceSegmentedReduce::Sum on the same shape (build/cub_yardsticks,
--    float32 sum only) in the same run.
-- 3. Report, per segment size: segments, ms, GB/s of input read, % of the read ceiling, GB/s counting
--    the results written too ("mem"), and CUB's figures beside them.
-- Without a GPU it runs the host backend at a small n and says so; CUB is skipped.
local here = (arg and arg[0] or ""):match("^(.*)/[^/]*$") or "."
package.path = here .. "/?.lua;" .. package.path

local gr = require "gpureduce"
local argparse = require "argparse"
local sizes = require "lab.sizes"

local parser = argparse("segments.lua", "Segmented reductions over segment sizes, against CUB.")
parser:option("--n", "Elements in all (a size like 2^28).", nil)
parser:option("--sizes", "Segment sizes, comma-separated.", nil)
parser:option("--op", "The op.", "sum")
parser:option("--dtype", "The dtype.", "float32")
parser:option("--reps", "Timed repetitions.", "20")
parser:option("--cub", "The CUB yardstick program.", "build/cub_yardsticks")
parser:flag("--offsets", "Also time CSR boundaries of the same segments.")
parser:flag("--quick", "A small n and a few sizes.")
local args = parser:parse(arg)

local gpu = gr.backend() == "cuda"
local function size_of(s) return assert(sizes.parse(s), "not a size: " .. tostring(s)) end
local n = args.n and size_of(args.n) or (args.quick or not gpu) and (1 << 20) or (1 << 28)
local list = {}
if args.sizes then
  for s in args.sizes:gmatch("[^,]+") do list[#list + 1] = size_of(s) end
else
  for k = 0, args.quick and 10 or 20, args.quick and 2 or 1 do list[#list + 1] = 1 << k end
end
local reps = math.tointeger(tonumber(args.reps)) or 20
local dev = gr.device()
print(string.format("# segments: %s %s, n = %s, on %s%s", args.op, args.dtype, sizes.format(n),
  dev and dev.name or "the CPU backend", gpu and "" or " (no GPU: host backend, small n, no CUB)"))

local b = gr.buffer(n, args.dtype)
if args.dtype:find("float") then b:random(3, -1, 1) else b:random(3, -100, 100) end
local read = gpu and gr.bench_read(b, { reps = reps }).gbps or nil

--- The CUB figures for one size, or nil.
local function cub(m)
  if not gpu or args.op ~= "sum" or args.dtype ~= "float32" then return nil end
  local p = io.popen(string.format("%s segsum %d %d %d 2>&1", args.cub, m, n, reps))
  if not p then return nil end
  local out = p:read("a")
  p:close()
  local ms, gbps, mem = out:match("ms=([%d.]+) gbps=([%d.]+) mem_gbps=([%d.]+)")
  if not ms then return nil, out end
  return { ms = tonumber(ms), gbps = tonumber(gbps), mem = tonumber(mem) }
end

--- The segments' values from the host backend, one reduction per segment of a sample of segments.
local function check(m, opts, results)
  local k = n // m
  local got = results:totable(1, math.min(k, 4096))
  local step = math.max(1, k // 4096)
  for i = 1, #got do
    local s = (i - 1) * step
    if s >= k then break end
    local want = gr.reduce(b:slice(s * m + 1, m), { op = args.op, variant = "cpu",
      acc = (args.dtype == "float32" and args.op == "sum") and "float64" or nil })
    local g = results:get(s + 1)
    local ok = g == want or (math.type(want) == "float" and math.abs(g - want) <= 1e-4 * math.max(1, m ^ 0.5))
    if not ok then return false, string.format("segment %d: got %s, expected %s", s + 1, g, want) end
  end
  return true
end

local failed = 0
print(string.format("%10s %12s %10s %9s %7s %9s | %10s %9s %9s %7s", "m", "segments", "ms", "GB/s", "%read", "mem GB/s",
  "cub ms", "cub GB/s", "cub mem", "vs cub"))
for _, m in ipairs(list) do
  if n % m == 0 then
    local k = n // m
    local opts = { op = args.op, segment = m }
    local ok, why = check(m, opts, gr.reduce(b, opts))
    local offsets
    if ok and args.offsets then
      offsets = gr.buffer(k + 1, "int64"):iota(0, m)
      ok, why = check(m, opts, gr.reduce(b, { op = args.op, offsets = offsets }))
    end
    if not ok then
      failed = failed + 1
      print(string.format("%10d %12d  ✗ %s", m, k, why))
    else
      local t = gr.bench(b, { op = args.op, segment = m, reps = reps, warmup = 3 })
      local bytes = n * #b:tobytes(1, 1)
      local out_bytes = k * #gr.reduce(b:slice(1, m), { op = args.op, segment = m }):tobytes()
      local mem = (bytes + out_bytes) / (t.ms * 1e6)
      local c = cub(m)
      print(string.format("%10d %12d %10.4f %9.1f %6.1f%% %9.1f | %10s %9s %9s %7s", m, k, t.ms, t.gbps,
        read and 100 * t.gbps / read or 0, mem, c and string.format("%.4f", c.ms) or "-",
        c and string.format("%.1f", c.gbps) or "-", c and string.format("%.1f", c.mem) or "-",
        c and string.format("%.2fx", c.ms / t.ms) or "-"))
      if offsets then
        local o = gr.bench(b, { op = args.op, offsets = offsets, reps = reps, warmup = 3 })
        print(string.format("%10s %12s %10.4f %9.1f %6.1f%% %9.1f   (CSR offsets)", "", "", o.ms, o.gbps,
          read and 100 * o.gbps / read or 0, (bytes + out_bytes + (k + 1) * 8) / (o.ms * 1e6)))
      end
    end
  end
end
if read then print(string.format("read ceiling: %.1f GB/s", read)) end
if failed > 0 then
  io.stderr:write(string.format("segments: %d size(s) did not match the host backend\n", failed))
  os.exit(1)
end
