--- Benchmarks on the GPU (make bench), with CUB and a read-only kernel in the same run as yardsticks.
--   1. n = 2^28, every op on float32, int32, float64, int8 and uint8: gpureduce's default path (auto) against
--      cub::DeviceReduce and against the read-bandwidth ceiling (a kernel that only reads the buffer);
--   2. small n: wall time per gr.sum(b) call from a Lua loop, the value back in Lua;
--   3. streamed host data: a 1 GiB pinned float32 buffer, against the pinned host-to-device copy;
--   4. n = 2^28, the reductions beyond the classic six (count, mean, var, ..., nanmean) on float32,
--      float64, int32 and int8, against the read ceiling; argmin/argmax beside CUB's DeviceReduce::ArgMin
--      and ArgMax (build/cub_yardsticks, same data shape);
--   5. reduce_many of 1,000 buffers of 2^10..2^16 elements against 1,000 gr.sum calls (wall time);
--   6. n = 2^28: wall time per synchronous call from Lua (what a caller waits for, the completion signal
--      included, which device events around the kernel attribute to the kernel);
--   7. user operators (gr.operator): one equal to sum against the built-in sum at 2^28 (device events),
--      the wall time per small call against gr.sum's, NVRTC's cold compile, and a new process that finds
--      the operator in the disk cache (time from creating it to its first result);
--   8. (printed after the first) n = 2^28, gpu_to_gpu's exact sum of float32 and float64 beside the default
--      sum, CUB's and the read ceiling, its value checked bit for bit against the host's exact sum.
-- Every configuration is validated against the host backend before it is timed; timed runs are never
-- the checked ones. Times: medians of BENCH_REPS (default 50) after 5 warm-ups, device events for
-- device work, the monotonic clock for wall times.
local gr = require "gpureduce"
local here = (arg and arg[0] or ""):match("^(.*)/[^/]*$") or "."
package.path = here .. "/?.lua;" .. package.path
local timing = require "lab.timing"

timing.need_gpu(gr, "bench")

local reps = tonumber(os.getenv("BENCH_REPS") or "") or 50
-- BENCH_ONLY: the tables to print, comma-separated, of "large", "exact", "small", "streamed", "ops", "many",
-- "wall" and "operators"
local only = os.getenv("BENCH_ONLY")
local function wanted(name)
  if not only then return true end
  for w in only:gmatch("[^,%s]+") do if w == name then return true end end
  return false
end
local dev = gr.device()
print(string.format("# gpureduce %s on %s (%d SMs, L2 %d MiB, cc %s), CUDA runtime %s, driver %s",
  gr.version, dev.name, dev.sms, dev.l2 >> 20, dev.cc, dev.cuda_runtime, dev.cuda_driver))
print(string.format("# medians of %d reps after 5 warm-ups", reps))

local failures = 0

local function valid(b, op, opts)
  -- the reference: float32 sums and products in float64 on the CPU
  local wide = b:dtype() == "float32" and (op == "sum" or op == "prod")
  local want = gr.reduce(b, { op = op, variant = "cpu", acc = wide and "float64" or nil })
  local got = gr.reduce(b, opts)
  local ok = got == want
  if not ok and math.type(want) == "float" then
    ok = math.abs(got - want) <= 1e-4 * math.max(1, math.abs(want)) or (got ~= got and want ~= want)
  end
  if not ok then failures = failures + 1 end
  return ok
end

local median = timing.median
local function per_call_us(f, batches) return timing.per_call_us(gr, f, batches) end

--- Paired wall times of fa and fb from a Lua loop, in us per call: after 500 warm-up calls of each,
-- `rounds` rounds of one batch of 200 calls of each, the order alternating between rounds so that drift
-- (clocks, other load) falls on both alike. Returns the medians of fa's and fb's batch means and the
-- median and the quartiles of the per-round differences fb - fa: a difference of a few tenths of a us
-- is resolved where two separate loops' medians wander by more than that.
local function paired_per_call_us(fa, fb, rounds)
  for _ = 1, 500 do fa(); fb() end
  local ta, tb, d = {}, {}, {}
  local function batch(f)
    local t0 = gr.clock()
    for _ = 1, 200 do f() end
    return (gr.clock() - t0) / 200 * 1e6
  end
  for i = 1, rounds do
    if i % 2 == 1 then ta[i] = batch(fa); tb[i] = batch(fb)
    else tb[i] = batch(fb); ta[i] = batch(fa) end
    d[i] = tb[i] - ta[i]
  end
  local md = median(d)                    -- sorts d
  return median(ta), median(tb), md, d[(rounds + 3) // 4], d[(3 * rounds + 1) // 4]
end

if wanted("large") then
  print("\n## n = 2^28: auto vs cub::DeviceReduce vs the read-only kernel (device events)")
  print(string.format("%-8s %-5s %9s %9s %9s %9s %9s %8s %8s  %-5s  %s", "dtype", "op", "auto ms", "auto GB/s",
    "cub ms", "cub GB/s", "read GB/s", "vs cub", "vs read", "valid", "auto is"))
  local n = 1 << 28
  for _, dtype in ipairs({ "float32", "int32", "float64", "int8", "uint8" }) do
    local b = gr.buffer(n, dtype)
    if dtype:find("float") then b:random(7, -1, 1) else b:random(7, 0, 3) end
    -- the ceiling is the best of two measurements, before and after the ops: a single one taken right
    -- after the buffer was made once came out 11% low for the int8 buffer (3687 against 4121-4134 GB/s
    -- on a fresh buffer), which flattered the 1-byte ratios
    local read = gr.bench_read(b, { reps = reps, warmup = 5 }).gbps
    local rows = {}
    -- the ops CUB takes (the classic six; a build before the op list had no `ops` and took them all)
    for _, op in ipairs(gr.variant("cub").ops or gr.ops()) do
      local ok = valid(b, op, { op = op }) and valid(b, op, { op = op, variant = "cub" })
      local a = gr.bench(b, { op = op, reps = reps, warmup = 5 })
      local c = gr.bench(b, { op = op, variant = "cub", reps = reps, warmup = 5 })
      rows[#rows + 1] = { op = op, a = a, c = c, ok = ok }
    end
    read = math.max(read, gr.bench_read(b, { reps = reps, warmup = 5 }).gbps)
    for _, r in ipairs(rows) do
      print(string.format("%-8s %-5s %9.4f %9.1f %9.4f %9.1f %9.1f %7.1f%% %7.1f%%  %-5s  %s", dtype, r.op, r.a.ms,
        r.a.gbps, r.c.ms, r.c.gbps, read, 100 * r.a.gbps / r.c.gbps, 100 * r.a.gbps / read,
        r.ok and "ok" or "WRONG", gr.plan(b, { op = r.op }).variant))
    end
    b:free()
  end
end

if wanted("exact") then
  -- gpu_to_gpu's exact kernel (cuda/kernels/exact.cu) beside the default sum, CUB's and the read ceiling; its value
  -- checked bit for bit against the host's exact sum of a host copy (engine/ops/exact.c), the same digits
  print("\n## n = 2^28: gpu_to_gpu sum (the exact kernel) vs auto vs cub::DeviceReduce vs the read-only kernel")
  print(string.format("%-8s %-10s %9s %9s %8s  %s", "dtype", "path", "ms", "GB/s", "vs read", "valid"))
  local n = 1 << 28
  for _, dtype in ipairs({ "float32", "float64" }) do
    local b = gr.buffer(n, dtype):random(7, -1, 1)
    local h = gr.copy(gr.buffer(n, dtype, { where = "host" }), b)
    local exact = { determinism = "gpu_to_gpu" }
    local ok = string.pack("<d", gr.sum(b, exact)) == string.pack("<d", gr.sum(h, exact))
    if not ok then failures = failures + 1 end
    h:free()
    local read = gr.bench_read(b, { reps = reps, warmup = 5 }).gbps
    local rows = {
      { "gpu_to_gpu", gr.bench(b, { determinism = "gpu_to_gpu", reps = reps, warmup = 5 }), ok },
      { "auto", gr.bench(b, { reps = reps, warmup = 5 }), valid(b, "sum", { op = "sum" }) },
      { "cub", gr.bench(b, { variant = "cub", reps = reps, warmup = 5 }), valid(b, "sum", { op = "sum", variant = "cub" }) },
    }
    read = math.max(read, gr.bench_read(b, { reps = reps, warmup = 5 }).gbps)
    for _, r in ipairs(rows) do
      print(string.format("%-8s %-10s %9.4f %9.1f %7.1f%%  %s", dtype, r[1], r[2].ms, r[2].gbps, 100 * r[2].gbps / read,
        r[3] and "ok" or "WRONG"))
    end
    local bytes = n * (dtype == "float32" and 4 or 8)
    print(string.format("%-8s %-10s %9.4f %9.1f %7.1f%%", dtype, "read", bytes / (read * 1e6), read, 100.0))
    b:free()
  end
end

if wanted("small") then
  print("\n## small n: wall time per gr.sum(b) call from a Lua loop (float32 device buffer, value back in Lua)")
  print(string.format("%10s %11s %11s  %s", "n", "median us", "min us", "valid"))
  for _, k in ipairs({ 8, 10, 12, 14, 16 }) do
    local b = gr.buffer(1 << k, "float32"):random(3)
    local ok = valid(b, "sum", { op = "sum" })
    local med, min = per_call_us(function() return gr.sum(b) end, 41)
    print(string.format("%10d %11.2f %11.2f  %s", 1 << k, med, min, ok and "ok" or "WRONG"))
  end
end

if wanted("wall") then
  print("\n## n = 2^28 wall: us per synchronous gr.reduce call from a Lua loop (auto, the value back in Lua)")
  print(string.format("%-8s %-6s %11s %11s  %s", "dtype", "op", "median us", "min us", "valid"))
  for _, dtype in ipairs({ "float32", "int8", "uint8" }) do
    local b = gr.buffer(1 << 28, dtype):random(7)
    for _, op in ipairs({ "sum", "max" }) do
      local ok = valid(b, op, { op = op })
      for _ = 1, 5 do gr.reduce(b, { op = op }) end
      local t = {}
      for i = 1, reps do
        local t0 = gr.clock()
        gr.reduce(b, { op = op })
        t[i] = (gr.clock() - t0) * 1e6
      end
      local lo = math.min(table.unpack(t))
      print(string.format("%-8s %-6s %11.2f %11.2f  %s", dtype, op, median(t), lo, ok and "ok" or "WRONG"))
    end
    b:free()
  end
end

if wanted("streamed") then
  print("\n## streamed host data: 1 GiB pinned float32 (monotonic clock, whole calls)")
  local n = 1 << 28
  local h = gr.buffer(n, "float32", { where = "host" }):random(5, -1, 1)
  local d = gr.buffer(n, "float32")
  local copies = {}
  for i = 1, 3 + math.min(reps, 20) do
    local t0 = gr.clock()
    gr.copy(d, h)
    if i > 3 then copies[#copies + 1] = gr.clock() - t0 end
  end
  local copy_gbps = n * 4 / median(copies) / 1e9
  print(string.format("pinned host-to-device copy: %.1f GB/s", copy_gbps))
  print(string.format("%10s %8s %9s %9s %8s  %s", "chunk MiB", "streams", "ms", "GB/s", "vs copy", "valid"))
  for _, cfg in ipairs({ { 16, 2 }, { 32, 4 }, { 64, 4 }, { 128, 4 } }) do
    local opts = { streamed = true, chunk = cfg[1] << 20, streams = cfg[2] }
    local want = gr.sum(d)
    local got = gr.sum(h, opts)
    local ok = math.abs(got - want) <= 1e-3 * math.max(1, math.abs(want))
    if not ok then failures = failures + 1 end
    local t = gr.bench(h, { streamed = true, chunk = cfg[1] << 20, streams = cfg[2], reps = math.min(reps, 20),
      warmup = 2 })
    print(string.format("%10d %8d %9.3f %9.1f %7.1f%%  %s", cfg[1], cfg[2], t.ms, t.gbps, 100 * t.gbps / copy_gbps,
      ok and "ok" or "WRONG"))
  end
end

--- CUB's ArgMin/ArgMax on the same shape, or nil (the yardstick program is built by make bench).
local function cub_arg(op, dtype, n)
  local p = io.popen(string.format("build/cub_yardsticks %s %s %d %d 2>&1", op, dtype, n, reps))
  if not p then return nil end
  local out = p:read("a")
  p:close()
  return tonumber(out:match("gbps=([%d.]+)"))
end

if wanted("ops") then
  print("\n## n = 2^28: the other reductions (auto) against the read-only kernel (device events)")
  print(string.format("%-8s %-8s %9s %9s %9s %8s %9s %8s  %-5s  %s", "dtype", "op", "ms", "GB/s", "read GB/s",
    "vs read", "cub GB/s", "vs cub", "valid", "auto is"))
  local n = 1 << 28
  local classic = { sum = true, prod = true, min = true, max = true, ["and"] = true, ["or"] = true }
  -- BENCH_DTYPES: a comma-separated subset of the dtypes of this table
  local dtypes = {}
  for d in (os.getenv("BENCH_DTYPES") or "float32,float64,int32,int8"):gmatch("[^,%s]+") do dtypes[#dtypes + 1] = d end
  for _, dtype in ipairs(dtypes) do
    local b = gr.buffer(n, dtype)
    if dtype:find("float") then b:random(7, -1, 1) else b:random(7, -100, 100) end
    local read = gr.bench_read(b, { reps = reps, warmup = 5 }).gbps
    local rows = {}
    for _, op in ipairs(gr.ops()) do
      if not classic[op] then
        local want = { gr.reduce(b, { op = op, variant = "cpu", acc = dtype == "float32" and op ~= "count"
          and not op:find("min") and not op:find("max") and "float64" or nil }) }
        local got = { gr.reduce(b, { op = op }) }
        local ok = true
        for i = 1, #want do
          local w, g = want[i], got[i]
          if not (g == w or (math.type(w) == "float" and math.abs(g - w) <= 1e-3 * math.max(1, math.abs(w)))) then
            ok = false
          end
        end
        if not ok then failures = failures + 1 end
        local t = gr.bench(b, { op = op, reps = reps, warmup = 5 })
        local c = (op == "argmin" or op == "argmax") and cub_arg(op, dtype, n) or nil
        rows[#rows + 1] = { op = op, t = t, ok = ok, cub = c }
      end
    end
    read = math.max(read, gr.bench_read(b, { reps = reps, warmup = 5 }).gbps)
    for _, r in ipairs(rows) do
      print(string.format("%-8s %-8s %9.4f %9.1f %9.1f %7.1f%% %9s %8s  %-5s  %s", dtype, r.op, r.t.ms, r.t.gbps, read,
        100 * r.t.gbps / read, r.cub and string.format("%.1f", r.cub) or "-",
        r.cub and string.format("%.1f%%", 100 * r.t.gbps / r.cub) or "-", r.ok and "ok" or "WRONG",
        gr.plan(b, { op = r.op }).variant))
    end
    b:free()
  end
end

if wanted("many") then
  print("\n## reduce_many: 1,000 buffers of 2^10..2^16 float32 elements, against 1,000 gr.sum calls (wall)")
  local bufs, total = {}, 0
  for i = 1, 1000 do
    local n = 1 << (10 + (i * 7919) % 7)
    bufs[i] = gr.buffer(n, "float32"):random(i, -1, 1)
    total = total + n
  end
  local many = gr.reduce_many(bufs, { op = "sum" })
  local ok = true
  for i = 1, #bufs do
    local w = gr.sum(bufs[i])
    if math.abs(many[i] - w) > 1e-3 * math.max(1, math.abs(w)) then ok = false end
  end
  if not ok then failures = failures + 1 end
  local function wall(f)
    for _ = 1, 3 do f() end
    local t = {}
    for i = 1, 21 do
      local t0 = gr.clock()
      f()
      t[i] = gr.clock() - t0
    end
    return median(t) * 1e3
  end
  local loop = wall(function() for i = 1, #bufs do gr.sum(bufs[i]) end end)
  local one = wall(function() gr.reduce_many(bufs, { op = "sum" }) end)
  print(string.format("%d elements in all: 1,000 gr.sum %.3f ms, reduce_many %.3f ms: %.1fx  %s", total, loop, one,
    loop / one, ok and "ok" or "WRONG"))
end

if wanted("operators") then
  local function sum_op(acc, name)
    return gr.operator { name = name or "usum", map = "x", reduce = "a + b", identity = "0", acc = acc }
  end
  print("\n## operators: gr.operator{map = 'x', reduce = 'a + b', identity = '0'} against the built-in sum, n = 2^28")
  print(string.format("%-8s %10s %10s %8s  %s", "dtype", "sum ms", "op ms", "op/sum", "valid"))
  local accs = { float32 = "float32", float64 = "float64", int32 = "int64", int8 = "int64" }
  for _, dtype in ipairs({ "float32", "float64", "int32", "int8" }) do
    local b = gr.buffer(1 << 28, dtype)
    if dtype:sub(1, 5) == "float" then b:random(11, -1, 1) else b:random(11) end
    local op = sum_op(accs[dtype])
    -- auto's sum of floats is warp_shuffle's with the operator's plan: the same bits
    local got, want = gr.reduce(b, { op = op }), gr.sum(b)
    local ok = got == want
    if not ok then failures = failures + 1 end
    local t_sum = gr.bench(b, { op = "sum", reps = reps, warmup = 5 }).ms
    local t_op = gr.bench(b, { op = op, reps = reps, warmup = 5 }).ms
    print(string.format("%-8s %10.4f %10.4f %7.1f%%  %s", dtype, t_sum, t_op, 100 * t_sum / t_op,
      ok and "ok" or "WRONG"))
    b:free()
  end
  print("(op/sum: the operator's speed as a share of the built-in sum's, auto: warp_shuffle's plan, pipelined for int8)")

  print("\n## operators: wall time per small call from a Lua loop, float32, paired with the built-in sum")
  print("(401 rounds of 200 calls of each, alternating; op - x: the median of the rounds' differences [quartiles])")
  print(string.format("%8s %9s %11s %9s %24s %24s", "n", "sum us", "reduce us", "op us", "op - gr.sum(b)",
    "op - reduce{op='sum'}"))
  local op = sum_op("float32")
  for _, k in ipairs({ 10, 16 }) do
    local b = gr.buffer(1 << k, "float32"):random(3)
    local o1, o2 = { op = op }, { op = "sum" }
    local f_op = function() return gr.reduce(b, o1) end
    local a, o, d, d1, d3 = paired_per_call_us(function() return gr.sum(b) end, f_op, 401)
    local r, _, e, e1, e3 = paired_per_call_us(function() return gr.reduce(b, o2) end, f_op, 401)
    print(string.format("%8d %9.2f %11.2f %9.2f %+8.2f [%+6.2f %+6.2f] %+8.2f [%+6.2f %+6.2f]", 1 << k, a, r, o,
      d, d1, d3, e, e1, e3))
  end

  print("\n## operators: compile and caches")
  local dir = os.tmpname()
  os.remove(dir)
  local fresh = gr.operator { name = "cold" .. os.time(), map = "x * x", reduce = "a + b", identity = "0", acc = "float64" }
  local info = fresh:info()
  print(string.format("cold compile (NVRTC, float64): %.1f ms NVRTC, %.1f ms in all (origin %s)", info.nvrtc_ms,
    info.total_ms, info.origin))
  -- a new process: the disk cache of GPUREDUCE_CACHE=dir, filled by a first process, read by a second
  local script = [[
    local gr = require "gpureduce"
    gr.sum(gr.buffer(1, "float32"))
    local b = gr.buffer(1000, "float32"):fill(1)
    local c0 = gr.clock()
    local op = gr.operator { name = "diskprobe", map = "x * x", reduce = "a + b", identity = "0", acc = "float32" }
    local v = gr.reduce(b, { op = op })
    io.write(string.format("%.3f %s %s", (gr.clock() - c0) * 1e3, op:info().origin, tostring(v)))
  ]]
  local file = os.tmpname()
  local fh = assert(io.open(file, "w"))
  fh:write(script)
  fh:close()
  local function child()
    local cmd = string.format("GPUREDUCE_CACHE=%s %s %s 2>&1", dir, arg and arg[-1] or "lua5.4", file)
    local f = io.popen(cmd)
    local out = f:read("a")
    f:close()
    return out
  end
  local first, second = child(), child()
  print(string.format("first process: %s ms (origin, value: %s)", first:match("^(%S+)") or "?", first))
  print(string.format("new process, disk cache: %s ms from gr.operator to the first result (%s)",
    second:match("^(%S+)") or "?", second))
  os.execute("rm -rf " .. dir)
  os.remove(file)
end

if failures > 0 then
  io.stderr:write(string.format("bench: %d configurations gave wrong results\n", failures))
  os.exit(1)
end
