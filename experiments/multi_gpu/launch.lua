--- One command, N ranks, one GPU each, started as a launcher starts them: each child gets only the
-- variables torchrun sets (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT), then, in a second
-- job, the ones mpirun sets (OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, with GPUREDUCE_COMM_ID, an id file,
-- for the rendezvous), and runs env_rank.lua, which joins with gr.comm() and checks an all-reduce.
-- Neither torchrun nor mpirun is needed. Every other launcher variable is cleared in the children, so a
-- run inside a Slurm allocation shows the same.
--
--   lua experiments/multi_gpu/launch.lua [ranks = 2] [torchrun | mpirun | both = both] [n = 2^20]
--
-- Needs `ranks` GPUs (NCCL refuses two ranks of one communicator on one GPU; 1 works on one GPU) and the
-- module on LUA_CPATH (make). Exits 1 when a rank fails. torchrun's port is a random one from 20000 to
-- 59999 (GPUREDUCE_PORT chooses it): rank 0 listens there (NCCL's bootstrap root).
local here = (arg and arg[0] or ""):match("^(.*)/[^/]*$") or "."
package.path = here .. "/?.lua;" .. package.path

local gr = require "gpureduce"
local ranks = require "ranks"

local size = math.tointeger(tonumber(arg[1] or "2"))
local style = arg[2] or "both"
local n = arg[3] or tostring(1 << 20)
if not size or size < 1 or not ({ torchrun = 1, mpirun = 1, both = 1 })[style] then
  io.stderr:write("usage: lua experiments/multi_gpu/launch.lua [ranks >= 1] [torchrun | mpirun | both] [n]\n")
  os.exit(2)
end
if #gr.devices() < size then
  io.stderr:write(string.format("launch: %d ranks need %d GPUs; this machine has %d device(s)\n", size, size,
    #gr.devices()))
  os.exit(1)
end

local function q(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

-- what a launcher would not pass on: every family's variables and every rendezvous
local CLEAR = {}
for _, name in ipairs({ "RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "OMPI_COMM_WORLD_RANK",
  "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "NCCL_COMM_ID",
  "GPUREDUCE_COMM_ID", "TORCHELASTIC_USE_AGENT_STORE" }) do
  CLEAR[#CLEAR + 1] = "-u " .. name
end
CLEAR = table.concat(CLEAR, " ")

--- Rank r's command: `env -u ... NAME=value ... lua env_rank.lua`, one launcher's variables set.
local function command(vars)
  local set = {}
  for _, kv in ipairs(vars) do set[#set + 1] = kv[1] .. "=" .. q(kv[2]) end
  return string.format("env %s GPUREDUCE_N=%s %s %s %s 2>&1", CLEAR, q(n), table.concat(set, " "),
    q(arg[-1] or "lua5.4"), q(here .. "/env_rank.lua"))
end

local jobs = {}
if style ~= "mpirun" then
  math.randomseed(os.time() + math.floor(os.clock() * 1e6))
  local port = tonumber(os.getenv("GPUREDUCE_PORT") or "") or math.random(20000, 59999)
  jobs[#jobs + 1] = { "torchrun", function(r)
    return command({ { "RANK", r }, { "WORLD_SIZE", size }, { "LOCAL_RANK", r }, { "MASTER_ADDR", "127.0.0.1" },
      { "MASTER_PORT", port } })
  end }
end
if style ~= "torchrun" then
  local id = os.tmpname()
  os.remove(id)          -- rank 0 writes it, the others wait for it, rank 0 removes it once all have joined
  jobs[#jobs + 1] = { "mpirun", function(r)
    return command({ { "OMPI_COMM_WORLD_RANK", r }, { "OMPI_COMM_WORLD_SIZE", size },
      { "OMPI_COMM_WORLD_LOCAL_RANK", r }, { "GPUREDUCE_COMM_ID", id } })
  end, id }
end

local failed = {}
for _, job in ipairs(jobs) do
  local bad = ranks.run(size, job[2], function(_, out) io.write(out) end)
  if job[3] then os.remove(job[3]) end
  for _, why in ipairs(bad) do failed[#failed + 1] = job[1] .. ": " .. why end
end
if #failed > 0 then io.stderr:write("launch: ", table.concat(failed, "; "), "\n") end
os.exit(#failed > 0 and 1 or 0)
