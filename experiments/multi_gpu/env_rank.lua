--- One rank of a job a launcher started: `gr.comm()` takes the rank, the size, the GPU (the local rank's)
-- and the rendezvous from the launcher's variables, then checks what the ranks compute together:
--   an all-reduce whose result is known, and c:reduce of one value;
--   c:reduce of every op it combines across ranks over the dtypes of across.lua (bfloat16, float16, FP8,
--   int16 and bool among them), of one value and along axes (1, -1 with keepdims, {1, 2}), against the
--   ranks' own local results combined in Lua (across.lua): exactly, but for float sums and products of
--   more than two ranks (NCCL's order), within 1e-5;
--   c:reduce of the gathered ops (mean, nanmean, var, std, norm, argmin, argmax, minmax) over ten dtypes,
--   each rank holding a different length: bit for bit what gr.debug_comm_combine gives over every rank's
--   data made here, and within spec/support/fuzz_reference.lua's bounds of that data concatenated;
--   c:reduce along axes of the gathered ops (mean, var, std, argmin, argmax, minmax from their parts; norm,
--   nanmean, integer var and std, and gpu_to_gpu sum and var from every rank's elements), each rank holding
--   a different number of rows: bit for bit gr.debug_comm_combine's result over every rank's rows;
--   with GPUREDUCE_BW_BYTES set, the bus bandwidth of c:allreduce over that many bytes of
--   GPUREDUCE_BW_DTYPE (default bfloat16), which rank 0 prints: "busbw <GB/s> GB/s".
-- Prints one line; exits 1 when a result is wrong. launch.lua starts it as torchrun and mpirun would;
-- under the real launchers (the module on LUA_CPATH):
--
--   torchrun --nproc-per-node=2 --no-python lua5.4 experiments/multi_gpu/env_rank.lua
--   GPUREDUCE_COMM_ID=$PWD/job.id mpirun -np 2 -x GPUREDUCE_COMM_ID lua5.4 experiments/multi_gpu/env_rank.lua
--   GPUREDUCE_COMM_ID=$PWD/job.id srun --ntasks-per-node=2 --gpus-per-node=2 lua5.4 experiments/multi_gpu/env_rank.lua
--
-- GPUREDUCE_N: elements per rank of the first all-reduce (default 2^20); GPUREDUCE_CASES=0 skips the cases.
local here = (arg and arg[0] or ""):match("^(.*)/[^/]*$") or "."
package.path = here .. "/?.lua;" .. here .. "/../../spec/?.lua;" .. package.path

local gr = require "gpureduce"
local across = require "across"

local n = math.tointeger(tonumber(os.getenv("GPUREDUCE_N") or "")) or 1 << 20
local launcher = os.getenv("RANK") and "torchrun" or os.getenv("OMPI_COMM_WORLD_RANK") and "mpirun"
  or os.getenv("SLURM_PROCID") and "Slurm" or "no launcher"

local c = gr.comm { timeout = 60 }
local rank, size, device = c:rank(), c:size(), c:device()

-- rank r holds r*n + 1 .. (r+1)*n; after the sum element i is size*i + n*size*(size-1)/2 on every rank
local b = gr.buffer(n, "int64", { device = device }):iota(rank * n + 1)
c:allreduce(b, "sum")
local shift = n * size * (size - 1) // 2
local first, last = b[1], b[n]
local ok = first == size + shift and last == size * n + shift
-- c:reduce: each rank's sum of the reduced buffer (the same everywhere), summed over the ranks
local whole = c:reduce(b)
ok = ok and whole == size * (size * (n * (n + 1) // 2) + n * shift)

-- c:reduce's cases: every op across ranks, of one value and along axes
local cases, wrong = 0, {}
if os.getenv("GPUREDUCE_CASES") ~= "0" then
  local shape, inexact = { 33, 65 }, size > 2
  local forms = { { axis = 1 }, { axis = -1, keepdims = true }, { axis = { 1, 2 } } }
  for _, dtype in ipairs(across.DTYPES) do
    for _, op in ipairs(across.OPS) do
      local one = across.data(gr, dtype, op, rank, 1000, device)
      local got = c:reduce(one, { op = op })
      local good, why = across.same(op, got, across.expected(gr, dtype, op, { 1000 }, { op = op }, size, device), inexact)
      cases = cases + 1
      if not good then wrong[#wrong + 1] = string.format("%s %s one value: %s", dtype, op, why) end
      local m = across.data(gr, dtype, op, rank, shape[1] * shape[2], device):view(shape)
      for _, form in ipairs(forms) do
        local opts = { op = op, axis = form.axis, keepdims = form.keepdims }
        local r = c:reduce(m, opts)
        good, why = across.same(op, across.flat(r), across.expected(gr, dtype, op, shape, opts, size, device), inexact)
        cases = cases + 1
        if not good then
          wrong[#wrong + 1] = string.format("%s %s axis %s: %s", dtype, op, type(form.axis) == "table" and "{1, 2}"
            or tostring(form.axis), why)
        end
      end
    end
  end
  -- the gathered ops: every rank's accumulator merged in rank order
  local R = require "support.fuzz_reference"
  for _, dtype in ipairs(across.GATHERED_DTYPES) do
    for _, op in ipairs(across.GATHERED) do
      local opts = { op = op, ddof = (op == "var" or op == "std") and 1 or nil }
      local mine = across.data(gr, dtype, op, rank, across.length(rank), device)
      local got, got2 = c:reduce(mine, opts)
      local good, why = across.check_gathered(gr, R, dtype, op, opts, size, device, got, got2)
      cases = cases + 1
      if not good then wrong[#wrong + 1] = string.format("%s %s gathered: %s", dtype, op, why) end
    end
  end
  -- the gathered ops along axes: every rank's partial results merged in rank order, or (norm, nanmean, var
  -- and std of integers, gpu_to_gpu) every rank's elements reduced whole, the ranks' rows one after another
  -- (rank q holds 20 + 7q rows): the bits of the same call made here from every rank's data
  local along = { { op = "mean" }, { op = "var" }, { op = "std", ddof = 1 }, { op = "argmin" }, { op = "argmax" },
    { op = "minmax" }, { op = "norm" }, { op = "nanmean" }, { op = "sum", determinism = "gpu_to_gpu" },
    { op = "var", determinism = "gpu_to_gpu" } }
  for _, dtype in ipairs({ "float32", "bfloat16", "float64", "int32", "int16" }) do
    for _, o in ipairs(along) do
      local float = dtype:match("float") ~= nil
      if float or not o.determinism then
        local function rows(q)
          return across.data(gr, dtype, o.op, q, (20 + 7 * q) * 33, device):view { 20 + 7 * q, 33 }
        end
        local all = {}
        for q = 0, size - 1 do all[q + 1] = rows(q) end
        for _, axis in ipairs({ 1, { 1, 2 } }) do
          local opts = { op = o.op, axis = axis, ddof = o.ddof, determinism = o.determinism }
          local got = { c:reduce(all[rank + 1], opts) }
          local want = { gr.debug_comm_combine(all, opts) }
          local good = #got == #want
          for k = 1, #want do good = good and got[k]:tobytes() == want[k]:tobytes() end
          cases = cases + 1
          if not good then
            wrong[#wrong + 1] = string.format("%s %s%s along axis %s: not the merge's bits", dtype, o.op,
              o.determinism and " gpu_to_gpu" or "", type(axis) == "table" and "{1, 2}" or tostring(axis))
          end
        end
      end
    end
  end
  -- one value at the edges, the same whichever way the ranks combine it (mailboxes or ncclAllReduce): a NaN
  -- of rank 0 loses to the others' numbers in min and max (NCCL's fmin/fmax) and wins a sum; a zero's sign
  -- as each rank's own sum of -0.0 has it; int64 and uint64 extremes pass exactly
  local function edge(dtype, value, opts, want, what)
    local got = c:reduce(gr.buffer(1, dtype, { device = device }):fill(value), opts)
    local good = got == want or (got ~= got and want ~= want)
    if good and want == 0 and math.type(want) == "float" then good = 1 / got == 1 / want end
    cases = cases + 1
    if not good then wrong[#wrong + 1] = string.format("%s: %s, expected %s", what, tostring(got), tostring(want)) end
  end
  local nan = 0 / 0
  if size > 1 then
    edge("float64", rank == 0 and nan or rank + 1, { op = "min" }, 2.0, "min with rank 0's NaN")
    edge("float64", rank == 0 and nan or rank + 1, { op = "max" }, size + 0.0, "max with rank 0's NaN")
  end
  edge("float64", rank == 0 and nan or rank + 1, { op = "sum" }, nan, "sum with rank 0's NaN")
  edge("float32", -0.0, { op = "sum" }, gr.sum(gr.buffer(1, "float32", { device = device }):fill(-0.0)), "sum of -0.0")
  edge("int64", math.mininteger + rank, { op = "min" }, math.mininteger, "min of int64 extremes")
  edge("uint64", -1 - rank, { op = "max" }, -1, "max of uint64 extremes")
  edge("bool", rank == size - 1, { op = "or" }, true, "or of one rank's true")
  edge("bool", rank ~= size - 1 or size == 1, { op = "and" }, size == 1, "and of one rank's false")
  ok = ok and #wrong == 0
end
local how = c:_oneshot()

-- the bus bandwidth of c:allreduce, as nccl-tests define it: bytes / time * 2 (k - 1) / k
local bw = tonumber(os.getenv("GPUREDUCE_BW_BYTES") or "")
local busbw
if bw then
  local dtype = os.getenv("GPUREDUCE_BW_DTYPE") or "bfloat16"
  local es = ({ float32 = 4, float64 = 8, bfloat16 = 2, float16 = 2 })[dtype]
  if not es then error("GPUREDUCE_BW_DTYPE: " .. dtype .. " (accepted: float32, float64, bfloat16, float16)") end
  local count = math.tointeger(bw // es)
  local big = gr.buffer(count, dtype, { device = device }):fill(1)
  c:allreduce(big, "sum")
  local times = {}
  for i = 1, 20 do
    c:barrier()
    local t0 = gr.clock()
    c:allreduce(big, "sum")
    times[i] = gr.clock() - t0
  end
  table.sort(times)
  local t = times[10]
  busbw = count * es / t / 1e9 * (size > 1 and 2 * (size - 1) / size or 1)
end
c:destroy()

print(string.format("%s: rank %d of %d on device %d: %s (allreduce b[1] = %d, b[%d] = %d; reduce %d; %d c:reduce cases; " ..
  "one value by %s%s)%s",
  launcher, rank, size, device, ok and "ok" or "WRONG", first, n, last, whole, cases,
  how and "mailboxes" or how == false and "ncclAllReduce" or "?",
  #wrong > 0 and ", wrong: " .. table.concat(wrong, "; ", 1, math.min(#wrong, 5)) or "",
  busbw and rank == 0 and string.format("; busbw %.1f GB/s", busbw) or ""))
os.exit(ok and 0 or 1)
