-- The cache of compiled kernel images (engine/jit/kcache.c) on its own, without a GPU: build/kcache_host
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
    writable = "never loads an entry that group or others may write, and the next store replaces it",
    symlink = "never follows a symbolic link at an entry's name, and the next store replaces the link",
    fifo = "does not hang on a FIFO at an entry's name, and the next store replaces it",
    huge = "refuses a 3 GB entry by its size, without reading it or allocating for it",
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

  describe("trusts only what the user alone may write:", function()
    --- The disk mode and the warning of a process whose cache is at dir (and env).
    local function report(dir, env)
      local out = scenario("report", "GPUREDUCE_CACHE=" .. quote(dir) .. " " .. (env or ""))
      return tonumber(out:match("disk=(%d)")), out:match("warning: ([^\n]*)")
    end
    local OFF, READ_ONLY, READ_WRITE = 0, 1, 2

    it("its own directory, made with mode 0700, is read and written", function()
      local mode, w = report(tmp .. "/own")
      assert.equal(READ_WRITE, mode)
      assert.is_nil(w)
    end)

    it("a directory others may write (pre-made 0777, 0770 or 0702) is not used, with a warning", function()
      for _, m in ipairs { "777", "770", "702" } do
        assert(sh("mkdir -p " .. quote(tmp .. "/w" .. m) .. " && chmod " .. m .. " " .. quote(tmp .. "/w" .. m)))
        local mode, w = report(tmp .. "/w" .. m)
        assert.equal(OFF, mode, m)
        assert.matches("the kernel cache directory " .. tmp .. "/w" .. m .. " may be written by other users (mode 0" .. m
          .. "): it is not used", w, 1, true)
      end
    end)

    it("a symbolic link as the directory is not followed, with a warning", function()
      assert(sh("mkdir " .. quote(tmp .. "/real") .. " && chmod 700 " .. quote(tmp .. "/real") .. " && ln -s real "
        .. quote(tmp .. "/link")))
      local mode, w = report(tmp .. "/link")
      assert.equal(OFF, mode)
      assert.matches("the kernel cache directory " .. tmp .. "/link is a symbolic link", w, 1, true)
      -- a link above the directory is the user's choice
      mode, w = report(tmp .. "/link/sub")
      assert.equal(READ_WRITE, mode, w)
    end)

    it("an entry another user owns, even a well-formed one (the forged entry), is never loaded", function()
      if not is_root then
        pending("not root: an entry of another user cannot be made here (chown); the writable entry above runs")
        return
      end
      scenario("foreign", "GPUREDUCE_CACHE=" .. quote(tmp .. "/f"))
    end)

    it("a directory of another user is not used, unless GPUREDUCE_CACHE_SHARED=1: then for loads only", function()
      if not is_root then
        pending("not root: a directory of another user cannot be made here (chown)")
        return
      end
      local dir = tmp .. "/site"
      local env = "GPUREDUCE_CACHE=" .. quote(dir)
      scenario("seed", env)
      assert(sh("chmod 755 " .. quote(dir) .. " && chmod 644 " .. quote(dir) .. "/* && chown -R 65534:65534 " .. quote(dir)))
      local mode, w = report(dir)
      assert.equal(OFF, mode)
      assert.matches("the kernel cache directory " .. dir .. " belongs to another user (uid 65534): it is not used", w,
        1, true)
      assert.matches("GPUREDUCE_CACHE_SHARED=1", w, 1, true)
      assert.equal(OFF, (report(dir, "GPUREDUCE_CACHE_SHARED=0")))
      -- a file of ours among theirs (put there while the directory was ours for a moment): refused
      assert(sh("chown 0 " .. quote(dir) .. " && " .. env .. " " .. abs_host .. " seed_ours && chown 65534 " .. quote(dir)))
      scenario("shared", "GPUREDUCE_CACHE=" .. quote(dir) .. " GPUREDUCE_CACHE_SHARED=1")
      -- others may write it: refused even then
      assert(sh("chmod 775 " .. quote(dir)))
      assert.equal(OFF, (report(dir, "GPUREDUCE_CACHE_SHARED=1")))
    end)

    it("says GPUREDUCE_CACHE_SHARED's accepted values when it holds another", function()
      local mode, w = report(tmp .. "/c", "GPUREDUCE_CACHE_SHARED=yes")
      assert.equal(OFF, mode)
      assert.matches("GPUREDUCE_CACHE_SHARED: 'yes' is not accepted (expected 0 or 1", w, 1, true)
    end)
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
