-- gr.comm() from a launcher's environment (torchrun, mpirun, Slurm) and gr.comm{handle = p}, a borrowed
-- NCCL communicator (engine/multi/comm_env.c, comm.c; docs/api.md "Launchers").
-- The environment is the process's: every case runs a child Lua (H.run_lua) whose environment is
-- cleared of every launcher variable and then given the case's own. The errors about the variables
-- come before NCCL is opened, so they are checked on every backend; joining needs a GPU (#gpu), and
-- several ranks two GPUs (#multi, pending with fewer).
local gr = require "gpureduce"
local H = require("support.helpers").bind(it, function(reason) pending(reason) end)
local L = require "support.lab_script"

local ndev = #gr.devices()

local FAMILIES = {
  { "RANK", "WORLD_SIZE", "LOCAL_RANK" },
  { "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK" },
  { "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID" },
}
local RENDEZVOUS = { "MASTER_ADDR", "MASTER_PORT", "NCCL_COMM_ID", "GPUREDUCE_COMM_ID", "TORCHELASTIC_USE_AGENT_STORE" }

--- The env prefix of a child: every launcher variable unset, then `vars` (a table name = value) set.
local function environment(vars)
  local parts = { "env" }
  for _, f in ipairs(FAMILIES) do
    for _, name in ipairs(f) do parts[#parts + 1] = "-u " .. name end
  end
  for _, name in ipairs(RENDEZVOUS) do parts[#parts + 1] = "-u " .. name end
  local names = {}
  for k in pairs(vars or {}) do names[#names + 1] = k end
  table.sort(names)
  for _, k in ipairs(names) do parts[#parts + 1] = k .. "=" .. H.quote(vars[k]) end
  return table.concat(parts, " ")
end

--- Runs `body` (Lua text, with gr bound) in a child with that environment; its output, asserting exit 0.
local function child(vars, body)
  local ok, _, out = H.run_lua('local gr = require "gpureduce"\n' .. body, environment(vars))
  assert(ok, out)
  return out
end

--- The message of gr.comm(opts) in a child with `vars`, and whether NCCL_COMM_ID was left unset after it.
local function comm_error(vars, opts)
  local out = child(vars, string.format([[
    local ok, err = pcall(gr.comm%s)
    print(ok and "joined" or err)
    print("NCCL_COMM_ID after: " .. tostring(os.getenv("NCCL_COMM_ID")))
  ]], opts and ", " .. opts or ""))
  return out
end

local function expect_in(out, ...)
  for _, text in ipairs({ ... }) do assert.matches(text, out, nil, true) end
end

--- A port for a one-job rendezvous: random in 20000-59999 (no two runs of the specs at once share one).
local function a_port()
  math.randomseed(os.time() + math.floor(os.clock() * 1e6))
  return math.random(20000, 59999)
end

describe("gr.comm() from the launcher's environment", function()
  it("names every variable it looked for when none is set, before NCCL is opened", function()
    -- GPUREDUCE_NCCL pointing nowhere: the variables are checked first, on every backend
    local out = comm_error({ GPUREDUCE_NCCL = "/nonexistent/libnccl.so.2" })
    expect_in(out, "no launcher variables are set: looked for")
    for _, f in ipairs(FAMILIES) do expect_in(out, table.unpack(f)) end
    expect_in(out, "(torchrun)", "(mpirun)", "(Slurm)", "without a launcher give rank, size and id")
    -- a table with only a timeout is the same form
    expect_in(comm_error({}, "{ timeout = 5 }"), "no launcher variables are set")
    -- a local rank alone is no family (it cannot say the rank or the size)
    expect_in(comm_error({ LOCAL_RANK = "0" }), "no launcher variables are set")
  end)

  it("names the variables of an incomplete or contradictory family", function()
    expect_in(comm_error({ RANK = "0" }), "RANK is set but WORLD_SIZE is not (a torchrun launch sets RANK, " ..
      "WORLD_SIZE and LOCAL_RANK)")
    expect_in(comm_error({ OMPI_COMM_WORLD_SIZE = "2" }), "OMPI_COMM_WORLD_SIZE is set but OMPI_COMM_WORLD_RANK " ..
      "is not (a mpirun launch")
    expect_in(comm_error({ RANK = "x", WORLD_SIZE = "2" }), "RANK='x' is not a whole number from 0")
    expect_in(comm_error({ RANK = "1", WORLD_SIZE = "2.5" }), "WORLD_SIZE='2.5' is not a whole number from 0")
    expect_in(comm_error({ SLURM_PROCID = "-1", SLURM_NTASKS = "2" }), "SLURM_PROCID='-1' is not a whole number")
    expect_in(comm_error({ RANK = "2", WORLD_SIZE = "2", LOCAL_RANK = "0" }),
      "RANK=2 is not below WORLD_SIZE=2 (ranks are 0 to 1)")
    expect_in(comm_error({ SLURM_PROCID = "0", SLURM_NTASKS = "0" }),
      "SLURM_NTASKS=0: a communicator has at least one rank")
    expect_in(comm_error({ RANK = "1", WORLD_SIZE = "2" }),
      "LOCAL_RANK is not set (RANK=1, WORLD_SIZE=2): the local rank chooses this process's GPU")
    expect_in(comm_error({ OMPI_COMM_WORLD_RANK = "1", OMPI_COMM_WORLD_SIZE = "2", OMPI_COMM_WORLD_LOCAL_RANK = "2" }),
      "OMPI_COMM_WORLD_LOCAL_RANK=2 is not below OMPI_COMM_WORLD_SIZE=2")
  end)

  it("takes the first family set: torchrun, then mpirun, then Slurm (launchers nest)", function()
    -- torchrun inside an allocation: its variables win, the allocation's are not compared
    local nested = { RANK = "0", WORLD_SIZE = "1", SLURM_PROCID = "7", SLURM_NTASKS = "x",
      OMPI_COMM_WORLD_RANK = "bad" }
    expect_in(comm_error(nested), "no rendezvous")
    expect_in(comm_error({ OMPI_COMM_WORLD_RANK = "3", OMPI_COMM_WORLD_SIZE = "2", SLURM_PROCID = "0",
      SLURM_NTASKS = "2" }), "OMPI_COMM_WORLD_RANK=3 is not below OMPI_COMM_WORLD_SIZE=2")
    expect_in(comm_error({ SLURM_PROCID = "3", SLURM_NTASKS = "2" }), "SLURM_PROCID=3 is not below SLURM_NTASKS=2")
  end)

  it("names the rendezvous variables when there is no way to meet, or one is malformed", function()
    local one = { RANK = "0", WORLD_SIZE = "1" }
    local function with(extra)
      local t = {}
      for k, v in pairs(one) do t[k] = v end
      for k, v in pairs(extra) do t[k] = v end
      return t
    end
    expect_in(comm_error(one), "no rendezvous: set MASTER_ADDR and MASTER_PORT", "NCCL_COMM_ID=host:port",
      "GPUREDUCE_COMM_ID=<an id file path every rank can read>")
    expect_in(comm_error(with({ MASTER_ADDR = "127.0.0.1" })), "MASTER_ADDR is set but MASTER_PORT is not")
    expect_in(comm_error(with({ MASTER_PORT = "29500" })), "MASTER_PORT is set but MASTER_ADDR is not")
    expect_in(comm_error(with({ MASTER_ADDR = "h", MASTER_PORT = "http" })), "MASTER_PORT='http' is not a whole number")
    expect_in(comm_error(with({ MASTER_ADDR = "h", MASTER_PORT = "70000" })),
      "MASTER_PORT=70000 is not a port (1 to 65535)")
    for _, agent in ipairs({ "True", "true", "1" }) do
      expect_in(comm_error(with({ MASTER_ADDR = "h", MASTER_PORT = "65535", TORCHELASTIC_USE_AGENT_STORE = agent })),
        "MASTER_PORT=65535 is not a port (1 to 65534)")
    end
    -- torchrun's agent without a store of its own (False) leaves MASTER_PORT to the ranks
    expect_in(comm_error(with({ MASTER_ADDR = "h", MASTER_PORT = "65536", TORCHELASTIC_USE_AGENT_STORE = "False" })),
      "MASTER_PORT=65536 is not a port (1 to 65535)")
    expect_in(comm_error(with({ NCCL_COMM_ID = "node7" })), "NCCL_COMM_ID='node7' is not host:port")
    expect_in(comm_error(with({ NCCL_COMM_ID = ":29500" })), "NCCL_COMM_ID=':29500' is not host:port")
  end)

  it("refuses a local rank beyond the visible devices, naming the variable and the count", function()
    local vars = { RANK = "0", WORLD_SIZE = tostring(ndev + 1), LOCAL_RANK = tostring(ndev),
      MASTER_ADDR = "127.0.0.1", MASTER_PORT = "29500" }
    expect_in(comm_error(vars), string.format("LOCAL_RANK=%d names device %d, but %d device%s visible", ndev,
      ndev + 1, ndev, ndev == 1 and " is" or "s are"))
    vars = { SLURM_PROCID = "0", SLURM_NTASKS = "64", SLURM_LOCALID = "63", GPUREDUCE_COMM_ID = "/tmp/x" }
    expect_in(comm_error(vars), "SLURM_LOCALID=63 names device 64")
  end)

  it("opens NCCL only once the variables hold, and leaves NCCL_COMM_ID as it found it", function()
    local out = comm_error({ RANK = "0", WORLD_SIZE = "1", LOCAL_RANK = "0", MASTER_ADDR = "127.0.0.1",
      MASTER_PORT = "29500", GPUREDUCE_NCCL = "/nonexistent/libnccl.so.2" })
    if gr.backend() == "cpu" then
      expect_in(out, "communicators need NCCL and a CUDA device (backend is cpu)")
    else
      expect_in(out, "no NCCL at GPUREDUCE_NCCL=/nonexistent/libnccl.so.2")
    end
    expect_in(out, "NCCL_COMM_ID after: nil")
  end)
end)

describe("experiments/multi_gpu/launch.lua", function()
  it("refuses more ranks than GPUs, saying how many there are", function()
    local code, _, err = L.run("multi_gpu/launch.lua", tostring(ndev + 1))
    assert.are.equal(1, code)
    expect_in(err, string.format("launch: %d ranks need %d GPUs; this machine has %d device(s)", ndev + 1, ndev + 1,
      ndev))
  end)
end)

describe("gr.comm{handle = p}", function()
  it("refuses a handle with rank, size, id or device, and a handle that is not a light userdata", function()
    local msg = "opts.handle: a borrowed communicator's rank, size and device are NCCL's (not with rank, size, id " ..
      "or device)"
    H.expect_error(msg, gr.comm, { handle = "x", rank = 0 })
    H.expect_error(msg, gr.comm, { handle = "x", size = 2 })
    H.expect_error(msg, gr.comm, { handle = "x", id = "/tmp/id" })
    H.expect_error(msg, gr.comm, { handle = "x", device = 1 })
    H.expect_error("opts.handle: expected an ncclComm_t as a light userdata (c:handle() gives one), got string",
      gr.comm, { handle = "x" })
    H.expect_error("got table", gr.comm, { handle = {} })
    H.expect_error("opts.device: from the launcher's environment the device is the local rank's", gr.comm,
      { device = 1 })
    H.expect_error("bad argument #1", gr.comm, 5)
    H.expect_error("opts.timeout: expected a positive number of seconds", gr.comm, { timeout = 0 })
  end)
end)

describe("joining from the environment", function()
  --- The one-rank program of the GPU cases: joins, checks what it is, reduces, prints "ok".
  local ONE_RANK = [[
    local c = gr.comm { timeout = 30 }
    assert(c:rank() == 0 and c:size() == 1 and c:device() == 1, tostring(c))
    local b = gr.buffer(100003, "int64"):iota(1)
    local want = gr.sum(b)
    c:allreduce(b, "sum")
    assert(b[1] == 1 and b[100003] == 100003, "allreduce of one rank changed the buffer")
    assert(c:reduce(b) == want and want == 100003 * 100004 // 2, "reduce")
    local f = gr.buffer(4097, "float32"):random(3, -1, 1)
    assert(c:reduce(f) == gr.sum(f), "float reduce")
    c:destroy()
    print("NCCL_COMM_ID after: " .. tostring(os.getenv("NCCL_COMM_ID")))
    print("ok")
  ]]

  H.gpu_it("joins a one-rank communicator from torchrun's variables (MASTER_ADDR:MASTER_PORT)", function()
    local out = child({ RANK = "0", WORLD_SIZE = "1", LOCAL_RANK = "0", MASTER_ADDR = "127.0.0.1",
      MASTER_PORT = tostring(a_port()) }, ONE_RANK)
    expect_in(out, "NCCL_COMM_ID after: nil", "ok")
  end)

  H.gpu_it("joins a one-rank communicator from mpirun's variables and the id file GPUREDUCE_COMM_ID", function()
    local path = os.tmpname()
    os.remove(path)
    local out = child({ OMPI_COMM_WORLD_RANK = "0", OMPI_COMM_WORLD_SIZE = "1", OMPI_COMM_WORLD_LOCAL_RANK = "0",
      GPUREDUCE_COMM_ID = path }, ONE_RANK)
    expect_in(out, "ok")
    assert.is_nil(io.open(path), "rank 0 removes the id file once every rank has joined")
  end)

  H.gpu_it("joins a one-rank communicator from Slurm's variables and NCCL_COMM_ID as set", function()
    local id = "127.0.0.1:" .. a_port()
    local out = child({ SLURM_PROCID = "0", SLURM_NTASKS = "1", SLURM_LOCALID = "0", NCCL_COMM_ID = id }, ONE_RANK)
    expect_in(out, "NCCL_COMM_ID after: " .. id, "ok")
  end)

  H.gpu_it("says where it waited when the other rank never comes", function()
    local port = a_port()
    local out = comm_error({ RANK = "0", WORLD_SIZE = "2", LOCAL_RANK = "0", MASTER_ADDR = "127.0.0.1",
      MASTER_PORT = tostring(port) }, "{ timeout = 2 }")
    expect_in(out, "rank 0 of 2: the other rank never joined within 2 s",
      "(rendezvous: NCCL_COMM_ID=127.0.0.1:" .. port .. ", from MASTER_ADDR and MASTER_PORT)",
      "NCCL_COMM_ID after: nil")
  end)

  H.gpu_it("starts one rank on one GPU with experiments/multi_gpu/launch.lua, torchrun-style and mpirun-style",
    function()
      local code, out, err = L.run("multi_gpu/launch.lua", "1 both 1000")
      assert.are.equal(0, code, out .. err)
      expect_in(out, "torchrun: rank 0 of 1 on device 1: ok", "mpirun: rank 0 of 1 on device 1: ok")
    end)

  H.gpu_it("meets at MASTER_PORT + 1 while torchrun's agent store holds MASTER_PORT (launch.lua agent-store)",
    function()
      local code, out, err = L.run("multi_gpu/launch.lua", "1 agent-store 1000")
      if out:find("agent-store: skipped", 1, true) then
        pending("no python3 to listen on MASTER_PORT")
        return
      end
      assert.are.equal(0, code, out .. err)
      expect_in(out, "held by a listener", "agent-store: rank 0 of 1 on device 1: ok")
    end)

  H.gpu_it("runs two ranks through NCCL's network transport alone, and measures it (launch.lua net) #multi",
    function()
      if ndev < 2 then
        pending("multi: " .. ndev .. " device(s), 2 needed")
        return
      end
      local code, out, err = L.run("multi_gpu/launch.lua", "2 net 1000", "GPUREDUCE_BW_BYTES=16777216")
      assert.are.equal(0, code, out .. err)
      for r = 0, 1 do expect_in(out, string.format("net: rank %d of 2 on device %d: ok", r, r + 1)) end
      assert.matches("net: transports NET/Socket", out, nil, true)
      assert.matches("net: network transport [%d.]+ GB/s against [%d.]+ GB/s with the default transports", out)
    end)

  H.gpu_it("starts two ranks, one per GPU, with torchrun's and with mpirun's variables #multi", function()
    if ndev < 2 then
      pending("multi: " .. ndev .. " device(s), 2 needed")
      return
    end
    local code, out, err = L.run("multi_gpu/launch.lua", "2")
    assert.are.equal(0, code, out .. err)
    for _, style in ipairs({ "torchrun", "mpirun" }) do
      for r = 0, 1 do
        expect_in(out, string.format("%s: rank %d of 2 on device %d: ok", style, r, r + 1))
      end
    end
  end)
end)

describe("a borrowed communicator", function()
  H.gpu_it("reads rank, size and device from NCCL, reduces, and is never destroyed by its wrapper", function()
    local own = gr.comm { rank = 0, size = 1, id = gr.comm_id(), timeout = 20 }
    local p = own:handle()
    assert.are.equal("userdata", type(p))
    local lent = gr.comm { handle = p, timeout = 20 }
    assert.are.equal(0, lent:rank())
    assert.are.equal(1, lent:size())
    assert.are.equal(own:device(), lent:device())
    assert.are.equal(p, lent:handle())
    local b = gr.buffer(65537, "int32"):random(5, -100, 100)
    local before = b:tobytes()
    assert.are.equal(b, lent:allreduce(b, "sum"))
    assert.are.equal(before, b:tobytes())
    assert.are.equal(gr.sum(b), lent:reduce(b))
    assert.are.equal(gr.max(b), lent:reduce(b, { op = "max" }))
    lent:barrier()
    lent:destroy()
    H.expect_error("communicator has been destroyed", lent.allreduce, lent, b)
    -- the owner's communicator still works, then goes as its owner says
    own:allreduce(b, "max")
    assert.are.equal(gr.sum(b), own:reduce(b))
    own:barrier()
    local again = gr.comm { handle = own:handle() }      -- borrowed twice, let go by the collector
    assert.are.equal(1, again:size())
    again = nil
    collectgarbage()
    collectgarbage()
    assert.are.equal(gr.min(b), own:reduce(b, { op = "min" }))
    own:destroy()
    H.expect_error("communicator has been destroyed", own.handle, own)
  end)
end)
