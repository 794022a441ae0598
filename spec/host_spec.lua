-- The engine from C: a host that embeds Lua and hands over its own memory, and the plain C API.
-- The build folder is the one busted loads the module from (--cpath, else .busted's build/?.so), so
-- that `busted --cpath='build-cpu/?.so'` checks that build's programs; the embedded state finds the
-- module there too, ahead of anything installed.
local H = require("support.helpers").bind(it, function(reason) pending(reason) end)
local build = H.build_dir()
local paths = "LUA_PATH='lua/?.lua;lua/?/init.lua;" .. package.path .. "' LUA_CPATH='" .. build .. "/?.so;" ..
  package.cpath .. "' "

local function run(cmd)
  local f = assert(io.popen(paths .. cmd .. " 2>&1"))
  local out = f:read("a")
  local ok, _, code = f:close()
  return ok and code == 0, out
end

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
    local ok, out = run(build .. "/nvrtc_headers cuda")
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
