--- Issue 22's speed table: the new dtypes on the GPU, beside the read ceiling and PyTorch (make bench-types).
--   1. n = 2^28 of float16 and bfloat16 (sum, max, mean, var, argmax, norm, absmax), of the FP8 formats
--      (absmax, sum, max) and of int16 (sum, max): gpureduce's default path (auto) against the read-only
--      kernel over the same bytes (gr.bench_read), and against PyTorch's time for the same op, read from
--      the file named by TORCH_TIMES (experiments/peers/torch_types.py's output, from the same run);
--   2. small n (2^10..2^16): wall time per gr.sum(b) call from a Lua loop, each new dtype beside float32;
--   3. astype float32 -> bfloat16 of 2^28 against a float32 -> float32 device copy of the same elements,
--      in bytes moved (read + write) per second.
-- Every timed configuration is checked first against the cpu variant (float64 accumulation), at 2^28 on
-- its first 2^20 elements. Times:
-- device events, medians of BENCH_REPS (default 30) after 5 warm-ups; wall times: the monotonic clock.
-- A dtype or an op this build does not have is left out with a line that says so.
local gr = require "gpureduce"
local here = (arg and arg[0] or ""):match("^(.*)/[^/]*$") or "."
package.path = here .. "/?.lua;" .. package.path
local timing = require "lab.timing"

local reps, n, log2n = timing.start(gr, "types_bench", "TYPES_LOG2N")

local have_dtype, have_op = {}, {}
for _, d in ipairs(gr.dtypes()) do have_dtype[d] = true end
for _, o in ipairs(gr.ops()) do have_op[o] = true end

-- PyTorch's times: torch[dtype][op] = ms, or a string saying why there is none.
local torch = timing.peer_times(os.getenv("TORCH_TIMES"))

local failures = 0

--- Whether gr.reduce(b, op) agrees with the cpu variant in float64 (results are Lua floats or integers).
local function valid(b, op)
  local float_in = b:dtype():find("float") ~= nil
  local wide = float_in and not op:find("min") and not op:find("max")
  local want = { gr.reduce(b, { op = op, variant = "cpu", acc = wide and "float64" or nil }) }
  local got = { gr.reduce(b, { op = op }) }
  for i = 1, #want do
    local w, g = want[i], got[i]
    local tol = (op == "var" or op == "norm" or op == "mean" or op == "sum") and 1e-3 or 0
    if not (g == w or (math.type(w) == "float" and math.abs(g - w) <= tol * math.max(1, math.abs(w)))) then
      failures = failures + 1
      return false
    end
  end
  return true
end

local cases = {
  { "float16", { "sum", "max", "mean", "var", "argmax", "norm", "absmax" } },
  { "bfloat16", { "sum", "max", "mean", "var", "argmax", "norm", "absmax" } },
  { "float8_e4m3", { "absmax", "sum", "max" } },
  { "float8_e5m2", { "absmax", "sum", "max" } },
  { "int16", { "sum", "max" } },
  { "float32", { "sum", "max", "absmax" } },
}

local function per_call_us(f) return (timing.per_call_us(gr, f, 31)) end

-- Each table runs in its own protected call: one that fails says why and the others still run.
local function large_table()
  print(string.format("\n## n = 2^%d: auto against the read-only kernel and PyTorch (device events)", log2n))
  print(string.format("%-12s %-7s %9s %9s %9s %8s %10s %9s  %-5s  %s", "dtype", "op", "ms", "GB/s", "read GB/s",
    "vs read", "torch ms", "/ torch", "valid", "auto is"))
  for _, case in ipairs(cases) do
    local dtype, ops = case[1], case[2]
    if not have_dtype[dtype] then
      print(string.format("%-12s (not a dtype of this build)", dtype))
    else
      local b = gr.buffer(n, dtype)
      if dtype:find("float") then b:random(7, -1, 1) else b:random(7, -100, 100) end
      local read = gr.bench_read(b, { reps = reps, warmup = 5 }).gbps
      local rows = {}
      for _, op in ipairs(ops) do
        if have_op[op] then
          local ok = valid(b:slice(1, 1 << 20), op)     -- the cpu variant over all of 2^28 takes minutes
          local t = gr.bench(b, { op = op, reps = reps, warmup = 5 })
          rows[#rows + 1] = { op = op, t = t, ok = ok }
        end
      end
      read = math.max(read, gr.bench_read(b, { reps = reps, warmup = 5 }).gbps)
      for _, r in ipairs(rows) do
        local tm = torch[dtype] and torch[dtype][r.op]
        local tcol, ratio = "-", "-"
        if type(tm) == "number" then
          tcol, ratio = string.format("%.4f", tm), string.format("%.3f", r.t.ms / tm)
        elseif type(tm) == "string" then
          tcol = "n/a"
        end
        print(string.format("%-12s %-7s %9.4f %9.1f %9.1f %7.1f%% %10s %9s  %-5s  %s", dtype, r.op, r.t.ms, r.t.gbps,
          read, 100 * r.t.gbps / read, tcol, ratio, r.ok and "ok" or "WRONG", gr.plan(b, { op = r.op }).variant))
      end
      b:free()
    end
  end
  for _, d in ipairs({ "float8_e4m3", "float8_e5m2" }) do
    for _, o in ipairs({ "absmax", "sum", "max", "absmax_via_float", "sum_via_float" }) do
      local tm = torch[d] and torch[d][o]
      if tm then
        print(string.format("torch %-12s %-17s %s", d, o, type(tm) == "number" and string.format("%.4f ms", tm) or tm))
      end
    end
  end

end

local function small_table()
  print("\n## small n: wall us per gr.sum(b) call from a Lua loop (device buffer, value back in Lua)")
  local small_dtypes = { "float32" }
  for _, d in ipairs({ "float16", "bfloat16", "float8_e4m3", "float8_e5m2", "int16", "uint16", "bool" }) do
    if have_dtype[d] then small_dtypes[#small_dtypes + 1] = d end
  end
  local head = string.format("%10s", "n")
  for _, d in ipairs(small_dtypes) do head = head .. string.format(" %12s", d) end
  print(head .. "   (new dtype / float32, worst)")
  for _, k in ipairs({ 10, 12, 14, 16 }) do
    local line, base, worst = string.format("%10d", 1 << k), nil, 0
    for _, d in ipairs(small_dtypes) do
      local b = gr.buffer(1 << k, d)
      if d == "bool" then b:random(3) elseif d:find("float") then b:random(3, -1, 1) else b:random(3, 0, 3) end
      if not valid(b, "sum") then line = line .. " WRONG" end
      local us = per_call_us(function() return gr.sum(b) end)
      base = base or us
      if d ~= "float32" then worst = math.max(worst, us / base) end
      line = line .. string.format(" %12.2f", us)
      b:free()
    end
    print(line .. string.format("   %.3f", worst))
  end

end

local function astype_table()
  print(string.format("\n## astype float32 -> bfloat16 of 2^%d against a float32 copy (wall, sync per call)", log2n))
  local src = gr.buffer(n, "float32"):random(9, -1, 1)
  local function wall_ms(f) return timing.wall_ms(gr, f, reps) end
  local dst32 = gr.buffer(n, "float32")
  local copy_ms = wall_ms(function() gr.copy(dst32, src) end)
  local copy_gbps = n * 8 / copy_ms / 1e6
  print(string.format("%-28s %9.4f ms %9.1f GB/s", "copy float32 -> float32", copy_ms, copy_gbps))
  if src.astype and have_dtype.bfloat16 then
    local one = src:astype("bfloat16")
    local ok = one:get(1) == gr.buffer(1, "bfloat16", { where = "host" }):set({ src:get(1) }):get(1)
    one:free()
    local dst16 = gr.buffer(n, "bfloat16")
    local rows = {
      { "astype float32 -> bfloat16", function() src:astype("bfloat16"):free() end },
      { "copy float32 -> bfloat16", function() gr.copy(dst16, src) end },
    }
    for _, r in ipairs(rows) do
      local ms = wall_ms(r[2])
      local gbps = n * 6 / ms / 1e6
      print(string.format("%-28s %9.4f ms %9.1f GB/s %7.1f%% of the copy's  %s", r[1], ms, gbps,
        100 * gbps / copy_gbps, ok and "ok" or "WRONG"))
    end
    if not ok then failures = failures + 1 end
  else
    print("(astype is not in this build)")
  end

end

for _, t in ipairs({ large_table, small_table, astype_table }) do
  local ok, err = pcall(t)
  if not ok then
    print("TABLE FAILED: " .. tostring(err))
    failures = failures + 1
  end
end

if failures > 0 then
  print(string.format("\n%d configuration(s) gave a WRONG result", failures))
  os.exit(1)
end
