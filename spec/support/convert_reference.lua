--- The reference of b:astype and gr.copy between dtypes (spec/convert_spec.lua), written from the rules of
-- docs/api.md "Conversions" alone, without the engine: every dtype described by its own facts here, a
-- value rounded to nearest even with integer arithmetic on its exact bits (a double's, or a 64-bit
-- integer's, never through a double first), truncation toward zero, the ranges.
--
-- A value is {kind = "int" | "uint" | "float" | "bool", v = ...}: a Lua integer (uint: its 64 bits, so
-- 2^63 and above are negative), a Lua float, or a boolean -- what b:totable() gives for the dtype.
local M = {}

-- The dtypes, by name: an integer's bits and sign; a float format's precision p (bits of the
-- significand, the leading one included), least normal exponent, largest finite value and whether it
-- has infinities. A dtype this table does not know fails the spec (M.info).
local DTYPES = {
  int8 = { kind = "int", bits = 8 }, uint8 = { kind = "uint", bits = 8 },
  int16 = { kind = "int", bits = 16 }, uint16 = { kind = "uint", bits = 16 },
  int32 = { kind = "int", bits = 32 }, uint32 = { kind = "uint", bits = 32 },
  int64 = { kind = "int", bits = 64 }, uint64 = { kind = "uint", bits = 64 },
  bool = { kind = "bool", bits = 8 },
  float64 = { kind = "float", p = 53, emin = -1022, max = 0x1.fffffffffffffp1023, inf = true, bytes = 8 },
  float32 = { kind = "float", p = 24, emin = -126, max = 0x1.fffffep127, inf = true, bytes = 4 },
  float16 = { kind = "float", p = 11, emin = -14, max = 65504.0, inf = true, bytes = 2 },
  bfloat16 = { kind = "float", p = 8, emin = -126, max = 0x1.fep127, inf = true, bytes = 2 },
  float8_e4m3 = { kind = "float", p = 4, emin = -6, max = 448.0, inf = false, bytes = 1 },
  float8_e5m2 = { kind = "float", p = 3, emin = -14, max = 57344.0, inf = true, bytes = 1 },
}

function M.info(name)
  local d = DTYPES[name]
  assert(d, "convert_reference.lua has no facts of dtype " .. name .. ": add them")
  d.name = name
  return d
end

-- ---- doubles as bits ------------------------------------------------------------------------------------

function M.bits(x) return (string.unpack("<i8", string.pack("<d", x))) end
local function of_bits(b) return (string.unpack("<d", string.pack("<i8", b))) end
function M.is_nan(x) return x ~= x end
function M.negative(x) return M.bits(x) < 0 end      -- the sign bit, NaN and -0.0 included

M.NAN = of_bits(0x7ff8000000000000)
M.NEG_NAN = of_bits(math.mininteger | 0x7ff8000000000000)

--- 2^k exactly, for any k a double reaches (-1074 .. 1023).
local function pow2(k)
  if k >= -1022 then return of_bits((k + 1023) << 52) end
  return of_bits(1 << (k + 1074))                      -- a subnormal
end

--- The bit length of a non-negative integer below 2^63, or of 64 bits read as unsigned.
local function bitlen(m)
  if m < 0 then return 64 end
  local n = 0
  while m > 0 do m, n = m >> 1, n + 1 end
  return n
end

--- m * 2^e (m an unsigned 64-bit magnitude, e any exponent) rounded to nearest even into the format f,
-- with the exponent range unbounded above (IEEE's overflow): the double of the result's magnitude, or nil
-- where it passes the largest finite value.
local function round_magnitude(m, e, f)
  if m == 0 then return 0.0 end
  local top = bitlen(m) - 1 + e                       -- the value's binade: 2^top <= value < 2^(top+1)
  local q_exp = math.max(top, f.emin) - (f.p - 1)      -- the exponent of the result's last place
  local q
  if e >= q_exp then
    q = m                                              -- exact, m * 2^(e - q_exp) below: keep e
    q_exp = e
  else
    local s = q_exp - e
    if s > 64 then return 0.0 end                      -- below half the least subnormal
    local rest, half
    if s == 64 then
      q, rest, half = 0, m, math.mininteger            -- half = 2^63 as unsigned bits
    else
      q = m >> s
      rest = m & ((1 << s) - 1)
      half = 1 << (s - 1)
    end
    if math.ult(half, rest) or (rest == half and q & 1 == 1) then q = q + 1 end
  end
  -- q < 2^54 here (a double's significand, or a narrower rounding of one); exact products
  local v = q * pow2(math.max(math.min(q_exp, 1023), -1074))
  if q_exp > 1023 then return nil end                   -- only the exact branch of a huge m gets here
  if v > f.max then return nil end
  return v
end

--- The magnitude and exponent of a finite double: |x| = m * 2^e.
local function split(x)
  local b = M.bits(x) & 0x7fffffffffffffff
  local ex, frac = b >> 52, b & 0xfffffffffffff
  if ex == 0 then return frac, -1074 end
  return frac | (1 << 52), ex - 1075
end

--- value (see the top) into float format f: ok and the Lua float, or nil.
local function to_float(val, f)
  if val.kind == "bool" then return val.v and 1.0 or 0.0 end
  if val.kind == "int" or val.kind == "uint" then
    local v = val.v
    local neg = val.kind == "int" and v < 0
    local m = neg and -v or v                          -- int64's most negative: its bits are 2^63, unsigned
    local r = round_magnitude(m, 0, f)
    if r == nil then return nil end
    return neg and -r or r
  end
  local x = val.v
  if x ~= x then return M.negative(x) and M.NEG_NAN or M.NAN end
  if x == math.huge or x == -math.huge then
    if not f.inf then return nil end
    return x
  end
  local m, e = split(x)
  local r = round_magnitude(m, e, f)
  if r == nil then return nil end
  return M.negative(x) and -r or r
end

--- value into an integer of `bits`, signed or not: the Lua integer (uint64: its bits), or nil.
local function to_int(val, bits, signed)
  local lo_s, hi_s = -(1 << (bits - 1)), (1 << (bits - 1)) - 1        -- bits = 64: wraps to the ends
  if bits == 64 then lo_s, hi_s = math.mininteger, math.maxinteger end
  if val.kind == "bool" then return val.v and 1 or 0 end
  if val.kind == "int" or val.kind == "uint" then
    local v = val.v
    local big = val.kind == "uint" and v < 0            -- 2^63 or more
    if signed then
      if big or v < lo_s or v > hi_s then return nil end
      return v
    end
    if big then return bits == 64 and v or nil end
    if v < 0 then return nil end
    if bits < 64 and v > (1 << bits) - 1 then return nil end
    return v
  end
  local x = val.v
  if x ~= x or x == math.huge or x == -math.huge then return nil end
  local t = x >= 0 and math.floor(x) or math.ceil(x)  -- toward zero (exact for doubles)
  if signed then
    if not (t >= -2.0 ^ (bits - 1) and t < 2.0 ^ (bits - 1)) then return nil end
    return math.tointeger(t)
  end
  if not (t >= 0 and t < 2.0 ^ bits) then return nil end
  if t >= 2.0 ^ 63 then return math.tointeger(t - 2.0 ^ 64) end       -- uint64's bits
  return math.tointeger(t)
end

--- The value val converted to dtype `to` (a name): ok, the expected Lua value; or false where it does not fit.
function M.convert(val, to)
  local d = M.info(to)
  if d.kind == "bool" then
    local nz
    if val.kind == "bool" then nz = val.v
    elseif val.kind == "float" then nz = val.v ~= 0 or val.v ~= val.v
    else nz = val.v ~= 0 end
    return true, nz
  end
  local r
  if d.kind == "float" then r = to_float(val, d)
  else r = to_int(val, d.bits, d.kind == "int") end
  if r == nil then return false end
  return true, r
end

--- The value of a Lua element of dtype `name` (what b:totable() gave).
function M.value(name, v)
  local d = M.info(name)
  if d.kind == "float" then return { kind = "float", v = math.type(v) == "float" and v or v + 0.0 } end  -- (-0.0 + 0.0 is 0.0)
  if d.kind == "bool" then return { kind = "bool", v = v } end
  return { kind = d.kind, v = v }
end

--- Whether two Lua elements are the same: integers and booleans equal, floats by their bits (-0.0 is not
-- 0.0); NaNs by NaN-ness and sign (the quiet NaN of the source's sign: the payload is not kept).
function M.same(a, b)
  if math.type(a) == "float" and math.type(b) == "float" then
    if a ~= a or b ~= b then return a ~= a and b ~= b and M.negative(a) == M.negative(b) end
    return M.bits(a) == M.bits(b)
  end
  return math.type(a) == math.type(b) and a == b or (type(a) == "boolean" and a == b)
end

-- ---- values worth converting ------------------------------------------------------------------------------

--- Doubles that reveal bugs: NaN, infinities, zeros, truncation, the integer edges, every float format's
-- largest value, overflow thresholds and the values on either side, its subnormals, ties for rounding.
local function float_candidates()
  local c = { M.NAN, M.NEG_NAN, math.huge, -math.huge, 0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, -1.5, 2.5,
    -2.5, 3.75, -3.75, 127.9, 127.0, 128.0, -128.0, -128.9, -129.0, 255.9, 256.0, -1.0 + 2.0 ^ -20, 32767.5,
    32768.0, -32768.5, -32769.0, 65535.9, 65536.0, 2.0 ^ 31 - 0.5, 2.0 ^ 31, -2.0 ^ 31, -2.0 ^ 31 - 1,
    2.0 ^ 32 - 1, 2.0 ^ 32, 2.0 ^ 53, 2.0 ^ 53 + 2, 2.0 ^ 63, -2.0 ^ 63, 2.0 ^ 63 - 1024, 2.0 ^ 64,
    2.0 ^ 64 - 2048, 1e30, 1e300, -1e300,
    -- float8_e4m3: 448 its largest, 464 the last value that rounds to it, 480 beyond
    240.0, 448.0, 449.0, 464.0, 465.0, 480.0, -464.0, -480.0,
    -- float8_e5m2: 57344 its largest, 61440 the first that does not fit
    57344.0, 61439.0, 61440.0, -61440.0,
    -- float16: 65504, 65519 (stores 65504), 65520 (does not fit)
    65504.0, 65519.0, 65519.99, 65520.0, -65520.0, 65536.0,
    -- bfloat16 and float32 at the top of the range
    0x1.fep127, 0x1.feffffp127, 0x1.ffp127, 0x1.fffffep127, 0x1.fffffefp127, 0x1.ffffffp127, -0x1.ffffffp127,
    0x1.fffffffffffffp1023,
    -- subnormals of each format, their halves (ties to even: zero) and just above
    2.0 ^ -24, 2.0 ^ -25, 2.0 ^ -25 + 2.0 ^ -40, 3 * 2.0 ^ -26, -2.0 ^ -24, 2.0 ^ -14, 2.0 ^ -15,
    2.0 ^ -16, 2.0 ^ -17, 3 * 2.0 ^ -18, 2.0 ^ -9, 2.0 ^ -10, 3 * 2.0 ^ -11, 2.0 ^ -6, 2.0 ^ -7,
    2.0 ^ -126, 2.0 ^ -127, 2.0 ^ -133, 2.0 ^ -134, 3 * 2.0 ^ -135, 2.0 ^ -149, 2.0 ^ -150, 3 * 2.0 ^ -151,
    1e-40, -1e-40, 2.0 ^ -1074, -2.0 ^ -1074, 1e-310,
    -- ties and near-ties: float16 (last place 2^-10 at 1), bfloat16 (2^-7), float32 (2^-23), FP8
    1 + 2.0 ^ -11, 1 + 3 * 2.0 ^ -11, 1 + 2.0 ^ -11 + 2.0 ^ -40, 1 + 2.0 ^ -8, 1 + 3 * 2.0 ^ -8,
    -(1 + 3 * 2.0 ^ -8), 1 + 2.0 ^ -24, 1 + 3 * 2.0 ^ -24, 1 + 2.0 ^ -24 + 2.0 ^ -52, 1 + 2.0 ^ -4,
    1 + 3 * 2.0 ^ -4, 1 + 2.0 ^ -3, 1 + 3 * 2.0 ^ -3, 2049.0, 2051.0, 16777217.0, 16777219.0, -16777217.0,
  }
  return c
end

--- Integers that reveal bugs, as {kind, v}: each width's edges, around 2^24, 2^53 and 2^63 (ties for
-- float32: 2^60 + 2^36 between two neighbours, and one more; float64: 2^53 + 1), below zero.
local function integer_candidates()
  local ints = { 0, 1, -1, 2, 100, -100, 127, 128, -128, -129, 255, 256, 448, 449, 464, 465, 480, 32767, 32768,
    -32768, -32769, 57344, 61439, 61440, 65504, 65519, 65520, 65535, 65536, 2147483647, -2147483648,
    -2147483649, 4294967295, 4294967296, 16777217, 16777219, -16777217, (1 << 53) - 1, 1 << 53,
    (1 << 53) + 1, -(1 << 53) - 1, (1 << 53) + 3, (1 << 60) + (1 << 36), (1 << 60) + (1 << 36) + 1,
    (1 << 60) + 3 * (1 << 36), (1 << 62) + (1 << 38), (1 << 60) + (1 << 52) + 1, (1 << 60) + (1 << 52),
    math.maxinteger, math.maxinteger - 1, math.mininteger, math.mininteger + 1, -(1 << 62) - (1 << 38) - 1 }
  local c = {}
  for _, v in ipairs(ints) do c[#c + 1] = { kind = "int", v = v } end
  -- unsigned beyond 2^63 (bits): 2^63, 2^63 + 2^39 (a float32 tie), + 1, 2^64 - 1, 2^64 - 2^39
  for _, v in ipairs({ math.mininteger, math.mininteger + (1 << 39), math.mininteger + (1 << 39) + 1, -1,
    -(1 << 39), -(1 << 40) - (1 << 39) }) do
    c[#c + 1] = { kind = "uint", v = v }
  end
  return c
end

--- The distinct values dtype `name` holds among the candidates, in order: what a buffer of it is made of.
-- A candidate is taken where it converts into the dtype (so a float is rounded into the format first).
function M.values_of(name)
  local out, seen = {}, {}
  local function add(v)
    local key = math.type(v) == "float" and ("f" .. M.bits(v)) or tostring(v)
    if not seen[key] then
      seen[key] = true
      out[#out + 1] = v
    end
  end
  local d = M.info(name)
  if d.kind == "bool" then return { false, true } end
  for _, x in ipairs(float_candidates()) do
    local ok, v = M.convert({ kind = "float", v = x }, name)
    if ok then add(v) end
  end
  for _, iv in ipairs(integer_candidates()) do
    local ok, v = M.convert(iv, name)
    if ok then add(v) end
  end
  return out
end

return M
