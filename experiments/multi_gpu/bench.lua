--- Several GPUs, measured: `lua experiments/multi_gpu/bench.lua` (the launcher starts the ranks itself).
--   1. gr.sum over a sharded float32 buffer on 1, 2, ... GPUs, against one GPU's gr.sum of a plain buffer
--      of the same size: the speed-up. The size fits the machine: the largest power of two up to 2^32
--      elements whose plain buffer takes at most a quarter of the smallest GPU's memory
--      (GPUREDUCE_SHARD_N to choose it; GPUREDUCE_SHARD_DTYPE the dtype, default float32: issue 28 asks
--      for bfloat16 at 2^33);
--   2. c:allreduce bus bandwidth against bare ncclAllReduce (c:_bench_raw) in the same processes, over
--      sizes from 8 B to 1 GiB (at most an eighth of the smallest GPU's memory): bus bandwidth as
--      nccl-tests define it, algbw * 2 (k - 1) / k;
--   3. c:reduce of one value (a 1-element buffer) against a 1-element ncclAllReduce, per call (the way the
--      ranks combined it: their mailboxes, or ncclAllReduce with GPUREDUCE_COMM_ONESHOT=0);
--   and (1b) the sharded buffer's segmented sum, segments of 2^20 elements, against one GPU's.
-- Parts 2 and 3 run once per communicator size: 2 ranks and one per GPU (GPUREDUCE_RANKS="2,4" to choose),
-- one GPU each; with one GPU they run with a single rank. Exit status 1 when a rank fails (its status
-- and output are shown) or there is no CUDA device.
-- GPUREDUCE_BENCH_ONLY=comm runs parts 2 and 3 alone, =sharded parts 1 and 1b alone; GPUREDUCE_COMM_DTYPE is part 2's dtype (float32,
-- float64, bfloat16 or float16; default float32) and GPUREDUCE_COMM_BYTES its sizes ("2^28" or
-- "2^20,2^28"; default 8 B to 1 GiB by factors of 8).
local here = (arg and arg[0] or ""):match("^(.*)/[^/]*$") or "."
package.path = here .. "/?.lua;" .. here .. "/../?.lua;" .. package.path

local gr = require "gpureduce"
local sizes = require "lab.sizes"
local ranks = require "ranks"

local rank = tonumber(os.getenv("GPUREDUCE_RANK") or "")
local devices = gr.devices()
local ndev = #devices

local function fail(msg)
  io.stdout:flush()
  io.stderr:write("multi_gpu/bench: ", msg, "\n")
  os.exit(1)
end

if gr.backend() ~= "cuda" then fail("needs at least one CUDA device (backend is " .. gr.backend() .. ")") end

-- the smallest GPU's memory: every size below is a fraction of it
local memory = math.huge
for _, d in ipairs(devices) do memory = math.min(memory, d.memory or math.huge) end

--- The largest power of two at most `most` whose `bytes_each` elements fit in `budget` bytes (at least 1).
local function fit(most, bytes_each, budget)
  local v = most
  while v > 1 and v * bytes_each > budget do v = v // 2 end
  return v
end

local function median(t)
  table.sort(t)
  return t[(#t + 1) // 2]
end

--- Median seconds of f() over reps calls after a warm-up.
local function time(f, reps)
  f()
  local s = {}
  for i = 1, reps do
    local t0 = gr.clock()
    f()
    s[i] = gr.clock() - t0
  end
  return median(s)
end

if not rank then
  local d = gr.device()
  print(string.format("# multi-GPU benchmark: %d x %s, CUDA %s, NCCL %s", ndev, d and d.name or "cpu",
    d and d.cuda_runtime or "-", tostring(gr.nccl_version())))
  local dtype = os.getenv("GPUREDUCE_SHARD_DTYPE") or "float32"
  local es = #gr.buffer(1, dtype, { where = "host" }):tobytes()    -- the bytes of one element
  local n = fit(1 << 32, es, memory // 4)
  local given = os.getenv("GPUREDUCE_SHARD_N")
  if given and given ~= "" then
    local why
    n, why = sizes.parse(given)
    if not n then fail("GPUREDUCE_SHARD_N: '" .. given .. "' is not an element count (" .. why .. ")") end
  end
  print(string.format("# n = %d %s elements (%.1f GiB; smallest GPU %.1f GiB)", n, dtype, n * es / 2 ^ 30,
    memory / 2 ^ 30))

  --- One table of speed-ups: reduce(b) on a plain buffer of n elements of dtype, then on sharded ones
  -- over 1, 2, ... GPUs (the same values), each the median of 10 calls.
  local function scaling(title, reduce)
    print("\n## " .. title)
    print("| GPUs | ms (median) | GB/s | speed-up over 1 GPU |")
    print("| ---: | ---: | ---: | ---: |")
    local one
    do
      local b = gr.buffer(n, dtype):random(1)
      one = time(function() return reduce(b) end, 10)
      b:free()
      collectgarbage()
    end
    print(string.format("| 1 (plain buffer) | %.3f | %.0f | 1.00 |", one * 1e3, n * es / one / 1e9))
    for k = 1, ndev do
      local devices = {}
      for i = 1, k do devices[i] = i end
      local s = gr.sharded(n, dtype, { devices = devices }):random(1)
      local t = time(function() return reduce(s) end, 10)
      print(string.format("| %d | %.3f | %.0f | %.2f |", k, t * 1e3, n * es / t / 1e9, one / t))
      s:free()
      collectgarbage()
    end
  end

  local comm_only = os.getenv("GPUREDUCE_BENCH_ONLY") == "comm"
  -- 1. sharded sum
  if not comm_only then scaling(string.format("sharded %s sum, n = %d", dtype, n), gr.sum) end
  -- 1b. sharded segments: segments of 2^20 elements, one result each, into a buffer on device 1
  local m = 1 << 20
  if n % m == 0 and not comm_only then
    local out = gr.buffer(n // m, dtype == "float64" and "float64" or "float32")
    scaling(string.format("sharded " .. dtype .. " segmented sum, n = %d, segments of %d (%d results)", n, m, n // m),
      function(b) return gr.reduce(b, { op = "sum", segment = m, out = out }) end)
  end
  if os.getenv("GPUREDUCE_BENCH_ONLY") == "sharded" then os.exit(0) end
  -- 2 and 3: one child process per rank, for each communicator size (GPUREDUCE_RANKS="2,4"; by default 2
  -- and every GPU)
  local comm_sizes, seen = {}, {}
  for word in (os.getenv("GPUREDUCE_RANKS") or ("2," .. ndev)):gmatch("%d+") do
    local k = math.max(1, math.min(ndev, math.tointeger(tonumber(word))))
    if not seen[k] then comm_sizes[#comm_sizes + 1], seen[k] = k, true end
  end
  local id = os.tmpname()
  local failed = {}
  for _, size in ipairs(comm_sizes) do
    os.remove(id)
    local list = ranks.run(size, function(r)
      return ranks.command(r, size, { GPUREDUCE_ID = id }, arg[-1] or "lua5.4", arg[0])
    end, function(r, out)
      if r == 0 then io.write(out) elseif out:find("%S") then io.write("[rank " .. r .. "] " .. out) end
    end)
    for _, msg in ipairs(list) do failed[#failed + 1] = msg end
  end
  os.remove(id)
  if #failed > 0 then fail(table.concat(failed, "; ")) end
  os.exit(0)
end

local size = tonumber(os.getenv("GPUREDUCE_RANKS"))
local device = rank + 1
local c = gr.comm { rank = rank, size = size, id = os.getenv("GPUREDUCE_ID"), timeout = 120, device = device }
local function say(...) if rank == 0 then print(string.format(...)) end end

local dtype = os.getenv("GPUREDUCE_COMM_DTYPE") or "float32"
local es = ({ float32 = 4, float64 = 8, bfloat16 = 2, float16 = 2 })[dtype]
if not es then fail("GPUREDUCE_COMM_DTYPE: " .. dtype .. " (accepted: float32, float64, bfloat16, float16)") end
local largest = fit(1 << 30, 1, memory // 8)
local list = {}
if os.getenv("GPUREDUCE_COMM_BYTES") then
  for text in os.getenv("GPUREDUCE_COMM_BYTES"):gmatch("[^,]+") do
    local bytes, why = sizes.parse(text)
    if not bytes then fail("GPUREDUCE_COMM_BYTES: '" .. text .. "' is not a size (" .. why .. ")") end
    list[#list + 1] = bytes
  end
else
  for log2 = 3, 30, 3 do list[#list + 1] = 1 << log2 end
end

say("\n## c:allreduce against ncclAllReduce, %d rank(s), %s sum in place", size, dtype)
say("| bytes | c:allreduce us | busbw GB/s | ncclAllReduce us | busbw GB/s | ratio |")
say("| ---: | ---: | ---: | ---: | ---: | ---: |")
local factor = size > 1 and 2 * (size - 1) / size or 1
for _, bytes in ipairs(list) do
  if bytes > largest then break end
  bytes = math.max(es, bytes // es * es)
  local b = gr.buffer(bytes // es, dtype, { device = device }):fill(1)
  local reps = bytes >= (1 << 27) and 20 or 200
  c:barrier()
  c:allreduce(b, "sum")
  local t = time(function() c:allreduce(b, "sum") end, reps)
  c:barrier()
  local raw = c:_bench_raw(b, "sum", reps, true)
  local bw = function(s) return bytes / s / 1e9 * factor end
  say("| %d | %.1f | %.2f | %.1f | %.2f | %.3f |", bytes, t * 1e6, bw(t), raw * 1e6, bw(raw), bw(t) / bw(raw))
  b:free()
end

say("\n## c:reduce of one value against a 1-element ncclAllReduce (each call waited for)")
local one = gr.buffer(1, "float32", { device = device }):fill(rank + 1)
c:barrier()
local t = time(function() return c:reduce(one) end, 2000)
c:barrier()
local raw = c:_bench_raw(one, "sum", 2000, true)
local raw_back = c:_bench_raw(one, "sum", 2000, false)
local how = c:_oneshot() and "mailboxes" or "ncclAllReduce"
say("| c:reduce us (one value by) | ncclAllReduce us (each waited) | ncclAllReduce us (back to back) | ratio to waited |")
say("| ---: | ---: | ---: | ---: |")
say("| %.1f (%s) | %.1f | %.1f | %.2f |", t * 1e6, how, raw * 1e6, raw_back * 1e6, t / raw)
c:destroy()
