--- Where should auto use pipelined (v14) instead of warp_shuffle (v12)? Both with the single-pass finish,
-- per dtype and op, at several sizes, with the block auto would take (1024 threads from 64 MiB on, else
-- 256); each figure is gr.bench's median GB/s and, at 2^28, its share of the best of two read-kernel
-- measurements on the same buffer. Then the small-n wall time of gr.sum through each.
-- Run on the GPU host:  lua5.4 experiments/tuning/pipelined_probe.lua
local gr = require "gpureduce"

local reps = tonumber(os.getenv("PROBE_REPS") or "") or 30

local function row(dtype, k, ops)
  local n = 1 << k
  local b = gr.buffer(n, dtype)
  if dtype:find("float") then b:random(7, -1, 1) else b:random(7, 0, 3) end
  local bytes = n * ({ int8 = 1, uint8 = 1, float32 = 4, int32 = 4, float64 = 8 })[dtype]
  local block = bytes >= 64 << 20 and 1024 or 256
  local read = math.max(gr.bench_read(b, { reps = reps }).gbps, gr.bench_read(b, { reps = reps }).gbps)
  for _, op in ipairs(ops) do
    local g = {}
    for _, v in ipairs({ "warp_shuffle", "pipelined" }) do
      local want = gr.reduce(b, { op = op, variant = "cub" })
      local got = gr.reduce(b, { op = op, variant = v, finish = "single", block = block })
      local ok = got == want or (math.type(want) == "float" and math.abs(got - want) <= 1e-4 * math.max(1, math.abs(want)))
      local t = gr.bench(b, { op = op, variant = v, finish = "single", block = block, reps = reps })
      g[#g + 1] = string.format("%8.1f %6.1f%%%s", t.gbps, 100 * t.gbps / read, ok and "" or " WRONG")
    end
    print(string.format("%-7s 2^%-2d %-4s b%-4d read %6.0f | shuffle %s | pipelined %s", dtype, k, op, block,
      read, g[1], g[2]))
  end
  b:free()
end

print("# " .. gr.device().name)
for _, dtype in ipairs({ "int8", "uint8", "float32", "int32", "float64" }) do
  row(dtype, 28, gr.ops())
end
for _, k in ipairs({ 20, 22, 24, 26 }) do
  row("float32", k, { "sum" })
  row("int8", k, { "sum", "prod", "min" })
end

-- small n: wall time per gr.sum call, value back in Lua
local function wall(b, v)
  local opts = { variant = v, finish = "single" }
  for _ = 1, 200 do gr.sum(b, opts) end
  local t = {}
  for i = 1, 2000 do
    local t0 = gr.clock()
    gr.sum(b, opts)
    t[i] = gr.clock() - t0
  end
  table.sort(t)
  return t[1000] * 1e6
end
for _, k in ipairs({ 10, 16 }) do
  local b = gr.buffer(1 << k, "float32")
  b:random(3, -1, 1)
  print(string.format("gr.sum float32 n = 2^%d wall us: shuffle %.2f  pipelined %.2f", k, wall(b, "warp_shuffle"),
    wall(b, "pipelined")))
  b:free()
end
