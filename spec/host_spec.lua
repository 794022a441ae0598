-- The engine from C: a host that embeds Lua and hands over its own memory, and the plain C API.
-- The embedded state finds the module where the specs do: this checkout first.
local paths = "LUA_PATH='lua/?.lua;lua/?/init.lua;" .. package.path .. "' LUA_CPATH='build/?.so;" .. package.cpath .. "' "

local H = require("support.helpers").bind(it, function(reason) pending(reason) end)

local function run(cmd)
  local f = assert(io.popen(paths .. cmd .. " 2>&1"))
  local out = f:read("a")
  local ok, _, code = f:close()
  return ok and code == 0, out
end

describe("host applications", function()
  it("embed Lua and hand their own memory to a script (no copy, not freed)", function()
    local ok, out = run("build/embed_host")
    assert(ok, out)
    assert.matches("embed_host: ok", out)
  end)

  it("compile the kernels' device headers with NVRTC, as run-time compiled operators will", function()
    local f = io.open("build/nvrtc_headers")
    if not f then
      pending("this build has no CUDA toolkit (no build/nvrtc_headers)")
      return
    end
    f:close()
    local ok, out = run("build/nvrtc_headers cuda")
    assert(ok, out)
    assert.matches("nvrtc_headers: ok", out)
  end)

  it("keep the engine's layers free of circles, and the kernels to their contract", function()
    local ok, out = run(H.interpreter() .. " scripts/check_layers.lua build")
    assert(ok, out)
    assert.matches("layers: ok", out)
  end)

  it("use the engine from plain C through gr.h", function()
    local ok, out = run("build/c_api_host")
    assert(ok, out)
    assert.matches("c_api_host: ok", out)
  end)
end)
