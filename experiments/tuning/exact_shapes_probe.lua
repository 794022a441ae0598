-- The exact kernel's launch shapes at 2^28: gpu_to_gpu sums of float32 and float64 under several (block, grid),
-- device events against the read kernel and the default sum, three interleaved rounds; each shape's value checked
-- against the default shape's bits (the exact sum is the same for every launch shape). Needs a GPU.
--   lua experiments/tuning/exact_shapes_probe.lua
local gr = require "gpureduce"
local sms = gr.device().sms       -- grids in waves of this GPU (132 SMs on an H100)
local shapes = { {}, { grid = 2 * sms }, { block = 256, grid = 4 * sms }, { block = 256 }, { block = 1024, grid = sms },
  { block = 128, grid = 8 * sms }, { block = 512, grid = 3 * sms } }
for _, dtype in ipairs({ "float32", "float64" }) do
  local b = gr.buffer(1 << 28, dtype):random(7, -1, 1)
  local want = string.pack("<d", gr.sum(b, { determinism = "gpu_to_gpu" }))
  local t = {}
  for round = 1, 3 do
    local read = gr.bench_read(b, { reps = 50, warmup = 5 }).ms
    local auto = gr.bench(b, { reps = 50, warmup = 5 }).ms
    local row = { string.format("%s r%d read %.4f auto %.4f", dtype, round, read, auto) }
    for i, s in ipairs(shapes) do
      local o = { determinism = "gpu_to_gpu", reps = 50, warmup = 5 }
      for k, v in pairs(s) do o[k] = v end
      local ms = gr.bench(b, o).ms
      local oo = { determinism = "gpu_to_gpu" }
      for k, v in pairs(s) do oo[k] = v end
      local ok = string.pack("<d", gr.sum(b, oo)) == want
      row[#row + 1] = string.format("[%s/%s] %.4f %.1f%% %.3fx%s", s.block or "-", s.grid or "-", ms, 100 * read / ms,
        ms / auto, ok and "" or " WRONG")
    end
    print(table.concat(row, "  "))
  end
  b:free()
end
