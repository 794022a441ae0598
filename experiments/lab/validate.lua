--- Data, and the check of a result against an independent reference within a bound from error analysis.
--
-- Data: random on the device by seed, with ranges that keep each op meaningful: floats in [-1, 1)
-- (products in [0.999, 1.001) so they neither vanish nor overflow), integers over the dtype's whole
-- range for sum/min/max (sums wrap in 64 bits, exactly), small values for prod and and/or, and one zero
-- planted for and/or so that "all" is false and "any" depends on the rest.
--
-- Reference: lab/reference.lua reads the data back once and computes, in Lua, the exact sums S = sum x
-- and Q = sum x^2, A = sum |x|, X = max |x| and the integer results; no engine call, no variant compared
-- with another. Integers (sums wrap in 64 bits), integer means (the exact sum, to double, over n),
-- min/max/nanmin/nanmax, argmin/argmax (value and first index), minmax, absmax, integer asum, count and
-- and/or must match exactly. Float results must lie within a bound B of the exact value:
--
--   u    the unit roundoff of the accumulator (gr.plan's acc): 2^-24 (float32), 2^-53 (float64)
--   k    the depth of the reduction tree: the most roundings on any element's path (M.depth, from the
--        launch shape gr.plan reports). In each device pass of m inputs over p blocks of T threads, a
--        thread folds its share of at most ceil(m / (p T)) + 64 elements (the 64: whole vectors and
--        unrolled loads) and the block folds its T thread values in any order (tree, shuffles or shared
--        atomics): ceil(m / (p T)) + 64 + T. The single finish folds the p partials in the last block
--        (ceil(p / T) + T), or with global atomics in any order (p, variants that give not_guaranteed).
--        A CPU pass of m values (host variants, hybrid and host finishes) may add in any order: m - 1
--        (cpu_pairwise's recursive pairs, its definition, 2 ceil(log2 m) + 2). CUB and Thrust report no
--        shape: at least min(tiles, SMs) blocks of at least 32 threads with at most 32 items per thread
--        and 1024 threads, a second kernel over at most 160 blocks per SM: ceil(m / (32 SMs)) +
--        min(ceil(m / 1024), 5 SMs + 1) + 2112. A user kernel folds its block in any order.
--   phi(k) = k u e^(k u), a bound on (1 + u)^k - 1 that holds for every k (no k u < 1 condition).
--
--   sum, nansum   an element is multiplied by at most k factors (1 + d), |d| <= u, whatever the order
--                 (Higham, Accuracy and Stability, 4.2): B = phi(k) A
--   asum          the same sum over |x| (its exact value SA; every term >= 0): B = phi(k) A
--   mean, nanmean the sum over n, rounded once more: B = phi(k) A / n + r (|mean| + phi(k) A / n),
--                 r = u + 2^-53 (a double quotient rounded to the accumulator)
--   sumsq         each square rounds once, then a sum of positive terms: B = phi(k + 1) Q
--   norm          sqrt of that sum: B = dQ / sqrt(Q) + r (sqrt(Q) + dQ / sqrt(Q)) + 8 u sqrt(Q),
--                 dQ = phi(k + 1) Q (the 8 u: Blue's join of the scaled sums)
--   var, std      Welford updates and Chan merges (n = na + nb, d = mb - ma, M = Ma + Mb + d^2 na nb / n),
--                 M the sum of squared deviations, exact from S and Q. A merge rounds its mean by at most
--                 11 u X and its M by 2 u (Ma + Mb) + 7 u T (T = d^2 na nb / n); errors in the means
--                 reach M through d: 2 |d| |dd| na nb / n with |dd| <= (22 k + 2) u X. Over the tree,
--                 the Ma + Mb of one level sum to at most M, the T of all merges to M, and
--                 sum |d| na nb / n <= sqrt(M) sqrt(n log2 n) (Cauchy-Schwarz; sum min(na, nb) <= n log2 n):
--                 dM = phi(2 k + 7) M + phi(44 k + 4) X sqrt(M n log2 n);
--                 var = M / (n - ddof): B = dM / dof (1 + u) + (r + u) (var + dM / dof);
--                 std = sqrt(var): B = Bv / (sqrt(var) + sqrt(var - Bv)) + r (std + ...)
--                 Integers of up to 32 bits form var from exact integer sums (docs/api.md), rounded a
--                 few times in double: B = (phi(3) M + phi(4) n) / dof + phi(2) var; norm phi(2) sqrt(Q).
--   prod          every one of the n - 1 multiplications rounds once, whatever the order:
--                 B = (phi(n - 1) + phi(n - 1, 2^-53)) |P| / (1 - phi(n - 1, 2^-53)), P in doubles in Lua
-- 64-bit integers reach var, std, norm and nanmean as float64 values: the reference sums those values
-- (their rounding is the engine's, not an error of the reduction). Every float bound adds the
-- reference's own rounding to double (2^-53 of it) and a margin of 2^-40 of itself. The analysis
-- assumes no overflow or underflow on the way (the lab's data has neither).
--
-- The bounds hold for any order the analysis allows -- trees, grid-stride loops, atomics in any order,
-- several passes, CPU finishes -- so they are loose where the order is unknown: a float32 sum on the
-- `cpu` variant (k = n - 1) is checked to within about n 2^-24 sum|x|.
local errors = require "lab.errors"
local reference = require "lab.reference"

local M = {}

local function is_float(dtype) return (reference.DTYPES[dtype] or {}).float or false end
M.is_float = is_float
M.kind = reference.kind

--- The range of the data for one (dtype, op): lo, hi, or nothing for the dtype's whole range.
function M.range(dtype, op)
  if is_float(dtype) then
    if op == "prod" then return 0.999, 1.001 end
    if op == "and" or op == "or" then return 0, 1 end
    return -1, 1
  end
  if (reference.DTYPES[dtype] or {}).bool then return end     -- false and true
  if op == "and" or op == "or" then return 0, 3 end
  if op == "prod" then return 1, 3 end
end

--- Fills b with the data of (dtype, op, seed); the same arguments always give the same bits, and ops of
-- one kind (M.kind) get the same data.
function M.fill(b, dtype, op, seed)
  local lo, hi = M.range(dtype, op)
  if lo then b:random(seed, lo, hi) else b:random(seed) end
  local n = #b
  if (op == "and" or op == "or") and n > 0 then b:set({ 0 }, (seed * 7919) % n + 1) end
  return b
end

--- The reference facts of b's data for `ops` (an op or a list of ops of one kind): read back once.
function M.facts(b, dtype, ops)
  if type(ops) ~= "table" then ops = { ops } end
  return reference.of_buffer(b, dtype, reference.needs(ops))
end

M.UNIT = { float32 = 2.0 ^ -24, float64 = 2.0 ^ -53 }

local function ceil_div(a, b) return (a + b - 1) // b end

local function ceil_log2(m)
  local l = 0
  while (1 << l) < m do l = l + 1 end
  return l
end

--- Whether a variant hides its launch shape from the plan (CUB, Thrust: a fixed block of 1 on the GPU).
local function opaque(v)
  local needs_cuda = false
  for _, x in ipairs(v.needs or {}) do needs_cuda = needs_cuda or x == "cuda" end
  return needs_cuda and v.block and v.block.max == 1 and not v.user
end

--- The depth k of the reduction a plan describes (gr.plan of the same call): the most roundings any
-- element's value goes through. `v` is the plan's variant's registry entry (gr.variant), `sms` the
-- device's SM count (CUB's and Thrust's model). Without a plan: n - 1 (any order).
function M.depth(plan, v, sms, n)
  if not plan or not v then return math.max(0, (n or 1) - 1) end
  local passes, k = plan.passes, 0
  for i, p in ipairs(passes) do
    local m = p.elements
    if p.where == "host" then
      if i == 1 and v.name == "cpu_pairwise" then k = k + 2 * ceil_log2(m) + 2
      else k = k + math.max(0, m - 1) end
    elseif opaque(v) then
      local s = math.max(1, sms or 1)
      k = k + ceil_div(m, 32 * s) + math.min(ceil_div(m, 1024), 5 * s + 1) + 2112
    elseif v.user then
      k = k + ceil_div(m, math.max(1, p.blocks)) + 64 * p.block
    else
      k = k + ceil_div(m, math.max(1, p.blocks) * p.block) + 64 + p.block
    end
  end
  local last = passes[#passes]
  if plan.finish == "single" and last and last.where == "device" and last.blocks > 1 and not opaque(v) then
    if v.determinism == "not_guaranteed" or v.user then k = k + last.blocks
    else k = k + ceil_div(last.blocks, last.block) + last.block end
  end
  return k
end

--- phi(k, u) = k u e^(k u) >= (1 + u)^k - 1.
local function phi(k, u) return k * u * math.exp(k * u) end
M.phi = phi

local D = 2.0 ^ -53

local function show(v)
  if math.type(v) == "float" then return string.format("%.9g", v) end
  return tostring(v)
end
M.show = show

-- the value, the exact facts it is formed from, with NaN elements left out for the nan ops
local function float_facts(f, op)
  if op == "nansum" or op == "nanmean" then return { n = f.n - f.nan, S = f.S_nan, Q = f.Q } end
  if op == "asum" then return { n = f.n, S = f.SA, Q = f.Q } end
  return f
end

local function sqrt_bound(v, bv, r)
  local s = math.sqrt(v)
  if s == 0 then return math.sqrt(bv) * (1 + r) end
  local b = bv / (s + math.sqrt(math.max(0, v - bv)))
  return b + r * (s + b)
end

--- The expected result of op over the facts f, as {value =, value2 =, bound =} (bound 0: exact), for a
-- reduction of depth k accumulated in `acc` (the plan's accumulator name) with `ddof`.
local expect_of

-- The ops whose results are elements of the data: over bool data Lua booleans (the reference's facts
-- count with the bytes 0 and 1); 2: both results (minmax), 1: the first (argmin's second is an index).
local ELEMENTS = { min = 1, max = 1, nanmin = 1, nanmax = 1, absmax = 1, argmin = 1, argmax = 1, minmax = 2 }

function M.expect(f, op, k, acc, ddof)
  local e = expect_of(f, op, k, acc, ddof)
  if (reference.DTYPES[f.dtype] or {}).bool and ELEMENTS[op] then
    e.value = e.value == 1
    if ELEMENTS[op] == 2 then e.value2 = e.value2 == 1 end
  end
  return e
end

function expect_of(f, op, k, acc, ddof)
  ddof = ddof or 0
  local n, unsigned = f.n, not f.signed and not f.is_float
  local e = { bound = 0 }
  -- exact results first
  if op == "count" then e.value = f.count; return e end
  if op == "and" then e.value = f.all; return e end
  if op == "or" then e.value = f.any; return e end
  local nan = 0 / 0
  if op == "min" or op == "max" or op == "nanmin" or op == "nanmax" or op == "minmax" then
    local any_nan = f.first_nan ~= nil and f.is_float
    if op == "nanmin" or op == "nanmax" then
      e.value = (op == "nanmin" and f.min or f.max)
      if e.value == nil then e.value = nan end
    elseif any_nan then
      e.value, e.value2 = nan, op == "minmax" and nan or nil
    else
      e.value = op == "max" and f.max or f.min
      if op == "minmax" then e.value2 = f.max end
    end
    return e
  end
  if op == "absmax" then
    if not f.is_float then e.value = f.iabsmax
    elseif f.first_nan then e.value = nan
    else e.value = f.XA end
    return e
  end
  if op == "asum" and not f.is_float then e.value = f.iasum; return e end
  if op == "argmin" or op == "argmax" then
    if f.first_nan and f.is_float then e.value, e.value2 = nan, f.first_nan; return e end
    if op == "argmin" then e.value, e.value2 = f.min, f.imin else e.value, e.value2 = f.max, f.imax end
    return e
  end
  if not f.is_float then
    if op == "sum" or op == "nansum" then e.value = f.isum; return e end
    if op == "prod" then e.value = f.iprod; return e end
    if op == "sumsq" then e.value = f.isumsq; return e end
    if op == "mean" then e.value = reference.to_double(f.isum, unsigned) / n; return e end
    acc = "float64"
  end
  -- float results: the exact value and its bound
  local u = M.UNIT[acc] or (f.dtype == "float32" and M.UNIT.float32 or M.UNIT.float64)
  local r = u + D
  local B
  if op == "prod" then
    local pr = phi(n - 1, D)
    e.value = f.P
    B = (phi(n - 1, u) + pr) * math.abs(f.P) / (1 - pr)
  else
    local g = float_facts(f, op)
    local X, num, divisors = errors.exact(g, (op == "nansum" or op == "asum") and "sum" or op == "nanmean" and "mean"
      or op, "float64", ddof)
    e.value = X
    local moments = not f.is_float and not f.wide      -- var, std, norm of integers up to 32 bits
    if op == "sum" or op == "nansum" or op == "asum" then
      B = phi(k, u) * f.A
    elseif op == "mean" or op == "nanmean" then
      local bs = phi(k, u) * f.A / math.max(1, g.n)
      B = bs + r * (math.abs(X) + bs)
    elseif op == "sumsq" then
      B = phi(k + 1, u) * g.Q:round("float64") * (1 + D)
    elseif op == "norm" then
      local Q = g.Q:round("float64") * (1 + D)
      local s = math.sqrt(Q)
      if moments then
        B = phi(2, D) * s
      elseif s == 0 then
        B = 0
      else
        local dq = phi(k + 1, u) * Q
        B = dq / s + r * (s + dq / s) + 8 * u * s
      end
    elseif op == "var" or op == "std" then
      local Mv = num:special() or num:round("float64", { divisors[1] })
      local dof = n - ddof
      local var = op == "var" and X or num:special() or num:round("float64", divisors)
      local bv
      if dof <= 0 or var ~= var then
        bv = 0
      elseif moments then
        bv = (phi(3, D) * Mv + phi(4, D) * n) / dof + phi(2, D) * var
      else
        local L = math.max(1, math.log(n, 2))
        local dM = phi(2 * k + 7, u) * Mv + phi(44 * k + 4, u) * f.X * math.sqrt(Mv * n * L)
        bv = dM / dof * (1 + u) + (r + u) * (var + dM / dof)
      end
      B = op == "var" and bv or sqrt_bound(var, bv, r)
    else
      error("validate: no bound for op '" .. tostring(op) .. "'", 2)
    end
  end
  e.bound = (B + D * math.abs(e.value)) * (1 + 2.0 ^ -40)
  return e
end

local function same(got, want)
  if type(want) == "number" and want ~= want then return got ~= got end
  return got == want and math.type(got) == math.type(want)
end

--- ok, or false and a message: the result got (and got2, the second result of argmin, argmax, minmax)
-- against e = M.expect(...).
function M.check(got, got2, e)
  local want = e.value
  if e.value2 ~= nil and not same(got2, e.value2) then
    return false, string.format("second result %s, expected %s (exact)", show(got2), show(e.value2))
  end
  if e.bound == 0 or type(want) ~= "number" or math.type(want) == "integer" or want ~= want
      or math.abs(want) == math.huge then
    if same(got, want) then return true end
    return false, string.format("got %s, expected %s (exact)", show(got), show(want))
  end
  if math.type(got) ~= "float" then
    return false, string.format("got %s (%s), expected a float", tostring(got), type(got))
  end
  local err = math.abs(got - want)
  if err <= e.bound then return true end
  return false, string.format("got %s, expected %s (error %.3g, beyond the bound %.3g)", show(got), show(want),
    err, e.bound)
end

--- A checker of reductions of b (op over dtype): check(got, got2, opts) plans opts (gr.plan, nothing
-- runs) for the depth of its bound and compares got (and got2) with the reference of b's data, read back
-- once here (or given: facts of M.facts for ops including op). For scripts that validate a few calls on
-- one buffer.
function M.checker(gr, b, dtype, op, facts)
  local f, dev = facts or M.facts(b, dtype, op), gr.device()
  return function(got, got2, opts)
    local ok, plan = pcall(gr.plan, b, opts or { op = op })
    local k = M.depth(ok and plan or nil, ok and gr.variant(plan.variant) or nil, dev and dev.sms, #b)
    return M.check(got, got2, M.expect(f, op, k, ok and plan.acc or nil, opts and opts.ddof))
  end
end

--- The expectation moved where no correct result can be (the --inject-wrong-reference self-test):
-- booleans negated, integers (and indices) plus 1, floats by twice the bound and half their size.
function M.perturb(e)
  local p = { value = e.value, value2 = e.value2, bound = e.bound }
  local want = e.value
  if type(want) == "boolean" then
    p.value = not want
  elseif math.type(want) == "integer" then
    p.value = want + 1
  elseif want ~= want then
    p.value = 0.0
  else
    p.value = want + 2 * e.bound + math.max(1, math.abs(want)) * 0.5
  end
  return p
end

return M
