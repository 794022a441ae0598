--- Data and the check of a result against the reference.
--
-- Data: random on the device by seed, with ranges that keep each op meaningful: floats in [-1, 1)
-- (products in [0.999, 1.001) so they neither vanish nor overflow), integers over the dtype's whole
-- range for sum/min/max (sums wrap in 64 bits, exactly), small values for prod and and/or, and one zero
-- planted for and/or so that "all" is false and "any" depends on the rest.
--
-- Reference: the `cpu` variant, float32 sums and products with a float64 accumulator (M.reference_opts).
-- Integers and booleans, and min/max of floats, must match exactly. Float sums must lie within rtol of
-- the summed magnitude sum|x| (signed data cancels, so |result| alone would be too strict): float32
-- 1e-4, float64 1e-12. sum|x| is not computed (the API has no abs); its expectation n * E|x| for
-- uniform data is used, or |reference| when that is larger (small n). Float products: 1e-3 (float32)
-- or 1e-10 (float64) of |reference|.
local M = {}

local function is_float(dtype) return dtype == "float32" or dtype == "float64" end
M.is_float = is_float

--- The range of the data for one (dtype, op): lo, hi, or nothing for the dtype's whole range.
function M.range(dtype, op)
  if is_float(dtype) then
    if op == "prod" then return 0.999, 1.001 end
    if op == "and" or op == "or" then return 0, 1 end
    return -1, 1
  end
  if op == "and" or op == "or" then return 0, 3 end
  if op == "prod" then return 1, 3 end
end

--- Fills b with the data of (dtype, op, seed); the same arguments always give the same bits.
function M.fill(b, dtype, op, seed)
  local lo, hi = M.range(dtype, op)
  if lo then b:random(seed, lo, hi) else b:random(seed) end
  local n = #b
  if (op == "and" or op == "or") and n > 0 then b:set({ 0 }, (seed * 7919) % n + 1) end
  return b
end

--- The options of the reference reduction: the `cpu` variant, in float64 where float32 data would
-- otherwise be accumulated in float32.
function M.reference_opts(dtype, op)
  local wide = dtype == "float32" and (op == "sum" or op == "prod")
  return { op = op, variant = "cpu", acc = wide and "float64" or nil }
end

--- The expected sum of |x| over n uniform floats of the op's range.
function M.magnitude(n, dtype, op)
  local lo, hi = M.range(dtype, op)
  if not lo then return nil end
  local mean_abs = (lo < 0 and hi > 0) and (lo * lo + hi * hi) / (2 * (hi - lo)) or math.abs(lo + hi) / 2
  return n * mean_abs
end

--- rtol and what it is relative to ("magnitude", "value"), or 0 for an exact comparison.
function M.tolerance(dtype, op)
  if not is_float(dtype) then return 0 end
  if op == "sum" then return dtype == "float32" and 1e-4 or 1e-12, "magnitude" end
  if op == "prod" then return dtype == "float32" and 1e-3 or 1e-10, "value" end
  return 0
end

local function show(v)
  if math.type(v) == "float" then return string.format("%.9g", v) end
  return tostring(v)
end
M.show = show

--- ok, or false and a message: got against want for n elements of (dtype, op).
function M.check(got, want, n, dtype, op)
  if type(want) == "number" and want ~= want then
    if got ~= got then return true end
    return false, "got " .. show(got) .. ", expected NaN"
  end
  local rtol, basis = M.tolerance(dtype, op)
  if rtol == 0 then
    if got == want and math.type(got) == math.type(want) then return true end
    return false, string.format("got %s, expected %s (exact)", show(got), show(want))
  end
  if math.type(got) ~= "float" then
    return false, string.format("got %s (%s), expected a float", tostring(got), type(got))
  end
  local scale = math.abs(want)
  if basis == "magnitude" then scale = math.max(scale, M.magnitude(n, dtype, op) or 0) end
  scale = math.max(scale, 1e-300)
  local err = math.abs(got - want)
  if err <= rtol * scale then return true end
  return false, string.format("got %s, expected %s (error %.3g of the %s, tolerance %g)", show(got),
    show(want), err / scale, basis, rtol)
end

--- A reference that no correct result can match (the --inject-wrong-reference self-test).
-- Floats move by half of the comparison's scale, far beyond any tolerance.
function M.perturb(want, n, dtype, op)
  if type(want) == "boolean" then return not want end
  if math.type(want) == "integer" then return want + 1 end
  return want + math.max(1, math.abs(want), M.magnitude(n, dtype, op) or 0) * 0.5
end

return M
