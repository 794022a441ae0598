-- Injected failures (gr.debug_fault): the k-th allocation, kernel launch or copy, and every one after
-- it until disarmed, fails as the CUDA runtime would report it. For every k over a whole call, the call must raise an error that names the
-- CUDA error, leave its input as it was, hold no memory afterwards beyond the pool's reusable scratch
-- (gr.pool_trim gives that back, so the live bytes return to where they were), and the next call must
-- work. The same machinery runs on the CPU backend for allocations.
local gr = require "gpureduce"
-- `pending` is looked up when the test runs: inside a test it is busted's "mark this test pending"
local H = require("support.helpers").bind(it, function(reason) pending(reason) end)

local kinds = { "alloc", "launch", "copy" }

local function live()
  local s = gr.pool_stats()
  return s.live_device_bytes + s.live_pinned_bytes, s.live_allocations
end

--- The events of each kind one run of `call` makes, from an empty pool.
local function events_of(call)
  gr.pool_trim()
  local before = gr.debug_events()
  call()
  local after = gr.debug_events()
  local n = {}
  for _, k in ipairs(kinds) do n[k] = after[k] - before[k] end
  return n
end

--- Walks k over every event of every kind that `call` makes; `check` sees the value of a good run.
local function walk(label, call, inputs, check)
  local counts = events_of(call)
  local tried = 0
  for _, kind in ipairs(kinds) do
    for k = 1, counts[kind] do
      local bytes = {}
      for i, b in ipairs(inputs) do bytes[i] = b:tobytes() end
      -- collected first: the retry after an allocation failure runs a full collection, which would
      -- otherwise free older garbage and move the count
      collectgarbage()
      gr.pool_trim()
      local base_bytes, base_allocs = live()
      gr.debug_fault(kind, k)
      local ok, err = pcall(call)
      gr.debug_fault(kind, 0)
      local where = string.format("%s, %s %d of %d", label, kind, k, counts[kind])
      assert(not ok, where .. ": no error")
      err = tostring(err)
      assert(err:find("injected fault", 1, true), where .. ": " .. err)
      if gr.backend() == "cuda" then assert(err:find("cudaError", 1, true), where .. ": " .. err) end
      for i, b in ipairs(inputs) do assert(b:tobytes() == bytes[i], where .. ": input " .. i .. " changed") end
      gr.pool_trim()
      local now_bytes, now_allocs = live()
      assert(now_bytes == base_bytes and now_allocs == base_allocs,
        string.format("%s: %d bytes in %d allocations held, %d in %d before", where, now_bytes, now_allocs,
          base_bytes, base_allocs))
      check(call(), where)
      tried = tried + 1
    end
  end
  return tried
end

describe("injected faults", function()
  it("name an unknown kind and a bad count", function()
    local ok, err = pcall(gr.debug_fault, "disk", 1)
    assert.is_false(ok)
    assert.truthy(tostring(err):find("unknown fault 'disk' (accepted: alloc, launch, copy)", 1, true), err)
    ok, err = pcall(gr.debug_fault, "alloc", -1)
    assert.truthy(tostring(err):find("k must be >= 0 (got -1)", 1, true), err)
  end)

  it("a failed buffer allocation says so and leaves nothing behind", function()
    collectgarbage()
    local bytes, allocs = live()
    gr.debug_fault("alloc", 1)
    local ok, err = pcall(gr.buffer, 1000, "float64")     -- and the retry after a full collection
    gr.debug_fault("alloc", 0)
    assert.is_false(ok)
    assert.truthy(tostring(err):find("injected fault", 1, true), err)
    local now_bytes, now_allocs = live()
    assert.are.equal(bytes, now_bytes)
    assert.are.equal(allocs, now_allocs)
    assert.are.equal(1000, #gr.buffer(1000, "float64"))
  end)

  it("count allocations on every backend", function()
    local n = events_of(function() gr.buffer(10):free() end)
    assert.are.equal(1, n.alloc)
  end)

  local n = 3000017
  local function data()
    return gr.buffer(n, "float32"):random(5, -1, 1)
  end

  for _, finish in ipairs({ "device", "hybrid", "host", "single" }) do
    H.gpu_it("every fault of a reduction with the " .. finish .. " finish", function()
      local b = data()
      local want = gr.sum(b, { variant = "warp_shuffle", finish = finish, block = 64 })
      local call = function()
        return gr.sum(b, { variant = "warp_shuffle", finish = finish, block = 64, threshold = 64 })
      end
      local tried = walk(finish, call, { b }, function(v, where) assert(v == want, where .. ": " .. v) end)
      assert(tried >= 3, "only " .. tried .. " faults tried")
    end)
  end

  H.gpu_it("every fault of an asynchronous reduction", function()
    local b = data()
    local want = gr.max(b)
    local s = gr.stream()
    local tried = walk("async", function() return gr.max(b, { async = true, stream = s }):wait() end, { b },
      function(v, where) assert(v == want, where) end)
    assert(tried >= 3, "only " .. tried .. " faults tried")
  end)

  H.gpu_it("every fault of a streamed reduction of host data", function()
    local h = gr.buffer(n, "int32", { where = "host" }):random(3, -100, 100)
    local want = gr.sum(h, { variant = "cpu" })
    local tried = walk("streamed", function() return gr.sum(h, { streamed = true, chunk = 1 << 20, streams = 3 }) end,
      { h }, function(v, where) assert(v == want, where) end)
    assert(tried >= 5, "only " .. tried .. " faults tried")
  end)

  H.gpu_it("every fault of a copy between overlapping views", function()
    local b = gr.buffer(5 * (1 << 20), "float64"):iota(1)
    local src, dst = b:slice(1, 4 * (1 << 20)), b:slice(1 << 20, 4 * (1 << 20))
    local call = function()
      b:iota(1)
      gr.copy(dst, src)
      return gr.sum(b)
    end
    local want = call()
    -- the copy writes into b: only the source range is checked unchanged after a failure
    walk("copy", call, {}, function(v, where) assert(v == want, where) end)
  end)
end)
