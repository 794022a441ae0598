-- The API surface on every Lua the module builds for (docs/api.md, "Lua versions"): buffers of every
-- dtype, every op on small data against a Lua reference, segments, axes, several ops in one pass, dot
-- and the error messages. Written in Lua 5.1's syntax, so that `make test LUA=lua5.1` (and luajit) runs
-- it; the main specs (spec/*_spec.lua) use 5.3's integers, operators and string.pack throughout. It runs
-- under 5.3 and 5.4 as well, where busted finds it with the others.
local gr = require "gpureduce"
local R = require "compat.reference"

local unpack = table.unpack or unpack
local DATA = { 3, -1, 4, -1, 5, -6, 2, 6 }        -- exact in every dtype, FP8 included
local UNSIGNED = { 3, 1, 4, 1, 5, 6, 2, 6 }
local INTEGER_DTYPES = { int8 = true, uint8 = true, int16 = true, uint16 = true, int32 = true, uint32 = true,
  int64 = true, uint64 = true }

local function values_for(dtype)
  if dtype == "bool" then return { true, false, true, true, false, true, false, true } end
  return dtype:match("^uint") and UNSIGNED or DATA
end

local function numbers(list)
  local out = {}
  for i = 1, #list do
    local x = list[i]
    if type(x) == "boolean" then x = x and 1 or 0 end
    out[i] = x
  end
  return out
end

local expect_error = R.expect_error

describe("compat: buffers", function()
  it("round-trip every dtype through tables, indexing and byte strings", function()
    for _, dtype in ipairs(gr.dtypes()) do
      local vals = values_for(dtype)
      local b = gr.buffer(vals, dtype)
      assert.equal(#vals, #b)
      assert.equal(dtype, b:dtype())
      assert.same(vals, b:totable())
      assert.equal(vals[5], b[5])
      local c = gr.buffer(b:tobytes(), dtype)
      assert.same(vals, c:totable())
      b[2] = vals[1]
      assert.equal(vals[1], b:get(2))
      b:free()
      assert.equal("gpureduce.Buffer(freed)", tostring(b))
    end
  end)

  it("fill, iota and sizes take integers that are exact in a double", function()
    local b = gr.buffer(5, "int64"):iota(10)
    assert.same({ 10, 11, 12, 13, 14 }, b:totable())
    assert.same({ 7, 7, 7 }, gr.buffer(3, "int32"):fill(7):totable())
    assert.same({ 0.5, 0.5 }, gr.buffer(2.0, "float64"):fill(0.5):totable())
    assert.equal(2 ^ 53, gr.buffer(1, "int64"):fill(2 ^ 53)[1])
    assert.equal(-(2 ^ 53), gr.buffer(1, "int64"):fill(-(2 ^ 53))[1])
  end)

  it("slices and views", function()
    local b = gr.buffer(12, "float32"):iota(1)
    assert.same({ 3, 4, 5 }, b:slice(3, 3):totable())
    local m = b:view({ 3, 4 })
    assert.same({ 3, 4 }, m:shape())
    assert.equal(12, #m)
  end)
end)

describe("compat: every op against the Lua reference", function()
  for _, dtype in ipairs(gr.dtypes()) do
    if dtype ~= "bool" then
      it(dtype, function()
        local b = gr.buffer(values_for(dtype), dtype)
        local list = numbers(b:totable())
        local tol = not INTEGER_DTYPES[dtype] and 1e-6 or nil
        for _, op in ipairs(gr.ops()) do
          local want = { R.ops[op](list) }
          local got = { gr[op](b) }
          assert.equal(#want, #got, op)
          for k = 1, #want do
            local t = (op == "mean" or op == "var" or op == "std" or op == "norm" or op == "nanmean") and 1e-6 or tol
            assert.is_true(R.close(got[k], want[k], t),
              string.format("%s %s: got %s, want %s", dtype, op, tostring(got[k]), tostring(want[k])))
          end
          assert.same(got, { gr.reduce(b, { op = op }) })
        end
        assert.is_true(R.close(gr.std(b, { ddof = 1 }), R.ops.std(list, { ddof = 1 }), 1e-6))
      end)
    end
  end

  it("bool: counts, sums and truth", function()
    local b = gr.buffer(values_for("bool"), "bool")
    assert.equal(5, gr.sum(b))
    assert.equal(5, gr.count(b))
    assert.equal(false, gr.all(b))
    assert.equal(true, gr.any(b))
  end)

  it("NaN and the nan ops", function()
    local b = gr.buffer({ 1, 0 / 0, 3 }, "float64")
    assert.is_true(gr.sum(b) ~= gr.sum(b))
    assert.equal(4, gr.nansum(b))
    assert.equal(1, gr.nanmin(b))
    assert.equal(3, gr.nanmax(b))
    assert.equal(2, gr.nanmean(b))
  end)

  it("an empty buffer: identities, and an error where there is none", function()
    local e = gr.buffer(0, "int32")
    assert.equal(0, gr.sum(e))
    assert.equal(1, gr.prod(e))
    expect_error("min of an empty buffer is undefined", gr.min, e)
  end)

  it("1000 elements, integers exact", function()
    local list = {}
    for i = 1, 1000 do list[i] = (i * 7919) % 201 - 100 end
    local b = gr.buffer(list, "int32")
    assert.equal(R.ops.sum(list), gr.sum(b))
    assert.equal(R.ops.sumsq(list), gr.sumsq(b))
    assert.same({ R.ops.argmax(list) }, { gr.argmax(b) })
    assert.same({ R.ops.minmax(list) }, { gr.minmax(b) })
  end)
end)

describe("compat: segments, axes, ops and dot", function()
  it("segments of a fixed size and by offsets", function()
    local b = gr.buffer({ 1, 2, 3, 4, 5, 6 }, "int32")
    assert.same({ 3, 7, 11 }, gr.reduce(b, { op = "sum", segment = 2 }):totable())
    local offsets = gr.buffer({ 0, 1, 1, 6 }, "int64")
    local v, i = gr.argmax(b, { offsets = offsets })
    assert.same({ 1, 6 }, { v[1], v[3] })
    assert.same({ 1, 0, 5 }, i:totable())
    local m = gr.mean(b, { offsets = offsets })
    assert.equal(1, m[1])
    assert.is_true(m[2] ~= m[2])
    assert.equal(4, m[3])
  end)

  it("axes", function()
    local m = gr.buffer(12, "float32"):iota(1):view({ 3, 4 })
    assert.same({ 15, 18, 21, 24 }, gr.sum(m, { axis = 1 }):totable())
    assert.same({ 10, 26, 42 }, gr.sum(m, { axis = -1 }):totable())
    assert.same({ 3, 1 }, gr.sum(m, { axis = 2, keepdims = true }):shape())
    assert.same({ 78 }, gr.sum(m, { axis = { 1, 2 } }):totable())
    local v, i = gr.argmax(m, { axis = 2 })
    assert.same({ 4, 8, 12 }, v:totable())
    assert.same({ 4, 4, 4 }, i:totable())
  end)

  it("several ops in one pass are the single ops' values", function()
    local b = gr.buffer(DATA, "float64")
    local r = gr.reduce(b, { ops = { "sum", "min", "max", "count", "mean", "argmax", "minmax" } })
    assert.equal(gr.sum(b), r.sum)
    assert.equal(gr.min(b), r.min)
    assert.equal(gr.max(b), r.max)
    assert.equal(gr.count(b), r.count)
    assert.equal(gr.mean(b), r.mean)
    assert.same({ gr.argmax(b) }, r.argmax)
    assert.same({ gr.minmax(b) }, r.minmax)
    local d = gr.describe(b)
    assert.equal(#DATA, d.count)
  end)

  it("dot", function()
    assert.equal(32, gr.dot(gr.buffer({ 1, 2, 3 }, "float32"), gr.buffer({ 4, 5, 6 }, "float32")))
    assert.equal(32, gr.dot(gr.buffer({ 1, 2, 3 }, "int64"), gr.buffer({ 4, 5, 6 }, "int64")))
  end)

  it("async: a Pending that waits for the result", function()
    local b = gr.buffer(10, "float64"):fill(1)
    local p = gr.sum(b, { async = true })
    assert.equal(10, p:wait())
    p:free()
  end)

  it("reduce_many and reduce_by_key", function()
    local r = gr.reduce_many({ gr.buffer({ 1, 2 }, "int32"), gr.buffer({ 3, 4, 5 }, "int32") }, { op = "sum" })
    assert.same({ 3, 12 }, r)
    local keys = gr.buffer({ 1, 1, 2, 2, 2 }, "int32")
    local vals = gr.buffer({ 1, 2, 3, 4, 5 }, "int32")
    local k, s = gr.reduce_by_key(keys, vals, { op = "sum" })
    assert.same({ 1, 2 }, k:totable())
    assert.same({ 3, 12 }, s:totable())
  end)
end)

describe("compat: errors name the argument and what is accepted", function()
  it("a size that is not an integer", function()
    expect_error("size: expected an integer, got 2.5", gr.buffer, 2.5)
  end)
  it("an unknown dtype", function()
    expect_error("unknown dtype 'float13' (accepted: ", gr.buffer, 4, "float13")
  end)
  it("an unknown option", function()
    expect_error("unknown option 'blok'", gr.sum, gr.buffer(4), { blok = 1 })
  end)
  it("an index out of range", function()
    expect_error("out of range", function() return gr.buffer(4):get(5) end)
  end)
  it("a freed buffer", function()
    local b = gr.buffer(4)
    b:free()
    expect_error("freed", gr.sum, b)
  end)
  it("a value that is not a number", function()
    expect_error("expected a number, got string", function() return gr.buffer(2, "int32"):fill("x") end)
  end)
end)
