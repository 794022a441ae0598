--- Issue 23's speed table: reductions along axes of 2-D and 3-D views, beside the read ceiling and PyTorch.
--
--   lua5.4 experiments/shapes.lua [--log2n 28] [--dtypes float32,bfloat16] [--ops sum,max,argmax,var]
--                                [--cols 1..20] [--mids 10:10,4:4] [--reps 20] [--torch FILE] [--quick]
--   (lua5.4 experiments/shapes.lua --help lists every option)
--
-- The cases, for each dtype, on one buffer of n = 2^log2n elements: for each c = 2^k of --cols the matrix
-- m = b:view{n / c, c} reduced along axis 1 (columns: c results) and axis 2 (rows: n / c results), its
-- transposed view m:transpose() (strided, no copy) along both axes, and for each q:r of --mids the middle
-- axis of b:view{n / (q r), q, r} (q and r given as log2).
-- 1. Validate, every case before it is timed. The data are integers from -256 to 256 (exact in every float
--    format here, and their sums exact in a float32 accumulator), so sums, extremes and indices have one
--    right answer whatever the order of the additions:
--    a. all the results against a segmented reduction (gr.reduce(.., {segment = L})) of a compact copy in
--       which the reduced axis is the last (the base buffer itself for row sums; v:permute(..):contiguous()
--       otherwise): equal for sum, min, max, argmin and argmax (values and indices), within a tolerance
--       for mean, var and std (4 u relative for mean, (64 + 4 sqrt(L)) u for var and std; u = 2^-24: every
--       result whose bytes differ, up to 2^23 of them, then a window of 2^14 in each further 2^20);
--    b. up to 8 results (the first, the last, some between; at most 2^18 elements read unless one result
--       alone needs more, up to 2^22) against a reference computed in Lua from the elements read back
--       (b:narrow(..):totable()), with no engine reduction: exact for sums (rounded once to the result's
--       dtype), extremes and first indices, within the tolerance otherwise;
--    c. sum, min, max: the total (float64 accumulator, exact here) or the extreme of the results against
--       the whole-buffer reduction of b.
--    Where each result's elements are one contiguous run (rows: m along axis 2, the transpose along axis 1)
--    the engine reduces along the axis with the segmented kernel itself, so there a. checks the plumbing
--    (shapes, dtypes, order of the results) and b. and c. the values.
--    A case that fails prints WRONG (why on stderr) and is not timed; the lab then exits 1.
-- 2. Time: gr.bench(v, {op =, axis =}) (device events, median of --reps after --warmup) where this build's
--    gr.bench takes `axis`; otherwise the wall clock around each gr.reduce call (into `out` buffers made
--    once when the call takes them) and a read of one result element, median of --reps. The read ceiling
--    is gr.bench_read over the base buffer (the same bytes), measured twice before the dtype's cases.
-- 3. Report, a table per (dtype, op): ms, GB/s (input bytes / ms), % of the read ceiling, for results of
--    more than 1/16 of the input's bytes also % of the read-plus-write limit ((bytes read + bytes written) /
--    read ceiling, over ms), and PyTorch's time for the same case and our ms / PyTorch's, from the file
--    of --torch (or TORCH_TIMES), which experiments/peers/torch_shapes.py writes.
-- Without a GPU (the cpu backend) only the validation runs, at the --quick sizes, and the lab says so.
-- A build without axis reductions (opts.axis unknown) is reported as such at once, exit 1.
local here = (arg and arg[0] or ""):match("^(.*)/[^/]*$") or "."
package.path = here .. "/?.lua;" .. package.path

local gr = require "gpureduce"
local argparse = require "argparse"
local header = require "lab.header"
local sizes = require "lab.sizes"
local timing = require "lab.timing"

-- The ops this lab knows how to check (a reference in Lua); the default is the first.
local OPS = { "sum", "max", "argmax", "var", "min", "argmin", "mean", "std" }
local DEFAULT_COLS = "1..20"
local DEFAULT_MIDS = "10:10,4:4,16:2,2:16,20:4"          -- experiments/peers/torch_shapes.py has the same
local QUICK = { log2n = 14, cols = "1,2,4,7,10,13", mids = "4:4,2:6,6:2,10:3", reps = 3 }
-- --quick adds shapes that are not powers of two (validation of the tails; nothing to compare PyTorch with)
local QUICK_ODD = { { 37, 129 }, { 1000, 3 }, { 3, 77, 5 } }

local function split(text)
  local items = {}
  for item in tostring(text):gmatch("[^,%s]+") do items[#items + 1] = item end
  return items
end

--- "1..20" or "1,4,8" (or both mixed): the integers, in order, each once.
local function int_list(option, lo, hi)
  return function(text)
    local out, seen = {}, {}
    local items = split(text)
    if #items == 0 then return nil, option .. ": empty list" end
    for _, item in ipairs(items) do
      local a, b = item:match("^(%d+)%.%.(%d+)$")
      if not a then a = item:match("^(%d+)$"); b = a end
      a, b = tonumber(a), tonumber(b)
      if not a or a > b or a < lo or b > hi then
        return nil, string.format("%s: '%s' is not an integer or a range a..b within %d..%d", option, item, lo, hi)
      end
      for k = a, b do
        if not seen[k] then seen[k], out[#out + 1] = true, k end
      end
    end
    return out
  end
end

--- "10:10,4:4": pairs of log2 q and log2 r.
local function mids_list(text)
  local out = {}
  for _, item in ipairs(split(text)) do
    local q, r = item:match("^(%d+):(%d+)$")
    if not q then return nil, string.format("--mids: '%s' is not log2q:log2r (e.g. 10:10)", item) end
    out[#out + 1] = { tonumber(q), tonumber(r) }
  end
  if #out == 0 then return nil, "--mids: empty list" end
  return out
end

local function names(option, known)
  local set = {}
  for _, k in ipairs(known) do set[k] = true end
  return function(text)
    local out = split(text)
    if #out == 0 then return nil, option .. ": empty list" end
    for _, item in ipairs(out) do
      if not set[item] then
        return nil, string.format("%s: '%s' is not one of: %s", option, item, table.concat(known, ", "))
      end
    end
    return out
  end
end

local function count(option, min)
  return function(text)
    local v = math.tointeger(tonumber(text))
    if not v or v < min then return nil, string.format("%s: '%s' is not an integer >= %d", option, text, min) end
    return v
  end
end

local parser = argparse("shapes.lua", "Reductions along axes (issue 23): 2-D views (n / c, c) and their "
  .. "transposes along both axes, and the middle axis of 3-D views; each case validated, then timed against "
  .. "the read ceiling and PyTorch.")
parser:help_max_width(100)
parser:epilog("PyTorch's times: python3 experiments/peers/torch_shapes.py [same --log2n/--dtypes/--ops/--cols/"
  .. "--mids] > FILE, then --torch FILE.\nExit status: 0, or 1 when a case was WRONG, axis reductions are "
  .. "missing, or the options were wrong.")
parser:option("--log2n", "Elements of the base buffer, as log2. (default: 28; --quick: " .. QUICK.log2n .. ")")
  :argname("<k>"):convert(count("--log2n", 2))
parser:option("--dtypes", "Dtypes."):argname("<list>"):default("float32,bfloat16"):convert(names("--dtypes", gr.dtypes()))
parser:option("--ops", "Ops, of: " .. table.concat(OPS, ", ") .. "."):argname("<list>"):default("sum")
  :convert(names("--ops", OPS))
parser:option("--cols", "Columns c of the 2-D shapes, as log2: a list, ranges a..b allowed. (default: "
  .. DEFAULT_COLS .. "; --quick: " .. QUICK.cols .. ")"):argname("<list>"):convert(int_list("--cols", 0, 40))
parser:option("--mids", "3-D shapes (n / (q r), q, r) reduced along the middle axis, as log2q:log2r. (default: "
  .. DEFAULT_MIDS .. "; --quick: " .. QUICK.mids .. ")"):argname("<list>"):convert(mids_list)
parser:option("--reps", "Timed repetitions. (default: BENCH_REPS or 20)"):argname("<n>"):convert(count("--reps", 1))
parser:option("--warmup", "Untimed repetitions first."):argname("<n>"):default("5"):convert(count("--warmup", 0))
parser:option("--seed", "Seed of the data."):argname("<n>"):default("23"):convert(count("--seed", 0))
parser:option("--torch", "PyTorch's times (torch_shapes.py's output). (default: the file TORCH_TIMES names)")
  :argname("<file>")
parser:flag("--quick", "Small n, a few shapes (and some that are not powers of two), few reps: for CI.")
local args = parser:parse(arg)                -- on a bad option: usage and the error on stderr, exit 1

local function note(msg)
  io.stdout:flush()                   -- keep the order when stdout and stderr go to one file
  io.stderr:write("shapes: ", msg, "\n")
end

local gpu = gr.backend() == "cuda"
local quick = args.quick or not gpu     -- the cpu backend: the quick sizes unless given
local log2n = args.log2n or (quick and QUICK.log2n or 28)
local cols = args.cols or int_list("--cols", 0, 40)(quick and QUICK.cols or DEFAULT_COLS)
local mids = args.mids or mids_list(quick and QUICK.mids or DEFAULT_MIDS)
local reps = args.reps or tonumber(os.getenv("BENCH_REPS") or "") or (args.quick and QUICK.reps or 20)
local warmup, seed = args.warmup, args.seed
local n = 1 << log2n

local have_dtype = {}
for _, d in ipairs(gr.dtypes()) do have_dtype[d] = true end
local have_op = {}
for _, o in ipairs(gr.ops()) do have_op[o] = true end

local h = header.build(gr, here, "gpureduce experiments/shapes.lua")
print("# " .. header.describe(h))

---------------------------------------------------------------------------------------------------------
-- Does this build reduce along axes at all, and does gr.bench take `axis`?
local bench_axis, bench_why
do
  local probe = gr.buffer(6, "float32"):iota(1)
  local ok, r = pcall(gr.reduce, probe:view{ 2, 3 }, { op = "sum", axis = 2 })
  if not ok then
    print("# axis reductions are not in this build: gr.reduce(m, {op = \"sum\", axis = 2}) raised:")
    print("#   " .. tostring(r))
    note("nothing to measure: this module has no reductions along axes yet (issue 23); rebuild it with them "
      .. "(make build/gpureduce/core.so) and run again")
    os.exit(1)
  end
  r:free()
  if gpu then
    local bok, b = pcall(gr.bench, probe:view{ 2, 3 }, { op = "sum", axis = 2, reps = 1, warmup = 0 })
    bench_axis, bench_why = bok, not bok and tostring(b) or nil
  end
  probe:free()
end

---------------------------------------------------------------------------------------------------------
-- The cases.

--- "2^27x2^1" for the shape {2^27, 2}.
local function shape_text(shape)
  local parts = {}
  for i, d in ipairs(shape) do parts[i] = sizes.format(d) end
  return table.concat(parts, "x")
end

-- A matrix: the base buffer's view `dims` (n elements, or its own buffer for the odd shapes), a tag that
-- names it in PyTorch's file, and its cases: {layout, transposed, axis}.
local matrices, used_cols, used_mids = {}, {}, {}
for _, k in ipairs(cols) do
  if k >= log2n then
    note(string.format("--cols: 2^%d columns leave fewer than 2 rows of 2^%d elements; skipped", k, log2n))
  else
    local r, c = n >> k, 1 << k
    used_cols[#used_cols + 1] = k
    matrices[#matrices + 1] = { dims = { r, c }, tag = string.format("%dx%d", r, c), cases = {
      { layout = "rows", axis = 1 }, { layout = "rows", axis = 2 },
      { layout = "transposed", transposed = true, axis = 1 }, { layout = "transposed", transposed = true, axis = 2 },
    } }
  end
end
for _, qr in ipairs(mids) do
  local lq, lr = qr[1], qr[2]
  if lq + lr > log2n then
    note(string.format("--mids: %d:%d is more than 2^%d elements; skipped", lq, lr, log2n))
  else
    local p, q, r = n >> (lq + lr), 1 << lq, 1 << lr
    used_mids[#used_mids + 1] = lq .. ":" .. lr
    matrices[#matrices + 1] = { dims = { p, q, r }, tag = string.format("%dx%dx%d", p, q, r),
      cases = { { layout = "3-D", axis = 2 } } }
  end
end
if args.quick then
  for _, dims in ipairs(QUICK_ODD) do
    local m = { dims = dims, odd = true, cases = {} }
    if #dims == 2 then
      m.cases = { { layout = "rows", axis = 1 }, { layout = "rows", axis = 2 },
        { layout = "transposed", transposed = true, axis = 1 }, { layout = "transposed", transposed = true, axis = 2 } }
    else
      m.cases = { { layout = "3-D", axis = 2 }, { layout = "3-D", axis = -1 }, { layout = "3-D", axis = 1 } }
    end
    matrices[#matrices + 1] = m
  end
end
if #matrices == 0 then
  note("nothing to run: no shape fits 2^" .. log2n .. " elements")
  os.exit(1)
end
for _, m in ipairs(matrices) do
  m.n = 1
  for _, d in ipairs(m.dims) do m.n = m.n * d end
  for _, c in ipairs(m.cases) do
    -- PyTorch's key: the base shape's tag ("2d:", "t:" transposed, "3d:") and the axis of the view reduced
    if m.tag then c.key = (#m.dims == 3 and "3d:" or c.transposed and "t:" or "2d:") .. m.tag .. " " .. c.axis end
  end
end

-- PyTorch's times: torch[dtype][op][key] = ms, or a string saying why there is none.
local torch, torch_notes = {}, {}
local torch_file = args.torch or os.getenv("TORCH_TIMES")
if torch_file then
  local f = io.open(torch_file)
  if not f then
    note("no PyTorch times: cannot open " .. torch_file)
  else
    for line in f:lines() do
      if line:find("^#") then
        torch_notes[#torch_notes + 1] = line
      else
        local d, o, tag, axis, rest = line:match("^torch (%S+) (%S+) (%S+) (%S+) (.*)$")
        if d then
          torch[d] = torch[d] or {}
          torch[d][o] = torch[d][o] or {}
          torch[d][o][tag .. " " .. axis] = tonumber(rest) or rest:gsub("^%- ?", "")
        end
      end
    end
    f:close()
  end
end

print(string.format("# shapes: n = 2^%d per dtype; dtypes %s; ops %s; 2-D (n / c, c) for log2 c in {%s}, "
  .. "both axes, and transposed; 3-D middle axis for log2q:log2r in {%s}%s", log2n, table.concat(args.dtypes, ","),
  table.concat(args.ops, ","), table.concat(used_cols, ","), table.concat(used_mids, ","),
  args.quick and "; --quick: and shapes that are not powers of two" or ""))
if gpu then
  print(string.format("# timing: %s; medians of %d reps after %d warm-ups; read ceiling: gr.bench_read over "
    .. "the base buffer", bench_axis and "gr.bench with axis (device events)"
    or "wall clock around gr.reduce and a read of one result (gr.bench refuses axis: " .. tostring(bench_why) .. ")",
    reps, warmup))
else
  print("# cpu backend: VALIDATION ONLY, at the --quick sizes unless given (timing and the read ceiling "
    .. "need a CUDA device)")
end
for _, l in ipairs(torch_notes) do print("# torch file: " .. l:gsub("^#%s*", "")) end
if torch_file and #torch_notes == 0 and not next(torch) then print("# torch file " .. torch_file .. ": no times in it") end

---------------------------------------------------------------------------------------------------------
-- Validation.

local U = 2.0 ^ -24          -- float32's unit roundoff: the accumulator of float32 and the 16-bit floats
local LUA_BUDGET, LUA_ONE_MAX, LUA_MAX_POS = 1 << 18, 1 << 22, 8

local elem_size = {}
local function size_of(dtype)
  if not elem_size[dtype] then
    local p = gr.buffer(1, dtype)
    elem_size[dtype] = #p:tobytes()
    p:free()
  end
  return elem_size[dtype]
end

-- one host element per dtype: a Lua number rounded once to the dtype, as the engine rounds a result
local rounders = {}
local function round_to(dtype, v)
  if dtype == "float64" then return v end
  if not rounders[dtype] then rounders[dtype] = gr.buffer(1, dtype, { where = "host" }) end
  rounders[dtype][1] = v
  return rounders[dtype][1]
end

local function is_arg(op) return op == "argmax" or op == "argmin" end
local function is_exact(op) return op ~= "mean" and op ~= "var" and op ~= "std" end

--- The tolerance of a float result r against want, for a reduction of L elements.
local function close(op, got, want, L)
  if got == want then return true end
  if got ~= got or want ~= want then return false end
  local rel = op == "mean" and 4 * U or (64 + 4 * math.sqrt(L)) * U
  return math.abs(got - want) <= rel * math.max(math.abs(want), 1)
end

local function positive_axis(a, nd) return a < 0 and nd + 1 + a or a end

local function compact(shape, strides)
  local s = 1
  for k = #shape, 1, -1 do
    if shape[k] > 1 and strides[k] ~= s then return false end
    s = s * shape[k]
  end
  return true
end

-- the last compact copy made for a reference (a transpose or a permuted 3-D view), reused by the next case
-- that needs the same one
local copy = { key = nil, buf = nil }
local function drop_copy()
  if copy.buf then copy.buf:free() end
  copy.key, copy.buf = nil, nil
end

--- The results of a segmented reduction that equals reducing v along axis a: a table of buffers.
local function segment_reference(v, a, op)
  local shape = v:shape()
  local perm = {}
  for k = 1, #shape do if k ~= a then perm[#perm + 1] = k end end
  perm[#perm + 1] = a
  local p = v:permute(perm)
  local src
  if compact(p:shape(), p:strides()) then
    src = p
  else
    local key = table.concat(p:shape(), "x") .. "/" .. table.concat(p:strides(), ",") .. "/" .. tostring(v:dtype())
    if copy.key ~= key then
      drop_copy()
      copy.key, copy.buf = key, p:contiguous()
    end
    src = copy.buf
  end
  return table.pack(gr.reduce(src:view{ #src }, { op = op, segment = shape[a] }))
end

--- The positions of up to k results out of K (1-based): the first, the last, some spread between.
local function positions(K, k, salt)
  local pos, seen = {}, {}
  local function add(i) if not seen[i] and #pos < k then seen[i], pos[#pos + 1] = true, i end end
  add(1)
  add(K)
  local x = (salt * 2654435761 + 12345) % 2147483647
  local tries = 0
  while #pos < math.min(k, K) and tries < 64 do
    x = (x * 48271) % 2147483647
    add(1 + x % K)
    tries = tries + 1
  end
  return pos
end

--- The elements reduced into result `i` (1-based, row-major over the shape without axis a): a Lua table.
local function fiber(v, a, i)
  local shape = v:shape()
  local idx, rest = {}, i - 1
  for k = #shape, 1, -1 do
    if k ~= a then idx[k] = rest % shape[k] + 1; rest = rest // shape[k] end
  end
  local f = v
  for k = 1, #shape do
    if k ~= a then f = f:narrow(k, idx[k], 1) end
  end
  return f:totable(1, shape[a])
end

--- What result i should be, from its elements, in Lua: value (rounded as the result's dtype is) and index.
local function lua_reference(op, xs, out_dtype)
  local L = #xs
  if op == "sum" or op == "mean" then
    local s = 0.0
    for j = 1, L do s = s + xs[j] end          -- integers: exact in a double
    return round_to(out_dtype, op == "sum" and s or s / L)
  elseif op == "var" or op == "std" then
    local s = 0.0
    for j = 1, L do s = s + xs[j] end
    local mu, m2 = s / L, 0.0
    for j = 1, L do local d = xs[j] - mu; m2 = m2 + d * d end
    local var = m2 / L                              -- ddof 0, gr.var's default
    return op == "var" and var or math.sqrt(var)
  else
    local best, at = xs[1], 1
    local lt = op == "min" or op == "argmin"
    for j = 2, L do
      local x = xs[j]
      if (lt and x < best) or (not lt and x > best) then best, at = x, j end
    end
    return best, at
  end
end

-- Element by element, at most this many results of one case are compared within the tolerance (mean, var,
-- std); past it, a window of TOL_WINDOW results of each further chunk whose bytes differ.
local TOL_FULL, TOL_WINDOW = 1 << 23, 1 << 14

--- Compares the results with the segmented reduction's, all of them, in chunks of 2^20: a chunk with the
-- same bytes passes at once; in one that differs every element must be equal (sum, extremes, indices) or
-- close (mean, var, std: all of it while TOL_FULL lasts, then a window at the chunk's start).
-- true, or false and why (the first element at fault).
local function same_results(op, got, want, L, what)
  if #got ~= #want then return false, string.format("%s: %d results, the reference has %d", what, #got, #want) end
  if got:dtype() ~= want:dtype() then want = want:astype(got:dtype()) end
  local exact = is_exact(op) or what == "indices"
  local K, step, unpacked = #got, 1 << 20, 0
  for first = 1, K, step do
    local c = math.min(step, K - first + 1)
    if got:tobytes(first, c) ~= want:tobytes(first, c) then
      if not exact and unpacked >= TOL_FULL then c = math.min(c, TOL_WINDOW) end
      unpacked = unpacked + c
      local g, w = got:totable(first, c), want:totable(first, c)
      for j = 1, c do
        local good
        if exact then good = g[j] == w[j] or (g[j] ~= g[j] and w[j] ~= w[j]) else good = close(op, g[j], w[j], L) end
        if not good then
          return false, string.format("%s: result %d is %s, the segmented reduction gives %s", what, first + j - 1,
            tostring(g[j]), tostring(w[j]))
        end
      end
      if exact then
        return false, string.format("%s: results %d..%d equal the segmented reduction's as numbers but not in "
          .. "their bytes (-0.0 against 0.0?)", what, first, first + c - 1)
      end
    end
  end
  return true
end

local stats = { cases = 0, wrong = 0, lua_cases = 0, lua_positions = 0, whole = 0 }
local whole = {}        -- per base buffer: its float64 sum, min and max (check c)

--- Checks the results `res` (a table of buffers) of reducing v along axis a with op. true, or false and why.
local function check(b, v, a, op, res, salt)
  local shape = v:shape()
  local L = shape[a]
  local K = #v // L
  if #res ~= (is_arg(op) and 2 or 1) then return false, string.format("%d result buffers", #res) end
  for _, r in ipairs(res) do
    if #r ~= K then return false, string.format("%d results, %d expected", #r, K) end
  end
  if is_arg(op) and res[2]:dtype() ~= "int64" then return false, "indices of dtype " .. res[2]:dtype() end
  -- a. against a segmented reduction
  local ref = segment_reference(v, a, op)
  local ok, why = same_results(op, res[1], ref[1], L, is_arg(op) and "values" or "results")
  if ok and is_arg(op) then ok, why = same_results(op, res[2], ref[2], L, "indices") end
  for _, r in ipairs(ref) do r:free() end
  if not ok then return false, why end
  -- b. against Lua
  local k = math.min(LUA_MAX_POS, K, LUA_BUDGET // L)
  if k == 0 and L <= LUA_ONE_MAX then k = 1 end
  if k > 0 then
    stats.lua_cases = stats.lua_cases + 1
    for _, i in ipairs(positions(K, k, salt)) do
      local want, at = lua_reference(op, fiber(v, a, i), res[1]:dtype())
      local got = res[1]:get(i)
      local good = is_exact(op) and got == want or not is_exact(op) and close(op, got, want, L)
      if not good then
        return false, string.format("result %d is %.9g, the elements read back give %.9g", i, got, want)
      end
      if is_arg(op) and res[2]:get(i) ~= at then
        return false, string.format("result %d: index %d, the elements read back give %d (first of %.9g)", i,
          res[2]:get(i), at, want)
      end
      stats.lua_positions = stats.lua_positions + 1
    end
  end
  -- c. against the whole buffer
  if op == "sum" or op == "max" or op == "min" or is_arg(op) then
    local w = whole[b]
    if not w then
      w = {}
      local sok, s = pcall(gr.sum, b, { acc = "float64" })
      w.sum = sok and s or nil
      w.max, w.min = gr.max(b), gr.min(b)
      whole[b] = w
    end
    local got, want
    if op == "sum" and w.sum then
      local sok, s = pcall(gr.sum, res[1], { acc = "float64" })
      if sok then got, want = s, w.sum end
    elseif op == "max" or op == "argmax" then
      got, want = gr.max(res[1]), w.max
    elseif op == "min" or op == "argmin" then
      got, want = gr.min(res[1]), w.min
    end
    if got ~= nil then
      stats.whole = stats.whole + 1
      if got ~= want then
        return false, string.format("the %s of all results is %.17g, of the whole buffer %.17g",
          op == "sum" and "sum" or op:match("max") and "max" or "min", got, want)
      end
    end
  end
  return true
end

---------------------------------------------------------------------------------------------------------
-- Timing.

local median = timing.median
local fallback_noted = false

--- ms, timer: the case timed (res: its results, reused as `out` where the call takes them).
local function time_case(v, a, op, res)
  if bench_axis then
    local ok, r = pcall(gr.bench, v, { op = op, axis = a, reps = reps, warmup = warmup })
    if ok then return r.ms, r.timer or "events" end
    if not fallback_noted then
      note("gr.bench refused a case (" .. tostring(r) .. "); such cases are timed on the wall clock")
      fallback_noted = true
    end
  end
  local opts = { op = op, axis = a, out = is_arg(op) and { res[1], res[2] } or res[1] }
  if not pcall(gr.reduce, v, opts) then opts.out = nil end
  local function once()
    local r = table.pack(gr.reduce(v, opts))
    local _ = r[1]:get(1)                  -- the result is there: the work is done
    if not opts.out then for j = 1, r.n do r[j]:free() end end
  end
  for _ = 1, warmup do once() end
  local t = {}
  for i = 1, reps do
    local t0 = gr.clock()
    once()
    t[i] = (gr.clock() - t0) * 1e3
  end
  return median(t), opts.out and "clock+out" or "clock"
end

---------------------------------------------------------------------------------------------------------
-- The run.

--- The base buffer of n elements of dtype: integers -256 .. 256 (exact in every float format here).
local function make_data(count, dtype, s)
  local via = have_dtype.int16 and "int16" or "int32"
  local src = gr.buffer(count, via):random(s, -256, 256)
  local b = src:astype(dtype)
  src:free()
  return b
end

local function fmt_ms(ms) return ms and string.format("%.4f", ms) or "-" end

local HEAD = string.format("%-10s %-18s %4s %10s %10s %9s %9s %7s %7s %9s %7s  %-5s  %s", "layout", "shape", "axis",
  "reduced", "results", "ms", "GB/s", "vs read", "vs r+w", "torch ms", "/torch", "valid", "timer")

for _, dtype in ipairs(args.dtypes) do
  if not have_dtype[dtype] then
    print(string.format("\n## %s: not a dtype of this build", dtype))
    goto next_dtype
  end
  do
    local esize = size_of(dtype)
    local bufs, ceilings = {}, {}
    local function base(m)
      if not bufs[m.n] then
        local ok, b = pcall(make_data, m.n, dtype, seed)
        if not ok then return nil, tostring(b) end
        bufs[m.n] = b
        if gpu then
          local best = 0
          for _ = 1, 2 do
            local rok, r = pcall(gr.bench_read, b, { reps = reps, warmup = warmup })
            if rok then best = math.max(best, r.gbps) else note("read ceiling not measured: " .. tostring(r)) end
          end
          ceilings[m.n] = best > 0 and best or nil
        end
      end
      return bufs[m.n]
    end
    for _, op in ipairs(args.ops) do
      if not have_op[op] then
        print(string.format("\n## %s %s: not an op of this build", dtype, op))
        goto next_op
      end
      do
        base(matrices[1])                 -- the base buffer and its read ceiling, for the table's title
        print(string.format("\n## %s %s, n = 2^%d (%s)%s", dtype, op, log2n, sizes.bytes(n * esize),
          gpu and ceilings[n] and string.format(": read ceiling %.1f GB/s", ceilings[n]) or ""))
        print(HEAD)
        for mi, m in ipairs(matrices) do
          for ci, c in ipairs(m.cases) do
            stats.cases = stats.cases + 1
            local b, err = base(m)
            local v, a, res
            local row = { layout = c.layout .. (m.odd and "*" or ""), axis = c.axis }
            if b then
              v = b:view(m.dims)
              if c.transposed then v = v:transpose() end
              a = positive_axis(c.axis, #m.dims)
              row.shape = shape_text(v:shape())
              row.L = v:shape()[a]
              row.K = #v // row.L
              local ok, r = pcall(function() return table.pack(gr.reduce(v, { op = op, axis = c.axis })) end)
              if ok then
                res = r
                local cok, good, why = pcall(check, b, v, a, op, res, mi * 16 + ci)
                if not cok then good, why = false, "check raised: " .. tostring(good) end
                row.valid, err = good, why
              else
                err = "gr.reduce raised: " .. tostring(r)
              end
            end
            if not row.valid then
              stats.wrong = stats.wrong + 1
              note(string.format("WRONG %s %s %s %s axis %s: %s", dtype, op, row.layout, row.shape or shape_text(m.dims),
                tostring(c.axis), tostring(err)))
            elseif gpu then
              local tok, ms, timer = pcall(time_case, v, c.axis, op, res)
              if tok then
                row.ms, row.timer = ms, timer
              else
                row.timer = "failed"
                note(string.format("timing %s %s %s %s axis %d: %s", dtype, op, row.layout, row.shape, c.axis, tostring(ms)))
              end
            end
            -- the columns
            local in_bytes = m.n * esize
            local out_bytes = 0
            for _, r in ipairs(res or {}) do out_bytes = out_bytes + #r * size_of(r:dtype()) end
            local gbps, vs_read, vs_rw, tms, ratio = "-", "-", "-", "-", "-"
            local ceil = ceilings[m.n]
            if row.ms then
              local g = in_bytes / (row.ms * 1e6)
              gbps = string.format("%.1f", g)
              if ceil then
                vs_read = string.format("%.1f%%", 100 * g / ceil)
                if out_bytes * 16 > in_bytes then
                  vs_rw = string.format("%.1f%%", 100 * ((in_bytes + out_bytes) / (ceil * 1e6)) / row.ms)
                end
              end
            end
            local t = c.key and torch[dtype] and torch[dtype][op] and torch[dtype][op][c.key]
            if type(t) == "number" then
              tms = string.format("%.4f", t)
              if row.ms then ratio = string.format("%.3f", row.ms / t) end
            elseif type(t) == "string" then
              tms = "n/a"
            end
            print(string.format("%-10s %-18s %4d %10s %10s %9s %9s %7s %7s %9s %7s  %-5s  %s", row.layout,
              row.shape or shape_text(m.dims), c.axis, row.L and sizes.format(row.L) or "-",
              row.K and sizes.format(row.K) or "-", fmt_ms(row.ms), gbps, vs_read, vs_rw, tms, ratio,
              row.valid and "ok" or "WRONG", row.timer or (gpu and "-" or "not timed (cpu)")))
            io.stdout:flush()
            for _, r in ipairs(res or {}) do r:free() end
          end
        end
        drop_copy()
      end
      ::next_op::
    end
    drop_copy()
    for _, b in pairs(bufs) do whole[b] = nil; b:free() end
    collectgarbage()
  end
  ::next_dtype::
end

print()
print("# layout: rows = m = b:view{n / c, c}; transposed = m:transpose() (strided); 3-D = b:view{p, q, r}; "
  .. "* = a shape that is not a power of two (--quick)")
print("# GB/s: input bytes / ms; vs read: of gr.bench_read over the same bytes; vs r+w (results over 1/16 of the "
  .. "input): (bytes read + written) / read ceiling, over ms; /torch: ms / PyTorch's ms")
print(string.format("# validation: %d cases, %d ok, %d WRONG; every case against a segmented reduction of a compact "
  .. "copy, %d cases at %d results against Lua, %d against the whole buffer%s", stats.cases, stats.cases - stats.wrong,
  stats.wrong, stats.lua_cases, stats.lua_positions, stats.whole, gpu and "" or " (cpu backend: nothing timed)"))
if stats.wrong > 0 then
  print(string.format("%d case(s) WRONG", stats.wrong))
  os.exit(1)
end
