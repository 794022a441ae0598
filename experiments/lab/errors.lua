--- The exact value of each float op on a data set (lab/exact.lua's sums, no engine call) and the error of
-- a result against it.
--
-- Each op is a quotient N / D of an exact sum N by an integer D, or its square root:
--   sum S, mean S / n, sumsq Q, norm sqrt(Q), var (n Q - S^2) / (n (n - ddof)), std sqrt(var)
-- with S = sum x and Q = sum x^2 held exactly. For a result `got` in a format (float32 or float64):
--   exact     N / D rounded once to nearest, ties to even, in the format (for norm and std: the square
--             root in double of N / D rounded to 53 bits, then rounded to the format)
--   rel_err   |got - X| / |X|, X the exact real value (0 when both are 0; inf when only X is, or when
--             got is infinite and X finite: an overflow, correctly rounded or not)
--   ulps      |got - X| / ulp(X), the ulp of the format at the rounded exact value: the spacing of the
--             format's numbers there (2^(k - p + 1) for 2^k <= |x| < 2^(k + 1); 2^emin for subnormals
--             and 0). A correctly rounded result is within 0.5.
--   steps     how many of the format's numbers lie between got and exact (0: got is the correctly
--             rounded value); nil for norm and std, whose rounded root is not computed exactly
--   correctly_rounded  steps == 0 (norm, std: ulps <= 0.5)
-- got - X is formed exactly (N - got D in the accumulator, or N - got^2 D for the roots) and rounded only
-- at the end, so the error is accurate to about 2^-52 of itself, however small.
local exact = require "lab.exact"

local M = {}

M.OPS = { "sum", "mean", "sumsq", "norm", "var", "std" }
M.ROOT = { norm = true, std = true }
M.SQUARES = { sumsq = true, norm = true, var = true, std = true }

--- The exact facts of one data set: its bytes summed (and squared when an op needs it).
-- Returns {n, dtype, S, Q, sum_abs}.
function M.facts(bytes, dtype, n, need_squares)
  if n > exact.MAX_ADDS then error("errors: more than 2^32 elements overflow the exact accumulator", 2) end
  local f = { n = n, dtype = dtype, S = exact.new() }
  f.sum_abs = f.S:add_bytes(bytes, dtype)
  if need_squares then
    f.Q = exact.new()
    f.Q:add_bytes(bytes, dtype, true)
  end
  return f
end

--- sum|x| / |sum x| (inf when the exact sum is 0).
function M.condition(f)
  local fs, es = f.S:frexp()
  if fs == 0 then return math.huge end
  return f.sum_abs / (math.abs(fs) * 2.0 ^ es)
end

--- The numerator accumulator, the divisors and whether a square root follows, of op over facts f.
function M.target(f, op, ddof)
  local n = f.n
  if op == "sum" then return f.S, {} end
  if op == "mean" then return f.S, { n } end
  if op == "sumsq" then return f.Q, {} end
  if op == "norm" then return f.Q, {}, true end
  if op == "var" or op == "std" then
    ddof = ddof or 0
    local num = exact.new()
    num:add_acc(f.Q, n)
    num:add_product(f.S, f.S, -1)
    return num, { n, n - ddof }, op == "std"
  end
  error("errors: no exact form for op '" .. tostring(op) .. "'", 2)
end

local function product(list)
  local p = 1
  for _, v in ipairs(list) do p = p * v end
  return p
end

--- a * 2^e without overflow or underflow on the way (a double, e an integer).
local function scaled(a, e)
  if a == 0 then return 0.0 end
  local half = e // 2
  return a * 2.0 ^ half * 2.0 ^ (e - half)
end

--- The double nearest sqrt(N / D) (through frexp: no overflow whatever N's size).
local function root_of(num, divisors)
  local f, e = num:frexp()
  if f <= 0 then return 0.0 end
  f = f / product(divisors)
  if e % 2 == 1 then f, e = f * 2, e - 1 end
  return scaled(math.sqrt(f), e // 2)
end

local function to_format(x, format)
  if format == "float32" then return (string.unpack("<f", string.pack("<f", x))) end
  return x
end

--- The exact result of op in `format` (a Lua float), the numerator, divisors and root flag.
function M.exact(f, op, format, ddof)
  local num, divisors, root = M.target(f, op, ddof)
  local special = num:special()
  if special then return special, num, divisors, root end
  if root then return to_format(root_of(num, divisors), format), num, divisors, root end
  return num:round(format, divisors), num, divisors, root
end

--- The error of `got` (a result of op in `format`) against the exact value. Returns a table
-- {exact, rel_err, ulps, steps, correctly_rounded}.
function M.measure(f, op, format, got, ddof)
  local X, num, divisors, root = M.exact(f, op, format, ddof)
  local fmt = exact.FORMATS[format]
  local r = { exact = X }
  local special = num:special()           -- the real value itself is NaN or infinite (data with them)
  if special or got ~= got or math.abs(got) == math.huge then
    -- the result is the correctly rounded one when it is the format's value of the real one (an overflow
    -- to inf included), but a finite real value is infinitely far from an infinite result
    local same = (got ~= got and X ~= X) or got == X
    r.rel_err = (same and special) and 0.0 or math.huge
    r.ulps, r.steps, r.correctly_rounded = r.rel_err, same and 0 or nil, same
    return r
  end
  local D = product(divisors)
  local diff = exact.new()
  diff:add_acc(num)
  if root then diff:add_square(got, -D) else diff:add(got, -D) end
  local fd, ed = diff:frexp()
  local fn, en = num:frexp()
  -- the ulp at X; past the format's largest value (X = inf) the largest ulp
  local u = math.abs(X) == math.huge and 2.0 ^ (fmt.emax - fmt.p + 1) or exact.ulp(X, fmt.p, fmt.emin)
  local ue = select(2, math.frexp(u)) - 1      -- u = 2^ue
  if fd == 0 then
    r.rel_err, r.ulps = 0.0, 0.0
  elseif fn == 0 then
    r.rel_err = math.huge
    r.ulps = scaled(math.abs(fd) / D, ed - ue)
  elseif root then
    -- got^2 D - N = D (got - X)(got + X) and D X^2 = N: |got - X| / X = |diff| / (N (1 + got / X))
    local Xd = root_of(num, divisors)
    r.rel_err = scaled(math.abs(fd / fn), ed - en) / (1 + got / Xd)
    r.ulps = r.rel_err * (Xd / u)
  else
    r.rel_err = scaled(math.abs(fd / fn), ed - en)
    r.ulps = scaled(math.abs(fd) / D, ed - ue)
  end
  if root then
    r.correctly_rounded = r.ulps <= 0.5
  else
    r.steps = math.abs(exact.ord(got, format) - exact.ord(X, format))
    r.correctly_rounded = r.steps == 0
  end
  return r
end

return M
