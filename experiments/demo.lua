--- The main job for now: reduce a large random buffer with every op and print results and timings.
-- Runs on the GPU when there is one, otherwise on the CPU backend (and says so).
--   lua5.4 experiments/demo.lua [n]
local gr = require "gpureduce"

local backend = gr.backend()
local n = math.tointeger(tonumber(arg and arg[1] or "")) or (backend == "cuda" and 1 << 28 or 1 << 22)
local dev = gr.device()

print(string.format("gpureduce %s, backend %s%s", gr.version, backend,
  dev and string.format(" (%s, %d SMs, CUDA %s)", dev.name, dev.sms, dev.cuda_runtime)
  or " (no CUDA device: running the host backend)"))
print(string.format("n = %d elements per buffer, random data; time = median of 20 after 3 warm-ups", n))
print()
print(string.format("%-8s %-5s %24s %10s %10s  %s", "dtype", "op", "result", "ms", "GB/s", "check"))

local function show(v)
  if math.type(v) == "float" then return string.format("%.9g", v) end
  return tostring(v)
end

for _, dtype in ipairs({ "float32", "float64", "int32", "uint8" }) do
  local b = gr.buffer(n, dtype)
  if dtype:find("float") then b:random(1, -1, 1) else b:random(1, 0, 100) end
  for _, op in ipairs(gr.ops()) do
    local value = gr.reduce(b, { op = op })
    -- the host backend is the reference on a GPU machine; on the CPU it is the backend itself
    local check = "-"
    if backend == "cuda" then
      local wide = b:dtype() == "float32" and (op == "sum" or op == "prod")
      local ref = gr.reduce(b, { op = op, variant = "cpu", acc = wide and "float64" or nil })
      local ok = value == ref
      if not ok and math.type(ref) == "float" then
        ok = math.abs(value - ref) <= 1e-4 * math.max(1, math.abs(ref)) or (value ~= value and ref ~= ref)
      end
      check = ok and "ok" or ("MISMATCH (cpu " .. show(ref) .. ")")
    end
    local t = gr.bench(b, { op = op, reps = 20, warmup = 3 })
    print(string.format("%-8s %-5s %24s %10.4f %10.1f  %s", dtype, op, show(value), t.ms, t.gbps, check))
  end
  b:free()
end
