-- What trying gpureduce as a new user found (the hardening issue), one block per finding: each of these
-- failed before its fix. Runs on both backends; the GPU-only parts are gated.
local gr = require "gpureduce"
-- `pending` is looked up when the test runs: inside a test it is busted's "mark this test pending"
local H = require("support.helpers").bind(it, function(reason) pending(reason) end)

local message, expect = H.error_message, H.expect_error

describe("a finalizer that runs after the module's context is gone", function()
  it("gets a clear error, never a crash", function()
    local ok, code, out = H.run_lua([[
      -- set up before the module: closing the state runs this finalizer after the context's own
      local probe = setmetatable({}, { __gc = function()
        local gr = package.loaded.gpureduce
        for _, call in ipairs({ function() return gr.buffer(10) end, function() return gr.sum(kept) end,
                                function() return gr.backend() end, function() return kept:get(1) end,
                                function() return tostring(kept) end, function() kept:free() end }) do
          print("finalizer:", pcall(call))
        end
      end })
      local gr = require "gpureduce"
      kept = gr.buffer(10):fill(1)
      print("sum", gr.sum(kept))
    ]])
    assert(ok, "exit " .. tostring(code) .. ":\n" .. out)
    assert.truthy(out:find("the module's context is closed", 1, true), out)
    assert.truthy(out:find("sum\t10", 1, true), out)
  end)
end)

describe("booleans are not numbers", function()
  local b = gr.buffer(4, "int32")
  it("iota refuses a boolean start or step", function()
    expect("step: expected a number, got boolean", b.iota, b, 0, true)
    expect("start: expected a number, got boolean", b.iota, b, false)
  end)
  it("fill and random refuse them too", function()
    expect("value: expected a number, got boolean", b.fill, b, true)
    expect("lo: expected a number, got boolean", b.random, b, 1, true, 5)
    expect("element 2: expected a number, got boolean", gr.buffer, { 1, true }, "int32")
  end)
end)

describe("the collector sees what buffers hold", function()
  local MiB = 1 << 20
  after_each(function() gr.memory_limit(0) end)

  for _, where in ipairs({ "device", "host" }) do
    -- (the finding was 64 MiB buffers failing after ~60 rounds; the same loop, scaled down 8 times)
    it("a loop that drops 8 MiB " .. where .. " buffers runs in a 64 MiB limit, one buffer live", function()
      collectgarbage()
      gr.memory_limit(gr.pool_stats().live_device_bytes + gr.pool_stats().live_pinned_bytes + 64 * MiB)
      local live
      for i = 1, 64 do
        live = gr.buffer(2 * MiB, "float32", { where = where }):fill(i)
      end
      assert.are.equal(64.0 * 2 * MiB, gr.sum(live, { variant = where == "host" and "cpu" or nil }))
    end)
  end

  it("an allocation that fails runs a full collection and tries again", function()
    collectgarbage()
    gr.memory_limit(gr.pool_stats().live_device_bytes + gr.pool_stats().live_pinned_bytes + 32 * MiB)
    collectgarbage("stop")          -- no steps: only the retry can free the dropped buffers
    local ok, err = pcall(function()
      for _ = 1, 16 do gr.buffer(4 * MiB, "uint8") end
    end)
    collectgarbage("restart")
    assert(ok, err)
  end)

  it("past the limit with everything live, the error names the limit", function()
    collectgarbage()
    gr.memory_limit(gr.pool_stats().live_device_bytes + gr.pool_stats().live_pinned_bytes + 8 * MiB)
    local a = gr.buffer(6 * MiB, "uint8")
    local err = message(gr.buffer, 6 * MiB, "uint8")
    assert.truthy(err:find("memory limit", 1, true), err)
    assert.are.equal(6 * MiB, #a)
  end)
end)

describe("streamed reductions check their options on every backend", function()
  local h = gr.buffer(1000, "float32", { where = "host" }):fill(1)
  it("a host variant is refused, not silently replaced", function()
    expect("opts.variant: streamed reductions need a device variant with the 'single' finish ('cpu_pairwise' has none)",
      gr.sum, h, { streamed = true, variant = "cpu_pairwise" })
  end)
  it("a block the chunk kernel cannot take is refused", function()
    expect("opts.block: 100 is not accepted by variant 'warp_shuffle'", gr.sum, h, { streamed = true, block = 100 })
  end)
  it("a finish other than single is refused", function()
    expect("opts.finish: streamed reductions finish each chunk in one kernel", gr.sum, h,
      { streamed = true, finish = "host" })
  end)
  it("good options reduce", function()
    assert.are.equal(1000.0, gr.sum(h, { streamed = true, block = 512 }))
  end)
  it("an empty host buffer gives the identity with every accepted finish (found by the fuzz)", function()
    local e = gr.buffer(0, "int32", { where = "host" })
    assert.are.equal(0, gr.sum(e, { streamed = true, finish = "single" }))
    assert.are.equal(1, gr.prod(e, { streamed = true }))
    assert.is_false(gr.any(e, { streamed = true, finish = "single" }))
    expect("min of an empty buffer is undefined", gr.min, e, { streamed = true, finish = "single" })
  end)
end)

describe("gr.copy between overlapping views of one buffer", function()
  -- more than one bounce area (16 MiB) in each direction on the GPU
  for _, n in ipairs({ 1000, 6 * (1 << 20) + 7 }) do
    for _, shift in ipairs({ 1, 3, 1 << 20 }) do
      it(string.format("moves like memmove, n = %d, shift %d, both directions", n, shift), function()
        local b = gr.buffer(n + shift, "int32"):iota(1)
        gr.copy(b:slice(1 + shift, n), b:slice(1, n))         -- up: dst above src
        assert.are.equal(1, b:get(1))
        assert.are.equal(1, b:get(1 + shift))
        assert.are.equal(n, b:get(n + shift))
        local want = 0
        for i = 1, shift do want = want + i end
        want = want + n * (n + 1) // 2
        assert.are.equal(want, gr.sum(b))
        b:iota(1)
        gr.copy(b:slice(1, n), b:slice(1 + shift, n))         -- down: dst below src
        assert.are.equal(1 + shift, b:get(1))
        assert.are.equal(n + shift, b:get(n))
        assert.are.equal(n + shift, b:get(n + shift))
      end)
    end
  end
end)

describe("float32 data with the default accumulator is reduced in float32 on every variant", function()
  for _, v in ipairs(H.variants()) do
    H.variant_it(v, v.name .. ": 2^24 + 1 + 1 is 2^24 in float32, 2^24 + 2 with acc = float64", function()
      local b = gr.buffer({ 16777216, 1, 1 }, "float32")
      assert.are.equal(16777216.0, gr.sum(b, { variant = v.name }))
      assert.are.equal(16777218.0, gr.sum(b, { variant = v.name, acc = "float64" }))
    end)
  end

  it("a float product whose partial products overflow is documented, and acc = float64 avoids it", function()
    -- the true product is 1; in float32 any order that multiplies the two large factors first gives inf
    -- (and with the small ones 0, inf * 0 = NaN): docs/api.md says so
    local b = gr.buffer({ 1e30, 1e30, 1e-30, 1e-30 }, "float32")
    local p = gr.prod(b)
    assert(p ~= p or p == math.huge or p == 0 or math.abs(p - 1) < 1e-5, tostring(p))
    assert(math.abs(gr.prod(b, { acc = "float64" }) - 1) < 1e-6)
  end)
end)

describe("options and arguments that used to be accepted silently", function()
  local b = gr.buffer(100, "float32"):random(1)

  it("integer options that do not fit are refused, not truncated", function()
    expect("opts.block: must be 1 to 2147483647 (got 4294967552)", gr.sum, b, { block = 2 ^ 32 + 256 })
    expect("opts.streams: must be 1 to 2147483647 (got 4294967297)", gr.sum, b, { streamed = true, streams = 2 ^ 32 + 1 })
    expect("opts.reps: must be 1 to 2147483647", gr.bench, b, { reps = 2 ^ 40 })
    expect("opts.block: expected an integer, got 1.5", gr.sum, b, { block = 1.5 })
  end)

  it("every options table refuses unknown keys", function()
    expect("unknown option 'wher' (accepted: device, where)", gr.buffer, 4, "float32", { wher = "host" })
    expect("opts.where: unknown value 'gpu' (accepted: device, host)", gr.buffer, 4, "float32", { where = "gpu" })
    expect("unknown option 'rep' (accepted: reps, warmup)", gr.bench_read, b, { rep = 3 })
    expect("unknown option 'async'", gr.bench, b, { async = true })
    expect("opts: expected a table, got string", gr.sum, b, "fast")
  end)

  it("messages name the argument and the value given", function()
    expect("size must be >= 0 (got -1099511627776)", gr.buffer, -2 ^ 40)
    expect("expected a size, a table or a byte string, got no value", gr.buffer)
    expect("bad argument #2", b.set, b, { 1, 2, 3 }, 99)
    expect("3 values from offset 99 do not fit in a buffer of 100 (room for 2)", b.set, b, { 1, 2, 3 }, 99)
    expect("offset 102 is past the end of the buffer (size 100)", b.set, b, { 1 }, 102)
    expect("slice of 9223372036854775807 elements from 2 is outside the buffer (size 100)", b.slice, b, 2,
      math.maxinteger)
    expect("elements of 9223372036854775807 elements from 5 is outside", b.totable, b, 5, math.maxinteger)
  end)

  it("random refuses infinite bounds", function()
    expect("hi: must be finite (got inf)", b.random, b, 1, -1, math.huge)
    expect("lo: must be finite (got -inf)", b.random, b, 1, -math.huge, 1)
    expect("hi: must be greater than lo", b.random, b, 1, 1, 1)
  end)

  it("random integers are uniform, also over spans that do not divide 2^64", function()
    local r = gr.buffer(30000, "int32"):random(7, 0, 2)
    local counts = { 0, 0, 0 }
    for _, v in ipairs(r:totable()) do counts[v + 1] = counts[v + 1] + 1 end
    for k = 1, 3 do assert(math.abs(counts[k] - 10000) < 400, table.concat(counts, " ")) end
    -- span 3 * 2^61: h % span would put 3/4 of the values below 2^62 instead of 2/3
    local w = gr.buffer(30000, "int64"):random(9, 0, 3 * (1 << 61) - 1)
    local low = 0
    for _, v in ipairs(w:totable()) do if v < (1 << 62) then low = low + 1 end end
    assert(math.abs(low / 30000 - 2 / 3) < 0.015, "fraction below 2^62: " .. low / 30000)
  end)

  it("values that do not fit the dtype are refused, floats included", function()
    expect("element 1: -1.0 does not fit in uint64", gr.buffer, { -1.0 }, "uint64")
    expect("element 1: 1e+39 does not fit in float32", gr.buffer, { 1e39 }, "float32")
    expect("value: 1e+39 does not fit in float32", function() gr.buffer(2, "float32"):fill(1e39) end)
    -- a negative Lua integer stands for the uint64 with the same bits, the form uint64 values come back in
    assert.are.equal(-1, gr.buffer({ -1 }, "uint64"):get(1))
    assert.are.equal(math.huge, gr.buffer({ math.huge }, "float32"):get(1))
  end)

  it("buffers index their elements, 1-based (nil outside, as a table), and refuse other fields", function()
    local c = gr.buffer({ 10, 20, 30 }, "int32")
    assert.are.equal(10, c[1])
    assert.are.equal(30, c[3])
    c[2] = 25
    assert.are.equal(25, c:get(2))
    assert.is_nil(c[0])
    assert.is_nil(c[4])
    assert.is_nil(c[1.5])
    expect("index 4 out of range (1..3)", function() return c:get(4) end)
    expect("index: expected an integer, got 1.5", function() return c:get(1.5) end)
    expect("value: 1099511627776.0 does not fit in int32", function() c[1] = 2 ^ 40 end)
    expect("value: expected a number, got string", function() c[1] = "x" end)
    expect("cannot set field 'size'", function() c.size = 3 end)
    assert.is_nil(c.nosuchmethod)
    assert.are.equal(3, c:size())
  end)
end)
