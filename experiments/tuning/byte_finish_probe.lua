--- Which block size and finish suit the default path, per dtype, at n = 2^28 (and 2^30 for bytes)?
-- Each figure is gr.bench's median GB/s as a percentage of the best of two read-kernel measurements on
-- the same buffer. Run on the GPU host:  lua5.4 experiments/tuning/byte_finish_probe.lua
local gr = require "gpureduce"

local function probe(dtype, k, ops)
  local n = 1 << k
  local b = gr.buffer(n, dtype)
  if dtype:find("float") then b:random(7, -1, 1) else b:random(7, 0, 3) end
  local read = math.max(gr.bench_read(b, { reps = 50 }).gbps, gr.bench_read(b, { reps = 50 }).gbps)
  local line = { string.format("%-7s 2^%d read %.0f GB/s:", dtype, k, read) }
  for _, op in ipairs(ops) do
    for _, blk in ipairs({ 256, 512, 1024 }) do
      local t = gr.bench(b, { op = op, variant = "warp_shuffle", finish = "single", block = blk, reps = 50 })
      line[#line + 1] = string.format("%s/b%d %.1f%%", op, blk, 100 * t.gbps / read)
    end
    local t = gr.bench(b, { op = op, variant = "warp_shuffle", finish = "device", reps = 50 })
    line[#line + 1] = string.format("%s/device %.1f%%", op, 100 * t.gbps / read)
  end
  print(table.concat(line, "  "))
  b:free()
end

probe("int8", 28, { "sum", "min", "and", "or", "prod" })
probe("int8", 30, { "sum", "min", "prod" })
probe("float32", 28, { "sum", "max" })
probe("int32", 28, { "sum" })
probe("float64", 28, { "sum" })
