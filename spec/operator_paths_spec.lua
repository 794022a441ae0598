-- User operators beyond whole-buffer reductions: segments (opts.segment, opts.offsets), reduce_many and
-- streamed host data. On the GPU the operator's generated gr_op_segments runs cuda/device/segmented.cuh's body
-- (every way of sharing a segment out: lanes, a warp, a block, several blocks) and streamed chunks are
-- combined by its own kernel; each result is checked against the built-in op on the same data (integers
-- bit for bit, floats within rounding) or against a closed form. The cpu functions give the same
-- results on the cpu backend and for host buffers.
local gr = require "gpureduce"
local H = require("support.helpers").bind(it, function(reason) pending(reason) end)

local expect = H.expect_error

local function sum_like(acc)
  return gr.operator { name = "usum", map = "x", reduce = "a + b", identity = "0", acc = acc,
                       cpu = { map = function(x) return x end, reduce = function(a, b) return a + b end } }
end

--- The accumulator of a sum-like operator for dtype: float64 for every float dtype (the 16- and 8-bit ones
-- too: an integer accumulator would truncate their elements), as the built-in sum it is checked against
-- is asked for (opts.acc = "float64"), so both sums agree within check_values' 1e-9; 64-bit integers else.
local function sum_acc(dtype)
  if H.is_float(dtype) then return "float64" end
  return H.is_unsigned(dtype) and "uint64" or "int64"
end

local function fill(b, dtype, seed)
  if H.is_float(dtype) then b:random(seed, -10, 10) else b:random(seed) end
  return b
end

--- got and want (tables or buffers' totable) equal: integers exactly, floats within rtol of the magnitude.
local function check_values(got, want, float, label)
  assert.are.equal(#want, #got, label .. ": result count")
  for s = 1, #want do
    local g, w = got[s], want[s]
    local ok = float and math.abs(g - w) <= 1e-9 * math.max(1, math.abs(w)) or (not float and g == w)
    if not ok then error(string.format("%s: segment %d: %s, want %s", label, s, tostring(g), tostring(w)), 2) end
  end
end

-- segment shapes that reach every way the policy shares segments out, and empty segments
local SHAPES = {
  { n = 37, segment = 1 }, { n = 3 * 41, segment = 3 }, { n = 64 * 100, segment = 64 },
  { n = 4096 * 20, segment = 4096 }, { n = 1 << 22, segment = 1 << 21 }, { n = 1000003, segment = 1000003 },
  { n = 1000, offsets = { 0, 0, 1, 1, 500, 999, 1000, 1000 } },
}

local function offsets_buffer(list, where)
  return gr.buffer(list, "int64", { where = where })
end

local function segmented(b, op, shape, where)
  if shape.segment then return gr.reduce(b, { op = op, segment = shape.segment }) end
  return gr.reduce(b, { op = op, offsets = offsets_buffer(shape.offsets, where) })
end

local function label(dtype, shape)
  return string.format("%s n=%d %s", dtype, shape.n, shape.segment and ("segment=" .. shape.segment) or "offsets")
end

describe("a user operator's segments on the GPU", function()
  H.gpu_it("equal to sum gives the built-in segmented sum, every dtype and way of sharing", function()
    for _, dtype in ipairs(gr.dtypes()) do
      local op = sum_like(sum_acc(dtype))
      for _, shape in ipairs(SHAPES) do
        local b = fill(gr.buffer(shape.n, dtype), dtype, shape.n)
        local got = segmented(b, op, shape, "device")
        local opts = { op = "sum", acc = H.is_float(dtype) and "float64" or nil, segment = shape.segment }
        if shape.offsets then opts.offsets = offsets_buffer(shape.offsets, "device") end
        local want = gr.reduce(b, opts)
        assert.are.equal(sum_acc(dtype), got:dtype(), "results in the accumulator's dtype")
        check_values(got:totable(), want:totable(), H.is_float(dtype), label(dtype, shape))
      end
    end
  end)

  H.gpu_it("an indexed map sees the index within its segment, in split segments too", function()
    local op = gr.operator { name = "isum", map = "(double)i", reduce = "a + b", identity = "0", acc = "float64" }
    for _, shape in ipairs(SHAPES) do
      if shape.segment then
        local b = gr.buffer(shape.n, "int8")
        local m = shape.segment
        local got = gr.reduce(b, { op = op, segment = m }):totable()
        for s = 1, #got do assert.are.equal(m * (m - 1) / 2, got[s], label("int8", shape) .. " segment " .. s) end
      end
    end
  end)

  H.gpu_it("post's value as float64, and a struct accumulator with post", function()
    local l2 = gr.operator { name = "l2", map = "x * x", reduce = "a + b", post = "sqrt(a)", identity = "0", acc = "float64" }
    local mean = gr.operator {
      name = "smean", preamble = "struct MeanAcc { double s; unsigned long long n; };",
      map = "MeanAcc{double(x), 1ull}", reduce = "MeanAcc{a.s + b.s, a.n + b.n}", identity = "MeanAcc{0.0, 0ull}",
      post = "a.n ? a.s / double(a.n) : -1.0", acc = "MeanAcc" }
    local b = gr.buffer(1 << 20, "int32"):random(5, -1000, 1000)
    local got = gr.reduce(b, { op = l2, segment = 1024 })
    assert.are.equal("float64", got:dtype())
    check_values(got:totable(), gr.norm(b, { segment = 1024 }):totable(), true, "l2")
    check_values(gr.reduce(b, { op = mean, segment = 4096 }):totable(), gr.mean(b, { segment = 4096 }):totable(), true,
      "mean")
    local e = gr.reduce(b, { op = mean, offsets = offsets_buffer({ 0, 0, 10 }, "device") }):totable()
    assert.are.equal(-1.0, e[1], "post of the identity for an empty segment")
  end)

  H.gpu_it("opts.out takes the results, checked like the built-in ops'; a struct accumulator's post", function()
    local op = sum_like("int64")
    local b = gr.buffer(1000, "int32"):iota(1, 1)
    local out = gr.buffer(10, "int64")
    assert.are.equal(out, gr.reduce(b, { op = op, segment = 100, out = out }))
    assert.are.equal(5050, out[1])
    local pair = gr.operator { name = "pair", preamble = "struct P { int a, b; };", map = "P{int(x), 0}",
                               reduce = "P{a.a + b.a, 0}", identity = "P{0, 0}", acc = "P", post = "a.a" }
    assert.are.equal(5050.0, gr.reduce(b, { op = pair, segment = 100 })[1])
    expect("opts.out: must be 10 elements of int64", function()
      gr.reduce(b, { op = op, segment = 100, out = gr.buffer(10, "float64") })
    end)
  end)
end)

describe("a user operator with reduce_many and streamed data on the GPU", function()
  H.gpu_it("reduce_many: every dtype, empty, small and large buffers, in the order given", function()
    local list, want = {}, {}
    for _, dtype in ipairs({ "int32", "uint8", "int64" }) do
      for _, n in ipairs({ 0, 1, 1000, 1 << 21 }) do
        local b = fill(gr.buffer(n, dtype), dtype, n + 3)
        list[#list + 1] = b
        want[#want + 1] = gr.sum(b)
      end
    end
    local got = gr.reduce_many(list, { op = sum_like("int64") })
    for i = 1, #list do assert.are.equal(want[i], got[i], "buffer " .. i) end
  end)

  H.gpu_it("reduce_many: post's kind (an integer) and host buffers through the cpu functions", function()
    local cnt = gr.operator { name = "cnt", map = "x > 0 ? 1ll : 0ll", reduce = "a + b", identity = "0", acc = "int64",
                              post = "a * 2", cpu = { map = function(x) return x > 0 and 1 or 0 end,
                                                      reduce = function(a, b) return a + b end,
                                                      post = function(a) return a * 2 end } }
    local d = gr.buffer({ 1, -1, 2, 0, 3 }, "int32")
    local h = gr.buffer({ 5, 5, -5 }, "int32", { where = "host" })
    local got = gr.reduce_many({ d, h, d }, { op = cnt })
    assert.are.same({ 6, 4, 6 }, got)
    assert.are.equal("integer", math.type(got[1]))
  end)

  H.gpu_it("streamed host data: several chunk sizes and streams give the built-in streamed sum", function()
    for _, dtype in ipairs({ "int32", "int8", "float32", "float64" }) do
      local op = sum_like(sum_acc(dtype))
      local h = fill(gr.buffer(3000017, dtype, { where = "host" }), dtype, 11)
      local want = H.is_float(dtype) and gr.sum(h, { acc = "float64" }) or gr.sum(h)
      for _, chunk in ipairs({ 4096, 1 << 16, 1 << 22 }) do
        local got = gr.reduce(h, { op = op, streamed = true, chunk = chunk, streams = 3 })
        if H.is_float(dtype) then
          assert(math.abs(got - want) <= 1e-9 * math.max(1, math.abs(want)), dtype .. " chunk " .. chunk)
        else
          assert.are.equal(want, got, dtype .. " chunk " .. chunk)
        end
      end
    end
    local e = gr.buffer(0, "float32", { where = "host" })
    assert.are.equal(0.0, gr.reduce(e, { op = sum_like("float64"), streamed = true }), "no element: the identity")
    local l2 = gr.operator { name = "l2", map = "x * x", reduce = "a + b", post = "sqrt(a)", identity = "0", acc = "float64" }
    assert.are.equal(5.0, gr.reduce({ 3, 4 }, { op = l2, streamed = true, dtype = "float64" }), "a table source")
    local idx = gr.operator { name = "isum", map = "(double)i", reduce = "a + b", identity = "0", acc = "float64" }
    local big = gr.buffer(1 << 20, "int8", { where = "host" })
    assert.are.equal((1 << 20) * ((1 << 20) - 1) / 2, gr.reduce(big, { op = idx, streamed = true, chunk = 4096 }),
      "indices count from the buffer's start across chunks")
  end)
end)

describe("a user operator's cpu functions over segments and many buffers", function()
  local function cpu_it(title, fn)
    it(title, function() fn(gr.backend() == "cuda" and "host" or "device") end)
  end

  cpu_it("segments: the built-in segmented sum, offsets with empty segments, post as float64", function(where)
    for _, dtype in ipairs({ "int32", "uint8", "float64" }) do
      local op = sum_like(sum_acc(dtype))
      for _, shape in ipairs({ { n = 37, segment = 1 }, { n = 300, segment = 100 },
                               { n = 1000, offsets = { 0, 0, 1, 1, 500, 999, 1000, 1000 } } }) do
        local b = fill(gr.buffer(shape.n, dtype, { where = where }), dtype, shape.n)
        local got = segmented(b, op, shape, where)
        local want = {}
        local bounds = shape.offsets
        if not bounds then
          bounds = {}
          for s = 0, shape.n // shape.segment do bounds[#bounds + 1] = s * shape.segment end
        end
        for s = 1, #bounds - 1 do
          local t = 0
          for i = bounds[s] + 1, bounds[s + 1] do t = t + b[i] end
          want[s] = t
        end
        assert.are.equal(sum_acc(dtype), got:dtype())
        check_values(got:totable(), want, H.is_float(dtype), label(dtype, shape))
      end
    end
    local l2 = gr.operator { name = "l2", map = "x * x", reduce = "a + b", post = "sqrt(a)", identity = "0",
      acc = "float64", cpu = { map = function(x) return x * x end, reduce = function(a, b) return a + b end,
                               post = function(a) return math.sqrt(a) end } }
    local b = gr.buffer({ 3, 4, 6, 8 }, "float32", { where = where })
    local got = gr.reduce(b, { op = l2, segment = 2 })
    assert.are.equal("float64", got:dtype())
    assert.are.same({ 5.0, 10.0 }, got:totable())
    expect("opts.offsets: boundary 2 (5) is past the end of the buffer", function()
      gr.reduce(b, { op = l2, offsets = offsets_buffer({ 0, 5 }, where) })
    end)
  end)

  cpu_it("reduce_many and streamed data run the cpu functions", function(where)
    local op = sum_like("int64")
    local a = gr.buffer(100, "int32", { where = where }):iota(1, 1)
    local c = gr.buffer(0, "int32", { where = where })
    assert.are.same({ 5050, 0, 5050 }, gr.reduce_many({ a, c, a }, { op = op }))
    if gr.backend() ~= "cuda" then
      local h = gr.buffer(100, "int32", { where = "host" }):iota(1, 1)
      assert.are.equal(5050, gr.reduce(h, { op = op, streamed = true }))
    end
  end)

  it("refuse what they cannot do, naming the option", function()
    local nocpu = gr.operator { name = "nocpu", map = "x", reduce = "a + b", identity = "0", acc = "float64" }
    local where = gr.backend() == "cuda" and "host" or "device"
    local b = gr.buffer(10, "int32", { where = where })
    expect("operator nocpu has no cpu functions", function() gr.reduce_many({ b }, { op = nocpu }) end)
    -- the same words on both backends: the operator has no cpu functions (and, on the cuda backend, that
    -- its kernels reduce device buffers)
    expect("operator nocpu has no cpu functions", function() gr.reduce(b, { op = nocpu, segment = 5 }) end)
  end)
end)
