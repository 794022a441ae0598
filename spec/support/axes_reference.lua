--[[
axes_reference.lua -- the Lua reference of reductions along axes (spec/axes_spec.lua).

Pure Lua on plain tables: nothing here calls gpureduce. It states, from docs/api.md's contract, what a
reduction along axes of an N-d view gives:

  * views: a view is {data, offset, shape, strides}; element (i1, ..., ik) (1-based) is
    data[offset + sum (ij - 1) strides[j] + 1]. compact, permute, transpose and narrow build them as the
    buffer methods of the same names do.
  * axes: A.normalize turns opts.axis (an axis, negative from the end, or a list of them) into the sorted
    list of positive axes, or nil and why it is refused.
  * layout: A.result_shape (without the reduced axes, or with them at length 1 with keepdims; {1} when
    every axis goes), A.groups (the elements each output covers, outputs in row-major order of the
    result, the elements of one in row-major order of the reduced axes -- so an argmin/argmax index is a
    position in its group).
  * dtypes: A.result_dtypes, the table "result dtype" of docs/api.md's segmented reductions.
  * empty groups: A.check_empty, the ops' empty-segment identities.
  * exact sums: A.exact_sum, the exact sum of doubles rounded once to float32 or float64 (a Shewchuk
    expansion, then a correctly rounded conversion), for determinism = "gpu_to_gpu".

The per-group values of non-empty groups are checked with fuzz_reference.lua's R.expect / R.check (the
independent reference of every op), as spec/segments_spec.lua does.
]]
local R = require "support.fuzz_reference"

local A = {}

local inf, nan = math.huge, 0 / 0

---------------------------------------------------------------------------------------------------
-- views

function A.product(shape)
  local n = 1
  for _, len in ipairs(shape) do n = n * len end
  return n
end

--- The row-major view of data (a list) with shape.
function A.compact(data, shape)
  local strides, step = {}, 1
  for d = #shape, 1, -1 do
    strides[d] = step
    step = step * math.max(shape[d], 1)
  end
  return { data = data, offset = 0, shape = shape, strides = strides }
end

local function positive_axis(axis, ndim)
  if axis < 0 then return ndim + axis + 1 end
  return axis
end

--- New axis k is old axis p[k] (negative entries count from the end).
function A.permute(v, p)
  local shape, strides = {}, {}
  for k, a in ipairs(p) do
    a = positive_axis(a, #v.shape)
    shape[k], strides[k] = v.shape[a], v.strides[a]
  end
  return { data = v.data, offset = v.offset, shape = shape, strides = strides }
end

function A.transpose(v)
  local p = {}
  for k = 1, #v.shape do p[k] = #v.shape + 1 - k end
  return A.permute(v, p)
end

--- Positions start .. start + count - 1 of an axis.
function A.narrow(v, axis, start, count)
  axis = positive_axis(axis, #v.shape)
  local shape = table.move(v.shape, 1, #v.shape, 1, {})
  shape[axis] = count
  local offset = v.offset
  if A.product(shape) > 0 then offset = offset + (start - 1) * v.strides[axis] end
  return { data = v.data, offset = offset, shape = shape, strides = v.strides }
end

--- Calls fn(index) for every multi-index of the lengths, in row-major order (the last index fastest);
-- once with {} for no lengths, never when a length is 0. The index table is reused between calls.
function A.each_index(lengths, fn)
  for _, len in ipairs(lengths) do
    if len == 0 then return end
  end
  local idx = {}
  for d = 1, #lengths do idx[d] = 1 end
  while true do
    fn(idx)
    local d = #lengths
    while d >= 1 do
      if idx[d] < lengths[d] then
        idx[d] = idx[d] + 1
        break
      end
      idx[d] = 1
      d = d - 1
    end
    if d == 0 then return end
  end
end

---------------------------------------------------------------------------------------------------
-- axes and the result's layout

--- opts.axis as the sorted list of the positive axes it names, or nil and why it is refused.
function A.normalize(axis, ndim)
  local list = type(axis) == "table" and axis or { axis }
  if #list == 0 then return nil, "no axis" end
  local seen, out = {}, {}
  for _, a in ipairs(list) do
    if math.type(a) ~= "integer" then return nil, "not an integer" end
    if a == 0 then return nil, "axis 0" end
    local p = positive_axis(a, ndim)
    if p < 1 or p > ndim then return nil, "out of range" end
    if seen[p] then return nil, "repeated" end
    seen[p] = true
    out[#out + 1] = p
  end
  table.sort(out)
  return out
end

local function reduced_set(axes)
  local set = {}
  for _, a in ipairs(axes) do set[a] = true end
  return set
end

--- The shape of the result of reducing `axes` (normalized) of shape.
function A.result_shape(shape, axes, keepdims)
  local set, out = reduced_set(axes), {}
  for d, len in ipairs(shape) do
    if not set[d] then out[#out + 1] = len
    elseif keepdims then out[#out + 1] = 1 end
  end
  if #out == 0 then out[1] = 1 end
  return out
end

--- The groups of elements the outputs cover: a list, in row-major order of the result, of lists of
-- values in row-major order of the reduced axes (taken in increasing axis order).
function A.groups(v, axes)
  local set = reduced_set(axes)
  local kept_len, kept_stride, red_len, red_stride = {}, {}, {}, {}
  for d, len in ipairs(v.shape) do
    if set[d] then
      red_len[#red_len + 1], red_stride[#red_stride + 1] = len, v.strides[d]
    else
      kept_len[#kept_len + 1], kept_stride[#kept_stride + 1] = len, v.strides[d]
    end
  end
  local out = {}
  A.each_index(kept_len, function(kidx)
    local base = v.offset
    for d = 1, #kidx do base = base + (kidx[d] - 1) * kept_stride[d] end
    local group = {}
    A.each_index(red_len, function(ridx)
      local pos = base
      for d = 1, #ridx do pos = pos + (ridx[d] - 1) * red_stride[d] end
      group[#group + 1] = v.data[pos + 1]
    end)
    out[#out + 1] = group
  end)
  return out
end

---------------------------------------------------------------------------------------------------
-- result dtypes (docs/api.md, "Segmented reductions", table "result dtype")

local UNSIGNED_OF_WIDTH = { int8 = "uint8", int16 = "uint16", int32 = "uint32", int64 = "uint64" }

local function is_float(dtype) return R.DTYPES[dtype].kind == "float" end

--- The accumulator dtype of a float op's results: float64 data, or acc = "float64", give float64;
-- every other float format (float32, float16, bfloat16, FP8) float32.
local function float_acc(dtype, acc)
  if dtype == "float64" or acc == "float64" then return "float64" end
  return "float32"
end

--- The dtype(s) of an op's result buffer(s) over data of dtype.
function A.result_dtypes(op, dtype, acc)
  local float, kind = is_float(dtype), R.DTYPES[dtype].kind
  if op == "sum" or op == "prod" or op == "sumsq" or op == "nansum" then
    if float then return float_acc(dtype, acc) end
    return kind == "int" and "int64" or "uint64"
  elseif op == "asum" then
    return float and float_acc(dtype, acc) or "uint64"
  elseif op == "absmax" then
    return UNSIGNED_OF_WIDTH[dtype] or dtype
  elseif op == "min" or op == "max" or op == "nanmin" or op == "nanmax" then
    return dtype
  elseif op == "minmax" then
    return dtype, dtype
  elseif op == "argmin" or op == "argmax" then
    return dtype, "int64"
  elseif op == "count" then
    return "int64"
  elseif op == "and" or op == "or" then
    return "uint8"
  end
  -- mean, var, std, norm, nanmean
  return float and float_acc(dtype, acc) or "float64"
end

A.TWO_RESULTS = { argmin = true, argmax = true, minmax = true }

---------------------------------------------------------------------------------------------------
-- empty groups: the op's identity, or NaN / index 0 where it has none

local NAN_WHEN_EMPTY = { mean = true, var = true, std = true, nanmean = true }

-- the largest and the smallest value of a dtype, as its elements read back (bool: 1 and 0 here)
local function extremes(dtype)
  local d = R.DTYPES[dtype]
  if d.kind == "float" then
    local big = d.fmt.no_inf and d.fmt.max or inf      -- float8_e4m3 has no infinity
    return big, -big
  end
  return d.max, d.min
end

local function as_number(x)
  if type(x) == "boolean" then return x and 1 or 0 end
  return x
end

local function same_value(got, want)
  if want ~= want then return got ~= got end
  return got == want and math.type(got) == math.type(want)
end

--- Checks the result(s) of one output over an empty group: true, or false and why. got: the element of
-- the first result buffer as read back (and/or: the uint8 0 or 1), got2 the second's.
function A.check_empty(op, dtype, got, got2)
  local float = is_float(dtype)
  local hi, lo = extremes(dtype)
  local function want(x, y)
    if not same_value(as_number(got), x) then return false, "expected " .. tostring(x) end
    if y ~= nil and not same_value(as_number(got2), y) then return false, "expected second result " .. tostring(y) end
    return true
  end
  if NAN_WHEN_EMPTY[op] then return want(nan) end
  if op == "and" then return want(1) end
  if op == "or" then return want(0) end
  if op == "prod" then return want(float and 1.0 or 1) end
  if op == "count" then return want(0) end
  if op == "argmin" then return want(hi, 0) end
  if op == "argmax" then return want(lo, 0) end
  if op == "minmax" then return want(hi, lo) end
  if op == "min" or op == "nanmin" then
    if float and op == "nanmin" then return want(nan) end
    return want(hi)
  end
  if op == "max" or op == "nanmax" then
    if float and op == "nanmax" then return want(nan) end
    return want(lo)
  end
  -- sum, sumsq, nansum, asum, absmax, norm: the zero of the result's dtype (bool absmax: false)
  local float_result = is_float(A.result_dtypes(op, dtype))
  local ok, why = want(float_result and 0.0 or 0)
  if ok and float_result and (op == "absmax" or op == "asum") and 1 / got < 0 then
    return false, "expected +0.0 (an absolute value), got -0.0"
  end
  return ok, why
end

---------------------------------------------------------------------------------------------------
-- exact sums rounded once

--- Adds x to the expansion p (non-overlapping doubles of increasing magnitude) without error.
local function expand(p, x)
  local k = 0
  for i = 1, #p do
    local y = p[i]
    if math.abs(x) < math.abs(y) then x, y = y, x end
    local hi = x + y
    local lo = y - (hi - x)
    if lo ~= 0 then
      k = k + 1
      p[k] = lo
    end
    x = hi
  end
  for i = #p, k + 1, -1 do p[i] = nil end
  p[k + 1] = x
end

--- The expansion's value rounded once to the nearest double, ties to even: the top components summed
-- until one rounds, then a half-way case settled by the sign of what lies below.
local function round_expansion(p)
  local n = #p
  if n == 0 then return 0.0 end
  local hi, lo = p[n], 0.0
  n = n - 1
  while n > 0 do
    local x, y = hi, p[n]
    n = n - 1
    hi = x + y
    lo = y - (hi - x)
    if lo ~= 0 then break end
  end
  if n > 0 and ((lo < 0 and p[n] < 0) or (lo > 0 and p[n] > 0)) then
    local y = lo * 2
    local x = hi + y
    if x - hi == y then hi = x end
  end
  return hi
end

local function to_f32(x) return (string.unpack("<f", string.pack("<f", x))) end

-- the float32 next to f (a finite float32) in the direction of dir (+1 up, -1 down)
local function f32_step(f, dir)
  if f == 0 then return dir * 0x1p-149 end
  local bits = string.unpack("<i4", string.pack("<f", f))
  local away = (f > 0) == (dir > 0)
  return (string.unpack("<f", string.pack("<i4", bits + (away and 1 or -1))))
end

--- The exact sum of finite doubles (whose partial sums stay far from overflow), rounded once to
-- "float64" or "float32" (nearest, ties to even). -0.0 only when every term is -0.0.
function A.exact_sum(values, format)
  local p, all_negative_zero = {}, #values > 0
  for _, x in ipairs(values) do
    if not (x == 0 and 1 / x < 0) then all_negative_zero = false end
    if x ~= 0 then expand(p, x) end
  end
  if all_negative_zero then return -0.0 end
  local d = round_expansion(p)
  if format == "float64" then return d end
  local f = to_f32(d)
  if f == d or math.abs(f) == inf then return f end
  -- d rounded to float32 may round twice: settle a d that is a float32 half-way point by the sign of
  -- the exact sum minus d
  local g = f32_step(f, d > f and 1 or -1)
  if (f + g) / 2 ~= d then return f end
  local q = table.move(p, 1, #p, 1, {})
  expand(q, -d)
  local rest = round_expansion(q)
  if rest == 0 then return f end                 -- a true tie: to_f32 chose the even one
  local up, down = math.max(f, g), math.min(f, g)
  return rest > 0 and up or down
end

return A
