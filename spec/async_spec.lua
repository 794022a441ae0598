-- Asynchronous reductions, streams and the lifetime of work in flight.
local gr = require "gpureduce"
-- `pending` is looked up when the test runs: inside a test it is busted's "mark this test pending"
local H = require("support.helpers").bind(it, function(reason) pending(reason) end)

describe("async reductions", function()
  it("return a Pending whose wait gives the synchronous value, again and again", function()
    local b = gr.buffer(1000003, "float32"):random(9)
    local want = gr.sum(b)
    local p = gr.sum(b, { async = true })
    assert.matches("^gpureduce.Pending", tostring(p))
    assert.are.equal(want, p:wait())
    assert.are.equal(want, p:wait())
    assert.is_true(p:ready())
  end)

  it("work for every op, with the result rules of the synchronous call (both values of two-value ops)", function()
    local b = gr.buffer(65537, "int32"):random(4, -100, 100)
    for _, op in ipairs(gr.ops()) do
      local p = gr.reduce(b, { op = op, async = true })
      local want = table.pack(gr.reduce(b, { op = op }))
      local got = table.pack(p:wait())
      assert.are.equal(want.n, got.n, op .. ": number of values")
      for i = 1, want.n do
        assert.are.equal(want[i], got[i], op .. " value " .. i)
        assert.are.equal(math.type(want[i]), math.type(got[i]), op .. " value " .. i)
      end
    end
  end)

  it("ready() turns true once the work is done", function()
    local b = gr.buffer(1 << 20, "float64"):random(1)
    local p = gr.max(b, { async = true })
    local deadline = gr.clock() + 10
    while not p:ready() and gr.clock() < deadline do end
    assert.is_true(p:ready())
    assert.are.equal(gr.max(b), p:wait())
  end)

  it("run on user streams, several at once", function()
    local streams, bufs, pendings = {}, {}, {}
    for i = 1, 4 do
      streams[i] = gr.stream()
      bufs[i] = gr.buffer(1 << 20, "int64"):random(i, -1000, 1000)
      pendings[i] = gr.sum(bufs[i], { async = true, stream = streams[i] })
    end
    for i = 1, 4 do
      assert.are.equal(gr.sum(bufs[i], { variant = "cpu" }), pendings[i]:wait())
      streams[i]:sync()
    end
    assert.are.equal("gpureduce.Stream", tostring(streams[1]))
  end)

  it("keep their buffer alive, even when it is freed or collected while in flight", function()
    local p, want
    do
      local b = gr.buffer(1 << 22, "float32"):random(3)
      want = gr.sum(b)
      p = gr.sum(b, { async = true })
      b:free()
    end
    collectgarbage()
    collectgarbage()
    assert.are.equal(want, p:wait())
  end)

  it("are safe to drop unfinished, with their stream", function()
    for _ = 1, 20 do
      local s = gr.stream()
      gr.sum(gr.buffer(1 << 18, "float32"):random(1), { async = true, stream = s })
    end
    collectgarbage()
    collectgarbage()
    assert.are.equal(6.0, gr.sum(gr.buffer({ 1, 2, 3 })))
  end)

  it("keep a writer from overtaking them: fill waits for reductions reading the buffer", function()
    local b = gr.buffer(1 << 22, "int32"):fill(1)
    local p = gr.sum(b, { async = true, stream = gr.stream() })
    b:fill(2)
    assert.are.equal(1 << 22, p:wait())
    assert.are.equal(2 << 22, gr.sum(b))
  end)

  it("report misuse at once, like a synchronous call", function()
    local e = gr.buffer(0)
    assert.has_error(function() gr.min(e, { async = true }) end,
      "gpureduce: min of an empty buffer is undefined (it has no identity)")
  end)

  it("close and free explicitly", function()
    local b = gr.buffer(10):fill(1)
    H.closing(gr.sum(b, { async = true }), function(p)
      assert.are.equal(10.0, p:wait())
    end)
    local s = gr.stream()
    s:free()
    s:free()
    assert.has_error(function() gr.sum(b, { stream = s }) end)
  end)
end)

describe("the end of a Lua state", function()
  -- a separate interpreter: work left in flight, the module loaded twice, nothing freed by hand
  local script = [[
    local gr = require "gpureduce"
    local keep = {}
    for i = 1, 8 do
      local b = gr.buffer(1 << 20, "float32"):random(i)
      keep[#keep + 1] = gr.sum(b, { async = true, stream = gr.stream() })
      keep[#keep + 1] = b:slice(1, 10)
    end
    package.loaded["gpureduce"], package.loaded["gpureduce.core"] = nil, nil
    local again = require "gpureduce"
    keep[#keep + 1] = again.max(again.buffer(1000):random(1), { async = true })
    print("left " .. #keep .. " objects alive")
  ]]

  it("closes cleanly with reductions in flight and the module loaded twice", function()
    local lua = arg and arg[-1] or "lua5.4"
    local cmd = string.format("LUA_PATH='lua/?.lua;lua/?/init.lua;%s' LUA_CPATH='%s;build/?.so' %s -e %q 2>&1",
      package.path, package.cpath, lua, script)
    local f = assert(io.popen(cmd))
    local out = f:read("a")
    local ok, _, code = f:close()
    assert(ok and code == 0, "interpreter exited with " .. tostring(code) .. ": " .. out)
    assert.matches("left 17 objects alive", out)
  end)
end)
