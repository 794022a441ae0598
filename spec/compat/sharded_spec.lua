-- Sharded buffers on every Lua the module builds for (docs/api.md, "Several GPUs"), with the shards on
-- devices {1, 1}: one device, the code paths of two (on the cpu backend, and on one GPU). Every method
-- of a sharded buffer (1-D and split by rows) and every reduction of one, checked against compat/reference.lua over the same
-- elements as a plain list. Lua 5.1 syntax, as api_spec.lua: `#s` needs 5.2's __len for tables, so
-- the length is read as s.n or s:size().
local gr = require "gpureduce"
local R = require "compat.reference"

local expect_error = R.expect_error

local ROUNDED = { mean = 1e-12, var = 1e-12, std = 1e-12, norm = 1e-12, nanmean = 1e-12 }
local LIST = { 5, -3, 8, 0.5, -7, 2, 9, -1, 4 }          -- 9 elements: shards of 5 and 4

local function sharded(list, dtype)
  local s = gr.sharded(#list, dtype or "float64", { devices = { 1, 1 } })
  s:set(list)
  return s
end

describe("compat: sharded buffers on devices {1, 1}", function()
  it("its shards, size, dtype, side, devices and name", function()
    local s = sharded(LIST)
    assert.equal(9, s.n)
    assert.equal(9, s:size())
    assert.equal("float64", s:dtype())
    assert.equal("device", s:where())
    assert.same({ 1, 1 }, s:devices())
    assert.equal("gpureduce.Sharded(float64, 9, devices {1, 1})", tostring(s))
    local parts = s:shards()
    assert.equal(2, #parts)
    assert.same({ 1, 1, 5 }, { parts[1].device, parts[1].offset, parts[1].size })
    assert.same({ 1, 6, 4 }, { parts[2].device, parts[2].offset, parts[2].size })
    assert.same({ 5, -3, 8, 0.5, -7 }, parts[1].buffer:totable())
    assert.same({ 2, 9, -1, 4 }, parts[2].buffer:totable())
  end)

  it("get, s[i], s[i] = v, set at an offset across the shards, totable and tobytes", function()
    local s = sharded(LIST)
    assert.same(LIST, s:totable())
    assert.equal(-7, s:get(5))
    assert.equal(2, s[6])
    assert.is_nil(s[10])
    s[6] = 20
    assert.equal(20, s:shards()[2].buffer[1])
    s:set({ 11, 12 }, 5)                                 -- elements 5 and 6: one in each shard
    assert.same({ 11, 12 }, s:totable(5, 2))
    local u = gr.sharded(5, "uint8", { devices = { 1, 1 } })
    u:set("\1\2\3\4\5")
    assert.equal("\3\4\5", u:tobytes(3))
    expect_error("index 10 out of range", s.get, s, 10)
    expect_error("cannot set field 'x'", function() s.x = 1 end)
  end)

  it("fill, iota and random give what one buffer of n elements holds", function()
    local s = gr.sharded(9, "float32", { devices = { 1, 1 } })
    assert.same(gr.buffer(9, "float32"):iota(3, 2):totable(), s:iota(3, 2):totable())
    assert.same(gr.buffer(9, "float32"):random(4, -1, 1):totable(), s:random(4, -1, 1):totable())
    assert.same({ 7, 7, 7, 7, 7, 7, 7, 7, 7 }, s:fill(7):totable())
  end)

  it("slice: a plain buffer inside a shard, a sharded view across them", function()
    local s = sharded(LIST)
    local inside = s:slice(2, 3)
    assert.equal("gpureduce.Buffer(float64, 3, device)", tostring(inside))
    assert.same({ -3, 8, 0.5 }, inside:totable())
    local across = s:slice(4, 4)
    assert.equal(4, across.n)
    assert.same({ 0.5, -7, 2, 9 }, across:totable())
    assert.equal(R.ops.sum({ 0.5, -7, 2, 9 }), gr.sum(across))
  end)

  it("split by rows: shape, ndim, strides, view, nested totable and reductions along each axis", function()
    local rows, cols = 5, 3                              -- shards of 3 and 2 rows
    local flat = { 5, -3, 8, 0.5, -7, 2, 9, -1, 4, 6, 1, -2, 3, 7, -5 }
    local s = gr.sharded({ rows, cols }, "float64", { devices = { 1, 1 } })
    s:set(flat)
    assert.same({ rows, cols }, s:shape())
    assert.equal(2, s:ndim())
    assert.same({ cols, 1 }, s:strides())
    assert.same({ 5, -3, 8 }, s:totable()[1])
    assert.same({ 3, 7, -5 }, s:totable()[rows])
    local parts = s:shards()
    assert.same({ 1, 3, 4, 2 }, { parts[1].row, parts[1].rows, parts[2].row, parts[2].rows })
    for _, op in ipairs({ "sum", "max", "min", "mean" }) do
      for _, axis in ipairs({ 1, 2 }) do
        local want = {}
        for k, line in ipairs(R.lines(flat, rows, cols, axis)) do want[k] = R.ops[op](line) end
        local got = gr.reduce(s, { op = op, axis = axis }):totable()
        assert.equal(#want, #got, op .. " axis " .. axis)
        for k = 1, #want do
          assert.is_true(R.close(got[k], want[k], ROUNDED[op]), op .. " axis " .. axis .. ": " .. tostring(got[k]))
        end
      end
    end
    local flat1 = gr.sharded(6, "int32", { devices = { 1, 1 } }):iota(1)   -- shards of 3 and 3: whole rows of 3
    local v = flat1:view({ 2, 3 })
    assert.same({ { 1, 2, 3 }, { 4, 5, 6 } }, v:totable())
    expect_error("whole rows", flat1.view, flat1, { 3, 2 })
  end)

  it("every op against the reference, and gr.reduce the same", function()
    for _, dtype in ipairs({ "float64", "int32" }) do
      local list = dtype == "int32" and { 5, -3, 8, 1, -7, 2, 9, -1, 4 } or LIST
      local s = sharded(list, dtype)
      for _, op in ipairs(gr.ops()) do
        local want = { R.ops[op](list) }
        local got = { gr[op](s) }
        assert.equal(#want, #got, op)
        for k = 1, #want do
          assert.is_true(R.close(got[k], want[k], ROUNDED[op]), dtype .. " " .. op .. ": got " .. tostring(got[k]))
        end
        assert.same(got, { gr.reduce(s, { op = op }) })
      end
    end
  end)

  it("segments across the shards, several ops, describe and gpu_to_gpu", function()
    local s = sharded(LIST)
    local bounds = { 0, 3, 7, 9 }                        -- the second segment spans both shards
    local segs = R.segments(LIST, bounds)
    local sums = gr.sum(s, { offsets = gr.buffer(bounds, "int64") }):totable()
    local v, i = gr.argmax(s, { offsets = gr.buffer(bounds, "int64") })
    for k, seg in ipairs(segs) do
      assert.equal(R.ops.sum(seg), sums[k])
      assert.same({ R.ops.argmax(seg) }, { v[k], i[k] })
    end
    assert.same({ 10, -4.5, 12 }, gr.sum(s, { segment = 3 }):totable())
    local r = gr.reduce(s, { ops = { "sum", "max", "argmin" } })
    assert.equal(gr.sum(s), r.sum)
    assert.equal(9, r.max)
    assert.same({ -7, 5 }, r.argmin)
    local d = gr.describe(s)
    assert.equal(9, d.count)
    assert.is_true(R.close(d.std, R.ops.std(LIST), 1e-12))
    local big = sharded({ 1e30, 1, -1e30 })
    assert.equal(1, gr.sum(big, { determinism = "gpu_to_gpu" }))
  end)

  it("dot of two sharded buffers of one split, and reduce_by_key of sharded keys and values", function()
    local other = { 1, 2, 1, 2, 1, 2, 1, 2, 1 }
    assert.equal(R.dot(LIST, other), gr.dot(sharded(LIST), sharded(other)))
    local keys = { 2, 1, 2, 1, 3, 3, 1, 2, 3 }
    local ks, sums = gr.reduce_by_key(sharded(keys, "int32"), sharded(LIST), { op = "sum" })
    local order, groups = R.by_key(keys, LIST)
    assert.same(order, ks:totable())
    for k, g in ipairs(groups) do assert.equal(R.ops.sum(g.values), sums[k]) end
    expect_error("sharded keys take sharded values", gr.reduce_by_key, sharded(keys, "int32"), gr.buffer(LIST, "float64"),
      { op = "sum" })
    local three = gr.sharded(9, "float64", { devices = { 1, 1, 1 } })
    expect_error("b has 3 shards, a 2", gr.dot, sharded(LIST), three)
  end)

  it("an operator's cpu functions over the shards in order", function()
    local l1 = gr.operator { name = "compat_l1", map = "fabs(x)", reduce = "a + b", identity = "0", acc = "float64",
      cpu = { map = function(x) return math.abs(x) end, reduce = function(a, b) return a + b end } }
    local want = R.ops.asum(LIST)
    if gr.backend() == "cpu" then assert.equal(want, gr.reduce(sharded(LIST), { op = l1 })) end
    assert.equal(want, gr.reduce(gr.buffer(LIST, "float64", { where = "host" }), { op = l1 }))
  end)

  it("free, and what a sharded buffer refuses", function()
    local s = sharded(LIST)
    local first = s:shards()[1].buffer
    s:free()
    assert.equal("gpureduce.Sharded(freed)", tostring(s))
    assert.equal("gpureduce.Buffer(freed)", tostring(first))
    expect_error("freed", s.totable, s)
    expect_error("opts.async: a sharded buffer is reduced synchronously", gr.sum, sharded(LIST), { async = true })
    expect_error("opts.devices[2]: 9 is not a device", gr.sharded, 4, "float32", { devices = { 1, 9 } })
    expect_error("a list with holes (no element 2 of 3)", gr.sharded, 4, "float32", { devices = { [1] = 1, [3] = 1 } })
    expect_error("unknown option (accepted: devices)", gr.sharded, 4, "float32", { device = 1 })
    expect_error("size: expected an integer >= 0", gr.sharded, -1)
  end)
end)
