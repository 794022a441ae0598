--[[
axes_spec.lua -- reductions along axes of N-d buffers and views (opts.axis, opts.keepdims; issue 23).

What is generated, and against what
  For every side (host buffers always; "device" buffers too: plain buffers on the cpu backend, #gpu cases
  on the cuda backend), every dtype of gr.dtypes() and every shape of SHAPES (1-D to 4-D and an 8-D, with
  axes of length 1 and of length 0), one test reduces views of that shape -- compact, transpose(), a rotating
  permute, a narrow of an inner axis (strided) and a narrow then permute -- along every single axis, two
  negative axes and a few axis lists (unsorted and negative entries included, and all axes), with
  keepdims false and true, for every op of gr.ops() (a rotating subset on the dtypes outside FULL_DTYPES;
  ddof = 1 and acc = "float64" variants on some), over two or three data sets per dtype: small values with
  ties (and -0.0; and values like 1 and 2 whose bits share nothing, for and/or), the dtype's wide range,
  and for floats NaN and +-inf sprinkled in.
  The expected results come from spec/support/axes_reference.lua, pure Lua on plain tables: a view is
  {data, offset, shape, strides}; it gives the result shape, the groups of elements each output covers
  (in row-major order of the reduced axes, so argmin/argmax indices are positions in them), the result
  dtypes (docs/api.md's "result dtype" of segmented reductions) and the identities of empty groups. Each
  non-empty group is checked with fuzz_reference.lua's R.expect / R.check, the independent reference
  segments_spec.lua uses (tolerances for float sums, exact integers, first NaN for arg ops, ...).
  Checked per call: the result dtype(s), side, shape (keepdims or not; {1} when every axis goes) and every
  element; the input is left unchanged.
  Larger shapes the same way (long reductions of 4097 elements, thousands of outputs, a 3-D of 24000) on
  a few dtypes and ops; #gpu ones of 65537-element rows and columns for the device's kernels.

Then, by hand: opts.out (right buffers are filled and returned, wrong shape / dtype / count refused
naming out, nothing written), the refusals (axis 0, out of range, repeated, not an integer, with segment
or offsets, keepdims without axis), the op functions, determinism (run to run; batch invariance of rows
and of columns: one output's bits do not depend on how many others are in the call or where it is), and
determinism = "gpu_to_gpu" sums along axes, which must be the exact sums rounded once (A.exact_sum;
and on the GPU the same bits on device and host buffers).

Run time on the cpu backend: about 40 s (most of it the Lua reference).
]]
local gr = require "gpureduce"
local H = require("support.helpers").bind(it, function(reason) pending(reason) end)
local R = require "support.fuzz_reference"
local A = require "support.axes_reference"

local nan, inf = 0 / 0, math.huge

-- Sides: host buffers always; device buffers as plain buffers on the cpu backend, #gpu cases on cuda.
local SIDES = { "host", "device" }
local function side_it(where)
  if where == "device" and gr.backend() == "cuda" then return H.gpu_it end
  return it
end

local function new_buffer(n, dtype, where) return gr.buffer(n, dtype, { where = where }) end

local function shape_text(shape) return "{" .. table.concat(shape, ", ") .. "}" end

local function axis_text(axis)
  if type(axis) == "table" then return "{" .. table.concat(axis, ", ") .. "}" end
  return tostring(axis)
end

local function is_float(dtype) return R.DTYPES[dtype].kind == "float" end

-- a 64-bit mix of integers (splitmix64's finalizer): the data depends on its arguments only
local function hash(...)
  local h = 0x2545F4914F6CDD1D
  for _, x in ipairs({ ... }) do
    h = h ~ x
    h = (h ~ (h >> 30)) * 0xBF58476D1CE4E5B9
    h = (h ~ (h >> 27)) * 0x94D049BB133111EB
    h = h ~ (h >> 31)
  end
  return h
end

local function text_seed(s)
  local h = 0
  for i = 1, #s do h = h * 31 + s:byte(i) end
  return h
end

---------------------------------------------------------------------------------------------------
-- data

-- the largest finite value a data set may use for "infinity" (float8_e4m3 has none)
local function big_value(dtype)
  local f = R.DTYPES[dtype].fmt
  return f.no_inf and f.max or inf
end

--- Element i of a data set: "ties" (small values, many equal, -0.0 among float zeros), "specials"
-- (ties with NaN, +inf and -inf sprinkled in) or "wide" (the dtype's range; floats of mixed magnitudes).
local function value_of(dtype, set, i, seed)
  local h = hash(seed, i)
  local u = (h >> 11) * 0x1p-53
  local d = R.DTYPES[dtype]
  if d.bool then return h % 3 ~= 0 end
  if set == "wide" then
    if is_float(dtype) then
      local x = (2 * u - 1) * 2.0 ^ ((h % 41) - 20)
      if d.small then x = x * 2.0 ^ -8 end                       -- within float16's range
      if d.small and d.fmt.p <= 4 then x = x * 2.0 ^ -4 end      -- and FP8's
      return x
    end
    if dtype == "int64" or dtype == "uint64" then return h end
    return d.min + (h >> 1) % (d.max - d.min + 1)
  end
  local small = h % 7
  if is_float(dtype) then
    if set == "specials" then
      local s = (h >> 8) % 16
      if s == 0 then return nan end
      if s == 1 then return big_value(dtype) end
      if s == 2 then return -big_value(dtype) end
    end
    if small == 3 and (h >> 20) % 2 == 0 then return -0.0 end
    return (small - 3) * 0.5
  end
  if d.kind == "uint" then return small end
  return small - 3
end

--- The value around a slice's data, which shows in the results if it is read: floats NaN, integers
-- 100 or -100 (outside the ties' range), bool true.
local function sentinel(dtype)
  local d = R.DTYPES[dtype]
  if d.bool then return true end
  if is_float(dtype) then return nan end
  return d.kind == "uint" and 100 or -100
end

local function data_sets(dtype)
  if R.DTYPES[dtype].bool then return { "ties" } end
  if is_float(dtype) then return { "ties", "specials", "wide" } end
  return { "ties", "wide" }
end

---------------------------------------------------------------------------------------------------
-- shapes, views, axes, ops

local SHAPES = {
  { 7 }, { 0 }, { 1 }, { 3, 4 }, { 1, 5 }, { 4, 0 }, { 0, 3 }, { 2, 3, 4 }, { 3, 1, 2 }, { 2, 0, 3 },
  { 5, 3, 4, 2 }, { 2, 1, 3, 2 }, { 2, 1, 2, 1, 3, 1, 1, 2 },
}

local function rotation(nd)
  local p = {}
  for k = 1, nd do p[k] = k % nd + 1 end
  return p
end

-- the innermost axis that is not the first and has 2 or more elements (nil where none): narrowing it
-- gives a strided view
local function inner_axis(shape)
  for a = #shape, 2, -1 do
    if shape[a] >= 2 then return a end
  end
  return nil
end

-- name, the view of a compact N-d buffer m (nil where it does not apply), the same on the reference
local VIEWS = {
  { "compact", function(m) return m end, function(r) return r end },
  { "transpose", function(m) return m:ndim() >= 2 and m:transpose() or nil end, A.transpose },
  { "permute", function(m) return m:ndim() >= 3 and m:permute(rotation(m:ndim())) or nil end,
    function(r) return A.permute(r, rotation(#r.shape)) end },
  { "narrow inner", function(m)
      local a = inner_axis(m:shape())
      return a and m:narrow(a, 2, m:shape()[a] - 1) or nil
    end, function(r)
      local a = inner_axis(r.shape)
      return A.narrow(r, a, 2, r.shape[a] - 1)
    end },
  { "narrow:permute", function(m)
      local a = inner_axis(m:shape())
      return a and m:ndim() >= 3 and m:narrow(a, 1, m:shape()[a] - 1):permute(rotation(m:ndim())) or nil
    end, function(r)
      local a = inner_axis(r.shape)
      return A.permute(A.narrow(r, a, 1, r.shape[a] - 1), rotation(#r.shape))
    end },
}

-- every single axis, the last and the first as negative axes, and lists (unsorted and negative entries
-- included; a list of every axis last)
local function axes_for(nd)
  local list = {}
  for a = 1, nd do list[#list + 1] = a end
  list[#list + 1] = -1
  if nd > 1 then list[#list + 1] = -nd end
  if nd == 1 then list[#list + 1] = { 1 } end
  if nd == 2 then list[#list + 1] = { -1, 1 } end
  if nd >= 3 then
    for _, l in ipairs({ { 1, 3 }, { 2, 3 }, { 3, 1 }, { 1, -1 } }) do list[#list + 1] = l end
  end
  if nd == 4 then
    for _, l in ipairs({ { 2, 4 }, { 4, 1, 2 }, { -1, -2 } }) do list[#list + 1] = l end
  end
  if nd == 8 then
    for _, l in ipairs({ { 1, 3, 5, 8 }, { 2, 4, 6, 7 }, { -8, 5, -1 } }) do list[#list + 1] = l end
  end
  if nd >= 2 then
    local all = {}
    for a = 1, nd do all[a] = a end
    list[#list + 1] = all
  end
  return list
end

-- The dtypes that take every op; the others take CORE_OPS plus a few more, rotating with the dtype so
-- that every op meets several of them.
local FULL_DTYPES = { float32 = true, int32 = true, float16 = true }
local CORE_OPS = { "sum", "min", "and", "or", "argmax", "mean", "minmax" }

local function ops_for(dtype, index)
  local all = gr.ops()
  local list = {}
  local function add(op, extra)
    local o = { op = op }
    for k, v in pairs(extra or {}) do o[k] = v end
    list[#list + 1] = o
  end
  if FULL_DTYPES[dtype] then
    for _, op in ipairs(all) do add(op) end
  else
    local chosen = {}
    for _, op in ipairs(CORE_OPS) do chosen[op] = true end
    for k = 0, 4 do chosen[all[(index * 5 + k) % #all + 1]] = true end
    for _, op in ipairs(all) do if chosen[op] then add(op) end end
  end
  -- variants of the options
  if FULL_DTYPES[dtype] then
    add("var", { ddof = 1 })
    add("std", { ddof = 1 })
  end
  if dtype == "float32" or dtype == "float16" then
    add("sum", { acc = "float64" })
    add("mean", { acc = "float64" })
  end
  return list
end

local function opts_text(o)
  local parts = {}
  for k, v in pairs(o) do
    if k ~= "op" then parts[#parts + 1] = k .. " = " .. tostring(v) end
  end
  table.sort(parts)
  return o.op .. (#parts > 0 and (" {" .. table.concat(parts, ", ") .. "}") or "")
end

---------------------------------------------------------------------------------------------------
-- checking one call

local function values_text(list, limit)
  local out = {}
  for i = 1, math.min(#list, limit or 8) do out[i] = R.fmt_short(list[i]) end
  if #list > (limit or 8) then out[#out + 1] = "..." end
  return "{" .. table.concat(out, ", ") .. "}"
end

--- The first result's element as R.check reads it: and/or give the uint8 0 or 1, read as a boolean.
local function first_value(op, v)
  if op == "and" or op == "or" then
    if v ~= 0 and v ~= 1 then return nil, "and/or result element is " .. tostring(v) .. ", not 0 or 1" end
    return v == 1
  end
  return v
end

--- Checks a result buffer's kind, dtype, side and shape; returns nil or why not.
local function check_buffer(r, dtype, where, shape, which)
  if type(r) ~= "userdata" or not r.dtype then return which .. " is not a buffer: " .. tostring(r) end
  if r:dtype() ~= dtype then return which .. " has dtype " .. r:dtype() .. ", expected " .. dtype end
  if r:where() ~= where then return which .. " is on the " .. r:where() .. " side, expected " .. where end
  local got = r:shape()
  if shape_text(got) ~= shape_text(shape) then
    return which .. " has shape " .. shape_text(got) .. ", expected " .. shape_text(shape)
  end
  return nil
end

--- Runs gr.reduce(m, opts) and checks it against the reference's groups and expectations; adds failure
-- texts to `failures`.
local function check_call(m, opts, dtype, groups, expects, want_shape, failures, label)
  local op = opts.op
  local ok, r1, r2 = pcall(gr.reduce, m, opts)
  if not ok then
    failures[#failures + 1] = label .. ": raised " .. tostring(r1)
    return
  end
  local d1, d2 = A.result_dtypes(op, dtype, opts.acc)
  local why = check_buffer(r1, d1, m:where(), want_shape, "the result")
  if not why and d2 then why = check_buffer(r2, d2, m:where(), want_shape, "the second result") end
  if not why and not d2 and r2 ~= nil then why = "a second result came back for a one-result op" end
  if why then
    failures[#failures + 1] = label .. ": " .. why
    return
  end
  local t1, t2 = r1:totable(1), d2 and r2:totable(1)
  if #t1 ~= #groups then
    failures[#failures + 1] = string.format("%s: %d results for %d outputs", label, #t1, #groups)
    return
  end
  for g, group in ipairs(groups) do
    local got, bad = first_value(op, t1[g])
    local got2 = t2 and t2[g]
    local good
    if got == nil then
      good, why = false, bad
    elseif #group == 0 then
      good, why = A.check_empty(op, dtype, t1[g], got2)
    else
      good, why = R.check(op, true, got, expects[g], got2)
    end
    if not good then
      failures[#failures + 1] = string.format("%s: output %d of %d over %s: %s; got %s%s%s", label, g, #groups,
        values_text(group), why or "wrong", R.fmt(t1[g]), got2 ~= nil and (", " .. R.fmt(got2)) or "",
        #group > 0 and expects[g].text and ("; expected " .. expects[g].text) or "")
      return
    end
  end
  r1:free()
  if r2 then r2:free() end
end

local function report(failures, total)
  if #failures > 0 then
    error(string.format("%d of %d calls failed:\n  %s%s", #failures, total,
      table.concat(failures, "\n  ", 1, math.min(#failures, 12)),
      #failures > 12 and ("\n  ... and " .. (#failures - 12) .. " more") or ""), 0)
  end
end

--- Every view of one shape along every axis spec and op, over the dtype's data sets. plan: views (a
-- list like VIEWS), axes (nd -> list of axis specs), ops (a list of option tables with op), sets, and
-- keepdims (the values to try; default false and true).
local function check_shape(dtype, shape, where, plan)
  local n = A.product(shape)
  local failures, total = {}, 0
  for si, set in ipairs(plan.sets) do
    local seed = text_seed(dtype .. set .. shape_text(shape))
    local values = {}
    for i = 1, n do values[i] = value_of(dtype, set, i, seed) end
    -- every other data set (and a lone one), or as plan.skip says, lies in a slice that starts `skip`
    -- elements into a larger buffer, off any alignment, between elements that show if they are read
    local skip = plan.skip or ((si % 2 == 0 or #plan.sets == 1) and 3 or 0)
    local whole = new_buffer(n + 2 * skip, dtype, where)
    if skip > 0 then whole:fill(sentinel(dtype)) end
    if n > 0 then whole:set(values, skip + 1) end
    local parent = skip > 0 and whole:slice(skip + 1, n) or whole
    local data = R.boolify(dtype, parent:totable(1))       -- as stored (small floats rounded; bool as 0/1)
    local before = whole:tobytes()
    for _, view in ipairs(plan.views) do
      local m = view[2](parent:view(shape))
      if m then
        local ref = view[3](A.compact(data, shape))
        assert.same(ref.shape, m:shape())                   -- the spec's own view model
        for _, axis in ipairs(plan.axes(#ref.shape)) do
          local axes = assert(A.normalize(axis, #ref.shape))
          local groups = A.groups(ref, axes)
          for _, o in ipairs(plan.ops) do
            local info = { dtype = dtype, acc = o.acc, ddof = o.ddof }
            local expects = {}
            for g, group in ipairs(groups) do
              if #group > 0 then expects[g] = R.expect(o.op, group, info) end
            end
            for _, keepdims in ipairs(plan.keepdims or { false, true }) do
              local opts = { axis = axis, keepdims = keepdims }
              for k, v in pairs(o) do opts[k] = v end
              local label = string.format("%s %s of %s, axis = %s, keepdims = %s, %s", set, view[1],
                shape_text(shape), axis_text(axis), tostring(keepdims), opts_text(o))
              total = total + 1
              check_call(m, opts, dtype, groups, expects, A.result_shape(ref.shape, axes, keepdims), failures, label)
            end
          end
        end
      end
    end
    if whole:tobytes() ~= before then failures[#failures + 1] = set .. ": the input buffer changed" end
    whole:free()
  end
  report(failures, total)
end

describe("reductions along axes: generated cases", function()
  for _, where in ipairs(SIDES) do
    for di, dtype in ipairs(gr.dtypes()) do
      local plan = { views = VIEWS, axes = axes_for, ops = ops_for(dtype, di), sets = data_sets(dtype) }
      for _, shape in ipairs(SHAPES) do
        side_it(where)(string.format("%s %s %s: every view, axis and op", where, dtype, shape_text(shape)), function()
          check_shape(dtype, shape, where, plan)
        end)
      end
    end
  end
end)

-- Larger shapes, where reductions along an axis are long (pairwise sums, several threads) or many: a
-- few dtypes and ops, the compact, transposed and narrowed views, every single axis and all axes
-- (keepdims false only: the small shapes check it).
local LARGE_SHAPES = { { 3, 4097 }, { 4097, 3 }, { 20, 30, 40 }, { 2, 300, 1, 3 } }
local LARGE_DTYPES = { "float32", "int32", "float16" }
local LARGE_OPS = { "sum", "max", "argmin", "mean", "var", "count", "nansum", "absmax" }

local function large_axes(nd)
  local list, all = {}, {}
  for a = 1, nd do
    list[#list + 1] = a
    all[a] = a
  end
  if nd > 1 then list[#list + 1] = all end
  return list
end

describe("reductions along axes: larger shapes", function()
  for _, where in ipairs(SIDES) do
    for _, dtype in ipairs(LARGE_DTYPES) do
      local ops = {}
      for _, op in ipairs(LARGE_OPS) do ops[#ops + 1] = { op = op } end
      if dtype == "float32" then ops[#ops + 1] = { op = "sum", acc = "float64" } end
      for si, shape in ipairs(LARGE_SHAPES) do
        -- float data of mixed magnitudes (slow to sum exactly in Lua) on the first shape, ties (exact
        -- sums) on the others
        local sets = { (si == 1 or not is_float(dtype)) and "wide" or "ties" }
        local plan = { views = { VIEWS[1], VIEWS[2], VIEWS[4] }, axes = large_axes, ops = ops, sets = sets,
          keepdims = { false }, skip = si % 2 == 0 and 1 or 0 }
        side_it(where)(string.format("%s %s %s: long and many reductions", where, dtype, shape_text(shape)), function()
          check_shape(dtype, shape, where, plan)
        end)
      end
    end
  end

  -- on the GPU: sizes that take many blocks per output, or many outputs per block
  for _, dtype in ipairs({ "float32", "int8" }) do
    local plan = { views = { VIEWS[1], VIEWS[2] }, axes = large_axes, sets = { is_float(dtype) and "ties" or "wide" },
      ops = { { op = "sum" }, { op = "max" }, { op = "argmax" }, { op = "count" }, { op = "and" }, { op = "mean" } },
      keepdims = { false } }
    for si, shape in ipairs({ { 3, 65537 }, { 65537, 3 }, { 300, 701 } }) do
      H.gpu_it(string.format("device %s %s: long and many reductions on the GPU", dtype, shape_text(shape)), function()
        check_shape(dtype, shape, "device", setmetatable({ skip = si < 3 and 1 or 0 }, { __index = plan }))
      end)
    end
  end

  -- on the GPU: narrow columns of rows back to back and lone contiguous columns, which the column kernel
  -- reads through shared memory in runs of 64 rows (whole runs staged, the rest one element at a time):
  -- 1 to 16 columns of 2- to 8-byte types (1-byte types read otherwise), batches too, lengths that end
  -- inside a run
  for _, dtype in ipairs({ "float32", "bfloat16", "float64", "float16", "int16", "int64", "uint8" }) do
    -- the odd data sets in a buffer of their own (aligned: staged), the second 3 elements into one (not)
    local plan = { views = { VIEWS[1] }, axes = function() return { 1 } end,
      sets = is_float(dtype) and { "specials", "ties", "wide" } or { "wide", "ties" }, keepdims = { false },
      ops = { { op = "sum" }, { op = "min" }, { op = "argmax" }, { op = "var" }, { op = "mean" }, { op = "absmax" } } }
    for _, shape in ipairs({ { 1000, 1 }, { 1000, 2 }, { 577, 4 }, { 640, 8 }, { 200, 16 } }) do
      H.gpu_it(string.format("device %s %s: narrow columns read staged", dtype, shape_text(shape)), function()
        check_shape(dtype, shape, "device", plan)
      end)
    end
    local batches = setmetatable({ axes = function() return { 2 } end }, { __index = plan })
    for _, shape in ipairs({ { 3, 130, 2 }, { 2, 300, 4 }, { 5, 64, 8 } }) do
      H.gpu_it(string.format("device %s %s: narrow columns of batches read staged", dtype, shape_text(shape)), function()
        check_shape(dtype, shape, "device", batches)
      end)
    end
  end

  -- on the GPU: short columns (64 rows or fewer: one run a group, no tree) of many columns a block, one
  -- batch's columns over several blocks (the last one partial), and whole rows of batches back to back;
  -- results of one and two buffers, of 1 to 8 bytes
  for _, dtype in ipairs({ "float32", "bfloat16", "float64", "int8", "int64", "float16", "bool" }) do
    local ops = { { op = "sum" }, { op = "argmax" }, { op = "mean" }, { op = "minmax" }, { op = "count" } }
    if dtype ~= "bool" then ops[#ops + 1] = { op = "var" } end
    local plan = { views = { VIEWS[1] }, axes = function(nd) return { nd - 1 } end,
      sets = R.DTYPES[dtype].bool and { "ties" } or (is_float(dtype) and { "specials", "ties", "wide" } or { "wide", "ties" }),
      keepdims = { false, true }, ops = ops, skip = 0 }
    for _, shape in ipairs({ { 16, 4096 }, { 64, 1000 }, { 50, 16, 8 }, { 7, 40, 1024 } }) do
      H.gpu_it(string.format("device %s %s: short columns, many a block", dtype, shape_text(shape)), function()
        check_shape(dtype, shape, "device", plan)
      end)
    end
  end

  -- on the GPU: reduced axes of 1 to 7 rows under wide kept axes (runs shorter than a thread's loads in
  -- flight: vectors of a row's columns, and single columns where the row is not whole vectors)
  for _, dtype in ipairs({ "float32", "bfloat16", "int8", "float64" }) do
    local plan = { views = { VIEWS[1] }, axes = function() return { 2 } end,
      sets = is_float(dtype) and { "specials", "wide" } or { "wide" }, keepdims = { false }, skip = 0,
      ops = { { op = "sum" }, { op = "max" }, { op = "argmax" }, { op = "var" }, { op = "minmax" } } }
    for _, shape in ipairs({ { 3, 1, 520 }, { 2, 3, 1032 }, { 4, 7, 96 }, { 2, 5, 33 } }) do
      H.gpu_it(string.format("device %s %s: a short middle axis under wide rows", dtype, shape_text(shape)), function()
        check_shape(dtype, shape, "device", plan)
      end)
    end
  end

  -- on the GPU: columns of more than one group of 512 rows take passes over the groups' partials: two
  -- passes, three (more than 2^18 rows), narrow and wide, every op in a row
  for _, dtype in ipairs({ "float32", "bfloat16", "int8" }) do
    local plan = { views = { VIEWS[1] }, axes = function(nd) return { nd - 1 } end,
      sets = { is_float(dtype) and "ties" or "wide" }, keepdims = { false }, skip = 0,
      ops = { { op = "sum" }, { op = "max" }, { op = "argmax" }, { op = "var" }, { op = "minmax" }, { op = "count" },
        { op = "mean" } } }
    for _, shape in ipairs({ { 300001, 2 }, { 2, 263000, 3 }, { 1000, 700 }, { 5000, 3 } }) do
      H.gpu_it(string.format("device %s %s: columns of several passes", dtype, shape_text(shape)), function()
        check_shape(dtype, shape, "device", plan)
      end)
    end
  end

  H.gpu_it("device: a column of several passes has the same bits alone, among 700 or 2 columns, and async",
    function()
      for _, dtype in ipairs({ "float32", "bfloat16" }) do
        local m = gr.buffer(1000 * 700, dtype, { where = "device" }):random(7, -1, 1):view { 1000, 700 }
        local t = gr.buffer(300001 * 2, dtype, { where = "device" }):random(8, -1, 1):view { 300001, 2 }
        -- output p's bytes of a call's one or two results
        local function bytes(p, r1, r2) return r1:tobytes(p, 1) .. (r2 and r2:tobytes(p, 1) or "") end
        for _, op in ipairs({ "sum", "var", "argmax", "max", "minmax" }) do
          local w1, w2 = gr.reduce(m, { op = op, axis = 1 })          -- 700 columns: several blocks a pass
          for _, p in ipairs({ 1, 2, 255, 256, 257, 700 }) do
            -- one contiguous column: read along it (staged), its passes one block each
            local a1, a2 = gr.reduce(m:narrow(2, p, 1):contiguous(), { op = op, axis = 1 })
            assert.equal(bytes(1, a1, a2), bytes(p, w1, w2), string.format("%s %s column %d", dtype, op, p))
          end
          local s1, s2 = gr.reduce(t, { op = op, axis = 1 })
          local q1, q2 = gr.reduce(t, { op = op, axis = 1, async = true }):wait()
          for p = 1, 2 do
            assert.equal(bytes(p, s1, s2), bytes(p, q1, q2), string.format("%s %s async, column %d", dtype, op, p))
            local a1, a2 = gr.reduce(t:narrow(2, p, 1):contiguous(), { op = op, axis = 1 })
            assert.equal(bytes(1, a1, a2), bytes(p, s1, s2), string.format("%s %s of (300001, 2) column %d", dtype, op, p))
          end
        end
      end
    end)
end)

---------------------------------------------------------------------------------------------------
-- the reference itself (a wrong reference would hide bugs)

describe("reductions along axes: the reference", function()
  it("groups, shapes and exact sums on hand-made cases", function()
    local r = A.compact({ 1, 2, 3, 4, 5, 6 }, { 2, 3 })
    assert.same({ { 1, 4 }, { 2, 5 }, { 3, 6 } }, A.groups(r, { 1 }))
    assert.same({ { 1, 2, 3 }, { 4, 5, 6 } }, A.groups(r, { 2 }))
    assert.same({ { 1, 2, 3, 4, 5, 6 } }, A.groups(r, { 1, 2 }))
    assert.same({ { 1, 4 }, { 2, 5 }, { 3, 6 } }, A.groups(A.transpose(r), { 2 }))
    assert.same({ { 1, 2, 3 }, { 4, 5, 6 } }, A.groups(A.transpose(r), { 1 }))
    assert.same({ { 2, 3 }, { 5, 6 } }, A.groups(A.narrow(r, 2, 2, 2), { 2 }))
    assert.same({ 3 }, A.result_shape({ 2, 3 }, { 1 }, false))
    assert.same({ 1, 3 }, A.result_shape({ 2, 3 }, { 1 }, true))
    assert.same({ 1 }, A.result_shape({ 2, 3 }, { 1, 2 }, false))
    assert.same({ 1, 1 }, A.result_shape({ 2, 3 }, { 1, 2 }, true))
    assert.same({ 1, 3 }, A.normalize({ 3, -3 }, 3))
    assert.is_nil(A.normalize({ 1, -3 }, 3))
    assert.is_nil(A.normalize(0, 3))
    assert.same({ {}, {}, {} }, A.groups(A.compact({}, { 3, 0 }), { 2 }))
    assert.same({}, A.groups(A.compact({}, { 3, 0 }), { 1 }))
    -- exact sums: 1 + 2^-24 + 2^-40 rounds up in float32; 2^53 + 1 + 1 is 2^53 + 2 in float64;
    -- 1 + 2^-24 alone is a tie, to even (1); with -2^-80 below it, down; with 2^-80, up
    assert.equal(1 + 0x1p-23, A.exact_sum({ 1.0, 0x1p-24, 0x1p-40 }, "float32"))
    assert.equal(0x1p53 + 2, A.exact_sum({ 0x1p53, 1.0, 1.0 }, "float64"))
    assert.equal(1.0, A.exact_sum({ 1.0, 0x1p-24 }, "float32"))
    assert.equal(1.0, A.exact_sum({ 1.0, 0x1p-24, -0x1p-80 }, "float32"))
    assert.equal(1 + 0x1p-23, A.exact_sum({ 1.0, 0x1p-24, 0x1p-80 }, "float32"))
    assert.equal(1e-16, A.exact_sum({ 1e16, 1e-16, -1e16 }, "float64"))
    assert.equal(-math.huge, 1 / A.exact_sum({ -0.0, -0.0 }, "float64"))
    assert.equal(math.huge, 1 / A.exact_sum({ -0.0, 0.0 }, "float32"))
  end)
end)

---------------------------------------------------------------------------------------------------
-- opts.out

describe("reductions along axes: opts.out", function()
  for _, where in ipairs(SIDES) do
    side_it(where)(where .. ": a buffer of the result's shape and dtype receives the results and comes back", function()
      local m = new_buffer(12, "int32", where):iota(1):view { 3, 4 }
      local out = new_buffer(3, "int64", where):fill(-7)
      local r = gr.reduce(m, { op = "sum", axis = 2, out = out })
      assert.equal(out, r)
      assert.same({ 10, 26, 42 }, out:totable())
      local keep = new_buffer(4, "int64", where):view { 1, 4 }
      assert.equal(keep, gr.sum(m, { axis = 1, keepdims = true, out = keep }))
      assert.same({ { 15, 18, 21, 24 } }, keep:totable())
      local all = new_buffer(1, "int64", where)
      assert.equal(all, gr.reduce(m, { op = "sum", axis = { 1, 2 }, out = all }))
      assert.same({ 78 }, all:totable())
      local f = new_buffer(24, "float32", where):iota(1):view { 2, 3, 4 }
      local means = new_buffer(3, "float32", where)
      assert.equal(means, gr.mean(f, { axis = { 1, 3 }, out = means }))
      assert.same({ 8.5, 12.5, 16.5 }, means:totable())
      local t = new_buffer(12, "float64", where):iota(1):view { 3, 4 }:transpose()   -- strided input
      local cols = new_buffer(4, "float64", where)
      assert.equal(cols, gr.max(t, { axis = -1, out = cols }))
      assert.same({ 9, 10, 11, 12 }, cols:totable())
    end)

    side_it(where)(where .. ": an out at any element offset gets the bits of a new result", function()
      -- a middle axis under rows of whole vectors: the column kernel stores a thread's results as 16-byte
      -- vectors where the out is aligned, one by one where not
      for _, dtype in ipairs({ "float32", "bfloat16", "int8", "float64" }) do
        local m = new_buffer(2 * 3 * 1032, dtype, where):random(5, -100, 100):view { 2, 3, 1032 }
        for _, op in ipairs({ "sum", "max", "mean" }) do
          local want = gr.reduce(m, { op = op, axis = 2 })
          for _, skip in ipairs({ 0, 1, 2, 3, 4 }) do
            local whole = new_buffer(2 * 1032 + 5, want:dtype(), where):fill(9)
            local out = whole:slice(skip + 1, 2 * 1032):view { 2, 1032 }
            assert.equal(out, gr.reduce(m, { op = op, axis = 2, out = out }))
            assert.equal(want:tobytes(), out:tobytes(), string.format("%s %s, out %d elements in", dtype, op, skip))
            assert.equal(9, whole:get(2 * 1032 + 5), "past the out")
            if skip > 0 then assert.equal(9, whole:get(skip), "before the out") end
          end
        end
      end
    end)

    side_it(where)(where .. ": two buffers for argmin, argmax and minmax, returned in order", function()
      local m = new_buffer(6, "float64", where):set({ 3, 1, 1, -2, 5, -2 }):view { 2, 3 }
      local v, i = new_buffer(2, "float64", where), new_buffer(2, "int64", where)
      local rv, ri = gr.reduce(m, { op = "argmin", axis = 2, out = { v, i } })
      assert.equal(v, rv)
      assert.equal(i, ri)
      assert.same({ 1, -2 }, v:totable())
      assert.same({ 2, 1 }, i:totable())
      local lo, hi = new_buffer(3, "float64", where):view { 1, 3 }, new_buffer(3, "float64", where):view { 1, 3 }
      local rlo, rhi = gr.minmax(m, { axis = 1, keepdims = true, out = { lo, hi } })
      assert.equal(lo, rlo)
      assert.equal(hi, rhi)
      assert.same({ { -2, 1, -2 } }, lo:totable())
      assert.same({ { 3, 5, 1 } }, hi:totable())
      local av, ai = new_buffer(1, "float64", where), new_buffer(1, "int64", where)
      gr.argmax(m, { axis = { 1, 2 }, out = { av, ai } })
      assert.same({ 5 }, av:totable())
      assert.same({ 5 }, ai:totable())          -- row-major position 5 of the 2 x 3
    end)

    side_it(where)(where .. ": refuses an out of the wrong shape, dtype or count, naming out; writes nothing", function()
      local m = new_buffer(12, "int32", where):iota(1):view { 3, 4 }
      local before = m:tobytes()
      local cases = {
        { { op = "sum", axis = 2 }, new_buffer(4, "int64", where), "count" },
        { { op = "sum", axis = 2 }, new_buffer(3, "int64", where):view { 1, 3 }, "shape" },
        { { op = "sum", axis = 2 }, new_buffer(3, "int64", where):view { 3, 1 }, "keepdims shape without keepdims" },
        { { op = "sum", axis = 2, keepdims = true }, new_buffer(3, "int64", where), "shape without keepdims' 1" },
        { { op = "sum", axis = 2 }, new_buffer(3, "int32", where), "dtype" },
        { { op = "sum", axis = 2 }, new_buffer(3, "float64", where), "dtype" },
        { { op = "mean", axis = 1 }, new_buffer(4, "float32", where), "dtype (mean of int32 is float64)" },
        { { op = "count", axis = { 1, 2 } }, new_buffer(1, "uint64", where), "dtype (count is int64)" },
        { { op = "sum", axis = { 1, 2 } }, new_buffer(2, "int64", where), "count for every axis" },
        { { op = "argmax", axis = 2 }, new_buffer(3, "int32", where), "one buffer for two results" },
        { { op = "argmax", axis = 2 }, { new_buffer(3, "int32", where), new_buffer(3, "float64", where) }, "index dtype" },
        { { op = "argmax", axis = 2 }, { new_buffer(3, "int32", where), new_buffer(2, "int64", where) }, "index count" },
        { { op = "minmax", axis = 2 }, { new_buffer(3, "int32", where), new_buffer(3, "int64", where) }, "max dtype" },
      }
      for _, c in ipairs(cases) do
        local opts = c[1]
        opts.out = c[2]
        local outs = type(c[2]) == "table" and c[2] or { c[2] }
        for _, o in ipairs(outs) do o:fill(1) end
        local snapshot = {}
        for k, o in ipairs(outs) do snapshot[k] = o:tobytes() end
        local ok, err = pcall(gr.reduce, m, opts)
        assert(not ok, "accepted an out of the wrong " .. c[3])
        assert(tostring(err):match("out"), "the error for a wrong " .. c[3] .. " does not name out: " .. tostring(err))
        for k, o in ipairs(outs) do
          assert(o:tobytes() == snapshot[k], "a refused call (" .. c[3] .. ") wrote into out")
        end
      end
      assert.equal(before, m:tobytes())
    end)
  end
end)

---------------------------------------------------------------------------------------------------
-- refusals

describe("reductions along axes: refusals", function()
  local function refused(pattern, m, opts)
    local ok, err = pcall(gr.reduce, m, opts)
    assert(not ok, "accepted " .. H.describe_opts(opts))
    assert(tostring(err):match(pattern), "the error for " .. H.describe_opts(opts) .. " does not name " .. pattern ..
      ": " .. tostring(err))
  end

  for _, where in ipairs(SIDES) do
    side_it(where)(where .. ": axis 0, out of range, repeated or not an integer names opts.axis", function()
      local m = new_buffer(24, "float32", where):iota(1):view { 2, 3, 4 }
      for _, axis in ipairs({ 0, 4, -4, 100, { 1, 1 }, { 1, -3 }, { 2, 3, -1 }, { 0 }, { 1, 4 }, 1.5, "1", { "2" } }) do
        refused("axis", m, { op = "sum", axis = axis })
      end
      refused("axis", m:transpose(), { op = "argmax", axis = 4 })
      refused("axis", new_buffer(5, "int8", where), { op = "min", axis = 2 })
      assert.has_error(function() gr.sum(m, { axis = 0 }) end)
      assert.has_error(function() gr.sum(m, { axis = { 3, 3 } }) end)
    end)

    side_it(where)(where .. ": axis with segment or offsets is refused", function()
      local m = new_buffer(12, "int32", where):iota(1):view { 3, 4 }
      refused("axis", m, { op = "sum", axis = 1, segment = 4 })
      refused("axis", m, { op = "sum", axis = 1, offsets = gr.buffer({ 0, 6, 12 }, "int64") })
    end)

    side_it(where)(where .. ": keepdims without axis is refused", function()
      local m = new_buffer(12, "int32", where):iota(1):view { 3, 4 }
      refused("keepdims", m, { op = "sum", keepdims = true })
      refused("keepdims", new_buffer(4, "float32", where), { op = "max", keepdims = true })
    end)

    side_it(where)(where .. ": a refused call leaves the input alone", function()
      local m = new_buffer(12, "float64", where):iota(1):view { 3, 4 }
      local before = m:tobytes()
      pcall(gr.reduce, m, { op = "sum", axis = 3 })
      pcall(gr.reduce, m, { op = "sum", axis = 1, out = new_buffer(3, "float64", where) })
      assert.equal(before, m:tobytes())
    end)
  end
end)

---------------------------------------------------------------------------------------------------
-- async and streams: opts.async returns a Pending whose wait gives the result buffers, opts.stream
-- runs the work there; the same bits as the synchronous call

describe("reductions along axes: async and streams", function()
  -- views that take each route: rows, columns, a transposed view, a narrow, and two reduced axes that
  -- need the regrouped copy
  local function cases(where, dtype)
    local base = new_buffer(48 * 40, dtype, where):random(11, -4, 4)
    local m = base:view { 48, 40 }
    local cube = new_buffer(6 * 7 * 40, dtype, where):random(12, -4, 4):view { 6, 7, 40 }
    return {
      { "rows", m, 2 }, { "columns", m, 1 }, { "transposed rows", m:transpose(), 1 },
      { "transposed columns", m:transpose(), 2 }, { "a narrow", m:narrow(2, 3, 30), 2 },
      { "axes 1 and 3", cube, { 1, 3 } }, { "every axis", cube, { 1, 2, 3 } },
    }
  end
  local function bytes_of(...)
    local t = {}
    for i, r in ipairs({ ... }) do t[i] = r:tobytes() end
    return table.concat(t, "|")
  end

  for _, where in ipairs(SIDES) do
    for _, dtype in ipairs({ "float32", "bfloat16", "int32" }) do
      side_it(where)(string.format("%s %s: async and stream give the synchronous call's bits", where, dtype), function()
        local s = gr.stream()
        for _, c in ipairs(cases(where, dtype)) do
          for _, op in ipairs({ "sum", "argmax", "var", "minmax", "mean", "max" }) do
            local opts = { op = op, axis = c[3] }
            local want = bytes_of(gr.reduce(c[2], opts))
            local what = string.format("%s of %s", op, c[1])
            opts.async = true
            local p = gr.reduce(c[2], opts)
            assert.equal("userdata", type(p), what)
            assert.equal(want, bytes_of(p:wait()), what .. " (async)")
            assert.equal(want, bytes_of(p:wait()), what .. " (a second wait)")
            assert.is_true(p:ready())
            opts.stream = s
            assert.equal(want, bytes_of(gr.reduce(c[2], opts):wait()), what .. " (async on a stream)")
            opts.async = nil
            assert.equal(want, bytes_of(gr.reduce(c[2], opts)), what .. " (on a stream)")
          end
        end
        s:sync()
        s:free()
      end)
    end

    side_it(where)(where .. ": async with out gives back the out buffers; keepdims keeps the shape", function()
      local m = new_buffer(64 * 32, "float64", where):iota(1):view { 64, 32 }
      local o = new_buffer(32, "float64", where)
      local r = gr.sum(m, { axis = 1, async = true, out = o }):wait()
      assert.is_true(rawequal(o, r))
      assert.equal(gr.sum(m, { axis = 1 }):tobytes(), o:tobytes())
      local v, i = gr.argmin(m, { axis = 2, keepdims = true, async = true }):wait()
      assert.same({ 64, 1 }, v:shape())
      assert.same({ 64, 1 }, i:shape())
      assert.equal(1, i:get(1))
      local ov, oi = new_buffer(64, "float64", where), new_buffer(64, "int64", where)
      local rv, ri = gr.argmax(m, { axis = 2, out = { ov, oi }, async = true }):wait()
      assert.is_true(rawequal(ov, rv) and rawequal(oi, ri))
      assert.equal(32, oi:get(64))
    end)

    side_it(where)(where .. ": the input may be freed or written, and the result read, before the wait", function()
      local n, c = 1 << 12, 1 << 10
      local base = new_buffer(n * c, "float32", where):random(5, -1, 1)
      local m = base:view { n, c }
      local want_rows = gr.sum(m, { axis = 2 }):tobytes()
      local want_cols = gr.sum(m, { axis = 1 }):tobytes()
      -- read before the wait: the read waits for the work
      local o = new_buffer(c, "float32", where)
      local p = gr.sum(m, { axis = 1, async = true, out = o })
      assert.equal(want_cols, o:tobytes())
      p:wait()
      -- written right after the call: the write waits, the result is the data's before
      p = gr.sum(m, { axis = 1, async = true })
      base:fill(0)
      assert.equal(want_cols, p:wait():tobytes())
      -- freed before the wait: the pending holds the memory
      base:random(5, -1, 1)
      p = gr.sum(m, { axis = 2, async = true })
      m:free()
      base:free()
      collectgarbage()
      assert.equal(want_rows, p:wait():tobytes())
      -- released without a wait
      local q = gr.sum(new_buffer(256, "float32", where):iota(1):view { 16, 16 }, { axis = 1, async = true })
      q:free()
      assert.has_error(function() q:wait() end)
    end)

    side_it(where)(where .. ": async on empty axes and single elements", function()
      local empty_red = new_buffer(0, "float32", where):view { 0, 5 }
      local r = gr.sum(empty_red, { axis = 1, async = true }):wait()
      assert.same({ 5 }, r:shape())
      assert.same({ 0, 0, 0, 0, 0 }, r:totable())
      local v, i = gr.argmax(empty_red, { axis = 1, async = true }):wait()
      assert.same({ 5 }, v:shape())
      assert.equal(0, i:get(1))
      local empty_kept = new_buffer(0, "float32", where):view { 5, 0 }
      assert.equal(0, #gr.sum(empty_kept, { axis = 1, async = true }):wait())
      assert.equal(5, #gr.sum(empty_kept, { axis = 2, async = true }):wait())
      local one = new_buffer(1, "int32", where):fill(7):view { 1, 1 }
      assert.equal(7, gr.sum(one, { axis = { 1, 2 }, async = true }):wait():get(1))
      assert.equal(7, gr.max(one, { axis = 1, async = true }):wait():get(1))
    end)

    side_it(where)(where .. ": streamed data along axes is refused, naming opts.axis", function()
      local m = new_buffer(12, "float32", where):iota(1):view { 3, 4 }
      local ok, err = pcall(gr.reduce, m, { op = "sum", axis = 1, streamed = true })
      assert.is_false(ok)
      assert.truthy(tostring(err):match("opts%.axis"), tostring(err))
    end)
  end
end)

---------------------------------------------------------------------------------------------------
-- the op functions

describe("reductions along axes: the op functions", function()
  for _, where in ipairs(SIDES) do
    side_it(where)(where .. ": gr.<op>(m, {axis = ...}) is gr.reduce with that op", function()
      local m = new_buffer(24, "int16", where):iota(-5):view { 2, 3, 4 }
      for _, op in ipairs(gr.ops()) do
        local fn = gr[op]
        local a1, a2 = fn(m, { axis = 2 })
        local b1, b2 = gr.reduce(m, { op = op, axis = 2 })
        assert.equal(b1:tobytes(), a1:tobytes())
        assert.same({ 2, 4 }, a1:shape())
        if A.TWO_RESULTS[op] then assert.equal(b2:tobytes(), a2:tobytes()) else assert.is_nil(a2) end
      end
      -- the aliases all / any
      assert.equal(gr["and"](m, { axis = -1 }):tobytes(), gr.all(m, { axis = -1 }):tobytes())
      assert.equal(gr["or"](m, { axis = -1 }):tobytes(), gr.any(m, { axis = -1 }):tobytes())
      -- keepdims omitted is keepdims = false; a buffer comes back even for a 1-D reduction
      assert.equal(gr.sum(m, { axis = 1 }):tobytes(), gr.sum(m, { axis = 1, keepdims = false }):tobytes())
      local s = gr.sum(new_buffer(5, "int16", where):iota(1), { axis = 1 })
      assert.same({ 1 }, s:shape())
      assert.same({ 15 }, s:totable())
      -- a whole-buffer call without axis still returns values
      assert.equal(math.type(gr.sum(m)), "integer")
    end)

    side_it(where)(where .. ": argmax over several axes gives the row-major position within them", function()
      local m = new_buffer(24, "float32", where):fill(0):view { 2, 3, 4 }
      -- two 9s among zeros; reducing axes 1 and 2 leaves one output per position along axis 3
      m:set({ 9 }, 1 * 12 + 2 * 4 + 4)          -- element (2, 3, 4): output 4
      m:set({ 9 }, 0 * 12 + 1 * 4 + 1)          -- element (1, 2, 1): output 1
      local v, i = gr.argmax(m, { axis = { 1, 2 } })
      assert.same({ 9, 0, 0, 9 }, v:totable())
      assert.same({ 2, 1, 1, 6 }, i:totable())  -- (1, 2) is position 2 of 2 x 3, (2, 3) position 6
      v, i = gr.argmax(m, { axis = { 1, 2 }, keepdims = true })
      assert.same({ 1, 1, 4 }, i:shape())
      v, i = gr.argmin(m:permute { 3, 1, 2 }, { axis = 1 })  -- along the old last axis
      assert.same({ 2, 3 }, i:shape())
      assert.same({ { 1, 2, 1 }, { 1, 1, 1 } }, i:totable())
    end)

    side_it(where)(where .. ": NaN: the first NaN wins argmax and argmin along an axis; min and max give NaN", function()
      local m = new_buffer({ 1, nan, 5, -nan, 2, 3, 4, inf, nan }, "float64", where):view { 3, 3 }
      local v, i = gr.argmax(m, { axis = 2 })
      assert.same({ 2, 1, 3 }, i:totable())
      local t = v:totable()
      assert.is_true(t[1] ~= t[1] and t[2] ~= t[2] and t[3] ~= t[3])
      v, i = gr.argmin(m, { axis = 1 })
      assert.same({ 2, 1, 3 }, i:totable())          -- columns {1, -nan, 4}, {nan, 2, inf}, {5, 3, nan}
      local mx = gr.max(m, { axis = 1 }):totable()
      assert.is_true(mx[1] ~= mx[1] and mx[2] ~= mx[2] and mx[3] ~= mx[3])
      local nm = gr.nanmax(m, { axis = 1 }):totable()
      assert.same({ 4, inf, 5 }, nm)
    end)
  end
end)

---------------------------------------------------------------------------------------------------
-- determinism

local DET_DTYPES = { "float32", "float64", "float16", "bfloat16" }
local DET_OPS = { "sum", "mean", "var", "std", "norm", "sumsq", "nansum", "asum", "nanmean", "prod" }
local L = 1000                               -- long enough that the order of additions shows
local ROW_COUNTS = { 2, 3, 5, 8, 17, 40 }
local COL_COUNTS = { 2, 3, 5, 16, 33 }

--- Line j (a row or a column) of the determinism data: mixed magnitudes and signs; for prod, near 1.
local function line_values(dtype, j, near_one)
  local out = {}
  local small = R.DTYPES[dtype].small
  for i = 1, L do
    local h = hash(j, i, 77)
    local u = (h >> 11) * 0x1p-53
    if near_one then
      out[i] = 0.99 + 0.02 * u
    else
      out[i] = (2 * u - 1) * 2.0 ^ ((h % 17) - (small and 12 or 8))
    end
  end
  return out
end

--- Matrices of lines for one test: lines(first, k, rows) is the (k, L) matrix whose row p holds line
-- first + p - 1 (rows = true), or the (L, k) matrix of those columns (rows = false). Made once each.
local function line_matrices(dtype, where, near_one)
  local lines, made = {}, {}
  local function line(j)
    lines[j] = lines[j] or line_values(dtype, j, near_one)
    return lines[j]
  end
  return function(first, k, rows)
    local key = table.concat({ first, k, tostring(rows) }, ":")
    if not made[key] then
      local flat = {}
      for p = 1, k do
        local v = line(first + p - 1)
        if rows then
          table.move(v, 1, L, (p - 1) * L + 1, flat)
        else
          for i = 1, L do flat[(i - 1) * k + p] = v[i] end
        end
      end
      local b = new_buffer(L * k, dtype, where):set(flat)
      made[key] = rows and b:view { k, L } or b:view { L, k }
    end
    return made[key]
  end
end

-- the bytes of output p of a result buffer, and the value for messages
local function output_bytes(r, p) return r:tobytes(p, 1) end

--- Compares outputs first..first + count - 1 of r with the lines alone (alone(j): the bytes of line j
-- reduced by itself); adds a failure per difference.
local function compare_lines(r, first, count, alone, failures, what)
  for p = 1, count do
    local j = first + p - 1
    if output_bytes(r, p) ~= alone(j) then
      failures[#failures + 1] = string.format("%s: output %d (line %d) is %a, alone %a", what, p, j, r:get(p),
        string.unpack(r:dtype() == "float64" and "<d" or "<f", alone(j)))
    end
  end
end

describe("reductions along axes: determinism", function()
  for _, where in ipairs(SIDES) do
    for _, dtype in ipairs(DET_DTYPES) do
      side_it(where)(string.format("%s %s: rows: an output's bits do not depend on the other rows or its position", where,
          dtype), function()
        local failures = {}
        for _, near_one in ipairs({ false, true }) do
          local lines = line_matrices(dtype, where, near_one)
          for _, op in ipairs(DET_OPS) do
            if (op == "prod") == near_one then
              local cache = {}
              local function alone(j)
                cache[j] = cache[j] or output_bytes(gr.reduce(lines(j, 1, true), { op = op, axis = 2 }), 1)
                return cache[j]
              end
              for _, k in ipairs(ROW_COUNTS) do
                for _, first in ipairs({ 1, 4 }) do              -- the same lines at other positions
                  local m = lines(first, k, true)
                  local what = string.format("%s of %d rows from line %d", op, k, first)
                  compare_lines(gr.reduce(m, { op = op, axis = 2 }), first, k, alone, failures, what)
                  compare_lines(gr.reduce(m, { op = op, axis = -1, keepdims = true }), first, k, alone, failures,
                    what .. " (axis -1, keepdims)")
                  -- the same rows as a narrow (of the first axis) of a larger matrix
                  local sub = lines(first - 1, k + 2, true):narrow(1, 2, k)
                  compare_lines(gr.reduce(sub, { op = op, axis = 2 }), first, k, alone, failures, what .. " (a narrow)")
                end
              end
            end
          end
        end
        report(failures, #failures)
      end)

      side_it(where)(string.format("%s %s: columns: an output's bits do not depend on the other columns or its position",
          where, dtype), function()
        local failures = {}
        for _, near_one in ipairs({ false, true }) do
          local lines = line_matrices(dtype, where, near_one)
          for _, op in ipairs(DET_OPS) do
            if (op == "prod") == near_one then
              local cache = {}
              local function alone(j)
                cache[j] = cache[j] or output_bytes(gr.reduce(lines(j, 1, false), { op = op, axis = 1 }), 1)
                return cache[j]
              end
              for _, c in ipairs(COL_COUNTS) do
                for _, first in ipairs({ 1, 3 }) do
                  local m = lines(first, c, false)
                  local what = string.format("%s of %d columns from line %d", op, c, first)
                  compare_lines(gr.reduce(m, { op = op, axis = 1 }), first, c, alone, failures, what)
                  compare_lines(gr.reduce(m, { op = op, axis = -2, keepdims = true }), first, c, alone, failures,
                    what .. " (axis -2, keepdims)")
                  -- strided views: each column narrowed alone, and a narrow of the inner columns
                  for p = 1, c, 2 do
                    compare_lines(gr.reduce(m:narrow(2, p, 1), { op = op, axis = 1 }), first + p - 1, 1, alone, failures,
                      what .. string.format(" (narrow(2, %d, 1))", p))
                  end
                  if c >= 3 then
                    compare_lines(gr.reduce(m:narrow(2, 2, c - 2), { op = op, axis = 1 }), first + 1, c - 2, alone,
                      failures, what .. string.format(" (narrow(2, 2, %d))", c - 2))
                  end
                end
              end
              -- columns of a transposed (k, L) matrix, strided along the reduced axis: the same bits
              -- whatever k and the column's position
              local tcache = {}
              local function talone(j)
                tcache[j] = tcache[j] or output_bytes(gr.reduce(lines(j, 1, true):transpose(), { op = op, axis = 1 }), 1)
                return tcache[j]
              end
              for _, k in ipairs({ 2, 7 }) do
                compare_lines(gr.reduce(lines(2, k, true):transpose(), { op = op, axis = 1 }), 2, k, talone, failures,
                  string.format("%s of the transposed (%d, L)", op, k))
              end
            end
          end
        end
        report(failures, #failures)
      end)

      side_it(where)(string.format("%s %s: run to run: the same call gives the same bits", where, dtype), function()
        local m = line_matrices(dtype, where, false)(1, 12, true)
        local t = m:transpose()
        for _, op in ipairs(DET_OPS) do
          for _, spec in ipairs({ { m, 2 }, { m, 1 }, { t, 1 }, { t, { 1, 2 } } }) do
            local first = gr.reduce(spec[1], { op = op, axis = spec[2] }):tobytes()
            for _ = 1, 3 do
              assert.equal(first, gr.reduce(spec[1], { op = op, axis = spec[2] }):tobytes(),
                op .. " along " .. axis_text(spec[2]) .. " changed from run to run")
            end
          end
        end
      end)
    end
  end
end)

---------------------------------------------------------------------------------------------------
-- gpu_to_gpu: exactly rounded sums along axes

--- n values (from seed) whose float sums round: integers times powers of two over many binades, and a
-- cancelling pair with a tiny value between (finite, far from overflow).
local function exact_values(dtype, n, seed)
  local out = {}
  local small = R.DTYPES[dtype].small
  for i = 1, n do
    local h = hash(seed, i, 5)
    local m = (h >> 40) - (1 << 23)                   -- a 24-bit signed integer
    local e
    if dtype == "float64" then
      m = (h >> 11) - (1 << 52)                        -- a 53-bit signed integer
      e = (h % 61) - 30 - 52
    elseif small then
      m = m // (1 << 13)                               -- 11 bits, over 29 binades
      e = (h % 29) - 24
      if R.DTYPES[dtype].fmt.p == 8 then                 -- bfloat16: 8 bits, over 61 binades
        m = m // 8
        e = (h % 61) - 40
      end
    else
      e = (h % 25) - 12 - 23
    end
    out[i] = m * 2.0 ^ e
  end
  -- a few cancellations: a big value and its negative in one line, a tiny one between
  if n >= 6 then
    local big = dtype == "float64" and 0x1p60 or (small and 0x1p15 or 0x1p30)
    out[2], out[n - 1] = big, -big
    out[3] = dtype == "float64" and 0x1p-40 or (small and 0x1p-24 or 0x1p-20)
  end
  return out
end

describe("reductions along axes: determinism = gpu_to_gpu", function()
  for _, where in ipairs(SIDES) do
    for _, dtype in ipairs({ "float32", "float64", "float16", "bfloat16" }) do
      side_it(where)(string.format("%s %s: sums along axes are the exact sums rounded once", where, dtype), function()
        local failures, total = {}, 0
        local result_format = dtype == "float64" and "float64" or "float32"
        for _, shape in ipairs({ { 6, 200 }, { 200, 5 }, { 3, 40, 7 }, { 1, 1 }, { 4, 0 } }) do
          local n = A.product(shape)
          local b = new_buffer(n, dtype, where)
          if n > 0 then b:set(exact_values(dtype, n, n + #shape)) end
          local data = b:totable(1)
          local views = { { "compact", b:view(shape), A.compact(data, shape) } }
          views[2] = { "transpose", views[1][2]:transpose(), A.transpose(views[1][3]) }
          for _, v in ipairs(views) do
            local nd = #v[3].shape
            local axis_list = nd == 2 and { 1, 2, -1, { 1, 2 } } or { 1, 2, 3, { 1, 3 }, { 1, 2, 3 } }
            for _, axis in ipairs(axis_list) do
              local groups = A.groups(v[3], assert(A.normalize(axis, nd)))
              for _, op in ipairs({ "sum", "nansum", "asum" }) do
                total = total + 1
                local ok, r = pcall(gr.reduce, v[2], { op = op, axis = axis, determinism = "gpu_to_gpu" })
                if not ok then
                  failures[#failures + 1] = string.format("%s %s %s axis %s: raised %s", op, v[1], shape_text(shape),
                    axis_text(axis), tostring(r))
                else
                  local got = r:totable(1)
                  for g, group in ipairs(groups) do
                    local terms = group
                    if op == "asum" then
                      terms = {}
                      for i, x in ipairs(group) do terms[i] = math.abs(x) end
                    end
                    local want = A.exact_sum(terms, result_format)
                    local same = got[g] == want and (want ~= 0 or 1 / got[g] == 1 / want)
                    if not same then
                      failures[#failures + 1] = string.format("%s %s %s axis %s: output %d: got %a, exact %a", op, v[1],
                        shape_text(shape), axis_text(axis), g, got[g], want)
                      break
                    end
                  end
                end
              end
            end
          end
        end
        report(failures, total)
      end)
    end

    side_it(where)(where .. ": gpu_to_gpu nansum skips NaN, and integer data is refused as for whole buffers", function()
      local m = new_buffer({ 1.0, nan, 0x1p-30, 3.0, -3.0, nan }, "float32", where):view { 2, 3 }
      local r = gr.nansum(m, { axis = 2, determinism = "gpu_to_gpu" })
      assert.same({ A.exact_sum({ 1.0, 0x1p-30 }, "float32"), 0.0 }, r:totable())
      local s = gr.sum(m, { axis = 1, determinism = "gpu_to_gpu" }):totable()
      assert.equal(4.0, s[1])
      assert.is_true(s[2] ~= s[2])
      assert.has_error(function() gr.sum(new_buffer(4, "int32", where):view { 2, 2 }, { axis = 1, determinism = "gpu_to_gpu" }) end)
    end)

    side_it(where)(where .. ": gpu_to_gpu zeros: a sum of only -0.0 is -0.0, any other zero sum +0.0, asum +0.0", function()
      local m = new_buffer({ -0.0, -0.0, -0.0, -0.0, 0.0, -0.0, 1.0, -1.0, -0.0 }, "float64", where):view { 3, 3 }
      local function signs(r)
        local out = {}
        for i, x in ipairs(r:totable()) do out[i] = x == 0 and (1 / x > 0 and "+0" or "-0") or tostring(x) end
        return table.concat(out, " ")
      end
      assert.equal("-0 +0 +0", signs(gr.sum(m, { axis = 2, determinism = "gpu_to_gpu" })))
      assert.equal("+0 +0 2.0", signs(gr.asum(m, { axis = 2, determinism = "gpu_to_gpu" })))
      assert.equal("1.0 -1.0 -0", signs(gr.sum(m, { axis = 1, determinism = "gpu_to_gpu" })))
      local f = new_buffer({ -0.0, -0.0, -0.0, -0.0 }, "float32", where):view { 2, 2 }
      assert.equal("-0 -0", signs(gr.sum(f:transpose(), { axis = 2, determinism = "gpu_to_gpu" })))
    end)
  end

  H.gpu_it("device and host buffers give the same bits for gpu_to_gpu sums along axes", function()
    for _, dtype in ipairs({ "float32", "float64", "float16" }) do
      local vals = exact_values(dtype, 3 * 40 * 7, 9)
      local d = gr.buffer(#vals, dtype):set(vals):view { 3, 40, 7 }
      local h = gr.buffer(#vals, dtype, { where = "host" }):set(vals):view { 3, 40, 7 }
      for _, axis in ipairs({ 1, 2, 3, { 1, 3 } }) do
        for _, v in ipairs({ function(x) return x end, function(x) return x:permute { 3, 1, 2 } end }) do
          local a = gr.sum(v(d), { axis = axis, determinism = "gpu_to_gpu" }):tobytes()
          local b = gr.sum(v(h), { axis = axis, determinism = "gpu_to_gpu" }):tobytes()
          assert.equal(b, a, dtype .. " axis " .. axis_text(axis))
        end
      end
    end
  end)
end)
