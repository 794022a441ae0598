--[[
fuzz_reference.lua -- the reference of the differential fuzz (spec/fuzz_spec.lua).

Written in pure Lua, independently of the engine: nothing here calls gpureduce. It knows the exact
values of a case's data (the fuzz generates them in Lua) and states, per op, what a correct result is.

What it provides
  * R.rng(seed): a splitmix64 generator on Lua integers (so a seed gives the same sequence whatever
    math.random does), and R.case_seed(seed, index): the independent stream of one case.
  * R.DTYPES: each dtype's kind and range, R.F32 / R.F64: the float formats.
  * R.OPS: op name -> { reference = function(values, info) -> expectation,
                        check = function(ok, got, expectation) -> true | false, why,
                        describe = function(expectation) -> text }
    `ok, got` are what pcall around the reduction returned. R.OP_ORDER lists the ops in a fixed order.
    Adding an op = adding an entry here (the fuzz draws ops from this table).

The contract checked (README "The Lua API", and the brief of the fuzz)
  integers   sum and prod wrap in 64 bits (Lua's integer arithmetic wraps the same way) and are exact;
             min/max exact, uint64 compared unsigned (math.ult). Results are Lua integers.
  and / or   booleans; an element is true when it is non-zero (NaN true, -0.0 false).
  empty      sum -> 0 (0.0 for floats), prod -> 1 (1.0), and -> true, or -> false, min/max -> an error
             whose message contains "of an empty buffer".
  floats     results are Lua floats. min/max exact by value (-0.0 == 0.0), NaN if any NaN.
    sum      NaN if any NaN or both +inf and -inf; +inf if +inf (and no -inf/NaN), likewise -inf, except
             that +inf may become NaN when the finite part can overflow to -inf in some order. Finite
             data: with S = sum |x_i| over the n elements, exact the exact sum,
                 |got - exact| <= gamma(n - 1) * S + u * |exact|      gamma(k) = k u / (1 - k u)
             with u = 2^-24 for a float32 accumulator, 2^-53 for float64 (acc = "float64" on float32
             data included). Why it is sound for ANY order: a summation tree over n terms has n - 1
             additions, each element goes through at most n - 1 of them, each rounding multiplies by
             (1 + d), |d| <= u, so every element's relative perturbation is at most (1 + u)^(n-1) - 1
             <= gamma(n - 1) (Higham, Accuracy and Stability, ch. 4: the bound holds for every order).
             Additions whose result is subnormal are exact, so gradual underflow needs no extra term;
             u * |exact| pays for one final rounding into the accumulator type (e.g. a float64 partial
             rounded to float32), and 2 * (smallest subnormal of the accumulator) for that rounding
             landing in the subnormal range. The brief's (n - 1) u S + u |exact| differs from this only
             in second-order terms; gamma keeps the bound a theorem.
             The exact sum is computed error-free: a Shewchuk expansion (exact two-sum, grow-expansion
             with zero elimination) holds sum x_i exactly as non-overlapping doubles; the difference
             exact - got is formed in the same expansion, so only its final conversion to one double
             rounds (relative error below 2^-49, paid by a factor (1 + 2^-30) on the bound, which also
             covers computing S in double).
             If S (1 + u)^(n-1) may reach the accumulator's largest finite value, some order may
             overflow: then +-inf or NaN are accepted too (a finite result must still be within the
             bound: once a partial is inf it never becomes finite again).
             When the data is integers times one power of two 2^s (a hint from the generator, checked
             here) and S / 2^s < 2^p (p = 24 or 53 for the accumulator), every partial sum in every order
             is a representable multiple of 2^s, so the result must be EXACT: checked with ==.
    prod     NaN if any NaN, or a zero and an inf together. Otherwise the check depends on whether the
             data is "safe": Pbig = prod max(|x|, 1) and Psmall = prod min(|x|, 1) over the finite
             non-zero elements bound every partial product of every subset, in every order, up to the
             rounding factor (1 +- u)^n <= 2. Safe means Pbig <= 2^126 and Psmall >= 2^-125 for a
             float32 accumulator (2^+-900 for float64, where the double-double reference stays exact
             enough): then no partial product overflows or underflows, so
               zero present -> 0 (either sign); inf present -> +-inf;
               otherwise |got - P| <= gamma(n) * |P|   (n - 1 multiplications + one final rounding)
             with P from a double-double product (relative error below n * 2^-100, added to the bound;
             got - P is formed as (got - hi) - lo, so P is never rounded to one double first).
             Unsafe data: a zero may meet an overflowed inf (0 or NaN accepted), an inf an underflowed
             zero (+-inf or NaN), finite data anything of type float.
]]
local R = {}

local inf = math.huge
local nan = 0 / 0

---------------------------------------------------------------------------------------------------
-- splitmix64 on Lua integers (which wrap like uint64 for +, *, and >> is a logical shift)

local function mix(z)
  z = (z ~ (z >> 30)) * 0xBF58476D1CE4E5B9
  z = (z ~ (z >> 27)) * 0x94D049BB133111EB
  return z ~ (z >> 31)
end

local Rng = {}
Rng.__index = Rng

function R.rng(seed) return setmetatable({ s = seed }, Rng) end

--- The seed of case `index` of a run with `seed`: each case has its own stream, so one case can be
-- re-run alone (GPUREDUCE_FUZZ_ONLY) and cases do not shift when another one draws more numbers.
function R.case_seed(seed, index) return mix(mix(seed + 0x9E3779B97F4A7C15) + index * 0x9E3779B97F4A7C15) end

--- 64 random bits (any Lua integer).
function Rng:next()
  local s = self.s + 0x9E3779B97F4A7C15
  self.s = s
  local z = (s ~ (s >> 30)) * 0xBF58476D1CE4E5B9
  z = (z ~ (z >> 27)) * 0x94D049BB133111EB
  return z ~ (z >> 31)
end

--- Uniform in 0 .. n - 1 (1 <= n <= 2^53; the modulo bias is below 2^-20 for every n used here).
function Rng:below(n) return (self:next() >> 11) % n end

--- Uniform integer in lo .. hi (hi - lo < 2^53).
function Rng:range(lo, hi) return lo + (self:next() >> 11) % (hi - lo + 1) end

--- Uniform over an integer dtype's whole range (R.DTYPES' min and max), from the high bits (uint64 and
-- int64: any Lua integer).
local int_bits = {}     -- dtype -> the bits of its values, below 64
function Rng:int(dtype)
  local z = self:next()
  local d = assert(R.DTYPES[dtype], dtype)
  if d.min == math.mininteger or d.max == -1 then return z end
  local bits = int_bits[dtype]
  if not bits then
    bits = 0
    while (1 << bits) < d.max - d.min + 1 do bits = bits + 1 end
    int_bits[dtype] = bits
  end
  return (z >> (64 - bits)) + d.min
end

--- Uniform float in [0, 1).
function Rng:float() return (self:next() >> 11) * 0x1p-53 end

function Rng:chance(p) return self:float() < p end

function Rng:pick(list) return list[(self:next() >> 11) % #list + 1] end

--- A key of `weights` (name -> weight), drawn in proportion to its weight; keys visited in sorted
-- order so the draw does not depend on table iteration order.
function Rng:weighted(weights)
  local keys, total = {}, 0
  for k, w in pairs(weights) do
    if w > 0 then keys[#keys + 1] = k; total = total + w end
  end
  table.sort(keys)
  local r = self:float() * total
  for _, k in ipairs(keys) do
    r = r - weights[k]
    if r < 0 then return k end
  end
  return keys[#keys]
end

---------------------------------------------------------------------------------------------------
-- dtypes and float formats

R.F32 = {
  name = "float32", p = 24, u = 0x1p-24, max = 0x1.fffffep127, min_normal = 0x1p-126, denorm_min = 0x1p-149,
  -- products: the range every partial product must stay in for the "safe" check
  safe_hi = 0x1p126, safe_lo = 0x1p-125,
}
R.F64 = {
  name = "float64", p = 53, u = 0x1p-53, max = 0x1.fffffffffffffp1023, min_normal = 0x1p-1022,
  denorm_min = 0x1p-1074, safe_hi = 0x1p900, safe_lo = 0x1p-900,
}

-- The 16-bit formats, elements only: they accumulate in float32 (R.acc_format). Written from their
-- definitions: p bits of precision, normal numbers from 2^emin, the largest finite value max.
R.F16 = {
  name = "float16", p = 11, u = 0x1p-11, emin = -14, max = 65504.0, min_normal = 0x1p-14, denorm_min = 0x1p-24,
}
R.BF16 = {
  name = "bfloat16", p = 8, u = 0x1p-8, emin = -126, max = 0x1.fep127, min_normal = 0x1p-126,
  denorm_min = 0x1p-133,
}
-- OCP FP8: E4M3 (bias 7, no infinity, S.1111.111 the only NaNs, so 448 = 1.110b 2^8 is the largest) and
-- E5M2 (bias 15, IEEE-like: infinities, NaNs, largest 1.11b 2^15)
R.F8E4M3 = {
  name = "float8_e4m3", p = 4, u = 0x1p-4, emin = -6, max = 448.0, min_normal = 0x1p-6, denorm_min = 0x1p-9,
  no_inf = true,
}
R.F8E5M2 = {
  name = "float8_e5m2", p = 3, u = 0x1p-3, emin = -14, max = 57344.0, min_normal = 0x1p-14, denorm_min = 0x1p-16,
}

--- x rounded to float32 (round to nearest even); x must be within float32's range or +-inf/NaN.
function R.to_f32(x) return (string.unpack("<f", string.pack("<f", x))) end

--- x rounded once to nearest even in format F (R.F16, R.BF16), subnormals kept: a double, or nil where a
-- finite x does not fit (rounded with the exponent range unbounded, it exceeds F.max: IEEE overflow).
-- Independent of the engine: the quantum 2^(max(e, emin) - p + 1) of x's binade, x / quantum rounded to
-- an integer with ties to even (exact in double: scaling by a power of two, then floor).
function R.round_to(F, x)
  if x == math.huge or x == -math.huge then
    if F.no_inf then return nil end           -- float8_e4m3 has no infinity
    return x
  end
  if x ~= x or x == 0 then return x end
  local a = math.abs(x)
  local _, e = math.frexp(a)                   -- a = m 2^e, m in [0.5, 1): a's binade is 2^(e-1)
  local q = 2.0 ^ (math.max(e - 1, F.emin) - F.p + 1)
  local k = a / q
  local r = math.floor(k)
  local rest = k - r
  if rest > 0.5 or (rest == 0.5 and r % 2 == 1) then r = r + 1 end
  local y = r * q
  if y > F.max then return nil end
  return x < 0 and -y or y
end

R.DTYPES = {
  int8 = { kind = "int", min = -128, max = 127 },
  uint8 = { kind = "uint", min = 0, max = 255 },
  int32 = { kind = "int", min = -2147483648, max = 2147483647 },
  uint32 = { kind = "uint", min = 0, max = 4294967295 },
  int64 = { kind = "int", min = math.mininteger, max = math.maxinteger },
  -- uint64 elements are the Lua integers with the same bits: -1 is 2^64 - 1
  uint64 = { kind = "uint", min = 0, max = -1 },
  float32 = { kind = "float", fmt = R.F32 },
  float64 = { kind = "float", fmt = R.F64 },
  -- fmt: the elements' format (stored rounded to it); their sums and the like are float32's (acc_format)
  float16 = { kind = "float", fmt = R.F16, small = true },
  bfloat16 = { kind = "float", fmt = R.BF16, small = true },
  int16 = { kind = "int", min = -32768, max = 32767 },
  uint16 = { kind = "uint", min = 0, max = 65535 },
  -- bool: one byte, 0 or 1; the references compute with the numbers 0 and 1 (what the data is made
  -- of), and R.check reads the engine's booleans back as those numbers (bool_values says where)
  bool = { kind = "uint", min = 0, max = 1, bool = true },
  float8_e4m3 = { kind = "float", fmt = R.F8E4M3, small = true },
  float8_e5m2 = { kind = "float", fmt = R.F8E5M2, small = true },
}

--- Values drawn for an integer dtype, made data of a bool dtype in place: every value not 0 becomes 1
-- (the data generators draw over ranges; bool holds 0 and 1). Returns the list.
function R.boolify(dtype, values)
  if R.DTYPES[dtype].bool then
    for i = 1, #values do
      local x = values[i]
      if type(x) == "boolean" then values[i] = x and 1 or 0 else values[i] = x ~= 0 and 1 or 0 end
    end
  end
  return values
end

--- A float value as an element of dtype holds it: rounded to the element's format (nil where it does not
-- fit); float64 keeps it.
function R.to_dtype(dtype, x)
  local d = R.DTYPES[dtype]
  if dtype == "float64" or d.kind ~= "float" then return x end
  if dtype == "float32" then return R.to_f32(x) end
  return R.round_to(d.fmt, x)
end

function R.is_float(dtype) return R.DTYPES[dtype].kind == "float" end

--- Whether a Lua value can be stored in dtype without being rejected or changed.
function R.fits(dtype, v)
  local d = R.DTYPES[dtype]
  if d.kind == "float" then
    if math.type(v) ~= "float" then return false end
    if v ~= v or dtype == "float64" then return true end
    if d.small then return R.round_to(d.fmt, v) == v end
    return R.to_f32(v) == v                     -- inf included; out-of-range finite values are not
  end
  if math.type(v) ~= "integer" then return false end
  if dtype == "uint64" or dtype == "int64" then return true end
  return v >= d.min and v <= d.max
end

--- The accumulator format of a float sum/prod: float64 data, or acc = "float64", accumulate in float64.
function R.acc_format(dtype, acc)
  if dtype == "float64" or acc == "float64" then return R.F64 end
  return R.F32
end

---------------------------------------------------------------------------------------------------
-- formatting

function R.fmt(v, dtype)
  if type(v) ~= "number" then return tostring(v) end
  if math.type(v) == "integer" then
    if dtype == "uint64" and v < 0 then return string.format("%d (0x%016x unsigned)", v, v) end
    return string.format("%d", v)
  end
  if v ~= v then return "nan" end
  if v == inf then return "inf" elseif v == -inf then return "-inf" end
  if v == 0 and 1 / v < 0 then return "-0.0" end
  return string.format("%.17g (%a)", v, v)
end

--- A value as Lua would read it back: 9 significant digits round-trip a float32, 17 a float64.
local function fmt_short(v, dtype)
  if math.type(v) == "float" then
    if v ~= v then return "0/0" end
    if v == inf then return "math.huge" elseif v == -inf then return "-math.huge" end
    if v == 0 and 1 / v < 0 then return "-0.0" end
    local s = string.format(dtype == "float32" and "%.9g" or "%.17g", v)
    if not s:find("[%.eEn]") then s = s .. ".0" end
    return s
  end
  return tostring(v)
end
R.fmt_short = fmt_short

---------------------------------------------------------------------------------------------------
-- exact float sums: Shewchuk expansions (a list of non-overlapping doubles, increasing magnitude)

--- Adds x to expansion e[1..m] exactly; returns the new length. Two-sum (Knuth) is exact for any
-- doubles as long as nothing overflows: the caller keeps |partial sums| far below 2^1023.
local function grow(e, m, x)
  local q, k = x, 0
  for i = 1, m do
    local a = e[i]
    local s = q + a
    local bv = s - q
    local h = (q - (s - bv)) + (a - bv)
    q = s
    if h ~= 0 then k = k + 1; e[k] = h end
  end
  if q ~= 0 then k = k + 1; e[k] = q end
  return k
end

--- The expansion as one double (smallest first: within a few ulps of the exact value).
local function approx(e, m)
  local s = 0.0
  for i = 1, m do s = s + e[i] end
  return s
end

local function gamma(k, u) return k * u / (1 - k * u) end

---------------------------------------------------------------------------------------------------
-- helpers shared by the ops

local function is_nan(x) return x ~= x end

local function check_type(got, want)
  local t = math.type(got) or type(got)
  if t ~= want then return false, "result is a " .. t .. ", expected a " .. want end
  return true
end

local function empty_error(op)
  return { kind = "empty error", empty_error = true, text = "an error containing \"of an empty buffer\" (" .. op .. " of nothing)" }
end

--- Handles the outcome of the pcall: an expected error, an unexpected one, a value where an error was
-- due. Returns done, ok, why (done = false: the value is to be checked by the op).
local function settle_error(ok, got, e)
  if e.empty_error then
    if ok then return true, false, "no error, got " .. tostring(got) end
    if tostring(got):find("of an empty buffer", 1, true) then return true, true end
    return true, false, "wrong error: " .. tostring(got)
  end
  if not ok then return true, false, "error: " .. tostring(got) end
  return false
end

---------------------------------------------------------------------------------------------------
-- integers

local function int_fold(values, f, init)
  local acc = init
  for i = 1, #values do acc = f(acc, values[i]) end
  return acc
end

local function int_expect(value, dtype)
  return { kind = "exact", value = value, dtype = dtype, text = "exactly " .. R.fmt(value, dtype) }
end

local function int_check(ok, got, e)
  local done, good, why = settle_error(ok, got, e)
  if done then return good, why end
  local tok, twhy = check_type(got, "integer")
  if not tok then return false, twhy end
  if got ~= e.value then return false, "wrong value" end
  return true
end

---------------------------------------------------------------------------------------------------
-- float sum

local function float_sum_reference(values, info)
  local n = #values
  local fmt = R.acc_format(info.dtype, info.acc)
  local u = fmt.u
  local e = { n = n, fmt = fmt, dtype = info.dtype }
  if n == 0 then
    e.value = 0.0
    e.kind = "empty"
    e.text = "0.0 (sum of nothing)"
    return e
  end
  local has_nan, pinf, ninf, S = false, false, false, 0.0
  for i = 1, n do
    local x = values[i]
    if x ~= x then has_nan = true
    elseif x == inf then pinf = true
    elseif x == -inf then ninf = true
    else S = S + math.abs(x) end
  end
  local S_up = S * (1 + 0x1p-30)
  -- (1 + u)^(n-1) <= 1 + 2 (n - 1) u here ((n - 1) u < 1 for every n the fuzz draws)
  e.overflow = S_up * (1 + 2 * (n - 1) * u) >= fmt.max
  e.S = S
  if has_nan or (pinf and ninf) then
    e.nan = true
    e.kind = "nan"
    e.text = "NaN (" .. (has_nan and "a NaN in the data" or "+inf and -inf in the data") .. ")"
    return e
  end
  if pinf or ninf then
    e.inf = pinf and inf or -inf
    e.kind = e.overflow and "inf or nan" or "inf"
    e.text = R.fmt(e.inf) .. (e.overflow and " or NaN (the finite part may overflow the other way)" or "")
    return e
  end
  -- finite: the exact sum as an expansion, scaled down when S is near the top of the double range
  local scale = 1.0
  if S_up >= 0x1p1000 then scale = 0x1p-200 end
  local ex, m = {}, 0
  for i = 1, n do m = grow(ex, m, values[i] * scale) end
  e.ex, e.m, e.scale = ex, m, scale
  e.exact_approx = approx(ex, m) / scale
  -- values below 2^-874 lose bits when scaled by 2^-200: at most 2^-1074 each, 2^-874 unscaled
  local scale_slack = scale == 1.0 and 0.0 or n * 0x1p-874
  e.bound = ((gamma(n - 1, u) * S + u * math.abs(e.exact_approx)) * (1 + 0x1p-30)
    + 2 * fmt.denorm_min + scale_slack) * (1 + 0x1p-30)
  -- exactness: integers times a common 2^s whose magnitudes sum below 2^p
  local s = info.exact_scale
  if s and not e.overflow then
    local all, total = true, 0.0
    for i = 1, n do
      local x = values[i]
      local k = x / s
      -- k * s == x: a subnormal x divided by s could underflow to a misleading integer 0
      if k ~= math.floor(k) or k * s ~= x then all = false break end
      total = total + math.abs(k)
    end
    e.exact = all and total < 2.0 ^ fmt.p
  end
  e.kind = e.exact and "exact" or e.overflow and "bound or overflow" or "bound"
  if e.exact then
    e.text = "exactly " .. R.fmt(e.exact_approx) .. " (every partial sum is exact)"
  else
    e.text = string.format("%s within %.3g (n = %d, sum|x| = %.6g, u = 2^-%d%s)", R.fmt(e.exact_approx), e.bound,
      n, S, fmt.p, e.overflow and "; may overflow: +-inf or NaN accepted" or "")
  end
  return e
end

local function float_sum_check(ok, got, e)
  local done, good, why = settle_error(ok, got, e)
  if done then return good, why end
  local tok, twhy = check_type(got, "float")
  if not tok then return false, twhy end
  if e.n == 0 then return got == 0, "wrong value" end
  if e.nan then return is_nan(got), "expected NaN" end
  if e.inf then
    if got == e.inf or (e.overflow and is_nan(got)) then return true end
    return false, "wrong infinity"
  end
  if is_nan(got) or got == inf or got == -inf then
    if e.overflow then return true end
    return false, "non-finite result without possible overflow"
  end
  -- exact - got, formed exactly in a copy of the expansion
  local d, m = {}, e.m
  for i = 1, m do d[i] = e.ex[i] end
  m = grow(d, m, -got * e.scale)
  if e.exact then
    if m == 0 then return true end
    return false, "not exact: off by " .. R.fmt(approx(d, m) / e.scale)
  end
  local err = math.abs(approx(d, m) / e.scale)
  if err <= e.bound then return true end
  return false, string.format("error %.6g > bound %.6g (%.3g times the bound)", err, e.bound, err / e.bound)
end

---------------------------------------------------------------------------------------------------
-- float prod

local SPLIT = 134217729.0       -- 2^27 + 1 (Dekker)

--- (hi, lo) * b in double-double.
local function dd_mul(hi, lo, b)
  local p = hi * b
  local t = SPLIT * hi
  local ah = t - (t - hi)
  local al = hi - ah
  t = SPLIT * b
  local bh = t - (t - b)
  local bl = b - bh
  local err = ((ah * bh - p) + ah * bl + al * bh) + al * bl
  err = err + lo * b
  local s = p + err
  return s, err - (s - p)
end

local function float_prod_reference(values, info)
  local n = #values
  local fmt = R.acc_format(info.dtype, info.acc)
  local e = { n = n, fmt = fmt }
  if n == 0 then
    e.value = 1.0
    e.kind = "empty"
    e.text = "1.0 (product of nothing)"
    return e
  end
  local has_nan, has_inf, has_zero = false, false, false
  local big, small = 1.0, 1.0
  for i = 1, n do
    local x = values[i]
    if x ~= x then has_nan = true
    elseif x == inf or x == -inf then has_inf = true
    elseif x == 0 then has_zero = true
    else
      local a = math.abs(x)
      if a > 1 then big = big * a elseif a < 1 then small = small * a end
    end
  end
  e.safe = big * (1 + 0x1p-30) <= fmt.safe_hi and small * (1 - 0x1p-30) >= fmt.safe_lo
  local range = string.format("partial products within [%.3g, %.3g]", small, big)
  if has_nan or (has_zero and has_inf) then
    e.nan = true
    e.kind = "nan"
    e.text = "NaN (" .. (has_nan and "a NaN in the data" or "a zero and an inf in the data") .. ")"
  elseif has_zero then
    e.zero = true
    e.kind = e.safe and "zero" or "zero or nan"
    e.text = e.safe and "+-0 (a zero in the data, " .. range .. ")"
      or "+-0 or NaN (a zero in the data; some partial product may overflow)"
  elseif has_inf then
    e.inf = true
    e.kind = e.safe and "inf" or "inf or nan"
    e.text = e.safe and "+-inf (an inf in the data, " .. range .. ")"
      or "+-inf or NaN (an inf in the data; some partial product may underflow)"
  elseif e.safe then
    local hi, lo = 1.0, 0.0
    for i = 1, n do hi, lo = dd_mul(hi, lo, values[i]) end
    e.value = hi + lo             -- for the message; the check uses (hi, lo)
    e.hi, e.lo = hi, lo
    e.kind = "bound"
    e.bound = (gamma(n, fmt.u) + n * 0x1p-100) * math.abs(e.value) * (1 + 0x1p-30)
    e.text = string.format("%s within %.3g (n = %d, u = 2^-%d, %s)", R.fmt(e.value), e.bound, n, fmt.p, range)
  else
    e.any = true
    e.kind = "any float"
    e.text = "any float (some partial product may overflow or underflow: " .. range .. ")"
  end
  return e
end

local function float_prod_check(ok, got, e)
  local done, good, why = settle_error(ok, got, e)
  if done then return good, why end
  local tok, twhy = check_type(got, "float")
  if not tok then return false, twhy end
  if e.n == 0 then return got == 1, "wrong value" end
  if e.nan then return is_nan(got), "expected NaN" end
  if e.zero then return got == 0 or (not e.safe and is_nan(got)), "expected a zero" end
  if e.inf then return math.abs(got) == inf or (not e.safe and is_nan(got)), "expected an infinity" end
  if e.any then return true end
  -- got - hi is exact (Sterbenz) when got is anywhere near hi; only the subtraction of lo rounds
  local err = math.abs((got - e.hi) - e.lo)
  if err <= e.bound then return true end
  return false, string.format("error %.6g > bound %.6g", err, e.bound)
end

---------------------------------------------------------------------------------------------------
-- min / max

local function minmax_reference(is_min)
  return function(values, info)
    local n = #values
    if n == 0 then return empty_error(is_min and "min" or "max") end
    local dtype = info.dtype
    if R.is_float(dtype) then
      local best = values[1]
      for i = 1, n do
        local x = values[i]
        if x ~= x then return { kind = "nan", float = true, nan = true, text = "NaN (a NaN in the data)" } end
        if (is_min and x < best) or (not is_min and x > best) then best = x end
      end
      return { kind = "exact", float = true, value = best, text = "exactly " .. R.fmt(best) }
    end
    local best = values[1]
    local unsigned = dtype == "uint64"        -- the other integer dtypes are non-negative Lua values
    for i = 2, n do
      local x = values[i]
      local less = unsigned and math.ult(x, best) or (not unsigned and x < best)
      local greater = unsigned and math.ult(best, x) or (not unsigned and x > best)
      if (is_min and less) or (not is_min and greater) then best = x end
    end
    return int_expect(best, dtype)
  end
end

local function minmax_check(ok, got, e)
  if not e.float then return int_check(ok, got, e) end
  local done, good, why = settle_error(ok, got, e)
  if done then return good, why end
  local tok, twhy = check_type(got, "float")
  if not tok then return false, twhy end
  if e.nan then return is_nan(got), "expected NaN" end
  return got == e.value, "wrong value"    -- by value: -0.0 == 0.0
end

---------------------------------------------------------------------------------------------------
-- and / or: an element is true when it is non-zero (x ~= 0: NaN is true, -0.0 false)

local function logical_reference(is_and)
  return function(values)
    local all, any = true, false
    for i = 1, #values do
      if values[i] ~= 0 then any = true else all = false end
    end
    local v
    if is_and then v = all else v = any end
    return { kind = tostring(v), value = v, text = tostring(v) .. (#values == 0 and " (empty)" or "") }
  end
end

local function logical_check(ok, got, e)
  local done, good, why = settle_error(ok, got, e)
  if done then return good, why end
  if type(got) ~= "boolean" then return false, "result is a " .. (math.type(got) or type(got)) .. ", expected a boolean" end
  return got == e.value, "wrong value"
end

---------------------------------------------------------------------------------------------------
-- the ops table

local function sum_reference(values, info)
  if R.is_float(info.dtype) then return float_sum_reference(values, info) end
  return int_expect(int_fold(values, function(a, x) return a + x end, 0), info.dtype)
end

local function prod_reference(values, info)
  if R.is_float(info.dtype) then return float_prod_reference(values, info) end
  return int_expect(int_fold(values, function(a, x) return a * x end, 1), info.dtype)
end

R.OPS = {
  sum = {
    reference = sum_reference,
    check = function(ok, got, e) if e.fmt then return float_sum_check(ok, got, e) end return int_check(ok, got, e) end,
  },
  prod = {
    reference = prod_reference,
    check = function(ok, got, e) if e.fmt then return float_prod_check(ok, got, e) end return int_check(ok, got, e) end,
  },
  min = { reference = minmax_reference(true), check = minmax_check },
  max = { reference = minmax_reference(false), check = minmax_check },
  ["and"] = { reference = logical_reference(true), check = logical_check },
  ["or"] = { reference = logical_reference(false), check = logical_check },
}
R.OP_ORDER = { "sum", "prod", "min", "max", "and", "or" }

--- The expectation of op over values; info = { dtype =, acc =, exact_scale =, ddof = }. Over bool data
-- the values may be what a bool buffer's totable gives (Lua booleans): the references see a copy made of
-- the numbers 0 and 1, as the fuzz's own data is, so every caller may pass the buffer's values as read.
function R.expect(op, values, info)
  local d = R.DTYPES[info.dtype or ""]
  if d and d.bool then
    values = R.boolify(info.dtype, table.move(values, 1, #values, 1, {}))
  end
  local e = R.OPS[op].reference(values, info)
  e.op = op
  e.in_dtype = info.dtype
  return e
end

--- The ops whose results (the first; both for minmax) are elements of the data: over bool data they
-- come back as Lua booleans (DESIGN.md's data model), which the references compute as 0 and 1.
R.BOOL_VALUES = { min = 1, max = 1, nanmin = 1, nanmax = 1, argmin = 1, argmax = 1, absmax = 1, minmax = 2 }

--- A result of a bool reduction read as the number the references use: a boolean must come back where
-- R.BOOL_VALUES says so, and nothing else may be one (and/or excepted, which are booleans everywhere).
local function bool_result(op, got, k)
  local want_bool = (R.BOOL_VALUES[op] or 0) >= k
  if want_bool ~= (type(got) == "boolean") then
    return nil, string.format("result %d over bool data is a %s, expected %s", k, math.type(got) or type(got),
      want_bool and "a boolean" or "a number")
  end
  if want_bool then return got and 1 or 0 end
  return got
end

--- Checks the outcome of pcall(reduction) against the expectation: true, or false and why. `got2` is
-- the second result of the ops that return two (argmin, argmax: the index; minmax: the maximum).
function R.check(op, ok, got, e, got2)
  if ok and e.in_dtype and R.DTYPES[e.in_dtype].bool and op ~= "and" and op ~= "or" then
    local why
    got, why = bool_result(op, got, 1)
    if got == nil then return false, why end
    if got2 ~= nil then
      got2, why = bool_result(op, got2, 2)
      if got2 == nil then return false, why end
    end
  end
  local good, why = R.OPS[op].check(ok, got, e, got2)
  if good then return true end
  return false, why or "wrong value"
end

---------------------------------------------------------------------------------------------------
-- the helpers above, for spec/support/ops_reference.lua (the reference of the other ops)

R.lib = {
  grow = grow, approx = approx, gamma = gamma, check_type = check_type, empty_error = empty_error,
  settle_error = settle_error, int_expect = int_expect, int_check = int_check,
  float_sum_reference = float_sum_reference, float_sum_check = float_sum_check,
  minmax_reference = minmax_reference, minmax_check = minmax_check,
}

-- The ops added later (count, mean, var, std, argmin, argmax, minmax, sumsq, norm, nansum, nanmin,
-- nanmax, nanmean, absmax, asum) have their reference in ops_reference.lua, which builds on this file: this module is
-- registered first so that its require of this one finds it, then its ops join R.OPS and R.OP_ORDER.
package.loaded[... or "support.fuzz_reference"] = R
package.loaded["support.fuzz_reference"] = package.loaded["support.fuzz_reference"] or R
local O = require "support.ops_reference"
for _, op in ipairs(O.OP_ORDER) do
  R.OPS[op] = O.OPS[op]
  R.OP_ORDER[#R.OP_ORDER + 1] = op
end

return R
