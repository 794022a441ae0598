--- c:reduce's cases across ranks and their reference, shared by env_rank.lua (every rank of a launched
-- job checks itself) and spec/comm_reduce_spec.lua. A rank's data come from a seed, so any rank can make
-- every rank's data and reduce it with gr.reduce here; what the ranks then get from c:reduce is those
-- local results combined element by element, which this file computes in Lua:
--   sums and products of floats rounded once per addition to the result's dtype (float32 here; the one
--   value in float64), which with two ranks is the one operation NCCL does; with more ranks NCCL's order
--   is its own, so those are compared within a tolerance;
--   integers exactly (Lua's integers wrap as 64-bit sums do), min and max exactly, booleans as and/or.
-- The ops whose accumulators the ranks gather (M.GATHERED: mean, var, argmin, ...) are checked otherwise:
-- against spec/support/fuzz_reference.lua's reference of every rank's data concatenated in rank order
-- (M.check_gathered; the ranks hold different lengths, so argmin/argmax's indices show where each rank's
-- data begin), and bit for bit against gr.debug_comm_combine, the same merge made in one process.
local M = {}

--- The ops c:reduce combines across ranks, and the dtypes the cases cover (the 16-bit and FP8 formats
-- among them: their sums are float32 partials; int16, bool and FP8 results go through a wider copy).
M.OPS = { "sum", "prod", "min", "max", "and", "or", "count", "sumsq", "nansum", "nanmin", "nanmax", "absmax", "asum" }
M.DTYPES = { "float32", "float64", "bfloat16", "float16", "float8_e4m3", "int32", "int16", "uint8", "bool" }

--- The ops c:reduce combines from each rank's gathered accumulator (engine/multi/comm_parts.c), and the
-- dtypes their cases cover: every accumulator family (Welford in float32 and float64, exact integer
-- moments, Blue's sums, counted sums, {index, value}, {min, max}).
M.GATHERED = { "mean", "nanmean", "var", "std", "norm", "argmin", "argmax", "minmax" }
M.GATHERED_DTYPES = { "float32", "float64", "bfloat16", "float16", "float8_e4m3", "int32", "int64", "int16", "uint8",
  "bool" }

--- Elements of rank q in a gathered case: different lengths on every rank.
function M.length(q) return 997 + 61 * q end

local MIN_LIKE = { min = true, nanmin = true, ["and"] = true }
local ADDS = { sum = true, count = true, sumsq = true, nansum = true, asum = true }

local function is_float(dtype) return dtype:match("^float") or dtype == "bfloat16" end
local function round32(x) return (string.unpack("<f", string.pack("<f", x))) end

--- Rank q's buffer for a case: n elements of dtype on `device`, values that keep the op meaningful
-- (products near 1, and/or seeing zeros), different on every rank.
function M.data(gr, dtype, op, q, n, device)
  local b = gr.buffer(n, dtype, { device = device })
  local seed = 7001 + 131 * q + #op
  if dtype == "bool" then return b:random(seed) end
  if is_float(dtype) then
    if op == "prod" then return b:random(seed, 0.97, 1.03) end
    if op == "and" or op == "or" then return b:random(seed, 0, 3):astype("int32"):astype(dtype) end
    b:random(seed, -2, 2)
    -- NaNs where the op has a rule for them: skipped by nanmean on every rank; for argmax and minmax on
    -- the ranks after the first only, so that the first NaN wins from inside a later rank's data
    if n > 0 and (op == "nanmean" or (q > 0 and (op == "argmax" or op == "minmax"))) then
      for k = 0, 2 do b:set({ 0 / 0 }, (seed * 7 + k * 389) % n + 1) end
    end
    return b
  end
  if op == "prod" then return b:random(seed, 1, 3) end
  return b:random(seed, dtype == "uint8" and 0 or -100, 100)
end

--- a and b, two ranks' results, combined as c:reduce combines them for op; `float32` rounds a float
-- sum or product to float32 (a result buffer of that dtype).
function M.combine(op, a, b, float32)
  if type(a) == "boolean" then
    if MIN_LIKE[op] then return a and b end
    return a or b
  end
  local v
  if ADDS[op] then v = a + b
  elseif op == "prod" then v = a * b
  elseif MIN_LIKE[op] then v = math.min(a, b)
  else v = math.max(a, b) end
  if float32 and math.type(v) == "float" and (ADDS[op] or op == "prod") then v = round32(v) end
  return v
end

--- Whether got matches want: exactly, or within rtol for the float sums and products of more than two
-- ranks (NCCL's order). Returns ok and a description of the first difference.
function M.same(op, got, want, inexact)
  local rtol = inexact and (ADDS[op] or op == "prod") and 1e-5 or 0
  if type(want) ~= "table" then got, want = { got }, { want } end
  if #got ~= #want then return false, string.format("%d results, expected %d", #got, #want) end
  for i = 1, #want do
    local g, w = got[i], want[i]
    local ok = g == w or (g ~= g and w ~= w)
    if not ok and rtol > 0 and type(g) == "number" and type(w) == "number" then
      ok = math.abs(g - w) <= rtol * math.max(math.abs(w), 1)
    end
    if not ok then return false, string.format("element %d: %s, expected %s", i, tostring(g), tostring(w)) end
  end
  return true
end

--- The elements of a result buffer as a flat list (booleans stay booleans).
local function flat(r)
  local t, out = r:totable(), {}
  local function walk(x)
    if type(x) == "table" then for _, y in ipairs(x) do walk(y) end else out[#out + 1] = x end
  end
  walk(t)
  return out
end
M.flat = flat

--- What c:reduce of rank `rank`'s case should give with `size` ranks: every rank's data made and reduced
-- here with gr.reduce (opts: op, axis, keepdims), the results combined in rank order. A list of values
-- for axes, else one value.
function M.expected(gr, dtype, op, shape, opts, size, device)
  local n = 1
  for _, d in ipairs(shape) do n = n * d end
  local want, float32
  for q = 0, size - 1 do
    local m = M.data(gr, dtype, op, q, n, device):view(shape)
    local r = gr.reduce(m, opts)
    local vals
    if opts.axis then
      float32 = r:dtype() == "float32"
      vals = flat(r)
    else
      vals = { r }
    end
    if not want then want = vals
    else for i = 1, #want do want[i] = M.combine(op, want[i], vals[i], float32) end end
  end
  if opts.axis then return want end
  return want[1]
end

--- The values of a buffer as the reference reads them (bool as 0/1), appended to list t.
local function append_values(t, b)
  for _, x in ipairs(b:totable()) do
    if type(x) == "boolean" then x = x and 1 or 0 end
    t[#t + 1] = x
  end
  return t
end

--- Checks what c:reduce(b, opts) gave rank `rank` of `size` for a gathered op (got, got2: its one or two
-- results) against every rank's data, made here on `device`: bit for bit gr.debug_comm_combine's result
-- over those buffers, and within fuzz_reference's bounds of the concatenation (R: that module). Returns
-- ok and why not.
function M.check_gathered(gr, R, dtype, op, opts, size, device, got, got2)
  local parts, values = {}, {}
  for q = 0, size - 1 do
    parts[q + 1] = M.data(gr, dtype, op, q, M.length(q), device)
    append_values(values, parts[q + 1])
  end
  local w1, w2 = gr.debug_comm_combine(parts, opts)
  local function same(a, b)
    if math.type(a) == "float" and math.type(b) == "float" then
      return (a ~= a and b ~= b) or string.pack("<d", a) == string.pack("<d", b)
    end
    return a == b and math.type(a) == math.type(b)
  end
  if not same(got, w1) or not same(got2, w2) then
    return false, string.format("%s, %s; the parts merged in one process: %s, %s", tostring(got), tostring(got2),
      tostring(w1), tostring(w2))
  end
  local e = R.expect(op, values, { dtype = dtype, acc = opts.acc, ddof = opts.ddof })
  return R.check(op, true, got, e, got2)
end

return M
