-- The cache of compiled kernel images (engine/kcache.c) on its own, without a GPU: build/kcache_host
-- runs one scenario per test (spec/host/kcache_host.c says what each checks), in a directory of its
-- own that the environment names, as a user's would.

local H = require "support.helpers"
local sh, quote = H.sh, H.quote

local host = H.build_dir() .. "/kcache_host"
-- the scenarios run from other directories: an absolute path (--cpath may give one already)
local abs_host = host:sub(1, 1) == "/" and host or (select(2, sh("pwd -P")):gsub("%s+$", "")) .. "/" .. host
local is_root = select(2, sh("id -u")):match("^0%s") ~= nil

--- A fresh directory under /tmp, by its physical path (the cache resolves a relative path with getcwd).
local function tempdir()
  local ok, out = sh("d=$(mktemp -d) && cd \"$d\" && pwd -P")
  assert(ok, out)
  return (out:gsub("%s+$", ""))
end

--- Runs a scenario with env (shell assignments, or "env -u ..."); asserts its success line.
local function scenario(name, env)
  local ok, out = sh((env or "") .. " " .. abs_host .. " " .. name)
  assert(ok, out)
  assert.matches("kcache_host " .. name .. ": ok", out, 1, true)
  return out
end

describe("the kernel cache", function()
  local tmp

  before_each(function()
    tmp = tempdir()
  end)

  after_each(function()
    -- a read-only scenario leaves a directory of mode 0500 behind
    sh("chmod -R u+rwx " .. quote(tmp) .. " && rm -rf " .. quote(tmp))
  end)

  local standalone = {
    roundtrip = "gives back images of 0 bytes to 1 MiB, under keys up to 100 KB, byte for byte",
    miss = "misses a key never stored, without an error",
    truncated = "misses a file cut short at any length (or one byte long), and the next store repairs it",
    damaged = "misses a file with a flipped bit or byte anywhere, or a zeroed run, and the next store repairs it",
    collision = "never loads another key's intact file found under this key's name",
    threads = "serves eight threads of one process storing and loading at once",
    mem = "keeps a map of keys to values in memory, each value destroyed once",
  }
  local names = {}
  for name in pairs(standalone) do names[#names + 1] = name end
  table.sort(names)
  for _, name in ipairs(names) do
    it(standalone[name] .. " (" .. name .. ")", function()
      -- the directory does not exist yet: the cache makes it
      scenario(name, "GPUREDUCE_CACHE=" .. quote(tmp .. "/cache"))
    end)
  end

  it("runs every scenario above in one process when given none (what check-valgrind runs)", function()
    local ok, out = sh(host)
    assert(ok, out)
    assert.matches("kcache_host: ok", out, 1, true)
  end)

  it("keeps every load whole while two processes store one key 200 times each", function()
    local out = scenario("race", "GPUREDUCE_CACHE=" .. quote(tmp))
    assert.matches("during 400 stores", out, 1, true)
  end)

  it("is off, silently, with GPUREDUCE_CACHE=off or empty", function()
    scenario("off", "GPUREDUCE_CACHE=off")
    scenario("off", "GPUREDUCE_CACHE=")
  end)

  it("turns off with one warning when the directory cannot be made, even by root", function()
    assert(sh("touch " .. quote(tmp .. "/file")))
    local out = scenario("unwritable", "GPUREDUCE_CACHE=" .. quote(tmp .. "/file/sub"))
    assert.matches("the kernel cache directory " .. tmp .. "/file/sub cannot be made (Not a directory)", out, 1, true)
  end)

  it("uses a directory it cannot write for loads only, with one warning", function()
    if is_root then
      pending("running as root, whom chmod 0500 does not stop (the test above covers a directory that cannot be made)")
      return
    end
    local env = "GPUREDUCE_CACHE=" .. quote(tmp .. "/ro")
    scenario("seed", env)
    assert(sh("chmod 0500 " .. quote(tmp .. "/ro")))
    local out = scenario("readonly", env)
    assert.matches(tmp .. "/ro cannot be written", out, 1, true)
  end)

  it("stops storing, with one warning, when a write fails, and goes on loading", function()
    local out = scenario("vanish", "GPUREDUCE_CACHE=" .. quote(tmp .. "/v"))
    assert.matches("cannot create a file in the kernel cache directory " .. tmp .. "/v", out, 1, true)
  end)

  describe("finds its directory", function()
    local function dir_of(env)
      local out = scenario("dir", env)
      return out:match("dir=([^\n]*)"), out:match("warning: ([^\n]*)")
    end

    local function mode(path) return (select(2, sh("stat -c %a " .. quote(path))):gsub("%s+$", "")) end

    it("under $XDG_CACHE_HOME/gpureduce, made with mode 0700", function()
      local d, w = dir_of("env -u GPUREDUCE_CACHE XDG_CACHE_HOME=" .. quote(tmp .. "/xdg") .. " HOME=" .. quote(tmp))
      assert.equal(tmp .. "/xdg/gpureduce", d)
      assert.is_nil(w)
      assert.equal("700", mode(tmp .. "/xdg"))
      assert.equal("700", mode(tmp .. "/xdg/gpureduce"))
    end)

    it("under $HOME/.cache/gpureduce when XDG_CACHE_HOME is unset or relative", function()
      assert.equal(tmp .. "/.cache/gpureduce", dir_of("env -u GPUREDUCE_CACHE -u XDG_CACHE_HOME HOME=" .. quote(tmp)))
      assert.equal(tmp .. "/.cache/gpureduce",
        dir_of("env -u GPUREDUCE_CACHE XDG_CACHE_HOME=relative HOME=" .. quote(tmp)))
    end)

    it("at GPUREDUCE_CACHE, a relative path taken from the working directory", function()
      assert.equal(tmp .. "/a/b", dir_of("cd " .. quote(tmp) .. " && GPUREDUCE_CACHE=a/b"))
    end)

    it("nowhere, with a warning, when neither HOME nor XDG_CACHE_HOME is set", function()
      local d, w = dir_of("env -u GPUREDUCE_CACHE -u XDG_CACHE_HOME -u HOME")
      assert.equal("(none)", d)
      assert.matches("neither XDG_CACHE_HOME nor HOME is set", w, 1, true)
    end)
  end)
end)
