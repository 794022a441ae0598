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
