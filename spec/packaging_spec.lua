-- The rockspec and the license: what luarocks reads, and a source rock built, installed and loaded
-- where luarocks is installed (pending elsewhere: CI does not install it, since Debian's luarocks
-- points /usr/bin/lua at Lua 5.1).
local H = require("support.helpers").bind(it, function(reason) pending(reason) end)
local gr = require "gpureduce"

local q, sh = H.quote, H.sh

local function read(path)
  local f = assert(io.open(path))
  local text = f:read("a")
  f:close()
  return text
end

--- The rockspec's fields, as luarocks loads them (a Lua chunk of assignments).
local function rockspec()
  local fields = {}
  assert(loadfile("gpureduce-scm-1.rockspec", "t", fields))()
  return fields
end

describe("the rockspec", function()
  it("names every op in its description", function()
    local text = rockspec().description.detailed:gsub("%s+", " ")
    for _, op in ipairs(gr.ops()) do
      assert.matches("%f[%w]" .. op .. "%f[%W]", text, nil, false, "the description does not name " .. op)
    end
    assert.matches(#gr.ops() .. " ops", text, 1, true)
  end)

  it("declares the license that LICENSE holds", function()
    assert.equal("MIT", rockspec().description.license)
    local license = read("LICENSE")
    assert.equal("MIT License", license:match("^[^\n]*"))
    assert.matches("Copyright %(c%) %d+ the gpureduce authors", license)
    assert.matches('THE SOFTWARE IS PROVIDED "AS IS"', license, 1, true)
  end)

  it("has a source that luarocks can fetch from the repository's root (make dist writes it)", function()
    local url = rockspec().source.url
    assert.is_nil(url:match("^git%+file://%.$"))
    assert.is_nil(url:match("^%a[%w+.-]*://"), "a path relative to the root, not " .. url)
    assert.matches("DIST := " .. url:gsub("%p", "%%%0") .. "\n", read("Makefile"))
  end)

  -- luarocks must also find a Lua 5.4 interpreter where its configuration says Lua is: an offline GPU
  -- host's Lua unpacked into a prefix (scripts/offline-env.sh) is not where Debian's luarocks looks
  local has_luarocks = os.execute("command -v luarocks >/dev/null 2>&1") and
    os.execute("git rev-parse --verify -q HEAD >/dev/null 2>&1") and
    os.execute("lua=$(luarocks --lua-version 5.4 config variables.LUA 2>/dev/null) && [ -x \"$lua\" ]")
  H.it_if(has_luarocks, "needs luarocks that finds Lua 5.4, and a git checkout")(
    "packs a source rock of the committed tree (make rock) that luarocks installs and Lua loads", function()
      local ok, out = sh("env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s --no-print-directory rock")
      assert(ok, out)
      -- the source folder the rockspec names is the tarball's top folder
      local _, list = sh("tar tzf " .. q(rockspec().source.url))
      assert.equal(rockspec().source.dir .. "/", list:match("^[^\n]*"))

      local tree = select(2, sh("mktemp -d")):gsub("%s+$", "")
      local abi = _VERSION:match("%d+%.%d+")          -- the Lua running this spec, whose module it installs
      finally(function() os.execute("rm -rf " .. q(tree)) end)
      -- the CPU-only module whatever this machine has: the test is the packaging, not the kernels
      ok, out = sh("env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL NVCC= luarocks --lua-version " .. abi .. " install --deps-mode=none --tree=" .. q(tree) ..
        " build/gpureduce-scm-1.src.rock")
      assert(ok, out)
      ok, out = sh("LUA_PATH=" .. q(tree .. "/share/lua/" .. abi .. "/?.lua;" .. tree .. "/share/lua/" .. abi ..
        "/?/init.lua") .. " LUA_CPATH=" .. q(tree .. "/lib/lua/" .. abi .. "/?.so") .. " " .. q(H.interpreter()) ..
        [[ -e 'local gr = require "gpureduce"; print(gr.sum(gr.buffer({1, 2, 3}, "int32")), gr.version)']])
      assert(ok, out)
      assert.equal("6\t" .. gr.version .. "\n", out)
    end)
end)
