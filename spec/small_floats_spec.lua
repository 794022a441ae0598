--[[
small_floats_spec.lua -- the element conversions of float16, bfloat16, float8_e4m3 and float8_e5m2
(engine/base/small_floats.h), through the testing hooks gr.debug_float_encode / gr.debug_float_decode,
against a reference written here from the formats' definitions alone.

What it checks
  The reference: a pattern's value from its fields (sign, exponent, mantissa) with exact powers of two;
  a number's pattern from the ordered list of every finite value of the format, with ties going to the
  pattern whose last bit is 0, and the overflow rule that the header states (a value that rounds, with
  the exponent range unbounded, past the largest finite one does not fit: it is the tie between the
  largest finite value and the next one "as if the range continued" that decides). Against it, for all
  65,536 patterns of the 16-bit formats and all 256 of the 8-bit ones:
  - decode, through the double and through float32: the value, -0.0 and the infinities to the bit,
    NaN patterns to a quiet NaN of their sign with the mantissa as payload;
  - encode every finite value back to its pattern (both zeros included), from the double and from
    float32;
  - encode the midpoint of every two neighbours (ties to even), the doubles just below and just above
    it (the next double either side), with both signs; from float32, the same inputs rounded to float32
    first -- where that rounding lands on the midpoint, the answer is the even neighbour: the double
    rounding that narrowing straight from the double avoids;
  - the overflow thresholds exactly, infinities, NaNs of either sign, values below the least subnormal
    and far outside the range.
  A GPU test (pending without a CUDA device) runs the same conversions compiled for the device next to
  CUDA's own (gr.debug_float_device) and compares every pattern and every value above.

Reproducing
  Deterministic: `busted spec/small_floats_spec.lua`; a failure names the format, the input (as a
  hexadecimal float) and both patterns.
]]
local gr = require "gpureduce"
local H = require("support.helpers").bind(it, function(reason) pending(reason) end)

local encode, decode = gr.debug_float_encode, gr.debug_float_decode

-- The formats from their definitions: exponent and mantissa widths, whether the all-ones exponent is
-- infinity and NaNs (IEEE-like) or holds numbers with only S.1111.111 a NaN (float8_e4m3), and the
-- NaN the header makes when narrowing (its choice: the quiet NaN, no payload kept).
local FORMATS = {
  { name = "float16", e = 5, m = 10, ieee = true, nan = 0x7e00,
    known = { max = 65504, min_sub = 2.0 ^ -24, min_normal = 2.0 ^ -14, threshold = 65520 } },
  { name = "bfloat16", e = 8, m = 7, ieee = true, nan = 0x7fc0,
    known = { max = (2 - 2.0 ^ -7) * 2.0 ^ 127, min_sub = 2.0 ^ -133, min_normal = 2.0 ^ -126,
              threshold = (2 - 2.0 ^ -8) * 2.0 ^ 127 } },
  { name = "float8_e4m3", e = 4, m = 3, ieee = false, nan = 0x7f, fp8 = true,
    known = { max = 448, min_sub = 2.0 ^ -9, min_normal = 2.0 ^ -6, threshold = 464 } },
  { name = "float8_e5m2", e = 5, m = 2, ieee = true, nan = 0x7e, fp8 = true,
    known = { max = 57344, min_sub = 2.0 ^ -16, min_normal = 2.0 ^ -14, threshold = 61440 } },
}

-- ---- doubles as bits ---------------------------------------------------------------------------------

local function bits64(x) return (string.unpack("<i8", string.pack("<d", x))) end
local function of_bits64(b) return (string.unpack("<d", string.pack("<i8", b))) end
local function same(a, b) return bits64(a) == bits64(b) end
--- The neighbouring doubles of a positive finite x.
local function next_up(x) return of_bits64(bits64(x) + 1) end
local function next_down(x) return of_bits64(bits64(x) - 1) end
--- x rounded to float32 (a C cast in string.pack), as a double.
local function to_float32(x) return (string.unpack("<f", string.pack("<f", x))) end
local function hex(x) return x ~= x and "nan" or string.format("%a", x) end
local POS_NAN = of_bits64(0x7ff8000000000000)
local NEG_NAN = of_bits64(0x7ff8000000000000 | math.mininteger)

-- ---- the reference -----------------------------------------------------------------------------------

--- The value of pattern p, or nil for a NaN pattern (and its sign bit, its mantissa field).
local function ref_decode(F, p)
  local sign = (p >> (F.e + F.m)) & 1
  local ex, man = (p >> F.m) & ((1 << F.e) - 1), p & ((1 << F.m) - 1)
  local top, bias = (1 << F.e) - 1, (1 << (F.e - 1)) - 1
  local s = sign == 1 and -1.0 or 1.0
  if F.ieee and ex == top then
    if man == 0 then return s * math.huge, sign, man end
    return nil, sign, man
  end
  if not F.ieee and ex == top and man == (1 << F.m) - 1 then return nil, sign, man end
  if ex == 0 then return s * (man * 2.0 ^ (1 - bias - F.m)), sign, man end
  return s * (((1 << F.m) + man) * 2.0 ^ (ex - bias - F.m)), sign, man
end

--- The format's finite values >= 0 in increasing order, each {value, pattern}; checked to be strictly
-- increasing by value (the order comes from sorting the values, not from the patterns).
local function ordered(F)
  if F.order then return F.order end
  local list = {}
  for p = 0, (1 << (F.e + F.m)) - 1 do      -- the patterns with the sign bit clear
    local v = ref_decode(F, p)
    if v and v < math.huge then list[#list + 1] = { v, p } end
  end
  table.sort(list, function(a, b) return a[1] < b[1] end)
  for i = 2, #list do assert(list[i - 1][1] < list[i][1], F.name .. ": two patterns of one value") end
  -- the next value "as if the range continued": the largest plus the top binade's spacing
  local n = #list
  F.next_value = list[n][1] + (list[n][1] - list[n - 1][1])
  F.next_pattern = list[n][2] + 1
  F.order = list
  return list
end

--- Of two neighbours a (below) and b (above), the one x rounds to: the nearer, the even pattern on a tie.
local function nearest(x, a, pa, b, pb)
  local mid = (a + b) / 2                   -- exact: both have a few significant bits
  if x < mid then return pa elseif x > mid then return pb end
  return pa % 2 == 0 and pa or pb
end

--- The pattern of x rounded once to nearest even, or nil where it does not fit.
local function ref_encode(F, x)
  local sign_bit = 1 << (F.e + F.m)
  if x ~= x then return F.nan | (bits64(x) < 0 and sign_bit or 0) end
  local sign = (x < 0 or (x == 0 and 1 / x < 0)) and sign_bit or 0
  local a = math.abs(x)
  local list = ordered(F)
  local n = #list
  if a == math.huge then return F.ieee and (sign | F.next_pattern) or nil end
  if a >= list[n][1] then
    local p = nearest(a, list[n][1], list[n][2], F.next_value, F.next_pattern)
    return p == list[n][2] and (sign | p) or nil
  end
  local lo, hi = 1, n                       -- list[lo] <= a < list[hi]
  while hi - lo > 1 do
    local mid = (lo + hi) // 2
    if list[mid][1] <= a then lo = mid else hi = mid end
  end
  return sign | nearest(a, list[lo][1], list[lo][2], list[hi][1], list[hi][2])
end

-- ---- the hooks, and what they are checked against ----------------------------------------------------

--- encode's pattern, or nil and the message where it raises.
local function try_encode(F, x, from)
  local ok, r = pcall(encode, F.name, x, from)
  if ok then return r end
  return nil, r
end

--- Collects failures; raises with the first few and their count at the end of a test.
local function collector()
  local bad, n = {}, 0
  return function(ok, fmt, ...)
    if not ok then
      n = n + 1
      if #bad < 12 then bad[#bad + 1] = string.format(fmt, ...) end
    end
  end, function()
    assert(n == 0, n .. " failures:\n  " .. table.concat(bad, "\n  "))
  end
end

--- Checks that encoding x (from a double, and from x rounded to float32) agrees with the reference.
local function check_encode(F, x, check)
  for _, from in ipairs({ 64, 32 }) do
    local input = from == 32 and to_float32(x) or x
    local want, got = ref_encode(F, input), try_encode(F, x, from)
    check(want == got, "%s from %d: %s -> %s, expected %s", F.name, from, hex(x),
      got and string.format("0x%x", got) or "no fit", want and string.format("0x%x", want) or "no fit")
  end
end

-- ---- the specs ---------------------------------------------------------------------------------------

describe("small floats #formats", function()
  for _, F in ipairs(FORMATS) do
    local patterns = 1 << (1 + F.e + F.m)
    local sign_bit = 1 << (F.e + F.m)

    it(F.name .. ": the reference has the format's known constants", function()
      local list = ordered(F)
      assert.are.equal(F.known.max, list[#list][1])
      assert.are.equal(F.known.min_sub, list[2][1])
      assert.are.equal(0.0, list[1][1])
      local min_normal = ref_decode(F, 1 << F.m)
      assert.are.equal(F.known.min_normal, min_normal)
      assert.are.equal(F.known.threshold, (list[#list][1] + F.next_value) / 2)
    end)

    it(F.name .. ": decodes all " .. patterns .. " patterns exactly, through the double and float32", function()
      local check, done = collector()
      for p = 0, patterns - 1 do
        local want, sign, man = ref_decode(F, p)
        local d64, d32 = decode(F.name, p), decode(F.name, p, 32)
        if want then
          check(same(d64, want) and same(d32, want), "%s 0x%x: %s and %s, expected %s", F.name, p, hex(d64),
            hex(d32), hex(want))
        else
          -- a quiet NaN of the pattern's sign, its mantissa at the top of the double's
          local nan = (sign << 63) | 0x7ff8000000000000 | (man << (52 - F.m))
          check(bits64(d64) == nan, "%s 0x%x: NaN bits 0x%x, expected 0x%x", F.name, p, bits64(d64), nan)
          check(d32 ~= d32 and (bits64(d32) < 0) == (sign == 1), "%s 0x%x through float32: %s", F.name, p, hex(d32))
        end
      end
      done()
    end)

    it(F.name .. ": encodes every value back to its pattern, zeros and infinities included", function()
      local check, done = collector()
      for p = 0, patterns - 1 do
        local v = ref_decode(F, p)
        if v then
          local e64, e32 = encode(F.name, v), encode(F.name, v, 32)
          check(e64 == p and e32 == p, "%s: %s -> 0x%x / 0x%x, expected 0x%x", F.name, hex(v), e64, e32, p)
        end
      end
      done()
    end)

    it(F.name .. ": rounds every midpoint to even, and the doubles beside it to the nearer neighbour", function()
      local check, done = collector()
      local list = ordered(F)
      local doubled = 0                     -- inputs where rounding to float32 first changes the answer
      for i = 1, #list - 1 do
        local a, pa, b, pb = list[i][1], list[i][2], list[i + 1][1], list[i + 1][2]
        local mid = (a + b) / 2
        local cases = { { mid, pa % 2 == 0 and pa or pb }, { next_down(mid), pa }, { next_up(mid), pb } }
        for _, c in ipairs(cases) do
          for _, s in ipairs({ 1, -1 }) do
            local x, want = s * c[1], c[2] | (s < 0 and sign_bit or 0)
            check(ref_encode(F, x) == want, "%s reference: %s -> 0x%x, expected 0x%x", F.name, hex(x),
              ref_encode(F, x), want)
            check_encode(F, x, check)
            local via32 = try_encode(F, x, 32)
            if via32 ~= want then doubled = doubled + 1 end
          end
        end
      end
      -- just above a midpoint whose lower neighbour is even, float32 lands on the midpoint and rounds
      -- down: half of those cases
      check(doubled > 0, "%s: no input rounds differently through float32", F.name)
      done()
    end)

    it(F.name .. ": the overflow threshold, exactly", function()
      local list = ordered(F)
      local largest, lp = list[#list][1], list[#list][2]
      local t = F.known.threshold
      if F.ieee then
        -- the tie between the largest (odd pattern) and the next goes up: past the range
        assert.is_nil(try_encode(F, t))
        assert.is_nil(try_encode(F, -t))
      else
        -- float8_e4m3: the largest, 448, is even (S.1111.110): the tie at 464 rounds down to it
        assert.are.equal(lp, encode(F.name, t))
        assert.are.equal(sign_bit | lp, encode(F.name, -t))
        assert.is_nil(try_encode(F, next_up(t)))
        assert.is_nil(try_encode(F, -next_up(t)))
      end
      assert.are.equal(lp, encode(F.name, next_down(t)))
      assert.are.equal(lp, encode(F.name, largest))
      H.expect_error(" does not fit in " .. F.name, encode, F.name, 2 * t)
      assert.is_nil(try_encode(F, 1e300))
      assert.is_nil(try_encode(F, -1e300))
      if F.name == "float16" then
        assert.are.equal(0x7bff, encode(F.name, 65519))      -- DESIGN.md: 65519 stores 65504 ...
        H.expect_error("x: 65520.0 does not fit in float16", encode, F.name, 65520)   -- ... 65520 raises
      elseif F.name == "float8_e4m3" then
        assert.are.equal(0x7e, encode(F.name, 449))          -- 449 stores 448
        assert.are.equal(0x7e, encode(F.name, 464))
        H.expect_error("x: 464.00000000000006 does not fit in float8_e4m3", encode, F.name, next_up(464))
        assert.is_nil(try_encode(F, 480))
      end
    end)

    it(F.name .. ": infinities, NaNs of either sign, zeros and what lies below the least subnormal", function()
      local inf = F.ieee and ((1 << F.e) - 1) << F.m or nil
      for _, from in ipairs({ 64, 32 }) do
        if F.ieee then
          assert.are.equal(inf, encode(F.name, math.huge, from))
          assert.are.equal(sign_bit | inf, encode(F.name, -math.huge, from))
        else
          H.expect_error("x: inf does not fit in " .. F.name, encode, F.name, math.huge, from)
          H.expect_error("x: -inf does not fit in " .. F.name, encode, F.name, -math.huge, from)
        end
        assert.are.equal(F.nan, encode(F.name, POS_NAN, from))
        assert.are.equal(sign_bit | F.nan, encode(F.name, NEG_NAN, from))
        assert.are.equal(0, encode(F.name, 0.0, from))
        assert.are.equal(sign_bit, encode(F.name, -0.0, from))
        -- half the least subnormal is a tie with zero (even): zero; anything above it, the subnormal
        local half = F.known.min_sub / 2
        assert.are.equal(0, encode(F.name, half, from))
        assert.are.equal(sign_bit, encode(F.name, -half, from))
        for _, tiny in ipairs({ 1e-300, 2.0 ^ -1074, 2.0 ^ -1022, F.known.min_sub / 4 }) do
          assert.are.equal(0, encode(F.name, tiny, from))
          assert.are.equal(sign_bit, encode(F.name, -tiny, from))
        end
      end
      assert.are.equal(1, encode(F.name, next_up(F.known.min_sub / 2)))
      -- the subnormal boundary: the largest subnormal, the least normal, and the tie between them
      local min_normal = F.known.min_normal
      local max_sub = min_normal - F.known.min_sub
      assert.are.equal((1 << F.m) - 1, encode(F.name, max_sub))
      assert.are.equal(1 << F.m, encode(F.name, min_normal))
      assert.are.equal(1 << F.m, encode(F.name, (max_sub + min_normal) / 2))   -- odd below: up
      assert.are.equal((1 << F.m) - 1, encode(F.name, next_down((max_sub + min_normal) / 2)))
    end)
  end

  it("narrows straight from the double: no double rounding through float32", function()
    -- 1 + 2^-11 is the float16 midpoint of 1 and 1 + 2^-10; 2^-40 above it, float32 drops the 2^-40
    -- and the tie goes to the even 1.0, where the double says 1 + 2^-10
    local x = 1 + 2.0 ^ -11 + 2.0 ^ -40
    assert.are.equal(0x3c01, encode("float16", x))
    assert.are.equal(0x3c00, encode("float16", x, 32))
    -- the same in bfloat16 (1 + 2^-8 the midpoint), float8_e4m3 (1 + 2^-4), float8_e5m2 (1 + 2^-3)
    assert.are.equal(0x3f81, encode("bfloat16", 1 + 2.0 ^ -8 + 2.0 ^ -40))
    assert.are.equal(0x3f80, encode("bfloat16", 1 + 2.0 ^ -8 + 2.0 ^ -40, 32))
    assert.are.equal(0x39, encode("float8_e4m3", 1 + 2.0 ^ -4 + 2.0 ^ -40))
    assert.are.equal(0x38, encode("float8_e4m3", 1 + 2.0 ^ -4 + 2.0 ^ -40, 32))
    assert.are.equal(0x3d, encode("float8_e5m2", 1 + 2.0 ^ -3 + 2.0 ^ -40))
    assert.are.equal(0x3c, encode("float8_e5m2", 1 + 2.0 ^ -3 + 2.0 ^ -40, 32))
    -- near the top of float16's range: 65520 - 2^-30 fits (65504), through float32 it is 65520: no fit
    assert.are.equal(0x7bff, encode("float16", 65520 - 2.0 ^ -30))
    H.expect_error("does not fit in float16", encode, "float16", 65520 - 2.0 ^ -30, 32)
  end)

  it("names what it refuses", function()
    H.expect_error("format: unknown format 'half' (float16, bfloat16, float8_e4m3, float8_e5m2)", encode, "half", 1)
    H.expect_error("bits: 0x100 is not a pattern of float8_e5m2", decode, "float8_e5m2", 256)
    H.expect_error("from: expected 32 or 64, got 16", encode, "float16", 1, 16)
    H.expect_error("to: expected 32 or 64, got 8", decode, "float16", 1, 8)
  end)

  -- ---- the device ------------------------------------------------------------------------------------

  --- Every input the host tests above use, once: the values, midpoints and their neighbours of every
  -- format, with both signs, the thresholds, infinities, NaNs and the double-rounding cases.
  local function device_inputs()
    local xs = { math.huge, -math.huge, POS_NAN, NEG_NAN, 0.0, -0.0, 1e300, -1e300, 1e-300, 2.0 ^ -1074,
      1 + 2.0 ^ -11 + 2.0 ^ -40, 65520 - 2.0 ^ -30, 449, 464, next_up(464) }
    for _, F in ipairs(FORMATS) do
      local list = ordered(F)
      xs[#xs + 1] = F.known.threshold
      xs[#xs + 1] = next_down(F.known.threshold)
      xs[#xs + 1] = next_up(F.known.threshold)
      for i = 1, #list do
        local a = list[i][1]
        for _, s in ipairs({ 1, -1 }) do
          xs[#xs + 1] = s * a
          if i < #list then
            local mid = (a + list[i + 1][1]) / 2
            xs[#xs + 1] = s * mid
            xs[#xs + 1] = s * next_up(mid)
            xs[#xs + 1] = s * next_down(mid)
          end
        end
      end
    end
    return xs
  end

  --- The 4 words of element i (1-based) of a uint64 table.
  local function words(t, i) return t[4 * i - 3], t[4 * i - 2], t[4 * i - 1], t[4 * i] end
  local NOFIT = 0x10000

  H.gpu_it("the device computes the host's bits for every pattern and value, and agrees with CUDA's", function()
    local xs = device_inputs()
    local packed = {}
    for i, x in ipairs(xs) do packed[i] = string.pack("<d", x) end
    local values = gr.buffer(table.concat(packed), "float64")
    for _, F in ipairs(FORMATS) do
      local check, done = collector()
      local mask = (1 << (1 + F.e + F.m)) - 1
      local sign_bit = 1 << (F.e + F.m)
      local largest = ordered(F)[#F.order][2]
      local function is_nan(p) return ref_decode(F, p & mask) == nil end
      -- widening: every pattern
      local n = mask + 1
      local pats, out = gr.buffer(n, "uint32"):iota(0), gr.buffer(4 * n, "uint64")
      gr.debug_float_device(F.name, pats, out)
      local w = out:totable()
      for p = 0, n - 1 do
        local ours32, theirs32, ours64, theirs64 = words(w, p + 1)
        local host64 = bits64(decode(F.name, p))
        local want32 = (string.unpack("<I4", string.pack("<f", decode(F.name, p))))
        local nan = is_nan(p)
        if nan then     -- the host's float32 NaN, spelled as the header makes it
          local _, sign, man = ref_decode(F, p)
          want32 = (sign << 31) | 0x7fc00000 | (man << (23 - F.m))
        end
        check(ours64 == host64 and ours32 == want32, "%s 0x%x widened on the device: 0x%x 0x%x, host 0x%x 0x%x",
          F.name, p, ours32, ours64, want32, host64)
        if nan then
          check((theirs32 & 0x7fffffff) > 0x7f800000, "%s 0x%x: CUDA's widening is not NaN (0x%x)", F.name, p,
            theirs32)
        else
          check(theirs32 == ours32 and theirs64 == ours64, "%s 0x%x: CUDA widens to 0x%x, ours 0x%x", F.name, p,
            theirs32, ours32)
        end
      end
      -- narrowing: every value
      out = gr.buffer(4 * #xs, "uint64")
      gr.debug_float_device(F.name, values, out)
      w = out:totable()
      for i, x in ipairs(xs) do
        local ours_d, cuda_d, ours_f, cuda_f = words(w, i)
        local host_d, host_f = try_encode(F, x), try_encode(F, x, 32)
        local x32 = to_float32(x)
        -- where it does not fit, the low bits are the infinity, or float8_e4m3's NaN, of the value's sign
        local function expected(host, v)
          if host then return host end
          local s = (v < 0) and sign_bit or 0
          return NOFIT | s | (F.ieee and F.next_pattern or F.nan)
        end
        check(ours_d == expected(host_d, x), "%s %s from the double on the device: 0x%x, host 0x%x", F.name, hex(x),
          ours_d, expected(host_d, x))
        -- the device's float32 rounding of a NaN may not keep its sign: NaN-ness only there
        if x ~= x then
          check(is_nan(ours_f) and ours_f & NOFIT == 0, "%s NaN from float32 on the device: 0x%x", F.name, ours_f)
        else
          check(ours_f == expected(host_f, x32), "%s %s from float32 on the device: 0x%x, host 0x%x", F.name,
            hex(x), ours_f, expected(host_f, x32))
        end
        -- CUDA's: the same pattern, where it fits and is a number; a NaN for a NaN. From the double the
        -- FP8 conversions do not saturate (an overflow is ours' low bits); from float32 they saturate.
        local low_d, low_f = ours_d & mask, ours_f & mask
        if x ~= x then
          check(is_nan(cuda_d) and is_nan(cuda_f), "%s NaN: CUDA gives 0x%x, 0x%x", F.name, cuda_d, cuda_f)
        else
          check(cuda_d == low_d, "%s %s: CUDA from the double 0x%x, ours 0x%x", F.name, hex(x), cuda_d, low_d)
          local want_f = low_f
          if F.fp8 and (ours_f & NOFIT ~= 0 or x32 == math.huge or x32 == -math.huge) then
            want_f = (x32 < 0 and sign_bit or 0) | largest           -- __NV_SATFINITE
          end
          check(cuda_f == want_f, "%s %s: CUDA from float32 0x%x, expected 0x%x", F.name, hex(x), cuda_f, want_f)
        end
      end
      done()
    end
  end)
end)

-- ---- the FP8 formats as dtypes: the element conversions of the buffers ------------------------------

describe("small floats #formats as dtypes", function()
  for _, F in ipairs(FORMATS) do
    if F.fp8 then
      it(F.name .. ": every one of the 256 patterns read from bytes and stored back from its value", function()
        local check, done = collector()
        local bytes = {}
        for p = 0, 255 do bytes[p + 1] = string.char(p) end
        local values = gr.buffer(table.concat(bytes), F.name):totable()
        for p = 0, 255 do
          local want, sign = ref_decode(F, p)
          local got = values[p + 1]
          if want then
            check(same(got, want), "%s 0x%02x read as %s, expected %s", F.name, p, hex(got), hex(want))
            local back = gr.buffer({ got }, F.name):tobytes():byte()
            check(back == p, "%s 0x%02x stored back as 0x%02x", F.name, p, back)
          else
            -- a NaN: read as a NaN of its sign, stored back as the format's quiet NaN of that sign
            check(got ~= got, "%s 0x%02x read as %s, expected NaN", F.name, p, hex(got))
            local back = gr.buffer({ got }, F.name):tobytes():byte()
            check(back == (sign << 7 | F.nan), "%s NaN 0x%02x stored back as 0x%02x", F.name, p, back)
          end
        end
        done()
      end)
    end
  end

  H.gpu_it("the FP8 device element widens every pattern as the host does (min, max, sum of each alone)", function()
    for _, F in ipairs(FORMATS) do
      if F.fp8 then
        local check, done = collector()
        for p = 0, 255 do
          local h = gr.buffer(string.char(p), F.name, { where = "host" })
          local d = gr.buffer(string.char(p), F.name)
          for _, op in ipairs({ "min", "max", "sum", "absmax", "count" }) do
            local want, got = gr.reduce(h, { op = op }), gr.reduce(d, { op = op, variant = "warp_shuffle" })
            check(same(want, got) or (want ~= want and got ~= got), "%s 0x%02x %s: device %s, host %s", F.name, p,
              op, hex(got), hex(want))
          end
        end
        done()
      end
    end
  end)
end)
