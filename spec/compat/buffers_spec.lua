-- Every method of a buffer on every Lua the module builds for (docs/api.md, "Buffers", "Conversions",
-- "Interoperation"), each result checked against what compat/reference.lua or plain Lua computes:
-- contents, views and their layouts, conversions between every pair of dtypes, copies, wrapped and
-- DLPack memory, and the messages of misuse. Lua 5.1 syntax, as api_spec.lua.
local gr = require "gpureduce"
local R = require "compat.reference"

local expect_error = R.expect_error

local function is_float(dtype) return R.float[dtype] ~= nil end

describe("compat: buffer contents", function()
  it("size, dtype, where, device, # and tostring", function()
    local b = gr.buffer(7, "int16")
    assert.equal(7, b:size())
    assert.equal(7, #b)
    assert.equal("int16", b:dtype())
    assert.equal("device", b:where())
    assert.equal(1, b:device())
    assert.equal("gpureduce.Buffer(int16, 7, device)", tostring(b))
    local h = gr.buffer(3, "float64", { where = "host" })
    assert.equal("host", h:where())
    assert.equal("gpureduce.Buffer(float64, 3, host)", tostring(h))
    assert.same({ 0, 0, 0 }, h:totable())
  end)

  it("get, b[i] and b[i] = v; outside the buffer get raises and b[i] is nil", function()
    local b = gr.buffer({ 10, 20, 30 }, "int32")
    assert.equal(20, b:get(2))
    assert.equal(30, b[3])
    assert.is_nil(b[0])
    assert.is_nil(b[4])
    b[1] = -5
    assert.same({ -5, 20, 30 }, b:totable())
    local n = 0                                 -- (ipairs(b) stops there on 5.3 and later; 5.1's takes tables only)
    while b[n + 1] ~= nil do n = n + 1 end
    assert.equal(3, n)
    expect_error("out of range", function() return b:get(4) end)
    expect_error("out of range", function() b[4] = 1 end)
    expect_error("cannot set field 'size'", function() b.size = 1 end)
  end)

  it("set takes a table or bytes at an offset and returns the buffer", function()
    local b = gr.buffer(5, "uint8")
    assert.equal(b, b:set({ 1, 2 }))
    assert.equal(b, b:set("\7\8\9", 3))
    assert.same({ 1, 2, 7, 8, 9 }, b:totable())
    b:set({ 200 }, 5)
    assert.equal(200, b[5])
    expect_error("300 does not fit in uint8", b.set, b, { 300 })
    assert.same({ 1, 2, 7, 8, 200 }, b:totable())
  end)

  it("totable and tobytes of a range; bytes are the elements in memory order", function()
    local b = gr.buffer({ 1, 2, 255, 4 }, "uint8")
    assert.equal("\1\2\255\4", b:tobytes())
    assert.equal("\2\255", b:tobytes(2, 2))
    assert.same({ 255, 4 }, b:totable(3))
    assert.same({ 2 }, b:totable(2, 1))
    assert.equal("\1\0\0\0\0\1\0\0", gr.buffer({ 1, 256 }, "int32"):tobytes())
    assert.equal("\0\0\192\63", gr.buffer({ 1.5 }, "float32"):tobytes())       -- 0x3fc00000
    assert.same({ 1, 256 }, gr.buffer("\1\0\0\0\0\1\0\0", "int32"):totable())
    expect_error("is not a whole number of int32 elements", gr.buffer, "\1\2\3", "int32")
  end)

  it("fill and iota, on every dtype, return the buffer", function()
    for _, dtype in ipairs(gr.dtypes()) do
      local b = gr.buffer(4, dtype)
      if dtype == "bool" then
        assert.same({ true, true, true, true }, b:fill(true):totable())
        expect_error("bool buffers have no sequence", b.iota, b, 1)
      else
        assert.equal(b, b:fill(3))
        assert.same({ 3, 3, 3, 3 }, b:totable())
        local want = { 2, 5, 8, 11 }            -- 11 is a tie in float8_e5m2, which keeps 12
        if is_float(dtype) then
          for i = 1, 4 do want[i] = R.round_float(dtype, want[i]) end
        end
        assert.same(want, b:iota(2, 3):totable())
        assert.same({ 0, 1, 2, 3 }, b:iota():totable())
      end
    end
    assert.same({ 254, 255, 0, 1 }, gr.buffer(4, "uint8"):iota(254):totable())      -- integers wrap
    assert.same({ 0.5, 0.75, 1 }, gr.buffer(3, "float64"):iota(0.5, 0.25):totable())
  end)

  it("random: seeded, within its bounds, the same for the same seed", function()
    local f = gr.buffer(1000, "float64"):random(7, -2, 3)
    local list = f:totable()
    for i = 1, #list do assert.is_true(list[i] >= -2 and list[i] < 3) end
    assert.same(list, gr.buffer(1000, "float64"):random(7, -2, 3):totable())
    assert.are_not.same(list, gr.buffer(1000, "float64"):random(8, -2, 3):totable())
    assert.is_true(math.abs(R.ops.mean(list) - 0.5) < 0.3)
    assert.is_true(R.close(gr.sum(f), R.ops.sum(list), 1e-12))
    local seen = {}
    for _, v in ipairs(gr.buffer(2000, "int8"):random(1, -3, 3):totable()) do
      assert.is_true(v >= -3 and v <= 3)
      seen[v] = true
    end
    for v = -3, 3 do assert.is_true(seen[v], "every value of [lo, hi] is drawn") end
    local bools = gr.buffer(64, "bool"):random(5):totable()
    local t = 0
    for _, v in ipairs(bools) do if v then t = t + 1 end end
    assert.is_true(t > 0 and t < 64)
  end)

  it("free releases the handle: later calls say so, slices keep the memory", function()
    local b = gr.buffer({ 1, 2, 3, 4 }, "int32")
    local tail = b:slice(3)
    b:free()
    b:free()                                   -- idempotent
    assert.equal("gpureduce.Buffer(freed)", tostring(b))
    expect_error("freed", b.totable, b)
    assert.same({ 3, 4 }, tail:totable())
    assert.equal(7, gr.sum(tail))
  end)
end)

describe("compat: views", function()
  local function matrix() return gr.buffer(12, "float32"):iota(1):view({ 3, 4 }) end

  it("view, shape, ndim, strides and nested totable", function()
    local m = matrix()
    assert.same({ 3, 4 }, m:shape())
    assert.equal(2, m:ndim())
    assert.same({ 4, 1 }, m:strides())
    assert.equal(12, #m)
    assert.same({ { 1, 2, 3, 4 }, { 5, 6, 7, 8 }, { 9, 10, 11, 12 } }, m:totable())
    assert.same({ 5, 6 }, m:totable(5, 2))
    assert.equal(7, m[7])
    expect_error("product", m.view, m, { 5, 2 })
  end)

  it("transpose, permute and narrow: strided views of the same memory", function()
    local m = matrix()
    local t = m:transpose()
    assert.same({ 4, 3 }, t:shape())
    assert.same({ 1, 4 }, t:strides())
    assert.same({ { 1, 5, 9 }, { 2, 6, 10 }, { 3, 7, 11 }, { 4, 8, 12 } }, t:totable())
    assert.same(t:totable(), m:permute({ 2, 1 }):totable())
    local n = m:narrow(2, 2, 2)
    assert.same({ 3, 2 }, n:shape())
    assert.same({ 4, 1 }, n:strides())
    assert.same({ { 2, 3 }, { 6, 7 }, { 10, 11 } }, n:totable())
    n[1] = 100                                  -- writes the parent's memory
    assert.equal(100, m[2])
    expect_error("permutation", m.permute, m, { 1, 1 })
    expect_error("axis", m.narrow, m, 3, 1)
  end)

  it("contiguous: a compact copy of a strided view, the buffer itself when compact", function()
    local m = matrix()
    assert.equal(m, m:contiguous())
    local c = m:transpose():contiguous()
    assert.same({ 4, 3 }, c:shape())
    assert.same({ 3, 1 }, c:strides())
    assert.same({ 1, 5, 9, 2 }, c:totable(1, 4))
    expect_error("strided", function() return m:transpose():view({ 12 }) end)
  end)

  it("a strided view reduces to its compact copy's values", function()
    local t = matrix():transpose()
    local c = t:contiguous()
    for _, op in ipairs({ "sum", "max", "mean", "argmax", "minmax" }) do
      assert.same({ gr[op](c) }, { gr[op](t) }, op)
    end
  end)
end)

describe("compat: conversions between every pair of dtypes", function()
  local VALUES = { 0, 1, -1, 2.5, -2.75, -0.5, 100, 127, 128, 255, 256, -129, 300.25, 65504, 65519, 65520, 1 / 3,
    1e-3, 2 ^ -20, 1e6 + 0.5, 2 ^ 40 + 1, -2 ^ 31, 2 ^ 31, 449, 464, 465, 57344, 61439, 61440, 3.4e38,
    math.huge, -math.huge, 0 / 0 }

  --- The values that a buffer of dtype holds exactly, as it reads them back.
  local function held(dtype)
    if dtype == "bool" then return { true, false } end
    local out = {}
    for _, v in ipairs(VALUES) do
      if not (dtype == "uint64" and v < 0) and pcall(gr.buffer, { v }, dtype) then
        out[#out + 1] = gr.buffer({ v }, dtype)[1]
      end
    end
    return out
  end

  for _, from in ipairs(gr.dtypes()) do
    it("astype from " .. from .. " to every dtype, and gr.copy the same", function()
      local vals = held(from)
      for _, to in ipairs(gr.dtypes()) do
        for _, v in ipairs(vals) do
          local want = R.convert(from, to, v)
          local src = gr.buffer({ v }, from)
          local label = string.format("%s %s -> %s", from, tostring(v), to)
          if want == nil then
            expect_error("does not fit in " .. to, src.astype, src, to)
            local dst = gr.buffer({ to == "bool" or 1 }, to)
            expect_error("does not fit in " .. to, gr.copy, dst, src)
            assert.equal(to == "bool" or 1, dst[1], label .. ": a refused copy writes nothing")
          else
            local got = src:astype(to)
            assert.equal(to, got:dtype())
            assert.is_true(R.close(got[1], want), label .. ": got " .. tostring(got[1]))
            local dst = gr.buffer(1, to)
            assert.equal(dst, gr.copy(dst, src))
            assert.is_true(R.close(dst[1], want), label .. " (copy)")
          end
        end
      end
    end)
  end

  it("astype of a view is a compact buffer of its shape; the same dtype is a copy", function()
    local m = gr.buffer(6, "int32"):iota(1):view({ 2, 3 })
    local t = m:transpose():astype("float64")
    assert.same({ 3, 2 }, t:shape())
    assert.same({ { 1, 4 }, { 2, 5 }, { 3, 6 } }, t:totable())
    local c = m:astype("int32")
    c[1] = 9
    assert.equal(1, m[1])
  end)

  it("gr.copy between sides and into views, converting", function()
    local h = gr.buffer({ 1.5, 2.5, -3.5 }, "float64", { where = "host" })
    local d = gr.buffer(3, "float32")
    gr.copy(d, h)
    assert.same({ 1.5, 2.5, -3.5 }, d:totable())
    local m = gr.buffer(6, "int16"):view({ 2, 3 })
    gr.copy(m:transpose(), gr.buffer({ 1, 2, 3, 4, 5, 6 }, "int64"))
    assert.same({ { 1, 3, 5 }, { 2, 4, 6 } }, m:totable())
    expect_error("size", gr.copy, gr.buffer(2), gr.buffer(3))
  end)
end)

describe("compat: memory handed over", function()
  it("ptr and gr.wrap: a buffer over memory another owns, without a copy", function()
    local owner = gr.buffer({ 1, 2, 3, 4 }, "int32")
    assert.equal("userdata", type(owner:ptr()))
    local w = gr.wrap(owner:ptr(), 4, "int32")
    assert.same({ 1, 2, 3, 4 }, w:totable())
    assert.equal(10, gr.sum(w))
    w[2] = 20
    assert.equal(20, owner[2])
    local tail = gr.wrap(owner:slice(3):ptr(), 2, "int32")
    assert.same({ 3, 4 }, tail:totable())
    w:free()
    tail:free()
    assert.same({ 1, 20, 3, 4 }, owner:totable())
    expect_error("dtype", gr.wrap, owner:ptr(), 4)
  end)

  it("to_dlpack and from_dlpack: the same memory, shape and strides, both ways", function()
    local m = gr.buffer(6, "float64"):iota(1):view({ 2, 3 })
    local t = m:transpose()
    local back = gr.from_dlpack(t:to_dlpack())
    assert.same({ 3, 2 }, back:shape())
    assert.same({ 1, 3 }, back:strides())
    assert.same(t:totable(), back:totable())
    back[1] = 50
    assert.equal(50, m[1])
    assert.equal(gr.sum(t), gr.sum(back))
    back:free()
    expect_error("opts.legacy: expected a boolean", gr.from_dlpack, gr.buffer(1):ptr(), { legacy = "yes" })
  end)
end)

describe("compat: what a buffer refuses", function()
  it("names the argument and what it accepts", function()
    expect_error("unknown option 'were'", gr.buffer, 4, "int32", { were = "host" })
    expect_error("element 2: 1.5", gr.buffer, { 1, 1.5 }, "int32")
    expect_error("2 does not fit in bool", gr.buffer, { 2 }, "bool")
    expect_error("expected a number, got boolean", gr.buffer, { true }, "int32")
    expect_error("65520 does not fit in float16", gr.buffer, { 65520 }, "float16")
    expect_error("hi: must be greater than lo", function() return gr.buffer(4, "float32"):random(1, 2, 1) end)
    expect_error("freed", function()
      local b = gr.buffer(2)
      b:free()
      return b:slice(1)
    end)
  end)
end)
