-- The engine from C: a host that embeds Lua and hands over its own memory, and the plain C API.
-- The embedded state finds the module where the specs do: this checkout first.
local paths = "LUA_PATH='lua/?.lua;lua/?/init.lua;" .. package.path .. "' LUA_CPATH='build/?.so;" .. package.cpath .. "' "

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

  it("use the engine from plain C through gr.h", function()
    local ok, out = run("build/c_api_host")
    assert(ok, out)
    assert.matches("c_api_host: ok", out)
  end)
end)
