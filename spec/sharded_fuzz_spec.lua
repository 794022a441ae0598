--[[
sharded_fuzz_spec.lua -- a differential fuzz of sharded buffers split by rows (gr.sharded({rows, ...}),
issue 28) against one buffer of the same data and against the independent Lua references.

What a case draws (from its own splitmix64 stream, R.rng of spec/support/fuzz_reference.lua)
  * a dtype of gr.dtypes() (every one: the 16-bit and FP8 floats, int16/uint16 and bool included);
  * the devices: with two GPUs or more every GPU (devices = all), now and then with some listed twice
    more; on one GPU and on the cpu backend 1 to 5 shards of device 1 ({1, 1, 1}: the code paths of
    several GPUs, as docs/api.md's "Sharded buffers" says);
  * a shape of 1 to 4 axes whose rows are ragged against the shards: not a multiple of their number,
    fewer rows than shards (shards of no rows), one row, no rows, an inner axis of length 0, and now and
    then a long one (thousands of rows, or rows of thousands of elements); made by gr.sharded(shape), or
    as a 1-D sharded buffer's s:view(shape) where its shards hold whole rows;
  * data of the dtype -- small values with ties and -0.0 (their sums are exact: R.expect's exact_scale),
    full-precision values, every binade, values near 1 for products, the integer range, extremes --
    with NaN, infinities, -0.0 and subnormals dropped in;
  * what is called: gr.reduce with one op of gr.ops() (acc, ddof, determinism = "run_to_run" or
    "gpu_to_gpu"), gr.reduce with ops = {...}, gr.describe, gr.dot(sa, sb) of two sharded buffers of one
    split, or gr.reduce_by_key of sharded keys and values; along one axis (positive or negative), several
    (a list, in any order), every axis, or none, with keepdims or not.

What is checked, per call
  * the sharded call against the same call on one plain buffer of the logical shape: both raise or
    neither; the result dtypes (and A.result_dtypes'), the shape, the device (the first shard's) and every
    element -- bit for bit where docs/api.md promises it (the rows kept; integer results; min, max,
    argmin/argmax values and indices and the like; the rows gathered: norm, nanmean, var/std of
    integers; gpu_to_gpu; dot products along the rows kept and of integers; reduce_by_key), else
    within twice the reference's error bound (float sums, means, variances and products combined across
    the shards);
  * a second call on the sharded buffer: the same bits (run_to_run);
  * every output against the reference (fuzz_reference.lua's R.expect and R.check over the elements it
    covers, axes_reference.lua's groups and empty-group identities; a dot reference here, from exact
    products); at gpu_to_gpu the sums also equal the reference's exactly rounded sum, bit for bit;
  * ops = {...} and gr.describe: each entry bit for bit the op's own call on the sharded buffer;
  * the sharded buffer holds the values written, and no call changes it.

Beside the cases
  A case by hand that the fuzz found (var/std of 64-bit integers along the rows where the shards' sums
  wrap), and, tagged #slow with two GPUs or more, gr.dot of a (2^20, 256) float32 pair along each axis timed
  on one GPU and on all (printed: the pairs of shards run at once; GPUREDUCE_SHARDED_DOT_ROWS=k: 2^k rows).

How it reports
  One `it` per dtype runs that dtype's cases and shows the first few failures in full (the case, its
  draw, the problems, a line to re-run it); the last `it` says how many cases ran.

Reproducing
  GPUREDUCE_FUZZ_SEED           the run's seed (default 20261127)
  GPUREDUCE_SHARDED_FUZZ_CASES  how many cases (default 1000 on the cpu backend: a few seconds; 200
                                with a GPU, where a case is slower: 300 cases and the sharded specs
                                beside them took 200 s on four H100s, so the GPU suite stays in its time)
  GPUREDUCE_SHARDED_FUZZ_ONLY   run only this case index, and print it
  A case depends on (seed, index) and on the number of devices: re-run it on the same kind of machine.
]]
local gr = require "gpureduce"
local R = require "support.fuzz_reference"
local A = require "support.axes_reference"
local H = require("support.helpers").bind(it, function(reason) pending(reason) end)
local two_product = require("support.exact_reference").two_prod

local GPU = gr.backend() == "cuda"
local NDEV = #gr.devices()

-- the settings above: their defaults, then GPUREDUCE_<name> where set (an empty variable is an unset one)
local setting = { FUZZ_SEED = 20261127, SHARDED_FUZZ_CASES = GPU and 200 or 1000 }
for _, name in ipairs({ "FUZZ_SEED", "SHARDED_FUZZ_CASES", "SHARDED_FUZZ_ONLY" }) do
  local v = os.getenv("GPUREDUCE_" .. name) or ""
  if v ~= "" then
    setting[name] = math.tointeger(tonumber(v)) or error("GPUREDUCE_" .. name .. " must be an integer, got " .. v)
  end
end
local SEED, CASES, ONLY = setting.FUZZ_SEED, setting.SHARDED_FUZZ_CASES, setting.SHARDED_FUZZ_ONLY
local REPORTED = 3

local DTYPES = gr.dtypes()
local OPS = gr.ops()
local inf, nan = math.huge, 0 / 0

-- what the run covered, printed at its end: calls per path, outputs compared bit for bit or within the
-- tolerance, calls both the sharded and the plain buffer refused
local tally = { kept = 0, reduced = 0, every = 0, bitwise = 0, tolerance = 0, refused = 0 }

--- Counts a call along the sorted axes of an nd-axis array (every axis: no opts.axis, or all of them).
local function count_path(axes, nd)
  local path = axes[1] ~= 1 and "kept" or #axes == nd and "every" or "reduced"
  tally[path] = tally[path] + 1
end

local function recipe(index)
  return string.format("GPUREDUCE_FUZZ_SEED=%d GPUREDUCE_SHARDED_FUZZ_ONLY=%d busted spec/sharded_fuzz_spec.lua",
    SEED, index)
end

local function is_float(dtype) return R.DTYPES[dtype].kind == "float" end
local function text(list) return "{" .. table.concat(list, ", ") .. "}" end

--- Options as Lua source, lists (axis, ops) included.
local function show_opts(opts)
  local keys, parts = {}, {}
  for key in pairs(opts) do keys[#keys + 1] = key end
  table.sort(keys)
  for _, key in ipairs(keys) do
    local v = opts[key]
    local list = {}
    for i, x in ipairs(type(v) == "table" and v or { v }) do
      list[i] = type(x) == "string" and string.format("%q", x) or tostring(x)
    end
    parts[#parts + 1] = key .. " = " .. (type(v) == "table" and text(list) or list[1])
  end
  return "{ " .. table.concat(parts, ", ") .. " }"
end

--- A result's bits as a string: a float's 8 bytes (every NaN one), else its type and value (an integer
-- and a float of one value differ; so do a boolean and a number).
local function bits(v)
  if v ~= v then return "nan" end
  if math.type(v) == "float" then return string.pack("<d", v) end
  return type(v) .. " " .. tostring(v)
end

---------------------------------------------------------------------------------------------------
-- what the engine promises (docs/api.md, "Sharded buffers split by rows")

-- results that are elements of the data, or exact, whatever the path
local BITWISE = { min = true, max = true, nanmin = true, nanmax = true, absmax = true, argmin = true,
  argmax = true, minmax = true, count = true, ["and"] = true, ["or"] = true }
-- the ops gpu_to_gpu takes (of float data)
local EXACT_OPS = { sum = true, nansum = true, asum = true, mean = true, nanmean = true, sumsq = true, norm = true,
  var = true, std = true }
-- the ops that take acc = "float64" on float32 and narrower float data
local WIDENS = { sum = true, prod = true, mean = true, var = true, std = true, sumsq = true, norm = true,
  nansum = true, nanmean = true, asum = true }

--- Whether a reduction of `dtype` along the sorted axes `axes` of an nd-axis array must give one
-- buffer's bits.
local function promised(op, dtype, axes, nd, opts)
  if opts.determinism == "gpu_to_gpu" or BITWISE[op] then return true end
  if axes[1] ~= 1 then return true end                          -- the rows kept: each row alone
  if not is_float(A.result_dtypes(op, dtype, opts.acc)) then return true end   -- integer results
  if #axes == nd then return false end                          -- the whole-buffer combine
  if op == "norm" or op == "nanmean" then return true end       -- the rows gathered
  if not is_float(dtype) then
    if op == "mean" then return true end                        -- from the exact integer sums
    if op == "var" or op == "std" then return true end          -- gathered
  end
  return false
end

--- The same for gr.dot: the rows kept, integers, gpu_to_gpu.
local function dot_promised(dtype, axes, opts)
  return opts.determinism == "gpu_to_gpu" or not is_float(dtype) or axes[1] ~= 1
end

---------------------------------------------------------------------------------------------------
-- draws

local function draw_devices(rng)
  local list = {}
  if NDEV >= 2 then
    for d = 1, NDEV do list[d] = d end
    if rng:chance(0.25) then                                    -- every GPU, some of them twice
      for d = 1, rng:range(1, NDEV) do list[#list + 1] = d end
    end
  else
    for k = 1, tonumber(rng:weighted({ ["1"] = 1, ["2"] = 4, ["3"] = 4, ["4"] = 2, ["5"] = 1 })) do list[k] = 1 end
  end
  return list
end

local INNER = { 1, 1, 2, 2, 3, 3, 4, 5, 7, 8, 16, 17, 33 }

--- A shape of 1 to 4 axes for k shards, its rows ragged against k.
local function draw_shape(rng, k)
  local nd = tonumber(rng:weighted({ ["1"] = 20, ["2"] = 45, ["3"] = 20, ["4"] = 15 }))
  local r, rows = rng:float(), nil
  if r < 0.10 then rows = 1
  elseif r < 0.18 then rows = rng:range(0, math.max(k - 1, 0))          -- fewer rows than shards
  elseif r < 0.40 then rows = math.max(k * rng:range(1, 3) + rng:pick({ -1, 1 }), 0)   -- not a multiple
  elseif r < 0.48 then rows = k * rng:range(1, 4)
  elseif r < 0.985 then rows = rng:range(2, 40)
  else rows = rng:range(1000, 4000) end                                  -- long: many blocks per shard
  local shape = { rows }
  for d = 2, nd do shape[d] = rng:pick(INNER) end
  if nd >= 2 and rng:chance(0.02) then shape[rng:range(2, nd)] = 0 end
  if nd == 2 and rng:chance(0.01) then                                   -- a few very long rows
    shape[1] = rng:range(1, k + 1)
    shape[2] = rng:range(4097, 20000 // shape[1])
  end
  while A.product(shape) > 20000 and nd > 1 do                          -- keep the Lua reference quick
    local d = rng:range(2, nd)
    shape[d] = math.max(shape[d] // 2, 1)
    if A.product(shape) > 20000 and shape[1] > 1000 then shape[1] = shape[1] // 2 end
  end
  return shape
end

--- opts.axis for nd axes: one (negative or not), a list of several in any order, every axis, or nil.
local function draw_axis(rng, nd)
  local r = rng:float()
  if r < 0.12 then return nil end
  if r < 0.55 then
    local a = rng:range(1, nd)
    return rng:chance(0.35) and a - nd - 1 or a
  end
  local list = {}
  for d = 1, nd do
    if r >= 0.85 or rng:chance(0.5) then list[#list + 1] = rng:chance(0.3) and d - nd - 1 or d end
  end
  if #list == 0 then list[1] = rng:range(1, nd) end
  for i = #list, 2, -1 do                                                -- any order
    local j = rng:range(1, i)
    list[i], list[j] = list[j], list[i]
  end
  return list
end

---------------------------------------------------------------------------------------------------
-- data: values each dtype holds exactly, so that the reference knows every element

local function fmt_of(dtype) return R.DTYPES[dtype].fmt end

--- x as an element of a float dtype: rounded to its format, its largest finite value where beyond.
local function held(dtype, x)
  local y = R.to_dtype(dtype, x)
  if y == nil then return x < 0 and -fmt_of(dtype).max or fmt_of(dtype).max end
  return y
end

local FLOAT_KINDS = { ties = 30, uniform = 30, wide = 15, extremes = 5, near_one = 0 }
local INT_KINDS = { small = 40, uniform = 40, extremes = 20 }

--- n values of dtype for op: the list, what they are, and the exact_scale hint (every value an integer
-- times it) where it holds.
local function gen_values(rng, dtype, op, n)
  local d, v = R.DTYPES[dtype], {}
  if d.bool then
    local p = rng:pick({ 0.0, 0.5, 0.9, 1.0 })
    for i = 1, n do v[i] = rng:chance(p) and 1 or 0 end
    return v, string.format("bool, true with chance %.1f", p)
  end
  if not is_float(dtype) then
    local kind = rng:weighted(INT_KINDS)
    for i = 1, n do
      if kind == "small" then
        v[i] = d.kind == "uint" and rng:range(0, 9) or rng:range(-5, 5)
      elseif kind == "uniform" then
        v[i] = rng:int(dtype)
      else
        v[i] = rng:pick({ d.min, d.max, 0, 1, d.kind == "int" and -1 or 2 })
      end
    end
    return v, kind
  end
  local F = fmt_of(dtype)
  local kinds = FLOAT_KINDS
  if op == "prod" then kinds = { near_one = 60, ties = 20, uniform = 10, extremes = 10 } end
  local kind, scale = rng:weighted(kinds), nil
  local top = dtype == "float64" and 60 or dtype == "float32" and 20 or 4   -- magnitudes of "uniform"
  local k = rng:range(-top, top)
  for i = 1, n do
    local x
    if kind == "ties" then
      local h = rng:range(0, 6)
      x = (h == 3 and rng:chance(0.5)) and -0.0 or (h - 3) * 0.5
      scale = 0.5
    elseif kind == "uniform" then                      -- p random bits: exactly the format's
      x = rng:range(0, (1 << F.p) - 1) * 2.0 ^ (k - F.p)
      if rng:chance(0.5) then x = -x end
    elseif kind == "wide" then                         -- every binade the data's sums stay finite in
      local lo = dtype == "float64" and -300 or dtype == "float32" and -60 or math.floor(math.log(F.denorm_min, 2))
      local hi = dtype == "float64" and 300 or dtype == "float32" and 60 or math.floor(math.log(F.max, 2)) - 3
      x = held(dtype, (1 + rng:float()) * 2.0 ^ rng:range(lo, hi))
      if rng:chance(0.5) then x = -x end
    elseif kind == "near_one" then                     -- products of n stay far from overflow
      local half = 1 << (F.p - 1)
      local D = math.min(half // 2, half * 40 // math.max(n, 1))
      x = (half + rng:range(-D, D)) * 2.0 ^ (1 - F.p)
      if rng:chance(0.2) then x = -x end
    else
      x = rng:pick({ F.max, -F.max, F.min_normal, -F.denorm_min, F.denorm_min, 0.0, -0.0, 1.0, -1.0 })
    end
    v[i] = held(dtype, x)
  end
  local what = kind
  if n > 0 and rng:chance(0.2) then                    -- specials dropped in
    local S = { nan, F.no_inf and F.max or inf, F.no_inf and -F.max or -inf, -0.0, F.denorm_min, F.max }
    local count = rng:chance(0.15) and n or rng:range(1, 3)
    for _ = 1, count do v[rng:range(1, n)] = rng:pick(S) end
    what = what .. string.format(", %d special(s) dropped in", count)
    scale = nil
  end
  return v, what, scale
end

---------------------------------------------------------------------------------------------------
-- one call, checked

--- pcall(f, ...)'s results in a table: [1] whether it returned, then its results or the error.
local function call(f, ...) return table.pack(pcall(f, ...)) end

--- A result as the list of its elements: a buffer's, or the one value.
local function elements(x)
  if type(x) == "userdata" then return #x > 0 and x:totable(1) or {} end
  return { x }
end

--- Whether the sharded call (got) and the plain one (want) both returned or both raised; adds the
-- problem where not.
local function same_outcome(got, want, problems, what)
  if got[1] == want[1] then return true end
  problems[#problems + 1] = got[1] and string.format("%s: the plain buffer raised '%s', the sharded one did not",
    what, tostring(want[2])) or string.format("%s: raised %s", what, tostring(got[2]))
  return false
end

local LOGICAL = { ["and"] = true, ["or"] = true }

--- A result as R.check reads it: and/or along axes come back as the uint8 0 or 1, R.check takes booleans.
local function as_checked(op, v)
  if not LOGICAL[op] then return v end
  return v == 1 or v == true
end

local function result_format(rdtype) return rdtype == "float64" and R.F64 or R.F32 end

--- An element's magnitude as a double: a uint64 is the Lua integer with its bits (-1 is 2^64 - 1).
local function magnitude(x, dtype)
  if dtype == "uint64" and x < 0 then return (x & math.maxinteger) + 0x1p63 end
  return math.abs(x + 0.0)
end

--- Whether |got - want| is within twice the reference's bound for op over `group` (both results are
-- within it of the exact value); non-finite results may differ only where some order may overflow.
local function close(op, group, got, want, rdtype, ddof, dtype)
  if type(got) ~= "number" or type(want) ~= "number" then return got == want end
  if got ~= got and want ~= want then return true end
  if got == want then return true end
  local F = result_format(rdtype)
  local u, n = F.u, #group
  local s1, s2, big, small = 0.0, 0.0, 1.0, 1.0
  for _, x in ipairs(group) do
    local a = magnitude(x, dtype)
    if a == a and a ~= inf then
      s1, s2 = s1 + a, s2 + a * a
      if a > 0 then big, small = big * math.max(a, 1), small * math.min(a, 1) end
    end
  end
  local square = op == "sumsq" or op == "norm" or op == "var" or op == "std"
  local may_overflow = (square and s2 or s1) * (1 + 4 * n * u) >= F.max
  if op == "prod" then
    may_overflow = big >= F.max * 2.0 ^ -8 or small <= F.min_normal * 2.0 ^ 8
  end
  if got ~= got or want ~= want or math.abs(got) == inf or math.abs(want) == inf then return may_overflow end
  if op == "prod" and may_overflow then return true end
  local larger = math.max(math.abs(got), math.abs(want))
  local bound
  if op == "sum" or op == "nansum" or op == "asum" then bound = 2 * (n * u * s1 + u * larger)
  elseif op == "mean" or op == "nanmean" then bound = 2 * (n * u * s1 / math.max(n, 1) + u * larger)
  elseif op == "sumsq" then bound = 2 * (n + 1) * u * s2
  elseif op == "norm" then bound = 4 * (n + 4) * u * larger
  elseif op == "var" or op == "std" then
    bound = 8 * math.max(n, 1) * u * s2 / math.max(n - (ddof or 0), 1)
    if op == "std" then bound = math.sqrt(bound) end
  elseif op == "prod" then bound = 4 * (n + 1) * u * larger
  else bound = 0 end
  return math.abs(got - want) <= bound + 4 * math.max(n, 1) * F.denorm_min
end

--- The exactly rounded sum (gpu_to_gpu) of op over group: nil where the group holds no finite sum, or
-- one whose partial sums may overflow a double (A.exact_sum's expansion needs them finite).
local function exact_sum(op, group, fmt)
  local terms, mass = {}, 0.0
  for _, x in ipairs(group) do
    if x ~= x then
      if op ~= "nansum" then return nil end
    elseif math.abs(x) == inf then
      return nil
    else
      terms[#terms + 1] = op == "asum" and math.abs(x) or x
      mass = mass + math.abs(x)
    end
  end
  if mass >= 0x1p1000 then return nil end
  return A.exact_sum(terms, fmt)
end

--- The case's arrays: k = {s =, m = (the plain buffer), values =, shape =, dtype =, devices =}.
--- Checks gr.reduce(s, opts) with one op against gr.reduce(m, opts) and the reference; adds problems.
-- Returns the sharded call's results (or nil where it raised) for the callers that compare with them.
local function check_reduce(k, opts, problems, label)
  local op, nd = opts.op, #k.shape
  local got, want = call(gr.reduce, k.s, opts), call(gr.reduce, k.m, opts)
  local info = { dtype = k.dtype, acc = opts.acc, ddof = opts.ddof, exact_scale = k.scale }
  if not want[1] then tally.refused = tally.refused + 1 end
  if not same_outcome(got, want, problems, label) then return nil end
  if not got[1] then
    if not opts.axis and opts.determinism == nil then      -- an empty buffer's min and the like
      local good, why = R.check(op, false, tostring(got[2]), R.expect(op, k.values, info))
      if not good then problems[#problems + 1] = label .. ": raised, against the reference: " .. tostring(why) end
    end
    return nil
  end
  local again = call(gr.reduce, k.s, opts)
  local axes = opts.axis and assert(A.normalize(opts.axis, nd))
  if not axes then
    axes = {}
    for d = 1, nd do axes[d] = d end
  end
  local groups = opts.axis and A.groups(A.compact(k.values, k.shape), axes) or { k.values }
  local d1, d2 = A.result_dtypes(op, k.dtype, opts.acc)
  local bitwise = promised(op, k.dtype, axes, nd, opts)
  count_path(axes, nd)
  tally[bitwise and "bitwise" or "tolerance"] = tally[bitwise and "bitwise" or "tolerance"] + #groups
  local lists = {}
  for r = 2, d2 and 3 or 2 do
    local which = label .. (r == 2 and "" or " (second result)")
    local x, p = got[r], want[r]
    if opts.axis then
      if type(x) ~= "userdata" then
        problems[#problems + 1] = which .. ": not a buffer: " .. tostring(x)
        return nil
      end
      local rd = r == 2 and d1 or d2
      if x:dtype() ~= rd or p:dtype() ~= rd then
        problems[#problems + 1] = string.format("%s: dtype %s, the plain buffer's %s, expected %s", which, x:dtype(),
          p:dtype(), rd)
      end
      local shape = A.result_shape(k.shape, axes, opts.keepdims)
      if text(x:shape()) ~= text(shape) then
        problems[#problems + 1] = which .. ": shape " .. text(x:shape()) .. ", expected " .. text(shape)
      end
      if x:device() ~= k.devices[1] then
        problems[#problems + 1] = which .. ": on device " .. x:device() .. ", not the first shard's"
      end
    end
    local tg, tp, ta = elements(x), elements(p), elements(again[r])
    lists[r - 1] = tg
    for g = 1, #groups do
      if bits(tg[g]) ~= bits(ta[g]) then
        problems[#problems + 1] = string.format("%s: output %d: a second call gave %s, the first %s", which, g,
          R.fmt(ta[g]), R.fmt(tg[g]))
        break
      end
      local same = bits(tg[g]) == bits(tp[g])
      if not same and (bitwise or r == 3) then
        problems[#problems + 1] = string.format("%s: output %d is %s, one buffer's %s (promised bit for bit%s)", which,
          g, R.fmt(tg[g]), R.fmt(tp[g]), tg[g] == tp[g] and "; only the zero's sign differs" or "")
        break
      end
      if not same and not close(op, groups[g], tg[g], tp[g], d1, opts.ddof, k.dtype) then
        problems[#problems + 1] = string.format("%s: output %d is %s, one buffer's %s (beyond the tolerance)", which,
          g, R.fmt(tg[g]), R.fmt(tp[g]))
        break
      end
    end
  end
  -- the reference
  local t1, t2 = lists[1], lists[2]
  local fmt = (k.dtype == "float64" or opts.acc == "float64") and "float64" or "float32"
  for g, group in ipairs(groups) do
    local good, why
    if #group == 0 and opts.axis then
      good, why = A.check_empty(op, k.dtype, t1[g], t2 and t2[g])
    else
      good, why = R.check(op, true, as_checked(op, t1[g]), R.expect(op, group, info), t2 and t2[g])
    end
    if good and opts.determinism == "gpu_to_gpu" and (op == "sum" or op == "nansum" or op == "asum") then
      local exact = exact_sum(op, group, fmt)
      if exact and bits(exact) ~= bits(t1[g]) and not (exact == 0 and t1[g] == 0) then
        good, why = false, "not the exactly rounded sum " .. R.fmt(exact)
      end
    end
    if not good then
      problems[#problems + 1] = string.format("%s: output %d of %d (%d values) against the reference: %s", label, g,
        #groups, #group, tostring(why))
      break
    end
  end
  return got
end

---------------------------------------------------------------------------------------------------
-- gr.dot's reference: exact products, an exact sum

local ACC_U = { float64 = 2.0 ^ -53, float32 = 2.0 ^ -24 }

--- The dot of xs and ys as value, bound (bound 0: exact; false: any number, where some order may
-- overflow or a float64 product lies beyond what Dekker's product holds exactly).
local function dot_reference(dtype, fmt, exact_level, xs, ys)
  if not is_float(dtype) then
    local s = 0
    for i = 1, #xs do s = s + xs[i] * ys[i] end                 -- wraps in 64 bits, as the engine does
    return s, 0
  end
  local F = fmt == "float64" and R.F64 or R.F32
  local nan_seen, pinf, ninf, unsure, terms, mass, tiny = false, false, false, false, {}, 0.0, 0
  for i = 1, #xs do
    local x, y = xs[i], ys[i]
    local p = x * y
    if p ~= p then
      nan_seen = true
    elseif math.abs(x) == inf or math.abs(y) == inf then
      if p > 0 then pinf = true else ninf = true end
    else
      -- products of float32 and narrower elements are exact in a double; float64 ones are split
      -- exactly (Dekker) where neither the split nor the error term can overflow or underflow
      if dtype == "float64" then
        local ax, ay = math.abs(x), math.abs(y)
        if ax >= 0x1p995 or ay >= 0x1p995 or math.abs(p) == inf then
          unsure = true
        elseif math.abs(p) < 0x1p-969 then
          tiny = tiny + 1                                       -- its rounding error bounded below
        else
          local e
          p, e = two_product(x, y)
          if e ~= 0 then terms[#terms + 1] = e end
        end
      end
      terms[#terms + 1] = p
      mass = mass + math.abs(p)
    end
  end
  if nan_seen or (pinf and ninf) then return nan, 0 end
  local u, n = ACC_U[fmt], #xs
  if unsure or mass * (1 + 4 * n * u) >= F.max then return nil, false end
  if pinf then return inf, 0 end
  if ninf then return -inf, 0 end
  local exact = A.exact_sum(terms, fmt)
  -- a product too small for Dekker's error term is summed rounded: where it could settle the final
  -- rounding, the exact level is checked to within an ulp
  local slack = tiny > 0 and 2 * u * math.abs(exact) + tiny * 0x1p-1021 or 0
  if exact_level then return exact, slack end
  return exact, n * u / (1 - n * u) * mass + u * math.abs(exact) + 2 * n * F.denorm_min + slack
end

local function dot_matches(got, want, bound)
  if bound == false then return type(got) == "number" end
  if type(got) ~= "number" then return false end
  if math.type(want) == "integer" then return got == want end
  if want ~= want then return got ~= got end
  if bound == 0 then return got == want end                    -- (a zero's sign is the order's)
  return math.abs(got - want) <= bound
end

--- Checks gr.dot(sa, sb, opts) against gr.dot(ma, mb, opts) and the reference.
local function check_dot(k, opts, problems, label)
  local nd = #k.shape
  local got, want = call(gr.dot, k.s, k.s2, opts), call(gr.dot, k.m, k.m2, opts)
  if not want[1] then tally.refused = tally.refused + 1 end
  if not same_outcome(got, want, problems, label) or not got[1] then return end
  local again = call(gr.dot, k.s, k.s2, opts)
  local axes = opts.axis and assert(A.normalize(opts.axis, nd))
  if not axes then
    axes = {}
    for d = 1, nd do axes[d] = d end
  end
  local idx = {}
  for i = 1, #k.values do idx[i] = i end
  local groups = opts.axis and A.groups(A.compact(idx, k.shape), axes) or { idx }
  if opts.axis then
    local x = got[2]
    local shape = A.result_shape(k.shape, axes, opts.keepdims)
    if text(x:shape()) ~= text(shape) then problems[#problems + 1] = label .. ": shape " .. text(x:shape()) end
    if x:dtype() ~= want[2]:dtype() then problems[#problems + 1] = label .. ": dtype " .. x:dtype() end
    if x:device() ~= k.devices[1] then problems[#problems + 1] = label .. ": on device " .. x:device() end
  end
  local tg, tp, ta = elements(got[2]), elements(want[2]), elements(again[2])
  local bitwise = dot_promised(k.dtype, axes, opts)
  count_path(axes, nd)
  tally[bitwise and "bitwise" or "tolerance"] = tally[bitwise and "bitwise" or "tolerance"] + #groups
  local fmt = (k.dtype == "float64" or opts.acc == "float64") and "float64" or "float32"
  for g, members in ipairs(groups) do
    local xs, ys = {}, {}
    for j, i in ipairs(members) do xs[j], ys[j] = k.values[i], k.values2[i] end
    local value, bound = dot_reference(k.dtype, fmt, opts.determinism == "gpu_to_gpu", xs, ys)
    local why
    local twice = bound and 2 * bound
    if bits(tg[g]) ~= bits(ta[g]) then
      why = "a second call gave " .. R.fmt(ta[g])
    elseif bits(tg[g]) ~= bits(tp[g]) and bitwise then
      why = "the plain pair's " .. R.fmt(tp[g]) .. " (promised bit for bit)"
    elseif bits(tg[g]) ~= bits(tp[g]) and bound and not dot_matches(tg[g], tp[g], twice) then
      why = "the plain pair's " .. R.fmt(tp[g]) .. " (beyond the tolerance)"
    elseif not dot_matches(tg[g], value, bound) then
      why = "the reference's " .. R.fmt(value) .. (bound and bound > 0 and string.format(" (bound %.3g)", bound) or "")
    end
    if why then
      problems[#problems + 1] = string.format("%s: output %d of %d (%d pairs) is %s, not %s", label, g, #groups,
        #members, R.fmt(tg[g]), why)
      return
    end
  end
end

---------------------------------------------------------------------------------------------------
-- the kinds of call

local function draw_determinism(rng, dtype, ops)
  local exact = is_float(dtype)
  for _, op in ipairs(ops) do exact = exact and EXACT_OPS[op] end
  if exact and rng:chance(0.3) then return "gpu_to_gpu" end
  if rng:chance(0.03) then return "gpu_to_gpu" end             -- refused by both, as a rule
  if rng:chance(0.1) then return "run_to_run" end
  return nil
end

--- Three calls of gr.reduce with one op each: the case's op (its data was drawn for it), then two more.
local function one_op(rng, k, c, problems)
  local calls = {}
  for t = 1, 3 do
    local op = t == 1 and c.op or rng:pick(OPS)
    local opts = { op = op, axis = draw_axis(rng, #k.shape) }
    if opts.axis and rng:chance(0.3) then opts.keepdims = true end
    if WIDENS[op] and (k.dtype == "float32" or R.DTYPES[k.dtype].small) and rng:chance(0.25) then
      opts.acc = "float64"
    end
    if (op == "var" or op == "std") and rng:chance(0.5) then opts.ddof = rng:pick({ 0, 1, 2 }) end
    opts.determinism = draw_determinism(rng, k.dtype, { op })
    calls[t] = "gr.reduce(s, " .. show_opts(opts) .. ")"
    check_reduce(k, opts, problems, string.format("call %d: %s", t, op))
  end
  c.call = table.concat(calls, "; ")
end

--- An op's own call's results on the sharded buffer, as lists, for comparing ops = {...} and describe
-- entries with.
local function own_lists(ret)
  if type(ret) == "table" and getmetatable(ret) == nil then      -- {value, index} / {min, max}
    return { elements(ret[1]), elements(ret[2]) }
  end
  return { elements(ret) }
end

local function same_lists(a, b)
  if #a ~= #b then return false end
  for r = 1, #a do
    if #a[r] ~= #b[r] then return false end
    for i = 1, #a[r] do if bits(a[r][i]) ~= bits(b[r][i]) then return false end end
  end
  return true
end

local function several_ops(rng, k, c, problems)
  local pool, list = table.move(OPS, 1, #OPS, 1, {}), {}
  for _ = 1, rng:range(2, 5) do
    local i = rng:range(1, #pool)
    list[#list + 1] = table.remove(pool, i)
  end
  local opts = { ops = list, axis = draw_axis(rng, #k.shape) }
  if opts.axis and rng:chance(0.3) then opts.keepdims = true end
  for _, op in ipairs(list) do
    if (op == "var" or op == "std") and rng:chance(0.4) then opts.ddof = 1 end
  end
  opts.determinism = draw_determinism(rng, k.dtype, list)
  c.call = "gr.reduce(s, " .. show_opts(opts) .. ")"
  local got, want = call(gr.reduce, k.s, opts), call(gr.reduce, k.m, opts)
  if not same_outcome(got, want, problems, "ops") then return end
  for _, op in ipairs(list) do
    local o = { op = op, axis = opts.axis, keepdims = opts.keepdims, determinism = opts.determinism }
    if op == "var" or op == "std" then o.ddof = opts.ddof end
    local own = check_reduce(k, o, problems, "ops." .. op)
    if got[1] and own then
      local entry = own_lists(got[2][op])
      local single = opts.axis and { elements(own[2]), own[3] and elements(own[3]) or nil }
                     or { { own[2] }, own[3] ~= nil and { own[3] } or nil }
      if not same_lists(entry, single) then
        problems[#problems + 1] = "ops." .. op .. ": not the bits of the op's own call"
      end
    end
  end
end

local DESCRIBED = { "sum", "mean", "std", "min", "max" }

local function describe_call(rng, k, c, problems)
  local opts = { axis = draw_axis(rng, #k.shape) }
  if opts.axis and rng:chance(0.3) then opts.keepdims = true end
  if rng:chance(0.3) then opts.ddof = 1 end
  c.call = "gr.describe(s, " .. show_opts(opts) .. ")"
  local got, want = call(gr.describe, k.s, opts), call(gr.describe, k.m, opts)
  if not same_outcome(got, want, problems, "describe") then return end
  if got[1] and got[2].count ~= want[2].count then
    problems[#problems + 1] = string.format("describe: count %s, one buffer's %s", tostring(got[2].count),
      tostring(want[2].count))
  end
  for _, op in ipairs(DESCRIBED) do
    local o = { op = op, axis = opts.axis, keepdims = opts.keepdims, ddof = op == "std" and opts.ddof or nil }
    local own = check_reduce(k, o, problems, "describe." .. op)
    if got[1] and own and not same_lists({ elements(got[2][op]) }, { elements(own[2]) }) then
      problems[#problems + 1] = "describe." .. op .. ": not the bits of the op's own call"
    end
  end
end

local function dot_call(rng, k, c, problems)
  local opts = { axis = draw_axis(rng, #k.shape) }
  if opts.axis and rng:chance(0.2) then opts.keepdims = true end
  if (k.dtype == "float32" or R.DTYPES[k.dtype].small) and rng:chance(0.25) then opts.acc = "float64" end
  opts.determinism = draw_determinism(rng, k.dtype, { "sum" })
  c.call = "gr.dot(sa, sb, " .. show_opts(opts) .. ")"
  check_dot(k, opts, problems, "dot")
end

local KEY_DTYPES = { "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64" }
local BY_KEY_OPS = { "sum", "prod", "min", "max", "count", "mean", "var", "std", "minmax", "sumsq", "nansum",
  "nanmin", "nanmax", "absmax", "asum", "and", "or" }

--- gr.reduce_by_key of sharded keys and values (gathered onto the first shard's device): one buffer's
-- keys and results, bit for bit, and the reference per key.
local function by_key_call(rng, k, c, problems)
  local kd = rng:pick(KEY_DTYPES)
  local span = rng:pick({ 1, 3, 10, 100 })
  local keys = {}
  for i = 1, #k.values do
    keys[i] = R.DTYPES[kd].kind == "uint" and rng:range(0, span) or rng:range(-span // 2, span - span // 2)
  end
  local op = rng:pick(BY_KEY_OPS)
  local opts = { op = op }
  opts.determinism = draw_determinism(rng, k.dtype, { op })
  c.call = string.format("gr.reduce_by_key(%s keys in -%d..%d, s, %s)", kd, span // 2, span,
    show_opts(opts))
  local sk = gr.sharded(k.shape, kd, { devices = k.devices })
  local mk = gr.buffer(#keys, kd)
  if #k.shape > 1 then mk = mk:view(k.shape) end
  if #keys > 0 then
    sk:set(keys)
    mk:set(keys)
  end
  local got, want = call(gr.reduce_by_key, sk, k.s, opts), call(gr.reduce_by_key, mk, k.m, opts)
  sk:free()
  mk:free()
  if not same_outcome(got, want, problems, "by key") or not got[1] then return end
  for r = 2, want.n do
    if not same_lists({ elements(got[r]) }, { elements(want[r]) }) then
      problems[#problems + 1] = string.format("by key: result %d is not one buffer's bits", r - 1)
      return
    end
  end
  -- the reference: the distinct keys ascending, each key's values in order
  local by, distinct = {}, {}
  for i, key in ipairs(keys) do
    if not by[key] then
      by[key] = {}
      distinct[#distinct + 1] = key
    end
    table.insert(by[key], k.values[i])
  end
  table.sort(distinct)
  local tk, t1, t2 = elements(got[2]), elements(got[3]), got[4] and elements(got[4])
  if text(tk) ~= text(distinct) then
    problems[#problems + 1] = "by key: keys " .. text(tk) .. ", expected " .. text(distinct)
    return
  end
  local info = { dtype = k.dtype, ddof = opts.ddof, exact_scale = k.scale }
  for g, key in ipairs(distinct) do
    local good, why = R.check(op, true, as_checked(op, t1[g]), R.expect(op, by[key], info), t2 and t2[g])
    if not good then
      problems[#problems + 1] = string.format("by key: key %d (%d values) against the reference: %s", key,
        #by[key], tostring(why))
      return
    end
  end
end

local KINDS = { op = 50, ops = 12, describe = 8, dot = 22, by_key = 8 }
local CALLS = { op = one_op, ops = several_ops, describe = describe_call, dot = dot_call, by_key = by_key_call }

---------------------------------------------------------------------------------------------------
-- one case

--- A sharded buffer of shape over devices holding values, and a plain buffer of the shape holding them.
-- as_view: the sharded buffer is a 1-D one seen through s:view(shape) (each shard must hold whole rows).
local function make_pair(shape, dtype, devices, values, as_view)
  local s = gr.sharded(as_view and #values or shape, dtype, { devices = devices })
  if #values > 0 then s:set(values) end
  if as_view then s = s:view(shape) end
  return s, (#values > 0 and gr.buffer(values, dtype) or gr.buffer(0, dtype)):view(shape)
end

local function show_values(values, dtype)
  local parts = {}
  for i = 1, math.min(#values, 12) do parts[i] = R.fmt_short(values[i], dtype) end
  return "{ " .. table.concat(parts, ", ") .. (#values > 12 and ", ... }" or " }")
end

--- Runs case `index`; nil when it passes, else the report.
local function run_case(index)
  local seed = R.case_seed(SEED, index)
  local rng, drng = R.rng(seed), R.rng(seed ~ 0x5DEECE66D)
  local c = {}
  c.dtype = rng:pick(DTYPES)
  c.devices = draw_devices(rng)
  c.shape = draw_shape(rng, #c.devices)
  c.kind = rng:weighted(KINDS)
  c.op = c.kind == "op" and rng:pick(OPS) or nil          -- before the data: products get their own
  local n = A.product(c.shape)
  -- now and then a 1-D sharded buffer viewed with the shape, where its shards hold whole rows
  c.view = #c.shape > 1 and n > 0 and c.shape[1] % #c.devices == 0 and rng:chance(0.2)
  local values, what, scale = gen_values(drng, c.dtype, c.op, n)
  local k = { dtype = c.dtype, shape = c.shape, devices = c.devices, values = values, scale = scale }
  k.s, k.m = make_pair(c.shape, c.dtype, c.devices, values, c.view)
  if c.kind == "dot" then
    k.values2 = gen_values(drng, c.dtype, nil, n)
    k.s2, k.m2 = make_pair(c.shape, c.dtype, c.devices, k.values2, c.view)
  end
  local problems = {}
  local stored = R.boolify(c.dtype, n > 0 and k.s:totable(1) or {})
  for i = 1, n do
    if bits(stored[i]) ~= bits(values[i]) then
      problems[#problems + 1] = string.format("element %d holds %s, %s was written", i, R.fmt(stored[i]),
        R.fmt(values[i]))
      break
    end
  end
  local before = k.s:tobytes() .. (k.s2 and k.s2:tobytes() or "")
  CALLS[c.kind](rng, k, c, problems)
  if k.s:tobytes() .. (k.s2 and k.s2:tobytes() or "") ~= before then problems[#problems + 1] = "the input changed" end
  for _, b in ipairs({ k.s, k.m, k.s2 or false, k.m2 or false }) do
    if b then b:free() end
  end
  if #problems == 0 and not ONLY then return nil end
  local report = table.concat({
    string.format("case %d of seed %d: %s %s%s over devices %s -- %s", index, SEED, c.dtype, text(c.shape),
      c.view and " (a 1-D sharded buffer's view)" or "", text(c.devices),
      #problems == 0 and "passed" or table.concat(problems, "; ", 1, math.min(#problems, 4))),
    "  call:     " .. tostring(c.call),
    "  data:     " .. what .. ": " .. show_values(values, c.dtype),
    "  re-run:   " .. recipe(index),
  }, "\n")
  if ONLY then print("\n" .. report) end                      -- the case asked for, passed or not
  return #problems > 0 and report or nil
end

--- run_case(index), where the fuzz itself fails too: the report, or nil.
local function checked_case(index)
  local ok, report = xpcall(run_case, debug.traceback, index)
  if ok then return report end
  return string.format("case %d of seed %d: the fuzz itself failed: %s\n  re-run:   %s", index, SEED,
    tostring(report), recipe(index))
end

---------------------------------------------------------------------------------------------------
-- the run: each case's dtype is its stream's first draw

local groups, planned = {}, 0
for i = ONLY or 1, ONLY or CASES do
  local dtype = R.rng(R.case_seed(SEED, i)):pick(DTYPES)
  groups[dtype] = groups[dtype] or {}
  table.insert(groups[dtype], i)
  planned = planned + 1
end

local ran, due, failed = 0, 0, 0

describe(string.format("sharded differential fuzz (seed %d, %d cases, %s, %d device(s))", SEED, planned,
  gr.backend(), NDEV), function()
  for _, dtype in ipairs(DTYPES) do
    local list = groups[dtype] or {}
    it(string.format("%s: %d cases agree with one buffer and the reference", dtype, #list), function()
      local reports = {}
      due = due + #list
      for _, index in ipairs(list) do
        reports[#reports + 1] = checked_case(index)
        ran = ran + 1
      end
      failed = failed + #reports
      assert(#reports == 0, string.format("%s: %d of %d cases failed\n%s", dtype, #reports, #list,
        table.concat(reports, "\n", 1, math.min(#reports, REPORTED))))
    end)
  end

  it(string.format("ran every case of the groups it ran (%d planned)", planned), function()
    assert(ran == due, string.format("ran %d of the %d cases of its groups", ran, due))
  end)

  -- found by this fuzz: a shard's mean result of 64-bit integers is its wrapping sum over its count, which
  -- Chan's merge cannot use (the rows are gathered instead)
  it("gives var and std of 64-bit integers along the rows as one buffer does where shards' sums wrap", function()
    local big = 1 << 62
    for _, dtype in ipairs({ "int64", "uint64" }) do
      local values = { big, big, big, 0, 0, 0 }                  -- the first shard's sum wraps, the second's not
      local k = { dtype = dtype, shape = { 6, 1 }, devices = NDEV >= 2 and { 1, 2 } or { 1, 1 }, values = values }
      k.s, k.m = make_pair(k.shape, dtype, k.devices, values)
      local problems = {}
      for _, op in ipairs({ "var", "std" }) do check_reduce(k, { op = op, axis = 1 }, problems, dtype .. " " .. op) end
      assert(#problems == 0, table.concat(problems, "\n"))
      assert.are.equal(0x1p122, gr.var(k.s, { axis = 1 })[1], dtype .. ": the mean 2^61, the variance 2^122")
      k.s:free()
    end
  end)

  teardown(function()
    print(string.format("\nsharded fuzz: %d cases, seed %d, %d device(s), %d failures", ran, SEED, NDEV, failed))
    print(string.format("  calls along the rows kept %d, the rows reduced %d, every axis %d; refused by both %d; "
      .. "outputs compared bit for bit %d, within the tolerance %d", tally.kept, tally.reduced, tally.every,
      tally.refused, tally.bitwise, tally.tolerance))
  end)
end)

-- gr.dot of two sharded buffers along axes queues every pair of shards on its GPU before waiting for any
-- (sharded_axes.c): with N GPUs the row dot products of a (2^20, 256) float32 pair split by rows take
-- about 1/N of one GPU's time, and give one buffer's bits along the rows kept. Printed, not asserted.
describe("sharded gr.dot along axes, timed #slow", function()
  H.it_if(GPU and NDEV >= 2, "needs two GPUs")("runs the GPUs at once #gpu", function()
    local rows = 1 << (tonumber(os.getenv("GPUREDUCE_SHARDED_DOT_ROWS") or "") or 20)
    local shape, all = { rows, 256 }, {}
    for d = 1, NDEV do all[d] = d end
    local function ms_per_call(f)                -- the mean of 10 calls after two to warm up
      f()
      f()
      local t0 = gr.clock()
      for _ = 1, 10 do f() end
      return (gr.clock() - t0) * 100
    end
    local ma = gr.buffer(rows * 256, "float32"):view(shape):random(1, -1, 1)
    local mb = gr.buffer(rows * 256, "float32"):view(shape):random(2, -1, 1)
    local sa = gr.sharded(shape, "float32", { devices = all }):random(1, -1, 1)
    local sb = gr.sharded(shape, "float32", { devices = all }):random(2, -1, 1)
    print(string.format("\n%s, gr.dot of (%d, 256) float32 pairs along axes:", gr.device().name, rows))
    for _, axis in ipairs({ 2, 1 }) do
      local one = ms_per_call(function() gr.dot(ma, mb, { axis = axis }):free() end)
      local many = ms_per_call(function() gr.dot(sa, sb, { axis = axis }):free() end)
      print(string.format("  axis %d: 1 GPU %.3f ms, %d GPUs %.3f ms, %.2fx", axis, one, NDEV, many, one / many))
    end
    local got, want = gr.dot(sa, sb, { axis = 2 }), gr.dot(ma, mb, { axis = 2 })
    assert.are.equal(want:tobytes(), got:tobytes(), "the rows kept: one buffer's bits")
    for _, b in ipairs({ ma, mb, sa, sb, got, want }) do b:free() end
  end)
end)
