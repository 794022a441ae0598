-- Buffers: construction, contents, views, lifetime.
local gr = require "gpureduce"
-- `pending` is looked up when the test runs: inside a test it is busted's "mark this test pending"
local H = require("support.helpers").bind(it, function(reason) pending(reason) end)

describe("the module", function()
  it("reports a version, a backend and a device that agree", function()
    assert.is_string(gr.version)
    local backend = gr.backend()
    assert.is_true(backend == "cuda" or backend == "cpu")
    local d = gr.device()
    if backend == "cpu" then
      assert.is_nil(d)
    else
      assert.is_string(d.name)
      assert.is_true(d.sms > 0 and d.memory > 0 and d.l2 > 0)
      assert.matches("^%d+%.%d+$", d.cc)
    end
  end)

  it("lists dtypes, ops and finishing modes", function()
    assert.same({ "int8", "uint8", "int32", "uint32", "int64", "uint64", "float32", "float64", "float16",
      "bfloat16", "int16", "uint16", "bool", "float8_e4m3",
      "float8_e5m2" }, gr.dtypes())
    assert.same({ "sum", "prod", "min", "max", "and", "or", "count", "mean", "var", "std", "argmin", "argmax",
      "minmax", "sumsq", "norm", "nansum", "nanmin", "nanmax", "nanmean", "absmax", "asum" }, gr.ops())
    assert.same({ "auto", "device", "hybrid", "host", "single" }, gr.finishes())
  end)

  it("lists variants from the registry with what each supports", function()
    local seen = {}
    for _, v in ipairs(gr.variants()) do
      assert.is_string(v.name)
      assert.is_number(v.ordinal)
      assert.is_string(v.origin)
      assert.is_string(v.summary)
      assert.is_table(v.finishes)
      assert.is_table(v.needs)
      assert.is_true(v.block.min <= v.block.default and v.block.default <= v.block.max)
      assert.is_nil(seen[v.ordinal], "two variants share ordinal " .. v.ordinal)
      seen[v.ordinal] = true
    end
    assert.is_table(gr.variant("cpu"))
    assert.is_table(gr.variant("warp_shuffle"))
    assert.is_table(gr.variant("cpu_pairwise"))
  end)
end)

describe("buffers", function()
  it("are zero-filled when made from a size", function()
    local b = gr.buffer(1000, "int32")
    assert.are.equal(1000, #b)
    assert.are.equal(1000, b:size())
    assert.are.equal("int32", b:dtype())
    assert.are.equal("device", b:where())
    assert.are.equal(0, gr.sum(b))
    assert.are.equal(0, gr.max(b))
  end)

  it("default to float32", function()
    assert.are.equal("float32", gr.buffer(3):dtype())
  end)

  for _, dtype in ipairs(gr.dtypes()) do
    it("round-trip a table, bytes and single elements of " .. dtype, function()
      local values = H.is_float(dtype) and { 1.5, -2.5, 0.0, 3.0 } or dtype == "bool" and { true, false, false, true }
        or H.is_unsigned(dtype) and { 0, 1, 200, 7 } or { -5, 0, 100, -128 }
      local b = gr.buffer(values, dtype)
      assert.same(values, b:totable())
      local b2 = gr.buffer(b:tobytes(), dtype)
      assert.same(values, b2:totable())
      assert.are.equal(values[3], b:get(3))
      b:set({ values[1] }, 4)
      assert.are.equal(values[1], b:get(4))
    end)
  end

  it("give integers exactly, including the extremes of 64-bit types", function()
    local b = gr.buffer({ math.mininteger, math.maxinteger, -1 }, "int64")
    assert.are.equal(math.mininteger, b:get(1))
    assert.are.equal(math.maxinteger, b:get(2))
    assert.are.equal(math.mininteger, gr.min(b))
    local u = gr.buffer({ -1, 5 }, "uint64")       -- a negative Lua integer stands for its bits
    assert.are.equal(-1, gr.max(u))
    assert.is_true(math.ult(5, gr.max(u)))
  end)

  it("fill, iota and random write what they say", function()
    local b = gr.buffer(5, "float64"):fill(2.5)
    assert.same({ 2.5, 2.5, 2.5, 2.5, 2.5 }, b:totable())
    b:iota(1, 0.5)
    assert.same({ 1, 1.5, 2, 2.5, 3 }, b:totable())
    local i = gr.buffer(4, "uint8"):iota(254)     -- integers wrap like the dtype
    assert.same({ 254, 255, 0, 1 }, i:totable())
    local r = gr.buffer(10000, "int32"):random(3, -5, 5)
    assert.are.equal(-5, gr.min(r))
    assert.are.equal(5, gr.max(r))
    local f = gr.buffer(10000, "float32"):random(3, 2, 4)
    assert.is_true(gr.min(f) >= 2 and gr.max(f) < 4)
  end)

  it("iota and random write each dtype's elements and no others; random's bounds default to the dtype's", function()
    local R = require "support.fuzz_reference"
    for _, dtype in ipairs(gr.dtypes()) do
      if dtype == "bool" then goto next_dtype end     -- no iota, values 0 and 1: dtypes_spec.lua
      local parent = gr.buffer(8, dtype):fill(7)
      local s = parent:slice(3, 3)
      s:iota(1)
      assert.same({ 7, 7, 1, 2, 3, 7, 7, 7 }, parent:totable(), dtype .. " iota")
      s:random(5)
      local t = parent:totable()
      assert.same({ 7, 7, 7, 7, 7 }, { t[1], t[2], t[6], t[7], t[8] }, dtype .. " random")
      local d = assert(R.DTYPES[dtype], dtype .. ": no entry in fuzz_reference's R.DTYPES")
      if d.kind ~= "float" then
        local r = gr.buffer(4096, dtype):random(11)
        local lo, hi = gr.min(r), gr.max(r)
        if d.kind == "int" then
          assert.is_true(lo <= d.min // 2 and hi >= d.max // 2, dtype .. ": " .. lo .. " .. " .. hi)
        else        -- unsigned, in its bits (uint64's max is -1): reaches the bottom and top quarters
          local q = d.max == -1 and 1 << 62 or (d.max + 1) // 4
          assert.is_true(math.ult(lo, q) and not math.ult(hi, 3 * q), dtype .. ": " .. lo .. " .. " .. hi)
        end
        if d.max == 127 or d.max == 255 then
          assert.are.equal(d.min, lo, dtype)          -- 4096 draws of 256 values reach both ends
          assert.are.equal(d.max, hi, dtype)
        end
      end
      ::next_dtype::
    end
  end)

  it("random is reproducible by seed and differs across seeds", function()
    local a = gr.buffer(4097, "float32"):random(42)
    local b = gr.buffer(4097, "float32"):random(42)
    local c = gr.buffer(4097, "float32"):random(43)
    assert.are.equal(a:tobytes(), b:tobytes())
    assert.are_not.equal(a:tobytes(), c:tobytes())
  end)

  it("random gives the same bits on every backend (values recorded on the CPU backend)", function()
    local b = gr.buffer(100003, "int32"):random(1234, -1000, 1000)
    assert.are.equal(-85643, gr.sum(b))
    assert.are.equal(277, b:get(1))
    assert.are.equal(159, b:get(100003))
    local f = gr.buffer(1001, "float32"):random(77)
    assert.are.equal("0.0228211563 0.62347579", string.format("%.9g %.9g", f:get(1), f:get(1001)))
  end)

  -- nvcc fuses a * b + c into one fma unless told not to: the device's float64 draws once differed from
  -- the host's in about half the elements (lo + span * u), and iota's start + i * step likewise
  H.gpu_it("random and iota give the host's bits on the device for every dtype, lo and start not 0", function()
    local n = 100003
    for _, dtype in ipairs(gr.dtypes()) do
      local function both(fill)
        local d, h = gr.buffer(n, dtype), gr.buffer(n, dtype, { where = "host" })
        fill(d)
        fill(h)
        assert.equal(h:tobytes(), d:tobytes(), dtype)
      end
      local float = dtype:find("float") ~= nil
      local fp8 = dtype:find("float8") ~= nil
      if float then
        local lo, hi = fp8 and -300 or -1000, fp8 and 400 or 1000.5
        both(function(b) b:random(1234, lo, hi) end)
        both(function(b) b:random(99, 0.1, 0.7) end)
        both(function(b) b:iota(fp8 and -3.3 or 0.3, fp8 and 1e-4 or 0.1) end)
      elseif dtype == "bool" then
        both(function(b) b:random(1234) end)
      else
        both(function(b) b:random(1234) end)
        both(function(b) b:iota(3, 7) end)
      end
    end
  end)

  it("slices are views that read the right elements", function()
    local b = gr.buffer(100, "int32"):iota(1)
    local s = b:slice(11, 10)
    assert.are.equal(10, #s)
    assert.are.equal(11, s:get(1))
    assert.are.equal(155, gr.sum(s))
    assert.are.equal(91, #b:slice(10))
    assert.are.equal(0, #b:slice(101, 0))
    s:fill(0)                                      -- writes through to the parent
    assert.are.equal(5050 - 155, gr.sum(b))
  end)

  it("unaligned slices reduce correctly for every dtype", function()
    local R = require "support.fuzz_reference"
    for _, dtype in ipairs(gr.dtypes()) do
      local b = gr.buffer(5000, dtype)
      -- bool has no iota, and the FP8 formats' iota would pass their largest values (448, 57344):
      -- random data there, whose sums in float32 are exact (multiples of 2^-16 below 2^12)
      if dtype == "bool" then b:random(9)
      elseif R.DTYPES[dtype].small and R.DTYPES[dtype].fmt.p <= 4 then b:random(9, -1, 1)
      else b:iota(0) end
      for _, off in ipairs({ 1, 2, 3, 5, 17 }) do
        local s = b:slice(off + 1, 3000)
        local want = 0
        for k = off, off + 2999 do want = want + k end
        -- (the 16-bit floats hold the larger ones rounded: their values as read back)
        if dtype == "int8" or dtype == "uint8" or R.DTYPES[dtype].small or dtype == "bool" then
          local vals = s:totable()
          want = 0
          for k = 1, #vals do want = want + ((vals[k] == true and 1) or (vals[k] == false and 0) or vals[k]) end
        end
        assert.are.equal(want, math.tointeger(gr.sum(s)) or gr.sum(s), dtype .. " offset " .. off)
      end
    end
  end)

  it("slices keep their parent's memory alive", function()
    local s
    do
      local parent = gr.buffer(1000, "int64"):iota(1)
      s = parent:slice(1, 10)
      parent:free()                                -- the handle goes; the memory stays for the view
    end
    collectgarbage()
    collectgarbage()
    assert.are.equal(55, gr.sum(s))
  end)

  it("print themselves", function()
    local b = gr.buffer(7, "uint32")
    assert.are.equal("gpureduce.Buffer(uint32, 7, device)", tostring(b))
    b:free()
    assert.are.equal("gpureduce.Buffer(freed)", tostring(b))
  end)

  it("free on :free(), on leaving a <close> scope and on collection; twice is harmless", function()
    local b = gr.buffer(10)
    b:free()
    b:free()
    local escaped
    H.closing(gr.buffer(10), function(c)
      escaped = c
    end)
    assert.are.equal("gpureduce.Buffer(freed)", tostring(escaped))
    for _ = 1, 200 do gr.buffer(100000) end        -- garbage the collector must reclaim
    collectgarbage()
    collectgarbage()
  end)

  it("pinned host buffers work like device buffers", function()
    local h = gr.buffer(100000, "float64", { where = "host" }):iota(1)
    assert.are.equal("host", h:where())
    assert.are.equal(5000050000.0, gr.sum(h))
    assert.are.equal(100000.0, gr.max(h))
  end)
end)
