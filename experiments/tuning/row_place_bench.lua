--[[
Rows and segments off a 16-byte boundary (issue 23: a row's bits must not depend on its address, which
made the segmented kernel read such rows as runs counted from the row's start, cuda/device/segmented.cuh's
span_run). Times, with gr.bench's device events (median of `reps`), segmented and axis reductions whose
rows start at every address modulo 16 -- odd row lengths, uneven offsets -- beside aligned controls and
the read kernel over the same bytes.

  lua experiments/tuning/row_place_bench.lua [log2 n = 28] [reps = 30]

Run it with two modules in one session (before and after a change: GPUREDUCE_MODULE=<dir of
gpureduce/core.so> or LUA_CPATH) and compare the columns; scripts/gpu-batch.sh has no step for it.
]]
local gr = require "gpureduce"

local log2n = tonumber(arg[1]) or 28
local reps = tonumber(arg[2]) or 30
local n = 1 << log2n

local function offsets_for(len_of, total)
  local o, at = { 0 }, 0
  while at < total do
    local l = math.min(len_of(#o), total - at)
    at = at + l
    o[#o + 1] = at
  end
  return gr.buffer(o, "int64", { where = "device" }), #o - 1
end

print(string.format("# %s, n = 2^%d, median of %d (device events); %% of the read kernel", gr.devices()[1].name, log2n, reps))
print(string.format("%-10s %-34s %10s %8s", "dtype", "case", "us", "% read"))
for _, dtype in ipairs({ "float32", "bfloat16" }) do
  local b = gr.buffer(n, dtype, { where = "device" })
  b:random(7, -1, 1)
  local read = gr.bench_read(b, { reps = reps }).ms
  local function row(case, r)
    print(string.format("%-10s %-34s %10.1f %7.1f%%", dtype, case, r.ms * 1e3, read / r.ms * 100))
  end
  for _, len in ipairs({ 5, 37, 1001, 1024, 65537 }) do
    local rows = n // len
    local m = b:narrow(1, 1, rows * len)
    row(string.format("segment = %d", len), gr.bench(m, { op = "sum", segment = len, reps = reps }))
    row(string.format("axis 2 of (%d, %d)", rows, len), gr.bench(m:view { rows, len }, { op = "sum", axis = 2,
      reps = reps }))
  end
  -- uneven offsets: lengths 1000..5000 (most segments start off a boundary), and the same rounded to 16 bytes
  local per = 16 // #gr.buffer(1, dtype, { where = "host" }):tobytes()
  local seed = 12345
  local function uneven(i)
    seed = (seed * 1103515245 + 12345 + i) % 2147483648
    return 1000 + seed % 4001
  end
  local o1 = offsets_for(uneven, n)
  seed = 12345
  local o2 = offsets_for(function(i) return (uneven(i) + per - 1) // per * per end, n)
  row("offsets, 1000-5000 elements", gr.bench(b, { op = "sum", offsets = o1, reps = reps }))
  row("offsets, the same rounded to 16 B", gr.bench(b, { op = "sum", offsets = o2, reps = reps }))
  local x = b:narrow(1, 1, (n // 1001) * 1001):view { n // 1001, 1001 }
  if gr.bench_dot then
    local y = gr.buffer(n, dtype, { where = "device" })
    y:random(9, -1, 1)
    local yv = y:narrow(1, 1, (n // 1001) * 1001):view { n // 1001, 1001 }
    local r = gr.bench_dot(x, yv, { axis = 2, reps = reps })
    print(string.format("%-10s %-34s %10.1f %7.1f%%", dtype, "dot axis 2 of (n/1001, 1001)", r.ms * 1e3,
      2 * read / r.ms * 100))
    r = gr.bench_dot(b:view { n // 256, 256 }, y:view { n // 256, 256 }, { axis = 2, reps = reps })
    print(string.format("%-10s %-34s %10.1f %7.1f%%", dtype, "dot axis 2 of (n/256, 256)", r.ms * 1e3,
      2 * read / r.ms * 100))
  end
  b:free()
end
