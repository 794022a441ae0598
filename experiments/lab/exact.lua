--- Exact sums in Lua integers, independent of the engine: the accuracy lab's reference (and the specs',
-- through spec/support/exact_reference.lua).
--
-- An accumulator keeps one Lua integer per power of two: the bucket of key e + OFF holds a multiple of
-- 2^e. A float adds its integer significand to the bucket of its last bit (a float64 in two pieces of
-- 26 and 27 bits, a square in pieces of at most 30), so nothing is ever rounded, and the order of the
-- additions cannot matter. A bucket takes at least 2^32 pieces before it could overflow (M.MAX_ADDS
-- elements).
-- Rounding reads the buckets once: carries propagated bit by bit into a magnitude of 24-bit digits,
-- divided by small integers if asked (a mean, a variance), then rounded to nearest, ties to even, into a
-- format of p bits whose smallest subnormal is 2^emin.
--
-- Range: keys cover 2^-2300 .. 2^2400, enough for the squares of float64 subnormals, n times a sum of
-- squares of the largest float64 values, and the square of a sum of them.
local M = {}

local OFF, KEYS = 2301, 4700   -- the key of 2^e is e + OFF
local CH, CHMASK = 26, (1 << 26) - 1
local DB, DBASE, DMASK = 24, 1 << 24, (1 << 24) - 1
M.MAX_ADDS = 1 << 32

local spack, sunpack = string.pack, string.unpack

--- The formats results come in: p bits of significand, smallest subnormal 2^emin, largest exponent emax.
M.FORMATS = {
  float32 = { p = 24, emin = -149, emax = 127 },
  float64 = { p = 53, emin = -1074, emax = 1023 },
}

local Acc = {}
Acc.__index = Acc

-- KEYS zeros in one table constructor (sized once, no rehash as it fills: the specs and the segments lab
-- make thousands of accumulators)
local zeros = load("return {" .. ("0,"):rep(KEYS) .. "}")

--- A new accumulator holding 0.
function M.new()
  return setmetatable({ b = zeros(), nan = false, pinf = false, ninf = false }, Acc)
end

--- Adds k * 2^e (k any Lua integer above math.mininteger), in pieces of 26 bits.
function Acc:add_int(k, e)
  local b, key = self.b, e + OFF
  if key < 1 or key + 3 * CH > KEYS then error("exact: 2^" .. e .. " is outside the accumulator's range", 2) end
  self.digits_cache = nil
  if k < 0 then
    k = -k
    while k ~= 0 do
      b[key] = b[key] - (k & CHMASK)
      k, key = k >> CH, key + CH
    end
  else
    while k ~= 0 do
      b[key] = b[key] + (k & CHMASK)
      k, key = k >> CH, key + CH
    end
  end
end

--- The parts of a float64: negative, significand (an integer below 2^53), exponent of its last bit;
-- or nil and the value when it is not finite.
local function parts(x)
  local w = sunpack("<i8", spack("<d", x))
  local e, m = (w >> 52) & 0x7ff, w & 0xfffffffffffff
  if e == 0x7ff then return nil, x end
  if e == 0 then e = 1 else m = m | 0x10000000000000 end
  return w < 0, m, e - 1075
end
M.parts = parts

function Acc:add_special(x)
  if x ~= x then self.nan = true elseif x > 0 then self.pinf = true else self.ninf = true end
  self.digits_cache = nil
end

--- Adds c * x for a float x (any double) and an integer c (|c| < 2^62, default 1).
function Acc:add(x, c)
  c = c or 1
  local neg, m, e = parts(x)
  if neg == nil then
    if c ~= 0 then self:add_special(c < 0 and -m or m) end
    return
  end
  if c < 0 then neg, c = not neg, -c end
  local s = neg and -1 or 1
  local lo, hi = m & DMASK, m >> DB       -- 24 + 29 bits
  while c ~= 0 do
    local cd = c & DMASK
    self:add_int(s * lo * cd, e)
    self:add_int(s * hi * cd, e + DB)
    c, e = c >> DB, e + DB
  end
end

--- Adds c * x * x, exactly (c an integer as in add).
function Acc:add_square(x, c)
  c = c or 1
  local neg, m, e = parts(x)
  if neg == nil then
    if c ~= 0 then self:add_special(m ~= m and m or c < 0 and -math.huge or math.huge) end
    return
  end
  local s = 1
  if c < 0 then s, c = -1, -c end
  local h, l = m >> 26, m & CHMASK        -- m = h 2^26 + l: h < 2^27, l < 2^26
  local hh, hl, ll, sh = h * h, 2 * h * l, l * l, 0   -- each below 2^55
  while c ~= 0 do
    -- times a 24-bit digit of c: each product split in two to stay below 2^63
    local cd = s * (c & DMASK)
    self:add_int((hh & DMASK) * cd, 2 * e + 52 + sh)
    self:add_int((hh >> DB) * cd, 2 * e + 52 + DB + sh)
    self:add_int((hl & DMASK) * cd, 2 * e + 26 + sh)
    self:add_int((hl >> DB) * cd, 2 * e + 26 + DB + sh)
    self:add_int((ll & DMASK) * cd, 2 * e + sh)
    self:add_int((ll >> DB) * cd, 2 * e + DB + sh)
    c, sh = c >> DB, sh + DB
  end
end

--- Reading a buffer's bytes WIDE elements at a time: one string.unpack call per WIDE elements instead
-- of one each, which is most of the cost of a loop over the bytes in Lua. next_words(w, s, pos, letter,
-- size, last) fills w[1 .. count] from position pos (last: the position of the last whole element) and
-- returns count and the next position; count is 0 at the end.
local WIDE = 16
local wide_formats = {}

local function next_words(w, s, pos, letter, size, last)
  if pos + (WIDE - 1) * size <= last then
    local fmt = wide_formats[letter]
    if not fmt then
      fmt = "<" .. string.rep(letter, WIDE)
      wide_formats[letter] = fmt
    end
    w[1], w[2], w[3], w[4], w[5], w[6], w[7], w[8], w[9], w[10], w[11], w[12], w[13], w[14], w[15], w[16] =
      sunpack(fmt, s, pos)
    return WIDE, pos + WIDE * size
  end
  local count = 0
  while pos <= last do
    count = count + 1
    w[count] = sunpack("<" .. letter, s, pos)
    pos = pos + size
  end
  return count, pos
end
M.next_words = next_words

-- the value of a significand's unit for each biased exponent (subnormals: that of exponent 1)
local POW32, POW64 = {}, {}
for e = 0, 254 do POW32[e] = 2.0 ^ (math.max(e, 1) - 150) end
for e = 0, 2046 do POW64[e] = 2.0 ^ (math.max(e, 1) - 1075) end

--- Adds every element of a little-endian float32 or float64 string (the bytes of a buffer); with
-- `squares`, their squares instead; with `absolute`, their absolute values (asum: the sign ignored, -inf
-- added as +inf). Returns the sum of the magnitudes of what was added, in doubles (for a condition
-- number: a sum of positive terms, relative error below n 2^-53). The loops are written out per case:
-- this is where the lab spends its time.
function Acc:add_bytes(s, dtype, squares, absolute)
  if dtype ~= "float32" and dtype ~= "float64" then
    error("exact: add_bytes takes float32 or float64, not " .. tostring(dtype), 2)
  end
  local b, absum, words = self.b, 0.0, {}
  self.digits_cache = nil
  if dtype == "float32" then
    -- a float32 is m 2^(e - 150), m below 2^24: one piece; its square m^2 below 2^48: two
    local pow = POW32
    local K, K2 = OFF - 150, OFF - 300
    local count, pos, last = 0, 1, #s - 3
    repeat
      count, pos = next_words(words, s, pos, "I4", 4, last)
      for j = 1, count do
        local w = words[j]
        local e, m = (w >> 23) & 0xff, w & 0x7fffff
        if e == 255 then
          local x = sunpack("<f", spack("<I4", w))
          if squares then self:add_square(x) else self:add_special(absolute and math.abs(x) or x) end
        else
          if e == 0 then e = 1 else m = m | 0x800000 end
          local x = m * pow[e]
          if squares then
            absum = absum + x * x
            local m2, key = m * m, 2 * e + K2
            b[key], b[key + DB] = b[key] + (m2 & DMASK), b[key + DB] + (m2 >> DB)
          else
            absum = absum + x
            local key = e + K
            if w >= 0x80000000 and not absolute then b[key] = b[key] - m else b[key] = b[key] + m end
          end
        end
      end
    until count == 0
    self.digits_cache = nil
    return absum
  end
  -- a float64 is m 2^(e - 1075), m below 2^53: two pieces of 26 and 27 bits; its square in six
  local K, K2 = OFF - 1075, OFF - 2150
  local pow = POW64
  local count, pos, last = 0, 1, #s - 7
  repeat
    count, pos = next_words(words, s, pos, "i8", 8, last)
    for j = 1, count do
      local w = words[j]
      local e, m = (w >> 52) & 0x7ff, w & 0xfffffffffffff
      if e == 0x7ff then
        local x = sunpack("<d", spack("<i8", w))
        if squares then self:add_square(x) else self:add_special(absolute and math.abs(x) or x) end
      else
        if e == 0 then e = 1 else m = m | 0x10000000000000 end
        local x = m * pow[e]
        local h, l = m >> CH, m & CHMASK
        if squares then
          absum = absum + x * x
          local hh, hl, ll, key = h * h, 2 * h * l, l * l, 2 * e + K2
          b[key], b[key + DB] = b[key] + (ll & DMASK), b[key + DB] + (ll >> DB)
          key = key + CH
          b[key], b[key + DB] = b[key] + (hl & DMASK), b[key + DB] + (hl >> DB)
          key = key + CH
          b[key], b[key + DB] = b[key] + (hh & DMASK), b[key + DB] + (hh >> DB)
        else
          absum = absum + x
          local key = e + K
          if w < 0 and not absolute then
            b[key], b[key + CH] = b[key] - l, b[key + CH] - h
          else
            b[key], b[key + CH] = b[key] + l, b[key + CH] + h
          end
        end
      end
    end
  until count == 0
  self.digits_cache = nil
  return absum
end

--- The value held: sign (-1, 0, 1), magnitude as 24-bit digits (least significant first) and the
-- exponent of the first digit's unit. Carries go up one bit at a time (v // 2 is an arithmetic shift);
-- a negative total leaves a carry of -1, and the buckets are read again negated.
function Acc:digits()
  if self.digits_cache then return table.unpack(self.digits_cache) end
  local b, lo, hi = self.b, nil, nil
  for k = 1, KEYS do
    if b[k] ~= 0 then
      lo = lo or k
      hi = k
    end
  end
  if not lo then
    self.digits_cache = { 0, {}, 0 }
    return 0, {}, 0
  end
  local function read(sign)
    local d, acc, nbits, carry, k = {}, 0, 0, 0, lo
    while k <= hi or (carry ~= 0 and carry ~= -1) do
      local v = carry + (k <= hi and sign * b[k] or 0)
      acc = acc | ((v & 1) << nbits)
      nbits, carry, k = nbits + 1, v // 2, k + 1
      if nbits == DB then
        d[#d + 1], acc, nbits = acc, 0, 0
      end
    end
    if nbits > 0 then d[#d + 1] = acc end
    return d, carry
  end
  local d, carry = read(1)
  local sign = 1
  if carry == -1 then d, sign = read(-1), -1 end
  while #d > 0 and d[#d] == 0 do d[#d] = nil end
  if #d == 0 then sign = 0 end
  self.digits_cache = { sign, d, lo - OFF }
  return sign, d, lo - OFF
end

--- Adds c * other (another accumulator; c an integer, |c| < 2^38).
function Acc:add_acc(other, c)
  c = c or 1
  local sign, d, e0 = other:digits()
  for i = 1, #d do
    if d[i] ~= 0 then self:add_int(sign * c * d[i], e0 + DB * (i - 1)) end
  end
  if other.nan then self.nan = true end
  if other.pinf then self[c < 0 and "ninf" or "pinf"] = true end
  if other.ninf then self[c < 0 and "pinf" or "ninf"] = true end
end

--- Adds c * a * b for accumulators a and b holding finite values (c = 1 or -1).
function Acc:add_product(a, bb, c)
  local sa, da, ea = a:digits()
  local sb, db, eb = bb:digits()
  local s = sa * sb * (c or 1)
  for i = 1, #da do
    for j = 1, #db do
      local p = da[i] * db[j]
      if p ~= 0 then self:add_int(s * p, ea + eb + DB * (i + j - 2)) end
    end
  end
end

--- The IEEE result of the non-finite values added (NaN, inf, -inf), or nil when all were finite.
function Acc:special()
  if self.nan or (self.pinf and self.ninf) then return 0 / 0 end
  if self.pinf then return math.huge end
  if self.ninf then return -math.huge end
end

local function bitlen(d)
  local n = #d
  if n == 0 then return 0 end
  local top, len = d[n], 0
  while top > 0 do top, len = top >> 1, len + 1 end
  return (n - 1) * DB + len
end

--- The integer formed by bits [t, t + count) of the magnitude d (count <= 56; bits past the end are 0).
local function bits_at(d, t, count)
  local v, got = 0, 0
  while got < count do
    local pos = t + got
    local i = pos // DB + 1
    local digit = d[i] or 0
    local off = pos % DB
    local take = math.min(DB - off, count - got)
    v = v | (((digit >> off) & ((1 << take) - 1)) << got)
    got = got + take
  end
  return v
end

--- Whether any bit of d below bit t is set.
local function any_below(d, t)
  local full = t // DB
  for i = 1, math.min(full, #d) do
    if d[i] ~= 0 then return true end
  end
  local rest = t % DB
  return rest > 0 and d[full + 1] ~= nil and (d[full + 1] & ((1 << rest) - 1)) ~= 0
end

--- The value divided by the product of `divisors` (positive integers below 2^38 each), rounded to p
-- bits, ties to even, with no ulp below 2^emin (nil: no limit): sign, significand M, exponent s with
-- value = sign * M * 2^s (M = 0 when it rounds to zero). Non-finite content is not seen here.
function Acc:round_parts(p, emin, divisors)
  local sign, d, e0 = self:digits()
  if sign == 0 then return 0, 0, emin or 0 end
  local q, sticky = d, false
  if divisors and #divisors > 0 then
    local dbits = 0
    for _, v in ipairs(divisors) do dbits = dbits + bitlen({ v }) end
    -- enough digits below the value that the quotient keeps p + 2 bits
    local shift = math.max(0, (dbits + p + 2 - bitlen(d)) // DB + 1)
    q = {}
    for i = 1, shift do q[i] = 0 end
    for i = 1, #d do q[shift + i] = d[i] end
    e0 = e0 - DB * shift
    for _, v in ipairs(divisors) do
      local out, rem = {}, 0
      for i = #q, 1, -1 do
        local cur = rem * DBASE + q[i]
        out[i], rem = cur // v, cur % v
      end
      while #out > 0 and out[#out] == 0 do out[#out] = nil end
      q, sticky = out, sticky or rem ~= 0
    end
  end
  local L = bitlen(q)
  local msb = e0 + L - 1
  local s = msb - p + 1
  if emin and s < emin then s = emin end
  local t = s - e0
  if t <= 0 then                       -- every bit is kept (no divisor, at most p bits): exact
    return sign, bits_at(q, 0, L) << -t, s
  end
  local m = bits_at(q, t, math.max(0, L - t))
  local guard = bits_at(q, t - 1, 1)
  sticky = sticky or any_below(q, t - 1)
  if guard == 1 and (sticky or m & 1 == 1) then m = m + 1 end
  return sign, m, s
end

--- The value divided by the product of `divisors`, rounded to nearest (ties to even) in `format`
-- (a name of M.FORMATS or a table {p, emin, emax}), as a Lua float: +-inf past the format's range.
function Acc:round(format, divisors)
  local special = self:special()
  if special then return special end
  local f = type(format) == "table" and format or M.FORMATS[format]
  local sign, m, s = self:round_parts(f.p, f.emin, divisors)
  if m == 0 then return 0.0 end
  local v = m * 2.0 ^ s
  if v >= 2.0 ^ (f.emax + 1) then v = math.huge end
  return sign * v
end

--- f, e with the value ~ f * 2^e, f in [0.5, 1) rounded to 53 bits (0.0, 0 for zero); no overflow or
-- underflow whatever the value's size.
function Acc:frexp()
  local sign, m, s = self:round_parts(53, nil, nil)
  if m == 0 then return 0.0, 0 end
  local L = bitlen({ m & DMASK, m >> DB })   -- m below 2^54
  return sign * m * 2.0 ^ -L, s + L
end

--- The ulp of x in a format of p bits whose smallest subnormal is 2^emin: the spacing of the format's
-- numbers at |x| (2^(k - p + 1) for 2^k <= |x| < 2^(k + 1)), and 2^emin for zero and subnormals.
function M.ulp(x, p, emin)
  if x == 0 then return 2.0 ^ emin end
  local _, ex = math.frexp(math.abs(x))
  return math.max(2.0 ^ (ex - p), 2.0 ^ emin)
end

--- The position of x among the numbers of its format (float32 or float64): consecutive numbers differ
-- by 1, and -0.0 and +0.0 are both 0. So |ord(a) - ord(b)| counts the ulp steps between a and b.
function M.ord(x, dtype)
  local w
  if dtype == "float32" then
    w = sunpack("<i4", spack("<f", x))
    return w < 0 and -(w & 0x7fffffff) or w
  end
  w = sunpack("<i8", spack("<d", x))
  return w < 0 and -(w & math.maxinteger) or w
end

return M
