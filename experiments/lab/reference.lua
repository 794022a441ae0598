--- The lab's reference: the facts of a buffer's data that every op's expected result and error bound
-- are formed from (lab/validate.lua), computed in Lua from the bytes read back once -- no engine call,
-- so no variant is compared with another.
--
-- Facts of one data set (M.facts):
--   exact sums     S = sum x and Q = sum x^2 in lab/exact.lua's accumulators (no rounding, any order):
--                  float data as stored; 64-bit integers as the float64 values the engine converts them
--                  to for its float ops (var, std, norm, nanmean); integers of up to 32 bits exactly
--   magnitudes     A = sum |x| and X = max |x| (doubles; A rounded up by its own error, n 2^-53); for
--                  absmax and asum (need "magnitudes") exactly: SA = sum |x| of float data in an exact
--                  accumulator, XA = max |x| with the infinities, and for integers the largest
--                  magnitude iabsmax (compared unsigned: |INT64_MIN| = 2^63 is math.mininteger's bits)
--                  and the wrapping 64-bit sum of magnitudes iasum
--   integer ops    the wrapping 64-bit sum, sum of squares and product, as the engine keeps them
--   extremes       min and max with the index of their first occurrence, the first NaN, NaN count
--   others         count of non-zero elements, all/any non-zero, the float product in doubles
-- Only what the ops asked for is computed (M.needs). The bytes come back in chunks of 2^22 elements,
-- so a 2^28-element buffer never sits whole in a Lua string.
local exact = require "lab.exact"

local M = {}

M.CHUNK = 1 << 22

-- unpack letters: the element as a Lua value, and (floats) as its bits
M.DTYPES = {
  int8 = { letter = "i1", size = 1, signed = true },
  uint8 = { letter = "I1", size = 1 },
  int32 = { letter = "i4", size = 4, signed = true },
  uint32 = { letter = "I4", size = 4 },
  int64 = { letter = "i8", size = 8, signed = true, wide = true },
  uint64 = { letter = "I8", size = 8, wide = true },
  float32 = { letter = "f", size = 4, float = true },
  float64 = { letter = "d", size = 8, float = true },
  -- 16-bit floats: read as their bits and widened to doubles (exact) before anything else looks at them
  float16 = { letter = "I2", size = 2, float = true, exponent = 5, mantissa = 10 },
  bfloat16 = { letter = "I2", size = 2, float = true, exponent = 8, mantissa = 7 },
  int16 = { letter = "i2", size = 2, signed = true },
  uint16 = { letter = "I2", size = 2 },
  bool = { letter = "I1", size = 1, bool = true },      -- the bytes 0 and 1
  -- OCP FP8: e4m3 has no infinity and only S.1111.111 as NaN (fn), e5m2 is IEEE-like
  float8_e4m3 = { letter = "I1", size = 1, float = true, exponent = 4, mantissa = 3, fn = true },
  float8_e5m2 = { letter = "I1", size = 1, float = true, exponent = 5, mantissa = 2 },
}

--- The value of a binary floating-point pattern with `e` exponent and `m` mantissa bits (IEEE layout:
-- bias 2^(e-1) - 1, all-ones exponent for inf and NaN, subnormals below), from the definitions.
local function decode(bits, e, m, fn)
  local sign = (bits >> (e + m)) & 1 == 1 and -1.0 or 1.0
  local ex, frac = (bits >> m) & ((1 << e) - 1), bits & ((1 << m) - 1)
  local bias = (1 << (e - 1)) - 1
  -- fn (float8_e4m3): the top exponent holds numbers but for the all-ones mantissa, the NaN
  if ex == (1 << e) - 1 and fn and frac ~= (1 << m) - 1 then return sign * ((1 << m) + frac) * 2.0 ^ (ex - bias - m) end
  if ex == (1 << e) - 1 then return (frac == 0 and not fn) and sign * math.huge or 0.0 / 0.0 end
  if ex == 0 then return sign * frac * 2.0 ^ (1 - bias - m) end
  return sign * ((1 << m) + frac) * 2.0 ^ (ex - bias - m)
end

--- Bytes of 16- or 8-bit floats as bytes of the same values in float64.
local function widen(s, d)
  local out, n, fmt = {}, #s // d.size, "<" .. d.letter
  for k = 1, n do
    out[k] = string.pack("<d", decode(string.unpack(fmt, s, d.size * (k - 1) + 1), d.exponent, d.mantissa, d.fn))
  end
  return table.concat(out)
end

--- The data an op is checked on: "prod" (values near 1 or small integers), "flags" (and/or: values
-- with a zero planted) or "values" (everything else). Ops of one kind share one data set.
function M.kind(op)
  if op == "prod" then return "prod" end
  if op == "and" or op == "or" then return "flags" end
  return "values"
end

local OP_NEEDS = {
  sum = { "sum" }, nansum = { "sum", "nan" }, mean = { "sum" }, nanmean = { "sum", "nan", "floats" },
  sumsq = { "squares" }, norm = { "squares", "floats" },
  var = { "sum", "squares", "extremes", "floats" }, std = { "sum", "squares", "extremes", "floats" },
  min = { "extremes" }, max = { "extremes" }, nanmin = { "extremes" }, nanmax = { "extremes" },
  argmin = { "extremes" }, argmax = { "extremes" }, minmax = { "extremes" },
  count = { "count" }, prod = { "prod" }, ["and"] = { "flags" }, ["or"] = { "flags" },
  absmax = { "extremes", "magnitudes" }, asum = { "sum", "magnitudes" },
}

--- The set of facts a list of ops needs ("floats": the float forms of 64-bit integers; "nan": the NaN
-- count of float data).
function M.needs(ops)
  local set = {}
  for _, op in ipairs(ops) do
    for _, need in ipairs(OP_NEEDS[op] or error("reference: no reference for op '" .. tostring(op) .. "'", 2)) do
      set[need] = true
    end
  end
  return set
end

--- The float64 value the engine converts a 64-bit integer to (round to nearest): uint64 values at or
-- past 2^63 halve first, keeping the lowest bit as a sticky bit, so the rounding is the same.
local function to_double(v, unsigned)
  if unsigned and v < 0 then return ((v >> 1) | (v & 1)) * 2.0 end
  return v + 0.0
end
M.to_double = to_double

--- Float data: extremes (min and max over the numbers, each with its first index, and the first NaN),
-- NaN count, X, count of non-zero elements, the product in doubles. S, Q and A come from the exact
-- accumulators. The loop is written out (no call per element): this is where the reference spends its
-- time.
local function scan_floats(f, s, base, need)
  local words, count, pos, last = {}, 0, 1, #s - f.size + 1
  local ext, cnt, prod, mags = need.extremes, need.count or need.flags, need.prod, need.magnitudes
  local X, XA, nonzero, P, nan, i = f.X, f.XA, f.count, f.P, f.nan, base
  local mn, imn, mx, imx, first_nan = f.min, f.imin, f.max, f.imax, f.first_nan
  local inf = math.huge
  if mn == nil then mn, mx = inf, -inf end
  repeat
    count, pos = exact.next_words(words, s, pos, f.letter, f.size, last)
    for j = 1, count do
      local x = words[j]
      i = i + 1
      if x ~= x then
        nan = nan + 1
        if not first_nan then first_nan = i end
      elseif ext then
        -- strict comparisons keep the first occurrence; infinities count (imn/imx say a value was seen)
        if x < mn or not imn then mn, imn = x, i end
        if x > mx or not imx then mx, imx = x, i end
        local ax = x < 0 and -x or x
        if ax > X and ax ~= inf then X = ax end
      end
      if mags and x == x then
        local ax = x < 0 and -x or x
        if ax > XA then XA = ax end
      end
      if cnt and x ~= 0 then nonzero = nonzero + 1 end
      if prod then P = P * x end
    end
  until count == 0
  f.X, f.XA, f.count, f.P, f.nan = X, XA, nonzero, P, nan
  if imn then f.min, f.imin, f.max, f.imax = mn, imn, mx, imx end
  f.first_nan = first_nan
end

--- Integer data: the wrapping sums and product, exact parts of the sum of squares, magnitudes,
-- extremes (uint64 compared unsigned), count; and, for 64-bit integers whose float forms are needed,
-- those forms as float64 bytes (returned).
local function scan_integers(f, s, base, need)
  local words, count, pos, last = {}, 0, 1, #s - f.size + 1
  local unsigned64, wide = f.wide and not f.signed, f.wide
  local ext, prod, squares, mags = need.extremes, need.prod, need.squares, need.magnitudes
  local conv, nconv = wide and need.floats and {} or nil, 0
  local isum, isq, P, nonzero, A, X = f.isum, f.isumsq, f.iprod, f.count, f.absum, f.X
  local qh, qm, ql, i = f.qh, f.qm, f.ql, base
  local iabsmax, iasum, signed = f.iabsmax, f.iasum, f.signed
  local mn, imn, mx, imx = f.min, f.imin, f.max, f.imax
  local ult = math.ult
  repeat
    count, pos = exact.next_words(words, s, pos, f.letter, f.size, last)
    for j = 1, count do
      local v = words[j]
      i = i + 1
      isum = isum + v
      if v ~= 0 then nonzero = nonzero + 1 end
      if prod then P = P * v end
      if ext then
        if not imn then
          mn, imn, mx, imx = v, i, v, i
        elseif unsigned64 then
          if ult(v, mn) then mn, imn = v, i end
          if ult(mx, v) then mx, imx = v, i end
        else
          if v < mn then mn, imn = v, i end
          if v > mx then mx, imx = v, i end
        end
      end
      if squares then isq = isq + v * v end
      if mags then
        local a = (signed and v < 0) and -v or v        -- wraps for INT64_MIN: the bits of 2^63
        iasum = iasum + a
        if ult(iabsmax, a) then iabsmax = a end
      end
      if conv then
        local x = (unsigned64 and v < 0) and ((v >> 1) | (v & 1)) * 2.0 or v + 0.0
        nconv = nconv + 1
        conv[nconv] = x
        if x < 0 then x = -x end
        if x > X then X = x end
      elseif not wide then
        -- |v| < 2^32 in two 16-bit halves: v^2 = h^2 2^32 + 2 h l 2^16 + l^2, each sum exact in 64 bits
        local a = v < 0 and -v or v
        A = A + a
        if a > X then X = a end
        if squares then
          local h, l = a >> 16, a & 0xffff
          qh, qm, ql = qh + h * h, qm + h * l, ql + l * l
        end
      end
    end
  until count == 0
  f.isum, f.isumsq, f.iprod, f.count, f.absum, f.X = isum, isq, P, nonzero, A, X
  f.qh, f.qm, f.ql = qh, qm, ql
  f.iabsmax, f.iasum = iabsmax, iasum
  if imn then f.min, f.imin, f.max, f.imax = mn, imn, mx, imx end
  if conv and nconv > 0 then
    local parts, fmt = {}, "<" .. string.rep("d", 256)
    for k = 1, nconv, 256 do
      local top = math.min(nconv, k + 255)
      parts[#parts + 1] = string.pack(top - k == 255 and fmt or "<" .. string.rep("d", top - k + 1),
        table.unpack(conv, k, top))
    end
    return table.concat(parts)
  end
end

--- The facts of n elements of `dtype` as `bytes(first, count)` returns them (a function reading the
-- data back chunk by chunk; see M.of_buffer), for the needs of M.needs.
function M.from_reader(bytes, n, dtype, need)
  local d = M.DTYPES[dtype]
  if not d then error("reference: no Lua reference for dtype '" .. tostring(dtype) .. "'", 2) end
  if n > exact.MAX_ADDS then error("reference: more than 2^32 elements overflow the exact accumulator", 2) end
  local half = d.exponent ~= nil
  local f = {
    n = n, dtype = dtype, letter = half and "d" or d.letter, size = half and 8 or d.size, signed = d.signed,
    wide = d.wide,
    is_float = d.float or false, need = need,
    count = 0, nan = 0, X = d.float and 0.0 or 0, XA = 0.0, P = 1.0,
    isum = 0, isumsq = 0, iprod = 1, absum = 0, qh = 0, qm = 0, ql = 0, iabsmax = 0, iasum = 0,
  }
  -- float data, and the float forms of 64-bit integers, are summed exactly from float64/float32 bytes
  local floats = half and "float64" or d.float and dtype or (d.wide and need.floats) and "float64" or nil
  if floats and (need.sum or need.floats) then f.S = exact.new() end
  if floats and need.squares then f.Q = exact.new() end
  if d.float and need.magnitudes then f.SA = exact.new() end
  local A = 0.0
  for first = 1, n, M.CHUNK do
    local count = math.min(M.CHUNK, n - first + 1)
    local s = bytes(first, count)
    if half then s = widen(s, d) end
    if d.float then
      if need.extremes or need.count or need.flags or need.prod or need.nan or need.magnitudes then
        scan_floats(f, s, first - 1, need)
      end
    else
      s = scan_integers(f, s, first - 1, need)        -- the float forms, where they are needed
    end
    if floats and s then
      if f.S then A = A + f.S:add_bytes(s, floats) end
      if f.Q then f.Q:add_bytes(s, floats, true) end
      if f.SA then f.SA:add_bytes(s, floats, false, true) end
    end
  end
  if not floats and not d.wide then
    -- integers of up to 32 bits: S and Q exactly from the integer sums (no wrap below 2^31 elements)
    if n >= 1 << 31 then error("reference: 2^31 or more integers overflow the exact sums", 2) end
    f.S = exact.new()
    f.S:add_int(f.isum, 0)
    if need.squares then
      f.Q = exact.new()
      f.Q:add_int(f.qh, 32)
      f.Q:add_int(f.qm, 17)
      f.Q:add_int(f.ql, 0)
    end
    A = f.absum + 0.0
  end
  if f.S and need.nan then
    -- the nan ops skip NaN elements: the sum of the others (infinities stay)
    f.S_nan = exact.new()
    f.S_nan:add_acc(f.S)
    f.S_nan.nan = false
  end
  f.A = A * (1 + n * 2.0 ^ -52)          -- rounded up by its own error (a sum of n positive doubles)
  f.X = f.X + 0.0
  f.all = f.count == n
  f.any = f.count > 0
  return f
end

--- The facts of a buffer (device or host), read back in chunks of M.CHUNK elements.
function M.of_buffer(b, dtype, need)
  return M.from_reader(function(first, count) return b:tobytes(first, count) end, #b, dtype, need)
end

--- The facts of a Lua list of numbers, packed as `dtype` (for tests and small checks).
function M.of_values(values, dtype, need)
  local d = assert(M.DTYPES[dtype], dtype)
  if d.exponent then error("reference.of_values: " .. dtype .. " data comes as a buffer (M.of_buffer)", 2) end
  local parts = {}
  for i, v in ipairs(values) do parts[i] = string.pack("<" .. d.letter, v) end
  local s = table.concat(parts)
  return M.from_reader(function(first, count) return s:sub((first - 1) * d.size + 1, (first + count - 1) * d.size) end,
    #values, dtype, need)
end

return M
