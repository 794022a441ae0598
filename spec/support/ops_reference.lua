--[[
ops_reference.lua -- an independent Lua reference for the reductions added after sum, prod, min, max,
and, or: count, mean, var, std, argmin, argmax, minmax, sumsq, norm, nansum, nanmin, nanmax, nanmean,
absmax, asum.

Pure Lua: nothing here calls gpureduce. It shares fuzz_reference.lua's formats (R.F32, R.F64, R.to_f32,
R.acc_format), its exact float sum (a Shewchuk expansion with a bound valid for every summation order:
R.lib.float_sum_reference / float_sum_check) and its result checks of one value; the semantics of the ops
below are written here from the contract, not from the engine.

Interface (the same as fuzz_reference.lua's R.OPS, which includes these ops):
  O.OPS[op] = { reference = function(values, info) -> expectation,
                check = function(ok, got, expectation, got2) -> true | false, why }
  values: the elements as Lua values (integers, uint64 as the integer with the same bits; floats exact);
  info = { dtype =, acc = (nil or "float64"), ddof = (var, std; default 0), exact_scale = (a hint of the
  fuzz: every element is an integer times this power of two) }. `ok, got, got2` are what pcall around the
  reduction returned (got2: the second result of argmin/argmax/minmax). O.OP_ORDER lists the ops;
  O.expect / O.check (fuzz_reference's R.expect / R.check) wrap them; every expectation has .text (what
  is expected, for messages).

The contract, and how each result is checked (every float result of a float32 accumulator -- float32
data without acc = "float64" -- must also be a float32 value: results are rounded to the accumulator)
  count    the number of non-zero elements (NaN counts, -0.0 does not): a Lua integer, exact. Empty: 0.
  mean     integers: the exact 64-bit wrapping sum (Lua integer arithmetic wraps the same way), as a signed
           value for signed dtypes and unsigned for unsigned ones, converted to double (round to nearest)
           and divided by n in double: two roundings, fully determined, so checked EXACTLY.
           floats: the sum in the accumulator type (float32 data in float32 unless acc = "float64") divided
           by n and rounded to that type. With s the exact sum and B the sum bound of fuzz_reference.lua
           (gamma(n-1) sum|x| + u |s|, valid for any order; 0 when every partial sum is exact),
               |got - s/n| <= B / n + u |s/n| (1 + 2^-20) + 2 u64 |s/n| + 2 denorm_min
           (the quotient's rounding; 2 u64 pays for computing s/n in double here). NaN if any NaN or both
           infinities; +-inf if one infinity; +-inf or NaN also accepted where the finite sum may overflow.
           Empty: an error containing "of an empty buffer".
  nanmean  the mean of the non-NaN elements (k of them): floats as mean over those k; integers accumulate in
           float64 (the elements converted to double, then summed in any order: the same bound with
           u = 2^-53; exact where the sum of magnitudes stays below 2^53). All NaN: NaN. Empty: error.
  nansum   the sum with NaN elements taken as zero: integers exactly like sum (wrapping), floats the float
           sum bound of fuzz_reference.lua over the elements with NaN replaced by 0. Empty: 0 (0.0).
  nanmin / nanmax  min / max of the non-NaN elements, exact by value (-0.0 == 0.0); all NaN: NaN; integers
           exactly like min / max (uint64 unsigned). Empty: error.
  minmax   two results, min and max (exact by value, uint64 unsigned); any NaN makes both NaN. Empty: error.
  argmin / argmax  two results: the extreme value (an integer for integer dtypes, a float for floats) and
           its 1-based index; the FIRST occurrence wins ties; -0.0 and 0.0 tie (the first wins, and the
           value returned must be that element: its zero's sign is checked); if any NaN is present the
           first NaN wins (value NaN, its index) for both. uint64 compares unsigned. Exact. Empty: error.
  sumsq    integers: sum of x*x in 64-bit wrapping arithmetic (signed dtypes: a signed Lua integer, unsigned:
           the same bits), exact. Floats: every square rounded into the accumulator and summed in any order:
           every term goes through at most n roundings (its square, n - 1 additions), all terms are >= 0, so
               |got - sum x^2| <= gamma(n) sum x^2 + n denorm_min          (Higham, ch. 4)
           (n denorm_min: squares that underflow), plus 4 u64 sum x^2 for the double-precision reference
           (squares of float32 values are exact in double; float64 squares round once, then a compensated
           sum). The reference works on x * 2^k (a power of two chosen from max |x|, so that no square
           overflows or underflows double needlessly). Where sum x^2 (1 + gamma) may exceed the accumulator's
           largest value, +inf is accepted; where sum x^2 (1 - gamma) exceeds it, +inf is required. NaN if
           any NaN; +inf if an infinity (and no NaN). Empty: 0 (0.0).
  norm     sqrt(sum x^2) without overflow or underflow where sumsq would have either (Blue's scaled sums):
           each square lands, scaled by a power of two, in one of three sums of non-negative terms (each
           within gamma(n) of its exact value), which meet in a few more roundings. So
               |got - N| <= (gamma(n + 4) / 2 + 8 u + 4 u64) N (1 + 2^-20) + (sqrt(n) + 2) denorm_min
           (sqrt halves the relative error of the sum; 8 u covers the combination, the final sqrt and the
           rounding to the accumulator). Overflow of N itself: +inf required / accepted as for sumsq.
           Integers: in float64 (8- and 32-bit ones from the exact sum of squares, rounded once). NaN if
           any NaN, +inf if an infinity (and no NaN). Empty: 0.0.
  absmax   the largest |x|, exact. Floats: NaN if any NaN; an infinity gives +inf; otherwise max |x| as a
           Lua float, and a zero result is +0.0 (-0.0 and 0.0 alike give +0.0: its sign is checked).
           Integers: max |x| as a Lua integer, exact, from an unsigned accumulator of the dtype's width:
           |INT_MIN| is not negative (int8 -128 gives 128, int32 -2^31 gives 2147483648); int64's
           |-2^63| = 2^63 and uint64 values from 2^63 on come back as the Lua integer with the same bits
           (math.mininteger for 2^63), compared unsigned (math.ult) here. Empty: 0 (0.0 for floats).
  asum     the sum of |x|. Integers: the magnitudes (|INT64_MIN| = 2^63 as its bits) summed in 64-bit
           wrapping arithmetic, exact, a Lua integer with the bits of the unsigned sum. Floats: the float
           sum bound of fuzz_reference.lua over |x| (u of the accumulator: float32 data in float32 unless
           acc = "float64"); NaN if any NaN; +inf if an infinity (never NaN: every term is >= 0), or
           where the finite sum may overflow; a zero result must be +0.0. Empty: 0 (0.0).
  var / std  one-pass Welford/Chan in the accumulator type (64-bit integers: float64; float32: float32
           unless acc = "float64"; 8- and 32-bit integers: exact sums, far inside the bound, and
           checked to a few ulp in ops_spec's "exact sums" test): var = m2 / (n - ddof), std = sqrt(var); n - ddof <= 0 gives NaN; NaN in the data
           gives NaN; an infinity gives NaN or +inf. Empty: error. Checked against a two-pass reference
           in double (the mean from the exact expansion sum, then a compensated sum of (x - mean)^2), within
           a bound that holds for ANY tree of Welford updates and Chan combinations (a sequential Welford
           loop is the deepest tree, a balanced one the shallowest). Derivation (first order, n elements,
           A = max |x|, R = max x - min x, u of the accumulator, S the exact m2):
             * A node combining subsets a and b computes delta = M_b - M_a, M = M_a + delta nb / n,
               m2 = m2_a + m2_b + delta^2 na nb / n. Chan's identity makes the exact m2 of the union
               m2_a + m2_b + D^2 na nb / n with D the difference of the exact means.
             * Mean errors: a computed mean lies in [min, max], so each update adds at most
               E1 = 3 u (A + R) + 2 denorm_min (the addition, the product, the weight nb / n); a node's mean
               error is at most E1 times its height, and height <= (elements under it) - 1.
             * Their effect on m2: delta^2 - D^2 = 2 D (e_b - e_a) + (e_b - e_a)^2 with |D| <= R, so a node
               adds at most 2 R (h_a + h_b) E1 na nb / n <= 2 R E1 na nb (h_a + h_b <= n_node - 2); summed over
               the nodes, na nb counts every pair of elements once: R E1 n (n - 1). The second-order part is
               at most E1^2 n^2 sum min(na, nb) <= E1^2 n^3 log2 n, taken twice.
             * Rounding of the m2 terms: every term delta^2 na nb / n (>= 0) is made in at most 8 roundings
               (delta, its square, n, nb / n, na * wb, the product, two additions) and goes up the tree
               through at most 2 additions per level: within gamma(2 n + 8) relative, so gamma(2 n + 8) S.
             * Squares of tiny deltas may underflow: 2 n log2(n) denorm_min. 64-bit integers round when
               converted to double: 2 n u64 R A. The reference itself: 6 u64 S + 4 n u64^2 A^2.
           B(m2) is the sum of these terms (times 1 + 2^-20); var is checked within B / (n - ddof)
           + 3 u var + denorm_min (the division, and n - ddof rounded to the accumulator), and must not be
           negative (every m2 term is >= 0); std within [sqrt(var - Bv), sqrt(var + Bv)] widened by 2 u.
           When n R^2 or A + R may overflow the accumulator, +inf or NaN are accepted too. The bound is
           loose for float32 accumulators at large n (about 54 u n relative for data uniform in [-1, 1)),
           tight in float64 (4e-10 at n = 65537): what the specs check tightly runs with a float64
           accumulator (float64 data, integers, or float32 with acc = "float64"); yet it is far below
           the error of the textbook one-pass formula (sum x^2 - (sum x)^2 / n, relative error about
           u A^2 / (S / n)) on data with a large offset, which is what var must survive.
]]
local O = {}

local R                 -- fuzz_reference.lua, required at the end (it requires this file back)
local grow, approx, gamma, check_type, empty_error, settle_error, int_expect, int_check
local float_sum_reference, float_sum_check, minmax_reference, minmax_check

local inf, nan = math.huge, 0 / 0
local abs, sqrt, floor = math.abs, math.sqrt, math.floor
local U64 = 0x1p-53
local DMIN64 = 0x1p-1074

local function is_nan(x) return x ~= x end
-- By R.DTYPES' kinds, so that a new dtype is classed by its entry there, not by a list of names.
local function isfloat(dtype) return R.DTYPES[dtype].kind == "float" end
local function signed_dtype(dtype) return R.DTYPES[dtype].kind == "int" end

--- An element as a double, rounded to nearest like a C conversion (uint64: the value of its bits).
local function to_double(v, dtype)
  if math.type(v) == "float" then return v end
  if dtype == "uint64" then return (v >> 32) * 4294967296.0 + (v & 0xffffffff) end
  return v + 0.0
end
O.to_double = to_double

--- A 64-bit wrapping sum as a double: signed for signed dtypes, unsigned for the others.
local function wrapped_to_double(s, dtype)
  if signed_dtype(dtype) then return s + 0.0 end
  return (s >> 32) * 4294967296.0 + (s & 0xffffffff)
end

--- k such that 2^(k-1) <= a < 2^k, for a finite a > 0.
local function exponent_of(a)
  local k = floor(math.log(a, 2)) + 1
  while a >= 2.0 ^ k do k = k + 1 end         -- math.log may be off by one near powers of two
  while a < 2.0 ^ (k - 1) do k = k - 1 end
  return k
end

--- x * 2^k in two exact steps (each factor within the double range).
local function scale_by(x, k)
  local k1 = k // 2
  return (x * 2.0 ^ k1) * 2.0 ^ (k - k1)
end

local function fmt(v, dtype) return R.fmt(v, dtype) end

--- A float result of a float32 accumulator must be a float32 value (the contract rounds results to the
-- accumulator's type): true, or false and why.
local function in_format(got, f)
  if f and f.name == "float32" and got == got and got ~= inf and got ~= -inf and R.to_f32(got) ~= got then
    return false, string.format("%.17g is not a float32 value (the accumulator is float32)", got)
  end
  return true
end

local function two_results_text(a, b, dtype) return fmt(a, dtype) .. ", " .. fmt(b, dtype) end

---------------------------------------------------------------------------------------------------
-- count

local function count_reference(values)
  local k = 0
  for i = 1, #values do
    if values[i] ~= 0 then k = k + 1 end           -- NaN ~= 0 is true; -0.0 ~= 0 is false
  end
  return { kind = "exact", value = k, text = "exactly " .. k .. " non-zero elements" }
end

---------------------------------------------------------------------------------------------------
-- mean, nanmean: a quotient of a sum

--- The check of a float quotient sum / k, the sum described by `es` (fuzz_reference's float sum
-- expectation), in accumulator format `f`.
local function quotient_expect(es, k, f, what)
  local e = { sum = es, k = k, fmt = f }
  if es.nan then
    e.nan, e.kind, e.text = true, "nan", "NaN (" .. what .. ": " .. es.text .. ")"
  elseif es.inf then
    e.inf, e.overflow = es.inf, es.overflow
    e.kind = es.overflow and "inf or nan" or "inf"
    e.text = fmt(es.inf) .. (es.overflow and " or NaN" or "") .. " (" .. what .. ")"
  else
    local q = es.exact_approx / k
    e.value = q
    e.overflow = es.overflow
    local sum_bound = es.exact and 0 or es.bound
    e.bound = (sum_bound / k + f.u * abs(q) * (1 + 0x1p-20) + 2 * U64 * abs(q) + 2 * f.denorm_min) * (1 + 0x1p-20)
    e.kind = es.overflow and "bound or overflow" or "bound"
    e.text = string.format("%s within %.3g (%s; the sum %s; divided by %d, u = 2^-%d)%s", fmt(q), e.bound, what,
      es.exact and "exact in every order" or string.format("within %.3g", sum_bound), k, f.p,
      es.overflow and "; the sum may overflow: +-inf or NaN accepted" or "")
  end
  return e
end

local function quotient_check(got, e)
  local tok, twhy = check_type(got, "float")
  if not tok then return false, twhy end
  tok, twhy = in_format(got, e.fmt)
  if not tok then return false, twhy end
  if e.nan then return is_nan(got), "expected NaN" end
  if e.inf then
    if got == e.inf or (e.overflow and is_nan(got)) then return true end
    return false, "wrong infinity"
  end
  if is_nan(got) or got == inf or got == -inf then
    if e.overflow then return true end
    return false, "non-finite result without possible overflow"
  end
  local err = abs(got - e.value)
  if err <= e.bound then return true end
  return false, string.format("error %.6g > bound %.6g (%.3g times the bound)", err, e.bound, err / e.bound)
end

local function mean_reference(values, info)
  local n, dtype = #values, info.dtype
  if n == 0 then return empty_error("mean") end
  if not isfloat(dtype) then
    local s = 0
    for i = 1, n do s = s + values[i] end          -- wraps modulo 2^64 like the engine's accumulator
    local q = wrapped_to_double(s, dtype) / n
    return { kind = "exact", float_exact = true, value = q,
      text = string.format("exactly %s (the wrapped 64-bit sum %s / %d in double)", fmt(q),
        fmt(s, signed_dtype(dtype) and dtype or "uint64"), n) }
  end
  local es = float_sum_reference(values, info)
  return quotient_expect(es, n, R.acc_format(dtype, info.acc), "mean of " .. n)
end

local function nanmean_reference(values, info)
  local n, dtype = #values, info.dtype
  if n == 0 then return empty_error("nanmean") end
  local kept, k = {}, 0
  if isfloat(dtype) then
    for i = 1, n do
      local x = values[i]
      if x == x then k = k + 1; kept[k] = x end
    end
    if k == 0 then return { kind = "nan", nan = true, fmt = R.acc_format(dtype, info.acc), text = "NaN (every element is NaN)" } end
    local es = float_sum_reference(kept, { dtype = dtype, acc = info.acc, exact_scale = info.exact_scale })
    return quotient_expect(es, k, R.acc_format(dtype, info.acc), string.format("mean of the %d non-NaN of %d", k, n))
  end
  -- integers: in float64, the elements converted to double and summed in any order
  local all_small = true
  for i = 1, n do
    local x = to_double(values[i], dtype)
    kept[i] = x
    if abs(x) >= 0x1p53 then all_small = false end
  end
  local es = float_sum_reference(kept, { dtype = "float64", exact_scale = all_small and 1.0 or nil })
  return quotient_expect(es, n, R.F64, "mean in float64 of " .. n .. " integers")
end

local function mean_check(ok, got, e)
  local done, good, why = settle_error(ok, got, e)
  if done then return good, why end
  if e.float_exact then
    local tok, twhy = check_type(got, "float")
    if not tok then return false, twhy end
    return got == e.value, "wrong value"
  end
  return quotient_check(got, e)
end

---------------------------------------------------------------------------------------------------
-- nansum

local function nansum_reference(values, info)
  local dtype = info.dtype
  if not isfloat(dtype) then
    local s = 0
    for i = 1, #values do s = s + values[i] end
    return int_expect(s, dtype)
  end
  local clean, nans = {}, 0
  for i = 1, #values do
    local x = values[i]
    if x ~= x then x = 0.0; nans = nans + 1 end
    clean[i] = x
  end
  local e = float_sum_reference(clean, info)
  if nans > 0 then e.text = e.text .. string.format(" (%d NaN taken as 0)", nans) end
  return e
end

local function nansum_check(ok, got, e)
  if not e.fmt then return int_check(ok, got, e) end
  if ok and math.type(got) == "float" then
    local tok, twhy = in_format(got, e.fmt)
    if not tok then return false, twhy end
  end
  return float_sum_check(ok, got, e)
end

---------------------------------------------------------------------------------------------------
-- nanmin, nanmax, minmax, argmin, argmax

local function nan_extreme_reference(is_min)
  local plain = nil
  return function(values, info)
    plain = plain or minmax_reference(is_min)
    local n, dtype = #values, info.dtype
    local name = is_min and "nanmin" or "nanmax"
    if n == 0 then return empty_error(name) end
    if not isfloat(dtype) then return plain(values, info) end
    local kept, k = {}, 0
    for i = 1, n do
      local x = values[i]
      if x == x then k = k + 1; kept[k] = x end
    end
    if k == 0 then return { kind = "nan", float = true, nan = true, text = "NaN (every element is NaN)" } end
    local e = plain(kept, info)
    if k < n then e.text = e.text .. string.format(" (%d NaN skipped)", n - k) end
    return e
  end
end

local function value_type(dtype) return isfloat(dtype) and "float" or "integer" end

local function minmax_pair_reference(values, info)
  local n, dtype = #values, info.dtype
  if n == 0 then return empty_error("minmax") end
  local lo, hi = values[1], values[1]
  local unsigned = dtype == "uint64"
  for i = 1, n do
    local x = values[i]
    if x ~= x then
      return { kind = "nan", nan = true, dtype = dtype, text = "NaN, NaN (a NaN at [" .. i .. "])" }
    end
    if unsigned then
      if math.ult(x, lo) then lo = x end
      if math.ult(hi, x) then hi = x end
    else
      if x < lo then lo = x end
      if x > hi then hi = x end
    end
  end
  return { kind = "exact", lo = lo, hi = hi, dtype = dtype, text = "exactly " .. two_results_text(lo, hi, dtype) }
end

local function minmax_pair_check(ok, got, e, got2)
  local done, good, why = settle_error(ok, got, e)
  if done then return good, why end
  local want = value_type(e.dtype)
  local tok, twhy = check_type(got, want)
  if not tok then return false, "min: " .. twhy end
  tok, twhy = check_type(got2, want)
  if not tok then return false, "max (second result): " .. twhy end
  if e.nan then
    if is_nan(got) and is_nan(got2) then return true end
    return false, "expected NaN for both"
  end
  if got ~= e.lo then return false, "wrong min" end
  if got2 ~= e.hi then return false, "wrong max (second result)" end
  return true
end

local function arg_reference(is_min)
  local name = is_min and "argmin" or "argmax"
  return function(values, info)
    local n, dtype = #values, info.dtype
    if n == 0 then return empty_error(name) end
    local unsigned = dtype == "uint64"
    local best, at = values[1], 1
    for i = 1, n do
      local x = values[i]
      if x ~= x then
        return { kind = "nan", nan = true, index = i, dtype = dtype,
          text = string.format("NaN at [%d] (the first NaN)", i) }
      end
      local better
      if unsigned then
        if is_min then better = math.ult(x, best) else better = math.ult(best, x) end
      elseif is_min then
        better = x < best
      else
        better = x > best
      end
      if better then best, at = x, i end
    end
    local ties = 0
    for i = at, n do if values[i] == best then ties = ties + 1 end end
    return { kind = "exact", value = best, index = at, dtype = dtype,
      text = string.format("%s at [%d]%s", fmt(best, dtype), at,
        ties > 1 and string.format(" (the first of %d equal values)", ties) or "") }
  end
end

local function same_zero_sign(a, b) return a ~= 0 or (1 / a > 0) == (1 / b > 0) end

local function arg_check(ok, got, e, got2)
  local done, good, why = settle_error(ok, got, e)
  if done then return good, why end
  local tok, twhy = check_type(got, value_type(e.dtype))
  if not tok then return false, "value: " .. twhy end
  tok, twhy = check_type(got2, "integer")
  if not tok then return false, "index (second result): " .. twhy end
  if e.nan then
    if not is_nan(got) then return false, "expected the value NaN" end
    if got2 ~= e.index then return false, "wrong index (not the first NaN)" end
    return true
  end
  if got2 ~= e.index then return false, "wrong index" end
  if got ~= e.value then return false, "wrong value" end
  if math.type(got) == "float" and not same_zero_sign(e.value, got) then
    return false, "the value is not the element at the index (the sign of its zero differs)"
  end
  return true
end

---------------------------------------------------------------------------------------------------
-- sumsq and norm: sums of squares, scaled by a power of two

--- The scaled sum of squares of the (double) elements: returns has_nan, has_inf, n, S', k with
-- sum x^2 = S' * 2^(-2k) (S' from a compensated sum of (x 2^k)^2, max |x 2^k| in [1/2, 1)).
local function scaled_squares(xs)
  local n = #xs
  local has_nan, has_inf, A = false, false, 0.0
  for i = 1, n do
    local x = xs[i]
    if x ~= x then has_nan = true
    elseif x == inf or x == -inf then has_inf = true
    else
      local a = abs(x)
      if a > A then A = a end
    end
  end
  if has_nan or has_inf or A == 0 then return has_nan, has_inf, A, 0.0, 0 end
  local k = -exponent_of(A)
  local k1 = k // 2
  local s1, s2 = 2.0 ^ k1, 2.0 ^ (k - k1)
  local s, c = 0.0, 0.0
  for i = 1, n do
    local y = (xs[i] * s1) * s2
    local t2 = y * y
    local t = s + t2
    if s >= t2 then c = c + ((s - t) + t2) else c = c + ((t2 - t) + s) end
    s = t
  end
  return false, false, A, s + c, k
end

local function doubles_of(values, dtype)
  if isfloat(dtype) then return values end
  local xs = {}
  for i = 1, #values do xs[i] = to_double(values[i], dtype) end
  return xs
end

local function sumsq_reference(values, info)
  local n, dtype = #values, info.dtype
  if not isfloat(dtype) then
    local s = 0
    for i = 1, n do local x = values[i]; s = s + x * x end     -- wraps like the 64-bit accumulator
    return int_expect(s, dtype)
  end
  local f = R.acc_format(dtype, info.acc)
  if n == 0 then return { kind = "zero", float = true, value = 0.0, text = "0.0 (sum of squares of nothing)" } end
  local has_nan, has_inf, A, S, k = scaled_squares(values)
  if has_nan then return { kind = "nan", float = true, nan = true, text = "NaN (a NaN in the data)" } end
  if has_inf then return { kind = "inf", float = true, pinf = true, text = "+inf (an infinity in the data)" } end
  if A == 0 then return { kind = "zero", float = true, value = 0.0, text = "exactly 0.0 (every element is zero)" } end
  local rel = (gamma(n, f.u) + 4 * U64) * (1 + 0x1p-20)
  local want = scale_by(S, -2 * k)
  local lo = scale_by(S * (1 - rel), -2 * k) - n * f.denorm_min - 4 * DMIN64
  local hi = scale_by(S * (1 + rel), -2 * k) + n * f.denorm_min + 4 * DMIN64
  local e = { float = true, value = want, lo = lo, hi = hi, may_inf = hi >= f.max, must_inf = lo > f.max, fmt = f }
  e.kind = e.must_inf and "inf" or e.may_inf and "bound or inf" or "bound"
  e.text = string.format("%s in [%.17g, %.17g] (n = %d, u = 2^-%d%s)", fmt(want), lo, hi, n, f.p,
    e.must_inf and "; overflows the accumulator: +inf required" or e.may_inf and "; may overflow: +inf accepted" or "")
  return e
end

--- Checks a float against an interval expectation { nan | pinf | value = 0 exact | lo, hi, may_inf, must_inf }.
local function interval_check(got, e)
  local tok, twhy = check_type(got, "float")
  if not tok then return false, twhy end
  tok, twhy = in_format(got, e.fmt)
  if not tok then return false, twhy end
  if e.nan then return is_nan(got), "expected NaN" end
  if e.pinf then return got == inf, "expected +inf" end
  if e.lo == nil then return got == e.value, "wrong value" end
  if is_nan(got) then return false, "NaN without a NaN in the data" end
  if got == inf then
    if e.may_inf then return true end
    return false, "+inf without possible overflow"
  end
  if e.must_inf then return false, "finite, but the exact value overflows the accumulator" end
  if got < 0 then return false, "negative" end
  if got < e.lo then return false, string.format("below the bound by %.3g (relative %.3g)", e.lo - got, (e.lo - got) / abs(e.value)) end
  if got > e.hi then return false, string.format("above the bound by %.3g (relative %.3g)", got - e.hi, (got - e.hi) / abs(e.value)) end
  return true
end

local function sumsq_check(ok, got, e)
  if not e.float then return int_check(ok, got, e) end
  local done, good, why = settle_error(ok, got, e)
  if done then return good, why end
  return interval_check(got, e)
end

local function norm_reference(values, info)
  local n, dtype = #values, info.dtype
  local f = isfloat(dtype) and R.acc_format(dtype, info.acc) or R.F64
  if n == 0 then return { kind = "zero", value = 0.0, text = "0.0 (norm of nothing)" } end
  local has_nan, has_inf, A, S, k = scaled_squares(doubles_of(values, dtype))
  if has_nan then return { kind = "nan", nan = true, text = "NaN (a NaN in the data)" } end
  if has_inf then return { kind = "inf", pinf = true, text = "+inf (an infinity in the data)" } end
  if A == 0 then return { kind = "zero", value = 0.0, text = "exactly 0.0 (every element is zero)" } end
  local root = sqrt(S)
  local rel = (gamma(n + 4, f.u) / 2 + 8 * f.u + 4 * U64) * (1 + 0x1p-20)
  local slack = (sqrt(n) + 2) * f.denorm_min
  local want = scale_by(root, -k)
  local lo = scale_by(root * (1 - rel), -k) - slack
  local hi = scale_by(root * (1 + rel), -k) + slack
  local e = { value = want, lo = lo, hi = hi, may_inf = hi >= f.max, must_inf = lo > f.max, fmt = f }
  e.kind = e.must_inf and "inf" or e.may_inf and "bound or inf" or "bound"
  e.text = string.format("%s in [%.17g, %.17g] (n = %d, u = 2^-%d, relative %.3g%s)", fmt(want), lo, hi, n, f.p, rel,
    e.must_inf and "; the norm overflows the accumulator: +inf required" or e.may_inf and "; may overflow: +inf accepted" or "")
  return e
end

local function norm_check(ok, got, e)
  local done, good, why = settle_error(ok, got, e)
  if done then return good, why end
  return interval_check(got, e)
end

---------------------------------------------------------------------------------------------------
-- var and std

--- What var and std share for one data set: the exact m2 (two-pass, in double, scaled where the data is
-- huge) and the bound of any Welford/Chan tree (see the top of this file). Cached on the values table.
local welford_cache = setmetatable({}, { __mode = "k" })

local function welford_stats(values, dtype, f)
  local per = welford_cache[values]
  if not per then per = {}; welford_cache[values] = per end
  local key = dtype .. "/" .. f.name
  if per[key] then return per[key] end
  local n = #values
  local xs = doubles_of(values, dtype)
  local st = { n = n }
  local lo, hi, A = inf, -inf, 0.0
  for i = 1, n do
    local x = xs[i]
    if x ~= x then st.has_nan = true
    elseif x == inf or x == -inf then st.has_inf = true
    else
      if x < lo then lo = x end
      if x > hi then hi = x end
      local a = abs(x)
      if a > A then A = a end
    end
  end
  per[key] = st
  if st.has_nan or st.has_inf then return st end
  -- huge data: work on x 2^-200 (exact but for bits below 2^-1074, negligible here); m2 scales by 2^-400
  local sc = A * n >= 0x1p1000 and 0x1p-200 or 1.0
  local ex, m = {}, 0
  for i = 1, n do m = grow(ex, m, xs[i] * sc) end
  local mu = approx(ex, m) / n
  local s, c = 0.0, 0.0
  for i = 1, n do
    local d = xs[i] * sc - mu
    local t2 = d * d
    local t = s + t2
    if s >= t2 then c = c + ((s - t) + t2) else c = c + ((t2 - t) + s) end
    s = t
  end
  local S = s + c                              -- m2 * sc^2
  local Rg, Ag = (hi - lo) * sc, A * sc        -- spread and magnitude, scaled
  local u, dmin = f.u, f.denorm_min
  local E1 = 3 * u * (Ag + Rg) + 2 * dmin
  local lg = math.log(n + 1, 2)
  local B = gamma(2 * n + 8, u) * S
    + Rg * E1 * n * (n - 1)
    + 2 * E1 * E1 * n * n * n * lg
    + 2 * n * lg * dmin
    + 6 * U64 * S + 4 * n * U64 * U64 * Ag * Ag
  if dtype == "int64" or dtype == "uint64" then B = B + 2 * n * U64 * Rg * Ag end
  st.S, st.B, st.sc = S, B * (1 + 0x1p-20), sc
  st.A, st.R = A, hi - lo
  -- overflow in the accumulator: n R^2 (m2) or A + R (means, deltas) near its largest value
  st.may_overflow = (hi - lo) * (hi - lo) * n >= f.max * 0.25 or (A + (hi - lo)) * 4 >= f.max
  return st
end

local function var_reference(want_std)
  local name = want_std and "std" or "var"
  return function(values, info)
    local n, dtype = #values, info.dtype
    if n == 0 then return empty_error(name) end
    local ddof = info.ddof or 0
    local f = isfloat(dtype) and R.acc_format(dtype, info.acc) or R.F64
    local st = welford_stats(values, dtype, f)
    local e = { fmt = f, n = n, ddof = ddof }
    if n - ddof <= 0 then
      e.nan, e.kind, e.text = true, "nan", string.format("NaN (n - ddof = %d - %d <= 0)", n, ddof)
      return e
    end
    if st.has_nan then
      e.nan, e.kind, e.text = true, "nan", "NaN (a NaN in the data)"
      return e
    end
    if st.has_inf then
      e.inf_or_nan, e.kind, e.text = true, "inf or nan", "+inf or NaN (an infinity in the data)"
      return e
    end
    local dof = n - ddof
    local sc2 = st.sc * st.sc
    local var = st.S / dof / sc2
    local Bv = (st.B / dof + 3 * f.u * (st.S / dof)) / sc2 + f.denorm_min
    e.may_overflow = st.may_overflow
    if want_std then
      local vlo, vhi = var - Bv, var + Bv
      if vlo < 0 then vlo = 0 end
      e.value = sqrt(var)
      e.lo = sqrt(vlo) * (1 - 2 * f.u) - f.denorm_min
      e.hi = sqrt(vhi) * (1 + 2 * f.u) + f.denorm_min
    else
      e.value, e.lo, e.hi = var, var - Bv, var + Bv
    end
    e.kind = e.may_overflow and "bound or overflow" or "bound"
    e.text = string.format("%s in [%.17g, %.17g] (n = %d, ddof = %d, u = 2^-%d, max|x| = %.6g, spread = %.6g%s)",
      fmt(e.value), e.lo, e.hi, n, ddof, f.p, st.A, st.R,
      e.may_overflow and "; may overflow: +inf or NaN accepted" or "")
    return e
  end
end

local function var_check(ok, got, e)
  local done, good, why = settle_error(ok, got, e)
  if done then return good, why end
  local tok, twhy = check_type(got, "float")
  if not tok then return false, twhy end
  tok, twhy = in_format(got, e.fmt)
  if not tok then return false, twhy end
  if e.nan then return is_nan(got), "expected NaN" end
  if e.inf_or_nan then return is_nan(got) or got == inf, "expected +inf or NaN" end
  if is_nan(got) or got == inf or got == -inf then
    if e.may_overflow then return true end
    return false, "non-finite result without possible overflow"
  end
  if got < 0 then return false, "negative" end
  if got < e.lo then return false, string.format("below the bound by %.3g (relative %.3g)", e.lo - got, (e.lo - got) / e.value) end
  if got > e.hi then return false, string.format("above the bound by %.3g (relative %.3g)", got - e.hi, (got - e.hi) / e.value) end
  return true
end

---------------------------------------------------------------------------------------------------
-- absmax and asum: absolute values

--- |x| of an element: floats by math.abs (NaN stays NaN, -0.0 becomes 0.0 below); signed integers negated
-- in Lua's wrapping arithmetic (so -INT64_MIN is INT64_MIN: the bits of 2^63); uint64 values (negative Lua
-- integers from 2^63 on) are their own magnitude.
local function magnitude(x, dtype)
  if math.type(x) == "float" then
    local a = abs(x)
    if a == 0 then return 0.0 end
    return a
  end
  if signed_dtype(dtype) and x < 0 then return -x end
  return x
end

local function absmax_reference(values, info)
  local n, dtype = #values, info.dtype
  if isfloat(dtype) then
    local best = 0.0
    for i = 1, n do
      local x = values[i]
      if x ~= x then return { kind = "nan", float = true, nan = true, text = "NaN (a NaN at [" .. i .. "])" } end
      local a = magnitude(x, dtype)
      if a > best then best = a end
    end
    return { kind = "exact", float = true, value = best,
      text = "exactly " .. fmt(best) .. (n == 0 and " (absmax of nothing)" or "") }
  end
  local best = 0
  for i = 1, n do
    local a = magnitude(values[i], dtype)
    if math.ult(best, a) then best = a end          -- unsigned: |INT64_MIN| and large uint64 are "negative"
  end
  return { kind = "exact", value = best, dtype = dtype,
    text = "exactly " .. fmt(best, "uint64") .. (n == 0 and " (absmax of nothing)" or "") }
end

local function positive_zero(got)
  if math.type(got) == "float" and got == 0 and 1 / got < 0 then return false, "-0.0: an absolute value is +0.0" end
  return true
end

--- max's check (exact by value, NaN for NaN), and the sign of a zero
local function absmax_check(ok, got, e)
  local good, why = minmax_check(ok, got, e)
  if not good or not ok or not e.float then return good, why end
  return positive_zero(got)
end

local function asum_reference(values, info)
  local dtype = info.dtype
  local a = {}
  for i = 1, #values do a[i] = magnitude(values[i], dtype) end
  if not isfloat(dtype) then
    local s = 0
    for i = 1, #a do s = s + a[i] end                -- wraps modulo 2^64 like the engine's accumulator
    return int_expect(s, "uint64")
  end
  return float_sum_reference(a, info)
end

local function asum_check(ok, got, e)
  local good, why = nansum_check(ok, got, e)
  if not good or not ok then return good, why end
  return positive_zero(got)
end

---------------------------------------------------------------------------------------------------
-- the ops table

local function exact_int_check(ok, got, e)
  local done, good, why = settle_error(ok, got, e)
  if done then return good, why end
  local tok, twhy = check_type(got, "integer")
  if not tok then return false, twhy end
  return got == e.value, "wrong value"
end

O.OPS = {
  count = { reference = count_reference, check = exact_int_check },
  mean = { reference = mean_reference, check = mean_check },
  var = { reference = var_reference(false), check = var_check },
  std = { reference = var_reference(true), check = var_check },
  argmin = { reference = arg_reference(true), check = arg_check },
  argmax = { reference = arg_reference(false), check = arg_check },
  minmax = { reference = minmax_pair_reference, check = minmax_pair_check },
  sumsq = { reference = sumsq_reference, check = sumsq_check },
  norm = { reference = norm_reference, check = norm_check },
  nansum = { reference = nansum_reference, check = nansum_check },
  nanmin = { reference = nan_extreme_reference(true), check = function(...) return minmax_check(...) end },
  nanmax = { reference = nan_extreme_reference(false), check = function(...) return minmax_check(...) end },
  nanmean = { reference = nanmean_reference, check = mean_check },
  absmax = { reference = absmax_reference, check = absmax_check },
  asum = { reference = asum_reference, check = asum_check },
}
O.OP_ORDER = { "count", "mean", "var", "std", "argmin", "argmax", "minmax", "sumsq", "norm", "nansum", "nanmin",
  "nanmax", "nanmean", "absmax", "asum" }

--- Ops with two results; ops whose empty input gives a value (the others raise); ops that take
-- acc = "float64" on float32 data (sum-like and float-result ops).
O.TWO_RESULTS = { argmin = true, argmax = true, minmax = true }
O.EMPTY_GIVES_VALUE = { count = true, sumsq = true, norm = true, nansum = true, absmax = true, asum = true }
O.TAKES_FLOAT64_ACC = { mean = true, var = true, std = true, sumsq = true, norm = true, nansum = true, nanmean = true,
  asum = true }

-- fuzz_reference.lua requires this file at its end: registering it first keeps one instance of each
package.loaded["support.ops_reference"] = O
R = require "support.fuzz_reference"
-- R.OPS holds these ops too (fuzz_reference joins them): its expect and check serve them
O.expect, O.check = R.expect, R.check
do
  local L = R.lib
  grow, approx, gamma, check_type, empty_error = L.grow, L.approx, L.gamma, L.check_type, L.empty_error
  settle_error, int_expect, int_check = L.settle_error, L.int_expect, L.int_check
  float_sum_reference, float_sum_check = L.float_sum_reference, L.float_sum_check
  minmax_reference, minmax_check = L.minmax_reference, L.minmax_check
end

return O
