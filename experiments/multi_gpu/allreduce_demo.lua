--- Two processes, one GPU each, joined by an NCCL communicator: `lua experiments/multi_gpu/allreduce_demo.lua`
-- starts its own ranks (this script again, with RANK set), waits for them and prints what each saw.
-- Needs two GPUs (NCCL refuses two ranks on one GPU) and the module built (make).
--
--   lua experiments/multi_gpu/allreduce_demo.lua [ranks = 2] [n = 2^20]
local here = (arg and arg[0] or ""):match("^(.*)/[^/]*$") or "."
package.path = here .. "/?.lua;" .. package.path

local gr = require "gpureduce"
local ranks = require "ranks"

local rank = tonumber(os.getenv("GPUREDUCE_RANK") or "")
local size = tonumber(arg[1] or os.getenv("GPUREDUCE_RANKS") or "2")
local n = tonumber(arg[2] or os.getenv("GPUREDUCE_N") or tostring(1 << 20))

if not rank then
  -- the launcher: one child per rank, all started before any is waited for
  if #gr.devices() < size then
    io.stderr:write(string.format("%d ranks need %d GPUs; this machine has %d device(s)\n", size, size, #gr.devices()))
    os.exit(1)
  end
  local id = os.tmpname()
  os.remove(id)        -- rank 0 writes it, the others wait for it, rank 0 removes it once all have joined
  local failed = ranks.run(size, function(r)
    return ranks.command(r, size, { GPUREDUCE_N = n, GPUREDUCE_ID = id }, arg[-1] or "lua5.4", arg[0])
  end, function(_, out) io.write(out) end)
  os.remove(id)
  if #failed > 0 then io.stderr:write("allreduce_demo: ", table.concat(failed, "; "), "\n") end
  os.exit(#failed > 0 and 1 or 0)
end

-- a rank: its own GPU, its own slice of numbers
local device = rank + 1
local c = gr.comm { rank = rank, size = size, id = os.getenv("GPUREDUCE_ID"), timeout = 60, device = device }
local b = gr.buffer(n, "float64", { device = device }):iota(rank * n + 1)    -- rank r holds r*n+1 .. (r+1)*n
local sum = c:reduce(b)                                  -- local sum, then NCCL across the ranks
local total = size * n
local want = total * (total + 1) / 2
c:allreduce(b, "sum")                                    -- element-wise: b[i] = sum over ranks
local first = b[1]
c:barrier()
print(string.format("rank %d of %d (GPU %d, %s): c:reduce sum = %.0f (1 + ... + %d = %.0f) %s; allreduce b[1] = %.0f",
  rank, size, device, gr.devices()[device].name, sum, total, want, sum == want and "ok" or "WRONG", first))
c:destroy()
