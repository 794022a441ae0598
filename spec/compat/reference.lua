--- The reference of spec/compat: each op computed in Lua over a plain list, in doubles, and what the
-- API's conversions, segments, axes, groups by key and dot products give, written from docs/api.md and
-- not from the engine; with the one check the specs share (expect_error). Written in Lua 5.1's syntax
-- (no //, no bit operators, no math.type): it runs on 5.1, LuaJIT, 5.3, 5.4 and 5.5 alike.
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

--- Calls f(...) and checks that it raises an error whose message contains `text` (plain). (busted's
-- assert is the spec files' own, not a global: a mismatch is raised as an error, naming both.)
function M.expect_error(text, f, ...)
  local ok, err = pcall(f, ...)
  if ok then error("expected an error containing '" .. text .. "', but the call succeeded", 2) end
  if not tostring(err):find(text, 1, true) then
    error("expected an error containing '" .. text .. "', got: " .. tostring(err), 2)
  end
end

--- Whether got is want: exactly, or within a relative `tol` where given (floats); NaN is NaN.
function M.close(got, want, tol)
  if type(want) ~= "number" then return got == want end
  if type(got) ~= "number" then return false end
  if isnan(want) then return isnan(got) end
  if not tol then return got == want end
  return math.abs(got - want) <= tol * math.max(1, math.abs(want))
end

--- The dtypes as the API describes them (docs/api.md, "Buffers"): integers with their range, bool, and
-- the float formats with their precision p (bits, the leading one included), the exponent of their
-- smallest normal value, their largest finite value and whether they have infinities. An integer
-- dtype's range is [lo, hi): the bounds are powers of two, which a double holds exactly.
M.integer = {
  int8 = { -2 ^ 7, 2 ^ 7 }, uint8 = { 0, 2 ^ 8 }, int16 = { -2 ^ 15, 2 ^ 15 }, uint16 = { 0, 2 ^ 16 },
  int32 = { -2 ^ 31, 2 ^ 31 }, uint32 = { 0, 2 ^ 32 }, int64 = { -2 ^ 63, 2 ^ 63 }, uint64 = { 0, 2 ^ 64 },
}
M.float = {
  float64 = { p = 53, emin = -1022, max = (2 - 2 ^ -52) * 2 ^ 1023, inf = true },
  float32 = { p = 24, emin = -126, max = (2 - 2 ^ -23) * 2 ^ 127, inf = true },
  float16 = { p = 11, emin = -14, max = 65504, inf = true },
  bfloat16 = { p = 8, emin = -126, max = (2 - 2 ^ -7) * 2 ^ 127, inf = true },
  float8_e4m3 = { p = 4, emin = -6, max = 448, inf = false },
  float8_e5m2 = { p = 3, emin = -14, max = 57344, inf = true },
}

local function trunc(x) if x < 0 then return math.ceil(x) end return math.floor(x) end

--- x rounded once to nearest even in a float format; nil where it does not fit (a finite value that
-- rounds past the largest finite one, an infinity where the format has none). NaN stays NaN.
function M.round_float(dtype, x)
  local f = M.float[dtype]
  if isnan(x) or x == 0 then return x end
  if x == math.huge or x == -math.huge then
    if f.inf then return x end
    return nil
  end
  local a = math.abs(x)
  local e = f.emin                      -- below the normal range the spacing is the subnormals'
  while 2 ^ (e + 1) <= a do e = e + 1 end
  local q = 2 ^ (e - f.p + 1)           -- the spacing of the format's values around a
  local m = a / q                       -- exact: q is a power of two
  local r = math.floor(m)
  if m - r > 0.5 or (m - r == 0.5 and r % 2 == 1) then r = r + 1 end
  local y = r * q
  if y > f.max then return nil end
  if x < 0 then return -y end
  return y
end

--- The element v of dtype `from` (a number, or a boolean for bool) converted to dtype `to` as
-- b:astype and gr.copy convert it (docs/api.md, "Conversions"); nil where it does not fit.
function M.convert(from, to, v)
  if from == "bool" then v = v and 1 or 0 end
  if to == "bool" then return v ~= 0 end
  local range = M.integer[to]
  if range then
    if isnan(v) or v == math.huge or v == -math.huge then return nil end
    v = trunc(v)
    if v < range[1] or v >= range[2] then return nil end
    return v
  end
  return M.round_float(to, v)
end

--- The elements of each segment [o[s], o[s + 1]) of list (0-based boundaries, as opts.offsets).
function M.segments(list, bounds)
  local out = {}
  for s = 1, #bounds - 1 do
    local seg = {}
    for i = bounds[s] + 1, bounds[s + 1] do seg[#seg + 1] = list[i] end
    out[s] = seg
  end
  return out
end

--- The rows (axis 2 reduced) or the columns (axis 1) of a rows x cols matrix given as a flat,
-- row-major list: a list of lists, one per kept position.
function M.lines(flat, rows, cols, axis)
  local out = {}
  local count, len = rows, cols                 -- axis 2: a line per row
  if axis == 1 then count, len = cols, rows end
  for k = 1, count do
    local line = {}
    for j = 1, len do
      if axis == 2 then line[j] = flat[(k - 1) * cols + j] else line[j] = flat[(j - 1) * cols + k] end
    end
    out[k] = line
  end
  return out
end

--- The distinct keys in ascending order, and for each the values that share it, in their order, with
-- their 1-based positions in vals.
function M.by_key(keys, vals)
  local groups, order = {}, {}
  for i = 1, #keys do
    local k = keys[i]
    if not groups[k] then
      groups[k] = { values = {}, at = {} }
      order[#order + 1] = k
    end
    local g = groups[k]
    g.values[#g.values + 1] = vals[i]
    g.at[#g.at + 1] = i
  end
  table.sort(order, function(a, b)
    if type(a) == "boolean" then return not a and b end
    return a < b
  end)
  local out = {}
  for i, k in ipairs(order) do out[i] = groups[k] end
  return order, out
end

--- The sum of a[i] * b[i].
function M.dot(a, b)
  local s = 0
  for i = 1, #a do s = s + a[i] * b[i] end
  return s
end

return M
