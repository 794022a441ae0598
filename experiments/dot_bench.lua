--- Issue 24's dot table: gr.dot of two vectors of 2^28 elements on the GPU, against the read ceiling of
-- both inputs (gr.bench_read over one buffer of 2n elements of the dtype: the same bytes) and PyTorch's
-- torch.dot / torch.vdot, read from the file named by TORCH_TIMES (experiments/peers/torch_dot.py's
-- output, from the same run). Every dtype is checked first: the integers against the same product over
-- pinned host copies of a 2^20-element prefix (exact, wrapping), the floats against the exactly rounded
-- dot (determinism = "gpu_to_gpu", float64) within the accumulators' error bounds (valid, below). Times: device events,
-- medians of BENCH_REPS (default 30) after 5 warm-ups.
--   lua experiments/dot_bench.lua            (scripts/gpu-batch.sh dot runs it with PyTorch's times)
local gr = require "gpureduce"
local here = (arg and arg[0] or ""):match("^(.*)/[^/]*$") or "."
package.path = here .. "/?.lua;" .. package.path
local timing = require "lab.timing"

local reps, n, log2n = timing.start(gr, "dot_bench", "DOT_LOG2N")

-- PyTorch's times: torch[dtype][op] = ms, or a string saying why there is none.
local torch = timing.peer_times(os.getenv("TORCH_TIMES"))

local failures = 0

--- Whether gr.dot(a, b) is right: integers exactly against pinned host copies of a prefix; floats against
-- the exact dot within (4096 + 64) u sum|a b|: the kernel's running sums are at most a few thousand
-- products long before the tree (sum |a b| is about n / 4 for uniform [-1, 1)). The float64 accumulator's
-- bound is tight enough to catch a product dropped or counted twice; the float32 one only a wild value.
local function valid(a, b, d)
  if not d:find("float") then
    local m = math.min(n, 1 << 20)
    local sa, sb = a:slice(1, m), b:slice(1, m)
    local ha = gr.buffer(m, d, { where = "host" })
    local hb = gr.buffer(m, d, { where = "host" })
    gr.copy(ha, sa)
    gr.copy(hb, sb)
    return gr.dot(sa, sb) == gr.dot(ha, hb)
  end
  local exact = gr.dot(a, b, { determinism = "gpu_to_gpu", acc = "float64" })
  local mass = n / 4
  local wide = gr.dot(a, b, { acc = "float64" })
  local narrow = gr.dot(a, b)
  local u = d == "float64" and 2.0 ^ -53 or 2.0 ^ -24
  return math.abs(wide - exact) <= 4160 * 2.0 ^ -53 * mass and math.abs(narrow - exact) <= 4160 * u * mass
end

print(string.format("\n## n = 2^%d: gr.dot against the read ceiling of both inputs and PyTorch (device events)",
  log2n))
print(string.format("%-10s %9s %9s %9s %8s %10s %9s %10s %9s  %s", "dtype", "ms", "GB/s", "read GB/s", "vs read",
  "torch.dot", "/ dot", "torch.vdot", "/ vdot", "valid"))
for _, d in ipairs({ "float32", "bfloat16", "float16", "float64", "int32", "int8" }) do
  local ok, err = pcall(function()
    local a, b = gr.buffer(n, d), gr.buffer(n, d)
    if d:find("float") then
      a:random(7, -1, 1)
      b:random(8, -1, 1)
    else
      a:random(7, -100, 100)
      b:random(8, -100, 100)
    end
    local good = valid(a, b, d)
    if not good then failures = failures + 1 end
    local c = gr.buffer(2 * n, d)
    local read = gr.bench_read(c, { reps = reps, warmup = 5 }).gbps
    local t = gr.bench_dot(a, b, { reps = reps, warmup = 5 })
    read = math.max(read, gr.bench_read(c, { reps = reps, warmup = 5 }).gbps)
    local cols = {}
    for _, op in ipairs({ "dot", "vdot" }) do
      local tm = torch[d] and torch[d][op]
      if type(tm) == "number" then
        cols[#cols + 1] = string.format("%10.4f %9.3f", tm, t.ms / tm)
      else
        cols[#cols + 1] = string.format("%10s %9s", tm and "n/a" or "-", "-")
      end
    end
    print(string.format("%-10s %9.4f %9.1f %9.1f %7.1f%% %s %s  %s", d, t.ms, t.gbps, read, 100 * t.gbps / read,
      cols[1], cols[2], good and "ok" or "WRONG"))
    a:free()
    b:free()
    c:free()
  end)
  if not ok then print(string.format("%-10s failed: %s", d, err)) end
  collectgarbage()
end

-- Row-wise dot products: (2^20, 256) pairs along axis 2 (issue 24's 90% target), and longer and shorter
-- rows of the same 2^28 elements, against the read ceiling of both; checked against gr.dot of each row of
-- a few (a row's bits are the same alone and among the others).
print("\n## rows: gr.dot(a, b, {axis = 2}) of (rows, cols) pairs of 2^" .. log2n .. " elements (device events, whole calls)")
print(string.format("%-10s %-14s %9s %9s %9s %8s %10s %9s  %s", "dtype", "shape", "ms", "GB/s", "read GB/s", "vs read",
  "vecdot ms", "/ torch", "valid"))
for _, d in ipairs({ "float32", "bfloat16" }) do
  for _, cols in ipairs({ 32, 256, 4096 }) do
    local ok, err = pcall(function()
      local rows = n // cols
      local a = gr.buffer(n, d):random(17, -1, 1):view{ rows, cols }
      local b = gr.buffer(n, d):random(18, -1, 1):view{ rows, cols }
      local got = gr.dot(a, b, { axis = 2 })
      local good = true
      for _, r in ipairs({ 1, rows // 2, rows }) do
        if got:get(r) ~= gr.dot(a:narrow(1, r, 1), b:narrow(1, r, 1), { axis = 2 }):get(1) then good = false end
      end
      if not good then failures = failures + 1 end
      local c = gr.buffer(2 * n, d)
      local read = gr.bench_read(c, { reps = reps, warmup = 5 }).gbps
      local t = gr.bench_dot(a, b, { axis = 2, reps = reps, warmup = 5 })
      read = math.max(read, gr.bench_read(c, { reps = reps, warmup = 5 }).gbps)
      local tm = torch[d] and torch[d]["rows" .. cols]
      local tcol = type(tm) == "number" and string.format("%10.4f %9.3f", tm, t.ms / tm) or string.format("%10s %9s", "-", "-")
      print(string.format("%-10s %-14s %9.4f %9.1f %9.1f %7.1f%% %s  %s", d, string.format("(%d, %d)", rows, cols), t.ms,
        t.gbps, read, 100 * t.gbps / read, tcol, good and "ok" or "WRONG"))
      a:free()
      b:free()
      c:free()
    end)
    if not ok then print(string.format("%-10s cols %d failed: %s", d, cols, err)) end
    collectgarbage()
  end
end

-- A two-input operator (issue 24: within 2% of gr.dot): the weighted sum x * w in the dot's accumulator
-- (float32), over the same pair, timed beside gr.dot in alternation (the better median of two each), and
-- checked against the dot within the float32 bound above. Then inputs of two dtypes (float32 x with
-- bfloat16 and int8 w), against the read ceiling of their bytes.
print("\n## a two-input operator: gr.reduce({x, w}, {op = wsum}) beside gr.dot(x, w) (device events)")
print(string.format("%-22s %9s %9s %9s %8s  %s", "inputs", "dot ms", "wsum ms", "/ dot", "vs read", "valid"))
for _, pair in ipairs({ { "float32", "float32" }, { "bfloat16", "bfloat16" }, { "float32", "bfloat16" },
                        { "float32", "int8" } }) do
  local ok, err = pcall(function()
    local dx, dw = pair[1], pair[2]
    local wsum = gr.operator{ name = "wsum", inputs = { "x", "w" }, map = "x * w", reduce = "a + b", identity = "0",
                              acc = "float32" }
    local x = gr.buffer(n, dx):random(27, -1, 1)
    local w = dw == "int8" and gr.buffer(n, dw):random(28, -100, 100) or gr.buffer(n, dw):random(28, -1, 1)
    local opts = { op = wsum, reps = reps, warmup = 5 }
    local dot_ms, same = math.huge, dx == dw
    local t
    for _ = 1, 2 do
      if same then dot_ms = math.min(dot_ms, gr.bench_dot(x, w, { reps = reps, warmup = 5 }).ms) end
      local r = gr.bench({ x, w }, opts)
      if not t or r.ms < t.ms then t = r end
    end
    local size = { float32 = 4, bfloat16 = 2, int8 = 1 }
    local bytes = n * (size[dx] + size[dw])
    local c = gr.buffer(bytes // 4, "float32")
    local read = gr.bench_read(c, { reps = reps, warmup = 5 }).gbps
    c:free()
    local got = gr.reduce({ x, w }, { op = wsum })
    local exact = same and gr.dot(x, w, { acc = "float64" }) or got
    local good = math.abs(got - exact) <= 4160 * 2.0 ^ -24 * n / 4 * (dw == "int8" and 100 or 1)
    if not good then failures = failures + 1 end
    print(string.format("%-22s %9s %9.4f %9s %7.1f%%  %s", dx .. " x " .. dw, same and string.format("%9.4f", dot_ms) or "-",
      t.ms, same and string.format("%9.3f", t.ms / dot_ms) or "-", 100 * bytes / (t.ms * 1e6) / read,
      good and "ok" or "WRONG"))
    x:free()
    w:free()
  end)
  if not ok then print(string.format("%s x %s failed: %s", pair[1], pair[2], err)) end
  collectgarbage()
end

for d, ops in pairs(torch) do
  for op, v in pairs(ops) do
    if type(v) == "string" then print(string.format("torch %s %s: %s", d, op, v)) end
  end
end
if failures > 0 then
  print(string.format("\n%d WRONG", failures))
  os.exit(1)
end
