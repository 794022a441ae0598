-- The buffer pool (issue 26): device buffers come from a caching, stream-ordered pool, so a call that returns
-- a new buffer (segments, axes, astype) costs what its `out =` form costs. gr.pool_stats() reports the pool
-- (buffer_* fields, the process's), gr.pool_trim() gives its idle memory back, and the memory limit, the
-- live-byte counts and the injected faults see only what the context holds, as before. On the cpu backend
-- there is no pool (buffer_pool false, the figures zero); the GPU cases are pending there.
-- GPUREDUCE_BUFFER_POOL=0 turns it off (for A/B timing and debugging), in a process of its own here.
local gr = require "gpureduce"
local H = require("support.helpers").bind(it, function(reason) pending(reason) end)

local MiB = 1 << 20

--- Whether device buffers come from the pool in this process: with several GPUs it pools only where each
-- reaches every other peer to peer (runtime.cu), which the H100 and H200 hosts do.
local function pooled()
  if gr.backend() ~= "cuda" then return false end
  gr.buffer(1, "float32"):free()
  return gr.pool_stats().buffer_pool
end

--- A GPU test of the pool itself: pending where the GPUs cannot reach each other and the pool is off.
local function pool_it(title, fn)
  if gr.backend() == "cuda" and #gr.devices() > 1 and not pooled() then
    it(title .. " #gpu", function() pending("the buffer pool is off: these GPUs do not reach each other") end)
  else
    H.gpu_it(title, fn)
  end
end

local function live()
  local s = gr.pool_stats()
  return s.live_device_bytes + s.live_pinned_bytes, s.live_allocations
end

--- Drops what nobody holds, and lets the frees queued on the device complete (gr.pool_trim waits for them,
-- and trims: `trim` false skips that, a small synchronous sum then orders the frees' completion instead).
local function settle(trim)
  collectgarbage()
  collectgarbage()
  if trim ~= false then gr.pool_trim() else gr.sum(gr.buffer({ 1, 2, 3 }, "float32")) end
end

--- The pool's figures once a buffer of n float32 has been made and freed: its memory idle in the pool.
local function freed_one(n)
  gr.buffer(n, "float32"):free()
  settle(false)
  local s = gr.pool_stats()
  assert(s.buffer_idle_bytes >= n * 4, "the freed buffer is not idle in the pool")
  return s
end

describe("gr.pool_stats() and the buffer pool", function()
  after_each(function()
    gr.memory_limit(0)
    gr.debug_fault("alloc", 0)
  end)

  it("reports the buffer pool's fields beside the scratch pool's", function()
    local s = gr.pool_stats()
    assert.is_boolean(s.buffer_pool)
    for _, k in ipairs { "buffer_cached_bytes", "buffer_idle_bytes", "buffer_used_bytes", "buffer_hits",
      "buffer_misses", "live_device_bytes", "device_allocs", "slots" } do
      assert(math.type(s[k]) == "integer" and s[k] >= 0, k .. ": " .. tostring(s[k]))
    end
    assert(s.buffer_idle_bytes <= s.buffer_cached_bytes, "idle above cached")
    if gr.backend() ~= "cuda" then
      assert.is_false(s.buffer_pool)
      assert.equal(0, s.buffer_cached_bytes)
      assert.equal(0, s.buffer_hits + s.buffer_misses)
    end
  end)

  -- In a process of its own: lbuffer.c's pacing mark is the Lua state's (twice what it held after the
  -- last collection it ran), and earlier specs in this process may have left it high.
  it("many calls that return a new buffer hold no more memory than a few results", function()
    local ok, _, out = H.run_lua([[
      local gr = require "gpureduce"
      local MiB = 1 << 20
      local function live()
        local s = gr.pool_stats()
        return s.live_device_bytes + s.live_pinned_bytes
      end
      local n, m = 1 << 20, 4
      local b = gr.buffer(n, "float32"):iota(0, 1)
      local m2 = b:view { n // 64, 64 }
      collectgarbage()
      gr.pool_trim()                                 -- idle scratch slots too: live() counts them
      local base, cached = live(), gr.pool_stats().buffer_cached_bytes
      for i = 1, 200 do
        local r = gr.reduce(b, { op = "sum", segment = m })
        if i == 1 or i == 200 then assert(r:get(1) == 6.0) end      -- 0 + 1 + 2 + 3
        local a = gr.sum(m2, { axis = 2 })
        local c = b:astype("float64")
        assert(#r == n // m and #a == n // 64 and #c == n)
      end
      -- collected as they go (a full collection once the garbage passes the live set or 64 MiB), not 200
      -- calls' worth (1.8 GB), whatever the collector's mode
      local per_call = (n // m) * 4 + n * 8 + n // 16
      local held = live() - base
      assert(held <= 64 * MiB + 4 * per_call, ("%d bytes still held after 200 calls"):format(held))
      local grew = gr.pool_stats().buffer_cached_bytes - cached
      assert(grew <= 128 * MiB + 4 * per_call, ("the pool grew by %d bytes"):format(grew))
      collectgarbage()
      collectgarbage()
      gr.pool_trim()
      assert(live() == base, ("%d bytes left, %d before"):format(live(), base))
      print("ok")
    ]])
    assert(ok and out:find("ok", 1, true), out)
  end)

  it("still enforces the memory limit, on what the context holds", function()
    settle()
    local held = live()
    gr.memory_limit(held + 5 * MiB // 2)
    local b = gr.buffer(MiB // 4, "float32")              -- 1 MiB
    local ok, err = pcall(gr.buffer, MiB // 2, "float32")   -- 2 MiB more: past the limit
    assert.is_false(ok)
    assert.truthy(tostring(err):find("memory limit", 1, true), tostring(err))
    b:free()
    settle(false)
    -- the freed MiB is the pool's again, not the context's: 2 MiB now fits, cached or not
    local c = gr.buffer(MiB // 2, "float32")
    assert.equal(MiB // 2, #c)
    c:free()
  end)

  it("fails an allocation cleanly under an injected fault, and the next call works", function()
    local b = gr.buffer(4096, "float32"):iota(1, 1)
    settle()
    local bytes, allocs = live()
    local before = gr.pool_stats()
    gr.debug_fault("alloc", 1)
    local ok, err = pcall(gr.reduce, b, { op = "sum", segment = 16 })
    gr.debug_fault("alloc", 0)
    assert.is_false(ok)
    assert.truthy(tostring(err):find("injected fault", 1, true), tostring(err))
    settle()
    local now_bytes, now_allocs = live()
    assert.equal(bytes, now_bytes)
    assert.equal(allocs, now_allocs)
    local after = gr.pool_stats()
    assert.equal(before.buffer_hits + before.buffer_misses, after.buffer_hits + after.buffer_misses)
    local r = gr.reduce(b, { op = "sum", segment = 16 })
    assert.equal(136.0, r:get(1))                        -- 1 + ... + 16
  end)

  pool_it("serves a freed buffer's size from the pool: a hit, no new memory from the driver", function()
    local n = 16 * MiB // 4
    local s0 = freed_one(n)
    assert.is_true(s0.buffer_pool)
    local c = gr.buffer(n, "float32")
    local s1 = gr.pool_stats()
    assert.equal(s0.buffer_misses, s1.buffer_misses)
    assert.equal(s0.buffer_hits + 1, s1.buffer_hits)
    assert.equal(s0.buffer_cached_bytes, s1.buffer_cached_bytes)
    -- (less a small buffer of settle() the collector may have freed since: the pool counts it too)
    assert(s1.buffer_used_bytes >= s0.buffer_used_bytes + n * 4 - MiB,
      ("used bytes did not grow by the buffer: %d -> %d"):format(s0.buffer_used_bytes, s1.buffer_used_bytes))
    assert.equal(0.0, c:get(n))                          -- gr.buffer zero-fills memory it reuses too
    c:free()
  end)

  pool_it("gr.pool_trim() gives the idle memory back to the driver", function()
    local n = 64 * MiB // 4
    local s0 = freed_one(n)
    gr.pool_trim()
    local s1 = gr.pool_stats()
    assert(s1.buffer_cached_bytes <= s0.buffer_cached_bytes - n * 4 // 2,
      ("cached %d -> %d after the trim"):format(s0.buffer_cached_bytes, s1.buffer_cached_bytes))
    assert(s1.buffer_idle_bytes < s0.buffer_idle_bytes)
    local c = gr.buffer(n, "float32"):fill(2)             -- and the next allocation takes it again
    assert.equal(2.0, c:get(n))
    assert.equal(s1.buffer_misses + 1, gr.pool_stats().buffer_misses)
  end)

  -- Pool memory is its own GPU's until the others are granted access: copies between GPUs, a sharded
  -- reduction and segment results gathered across GPUs must all see each other's pooled buffers.
  pool_it("two GPUs' pooled buffers copy to each other and reduce as shards", function()
    if #gr.devices() < 2 then return pending("needs two GPUs") end
    local n = (1 << 20) + 3
    for round = 1, 3 do                                 -- later rounds reuse freed pool memory
      local a = gr.buffer(n, "float32", { device = 1 }):iota(round, 1)
      local b = gr.buffer(n, "float32", { device = 2 })
      gr.copy(b, a)
      assert.equal(a:get(n), b:get(n))
      local back = gr.buffer(n, "float32", { device = 1 })
      gr.copy(back, b)
      assert.equal(round + n - 1.0, back:get(n))
      local s = gr.sharded(n, "int32", { devices = { 1, 2 } }):iota(1, 1)
      assert.equal(n * (n + 1) // 2, gr.sum(s))
      -- segment results on GPU 1, the middle segment spanning both GPUs' shards
      local r = gr.reduce(s, { op = "max", offsets = gr.buffer({ 0, 1000, n - 1000, n }, "int64") })
      assert.same({ 1000, n - 1000, n }, r:totable())
      a:free(); b:free(); back:free(); s:free()
      collectgarbage()
    end
    assert.is_true(gr.pool_stats().buffer_pool)
  end)

  H.gpu_it("a buffer freed while an async reduction reads it gives the right value", function()
    local n = 1 << 26
    for _, on_stream in ipairs { false, true } do
      local b = gr.buffer(n, "int32"):fill(1)            -- an integer sum: exactly n
      local p = gr.sum(b, { async = true, stream = on_stream and gr.stream() or nil })
      b:free()
      b = nil
      collectgarbage()
      -- new buffers of the same size, written at once: none may get b's memory while the sum reads it
      local others = {}
      for i = 1, 4 do others[i] = gr.buffer(n, "float32"):fill(-7) end
      assert.equal(n, p:wait())
      assert.equal(-7.0, others[4]:get(n))
    end
  end)

  H.gpu_it("the results of a dropped async axis reduction are never handed out early", function()
    local rows, cols = 1 << 12, 1 << 12
    local m = gr.buffer(rows * cols, "float32"):fill(1):view { rows, cols }
    for _ = 1, 8 do
      local p = gr.sum(m, { axis = 2, async = true, stream = gr.stream() })
      p = nil                                           -- dropped with its results: the collector frees them
      collectgarbage()
      local c = gr.buffer(rows, "float32"):fill(3)
      assert.equal(3.0, c:get(rows))
      local q = gr.sum(m, { axis = 2 })
      assert.equal(cols * 1.0, q:get(1))
    end
  end)
end)

describe("GPUREDUCE_BUFFER_POOL", function()
  local code = [[
    local gr = require "gpureduce"
    local b = gr.buffer(1 << 16, "float32"):iota(0, 1)
    for _ = 1, 20 do assert(gr.reduce(b, { op = "sum", segment = 4 }):get(2) == 22.0) end
    local s = gr.pool_stats()
    print(tostring(s.buffer_pool), s.buffer_cached_bytes, s.buffer_hits + s.buffer_misses)
  ]]

  it("=0 turns the pool off: buffers still work, nothing is cached", function()
    local ok, _, out = H.run_lua(code, "GPUREDUCE_BUFFER_POOL=0")
    assert(ok, out)
    assert.equal("false\t0\t0\n", out)
  end)

  it("=1 (the default) pools on a GPU (several GPUs: where they reach each other peer to peer)", function()
    local ok, _, out = H.run_lua(code, "GPUREDUCE_BUFFER_POOL=1")
    assert(ok, out)
    if pooled() then
      assert.truthy(out:find("^true\t"), out)
    else
      assert.equal("false\t0\t0\n", out)
    end
  end)

  it("refuses other values, naming the variable and what it accepts", function()
    local ok, _, out = H.run_lua('require "gpureduce"', "GPUREDUCE_BUFFER_POOL=yes")
    assert.is_false(ok)
    assert.truthy(out:find("GPUREDUCE_BUFFER_POOL: 'yes' is not accepted (expected 0 or 1", 1, true), out)
  end)
end)
