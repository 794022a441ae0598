-- The engine from C: a host that embeds Lua and hands over its own memory, and the plain C API.
-- The build folder is the one busted loads the module from (--cpath, else .busted's build/?.so), so
-- that `busted --cpath='build-cpu/?.so'` checks that build's programs; the embedded state finds the
-- module there too, ahead of anything installed.
local H = require("support.helpers").bind(it, function(reason) pending(reason) end)
local build = H.build_dir()
local paths = "LUA_PATH='lua/?.lua;lua/?/init.lua;" .. package.path .. "' LUA_CPATH='" .. build .. "/?.so;" ..
  package.cpath .. "' "

local function run(cmd) return H.sh(paths .. cmd) end

describe("host applications", function()
  it("embed Lua and hand their own memory to a script (no copy, not freed)", function()
    local ok, out = run(build .. "/embed_host")
    assert(ok, out)
    assert.matches("embed_host: ok", out)
  end)

  it("compile the kernels' device headers with NVRTC, as run-time compiled operators will", function()
    local f = io.open(build .. "/nvrtc_headers")
    if not f then
      pending("this build has no CUDA toolkit (no " .. build .. "/nvrtc_headers)")
      return
    end
    f:close()
    local ok, out = run(build .. "/nvrtc_headers cuda/device")
    assert(ok, out)
    assert.matches("nvrtc_headers: ok", out)
  end)

  -- From the filesystem's root: the headers come from the module's embedded copy, not from cuda/.
  it("compile CUDA source at run time with NVRTC, including the embedded headers by name", function()
    local program = (build:sub(1, 1) == "/" and build or "$OLDPWD/" .. build) .. "/nvrtc_compile"
    local ok, out = run('cd / && "' .. program .. '"')
    assert(ok, out)
    local why = out:match("nvrtc_compile: no NVRTC %((.*)%)")
    if why then
      pending("no NVRTC on this machine: " .. why)
      return
    end
    assert.matches("nvrtc_compile: ok", out)
  end)

  it("say where they looked for NVRTC when GPUREDUCE_NVRTC names no library", function()
    local ok, out = run("GPUREDUCE_NVRTC=/nonexistent/libnvrtc.so " .. build .. "/nvrtc_compile --unavailable")
    assert(ok, out)
    -- then the loader's own words, which name the path again
    assert.matches("no NVRTC at GPUREDUCE_NVRTC=/nonexistent/libnvrtc.so (the only place tried while it is set): " ..
      "/nonexistent/libnvrtc.so", out, 1, true)
  end)

  it("keep the engine's layers free of circles, and the kernels to their contract", function()
    -- the check reads the objects' symbols: a GPU run of a module built elsewhere (gpu-batch.sh PREBUILT)
    -- has none, and the build that made it ran this check
    if os.getenv("GPUREDUCE_PREBUILT") and not io.open(build .. "/obj/engine") then
      pending("a prebuilt module: no objects under " .. build .. "/obj (the build that made it checked them)")
      return
    end
    local ok, out = run(H.interpreter() .. " scripts/check_layers.lua " .. build)
    assert(ok, out)
    assert.matches("layers: ok", out)
  end)

  it("use the engine from plain C through gr.h", function()
    local ok, out = run(build .. "/c_api_host")
    assert(ok, out)
    assert.matches("c_api_host: ok", out)
  end)
end)

-- spec/host/comm_env_host.c: a C host joining from a launcher's variables (gr_comm_from_env; docs/api.md
-- "Launchers"), started here in one-rank environments of each launcher with every other launcher variable
-- unset. The variables are checked before NCCL is opened, so the refusals are checked on every backend;
-- joining needs a GPU and NCCL.
describe("a C host started by a launcher (spec/host/comm_env_host.c)", function()
  local gr = require "gpureduce"
  local CLEARED = "RANK WORLD_SIZE LOCAL_RANK OMPI_COMM_WORLD_RANK OMPI_COMM_WORLD_SIZE OMPI_COMM_WORLD_LOCAL_RANK " ..
    "SLURM_PROCID SLURM_NTASKS SLURM_LOCALID MASTER_ADDR MASTER_PORT NCCL_COMM_ID GPUREDUCE_COMM_ID " ..
    "TORCHELASTIC_USE_AGENT_STORE"

  --- The program's exit code and output in an environment of `vars` (name = value) and no other
  -- launcher variable.
  local function launched(vars)
    local exe, why = H.host_program("comm_env_host")
    if not exe then return nil, why end
    local cmd = { "env" }
    for name in CLEARED:gmatch("%S+") do cmd[#cmd + 1] = "-u " .. name end
    local names = {}
    for k in pairs(vars) do names[#names + 1] = k end
    table.sort(names)
    for _, k in ipairs(names) do cmd[#cmd + 1] = k .. "=" .. H.quote(vars[k]) end
    cmd[#cmd + 1] = H.quote(exe) .. " 2>&1"
    local p = assert(io.popen(paths .. table.concat(cmd, " ")))
    local out = p:read("a")
    local _, _, code = p:close()
    return code, out
  end

  local function refused(vars, text)
    local code, out = launched(vars)
    if code == nil then
      pending(out)
      return
    end
    assert.are.equal(3, code, out)
    assert.truthy(out:find("comm_env_host: refused: " .. text, 1, true), out)
  end

  it("refuses missing and contradictory variables, naming them, on every backend", function()
    refused({}, "no launcher variables are set: looked for RANK, WORLD_SIZE, LOCAL_RANK (torchrun); " ..
      "OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK (mpirun); SLURM_PROCID, SLURM_NTASKS, " ..
      "SLURM_LOCALID (Slurm); without a launcher give rank, size and id")
    refused({ RANK = "0" }, "RANK is set but WORLD_SIZE is not (a torchrun launch sets RANK, WORLD_SIZE and LOCAL_RANK)")
    refused({ RANK = "2", WORLD_SIZE = "2", LOCAL_RANK = "0" }, "RANK=2 is not below WORLD_SIZE=2 (ranks are 0 to 1)")
    refused({ OMPI_COMM_WORLD_RANK = "1", OMPI_COMM_WORLD_SIZE = "2" }, "OMPI_COMM_WORLD_LOCAL_RANK is not set " ..
      "(OMPI_COMM_WORLD_RANK=1, OMPI_COMM_WORLD_SIZE=2): the local rank chooses this process's GPU")
    refused({ SLURM_PROCID = "x", SLURM_NTASKS = "1" }, "SLURM_PROCID='x' is not a whole number from 0")
    refused({ SLURM_PROCID = "0", SLURM_NTASKS = "1", SLURM_LOCALID = "0" }, "no rendezvous: set MASTER_ADDR and " ..
      "MASTER_PORT")
    refused({ RANK = "0", WORLD_SIZE = "1", MASTER_ADDR = "127.0.0.1" }, "MASTER_ADDR is set but MASTER_PORT is not")
    local ndev = #gr.devices()
    refused({ RANK = "1", WORLD_SIZE = ndev + 1, LOCAL_RANK = ndev, MASTER_ADDR = "127.0.0.1", MASTER_PORT = "29500" },
      string.format("LOCAL_RANK=%d names device %d, but %d device%s visible", ndev, ndev + 1, ndev,
        ndev == 1 and " is" or "s are"))
  end)

  --- A free-looking port for one job's rendezvous (random: two runs of the specs at once rarely meet).
  local function a_port()
    math.randomseed(os.time() + math.floor(os.clock() * 1e6))
    return tostring(math.random(20000, 59999))
  end

  local STYLES = {
    torchrun = function() return { RANK = "0", WORLD_SIZE = "1", LOCAL_RANK = "0", MASTER_ADDR = "127.0.0.1",
      MASTER_PORT = a_port() } end,
    mpirun = function()
      local id = os.tmpname()
      os.remove(id)           -- rank 0 writes the id there and removes it once every rank has joined
      return { OMPI_COMM_WORLD_RANK = "0", OMPI_COMM_WORLD_SIZE = "1", OMPI_COMM_WORLD_LOCAL_RANK = "0",
        GPUREDUCE_COMM_ID = id }
    end,
    Slurm = function() return { SLURM_PROCID = "0", SLURM_NTASKS = "1", SLURM_LOCALID = "0",
      NCCL_COMM_ID = "127.0.0.1:" .. a_port() } end,
  }
  for _, style in ipairs({ "torchrun", "mpirun", "Slurm" }) do
    H.gpu_it("joins one rank from " .. style .. "'s variables, reduces across it and checks the closed forms", function()
      if not gr.nccl_version() then
        pending("nccl: libnccl.so.2 cannot be opened")
        return
      end
      local code, out = launched(STYLES[style]())
      if code == nil then
        pending(out)
        return
      end
      assert.are.equal(0, code, out)
      assert.truthy(out:find("comm_env_host: ok: " .. style .. " rank 0 of 1 on device 1: sum 500500, mean 500.5, " ..
        "argmax 1000 at 1000, allreduce b[1] = 1", 1, true), out)
    end)
  end
end)

-- make install into a temporary DESTDIR, then what a user of the installation does: a C program built
-- against the installed gr.h and library with pkg-config, and a host that embeds Lua loading the
-- installed module. Installs exactly what the build folder holds: -o (assume old) keeps make from
-- building anything, whichever settings (CUDA=1, CUDA_ARCH, CFLAGS) made the folder.
-- make install puts the module under the Lua it was built for (make test LUA=lua5.3 passes LUA on)
local LUA_ABI = _VERSION:match("%d+%.%d+")

describe("an installation (make install DESTDIR=... PREFIX=/usr/local)", function()
  local q = H.quote
  local has_pkg_config = os.execute("command -v pkg-config >/dev/null 2>&1")
  local installed = H.it_if(has_pkg_config, "no pkg-config on this machine (apt-get install pkgconf)")
  local built = { "gpureduce/core.so", "libgpureduce.so.0", "libgpureduce.so", "libgpureduce.a", "gpureduce.pc" }
  local stage, root, pc_env, pkg_config, install_out

  setup(function()
    stage = select(2, run("mktemp -d")):gsub("%s+$", "")
    root = stage .. "/usr/local"
    -- the staging folder stands for the prefix (a sysroot would move the CUDA toolkit's -L too)
    pkg_config = "pkg-config --define-variable=prefix=" .. q(root) .. " "
    pc_env = "PKG_CONFIG_LIBDIR=" .. q(root .. "/lib/pkgconfig") .. " PKG_CONFIG_PATH= "
    local cmd = "env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s --no-print-directory install BUILD=" .. q(build) ..
      " DESTDIR=" .. q(stage) .. " PREFIX=/usr/local LUA=" .. q(H.interpreter())
    for _, f in ipairs(built) do cmd = cmd .. " -o " .. q(build .. "/" .. f) end
    local ok
    ok, install_out = run(cmd)
    if not ok then install_out = "make install failed:\n" .. install_out end
  end)

  teardown(function()
    if stage and stage:match("^/tmp/") then os.execute("rm -rf " .. q(stage)) end
  end)

  local function assert_installed()
    for _, f in ipairs(built) do
      assert(io.open(build .. "/" .. f), build .. "/" .. f .. " is missing: `make` (or `make lib`) builds it")
    end
    assert(not install_out:match("^make install failed"), install_out)
  end

  installed("puts the Lua module, the library, gr.h with the headers it includes and gpureduce.pc in place", function()
    assert_installed()
    for _, f in ipairs({ "lib/lua/" .. LUA_ABI .. "/gpureduce/core.so", "share/lua/" .. LUA_ABI .. "/gpureduce/init.lua",
                         "lib/libgpureduce.so.0", "lib/libgpureduce.so", "lib/libgpureduce.a",
                         "include/gpureduce/gr.h", "include/gpureduce/lists.h", "lib/pkgconfig/gpureduce.pc" }) do
      local h = io.open(root .. "/" .. f)
      assert(h, "not installed: " .. f)
      h:close()
    end
    local _, version = run(pc_env .. pkg_config .. "--modversion gpureduce")
    assert.equal(require("gpureduce").version, (version:gsub("%s+$", "")))
  end)

  installed("build a C program with pkg-config --cflags --libs gpureduce, run against libgpureduce.so", function()
    assert_installed()
    local exe = stage .. "/c_api_host"
    local ok, out = run("cc -std=c11 -o " .. q(exe) .. " spec/host/c_api_host.c $(" .. pc_env ..
      pkg_config .. "--cflags --libs gpureduce)")
    assert(ok, out)
    -- linked with the shared library, found in the staging folder only
    ok, out = run("LD_LIBRARY_PATH=" .. q(root .. "/lib") .. " ldd " .. q(exe))
    assert(ok, out)
    assert.matches("libgpureduce.so.0 => " .. root .. "/lib/libgpureduce.so.0", out, 1, true)
    ok, out = run("LD_LIBRARY_PATH=" .. q(root .. "/lib") .. " " .. q(exe))
    assert(ok, out)
    assert.matches("c_api_host: ok", out)
  end)

  installed("build a C program with libgpureduce.a and pkg-config --static --libs gpureduce", function()
    assert_installed()
    local exe = stage .. "/c_api_host_static"
    -- the line README.md gives
    local ok, out = run("cc -std=c11 -o " .. q(exe) .. " spec/host/c_api_host.c $(" .. pc_env ..
      pkg_config .. "--cflags gpureduce) $(" .. pc_env .. pkg_config .. "--static --libs gpureduce | " ..
      "sed 's/-lgpureduce/-l:libgpureduce.a/')")
    assert(ok, out)
    ok, out = run(q(exe))
    assert(ok, out)
    assert.matches("c_api_host: ok", out)
  end)

  installed("load the installed Lua module in a host that embeds Lua", function()
    assert_installed()
    -- the staging folder's paths alone: the checkout's module cannot stand in for the installed one
    local ok, out = H.sh("LUA_PATH=" .. q(root .. "/share/lua/" .. LUA_ABI .. "/?.lua;" .. root .. "/share/lua/" .. LUA_ABI .. "/?/init.lua") ..
      " LUA_CPATH=" .. q(root .. "/lib/lua/" .. LUA_ABI .. "/?.so") .. " " .. build .. "/embed_host")
    assert(ok, out)
    assert.matches("embed_host: ok", out)
  end)
end)
