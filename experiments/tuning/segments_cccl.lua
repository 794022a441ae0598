-- Issue 26's small segments beside the newest CCCL: float32 sums of 2^LOG2N elements in segments of M, our
-- segmented kernel (gr.bench, device events) against cub::DeviceSegmentedReduce::Sum of the newest CCCL --
-- with a fixed segment size, which picks sub-warp, warp or block kernels by the size, and over offsets --
-- and of the toolkit's (offsets), each from experiments/tuning/cccl_segments.cu built against that CCCL:
--   lua experiments/tuning/segments_cccl.lua NEW_BIN OLD_BIN [LOG2N]
-- Ours is checked first against the cpu variant on a few segments.
local gr = require "gpureduce"
local new_bin, old_bin, lg = arg[1], arg[2], tonumber(arg[3] or "26")
local n, reps = 1 << lg, 50
local b = gr.buffer(n, "float32"):random(3, -1, 1)

--- The median ms a yardstick prints, or nil.
local function cccl(bin, form, m)
  local p = io.popen(string.format("%s %s %d %d %d 2>&1", bin, form, m, n, reps))
  local text = p:read("a")
  p:close()
  return tonumber(text:match("ms=([%d.]+)")), text:match("cccl=(%d+)")
end

print(string.format("# segmented float32 sum of 2^%d elements on %s; ms, medians of %d (device events)", lg,
  (gr.device() or { name = "cpu" }).name, reps))
print(string.format("%8s %10s %12s %12s %12s %9s %9s  %s", "segment", "ours", "new fixed", "new offsets",
  "old offsets", "/fixed", "/old", "valid"))
for _, m in ipairs({ 1, 2, 4, 8, 16, 32, 64, 128, 256, 1024, 4096 }) do
  local k = n // m
  local got = gr.reduce(b, { op = "sum", segment = m }):totable(1)
  local ok = true
  for _, s in ipairs({ 1, k // 2 + 1, k }) do
    local want = gr.reduce(b:slice((s - 1) * m + 1, m), { op = "sum", variant = "cpu", acc = "float64" })
    ok = ok and math.abs(got[s] - want) <= 1e-5 * m
  end
  local t = gr.bench(b, { op = "sum", segment = m, reps = reps, warmup = 5 }).ms
  local f, version = cccl(new_bin, "fixed", m)
  local o = cccl(new_bin, "offsets", m)
  local old = cccl(old_bin, "offsets", m)
  print(string.format("%8d %10.4f %12s %12s %12s %9s %9s  %s (cccl %s)", m, t, f and string.format("%.4f", f) or "-",
    o and string.format("%.4f", o) or "-", old and string.format("%.4f", old) or "-",
    f and string.format("%.3f", t / f) or "-", old and string.format("%.3f", t / old) or "-", ok and "ok" or "WRONG",
    tostring(version)))
end
