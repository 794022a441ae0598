--- One command, N ranks, one GPU each, started as a launcher starts them: each child gets only the
-- variables that launcher sets and runs env_rank.lua, which joins with gr.comm() and checks an all-reduce
-- and c:reduce's cases (across.lua). Neither torchrun nor mpirun is needed. Every other launcher variable
-- is cleared in the children, so a run inside a Slurm allocation shows the same. The jobs (`style`):
--   torchrun     RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT (the rendezvous at MASTER_PORT);
--   mpirun       OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, with GPUREDUCE_COMM_ID, an id file;
--   agent-store  torchrun's as its static rendezvous sets them: TORCHELASTIC_USE_AGENT_STORE=True while
--                something listens on MASTER_PORT (torchrun's store; here a python3 listener), so the
--                ranks must meet at MASTER_PORT + 1;
--   net          torchrun's twice, each measuring c:allreduce's bus bandwidth (GPUREDUCE_BW_BYTES of
--                GPUREDUCE_BW_DTYPE, default 64 MiB of bfloat16): with NCCL's default transports, then as
--                two hosts would talk -- NCCL_SHM_DISABLE=1 NCCL_P2P_DISABLE=1 NCCL_IB_DISABLE=1 and
--                NCCL_SOCKET_IFNAME=lo (unless set), the sockets transport over loopback. NCCL's log
--                (NCCL_DEBUG=INFO, to a file per rank) says which transports connected the ranks; the
--                second job fails if any was not the network's;
--   both         torchrun, then mpirun (the default); all: torchrun, mpirun, agent-store, net.
--
--   lua experiments/multi_gpu/launch.lua [ranks = 2] [style = both] [n = 2^20]
--
-- Needs `ranks` GPUs (NCCL refuses two ranks of one communicator on one GPU; 1 works on one GPU) and the
-- module on LUA_CPATH (make). Exits 1 when a rank fails. torchrun's port is a random one from 20000 to
-- 59999 (GPUREDUCE_PORT chooses it): rank 0 listens there (NCCL's bootstrap root). NVLink multicast stays
-- as the environment says (NCCL_NVLS_ENABLE, passed on; 0 when unset).
local here = (arg and arg[0] or ""):match("^(.*)/[^/]*$") or "."
package.path = here .. "/?.lua;" .. package.path

local gr = require "gpureduce"
local ranks = require "ranks"

local STYLES = { torchrun = { "torchrun" }, mpirun = { "mpirun" }, ["agent-store"] = { "agent-store" },
  net = { "net-default", "net" }, both = { "torchrun", "mpirun" },
  all = { "torchrun", "mpirun", "agent-store", "net-default", "net" } }

local size = math.tointeger(tonumber(arg[1] or "2"))
local style = arg[2] or "both"
local n = arg[3] or tostring(1 << 20)
if not size or size < 1 or not STYLES[style] then
  io.stderr:write("usage: lua experiments/multi_gpu/launch.lua [ranks >= 1] [torchrun | mpirun | both | agent-store " ..
    "| net | all] [n]\n")
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
  return string.format("env %s GPUREDUCE_N=%s NCCL_NVLS_ENABLE=%s %s %s %s 2>&1", CLEAR, q(n),
    q(os.getenv("NCCL_NVLS_ENABLE") or "0"), table.concat(set, " "), q(arg[-1] or "lua5.4"), q(here .. "/env_rank.lua"))
end

math.randomseed(os.time() + math.floor(os.clock() * 1e6))
local function a_port() return tonumber(os.getenv("GPUREDUCE_PORT") or "") or math.random(20000, 59999) end

--- torchrun's variables for rank r, meeting at port, with `more` ({name, value} pairs) after them.
local function torchrun_vars(r, port, more)
  local vars = { { "RANK", r }, { "WORLD_SIZE", size }, { "LOCAL_RANK", r }, { "MASTER_ADDR", "127.0.0.1" },
    { "MASTER_PORT", port } }
  for _, kv in ipairs(more or {}) do vars[#vars + 1] = kv end
  return vars
end

--- A temporary folder, for NCCL's logs.
local function tmpdir()
  local d = os.tmpname()
  os.remove(d)
  assert(os.execute("mkdir -p " .. q(d)))
  return d
end

--- The transports NCCL's logs in folder d name ("via P2P/CUMEM", "via NET/Socket/0", ...), sorted, distinct.
local function transports(d)
  local seen, list = {}, {}
  for r = 0, size - 1 do
    local f = io.open(d .. "/rank" .. r .. ".log")
    if f then
      for via in f:read("a"):gmatch("via (%S+)") do
        if not seen[via] then seen[via], list[#list + 1] = true, via end
      end
      f:close()
    end
  end
  table.sort(list)
  return list
end

local BW_BYTES = os.getenv("GPUREDUCE_BW_BYTES") or tostring(1 << 26)
local NET = { { "NCCL_SHM_DISABLE", "1" }, { "NCCL_P2P_DISABLE", "1" }, { "NCCL_IB_DISABLE", "1" },
  { "NCCL_SOCKET_IFNAME", os.getenv("NCCL_SOCKET_IFNAME") or "lo" } }

-- each job: how rank r is started, and what to do before and after (a listener, NCCL's logs)
local JOBS = {
  torchrun = function()
    local port = a_port()
    return { command = function(r) return command(torchrun_vars(r, port)) end }
  end,
  mpirun = function()
    local id = os.tmpname()
    os.remove(id)        -- rank 0 writes it, the others wait for it, rank 0 removes it once all have joined
    return { command = function(r)
      return command({ { "OMPI_COMM_WORLD_RANK", r }, { "OMPI_COMM_WORLD_SIZE", size },
        { "OMPI_COMM_WORLD_LOCAL_RANK", r }, { "GPUREDUCE_COMM_ID", id } })
    end, after = function() os.remove(id) end }
  end,
  ["agent-store"] = function()
    -- torchrun's agent store stands in: a listener on MASTER_PORT for as long as the job runs
    local port = a_port()
    local p = io.popen("python3 -c 'import socket, sys, time; s = socket.socket(); " ..
      "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind((\"127.0.0.1\", int(sys.argv[1]))); " ..
      "s.listen(16); time.sleep(600)' " .. port .. " >/dev/null 2>&1 & echo $!")
    local pid = p and tonumber(p:read("l") or "")
    if p then p:close() end
    if not pid then return { skip = "no python3 to stand in for torchrun's store" } end
    os.execute("sleep 1")
    return { command = function(r)
      return command(torchrun_vars(r, port, { { "TORCHELASTIC_USE_AGENT_STORE", "True" } }))
    end, after = function() os.execute("kill " .. pid) end, note = "MASTER_PORT " .. port .. " held by a listener" }
  end,
  ["net-default"] = function()
    local port, logs = a_port(), tmpdir()
    return { command = function(r)
      return command(torchrun_vars(r, port, { { "GPUREDUCE_BW_BYTES", BW_BYTES }, { "NCCL_DEBUG", "INFO" },
        { "NCCL_DEBUG_SUBSYS", "INIT" }, { "NCCL_DEBUG_FILE", logs .. "/rank" .. r .. ".log" } }))
    end, logs = logs }
  end,
  net = function()
    local port, logs = a_port(), tmpdir()
    local more = { { "GPUREDUCE_BW_BYTES", BW_BYTES }, { "NCCL_DEBUG", "INFO" }, { "NCCL_DEBUG_SUBSYS", "INIT" } }
    for _, kv in ipairs(NET) do more[#more + 1] = kv end
    return { command = function(r)
      local vars = { table.unpack(more) }
      vars[#vars + 1] = { "NCCL_DEBUG_FILE", logs .. "/rank" .. r .. ".log" }
      return command(torchrun_vars(r, port, vars))
    end, logs = logs, network_only = true }
  end,
}

local failed, busbw = {}, {}
for _, name in ipairs(STYLES[style]) do
  local job = JOBS[name]()
  if job.skip then
    print(string.format("%s: skipped (%s)", name, job.skip))
  else
    if job.note then print(string.format("%s: %s", name, job.note)) end
    local bad = ranks.run(size, job.command, function(_, out)
      io.write(name ~= "torchrun" and name ~= "mpirun" and out:gsub("^torchrun:", name .. ":") or out)
      busbw[name] = busbw[name] or tonumber(out:match("busbw ([%d.]+) GB/s"))
    end)
    if job.after then job.after() end
    for _, why in ipairs(bad) do failed[#failed + 1] = name .. ": " .. why end
    if job.logs then
      local via = transports(job.logs)
      local others = {}
      for _, t in ipairs(via) do if not t:match("^NET/") then others[#others + 1] = t end end
      print(string.format("%s: transports %s%s", name, #via > 0 and table.concat(via, ", ") or "(none in NCCL's log)",
        busbw[name] and string.format("; bus bandwidth %.1f GB/s (%s bytes of %s)", busbw[name], BW_BYTES,
          os.getenv("GPUREDUCE_BW_DTYPE") or "bfloat16") or ""))
      if job.network_only and size > 1 and (#via == 0 or #others > 0) then
        failed[#failed + 1] = name .. ": NCCL connected the ranks through " .. (#others > 0 and
          table.concat(others, ", ") or "nothing it logged") .. ", not only its network transport"
      end
      os.execute("rm -rf " .. q(job.logs))
    end
  end
end
if busbw["net-default"] and busbw.net then
  print(string.format("net: network transport %.1f GB/s against %.1f GB/s with the default transports (%.2fx)",
    busbw.net, busbw["net-default"], busbw.net / busbw["net-default"]))
end
if #failed > 0 then io.stderr:write("launch: ", table.concat(failed, "; "), "\n") end
os.exit(#failed > 0 and 1 or 0)
