-- The GPUREDUCE_* environment variables (engine/base/env.c): a value a variable does not accept makes
-- `require "gpureduce"` (and gr_context_create) fail with a message that names the variable and what it
-- accepts; before, "1e9" was a 1-byte memory limit, "abc" none, "-5" 2^64 - 5, a thread count "abc" one
-- thread, and a malformed GPUREDUCE_FAULT was ignored. Each case runs in a process of its own.
local H = require("support.helpers").bind(it, function(reason) pending(reason) end)

--- Loads the module under env and runs code; the process's success and output.
local function load_with(env, code)
  local ok, _, out = H.run_lua('local gr = require "gpureduce"\n' .. (code or 'print("loaded")'), env)
  return ok, out
end

local function q(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

describe("an environment variable set to a value it does not accept", function()
  local cases = {
    { "GPUREDUCE_MEMORY_LIMIT", "1e9", "a whole number of bytes in decimal digits" },
    { "GPUREDUCE_MEMORY_LIMIT", "abc", "a whole number of bytes" },
    { "GPUREDUCE_MEMORY_LIMIT", "-5", "a whole number of bytes" },
    { "GPUREDUCE_MEMORY_LIMIT", "18446744073709551616", "a whole number of bytes" },   -- 2^64
    { "GPUREDUCE_MEMORY_LIMIT", "4k", "a whole number of bytes" },
    { "GPUREDUCE_CPU_THREADS", "abc", "a whole number of threads from 1 to 64" },
    { "GPUREDUCE_CPU_THREADS", "0", "from 1 to 64" },
    { "GPUREDUCE_CPU_THREADS", "65", "from 1 to 64" },
    { "GPUREDUCE_CPU_THREADS", " 4", "from 1 to 64" },
    { "GPUREDUCE_FAULT", "launch", "kind:k, kind one of alloc, launch, copy" },
    { "GPUREDUCE_FAULT", "lunch:3", "kind one of alloc, launch, copy" },
    { "GPUREDUCE_FAULT", "alloc:-1", "k a whole number" },
    { "GPUREDUCE_FAULT", "alloc:3x", "k a whole number" },
    { "GPUREDUCE_BACKEND", "gpu", "auto or cpu" },
    { "GPUREDUCE_BACKEND", "CPU", "auto or cpu" },
    { "GPUREDUCE_DEVICE", "x", "a CUDA device ordinal from 0 to 15" },
    { "GPUREDUCE_DEVICE", "16", "from 0 to 15" },
    { "GPUREDUCE_EXACT_ROUND", "17", "a multiple of 16 from 16 to 1073741824" },
    { "GPUREDUCE_EXACT_ROUND", "0", "a multiple of 16" },
    { "GPUREDUCE_CACHE_SHARED", "yes", "0 or 1" },
    { "GPUREDUCE_COMPILE_TIMEOUT", "10s", "a whole number of seconds from 0 to 86400" },
    { "GPUREDUCE_BY_KEY_RUNS", "2", "0 or 1" },
    { "GPUREDUCE_RUNS_ITEMS", "12", "8 or 16" },
    { "GPUREDUCE_RUNS_ITEMS", "32", "8 or 16" },
    { "GPUREDUCE_CACHE", string.rep("d", 4001), "off, empty (no disk cache) or a directory of at most 4000 bytes" },
  }
  for _, c in ipairs(cases) do
    local name, value, accepted = c[1], c[2], c[3]
    it(("fails require with %s=%.20s, naming it and what it accepts"):format(name, value), function()
      local ok, out = load_with(name .. "=" .. q(value))
      assert.is_false(ok, out)
      local shown = #value > 80 and value:sub(1, 80) .. "..." or value
      assert.truthy(out:find("gpureduce: " .. name .. ": '" .. shown .. "' is not accepted (expected ", 1, true), out)
      assert.truthy(out:find(accepted, 1, true), out)
    end)
  end

  it("fails gr_context_create too, with a context that says why", function()
    local program, missing = H.host_program("c_api_host")
    if not program then
      pending(missing)
      return
    end
    local f = assert(io.popen("GPUREDUCE_CPU_THREADS=many " .. program .. " 2>&1; echo \"exit $?\""))
    local out = f:read("a")
    f:close()
    assert.truthy(out:find("c_api_host: GPUREDUCE_CPU_THREADS: 'many' is not accepted", 1, true), out)
    assert.truthy(out:find("exit 1", 1, true), out)
  end)
end)

describe("an environment variable set to a value it accepts", function()
  it("GPUREDUCE_MEMORY_LIMIT caps the memory in bytes", function()
    local ok, out = load_with("GPUREDUCE_MEMORY_LIMIT=1000", [[
      local b = gr.buffer(100, "float64")      -- 800 bytes
      print(pcall(gr.buffer, 100, "float64"))  -- 800 more: over the 1000
    ]])
    assert(ok, out)
    assert.truthy(out:find("false", 1, true), out)
    assert.truthy(out:find("out of", 1, true), out)
  end)

  it("GPUREDUCE_FAULT arms a fault: alloc:2 fails the second allocation", function()
    local ok, out = load_with("GPUREDUCE_FAULT=alloc:2", [[
      print("first", pcall(gr.buffer, 3))
      print("second", pcall(gr.buffer, 3))
    ]])
    assert(ok, out)
    assert.truthy(out:find("first\ttrue", 1, true), out)
    assert.truthy(out:find("second\tfalse\tgpureduce: allocation of 24 bytes", 1, true) or
      out:find("second\tfalse", 1, true), out)
    assert.truthy(out:find("injected fault", 1, true), out)
  end)

  it("the others load: a thread count, the backend, a cache setting, a timeout; empty means unset", function()
    for _, env in ipairs {
      "GPUREDUCE_CPU_THREADS=1", "GPUREDUCE_CPU_THREADS=64", "GPUREDUCE_BACKEND=cpu", "GPUREDUCE_BACKEND=auto",
      "GPUREDUCE_BACKEND=", "GPUREDUCE_MEMORY_LIMIT=0", "GPUREDUCE_MEMORY_LIMIT=", "GPUREDUCE_FAULT=launch:0",
      "GPUREDUCE_EXACT_ROUND=64", "GPUREDUCE_CACHE_SHARED=0", "GPUREDUCE_CACHE=off", "GPUREDUCE_COMPILE_TIMEOUT=0", "GPUREDUCE_BY_KEY_RUNS=0",
      "GPUREDUCE_RUNS_ITEMS=8", "GPUREDUCE_RUNS_ITEMS=16", "GPUREDUCE_DEVICE=0", "GPUREDUCE_CPU_THREADS=",
    } do
      local ok, out = load_with(env, 'print(gr.sum(gr.buffer({1, 2, 3}, "int32")))')
      assert(ok, env .. ": " .. out)
      assert.equal("6\n", out, env)
    end
  end)
end)
