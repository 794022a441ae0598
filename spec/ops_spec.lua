--[[
ops_spec.lua -- the reductions added after sum/prod/min/max/and/or (count, mean, var, std, argmin, argmax,
minmax, sumsq, norm, nansum, nanmin, nanmax, nanmean, absmax, asum) against the independent Lua reference
of spec/support/ops_reference.lua (contract and error bounds stated there).

What runs
  Every variant of the registry that takes the op (its `ops` list; GPU variants through H.variant_it, so
  they are pending without a CUDA device) and `auto`, x every new op x every dtype x the sizes 0, 1, 2, 31,
  32, 33, 63, 1023, 1025, 4097, 65537 (and 1000003 for the GPU variants), x the variant's finishing modes
  (all of them up to n = 4097 (hybrid with threshold 2 and with the default), single, device and hybrid
  with threshold 64 above; block sizes min / default / max on the first data set of each size), x acc
  (float32 data: also "float64" for the ops that take it) x ddof (var, std: 0 and 1 up to n = 4097), on
  data sets chosen per op and dtype to reveal the bugs feared (random over the dtype, small integers,
  repeated extremes at several positions, -0.0 before 0.0, NaN first / middle / last / everywhere,
  +-inf, the dtype's extremes, squares that overflow or underflow, a large offset plus noise, ramps,
  constants, only signed zeros, the dtype's lowest value (INT_MIN) among small mixed-sign values). Small sizes get every data set, 4097 and up the first two or three (the most telling).
  Each reduction is also checked to leave its input's bytes unchanged, and repeated with async = true
  (p:wait() must give the same values, bit for bit, as the synchronous call).
  Then: streamed host data (chunks of 4096 bytes on 3 streams, and the defaults), slices of a poisoned
  parent (indices relative to the view), empty buffers, ddof at and past n and negative, the shortcuts
  (gr.count, ...), the contract's examples, indices and counts past 2^31 elements (GPU, #slow),
  variants that do not take an op ("is not taken by variant"), and the registry's op lists.

How it reports
  One `it` per (variant, op, dtype, small or large sizes), its title naming them; a failure lists every
  failing case (size, data set, options, expected, got, the first values of the data), the first few
  in full.

Cost: about 10 s of CPU on the CPU backend (each data set made once per (dtype, n) and shared by the ops,
its expected values computed once per op, acc and ddof and shared by the variants).
]]
local gr = require "gpureduce"
-- `pending` is looked up when the test runs: inside a test it is busted's "mark this test pending"
local H = require("support.helpers").bind(it, function(reason) pending(reason) end)
local R = require "support.fuzz_reference"
local O = require "support.ops_reference"

local NEW_OPS = O.OP_ORDER
local SMALL = { 0, 1, 2, 31, 32, 33, 63, 1023, 1025 }
local LARGE = { 4097, 65537 }
local GPU_LARGE = { 4097, 65537, 1000003 }
local ALL_FINISHES_UP_TO = 4097       -- every finishing mode up to this size; single/device/hybrid above
local SHOWN = 4                       -- failures shown in full per test

local F32, F64 = R.F32, R.F64
local inf, nan = math.huge, 0 / 0

local function contains(list, x)
  for _, y in ipairs(list) do if y == x then return true end end
  return false
end

---------------------------------------------------------------------------------------------------
-- data sets: generators of Lua values (so the reference knows each exactly)

local function fnv(s)
  local h = 0xcbf29ce484222325
  for i = 1, #s do h = (h ~ s:byte(i)) * 0x100000001b3 end
  return h
end

-- a value as an element of the dtype holds it (float32 and the 16-bit formats round)
local function f32(dtype, x)
  local y = R.to_dtype(dtype, x)
  if y == nil then y = x < 0 and -R.DTYPES[dtype].fmt.max or R.DTYPES[dtype].fmt.max end  -- past FP8's range
  return y
end

local function int_bounds(dtype)
  local d = R.DTYPES[dtype]
  if dtype == "uint64" then return 0, -1 end            -- the largest uint64 is the Lua integer -1
  return d.min, d.max
end

--- Positions spread over 1..n (sorted, distinct where n allows): where specials and repeated extremes go.
local function spots(n, fractions)
  local out, seen = {}, {}
  for _, f in ipairs(fractions) do
    local i = math.max(1, math.min(n, math.floor(f * n + 0.5)))
    if not seen[i] then seen[i] = true; out[#out + 1] = i end
  end
  table.sort(out)
  return out
end

local function float_uniform(rng, dtype, lo, hi) return f32(dtype, lo + (hi - lo) * rng:float()) end

--- Uniform data (floats in [-1, 1), integers over the dtype) from the engine's generator, read back: only
-- the data comes from the module, never an expected value (the reference reads the values themselves).
local function fill_uniform(rng, dtype, n, v)
  local b = gr.buffer(n, dtype)
  local seed = rng:next() & 0xffffffff
  if H.is_float(dtype) then b:random(seed, -1, 1) else b:random(seed) end
  local t = b:totable()
  b:free()
  for i = 1, n do v[i] = t[i] end
end

local function put_at(v, positions, value) for _, i in ipairs(positions) do v[i] = value end end

-- each generator fills v[1..n] and returns a description
local GEN = {}

function GEN.uniform(rng, dtype, n, v)
  fill_uniform(rng, dtype, n, v)
  return H.is_float(dtype) and "uniform in [-1, 1)" or "uniform over the dtype"
end

function GEN.small(rng, dtype, n, v)
  local lo, hi = -3, 3
  if H.is_unsigned(dtype) then lo, hi = 0, 6 end
  for i = 1, n do v[i] = rng:range(lo, hi) end
  if H.is_float(dtype) then for i = 1, n do v[i] = v[i] + 0.0 end end
  return string.format("small integers [%d, %d]", lo, hi)
end

-- a narrow middle range with the extremes repeated at three places each, none of them first
function GEN.ties(rng, dtype, n, v)
  local lo_at, hi_at = spots(n, { 0.3, 0.55, 0.95 }), spots(n, { 0.2, 0.7, 1.0 })
  if H.is_float(dtype) then
    for i = 1, n do v[i] = rng:range(-2, 2) + 0.0 end
    put_at(v, lo_at, -3.0)
    put_at(v, hi_at, 3.0)
  else
    local lo, hi = -50, 50
    if H.is_unsigned(dtype) then lo, hi = 100, 150 end
    for i = 1, n do v[i] = rng:range(lo + 1, hi - 1) end
    put_at(v, lo_at, lo)
    put_at(v, hi_at, hi)
  end
  return "ties: the min at [" .. table.concat(lo_at, ",") .. "], the max at [" .. table.concat(hi_at, ",") .. "]"
end

-- the dtype's extremes (and neighbours) at random places, so every extreme repeats
function GEN.extremes(rng, dtype, n, v)
  local list
  if H.is_float(dtype) then
    local F = R.DTYPES[dtype].fmt
    list = { F.max, -F.max, F.min_normal, -F.min_normal, F.denorm_min, -F.denorm_min, 0.0, -0.0, 1.0, -1.0 }
  else
    local lo, hi = int_bounds(dtype)
    list = { lo, hi, lo + 1, hi - 1, 0, 1 }
    if not H.is_unsigned(dtype) then list[#list + 1] = -1 end
  end
  for i = 1, n do v[i] = rng:pick(list) end
  return "the dtype's extremes (max, min, +-1, 0" .. (H.is_float(dtype) and ", min normal, smallest subnormal)" or ")")
end

function GEN.constant(rng, dtype, n, v)
  local c = H.is_float(dtype) and float_uniform(rng, dtype, -100, 100) or rng:int(dtype)
  for i = 1, n do v[i] = c end
  return "every element " .. R.fmt_short(c, dtype)
end

-- sorted values: the partial results of different runs differ (var's combination, argmin at the end)
function GEN.ramp(rng, dtype, n, v)
  if H.is_float(dtype) then
    for i = 1, n do v[i] = f32(dtype, 1000 - (i - 1) * 0.5) end
    return "ramp 1000, 999.5, ... (decreasing)"
  end
  local lo, hi = int_bounds(dtype)
  if dtype == "int64" or dtype == "uint64" then
    local step = 0x80000000000            -- 2^43: spans much of the range without wrapping for n < 2^20
    local start = dtype == "int64" and math.mininteger // 2 or 1
    for i = 1, n do v[i] = start + (i - 1) * step end
    return string.format("ramp from %d by 2^43", start)
  end
  for i = 1, n do v[i] = hi - (i - 1) % (hi - lo + 1) end
  return "ramp from the max down, wrapping"
end

-- mostly zeros (and -0.0), a few non-zero values
function GEN.zeros(rng, dtype, n, v)
  for i = 1, n do
    if H.is_float(dtype) then v[i] = rng:chance(0.5) and -0.0 or 0.0 else v[i] = 0 end
  end
  local at = spots(n, { 0.1, 0.5, 0.77 })
  put_at(v, at, H.is_float(dtype) and 2.5 or 7)
  return "zeros" .. (H.is_float(dtype) and " (0.0 and -0.0)" or "") .. ", non-zero at [" .. table.concat(at, ",") .. "]"
end

-- positives with zeros, -0.0 the first zero (argmin: -0.0 at its index), then negatives with zeros,
-- -0.0 first again (argmax): a tie between 0.0 and -0.0 goes to the first, and the value is that element
function GEN.signed_zeros(rng, dtype, n, v)
  local half = n // 2
  for i = 1, n do v[i] = 0.5 + rng:range(0, (1 << 20) - 1) * 0x1p-21 end      -- exact in float32
  for i = half + 1, n do v[i] = -v[i] end
  local a, b = spots(half, { 0.3, 0.6, 0.9 }), {}
  for _, i in ipairs(spots(n - half, { 0.3, 0.6, 0.9 })) do b[#b + 1] = half + i end
  if half == 0 then a = {} end
  local zeros = {}
  for k, i in ipairs(a) do v[i] = k == 1 and -0.0 or 0.0; zeros[#zeros + 1] = i end
  for k, i in ipairs(b) do v[i] = k == 1 and -0.0 or 0.0; zeros[#zeros + 1] = i end
  return "positives then negatives, zeros at [" .. table.concat(zeros, ",") .. "] (-0.0 first in each half)"
end

local function with_nans(fractions, what)
  return function(rng, dtype, n, v)
    fill_uniform(rng, dtype, n, v)
    local at = spots(n, fractions)
    put_at(v, at, nan)
    return "uniform in [-1, 1), NaN at [" .. table.concat(at, ",") .. "] (" .. what .. ")"
  end
end
GEN.nan_first = with_nans({ 0, 0.5 }, "first")
GEN.nan_mid = with_nans({ 0.5, 0.75 }, "middle")
GEN.nan_last = with_nans({ 1.0 }, "last")

-- every element -0.0 or 0.0, -0.0 first: absmax and asum must give +0.0
function GEN.neg_zeros(rng, dtype, n, v)
  for i = 1, n do v[i] = (i == 1 or rng:chance(0.7)) and -0.0 or 0.0 end
  return "only zeros, mostly -0.0 (the first one -0.0)"
end

-- small values of both signs with the dtype's lowest finite value at a few places (INT_MIN, whose
-- magnitude its own type cannot hold; floats: -max, which float32 sums overflow; unsigned: the max)
function GEN.neg_peak(rng, dtype, n, v)
  local lo, hi = -3, 3
  if H.is_unsigned(dtype) then lo, hi = 0, 6 end
  for i = 1, n do v[i] = rng:range(lo, hi) end
  local peak
  if H.is_float(dtype) then
    for i = 1, n do v[i] = v[i] + 0.0 end
    peak = -R.DTYPES[dtype].fmt.max
  else
    local dlo, dhi = int_bounds(dtype)
    peak = H.is_unsigned(dtype) and dhi or dlo
  end
  local at = spots(n, { 0.25, 0.6 })
  put_at(v, at, peak)
  return "small values, " .. R.fmt_short(peak, dtype) .. " at [" .. table.concat(at, ",") .. "]"
end

function GEN.all_nan(_, _, n, v)
  for i = 1, n do v[i] = nan end
  return "every element NaN"
end

function GEN.inf(rng, dtype, n, v)
  fill_uniform(rng, dtype, n, v)
  local p, m = spots(n, { 0.35, 0.9 }), spots(n, { 0.6 })
  put_at(v, p, inf)
  if n > 1 then put_at(v, m, -inf) end
  return "uniform, +inf at [" .. table.concat(p, ",") .. "]" .. (n > 1 and ", -inf at [" .. m[1] .. "]" or "")
end

function GEN.pinf(rng, dtype, n, v)
  fill_uniform(rng, dtype, n, v)
  local p = spots(n, { 0.4, 0.8 })
  put_at(v, p, inf)
  return "uniform, +inf at [" .. table.concat(p, ",") .. "]"
end

-- magnitudes whose squares overflow (huge) or underflow (tiny) the format
-- (the 16-bit formats, whose squares accumulate in float32: huge and tiny are the format's own ends)
local function magnitudes(lo32, hi32, lo64, hi64, what, small)
  return function(rng, dtype, n, v)
    local lo, hi = lo32, hi32
    if dtype == "float64" then lo, hi = lo64, hi64 end
    if small and small[dtype] then lo, hi = small[dtype][1], small[dtype][2] end
    local p = R.DTYPES[dtype].fmt.p
    for i = 1, n do
      local z, w = rng:next(), rng:next()
      -- a p-bit mantissa in [1, 2) times 2^e: exact in the format (subnormals rounded once)
      local x = ((z >> (65 - p)) | (1 << (p - 1))) * 2.0 ^ (1 - p) * 2.0 ^ (lo + (w >> 1) % (hi - lo + 1))
      if dtype ~= "float64" and x < R.DTYPES[dtype].fmt.min_normal then x = R.to_dtype(dtype, x) end
      if w & 1 == 1 then x = -x end
      v[i] = x
    end
    return string.format("%s: |x| in [2^%d, 2^%d)", what, lo, hi + 1)
  end
end
-- (FP8: their own ends too; float8_e4m3's binade of 256 holds 448 at most, so 2^7 is its top here)
GEN.huge = magnitudes(64, 126, 512, 1022, "squares overflow", { float16 = { 8, 15 }, bfloat16 = { 64, 127 },
  float8_e4m3 = { 4, 7 }, float8_e5m2 = { 8, 15 } })
GEN.tiny = magnitudes(-149, -64, -1074, -540, "squares underflow", { float16 = { -24, -8 }, bfloat16 = { -133, -64 },
  float8_e4m3 = { -9, -4 }, float8_e5m2 = { -16, -8 } })
-- around the thresholds of Blue's scaled sums (float32: 2^52 and 2^-63, float64: 2^486 and 2^-511):
-- the accumulators on both sides of one threshold contribute, and are combined (float16 never reaches
-- them: its own range)
GEN.near_big = magnitudes(46, 57, 478, 493, "around the big threshold of Blue's sums", { float16 = { 4, 15 },
  float8_e4m3 = { 0, 7 }, float8_e5m2 = { 4, 15 } })
GEN.near_small = magnitudes(-69, -57, -518, -505, "around the small threshold of Blue's sums",
  { float16 = { -24, -4 }, float8_e4m3 = { -9, -1 }, float8_e5m2 = { -16, -4 } })

-- a large offset plus small noise: the one-pass textbook variance cancels catastrophically here
function GEN.offset(rng, dtype, n, v)
  -- float32: 10000 + k 2^-10 and float64: 1e8 + k 2^-20 (|k| < 2^10 resp. 2^20), exact in the format
  -- float16: 512 + k 2^-1 (|k| < 2^1), bfloat16: 16 + k 2^-3: the format's last bits
  local big, bits = 1e8, 20
  if dtype == "float32" then big, bits = 1e4, 10 end
  if dtype == "float16" then big, bits = 512, 1 end
  if dtype == "bfloat16" then big, bits = 16, 3 end
  -- FP8: 8 (e4m3) or 4 (e5m2) and the value one below, the last bit of the format there
  if dtype == "float8_e4m3" then big, bits = 8, 0 end
  if dtype == "float8_e5m2" then big, bits = 4, 0 end
  local unit, span = 2.0 ^ -bits, 1 << bits
  for i = 1, n do v[i] = big + rng:range(-span, span - 1) * unit end
  return string.format("%g plus noise in [-1, 1)", big)
end

-- the data sets of each op, most telling first (the large sizes take the first few)
local FLOAT_SETS = {
  count = { "uniform", "zeros", "nan_mid", "signed_zeros", "extremes" },
  mean = { "uniform", "offset", "nan_mid", "pinf", "inf", "extremes", "small" },
  var = { "uniform", "offset", "ramp", "constant", "nan_mid", "inf", "huge", "tiny", "small" },
  argmin = { "uniform", "ties", "nan_mid", "signed_zeros", "nan_first", "nan_last", "inf", "extremes", "constant" },
  minmax = { "uniform", "nan_mid", "ties", "inf", "extremes", "signed_zeros" },
  sumsq = { "uniform", "huge", "tiny", "nan_mid", "pinf", "extremes" },
  norm = { "uniform", "huge", "near_big", "near_small", "tiny", "extremes", "nan_mid", "pinf", "zeros" },
  nansum = { "uniform", "nan_mid", "nan_first", "nan_last", "all_nan", "pinf", "extremes" },
  nanmin = { "uniform", "nan_mid", "nan_first", "nan_last", "all_nan", "inf", "ties" },
  nanmean = { "uniform", "nan_mid", "all_nan", "offset", "nan_first", "pinf" },
  absmax = { "uniform", "nan_mid", "neg_peak", "signed_zeros", "neg_zeros", "inf", "nan_first", "nan_last", "extremes",
    "ties", "all_nan" },
  asum = { "uniform", "nan_mid", "neg_peak", "extremes", "neg_zeros", "inf", "signed_zeros", "tiny", "huge", "small" },
}
FLOAT_SETS.std, FLOAT_SETS.argmax, FLOAT_SETS.nanmax = FLOAT_SETS.var, FLOAT_SETS.argmin, FLOAT_SETS.nanmin
local INT_SETS = {
  count = { "small", "zeros", "uniform" },
  mean = { "uniform", "extremes", "small", "ramp" },
  var = { "uniform", "ramp", "small", "constant", "extremes" },
  argmin = { "uniform", "ties", "extremes", "ramp", "constant", "small" },
  minmax = { "uniform", "ties", "extremes", "small" },
  sumsq = { "uniform", "extremes", "small" },
  norm = { "uniform", "extremes", "small", "zeros" },
  nansum = { "uniform", "extremes" },
  nanmin = { "uniform", "ties", "extremes" },
  nanmean = { "uniform", "extremes", "small" },
  absmax = { "uniform", "neg_peak", "extremes", "ties", "small", "constant" },
  asum = { "uniform", "neg_peak", "extremes", "small", "ramp" },
}
INT_SETS.std, INT_SETS.argmax, INT_SETS.nanmax = INT_SETS.var, INT_SETS.argmin, INT_SETS.nanmin
-- how many data sets the sizes from 4097 on take
local LARGE_SETS = { argmin = 3, argmax = 3, norm = 4, default = 2 }

local function set_names(dtype, op, n)
  if n == 0 then return { "empty" } end
  local names = (H.is_float(dtype) and FLOAT_SETS or INT_SETS)[op]
  if n < ALL_FINISHES_UP_TO then return names end
  local k = LARGE_SETS[op] or LARGE_SETS.default
  return { table.unpack(names, 1, math.min(k, #names)) }
end

--- GEN[name]'s values, as the elements of dtype hold them (the generators draw in float32 or float64
-- terms; the 16-bit formats round them once, nearest even).
local function generate(name, rng, dtype, n, v)
  local desc = GEN[name](rng, dtype, n, v)
  local d = R.DTYPES[dtype]
  if d.small then
    -- a value past the format (FP8's largest are 448 and 57344; float8_e4m3 has no infinity) is held
    -- at the largest finite value of its sign: the set keeps its extremes
    for i = 1, n do v[i] = R.to_dtype(dtype, v[i]) or (v[i] < 0 and -d.fmt.max or d.fmt.max) end
  end
  R.boolify(dtype, v)                 -- bool: the set's non-zero values as 1
  return desc
end

--- One data set: values, a buffer holding them (where = "device" or "host"), its bytes.
local function make_set(dtype, n, name, where)
  local v, desc = {}, "empty"
  if n > 0 then
    local rng = R.rng(fnv(table.concat({ dtype, n, name }, ":")))
    desc = generate(name, rng, dtype, n, v)
  end
  local b = gr.buffer(n, dtype, { where = where })
  if n > 0 then b:set(v) end
  return { name = name, desc = desc, values = v, b = b, bytes = b:tobytes(), n = n, expect = {} }
end

--- The data sets op reduces at (dtype, n, where), made on first use and shared by the ops of the dtype
-- (a set depends on (dtype, n, name) only, so each is generated and read once). For device data the
-- cache keeps one dtype at a time -- the main specs visit a dtype's ops, variants and sizes one after
-- another -- and frees the buffers when it moves on; host data (the streamed specs, which go op by op
-- through every dtype, at small sizes) is kept for every dtype.
local caches = {}
local function sets_of(dtype, op, n, where)
  where = where or "device"
  local key = where == "host" and "every dtype" or dtype
  local cache = caches[where]
  if not cache or cache.key ~= key then
    if cache then for _, set in pairs(cache.sets) do set.b:free() end end
    cache = { key = key, sets = {} }
    caches[where] = cache
  end
  local list = {}
  for _, name in ipairs(set_names(dtype, op, n)) do
    local k = dtype .. ":" .. n .. ":" .. name
    local set = cache.sets[k]
    if not set then
      set = make_set(dtype, n, name, where)
      cache.sets[k] = set
    end
    list[#list + 1] = set
  end
  return list
end

--- The expectation of op over a data set with given acc and ddof, memoised on the set.
local function expectation(set, op, dtype, acc, ddof)
  local key = op .. "/" .. tostring(acc) .. "/" .. tostring(ddof)
  local e = set.expect[key]
  if not e then
    e = O.expect(op, set.values, { dtype = dtype, acc = acc, ddof = ddof })
    set.expect[key] = e
  end
  return e
end

---------------------------------------------------------------------------------------------------
-- running and reporting

local function same_bits(x, y)
  if math.type(x) ~= math.type(y) or type(x) ~= type(y) then return false end
  if math.type(x) == "float" then
    if x ~= x then return y ~= y end
    return string.pack("<d", x) == string.pack("<d", y)
  end
  return x == y
end

local function show_values(values, dtype, limit)
  local parts = {}
  for i = 1, math.min(#values, limit) do parts[i] = R.fmt_short(values[i], dtype) end
  return "{ " .. table.concat(parts, ", ") .. (#values > limit and ", ... }" or " }")
end

local function show_got(ok, a, b, dtype)
  if not ok then return "error: " .. tostring(a) end
  local function one(x) return R.fmt(x, dtype) .. " (" .. (math.type(x) or type(x)) .. ")" end
  return one(a) .. (b ~= nil and ", " .. one(b) or "")
end

local function wait_async(b, opts)
  local p = gr.reduce(b, opts)
  local x, y = p:wait()
  local x2, y2 = p:wait()                 -- waiting again gives the same values
  p:free()
  assert(same_bits(x, x2) and same_bits(y, y2), "a second wait gave other values")
  return x, y
end

--- Runs one reduction (and its async twin) and returns a failure report or nil.
local function run_one(label, set, op, dtype, opts, e, with_async)
  local ok, a, b = pcall(gr.reduce, set.b, opts)
  local problems = {}
  local good, why = O.check(op, ok, a, e, b)
  if not good then problems[#problems + 1] = why end
  if set.b:tobytes() ~= set.bytes then problems[#problems + 1] = "the reduction wrote to its input" end
  local aok, x, y
  if with_async then
    local aopts = {}
    for k, v in pairs(opts) do aopts[k] = v end
    aopts.async = true
    aok, x, y = pcall(wait_async, set.b, aopts)
    if aok ~= ok then
      problems[#problems + 1] = "async " .. (aok and "succeeded" or "failed") .. " where the synchronous call did not"
    elseif ok and not (same_bits(a, x) and same_bits(b, y)) then
      problems[#problems + 1] = "async gave other values than the synchronous call"
    elseif not ok and not tostring(x):find("of an empty buffer", 1, true) then
      problems[#problems + 1] = "async: unexpected error"
    end
    if set.b:tobytes() ~= set.bytes then problems[#problems + 1] = "the async reduction wrote to its input" end
  end
  if #problems == 0 then return nil end
  local lines = {
    string.format("%s n=%d data=%s: %s", label, set.n, set.name, table.concat(problems, "; ")),
    "    gr.reduce(b, " .. H.describe_opts(opts) .. ")",
    "    data:     " .. set.desc .. " " .. show_values(set.values, dtype, 12),
    "    expected: " .. e.text,
    "    got:      " .. show_got(ok, a, b, dtype),
  }
  if with_async then lines[#lines + 1] = "    async:    " .. show_got(aok, x, y, dtype) end
  return table.concat(lines, "\n")
end

local function report(failures, total)
  if #failures == 0 then return end
  local shown = {}
  for k = 1, math.min(#failures, SHOWN) do shown[k] = failures[k] end
  local firsts = {}
  for k = SHOWN + 1, math.min(#failures, 40) do firsts[#firsts + 1] = failures[k]:match("^[^\n]*") end
  assert(false, string.format("%d of %d reductions failed:\n%s%s", #failures, total, table.concat(shown, "\n"),
    #firsts > 0 and "\n  and:\n    " .. table.concat(firsts, "\n    ") .. (#failures > 40 and "\n    ..." or "") or ""))
end

---------------------------------------------------------------------------------------------------
-- options per variant and size

local AUTO = { name = "auto", needs = {}, finishes = {}, ops = gr.ops(), auto = true }

--- The option sets (finish, threshold, block) a variant runs with at size n; `first` adds the block sizes.
local function settings(v, n, first)
  if v.auto then return { {} } end
  if not H.needs_cuda(v) then
    local out = {}
    for _, f in ipairs(v.finishes) do out[#out + 1] = { finish = f } end
    return out
  end
  local out = {}
  for _, f in ipairs(v.finishes) do
    if n <= ALL_FINISHES_UP_TO then
      out[#out + 1] = { finish = f }
      if f == "hybrid" then out[#out + 1] = { finish = f, threshold = 2 } end
    elseif f == "single" or f == "device" then
      out[#out + 1] = { finish = f }
    elseif f == "hybrid" then
      out[#out + 1] = { finish = f, threshold = 64 }
    end
  end
  if first and v.block and v.block.min < v.block.max then
    local main = contains(v.finishes, "single") and "single" or v.finishes[1]
    for _, block in ipairs({ v.block.min, v.block.max }) do
      out[#out + 1] = { finish = main, block = block }
      if contains(v.finishes, "device") then out[#out + 1] = { finish = "device", block = block } end
    end
  end
  return out
end

local function accs_for(op, dtype, n, k)
  if (dtype == "float32" or R.DTYPES[dtype].small) and O.TAKES_FLOAT64_ACC[op] and (n <= ALL_FINISHES_UP_TO or k == 1) then
    return { false, "float64" }
  end
  return { false }
end

local function ddofs_for(op, n)
  if (op == "var" or op == "std") and n <= ALL_FINISHES_UP_TO then return { false, 1 } end
  return { false }
end

--- Every reduction of (variant, op, dtype) over the sizes; raises with the report of the failures.
local function run_group(v, op, dtype, sizes)
  local failures, total = {}, 0
  for _, n in ipairs(sizes) do
    for k, set in ipairs(sets_of(dtype, op, n)) do
      for _, s in ipairs(settings(v, n, k == 1)) do
        for _, acc in ipairs(accs_for(op, dtype, n, k)) do
          for _, ddof in ipairs(ddofs_for(op, n)) do
            local opts = { op = op, finish = s.finish, threshold = s.threshold, block = s.block }
            if not v.auto then opts.variant = v.name end
            if acc then opts.acc = acc end
            if ddof then opts.ddof = ddof end
            local e = expectation(set, op, dtype, acc or nil, ddof or nil)
            -- async once per data set and mode: with the default acc and ddof, at every size up to 4097;
            -- above, on the device variants (the first data set), where async work is queued for real
            local with_async = not acc and not ddof
              and (n <= ALL_FINISHES_UP_TO or (k == 1 and H.needs_cuda(v)))
            total = total + 1
            local f = run_one(string.format("%s %s %s", v.name, op, dtype), set, op, dtype, opts, e, with_async)
            if f then failures[#failures + 1] = f end
          end
        end
      end
    end
  end
  report(failures, total)
end

local function variants_taking(op, dtype)
  local out = {}
  for _, v in ipairs(H.variants()) do
    if contains(v.ops, op) and (not dtype or H.takes(v, dtype)) then out[#out + 1] = v end
  end
  out[#out + 1] = AUTO
  return out
end

local function sizes_text(sizes) return "n=" .. table.concat(sizes, ",") end

---------------------------------------------------------------------------------------------------

describe("new reductions against the reference", function()
  for _, dtype in ipairs(gr.dtypes()) do
    for _, op in ipairs(NEW_OPS) do
      for _, v in ipairs(variants_taking(op, dtype)) do
        local large = H.needs_cuda(v) and GPU_LARGE or LARGE
        -- auto: on a GPU the device kernels; on the CPU backend it is the cpu variant, so 4097 is enough
        if v.auto then large = H.has_gpu and GPU_LARGE or { 4097 } end
        for _, sizes in ipairs({ SMALL, large }) do
          H.variant_it(v, string.format("%s %s %s %s", v.name, op, dtype, sizes_text(sizes)), function()
            run_group(v, op, dtype, sizes)
          end)
        end
      end
    end
  end
end)

describe("new reductions of streamed host data", function()
  local STREAM_SIZES = { 0, 33, 12289 }
  local configs = { { chunk = 4096, streams = 3 }, {} }
  for _, op in ipairs(NEW_OPS) do
    -- auto (any backend), then each device variant that takes the op and has the single finish (the
    -- streamed sets are made per op and dtype: the cache moves on between dtypes)
    local vs = { AUTO }
    for _, v in ipairs(H.variants()) do
      if H.needs_cuda(v) and contains(v.ops, op) and contains(v.finishes, "single") then vs[#vs + 1] = v end
    end
    for _, v in ipairs(vs) do
      H.variant_it(v, string.format("streamed %s through %s, every dtype, %s", op, v.name, sizes_text(STREAM_SIZES)), function()
        local failures, total = {}, 0
        for _, dtype in ipairs(gr.dtypes()) do
          if not H.takes(v, dtype) then goto next_dtype end
          for _, n in ipairs(STREAM_SIZES) do
            for _, set in ipairs(sets_of(dtype, op, n, "host")) do
              for _, cfg in ipairs(configs) do
                local opts = { op = op, streamed = true, chunk = cfg.chunk, streams = cfg.streams }
                if not v.auto then opts.variant = v.name end
                total = total + 1
                local f = run_one(string.format("%s %s %s streamed", v.name, op, dtype), set, op, dtype, opts,
                  expectation(set, op, dtype), false)
                if f then failures[#failures + 1] = f end
              end
            end
          end
          ::next_dtype::
        end
        report(failures, total)
      end)
    end
  end
end)

-- values around a slice that change the result if a reduction reads outside its view
local function poison(op, dtype)
  if H.is_float(dtype) then
    local d = R.DTYPES[dtype]
    if op == "nansum" or op == "nanmean" then return d.small and math.min(0x1p14, d.fmt.max) or 0x1p20 end
    if op == "nanmin" then return d.fmt.no_inf and -d.fmt.max or -inf end
    if op == "nanmax" then return d.fmt.no_inf and d.fmt.max or inf end
    if op == "count" then return 1.0 end
    return nan
  end
  local lo, hi = int_bounds(dtype)
  if op == "argmin" or op == "nanmin" or op == "minmax" then return lo end
  if op == "argmax" or op == "nanmax" then return hi end
  if op == "absmax" then return H.is_unsigned(dtype) and hi or lo end     -- the largest magnitude
  if R.DTYPES[dtype].bool then return 1 end       -- bool: true, the value that shows in every op
  return 0x5A
end

describe("new reductions of slices", function()
  local PAD_LO, PAD_HI, N = 7, 5, 1000
  local vs = H.variants()
  vs[#vs + 1] = AUTO
  for _, v in ipairs(vs) do
    local ops = {}
    for _, op in ipairs(NEW_OPS) do if contains(v.ops, op) then ops[#ops + 1] = op end end
    if #ops > 0 then
      H.variant_it(v, string.format("%s: a slice of %d at element %d of a poisoned buffer, every new op and dtype",
        v.name, N, PAD_LO + 1), function()
        local failures, total = {}, 0
        for _, op in ipairs(ops) do
          for _, dtype in ipairs(gr.dtypes()) do
            local names = H.takes(v, dtype) and set_names(dtype, op, N) or {}
            for _, name in ipairs({ names[1], names[2] }) do
              local rng = R.rng(fnv(table.concat({ "slice", dtype, op, name }, ":")))
              local vals = {}
              local desc = generate(name, rng, dtype, N, vals)
              local parent = gr.buffer(PAD_LO + N + PAD_HI, dtype):fill(poison(op, dtype))
              parent:set(vals, PAD_LO + 1)
              local view = parent:slice(PAD_LO + 1, N)
              local set = { name = name, desc = desc, values = vals, b = view, bytes = view:tobytes(), n = N }
              local before = parent:tobytes()
              total = total + 1
              local opts = { op = op }
              if not v.auto then opts.variant = v.name end
              local f = run_one(string.format("%s %s %s slice", v.name, op, dtype), set, op, dtype, opts,
                O.expect(op, vals, { dtype = dtype }), true)
              if f then failures[#failures + 1] = f end
              if parent:tobytes() ~= before then
                failures[#failures + 1] = string.format("%s %s %s slice: the parent's bytes changed", v.name, op, dtype)
              end
              view:free()
              parent:free()
            end
          end
        end
        report(failures, total)
      end)
    end
  end
end)

describe("new reductions of an empty buffer", function()
  it("give 0 for count, sumsq, norm, nansum, absmax and asum and raise 'of an empty buffer' for the others, every path",
    function()
      for _, dtype in ipairs(gr.dtypes()) do
        local float = H.is_float(dtype)
        local e = gr.buffer(0, dtype)
        local h = gr.buffer(0, dtype, { where = "host" })
        for _, op in ipairs(NEW_OPS) do
          local calls = {
            function() return gr.reduce(e, { op = op }) end,
            function() return gr[op](e) end,
            function() return wait_async(e, { op = op, async = true }) end,
            function() return gr.reduce(h, { op = op, streamed = true }) end,
            function() return gr.reduce(e, { op = op, variant = "cpu_pairwise" }) end,
          }
          for k, call in ipairs(calls) do
            local label = string.format("%s of an empty %s buffer (path %d)", op, dtype, k)
            local ok, got = pcall(call)
            if O.EMPTY_GIVES_VALUE[op] then
              assert(ok, label .. ": raised " .. tostring(got))
              local want
              if op == "count" then want = 0
              elseif op == "norm" then want = 0.0
              elseif op == "absmax" and R.DTYPES[dtype].bool then want = false     -- |x| of a bool is the bool
              else want = float and 0.0 or 0 end
              assert(got == want and math.type(got) == math.type(want),
                string.format("%s: got %s (%s), expected %s (%s)", label, tostring(got), math.type(got), tostring(want),
                  math.type(want)))
              assert(math.type(got) ~= "float" or 1 / got > 0, label .. ": -0.0, expected +0.0")
            else
              assert(not ok, label .. ": expected an error, got " .. tostring(got))
              assert(tostring(got):find(op .. " of an empty buffer", 1, true), label .. ": wrong error: " .. tostring(got))
            end
          end
        end
      end
    end)
end)

describe("ddof", function()
  local vs = { AUTO }
  for _, v in ipairs(H.variants()) do if contains(v.ops, "var") then vs[#vs + 1] = v end end
  for _, v in ipairs(vs) do
    H.variant_it(v, v.name .. ": var and std with ddof 0, 1, 2, n - 1, n and past n (NaN), every dtype", function()
      local failures, total = {}, 0
      for _, dtype in ipairs(gr.dtypes()) do
        for _, n in ipairs({ 1, 2, 3, 33, 1025 }) do
          local rng = R.rng(fnv("ddof:" .. dtype .. ":" .. n))
          local vals = {}
          local desc = GEN.small(rng, dtype, n, vals)
          local b = gr.buffer(R.boolify(dtype, vals), dtype)
          local set = { name = "small", desc = desc, values = vals, b = b, bytes = b:tobytes(), n = n }
          for _, op in ipairs({ "var", "std" }) do
            for _, ddof in ipairs({ 0, 1, 2, n - 1, n, n + 3 }) do
              if ddof >= 0 then
                local opts = { op = op, ddof = ddof }
                if not v.auto then opts.variant = v.name end
                total = total + 1
                local f = run_one(string.format("%s %s %s ddof=%d", v.name, op, dtype, ddof), set, op, dtype, opts,
                  O.expect(op, vals, { dtype = dtype, ddof = ddof }), false)
                if f then failures[#failures + 1] = f end
              end
            end
          end
          b:free()
        end
      end
      report(failures, total)
    end)
  end

  it("1 gives the sample variance: exactly checkable values", function()
    local b = gr.buffer({ 2, 4, 4, 4, 5, 5, 7, 9 }, "float64")
    assert.are.equal(4.0, gr.var(b))
    assert.are.equal(2.0, gr.std(b))
    assert.are.equal(32 / 7, gr.var(b, { ddof = 1 }))
    assert.are.equal(32 / 7, gr.reduce(b, { op = "var", ddof = 1 }))
    assert.are.equal(math.sqrt(32 / 7), gr.std(b, { ddof = 1 }))
    local i = gr.buffer({ 1, 2, 3, 4 }, "int32")
    assert.are.equal(1.25, gr.var(i))
    assert.are.equal(5 / 3, gr.var(i, { ddof = 1 }))
    local one = gr.buffer({ 3.5 }, "float32")
    assert.are.equal(0.0, gr.var(one))
    local v1 = gr.var(one, { ddof = 1 })
    assert(v1 ~= v1, "var of one element with ddof = 1 must be NaN, got " .. tostring(v1))
  end)

  -- var, std and norm of 8- and 32-bit integers come from exact sums (a 64-bit sum, a 128-bit sum of
  -- squares): within a few ulp of the exact value even with an offset of 2^31, where a float64 Welford
  -- loses about 2^-22 of it. The exact value: var is shift-invariant, so (n sum y^2 - (sum y)^2) / (n (n -
  -- ddof)) with y = x - c is an exact integer ratio, rounded once by the division.
  local function ulps(got, want) return math.abs(got - want) / (math.abs(want) * 0x1p-52 + 0x1p-1074) end
  for _, v in ipairs(vs) do
    H.variant_it(v, v.name .. ": var, std and norm of int8, uint8, int32, uint32 are exact sums, offsets up to 2^32",
      function()
      local cases = { int8 = { -128, 255 }, uint8 = { 0, 255 }, int32 = { 0x7fffffff - 40, 31 },
                      uint32 = { 0xffffffff - 40, 31 } }
      for dtype, c in pairs(cases) do
        for _, n in ipairs({ 2, 33, 1025, 70001 }) do
          local rng = R.rng(fnv("exact-var:" .. dtype .. ":" .. n))
          local vals, s1, s2 = {}, 0, 0
          for i = 1, n do
            local y = rng:next() % (c[2] + 1)
            vals[i] = c[1] + y
            s1, s2 = s1 + y, s2 + y * y
          end
          -- sum x^2 = n c^2 + 2 c sum y + sum y^2: a few roundings in double, not n of them
          local sq = n * (c[1] * 1.0) * c[1] + 2.0 * c[1] * s1 + s2
          local b = gr.buffer(vals, dtype)
          local opts = v.auto and {} or { variant = v.name }
          for _, ddof in ipairs({ 0, 1 }) do
            opts.ddof = ddof
            local want = (n * s2 - s1 * s1) / (n * (n - ddof))
            local got = gr.var(b, opts)
            assert(ulps(got, want) <= 4, string.format("var %s n=%d ddof=%d: %.17g, exact %.17g", dtype, n, ddof,
              got, want))
            local sd = gr.std(b, opts)
            assert(ulps(sd, math.sqrt(want)) <= 4, string.format("std %s n=%d: %.17g, exact %.17g", dtype, n, sd,
              math.sqrt(want)))
          end
          opts.ddof = nil
          if contains(v.ops or { "norm" }, "norm") then
            local nrm = gr.norm(b, opts)
            assert(ulps(nrm, math.sqrt(sq)) <= 4, string.format("norm %s n=%d: %.17g, about %.17g",
              dtype, n, nrm, math.sqrt(sq)))
          end
          b:free()
        end
      end
    end)
  end

  it("is rejected when negative, naming opts.ddof", function()
    local b = gr.buffer({ 1, 2, 3 }, "float64")
    local h = gr.buffer({ 1, 2, 3 }, "float64", { where = "host" })
    for _, call in ipairs({
      function() return gr.var(b, { ddof = -1 }) end,
      function() return gr.std(b, { ddof = -1 }) end,
      function() return gr.reduce(b, { op = "var", ddof = -2 }) end,
      function() return gr.reduce(b, { op = "std", ddof = -1, async = true }) end,
      function() return gr.reduce(h, { op = "var", ddof = -1, streamed = true }) end,
    }) do
      local ok, err = pcall(call)
      assert(not ok, "a negative ddof was accepted")
      assert(tostring(err):find("opts.ddof", 1, true), "the error does not name opts.ddof: " .. tostring(err))
    end
  end)
end)

describe("the shortcuts", function()
  it("gr.<op>(b, opts) give what gr.reduce(b, {op = <op>}) gives, both results", function()
    for _, dtype in ipairs(gr.dtypes()) do
      local b = gr.buffer(1000, dtype)
      if H.is_float(dtype) then b:random(3, -5, 5) else b:random(3) end
      for _, op in ipairs(NEW_OPS) do
        assert.is_function(gr[op], "gr." .. op)
        local a1, a2 = gr[op](b)
        local r1, r2 = gr.reduce(b, { op = op })
        assert(same_bits(a1, r1) and same_bits(a2, r2), string.format("gr.%s of %s: %s, %s vs %s, %s", op, dtype,
          tostring(a1), tostring(a2), tostring(r1), tostring(r2)))
        assert.are.equal(O.TWO_RESULTS[op] and 2 or 1, select("#", gr[op](b)), op .. ": number of results")
      end
      b:free()
    end
  end)

  it("reject an op that contradicts the shortcut", function()
    local ok, err = pcall(gr.argmin, gr.buffer(3), { op = "argmax" })
    assert.is_false(ok)
    assert.truthy(tostring(err):find("opts.op: 'argmax' conflicts with this function's op 'argmin'", 1, true), err)
  end)
end)

describe("the contract's examples", function()
  it("norm neither overflows nor underflows where sumsq would", function()
    local big32 = gr.buffer({ 1e30, 1e30 }, "float32")
    assert.are.equal(math.huge, gr.sumsq(big32))
    local n32 = gr.norm(big32)
    assert(math.abs(n32 - 1.41421356e30) <= 1e-6 * 1.41421356e30, "float32 norm of {1e30, 1e30}: " .. n32)
    local n64 = gr.norm(gr.buffer({ 1e200, 1e200 }, "float64"))
    assert(math.abs(n64 - 1.4142135623730951e200) <= 1e-14 * n64, "float64 norm of {1e200, 1e200}: " .. n64)
    local t64 = gr.norm(gr.buffer({ 1e-200, 1e-200 }, "float64"))
    assert(math.abs(t64 - 1.4142135623730951e-200) <= 1e-14 * 1.4142135623730951e-200,
      "float64 norm of {1e-200, 1e-200}: " .. t64)
  end)

  it("argmin/argmax: first occurrence, first NaN, -0.0 ties 0.0, uint64 unsigned", function()
    local b = gr.buffer({ 5, 1, 9, 1, 9 }, "int32")
    assert.same({ 1, 2 }, { gr.argmin(b) })
    assert.same({ 9, 3 }, { gr.argmax(b) })
    local f = gr.buffer({ 1, 0 / 0, -7, 0 / 0, 8 }, "float64")
    local v, i = gr.argmin(f)
    assert(v ~= v and i == 2, "argmin with NaN: " .. tostring(v) .. ", " .. tostring(i))
    v, i = gr.argmax(f)
    assert(v ~= v and i == 2, "argmax with NaN: " .. tostring(v) .. ", " .. tostring(i))
    local z = gr.buffer({ 1, -0.0, 0.0 }, "float32")
    v, i = gr.argmin(z)
    assert(i == 2 and v == 0 and 1 / v < 0, "argmin {1, -0.0, 0.0}: " .. tostring(v) .. ", " .. tostring(i))
    local u = gr.buffer({ 5, -1, 7 }, "uint64")      -- -1 is 2^64 - 1
    assert.same({ -1, 2 }, { gr.argmax(u) })
    assert.same({ 5, 1 }, { gr.argmin(u) })
    assert.same({ 5, -1 }, { gr.minmax(u) })
  end)

  it("count counts NaN and not -0.0; mean of integers divides the wrapped 64-bit sum", function()
    assert.are.equal(2, gr.count(gr.buffer({ 0 / 0, -0.0, 0.0, 2 }, "float64")))
    assert.are.equal(math.type(gr.count(gr.buffer({ 1 }, "int8"))), "integer")
    local m = gr.mean(gr.buffer({ math.maxinteger, 1 }, "int64"))       -- wraps to -2^63
    assert.are.equal(-0x1p63 / 2, m)
    local um = gr.mean(gr.buffer({ math.maxinteger, 1 }, "uint64"))     -- 2^63 unsigned
    assert.are.equal(0x1p63 / 2, um)
  end)
end)

describe("indices and counts past 2^31 elements #slow", function()
  -- uint8, 7 everywhere but the min 3 at two places and the max 200 at two, all past 2^31: an index or a
  -- count kept in 32 bits shows. Every expected value follows from that layout: sums of the integers and
  -- of their squares stay below 2^53, so they are exact in double, and with them mean, nanmean and norm
  -- (one rounding each; norm: every square lands in Blue's middle sum, exact). var and std: a one-pass
  -- computation over this data meets rounding only where the four other values are combined (about
  -- 1e-13 relative); 1e-9 is far below what a 32-bit count or index would cost.
  local n = (1 << 31) + 33
  local lo_at, hi_at = { (1 << 31) + 9, n }, { (1 << 31) + 2, n - 1 }
  local sum = 7 * (n - 4) + 2 * 3 + 2 * 200
  local sumsq = 49 * (n - 4) + 2 * 9 + 2 * 40000
  local mu = sum / n
  local m2 = (n - 4) * (7 - mu) ^ 2 + 2 * (3 - mu) ^ 2 + 2 * (200 - mu) ^ 2
  local want = {
    count = { n }, argmin = { 3, lo_at[1] }, argmax = { 200, hi_at[1] }, minmax = { 3, 200 }, sumsq = { sumsq },
    nansum = { sum }, nanmin = { 3 }, nanmax = { 200 }, mean = { sum / n }, nanmean = { sum / n },
    norm = { math.sqrt(sumsq + 0.0) }, var = { m2 / n }, std = { math.sqrt(m2 / n) }, absmax = { 200 }, asum = { sum },
  }
  local big
  local function buffer()
    if not big then
      big = gr.buffer(n, "uint8"):fill(7)
      for _, i in ipairs(lo_at) do big:set({ 3 }, i) end
      for _, i in ipairs(hi_at) do big:set({ 200 }, i) end
    end
    return big
  end
  local vs = { AUTO }
  for _, v in ipairs(H.variants()) do
    if H.needs_cuda(v) then
      for _, op in ipairs(NEW_OPS) do if contains(v.ops, op) then vs[#vs + 1] = v break end end
    end
  end
  for _, v in ipairs(vs) do
    H.gpu_it(string.format("%s: the new ops of uint8 n=2^31+33", v.name), function()
      local b = buffer()
      for _, op in ipairs(NEW_OPS) do
        if contains(v.ops, op) then
          for _, finish in ipairs(v.auto and { "auto" } or v.finishes) do
            local label = string.format("%s %s finish=%s", v.name, op, finish)
            local got = table.pack(gr.reduce(b, { op = op, variant = v.name, finish = finish }))
            for i, w in ipairs(want[op]) do
              if op == "var" or op == "std" then
                assert(math.abs(got[i] - w) <= 1e-9 * w, string.format("%s: got %.17g, expected %.17g", label, got[i], w))
              else
                assert(got[i] == w and math.type(got[i]) == math.type(w), string.format("%s value %d: got %s (%s), expected %s (%s)",
                  label, i, tostring(got[i]), math.type(got[i]), tostring(w), math.type(w)))
              end
            end
          end
        end
      end
    end)
  end
end)

describe("variants that do not take an op", function()
  for _, v in ipairs(H.variants()) do
    local missing = {}
    for _, op in ipairs(gr.ops()) do if not contains(v.ops, op) then missing[#missing + 1] = op end end
    if #missing > 0 then
      H.variant_it(v, string.format("%s raises 'is not taken by variant' for %s", v.name, table.concat(missing, ", ")),
        function()
          local b = gr.buffer(1000, "float32"):random(1)
          local h = gr.buffer(1000, "float32", { where = "host" }):random(1)
          for _, op in ipairs(missing) do
            local paths = {
              function() return gr.reduce(b, { op = op, variant = v.name }) end,
              function() return gr[op](b, { variant = v.name }) end,
              function() return gr.reduce(b, { op = op, variant = v.name, async = true }) end,
            }
            if contains(v.finishes, "single") then
              paths[#paths + 1] = function() return gr.reduce(h, { op = op, variant = v.name, streamed = true }) end
            end
            for k, call in ipairs(paths) do
              local ok, err = pcall(call)
              assert(not ok, string.format("%s %s (path %d): no error", v.name, op, k))
              assert(tostring(err):find("is not taken by variant", 1, true),
                string.format("%s %s (path %d): wrong error: %s", v.name, op, k, tostring(err)))
            end
          end
        end)
    end
  end
end)

describe("the registry", function()
  local CLASSIC = { "sum", "prod", "min", "max", "and", "or" }

  it("lists the 21 ops", function()
    local want = { "sum", "prod", "min", "max", "and", "or" }
    for _, op in ipairs(NEW_OPS) do want[#want + 1] = op end
    assert.same(want, gr.ops())
  end)

  it("says which ops each variant takes", function()
    local all = gr.ops()
    local pipelined = { "sum", "prod", "min", "max", "and", "or", "count", "argmin", "argmax", "minmax", "nanmin", "nanmax",
      "absmax", "asum" }
    for _, v in ipairs(H.variants()) do
      assert.is_table(v.ops, v.name .. ".ops")
      local want = CLASSIC
      if v.name == "warp_shuffle" or v.name == "cpu" or v.name == "cpu_pairwise" then want = all
      elseif v.name == "pipelined" then want = pipelined end
      local got = {}
      for _, op in ipairs(v.ops) do got[#got + 1] = op end
      local function sorted(t) local c = { table.unpack(t) }; table.sort(c); return c end
      assert.same(sorted(want), sorted(got), v.name .. ".ops")
    end
    assert.same(gr.ops(), gr.variant("cpu").ops)
  end)
end)
