--[[
dot_spec.lua -- gr.dot(a, b, opts): the sum of a[i] * b[i], against a reference written here.

What it checks
  - Every dtype, on sizes around the 16-byte vectors and the grid (0, 1, 3, 15, 16, 17, 1000, 4097,
    65539), with inputs whose offsets from a 16-byte boundary are equal and differ (slices): values
    chosen so that every partial sum is exact in the accumulator (small integers for the floats), so
    the answer is one number whatever the order: the integers over their whole range, wrapping in 64
    bits as Lua integers do; bool as the count of pairs both true.
  - Floats of full precision against the exact sum of the exact products within the accumulator's
    bound (n u sum |a b|, u the unit roundoff of float32 or float64).
  - determinism = "gpu_to_gpu": the exactly rounded sum of the exact products, bit for bit, for float32
    (products exact in a double) and float64 (Dekker's two-product here), the small floats, and the
    cases the kernels treat apart: products that overflow or underflow a double, NaN, infinities,
    inf * 0, signed zeros.
  - Views: a transposed pair (read through compact copies) gives the plain pair's value; inputs are
    left unchanged; async, streams, pinned host buffers on the GPU.
  - Per segment (segment, offsets: sizes that take every way the policy shares a segment out -- lanes,
    a warp, a block, several blocks -- empty segments, starts off a 16-byte boundary) and along axes (each
    axis and sets of them of 2-D and 3-D views, negative axes, keepdims, transposed inputs, empty axes),
    against the reference per segment or per position; gpu_to_gpu per segment bit for bit against the
    exact reference; a row's bits the same alone and among many (batch invariance).
  - Bad input: another dtype, another shape, host with device, a non-buffer, options gr.dot does not
    take -- each a clear error naming the argument.
  GPU tests are pending without a CUDA device; the others run on the cpu backend there and on the GPU
  where there is one.

Reproducing
  Deterministic (fixed seeds): `busted spec/dot_spec.lua`.
]]
local gr = require "gpureduce"
local H = require("support.helpers").bind(it, function(reason) pending(reason) end)
local A = require "support.axes_reference"

local SIZES = { 0, 1, 3, 15, 16, 17, 1000, 4097, 65539 }
local FLOATS = { float32 = true, float64 = true, float16 = true, bfloat16 = true, float8_e4m3 = true,
                 float8_e5m2 = true }
-- each integer dtype's range, as Lua integers (uint64 as its bit pattern)
local RANGE = {
  int8 = { -128, 127 }, uint8 = { 0, 255 }, int16 = { -32768, 32767 }, uint16 = { 0, 65535 },
  int32 = { -2147483648, 2147483647 }, uint32 = { 0, 4294967295 },
  int64 = { math.mininteger, math.maxinteger }, uint64 = { math.mininteger, math.maxinteger },
}

local two_product = require("support.exact_reference").two_prod

local function bits(x) return (string.unpack("<i8", string.pack("<d", x))) end
local function same_bits(a, b) return a == b and (a ~= 0 or bits(a) == bits(b)) or (a ~= a and b ~= b) end
local function show(x) return math.type(x) == "float" and string.format("%a", x) or tostring(x) end

-- A random value of dtype d whose products and their sums stay exact: small integers for the floats,
-- the whole range for the integers.
local function random_value(d, rng)
  if d == "bool" then return rng(0, 1) == 1 end
  if FLOATS[d] then return rng(-4, 4) + 0.0 end
  local lo, hi = RANGE[d][1], RANGE[d][2]
  if lo == math.mininteger then return H.bits64(rng) end        -- any 64-bit pattern
  return rng(lo, hi)
end

local function random_values(d, n, seed)
  math.randomseed(seed)
  local t = {}
  for i = 1, n do t[i] = random_value(d, math.random) end
  return t
end

-- The reference: Lua integer products and sums wrap in 64 bits; floats here are small integers, whose
-- products and sums are exact doubles.
local function reference(d, xs, ys)
  if d == "bool" then
    local c = 0
    for i = 1, #xs do if xs[i] and ys[i] then c = c + 1 end end
    return c
  end
  local s = FLOATS[d] and 0.0 or 0
  for i = 1, #xs do s = s + xs[i] * ys[i] end
  return s
end

-- A buffer of values that starts `skew` elements past a 16-byte boundary (a slice of a longer one).
local function placed(values, d, skew, opts)
  local n = #values
  local whole = gr.buffer(n + skew, d, opts)
  local b = whole:slice(skew + 1, n)
  if n > 0 then gr.copy(b, gr.buffer(values, d, opts)) end
  return b
end

describe("gr.dot", function()
  for _, d in ipairs(gr.dtypes()) do
    it(d .. ": every size, equal and unequal alignments, against the reference", function()
      for _, n in ipairs(SIZES) do
        local xs, ys = random_values(d, n, 11 + n), random_values(d, n, 977 + n)
        local want = reference(d, xs, ys)
        for _, skew in ipairs({ { 0, 0 }, { 1, 1 }, { 0, 1 }, { 3, 0 } }) do
          local a, b = placed(xs, d, skew[1]), placed(ys, d, skew[2])
          local got = gr.dot(a, b)
          assert(got == want and math.type(got) == math.type(want),
                 string.format("%s n=%d skew %d/%d: got %s, want %s", d, n, skew[1], skew[2], show(got), show(want)))
        end
      end
    end)
  end

  it("does not write its inputs", function()
    for _, d in ipairs({ "float32", "bfloat16", "int8", "float64" }) do
      local xs, ys = random_values(d, 4097, 5), random_values(d, 4097, 6)
      local a, b = gr.buffer(xs, d), gr.buffer(ys, d)
      local ba, bb = a:tobytes(), b:tobytes()
      gr.dot(a, b)
      gr.dot(a, b, { determinism = FLOATS[d] and "gpu_to_gpu" or nil })
      assert.are.equal(ba, a:tobytes())
      assert.are.equal(bb, b:tobytes())
    end
  end)

  it("full-precision floats: within the accumulator's bound of the exact dot product", function()
    for _, case in ipairs({ { "float32", nil, 2.0 ^ -24 }, { "float32", "float64", 2.0 ^ -53 },
                            { "float64", nil, 2.0 ^ -53 }, { "bfloat16", nil, 2.0 ^ -24 } }) do
      local d, acc, u = case[1], case[2], case[3]
      for _, n in ipairs({ 17, 4097, 65539 }) do
        local a = gr.buffer(n, d):random(3 + n, -1, 1)
        local b = gr.buffer(n, d):random(4 + n, -1, 1)
        local xs, ys = a:totable(), b:totable()
        local terms, mag = {}, 0.0
        for i = 1, n do
          local p, e = two_product(xs[i], ys[i])
          terms[#terms + 1], terms[#terms + 2] = p, e
          mag = mag + math.abs(p)
        end
        local exact = A.exact_sum(terms, "float64")
        local got = gr.dot(a, b, { acc = acc })
        assert(math.abs(got - exact) <= n * u * mag + 1e-300,
               string.format("%s acc %s n=%d: got %.17g, exact %.17g", d, acc or "default", n, got, exact))
      end
    end
  end)

  it("errors: dtypes, shapes, sides, non-buffers and options", function()
    local a, b = gr.buffer(4, "float32"), gr.buffer(4, "float32")
    local function fails(pattern, ...)
      local ok, err = pcall(gr.dot, ...)
      assert(not ok, "expected an error matching " .. pattern)
      assert(tostring(err):find(pattern, 1, true), tostring(err))
    end
    fails("#2", a, gr.buffer(4, "int32"))
    fails("one dtype", a, gr.buffer(4, "int32"))
    fails("one shape", a, gr.buffer(5, "float32"))
    fails("one shape", a:view{ 2, 2 }, b)
    fails("#1", "x", b)
    fails("#2", a, { 1, 2, 3, 4 })
    fails("opts.variant", a, b, { variant = "cub" })
    fails("opts.finish", a, b, { finish = "host" })
    fails("opts", a, b, { out = gr.buffer(1, "float32") })
    fails("opts.acc", a, b, { acc = "int32" })
    fails("opts.determinism", gr.buffer(4, "int32"), gr.buffer(4, "int32"), { determinism = "gpu_to_gpu" })
    if H.has_gpu then fails("one side", a, gr.buffer(4, "float32", { where = "host" })) end
  end)

  it("a transposed pair gives the plain pair's value", function()
    local m = gr.buffer(6, "float64"):iota(1):view{ 2, 3 }
    local n = gr.buffer({ 1, 1, 1, 2, 2, 2 }, "float64"):view{ 3, 2 }
    assert.are.equal(35, gr.dot(m:transpose(), n))
    assert.are.equal(gr.dot(m:transpose():contiguous(), n), gr.dot(m:transpose(), n))
    assert.are.equal(35, gr.dot(m, n:transpose()))          -- {{1, 2, 3}, {4, 5, 6}} . {{1, 1, 2}, {1, 2, 2}}
  end)

  it("async gives the synchronous value; an empty pair gives 0", function()
    local a = gr.buffer(100000, "float32"):random(1, -1, 1)
    local b = gr.buffer(100000, "float32"):random(2, -1, 1)
    local p = gr.dot(a, b, { async = true })
    assert.are.equal(gr.dot(a, b), p:wait())
    assert.are.equal(0.0, gr.dot(gr.buffer(0, "float32"), gr.buffer(0, "float32")))
    assert.are.equal(0, gr.dot(gr.buffer(0, "int32"), gr.buffer(0, "int32")))
  end)
end)

describe("gr.dot at gpu_to_gpu", function()
  local function exact_dot(xs, ys, format)
    local terms = {}
    for i = 1, #xs do
      local p, e = two_product(xs[i], ys[i])
      terms[#terms + 1] = p
      if e ~= 0 then terms[#terms + 1] = e end
    end
    return A.exact_sum(terms, format)
  end

  for _, d in ipairs({ "float32", "float64", "float16", "bfloat16", "float8_e4m3", "float8_e5m2" }) do
    it(d .. ": the exactly rounded sum of the exact products, bit for bit", function()
      local format = d == "float64" and "float64" or "float32"
      for _, n in ipairs({ 1, 17, 4097, 65539 }) do
        local a = gr.buffer(n, d):random(21 + n, -2, 2)
        local b = gr.buffer(n, d):random(22 + n, -2, 2)
        local want = exact_dot(a:totable(), b:totable(), format)
        local got = gr.dot(a, b, { determinism = "gpu_to_gpu" })
        assert(same_bits(got, want), string.format("%s n=%d: got %a, want %a", d, n, got, want))
        -- a float32 result comes back rounded to float32, whatever the accumulator's order
        local got64 = gr.dot(a, b, { determinism = "gpu_to_gpu", acc = d ~= "float64" and "float64" or nil })
        local want64 = exact_dot(a:totable(), b:totable(), "float64")
        assert(same_bits(got64, want64), string.format("%s acc float64 n=%d: got %a, want %a", d, n, got64, want64))
      end
    end)
  end

  it("float64: products beyond a double's range, subnormal products, NaN and infinities", function()
    local cases = {
      -- 2^1100 and -2^1100 cancel: the exact sum is 0 (naive products give inf - inf)
      { { 2.0 ^ 600, -2.0 ^ 600, 1.5 }, { 2.0 ^ 500, 2.0 ^ 500, 2.0 }, 3.0 },
      -- eight products of 1.125 * 2^-1075 each: 9 * 2^-1075 in all, which rounds to 4 * 2^-1074
      -- (each product rounded alone would give 2^-1074, eight times that)
      { { 1.5 * 2.0 ^ -538, 1.5 * 2.0 ^ -538, 1.5 * 2.0 ^ -538, 1.5 * 2.0 ^ -538, 1.5 * 2.0 ^ -538,
          1.5 * 2.0 ^ -538, 1.5 * 2.0 ^ -538, 1.5 * 2.0 ^ -538 },
        { 0.75 * 2.0 ^ -537, 0.75 * 2.0 ^ -537, 0.75 * 2.0 ^ -537, 0.75 * 2.0 ^ -537, 0.75 * 2.0 ^ -537,
          0.75 * 2.0 ^ -537, 0.75 * 2.0 ^ -537, 0.75 * 2.0 ^ -537 }, 4 * 2.0 ^ -1074 },
      -- a product past the largest double whose sum stays past it: +inf
      { { 2.0 ^ 600, 1 }, { 2.0 ^ 600, 1 }, math.huge },
      -- 1 + 2^-1100 - 2^-1100: exactly 1
      { { 1, 2.0 ^ -550, -2.0 ^ -550 }, { 1, 2.0 ^ -550, 2.0 ^ -550 }, 1.0 },
      { { math.huge, 1 }, { 0, 1 }, 0 / 0 },               -- inf * 0 is NaN
      { { math.huge, 1 }, { -2, 1 }, -math.huge },
      { { math.huge, -math.huge }, { 1, 1 }, 0 / 0 },
      { { 0 / 0, 1 }, { 1, 1 }, 0 / 0 },
      { { -0.0, 0.0 }, { 1, -1 }, -0.0 },                   -- every product -0.0
      { { -0.0, 0.0 }, { 1, 1 }, 0.0 },
    }
    for k, c in ipairs(cases) do
      local got = gr.dot(gr.buffer(c[1], "float64"), gr.buffer(c[2], "float64"), { determinism = "gpu_to_gpu" })
      assert(same_bits(got, c[3]), string.format("case %d: got %a, want %a", k, got, c[3]))
    end
  end)

  it("float32: infinities, NaN and signed zeros", function()
    local cases = {
      { { math.huge, 1 }, { 0, 1 }, 0 / 0 }, { { -math.huge, 2 }, { 3, 1 }, -math.huge },
      { { -0.0, -0.0 }, { 1, 1 }, -0.0 }, { { 3.0e38, 3.0e38 }, { 2, -2 }, 0.0 },
      { { 3.0e38, 3.0e38 }, { 2, 2 }, math.huge },       -- 1.2e39: past float32's range when rounded
    }
    for k, c in ipairs(cases) do
      local got = gr.dot(gr.buffer(c[1], "float32"), gr.buffer(c[2], "float32"), { determinism = "gpu_to_gpu" })
      assert(same_bits(got, c[3]), string.format("case %d: got %a, want %a", k, got, c[3]))
    end
  end)
end)

describe("gr.dot per segment and along axes", function()
  -- the reference of each segment [lo, hi) (0-based, as offsets give them)
  local function per_segment(d, xs, ys, bounds)
    local out = {}
    for s = 1, #bounds - 1 do
      local sx, sy = {}, {}
      for i = bounds[s] + 1, bounds[s + 1] do
        sx[#sx + 1], sy[#sy + 1] = xs[i], ys[i]
      end
      out[s] = reference(d, sx, sy)
    end
    return out
  end

  local function check_list(got, want, what)
    assert.are.equal(#want, #got, what .. ": result count")
    for i = 1, #want do
      local g, w = got[i], want[i]
      if math.type(w) == "integer" and math.type(g) == "float" then w = w + 0.0 end
      assert(g == w, string.format("%s: result %d got %s, want %s", what, i, show(g), show(w)))
    end
  end

  for _, d in ipairs({ "float32", "float64", "bfloat16", "float8_e4m3", "int8", "uint8", "int16", "int32",
                       "uint64", "bool" }) do
    it(d .. ": fixed-size segments of every sharing, and CSR offsets with empty ones", function()
      for _, size in ipairs({ 1, 2, 5, 16, 33, 300, 5000, 70000 }) do
        local k = math.max(1, math.min(200, 140000 // size))
        local xs, ys = random_values(d, k * size, size), random_values(d, k * size, size + 1)
        local bounds = {}
        for s = 0, k do bounds[s + 1] = s * size end
        local got = gr.dot(gr.buffer(xs, d), gr.buffer(ys, d), { segment = size }):totable()
        check_list(got, per_segment(d, xs, ys, bounds), string.format("%s segment=%d", d, size))
      end
      local n = 20000
      local xs, ys = random_values(d, n, 91), random_values(d, n, 92)
      local bounds = { 0, 0, 3, 3, 4, 100, 117, 4000, 4001, 19999, 20000, 20000 }
      local got = gr.dot(gr.buffer(xs, d), gr.buffer(ys, d), { offsets = gr.buffer(bounds, "int64") }):totable()
      check_list(got, per_segment(d, xs, ys, bounds), d .. " offsets")
    end)
  end

  it("along axes: every axis and set of axes of 2-D and 3-D views, keepdims, transposed inputs", function()
    local AR = A
    for _, d in ipairs({ "float32", "int32", "bfloat16" }) do
      for _, shape in ipairs({ { 7, 5 }, { 3, 4, 6 }, { 1, 9 }, { 40, 33 } }) do
        local n = 1
        for _, l in ipairs(shape) do n = n * l end
        local xs, ys = random_values(d, n, n), random_values(d, n, n + 7)
        local a, b = gr.buffer(xs, d):view(shape), gr.buffer(ys, d):view(shape)
        local axes_sets = #shape == 2 and { 1, 2, -1, { 1, 2 } } or { 1, 2, 3, { 1, 3 }, { 2, 3 }, -2 }
        for _, axis in ipairs(axes_sets) do
          -- the reference: products as a view of the same shape, summed per kept position
          local products = {}
          for i = 1, n do products[i] = FLOATS[d] and xs[i] * ys[i] or xs[i] * ys[i] end
          local list = type(axis) == "table" and axis or { axis }
          local norm = AR.normalize(list, #shape)
          local groups = AR.groups(AR.compact(products, shape), norm)
          local want = {}
          for g, members in ipairs(groups) do
            local s = FLOATS[d] and 0.0 or 0
            for _, v in ipairs(members) do s = s + v end
            want[g] = s
          end
          local r = gr.dot(a, b, { axis = axis })
          check_list(r:view{ #r }:totable(), want, string.format("%s %s axis %s", d, table.concat(shape, "x"),
                                                       type(axis) == "table" and table.concat(axis, ",") or axis))
          local kept = gr.dot(a, b, { axis = axis, keepdims = true })
          assert.are.equal(#shape, #kept:shape())
        end
        if #shape == 2 then
          -- transposed inputs: the same values as the transposed products
          local t = gr.dot(a:transpose(), b:transpose(), { axis = 2 }):totable()     -- 1-D results
          local plain = gr.dot(a, b, { axis = 1 }):totable()
          check_list(t, plain, d .. " transposed")
        end
      end
    end
  end)

  it("gpu_to_gpu per segment: the exactly rounded dot of each, bit for bit", function()
    for _, d in ipairs({ "float32", "float64", "bfloat16" }) do
      local n, size = 6000, 1000
      local a = gr.buffer(n, d):random(61, -2, 2)
      local b = gr.buffer(n, d):random(62, -2, 2)
      local xs, ys = a:totable(), b:totable()
      local got = gr.dot(a, b, { segment = size, determinism = "gpu_to_gpu" }):totable()
      for s = 1, n // size do
        local terms = {}
        for i = (s - 1) * size + 1, s * size do
          local p, e = two_product(xs[i], ys[i])
          terms[#terms + 1], terms[#terms + 2] = p, e
        end
        local want = A.exact_sum(terms, d == "float64" and "float64" or "float32")
        assert(same_bits(got[s], want), string.format("%s segment %d: got %a, want %a", d, s, got[s], want))
      end
    end
  end)

  it("a row's bits do not depend on how many rows there are", function()
    for _, row in ipairs({ 7, 256, 5000, 100000 }) do
      local a = gr.buffer(8 * row, "float32"):random(71, -1, 1):view{ 8, row }
      local b = gr.buffer(8 * row, "float32"):random(72, -1, 1):view{ 8, row }
      local all = gr.dot(a, b, { axis = 2 }):totable()
      for _, r in ipairs({ 1, 5, 8 }) do
        local one = gr.dot(a:narrow(1, r, 1), b:narrow(1, r, 1), { axis = 2 }):totable()[1]
        assert(same_bits(one, all[r]), string.format("row %d of %d: alone %a, among 8 %a", r, row, one, all[r]))
      end
    end
  end)

  it("async per segment, per offsets and along axes: a Pending whose wait gives the synchronous buffer", function()
    for _, d in ipairs({ "float32", "int32", "bfloat16", "float64" }) do
      local n = 3000
      local a, b = gr.buffer(n, d):random(81, -3, 3), gr.buffer(n, d):random(82, -3, 3)
      local cases = {
        { segment = 6 }, { segment = n }, { offsets = gr.buffer({ 0, 0, 5, 1000, 2999, 3000 }, "int64") },
      }
      if d ~= "int32" then cases[#cases + 1] = { segment = 100, determinism = "gpu_to_gpu" } end
      for _, opts in ipairs(cases) do
        local want = gr.dot(a, b, opts):totable()
        opts.async = true
        local p = gr.dot(a, b, opts)
        assert.are.equal("gpureduce.Pending", (tostring(p):match("^[%w%.]+")))
        local got = p:wait()
        assert.are.same(want, got:totable())
        assert.are.same(want, p:wait():totable())       -- a second wait gives the same buffer
        local into = gr.buffer(#want, gr.dtype_of and gr.dtype_of(got) or got:dtype())
        opts.out = into
        assert.are.equal(into, gr.dot(a, b, opts):wait())
        assert.are.same(want, into:totable())
      end
      local m, w = a:view{ 30, 100 }, b:view{ 30, 100 }
      for _, axis in ipairs({ 1, 2, { 1, 2 } }) do
        local want = gr.dot(m, w, { axis = axis }):totable()
        assert.are.same(want, gr.dot(m, w, { axis = axis, async = true }):wait():totable())
        if type(axis) == "number" then           -- the same products in the same order, through a copy
          assert.are.same(want, gr.dot(m:transpose(), w:transpose(), { axis = 3 - axis, async = true }):wait():totable())
        end
      end
    end
    -- nothing to reduce: the results are there at once
    local e = gr.dot(gr.buffer(0, "float32"):view{ 3, 0 }, gr.buffer(0, "float32"):view{ 3, 0 }, { axis = 2, async = true })
    assert.are.same({ 0.0, 0.0, 0.0 }, e:wait():totable())
  end)

  it("errors: out of the wrong dtype or shape, axes out of range, a stream when synchronous, empty axes", function()
    local a, b = gr.buffer(12, "float32"):view{ 3, 4 }, gr.buffer(12, "float32"):view{ 3, 4 }
    local function fails(pattern, ...)
      local ok, err = pcall(gr.dot, ...)
      assert(not ok, "expected an error matching " .. pattern)
      assert(tostring(err):find(pattern, 1, true), tostring(err))
    end
    fails("opts.out", a, b, { axis = 2, out = gr.buffer(3, "float64") })
    fails("opts.out", a, b, { axis = 2, out = gr.buffer(4, "float32") })
    fails("opts.axis", a, b, { axis = 3 })
    fails("opts.axis", a, b, { axis = { 1, 1 } })
    fails("opts.out", a, b, { out = gr.buffer(1, "float32") })
    fails("opts.segment", gr.buffer(10, "float32"), gr.buffer(10, "float32"), { segment = 3 })
    fails("opts.stream", gr.buffer(10, "float32"), gr.buffer(10, "float32"), { segment = 5, stream = gr.stream() })
    local e = gr.dot(gr.buffer(0, "float32"):view{ 3, 0 }, gr.buffer(0, "float32"):view{ 3, 0 }, { axis = 2 })
    assert.are.same({ 0.0, 0.0, 0.0 }, e:totable())
  end)
end)

describe("gr.dot on the GPU", function()
  H.gpu_it("pinned host buffers, streams and async agree with device buffers", function()
    for _, d in ipairs({ "float32", "float64", "bfloat16", "int8", "int32", "uint64" }) do
      local xs, ys = random_values(d, 70001, 31), random_values(d, 70001, 32)
      local want = reference(d, xs, ys)
      local ha, hb = gr.buffer(xs, d, { where = "host" }), gr.buffer(ys, d, { where = "host" })
      assert.are.equal(want, gr.dot(ha, hb))
      local a, b = gr.buffer(xs, d), gr.buffer(ys, d)
      local s = gr.stream()
      assert.are.equal(want, gr.dot(a, b, { stream = s }))
      assert.are.equal(want, gr.dot(a, b, { stream = s, async = true }):wait())
    end
  end)

  H.gpu_it("async per segment and along axes on a stream: in flight until waited, inputs freed early", function()
    local rows, cols = 4096, 4096
    local a = gr.buffer(rows * cols, "float32"):random(91, -1, 1)
    local b = gr.buffer(rows * cols, "float32"):random(92, -1, 1)
    local m, w = a:view{ rows, cols }, b:view{ rows, cols }
    local want_rows = gr.dot(m, w, { axis = 2 }):totable()
    local want_cols = gr.dot(m, w, { axis = 1 }):totable()
    local want_seg = gr.dot(a, b, { segment = 1024 }):totable()
    local s = gr.stream()
    local p1 = gr.dot(m, w, { axis = 2, async = true, stream = s })
    local p2 = gr.dot(m, w, { axis = 1, async = true })
    local p3 = gr.dot(a, b, { segment = 1024, async = true, stream = s })
    -- the inputs dropped while the work is queued: the pendings hold them
    a, b, m, w = nil, nil, nil, nil
    collectgarbage()
    collectgarbage()
    for _ = 1, 4 do gr.buffer(rows * cols, "float32"):fill(7) end   -- may take freed memory: never theirs
    assert.are.same(want_rows, p1:wait():totable())
    assert.are.same(want_cols, p2:wait():totable())
    assert.are.same(want_seg, p3:wait():totable())
    assert.is_true(p1:ready())
  end)

  H.gpu_it("gpu_to_gpu: the same bits on the device and on the host, for every grid", function()
    for _, d in ipairs({ "float32", "float64", "bfloat16", "float8_e4m3" }) do
      local a = gr.buffer(1 << 20, d):random(41, -3, 3)
      local b = gr.buffer(1 << 20, d):random(42, -3, 3)
      local dev = gr.dot(a, b, { determinism = "gpu_to_gpu" })
      local host = gr.dot(gr.buffer(a:totable(), d, { where = "host" }), gr.buffer(b:totable(), d, { where = "host" }),
                          { determinism = "gpu_to_gpu" })
      assert(same_bits(dev, host), string.format("%s: device %a, host %a", d, dev, host))
      -- a slice of different alignment through the same kernel
      local sa, sb = a:slice(2, (1 << 20) - 2), b:slice(3, (1 << 20) - 2)
      local d1 = gr.dot(sa, sb, { determinism = "gpu_to_gpu" })
      local h1 = gr.dot(gr.buffer(sa:totable(), d, { where = "host" }), gr.buffer(sb:totable(), d, { where = "host" }),
                        { determinism = "gpu_to_gpu" })
      assert(same_bits(d1, h1), string.format("%s slices: device %a, host %a", d, d1, h1))
    end
  end)

  H.gpu_it("run_to_run: the same bits on every call", function()
    local a = gr.buffer(1 << 22, "float32"):random(51, -1, 1)
    local b = gr.buffer(1 << 22, "float32"):random(52, -1, 1)
    local first = gr.dot(a, b)
    for _ = 1, 5 do assert(same_bits(first, gr.dot(a, b))) end
  end)
end)
