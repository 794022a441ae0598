--- The reference of spec/compat: each op computed in Lua over a plain list, in doubles. Written in Lua
-- 5.1's syntax (no //, no bit operators, no math.type): it runs on 5.1, LuaJIT, 5.3 and 5.4 alike.
local M = {}

local function fold(list, init, f)
  local acc = init
  for i = 1, #list do acc = f(acc, list[i], i) end
  return acc
end

local function isnan(x) return x ~= x end

local function without_nan(list)
  local out = {}
  for i = 1, #list do
    if not isnan(list[i]) then out[#out + 1] = list[i] end
  end
  return out
end

local function sum(l) return fold(l, 0, function(a, x) return a + x end) end
local function mean(l) return sum(l) / #l end
local function var(l, ddof)
  local m = mean(l)
  return fold(l, 0, function(a, x) return a + (x - m) * (x - m) end) / (#l - (ddof or 0))
end
local function arg(l, better)
  local bv, bi = l[1], 1
  for i = 2, #l do
    if better(l[i], bv) then bv, bi = l[i], i end
  end
  return bv, bi
end
local function lt(a, b) return a < b end
local function gt(a, b) return a > b end

--- op name -> function(list, opts) returning the op's value(s); booleans for and/or.
M.ops = {
  sum = sum,
  prod = function(l) return fold(l, 1, function(a, x) return a * x end) end,
  min = function(l) return (arg(l, lt)) end,
  max = function(l) return (arg(l, gt)) end,
  ["and"] = function(l) return fold(l, true, function(a, x) return a and x ~= 0 end) end,
  ["or"] = function(l) return fold(l, false, function(a, x) return a or x ~= 0 end) end,
  count = function(l) return fold(l, 0, function(a, x) return a + (x ~= 0 and 1 or 0) end) end,
  mean = mean,
  var = function(l, o) return var(l, o and o.ddof) end,
  std = function(l, o) return math.sqrt(var(l, o and o.ddof)) end,
  argmin = function(l) return arg(l, lt) end,
  argmax = function(l) return arg(l, gt) end,
  minmax = function(l) return (arg(l, lt)), (arg(l, gt)) end,
  sumsq = function(l) return fold(l, 0, function(a, x) return a + x * x end) end,
  norm = function(l) return math.sqrt(fold(l, 0, function(a, x) return a + x * x end)) end,
  nansum = function(l) return sum(without_nan(l)) end,
  nanmin = function(l) return (arg(without_nan(l), lt)) end,
  nanmax = function(l) return (arg(without_nan(l), gt)) end,
  nanmean = function(l) return mean(without_nan(l)) end,
  absmax = function(l) return fold(l, 0, function(a, x) return math.max(a, math.abs(x)) end) end,
  asum = function(l) return fold(l, 0, function(a, x) return a + math.abs(x) end) end,
}

--- Whether got is want: exactly, or within a relative `tol` where given (floats); NaN is NaN.
function M.close(got, want, tol)
  if type(want) ~= "number" then return got == want end
  if type(got) ~= "number" then return false end
  if isnan(want) then return isnan(got) end
  if not tol then return got == want end
  return math.abs(got - want) <= tol * math.max(1, math.abs(want))
end

return M
