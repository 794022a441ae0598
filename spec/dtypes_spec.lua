--[[
dtypes_spec.lua -- the rules of the dtypes added after the first eight, each checked on values chosen to
reveal the bugs feared, with expectations written from the formats' definitions (not from the engine):

  int16, uint16   C's 16-bit integers: the limits stored and refused, 64-bit wrapping sums, absmax in the
                  unsigned dtype of the width (|-32768| = 32768), and/or/count on values whose bits differ
                  (a bit test would see 0x0100 and 0x0001 as disjoint), iota wrapping.
  bool            one byte, 0 or 1: Lua booleans in (0 and 1 too) and out; byte strings with another
                  byte refused; sums and counts integers, the element ops booleans, means floats;
                  random draws false and true, iota is refused.
  float8_e4m3, float8_e5m2  OCP FP8: storing rounds once to nearest even (449 -> 448, 464 -> 448 in
                  e4m3, 465 refused, no infinity there; 61440 refused by e5m2), subnormals and -0.0 kept,
                  sums in float32 (or float64 on request) within the bound docs/api.md states, gpu_to_gpu
                  the exact sum rounded once, random in [lo, hi).

The generated specs (ops_spec, segments_spec, reduce_spec, the fuzz) run every op, variant and path on
these dtypes too; this file pins the rules the design names. Runs on every backend (the cpu backend here
checks the host side; a GPU the kernels, through the same calls and the #gpu tests).
]]
local gr = require "gpureduce"
local H = require("support.helpers").bind(it, function(reason) pending(reason) end)

local expect = H.expect_error

-- every catalogue variant that takes an op and dtype on this backend (the cpu ones without a GPU); user
-- kernels registered by other spec files in this process are left out (kernel_spec's take a few ops)
local function variants_for(op, dtype)
  local out = {}
  for _, v in ipairs(H.variants()) do
    local takes_op, takes_dtype = false, false
    for _, o in ipairs(v.ops or {}) do takes_op = takes_op or o == op end
    for _, t in ipairs(v.dtypes or {}) do takes_dtype = takes_dtype or t == dtype end
    if takes_op and takes_dtype and v.available then out[#out + 1] = v.name end
  end
  return out
end

describe("int16 and uint16", function()
  it("store their limits and refuse what lies past them, naming the value and the dtype", function()
    local b = gr.buffer({ -32768, 32767, 0, -1 }, "int16")
    assert.same({ -32768, 32767, 0, -1 }, b:totable())
    local u = gr.buffer({ 0, 65535, 1.0 }, "uint16")
    assert.same({ 0, 65535, 1 }, u:totable())
    expect("32768 does not fit in int16", gr.buffer, { 32768 }, "int16")
    expect("-32769 does not fit in int16", gr.buffer, { -32769 }, "int16")
    expect("65536 does not fit in uint16", gr.buffer, { 65536 }, "uint16")
    expect("-1 does not fit in uint16", gr.buffer, { -1 }, "uint16")
    expect("1.5 does not fit in int16", gr.buffer, { 1.5 }, "int16")
    expect("value: 40000 does not fit in int16", function() b:fill(40000) end)
    -- raw bytes: little-endian two's complement
    assert.same({ -2, 258 }, gr.buffer(string.pack("<i2i2", -2, 258), "int16"):totable())
    assert.equal(string.pack("<I2I2", 65535, 7), gr.buffer({ 65535, 7 }, "uint16"):tobytes())
  end)

  it("sum in 64 bits, exactly, and come back signed or unsigned by the dtype", function()
    local n = 70000
    local b = gr.buffer(n, "int16"):fill(-32768)
    assert.equal(-32768 * n, gr.sum(b))
    local u = gr.buffer(n, "uint16"):fill(65535)
    assert.equal(65535 * n, gr.sum(u))
    assert.equal(65535 * 65535 * n, gr.sumsq(u))
    assert.equal(65535.0, gr.mean(u))
    assert.equal(-32768.0, gr.mean(b))
    assert.equal(0.0, gr.var(b))
    assert.equal(math.sqrt(65535.0 * 65535.0 * n), gr.norm(u))
  end)

  it("take absmax in uint16 (|-32768| = 32768) and asum in 64 bits", function()
    local b = gr.buffer({ 5, -32768, 32767, -3 }, "int16")
    for _, v in ipairs(variants_for("absmax", "int16")) do
      assert.equal(32768, gr.absmax(b, { variant = v }), v)
      assert.equal(5 + 32768 + 32767 + 3, gr.asum(b, { variant = v }), v)
    end
    local seg = gr.reduce(b, { op = "absmax", segment = 2 })
    assert.equal("uint16", seg:dtype())
    assert.same({ 32768, 32767 }, seg:totable())
  end)

  it("and/or/count look at values, not bits: 0x0100 and 0x0001 are both true", function()
    local b = gr.buffer({ 0x0100, 0x0001, -0x8000 }, "int16")
    for _, v in ipairs(variants_for("and", "int16")) do
      assert.is_true(gr.all(b, { variant = v }), v)
      assert.is_true(gr.any(b, { variant = v }), v)
    end
    assert.equal(3, gr.count(b))
    assert.is_false(gr.all(gr.buffer({ 0x0100, 0, 0x0001 }, "uint16")))
    assert.is_false(gr.any(gr.buffer(9, "uint16")))
  end)

  it("min, max and argmin compare values (signed and unsigned)", function()
    local b = gr.buffer({ 3, -32768, 32767, -32768 }, "int16")
    assert.equal(-32768, gr.min(b))
    assert.equal(32767, gr.max(b))
    local v, i = gr.argmin(b)
    assert.equal(-32768, v)
    assert.equal(2, i)
    local u = gr.buffer({ 3, 65535, 0x8000, 0 }, "uint16")
    assert.equal(65535, gr.max(u))
    assert.equal(0, gr.min(u))
    local lo, hi = gr.minmax(u)
    assert.same({ 0, 65535 }, { lo, hi })
  end)

  it("wrap in iota as the other integers do, and draw random values in [lo, hi]", function()
    assert.same({ 32766, 32767, -32768, -32767 }, gr.buffer(4, "int16"):iota(32766):totable())
    assert.same({ 65534, 65535, 0, 1 }, gr.buffer(4, "uint16"):iota(65534):totable())
    assert.same({ 2, 1, 0, 65535 }, gr.buffer(4, "uint16"):iota(2, -1):totable())
    local r = gr.buffer(4096, "int16"):random(7, -3, 3)
    local lo, hi = gr.minmax(r)
    assert.same({ -3, 3 }, { lo, hi })
    local full = gr.buffer(4096, "uint16"):random(7)
    assert.truthy(gr.max(full) > 60000 and gr.min(full) < 5000)
  end)

end)

describe("bool", function()
  local function values(b)
    local t = b:totable()
    for i, v in ipairs(t) do assert.is_boolean(v, "element " .. i) end
    return t
  end

  it("takes booleans, 0 and 1, and gives booleans back", function()
    local b = gr.buffer({ true, false, 1, 0 }, "bool")
    assert.same({ true, false, true, false }, values(b))
    assert.equal("\1\0\1\0", b:tobytes())
    b[2] = true
    assert.is_true(b:get(2))
    b:set({ false, 1 }, 3)
    assert.same({ true, true, false, true }, values(b))
    assert.same({ false, false, false }, values(gr.buffer(3, "bool")))
    assert.same({ true, true }, values(gr.buffer(2, "bool"):fill(true)))
    assert.same({ false, true }, values(gr.buffer("\0\1", "bool")))
  end)

  it("refuses other values and other bytes, naming them", function()
    expect("element 1: 2 does not fit in bool (it takes true, false, 0 or 1)", gr.buffer, { 2 }, "bool")
    expect("element 1: 0.5 does not fit in bool", gr.buffer, { 0.5 }, "bool")
    expect("element 2: -1 does not fit in bool", gr.buffer, { true, -1 }, "bool")
    expect("byte 3 of the string is 255: a bool element is the byte 0 or 1", gr.buffer, "\1\0\255", "bool")
    expect("value: expected a boolean (or 0 or 1), got string", function() gr.buffer(1, "bool"):fill("yes") end)
    expect("element 1: expected a number, got boolean", gr.buffer, { true }, "int32")
    expect("iota: bool buffers have no sequence", function() gr.buffer(3, "bool"):iota() end)
  end)

  it("sums and counts as integers, extremes as booleans, means as floats", function()
    local b = gr.buffer({ true, false, true, true, false }, "bool")
    for _, v in ipairs(variants_for("sum", "bool")) do
      assert.equal(3, gr.sum(b, { variant = v }), v)
      assert.equal(0, gr.prod(b, { variant = v }), v)
      assert.is_false(gr.min(b, { variant = v }), v)
      assert.is_true(gr.max(b, { variant = v }), v)
      assert.is_false(gr.all(b, { variant = v }), v)
      assert.is_true(gr.any(b, { variant = v }), v)
    end
    assert.equal(3, gr.count(b))
    assert.equal(3, gr.sumsq(b))
    assert.equal(3, gr.nansum(b))
    assert.equal(3, gr.asum(b))
    assert.is_true(gr.absmax(b))
    assert.is_false(gr.nanmin(b))
    assert.is_true(gr.nanmax(b))
    assert.equal(0.6, gr.mean(b))
    assert.equal(0.6, gr.nanmean(b))
    assert.near(0.24, gr.var(b), 1e-15)
    assert.near(math.sqrt(0.24), gr.std(b), 1e-15)
    assert.near(math.sqrt(3), gr.norm(b), 1e-15)
    local v, i = gr.argmin(b)
    assert.same({ false, 2 }, { v, i })
    v, i = gr.argmax(b)
    assert.same({ true, 1 }, { v, i })
    local lo, hi = gr.minmax(b)
    assert.same({ false, true }, { lo, hi })
    assert.equal(1, gr.prod(gr.buffer({ true, true }, "bool")))
    assert.is_true(gr.all(gr.buffer(0, "bool")))
    assert.equal(0, gr.sum(gr.buffer(0, "bool")))
  end)

  it("gives segments of booleans for the element ops, integers for sums", function()
    local b = gr.buffer({ true, false, false, false, true, true }, "bool")
    local m = gr.reduce(b, { op = "max", segment = 2 })
    assert.equal("bool", m:dtype())
    assert.same({ true, false, true }, values(m))
    local s = gr.reduce(b, { op = "sum", segment = 3 })
    assert.same({ 1, 2 }, s:totable())
    local many = gr.reduce_many({ b, b:slice(2, 3) }, { op = "min" })
    assert.same({ false, false }, many)
  end)

  -- bool is uint8_t on the device, whose min starts from 255: an empty segment's min, nanmin, argmin and
  -- minmax once wrote the byte 255 into a bool result, where the host writes true (1)
  H.gpu_it("writes the host's bytes for device segments, an empty segment's min the byte 1 (not 255)", function()
    local function pinned(d) return gr.buffer(d:tobytes(), d:dtype(), { where = "host" }) end
    local small = gr.buffer({ true, false, true, true }, "bool")
    local large = gr.buffer(1 << 20, "bool"):random(3)
    local cases = {   -- lanes of a warp per segment, then blocks per segment (several for two large ones)
      { small, gr.buffer({ 0, 0, 2, 2, 4, 4 }, "int64") },
      { large, gr.buffer({ 0, 0, 1 << 19, 1 << 19, 1 << 20, 1 << 20 }, "int64") },
      { large, gr.buffer({ 0, 0, 1 << 20 }, "int64") },
    }
    assert.equal("\1\0\1\1\1", gr.reduce(small, { op = "min", offsets = cases[1][2] }):tobytes())
    for c, case in ipairs(cases) do
      local d, off = case[1], case[2]
      local h, hoff = pinned(d), pinned(off)
      for _, op in ipairs({ "min", "max", "nanmin", "nanmax", "absmax", "argmin", "argmax", "minmax", "and", "or" }) do
        local d1, d2 = gr.reduce(d, { op = op, offsets = off })
        local h1, h2 = gr.reduce(h, { op = op, offsets = hoff })
        assert.equal(h1:tobytes(), d1:tobytes(), "case " .. c .. " " .. op)
        if h2 then assert.equal(h2:tobytes(), d2:tobytes(), "case " .. c .. " " .. op .. " (second)") end
      end
    end
  end)

  it("draws random false and true, the same bits for a seed", function()
    local r = gr.buffer(10000, "bool"):random(5)
    local bytes = r:tobytes()
    assert.is_nil(bytes:find("[^\0\1]"))
    local ones = gr.sum(r)
    assert.truthy(ones > 4500 and ones < 5500, tostring(ones))
    assert.equal(bytes, gr.buffer(10000, "bool"):random(5):tobytes())
    assert.equal(10000, gr.sum(gr.buffer(10000, "bool"):random(5, true, true)))
  end)

  it("is refused by gpu_to_gpu (integer sums are exact already) and by the communicator's NCCL type", function()
    local b = gr.buffer({ true, false }, "bool")
    expect("opts.determinism: 'gpu_to_gpu'", gr.sum, b, { determinism = "gpu_to_gpu" })
  end)
end)

describe("float8_e4m3 and float8_e5m2", function()
  local R = require "support.fuzz_reference"

  it("round once to nearest even and refuse what lies past the format, naming value and dtype", function()
    assert.same({ 448.0, 448.0, -448.0, 0x1p-9, -0.0, 1.0, 1.125 },
      gr.buffer({ 449, 464, -464, 0x1p-9, -0.0, 1.0, 1.0625 + 0x1p-20 }, "float8_e4m3"):totable())
    expect("465.0 does not fit in float8_e4m3", gr.buffer, { 465.0 }, "float8_e4m3")
    expect("inf does not fit in float8_e4m3", gr.buffer, { math.huge }, "float8_e4m3")
    expect("-inf does not fit in float8_e4m3", gr.buffer, { -math.huge }, "float8_e4m3")
    assert.same({ 57344.0, math.huge, -math.huge, 0x1p-16, 1.5 },
      gr.buffer({ 61439, math.huge, -math.huge, 0x1p-16, 1.5 }, "float8_e5m2"):totable())
    expect("61440 does not fit in float8_e5m2", gr.buffer, { 61440 }, "float8_e5m2")
    -- NaN: stored as the quiet NaN of its sign
    local pnan = string.unpack("<d", string.pack("<I8", 0x7ff8000000000000))
    local nnan = string.unpack("<d", string.pack("<I8", 0xfff8000000000000))
    assert.equal("\x7f\xff", gr.buffer({ pnan, nnan }, "float8_e4m3"):tobytes())
    assert.equal("\x7e\xfe", gr.buffer({ pnan, nnan }, "float8_e5m2"):tobytes())
    local e5 = gr.buffer({ 0 / 0 }, "float8_e5m2"):totable()[1]
    assert.is_true(e5 ~= e5)
    -- -0.0 and subnormals read back as they are
    local z = gr.buffer({ -0.0 }, "float8_e5m2"):get(1)
    assert.is_true(z == 0 and 1 / z < 0)
    -- the bytes 0x7e (448) and 0x7f (NaN) of e4m3; 0x7c (inf) of e5m2
    local b = gr.buffer("\x7e\x7f\xfe", "float8_e4m3"):totable()
    assert.equal(448.0, b[1])
    assert.is_true(b[2] ~= b[2])
    assert.equal(-448.0, b[3])
    assert.equal(math.huge, gr.buffer("\x7c", "float8_e5m2"):get(1))
  end)

  it("accumulate in float32 (float64 on request) and give floats; extremes are elements", function()
    for _, dtype in ipairs({ "float8_e4m3", "float8_e5m2" }) do
      -- 2^4 + 1/16 sixteen times: exact in float32 and float64 alike (264.0)
      local b = gr.buffer(16, dtype):fill(16.0)
      b:set({ 0.0625 }, 1)
      assert.equal(240.0625, gr.sum(b))
      assert.equal(240.0625, gr.sum(b, { acc = "float64" }))
      assert.equal("float", math.type(gr.sum(b)))
      assert.equal(0.0625, gr.min(b))
      assert.equal(16.0, gr.max(b))
      assert.equal(15, gr.count(gr.buffer({ 1, 0, -0.0, 2 }, dtype)) + 13)
      assert.equal(1.0, gr.prod(gr.buffer({ 0.5, 2.0 }, dtype)))
      local v, i = gr.argmax(gr.buffer({ -1.0, 3.0, 3.0 }, dtype))
      assert.same({ 3.0, 2 }, { v, i })
      assert.equal(2.0, gr.absmax(gr.buffer({ -2.0, 1.5 }, dtype)))
      local a = gr.absmax(gr.buffer({ -0.0 }, dtype))
      assert.is_true(a == 0 and 1 / a > 0)
      expect("opts.acc: float16 is not accepted for sum of " .. dtype .. " (accepted: float32, float64)", gr.sum, b,
        { acc = "float16" })
    end
    -- float8_e4m3's min and max start from +-448: an empty segment gives them
    local seg = gr.reduce(gr.buffer({ 1.0 }, "float8_e4m3"), { op = "min", offsets = gr.buffer({ 0, 0, 1 }, "int64") })
    assert.same({ 448.0, 1.0 }, seg:totable())
    assert.equal(-448.0, gr.max(gr.buffer({ -448.0 }, "float8_e4m3")))
    local nan = gr.max(gr.buffer({ 1.0, 0 / 0, 2.0 }, "float8_e4m3"))
    assert.is_true(nan ~= nan)
    assert.equal(2.0, gr.nanmax(gr.buffer({ 1.0, 0 / 0, 2.0 }, "float8_e4m3")))
  end)

  -- The bound docs/api.md states: sum of n float8 elements in float32 within gamma(n - 1) sum|x| + u |sum|
  -- (u = 2^-24) of the exact sum of the elements (which hold 4 or 3 bits; the accumulator only rounds).
  it("sum within gamma(n - 1) sum|x| + u |sum| of the exact sum, on every variant and with segments", function()
    for _, dtype in ipairs({ "float8_e4m3", "float8_e5m2" }) do
      for _, n in ipairs({ 1, 33, 1025, 100003 }) do
        local b = gr.buffer(n, dtype):random(n, -300, 300)
        local xs = b:totable()
        local exact, mag = 0.0, 0.0
        for k = 1, #xs do exact = exact + xs[k]; mag = mag + math.abs(xs[k]) end  -- exact: multiples of 2^-9 < 2^45
        local u = 0x1p-24
        local bound = (n - 1) * u / (1 - (n - 1) * u) * mag + u * math.abs(exact)
        for _, v in ipairs(variants_for("sum", dtype)) do
          local got = gr.sum(b, { variant = v })
          assert(math.abs(got - exact) <= bound, string.format("%s %s n=%d: %.17g vs %.17g (bound %.3g)", v, dtype, n,
            got, exact, bound))
          assert.equal(exact, gr.sum(b, { variant = v, acc = "float64" }))
        end
        local g2g = gr.sum(b, { determinism = "gpu_to_gpu" })
        assert.equal(R.to_f32(exact), g2g, dtype .. " gpu_to_gpu: the exact sum rounded once to float32")
        local segs = gr.reduce(b, { op = "sum", offsets = gr.buffer({ 0, n }, "int64"), determinism = "gpu_to_gpu" })
        assert.equal(g2g, segs:get(1))
      end
    end
  end)

  it("draw random values in [lo, hi), reproducibly by seed", function()
    for _, dtype in ipairs({ "float8_e4m3", "float8_e5m2" }) do
      local r = gr.buffer(20000, dtype):random(3, -2, 2)
      local lo, hi = gr.minmax(r)
      assert.truthy(lo >= -2 and hi < 2, dtype)
      assert.equal(r:tobytes(), gr.buffer(20000, dtype):random(3, -2, 2):tobytes())
      local r2 = gr.buffer(100, dtype):random(3, 100, 101)
      assert.truthy(gr.min(r2) >= 96 and gr.max(r2) < 101, dtype)   -- 100 rounds to 96 in both formats
    end
  end)

  H.gpu_it("give the CPU backend's bits on the device: every op, and gpu_to_gpu sums", function()
    for _, dtype in ipairs({ "float8_e4m3", "float8_e5m2" }) do
      local d = gr.buffer(300007, dtype):random(11, -4, 4)
      local h = gr.buffer(d:tobytes(), dtype, { where = "host" })
      assert.equal(h:tobytes(), d:tobytes())
      for _, op in ipairs({ "min", "max", "count", "absmax", "argmax", "minmax", "nanmin" }) do
        local a1, a2 = gr.reduce(d, { op = op })
        local b1, b2 = gr.reduce(h, { op = op })
        assert.same({ b1, b2 }, { a1, a2 }, dtype .. " " .. op)
      end
      for _, op in ipairs({ "sum", "mean", "sumsq", "norm", "var", "nansum", "asum" }) do
        local g = gr.reduce(d, { op = op, determinism = "gpu_to_gpu" })
        assert.equal(gr.reduce(h, { op = op, determinism = "gpu_to_gpu" }), g, dtype .. " " .. op)
      end
    end
  end)
end)

