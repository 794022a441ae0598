-- What the exact sum (gpu_to_gpu) costs beside the read kernel, by size: device-event time of gr.bench with
-- determinism = "gpu_to_gpu" and of gr.bench_read over the same buffer, 2^22 .. 2^28, float32 and float64,
-- each value checked bit for bit against the host's exact sum of a host copy (EXACT_PROBE_CHECK=0: not).
-- The slope over sizes is the kernel's streaming rate, the intercept its fixed cost (issue 26: the exact
-- sum at >= 95% of the read).
--   lua experiments/tuning/exact_probe.lua [reps]
local gr = require "gpureduce"
local reps = tonumber(arg[1] or "") or 50
local check = os.getenv("EXACT_PROBE_CHECK") ~= "0"     -- 0: time only (the host's exact sums take seconds)
local bad = 0
print(string.format("# %s, GPUREDUCE_EXACT_SHAPE=%s", gr.device().name, os.getenv("GPUREDUCE_EXACT_SHAPE") or "-"))
for _, dtype in ipairs({ "float32", "float64" }) do
  for _, lg in ipairs({ 22, 24, 26, 28 }) do
    local n = 1 << lg
    local b = gr.buffer(n, dtype):random(7, -1, 1)
    local ok = true
    if check then
      local h = gr.copy(gr.buffer(n, dtype, { where = "host" }), b)
      local exact = { determinism = "gpu_to_gpu" }
      ok = string.pack("<d", gr.sum(b, exact)) == string.pack("<d", gr.sum(h, exact))
      if not ok then bad = bad + 1 end
      h:free()
    end
    local read = gr.bench_read(b, { reps = reps, warmup = 5 }).ms
    local t = gr.bench(b, { determinism = "gpu_to_gpu", reps = reps, warmup = 5 }).ms
    read = math.min(read, gr.bench_read(b, { reps = reps, warmup = 5 }).ms)
    print(string.format("%-8s 2^%d read %8.4f ms exact %8.4f ms  %5.1f%% of read  +%.2f us  %s", dtype, lg, read, t,
      100 * read / t, 1000 * (t - read), check and (ok and "ok" or "WRONG") or "unchecked"))
    b:free()
  end
end
if bad > 0 then
  print(bad .. " WRONG")
  os.exit(1)
end
