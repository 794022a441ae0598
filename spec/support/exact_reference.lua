-- Exact references for the gpu_to_gpu specs (determinism_spec, exact_gpu_spec), by two independent
-- methods: error-free transformations over Shewchuk expansions (fuzz_reference's grow and approx) for
-- products, squares and quotients, and the accuracy lab's accumulator of Lua integers
-- (experiments/lab/exact.lua) for sums and the ulp. spec/accuracy_lab_spec.lua checks each against the
-- other.
local R = require "support.fuzz_reference"
local grow, approx = R.lib.grow, R.lib.approx

-- the lab's modules, from this checkout (the folder above spec/)
local dir = debug.getinfo(1, "S").source:match("^@(.*)spec/support/[^/]*$") or ""
package.path = dir .. "experiments/?.lua;" .. package.path
local exact = require "lab.exact"

local M = {}

--- a * b as hi + lo exactly (Veltkamp's split and Dekker's product; |a|, |b| far below 2^996).
function M.two_prod(a, b)
  local function split(x)
    local c = 134217729.0 * x
    local h = c - (c - x)
    return h, x - h
  end
  local p = a * b
  local ah, al = split(a)
  local bh, bl = split(b)
  return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl
end

local function expansion(values, f)
  local e, m = {}, 0
  for _, x in ipairs(values) do m = f(e, m, x) end
  return e, m
end

function M.sum_of(xs) return expansion(xs, grow) end
function M.squares_of(xs)
  return expansion(xs, function(e, m, x)
    local p, q = M.two_prod(x, x)
    return grow(e, grow(e, m, p), q)
  end)
end

--- The ulp of x in a format of p bits whose smallest subnormal is 2^emin.
M.ulp = exact.ulp

--- Whether got is the exact value of expansion (e, m) divided by `div` rounded to nearest (ties to even):
-- |exact - got * div| <= div * ulp / 2, formed exactly (div an integer below 2^53).
function M.correctly_rounded(e, m, got, div, p, emin)
  local d = {}
  for i = 1, m do d[i] = e[i] end
  -- (no product for div 1: two_prod's split overflows past about 1e300)
  local hi, lo = got, 0.0
  if div ~= 1 then hi, lo = M.two_prod(got, div) end
  local k = grow(d, grow(d, m, -hi), -lo)
  local off, u = math.abs(approx(d, k)), M.ulp(got, p, emin) * div
  if off < u / 2 then return true end
  if off == u / 2 and (got / M.ulp(got, p, emin)) % 2 == 0 then return true end
  return false, string.format("%.17g: off by %.3g ulp", got, off / u)
end

--- Whether got is the exact sum of the numbers xs rounded once (p bits, smallest subnormal 2^emin): the
-- lab's accumulator holds the sum exactly and rounds it.
function M.correctly_rounded_sum(xs, got, p, emin)
  local acc = exact.new()
  for _, x in ipairs(xs) do acc:add(x) end
  local want = acc:round({ p = p, emin = emin, emax = p == 24 and 127 or 1023 })
  if got == want and (got ~= 0 or 1 / got == 1 / want) then return true end
  return false, string.format("%.17g: the correctly rounded sum is %.17g", got, want)
end

return M
