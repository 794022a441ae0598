--- Benchmarks on the GPU, with CUB in the same run as the yardstick (make bench).
--   large: float32 sum at n = 2^28 (and the other ops/types), gpureduce's default path vs
--          cub::DeviceReduce, medians of `reps` timings with device events after warm-up;
--   small: gr.sum(b) wall time per call from a Lua loop (value back in Lua), n <= 2^16.
-- Validates every configuration before timing it; never times a checked run.
local gr = require "gpureduce"

if gr.backend() ~= "cuda" then
  io.stderr:write("bench: no CUDA device (backend is cpu): these benchmarks need a GPU\n")
  os.exit(1)
end

local reps = tonumber(os.getenv("BENCH_REPS") or "") or 50
local dev = gr.device()
print(string.format("# gpureduce %s on %s (%d SMs, L2 %d MiB, cc %s), CUDA runtime %s, driver %s",
  gr.version, dev.name, dev.sms, dev.l2 >> 20, dev.cc, dev.cuda_runtime, dev.cuda_driver))
print(string.format("# medians of %d reps after 5 warm-ups, device events; GB/s = bytes read / time", reps))

local function check(b, op, opts)
  local want = gr.reduce(b, { op = op, variant = "cpu" })
  local got = gr.reduce(b, opts)
  if got == want then return true end
  if math.type(want) == "float" then
    return math.abs(got - want) <= 1e-4 * math.max(1, math.abs(want))
  end
  return false
end

-- Large sizes: the default path against CUB.
print("\n## n = 2^28: gpureduce auto vs cub::DeviceReduce")
print(string.format("%-8s %-5s %10s %10s %10s %10s %8s  %s", "dtype", "op", "auto ms", "auto GB/s", "cub ms",
  "cub GB/s", "auto/cub", "valid"))
local n = 1 << 28
for _, dtype in ipairs({ "float32", "int32", "float64", "int8" }) do
  local b = gr.buffer(n, dtype)
  if dtype:find("float") then b:random(7, -1, 1) else b:random(7, 0, 3) end
  for _, op in ipairs(gr.ops()) do
    local valid = check(b, op, { op = op }) and check(b, op, { op = op, variant = "cub" })
    local a = gr.bench(b, { op = op, reps = reps, warmup = 5 })
    local c = gr.bench(b, { op = op, variant = "cub", reps = reps, warmup = 5 })
    print(string.format("%-8s %-5s %10.4f %10.1f %10.4f %10.1f %7.1f%%  %s", dtype, op, a.ms, a.gbps, c.ms,
      c.gbps, 100 * c.ms / a.ms, valid and "ok" or "WRONG"))
  end
  b:free()
end

-- Small sizes: wall time per call from Lua, the value back in Lua.
print("\n## small n: wall time per gr.sum(b) call from a Lua loop (float32, device buffer)")
print(string.format("%10s %12s %12s", "n", "median us", "min us"))
for _, k in ipairs({ 10, 12, 14, 16 }) do
  local b = gr.buffer(1 << k, "float32"):random(3)
  assert(check(b, "sum", { op = "sum" }), "small-size result is wrong")
  for _ = 1, 200 do gr.sum(b) end
  local batches = {}
  for i = 1, 31 do
    local t0 = gr.clock()
    for _ = 1, 100 do gr.sum(b) end
    batches[i] = (gr.clock() - t0) / 100 * 1e6
  end
  table.sort(batches)
  print(string.format("%10d %12.2f %12.2f", 1 << k, batches[16], batches[1]))
end
