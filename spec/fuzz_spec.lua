--[[
fuzz_spec.lua -- a differential fuzz of every reduction path against an independent Lua reference.

What it checks
  Each case draws, from its own splitmix64 stream: a dtype (gr.dtypes()), an op (the reference's table,
  spec/support/fuzz_reference.lua, with the ops of spec/support/ops_reference.lua), a size biased to edges (0, 1, 2, 31..33, 63..65, 255..257,
  1023..1025, 4095..4097, primes, 2^k and 2^k +- 1 up to 2^17, rarely up to 2^20), a kind of data
  (uniform over the dtype's range, small integers, values with distinct bits, extremes, odd integers for
  products, exact-sum floats, cancelling pairs, every binade, products that cannot overflow, a large
  offset plus noise and ramps for var/std, magnitudes whose squares overflow or underflow for
  sumsq/norm, ...) with
  zeros (0.0 or -0.0) and specials (NaN, +-inf, -0.0, max finite, min normal, smallest subnormal)
  dropped in (NaN often, up to every element, for the NaN-skipping ops), and the way it is reduced: a
  variant of the registry that is available here and takes the op (its `ops` list), or auto, one of its
  finishing modes (hybrid with a random threshold), a block size it accepts, acc, ddof (var, std), async
  (on a user stream or not), a slice at a random offset (data starts unaligned; the elements around it
  hold values that would change the result if read), or a pinned host buffer reduced with streamed =
  true (through a device variant that takes the op), a random chunk (>= 4096 bytes) and 1..4 streams.
  A fifth of the synchronous cases also reduce the same values as a 2-D or 3-D view (maybe permuted)
  along drawn axes, each output against the reference over the values it covers
  (spec/support/axes_reference.lua lays them out).
  Two-result ops (argmin, argmax, minmax) are checked on both results. The data is generated in Lua and written with
  gr.buffer(table) or b:set(table), so the reference knows every value exactly.
  Every case checks the result against the reference (the contract and the error bounds, with why
  they are sound, are stated at the top of fuzz_reference.lua: integers exact, floats within a bound
  valid for any summation order, exact where every partial sum is exact) and that the reduction left
  the bytes of its buffer (the whole parent of a slice) unchanged.

How it reports
  One `it` per (dtype, op) runs that group's cases, collects every failure and shows the first few in
  full (case index, seed, all parameters, expected, got, the data's first values, a one-line recipe);
  a final `it` states how many cases ran. A line "fuzz: N cases, seed S, K failures" is printed at
  the end.

Reproducing
  GPUREDUCE_FUZZ_SEED   the run's seed (default 20261121, so CI is deterministic)
  GPUREDUCE_FUZZ_CASES  how many cases (default 10000)
  GPUREDUCE_FUZZ_ONLY   run only this case index (it prints the case, and all its data up to 4096 values)
  e.g.  GPUREDUCE_FUZZ_SEED=20261121 GPUREDUCE_FUZZ_ONLY=137 busted spec/fuzz_spec.lua
  GPUREDUCE_FUZZ_STATS=1  also print what the run covered (data classes, kinds of expectation,
                        variants and finishes, modes, elements)
  A case depends only on (seed, index) and on which variants the machine has: re-run it on the same
  kind of machine (CPU backend or GPU).

Cost: 10,000 cases take about 5 s of CPU on the CPU backend here; sizes are mostly small so that the
whole run generates and checks a few million elements in Lua.
]]
local gr = require "gpureduce"
local R = require "support.fuzz_reference"
local H = require "support.helpers"

local function env_int(name, default)
  local s = os.getenv(name)
  if s == nil or s == "" then return default end
  local v = math.tointeger(tonumber(s))
  assert(v, name .. " must be an integer, got '" .. s .. "'")
  return v
end

local SEED = env_int("GPUREDUCE_FUZZ_SEED", 20261121)
local CASES = env_int("GPUREDUCE_FUZZ_CASES", 10000)
local ONLY = env_int("GPUREDUCE_FUZZ_ONLY", nil)
local REPORTED = 3            -- failures shown in full per group
local STATS = os.getenv("GPUREDUCE_FUZZ_STATS") == "1"   -- print what the run covered

-- counts of what the run covered (printed with GPUREDUCE_FUZZ_STATS=1)
local stats = { elements = 0, count = {} }
local function count(what, key)
  local t = stats.count[what] or {}
  stats.count[what] = t
  t[key] = (t[key] or 0) + 1
end

local function recipe(index)
  return string.format("GPUREDUCE_FUZZ_SEED=%d GPUREDUCE_FUZZ_ONLY=%d busted spec/fuzz_spec.lua", SEED, index)
end

---------------------------------------------------------------------------------------------------
-- what the fuzz draws from: the registry of this machine, the reference's ops

local function contains(list, x)
  for _, y in ipairs(list) do if y == x then return true end end
  return false
end

local DTYPES = gr.dtypes()
local OPS = {}
for _, op in ipairs(R.OP_ORDER) do
  if contains(gr.ops(), op) then OPS[#OPS + 1] = op end
end

local function needs(v, what) return contains(v.needs, what) end

-- the catalogue in teaching order (H.variants): user kernels registered by other spec files in this
-- process would change what a case index draws, so a case would not replay in a run of this file alone
local ALL_VARIANTS = H.variants()
-- per op, the variants available here that take it (the registry's v.ops): a variant is never drawn
-- for an op it does not take, streamed reductions included
local VARIANTS, STREAM_VARIANTS = {}, {}
for _, op in ipairs(OPS) do
  local list, streamed = {}, {}
  for _, v in ipairs(ALL_VARIANTS) do
    if v.available and contains(v.ops, op) then
      list[#list + 1] = v
      -- streamed reductions take a device variant with the single-pass finish
      if needs(v, "cuda") and contains(v.finishes, "single") then streamed[#streamed + 1] = v end
    end
  end
  VARIANTS[op], STREAM_VARIANTS[op] = list, streamed
end

local GPU = gr.backend() == "cuda"

-- the variants of a list that take a dtype (the registry's v.dtypes): for a dtype every variant takes,
-- the same variants in the same order, so the same draws as before the registry said
local function taking(list, dtype)
  local out = {}
  for _, v in ipairs(list) do
    if contains(v.dtypes, dtype) then out[#out + 1] = v end
  end
  return out
end

local streams = {}
local function user_stream(k)
  if not streams[k] then streams[k] = gr.stream() end
  return streams[k]
end

---------------------------------------------------------------------------------------------------
-- sizes: mostly small, biased to the edges of warps, blocks, tiles and vector widths

local SMALL_EDGES = { 0, 1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129 }
local SMALL_PRIMES = { 2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 61, 67, 97, 101, 127, 131, 251, 257, 509, 521,
  1021, 1031 }
local MID_EDGES = { 255, 256, 257, 511, 512, 513, 1023, 1024, 1025 }
local BIG_EDGES = { 2047, 2048, 2049, 4095, 4096, 4097, 2039, 2053, 4093, 4099 }
local LARGE_PRIMES = { 8191, 16381, 32749, 65521, 65537, 131071 }
local HUGE = { (1 << 18) + 1, (1 << 19) - 1, 786433, 1000003, (1 << 20) - 1, 1 << 20, (1 << 20) + 1 }

local function draw_size(rng)
  local r = rng:float()
  if r < 0.42 then return rng:pick(SMALL_EDGES) end
  if r < 0.58 then return rng:pick(SMALL_PRIMES) end
  if r < 0.74 then return rng:range(0, 300) end
  if r < 0.87 then return rng:pick(MID_EDGES) end
  if r < 0.94 then return (1 << rng:range(1, 11)) + rng:range(-1, 1) end
  if r < 0.97 then return rng:pick(BIG_EDGES) end
  if r < 0.988 then return rng:range(0, 5000) end
  if r < 0.998 then return (1 << rng:range(12, 13)) + rng:range(-1, 1) end
  if r < 0.9998 then                            -- about 18 cases in 10,000
    if rng:chance(0.5) then return rng:pick(LARGE_PRIMES) end
    return (1 << rng:range(14, 17)) + rng:range(-1, 1)
  end
  -- about 2 cases in 10,000 (the elements of a run are mostly these and the 18 above)
  return rng:pick(HUGE)
end

---------------------------------------------------------------------------------------------------
-- data. Weights of the data classes per op (an op without an entry uses `default`).

local INT_CLASSES = {
  default = { uniform = 30, small = 20, bits = 15, extremes = 15, odd = 10, zeros = 3 },
  sum = { uniform = 35, small = 20, bits = 10, extremes = 20, odd = 10, zeros = 3 },
  prod = { odd = 35, small = 25, uniform = 15, bits = 10, extremes = 15 },
  min = { uniform = 40, small = 20, extremes = 25, bits = 15 },
  max = { uniform = 40, small = 20, extremes = 25, bits = 15 },
  ["and"] = { bits = 45, small = 20, uniform = 15, extremes = 10, zeros = 10 },
  ["or"] = { bits = 45, small = 20, uniform = 15, extremes = 10, zeros = 10 },
  count = { bits = 30, small = 25, zeros = 20, uniform = 15, extremes = 10 },
  mean = { uniform = 35, small = 20, extremes = 25, bits = 10, odd = 10 },
  var = { uniform = 30, small = 25, extremes = 20, bits = 15, zeros = 5, ramp = 10 },
  std = { uniform = 30, small = 25, extremes = 20, bits = 15, zeros = 5, ramp = 10 },
  argmin = { small = 35, extremes = 30, uniform = 20, bits = 15 },
  argmax = { small = 35, extremes = 30, uniform = 20, bits = 15 },
  minmax = { small = 30, extremes = 30, uniform = 25, bits = 15 },
  sumsq = { uniform = 35, extremes = 25, small = 20, bits = 10, odd = 10 },
  nanmin = { uniform = 40, small = 20, extremes = 25, bits = 15 },
  nanmax = { uniform = 40, small = 20, extremes = 25, bits = 15 },
  -- INT_MIN and the other extremes often: their magnitude is where absmax and asum can go wrong
  absmax = { extremes = 35, bits = 25, uniform = 20, small = 20 },
  asum = { uniform = 30, extremes = 30, bits = 15, small = 15, odd = 10 },
}
local FLOAT_CLASSES = {
  default = { uniform = 30, exact = 15, cancel = 10, wide = 15, extremes = 10, bits = 10, small = 10 },
  sum = { uniform = 30, exact = 20, cancel = 12, wide = 15, extremes = 8, bits = 5, small = 5, zeros = 2 },
  prod = { prodsafe = 60, uniform = 10, wide = 10, extremes = 10, bits = 10 },
  min = { uniform = 30, wide = 20, extremes = 20, bits = 10, small = 10, exact = 10 },
  max = { uniform = 30, wide = 20, extremes = 20, bits = 10, small = 10, exact = 10 },
  ["and"] = { bits = 50, small = 15, uniform = 15, extremes = 10, zeros = 10 },
  ["or"] = { bits = 50, small = 15, uniform = 15, extremes = 10, zeros = 10 },
  count = { bits = 30, small = 20, zeros = 20, uniform = 15, extremes = 15 },
  mean = { uniform = 30, exact = 20, cancel = 10, wide = 10, extremes = 10, offset = 10, small = 10 },
  nanmean = { uniform = 30, exact = 20, cancel = 10, wide = 10, extremes = 10, offset = 10, small = 10 },
  var = { uniform = 25, offset = 25, small = 15, wide = 10, extremes = 5, exact = 10, scaled = 10 },
  std = { uniform = 25, offset = 25, small = 15, wide = 10, extremes = 5, exact = 10, scaled = 10 },
  argmin = { small = 35, extremes = 25, uniform = 20, bits = 10, zeros = 10 },
  argmax = { small = 35, extremes = 25, uniform = 20, bits = 10, zeros = 10 },
  minmax = { small = 25, extremes = 25, uniform = 25, wide = 15, bits = 10 },
  sumsq = { uniform = 25, scaled = 25, wide = 15, extremes = 15, exact = 10, small = 10 },
  norm = { uniform = 20, scaled = 35, wide = 20, extremes = 15, small = 10 },
  nansum = { uniform = 30, exact = 20, cancel = 12, wide = 15, extremes = 8, bits = 5, small = 10 },
  nanmin = { uniform = 30, wide = 20, extremes = 20, bits = 10, small = 10, exact = 10 },
  nanmax = { uniform = 30, wide = 20, extremes = 20, bits = 10, small = 10, exact = 10 },
  absmax = { uniform = 30, wide = 20, extremes = 20, bits = 10, small = 10, zeros = 10 },
  asum = { uniform = 30, exact = 20, cancel = 10, wide = 15, extremes = 10, bits = 5, small = 5, zeros = 5 },
}
-- chance that zeros (0, or 0.0 / -0.0) are dropped in, and that float specials are
local ZERO_CHANCE = { default = 0.1, ["and"] = 0.5, ["or"] = 0.5, count = 0.5, argmin = 0.3, argmax = 0.3,
  absmax = 0.3, asum = 0.3 }
local SPECIAL_CHANCE = { default = 0.15, prod = 0.25, min = 0.2, max = 0.2, ["and"] = 0.2, ["or"] = 0.2,
  argmin = 0.3, argmax = 0.3, minmax = 0.25, nansum = 0.5, nanmin = 0.5, nanmax = 0.5, nanmean = 0.5,
  absmax = 0.3, asum = 0.3 }
-- the specials dropped in: NaN more often for the ops that skip it
local NAN_HEAVY = { nansum = true, nanmin = true, nanmax = true, nanmean = true }

local function by_op(t, op) local v = t[op]; if v == nil then v = t.default end return v end

local INT_BITS = { 1, 2, 3, 4, 5, 8, 0x10, 0x20, 0x40, 0x7f, 0x80, 0x81, 0xfe, 0xff, 0x100, 0x4000, 0x8000,
  0x10000, 0x40000000, 0x7fffffff, 0x80000000, 0xffffffff, 0x100000000, 1 << 62, math.mininteger,
  math.maxinteger, -1, -2, -127, -128, -0x8000, -0x80000000, 0x5555555555555555, 0xAAAAAAAAAAAAAAAA }

local function int_lists(dtype)
  local d = R.DTYPES[dtype]
  local bits, ext = {}, {}
  for _, v in ipairs(INT_BITS) do if R.fits(dtype, v) then bits[#bits + 1] = v end end
  if dtype == "uint64" then
    ext = { 0, 1, -1, -2, math.mininteger, math.maxinteger }      -- 2^64-1, 2^64-2, 2^63, 2^63-1
  else
    ext = { d.min, d.max, d.min + 1, d.max - 1, 0, 1 }
    if d.kind == "int" then ext[#ext + 1] = -1 end
  end
  return bits, ext
end
local INT_LISTS = {}
for _, dtype in ipairs(DTYPES) do
  if not R.is_float(dtype) then INT_LISTS[dtype] = { int_lists(dtype) } end
end

local INT_GEN = {
  uniform = function(rng, dtype, n, v)
    for i = 1, n do v[i] = rng:int(dtype) end
    return "uniform over the dtype"
  end,
  small = function(rng, dtype, n, v)
    local lo, hi = -8, 8
    if R.DTYPES[dtype].kind == "uint" then lo, hi = 0, 16 end
    for i = 1, n do v[i] = rng:range(lo, hi) end
    return string.format("small [%d, %d]", lo, hi)
  end,
  bits = function(rng, dtype, n, v)
    local bits = INT_LISTS[dtype][1]
    for i = 1, n do v[i] = rng:pick(bits) end
    return "distinct bits (1, 2, 4, 0x80, -1, -128, ...)"
  end,
  extremes = function(rng, dtype, n, v)
    local ext = INT_LISTS[dtype][2]
    for i = 1, n do v[i] = rng:pick(ext) end
    return "extremes (min, max, 0, +-1)"
  end,
  odd = function(rng, dtype, n, v)
    for i = 1, n do v[i] = rng:int(dtype) | 1 end
    return "odd, uniform"
  end,
  zeros = function(_, _, n, v)
    for i = 1, n do v[i] = 0 end
    return "all zero"
  end,
  ramp = function(rng, dtype, n, v)
    -- start + k * step (wrapping like the dtype): sorted runs whose partial means differ, for var's combine
    local d = R.DTYPES[dtype]
    local step = rng:pick({ 1, 3, -1, 1000 })
    local start = rng:int(dtype)
    for i = 1, n do
      local x = start + (i - 1) * step
      if d.kind == "int" and d.min ~= math.mininteger then       -- 64-bit ones wrap by themselves
        local span = d.max - d.min + 1
        x = (x - d.min) % span + d.min
      elseif d.kind == "uint" and d.max ~= -1 then
        x = x % (d.max + 1)
      end
      v[i] = x
    end
    return string.format("ramp from %d by %d (wrapping)", start, step)
  end,
}

local function float_specials(F)
  return {
    -- (float8_e4m3 has no infinity: its largest finite values stand in for them)
    nan = 0 / 0, pinf = F.no_inf and F.max or math.huge, ninf = F.no_inf and -F.max or -math.huge, negzero = -0.0,
    zero = 0.0, max = F.max, negmax = -F.max,
    denorm = F.denorm_min, negdenorm = -F.denorm_min, min_normal = F.min_normal,
  }
end
local SPECIAL_WEIGHTS = { nan = 2, pinf = 2, ninf = 2, negzero = 2, zero = 1, max = 1, negmax = 1, denorm = 1,
  negdenorm = 1, min_normal = 1 }
local NAN_SKIP_WEIGHTS = { nan = 12, pinf = 1, ninf = 1, negzero = 1, zero = 1, max = 1, negmax = 1, denorm = 1,
  negdenorm = 1, min_normal = 1 }

local FLOAT_GEN = {
  uniform = function(rng, dtype, n, v, F)
    local k = dtype == "float32" and rng:range(-30, 30) or rng:range(-300, 300)
    local positive = rng:chance(0.3)
    local p, scale = F.p, 2.0 ^ (k - F.p)
    for i = 1, n do
      local z = rng:next()
      local m = z >> (64 - p)                   -- p random bits: representable by construction
      if not positive and z & 1 == 1 then m = -m end
      v[i] = m * scale
    end
    return string.format("uniform in (%s2^%d, 2^%d)", positive and "0, " or "-", k, k)
  end,
  small = function(rng, _, n, v)
    for i = 1, n do v[i] = rng:range(-4, 4) + 0.0 end
    return "small integers [-4, 4]"
  end,
  exact = function(rng, dtype, n, v, F)
    local cap = dtype == "float32" and (1 << 20) or (1 << 40)
    local K = math.max(1, math.min(cap, ((1 << F.p) - 1) // math.max(n, 1)))
    local s = rng:range(-20, 20)
    local scale = 2.0 ^ s
    for i = 1, n do v[i] = rng:range(-K, K) * scale end
    return string.format("integers in [-%d, %d] times 2^%d (exact sums)", K, K, s), scale
  end,
  cancel = function(rng, dtype, n, v, F)
    local k = dtype == "float32" and rng:range(-20, 20) or rng:range(-200, 200)
    local p, scale = F.p, 2.0 ^ (k - F.p)
    local half = n // 2
    for i = 1, half do
      local z = rng:next()
      local m = z >> (64 - p)
      if z & 1 == 1 then m = -m end
      v[i] = m * scale
      v[half + i] = -v[i]
    end
    if n > 2 * half then v[n] = rng:range(-1000, 1000) * 2.0 ^ (k - 20) end
    for i = n, 2, -1 do                         -- Fisher-Yates
      local j = rng:range(1, i)
      v[i], v[j] = v[j], v[i]
    end
    return string.format("pairs x, -x (|x| < 2^%d), shuffled", k)
  end,
  wide = function(rng, dtype, n, v, F)
    local lo, hi = -149, 127
    if dtype == "float64" then lo, hi = -1074, 1023 end
    local what = "every binade"
    if rng:chance(0.5) then
      local c = rng:range(lo, hi)
      lo, hi = math.max(lo, c - 40), math.min(hi, c + 40)
      what = string.format("binades 2^%d .. 2^%d", lo, hi)
    end
    local p = F.p
    local top, unit = 1 << (p - 1), 2.0 ^ (1 - p)
    for i = 1, n do
      local z = rng:next()
      local m = (z >> (65 - p)) | top           -- a normal mantissa in [2^(p-1), 2^p)
      local x = (m * unit) * 2.0 ^ rng:range(lo, hi)   -- in [1, 2) * 2^e: one rounding (subnormals)
      if dtype == "float32" then x = R.to_f32(x) end
      if z & 1 == 1 then x = -x end
      v[i] = x
    end
    return what .. ", random mantissas"
  end,
  extremes = function(rng, _, n, v, F)
    local list = { F.max, -F.max, F.min_normal, -F.min_normal, F.denorm_min, -F.denorm_min, 0.0, -0.0, 1.0, -1.0,
      F.max / 2, 1 - F.u, 1 + 2 * F.u }
    for i = 1, n do v[i] = rng:pick(list) end
    return "extremes (max, min normal, smallest subnormal, +-0, +-1)"
  end,
  bits = function(rng, _, n, v, F, op)
    local list = { 1.0, 2.0, 4.0, 64.0, 128.0, -1.0, -128.0, 0.5, -0.5, 3.0, 0.25, F.denorm_min, -F.denorm_min,
      F.min_normal }
    if op == "and" or op == "or" then
      list[#list + 1] = 0 / 0
      list[#list + 1] = math.huge
      list[#list + 1] = -math.huge
    end
    for i = 1, n do v[i] = rng:pick(list) end
    return "distinct bits (1, 2, 4, 0x80, -1, -128, 0.5, subnormal" .. ((op == "and" or op == "or") and ", NaN, inf)" or ")")
  end,
  prodsafe = function(rng, dtype, n, v, F)
    -- (2^(p-1) + d) 2^(1-p) with |d| <= D: |ln x| <= 1.39 D / 2^(p-1), so the product of n of them stays
    -- within e^(+-1.39 budget): 2^+-120 for float32, 2^+-800 for float64
    local budget = dtype == "float32" and 60 or 400
    local p = F.p
    local half = 1 << (p - 1)
    local D = math.floor(math.min(half / 2, half * budget / math.max(n, 1)))
    local unit = 2.0 ^ (1 - p)
    local negative = rng:chance(0.5) and 0.3 or 0
    for i = 1, n do
      local x = (half + rng:range(-D, D)) * unit
      if negative > 0 and rng:chance(negative) then x = -x end
      v[i] = x
    end
    return string.format("near 1: |x| in [1 - %.3g, 1 + %.3g]%s", D * unit, D * unit, negative > 0 and ", some negative" or "")
  end,
  zeros = function(rng, _, n, v)
    for i = 1, n do v[i] = rng:chance(0.5) and -0.0 or 0.0 end
    return "all zero (0.0 and -0.0)"
  end,
  offset = function(rng, dtype, n, v, F)
    -- a large offset plus small noise: what one-pass variance formulas cancel away
    local big = dtype == "float32" and rng:pick({ 1e3, 1e4, -3e4 }) or rng:pick({ 1e8, -1e9, 3e12 })
    local noise = dtype == "float32" and 2.0 ^ rng:range(-6, 4) or 2.0 ^ rng:range(-8, 6)
    for i = 1, n do
      local x = big + (rng:float() * 2 - 1) * noise
      if dtype == "float32" then x = R.to_f32(x) end
      v[i] = x
    end
    return string.format("offset %.6g plus noise within %.3g", big, noise)
  end,
  scaled = function(rng, dtype, n, v, F)
    -- magnitudes whose squares overflow or underflow the format, or nearly; and magnitudes around the
    -- thresholds of Blue's scaled sums of squares (norm: 2^52 and 2^-63 for float32, 2^486 and 2^-511
    -- for float64), where two of its accumulators contribute
    local band = dtype == "float32" and rng:pick({ { 60, 127 }, { -149, -60 }, { 46, 57 }, { -69, -57 } })
      or rng:pick({ { 500, 1023 }, { -1074, -500 }, { 478, 493 }, { -518, -505 } })
    local lo, hi = band[1], band[2]
    local p = F.p
    local top, unit = 1 << (p - 1), 2.0 ^ (1 - p)
    for i = 1, n do
      local z = rng:next()
      local m = (z >> (65 - p)) | top
      local x = (m * unit) * 2.0 ^ rng:range(lo, hi)
      if dtype == "float32" then x = R.to_f32(x) end
      if x == math.huge then x = F.max end
      if z & 1 == 1 then x = -x end
      v[i] = x
    end
    return string.format("magnitudes 2^%d .. 2^%d (squares overflow or underflow)", lo, hi)
  end,
}

local function gen_data(rng, dtype, op, n)
  local float = R.is_float(dtype)
  local F = float and R.DTYPES[dtype].fmt
  local weights = by_op(float and FLOAT_CLASSES or INT_CLASSES, op)
  local class = rng:weighted(weights)
  -- a float64 "wide" expansion can be 40 doubles long: keep that class to moderate sizes
  if class == "wide" and dtype == "float64" and n > 5000 then class = "uniform" end
  local v = {}
  local gen = (float and FLOAT_GEN or INT_GEN)[class]
  -- the 16-bit formats: float32's classes, each value rounded once into the format and the ones beyond
  -- it held at its largest finite value (a multiple of 2^s stays one: the hint holds)
  local small = R.DTYPES[dtype].small
  local what, exact_scale = gen(rng, small and "float32" or dtype, n, v, small and R.F32 or F, op)
  if small then
    for i = 1, n do v[i] = R.to_dtype(dtype, v[i]) or (v[i] < 0 and -F.max or F.max) end
  end
  local desc = { class .. ": " .. what }
  local function zero() return float and (rng:chance(0.5) and -0.0 or 0.0) or 0 end
  if n > 0 and rng:chance(by_op(ZERO_CHANCE, op)) then
    local kind = rng:weighted({ one = 6, few = 3, all_but_one = 1 })
    if kind == "one" then
      local at = rng:range(1, n)
      v[at] = zero()
      desc[#desc + 1] = string.format("one zero at [%d] (%s)", at, R.fmt_short(v[at]))
    elseif kind == "few" then
      local at = {}
      for _ = 1, rng:range(2, 5) do
        local i = rng:range(1, n)
        v[i] = zero()
        at[#at + 1] = i
      end
      desc[#desc + 1] = "zeros at [" .. table.concat(at, ", ") .. "]"
    else
      for i = 1, n do v[i] = zero() end
      local at = rng:range(1, n)
      v[at] = float and rng:pick({ 1.0, -2.0, 0.5, F.denorm_min, 0 / 0 }) or rng:pick(INT_LISTS[dtype][1])
      desc[#desc + 1] = string.format("all zero but [%d] = %s", at, R.fmt_short(v[at]))
    end
  end
  if float and n > 0 and rng:chance(by_op(SPECIAL_CHANCE, op)) then
    local S = float_specials(F)
    local count = rng:chance(0.1) and math.max(1, n // 10) or rng:range(1, 3)
    local weights = SPECIAL_WEIGHTS
    if NAN_HEAVY[op] then
      weights = NAN_SKIP_WEIGHTS
      if rng:chance(0.1) then count = n end    -- all (or nearly all) NaN
    end
    local put = {}
    for _ = 1, count do
      local name = rng:weighted(weights)
      local at = rng:range(1, n)
      v[at] = S[name]
      if #put < 8 then put[#put + 1] = string.format("%s at [%d]", name, at) end
    end
    desc[#desc + 1] = string.format("%d special(s): %s%s", count, table.concat(put, ", "), count > 8 and ", ..." or "")
  end
  R.boolify(dtype, v)                           -- bool: the drawn values that are not 0 become 1
  for i = 1, n do                               -- never store a value the module would reject or change
    if not R.fits(dtype, v[i]) then
      error(string.format("fuzz bug: generated %s at [%d] does not fit %s (%s)", R.fmt(v[i]), i, dtype, desc[1]))
    end
  end
  return v, table.concat(desc, "; "), exact_scale
end

-- Values around a slice: ones that change the result if a reduction reads outside its view.
local POISON = {
  sum = function(dtype) return R.is_float(dtype) and 0 / 0 or 0x5A end,
  prod = function(dtype) return R.is_float(dtype) and 0 / 0 or 0 end,
  min = function(dtype)
    if R.is_float(dtype) then return -math.huge end
    return dtype == "uint64" and 0 or R.DTYPES[dtype].min
  end,
  max = function(dtype)
    if R.is_float(dtype) then return math.huge end
    return R.DTYPES[dtype].max
  end,
  ["and"] = function(dtype) return R.is_float(dtype) and 0.0 or 0 end,
  ["or"] = function(dtype) return R.is_float(dtype) and 1.0 or 1 end,
  default = function(dtype) return R.is_float(dtype) and 0 / 0 or 0x5A end,
  -- the NaN-skipping ops ignore a NaN: poison them with values they would take
  nansum = function(dtype) return R.is_float(dtype) and (R.DTYPES[dtype].small and 0x1p8 or 0x1p20) or 0x5A end,
  nanmean = function(dtype) return R.is_float(dtype) and (R.DTYPES[dtype].small and 0x1p8 or 0x1p20) or 0x5A end,
  nanmin = function(dtype)
    if R.is_float(dtype) then return -math.huge end
    return dtype == "uint64" and 0 or R.DTYPES[dtype].min
  end,
  nanmax = function(dtype)
    if R.is_float(dtype) then return math.huge end
    return R.DTYPES[dtype].max
  end,
  argmin = function(dtype)
    if R.is_float(dtype) then return 0 / 0 end
    return dtype == "uint64" and 0 or R.DTYPES[dtype].min
  end,
  argmax = function(dtype)
    if R.is_float(dtype) then return 0 / 0 end
    return R.DTYPES[dtype].max
  end,
}

---------------------------------------------------------------------------------------------------
-- options

local function draw_block(rng, v)
  local b = v.block
  if b.min == b.max then return b.min end
  if needs(v, "power-of-two block") then
    local list, x = {}, 1
    while x <= b.max do
      if x >= b.min then list[#list + 1] = x end
      x = x * 2
    end
    return rng:pick(list)
  end
  return rng:range(b.min, b.max)
end

local function draw_threshold(rng)
  local r = rng:below(6)
  if r == 0 then return 1 elseif r == 1 then return 2 elseif r == 2 then return rng:range(1, 64)
  elseif r == 3 then return rng:range(1, 5000) elseif r == 4 then return rng:range(4000, 70000) end
  return 1 << 40
end

-- the ops that take acc = "float64" on float32 data besides sum and prod (sum-like and float results)
local WIDENS = { mean = true, var = true, std = true, sumsq = true, norm = true, nansum = true, nanmean = true }

-- acc: sometimes float64 for float32 sums/products, sometimes the natural accumulator named explicitly
-- (float16 and bfloat16 accumulate in float32 like float32 data, and may take float64 alike)
local function draw_acc(rng, dtype, op)
  local f32acc = dtype == "float32" or R.DTYPES[dtype].small
  if WIDENS[op] then
    if f32acc and rng:chance(0.35) then return "float64" end
    if R.is_float(dtype) and rng:chance(0.03) then return f32acc and "float32" or dtype end
    return nil
  end
  if op == "sum" or op == "prod" then
    if f32acc then
      local r = rng:float()
      if r < 0.3 then return "float64" elseif r < 0.35 then return "float32" end
    elseif dtype == "float64" then
      if rng:chance(0.05) then return "float64" end
    elseif rng:chance(0.05) then
      return rng:pick({ "int64", "uint64" })
    end
  elseif op == "min" or op == "max" then
    if rng:chance(0.03) then return dtype end
  elseif op == "and" or op == "or" then
    if rng:chance(0.03) then return "uint8" end
  end
  return nil
end

local CHUNKS = { 4096, 4097, 4100, 8192, 12345, 65536, 1 << 20 }

---------------------------------------------------------------------------------------------------
-- one case

local function draw_head(rng)
  local dtype = rng:pick(DTYPES)
  local op = rng:pick(OPS)
  return dtype, op
end

local function show_values(values, dtype, limit)
  local n = #values
  local parts = {}
  for i = 1, math.min(n, limit) do parts[i] = R.fmt_short(values[i], dtype) end
  local s = "{ " .. table.concat(parts, ", ") .. (n > limit and ", ... }" or " }")
  return string.format("%s (%d %s)", s, n, n == 1 and "value" or "values")
end

local function first_difference(a, b)
  if #a ~= #b then return string.format("length %d -> %d", #a, #b) end
  for i = 1, #a do
    if a:byte(i) ~= b:byte(i) then return string.format("byte %d: 0x%02x -> 0x%02x", i, a:byte(i), b:byte(i)) end
  end
  return "?"
end

local function reduce(b, opts)
  if opts.async then
    local p = gr.reduce(b, opts)
    local v, w = p:wait()
    p:free()
    return v, w
  end
  return gr.reduce(b, opts)
end

local A = require "support.axes_reference"

--- An axis case's layout for n values: a shape of 2 or 3 axes whose product is n (an axis of 1 where n
-- has no small factor), maybe permuted, and the axes reduced (one, negative or not, or a list) with or
-- without keepdims.
local function draw_axis_case(rng, n)
  local small = {}
  for f = 2, 64 do if n % f == 0 and f < n then small[#small + 1] = f end end
  local shape
  local a = #small > 0 and rng:pick(small) or 1
  if rng:chance(0.5) then
    local rest = n // a
    local inner = {}
    for f = 2, 16 do if rest % f == 0 and f < rest then inner[#inner + 1] = f end end
    local b = #inner > 0 and rng:pick(inner) or 1
    shape = { a, rest // b, b }
  else
    shape = rng:chance(0.5) and { a, n // a } or { n // a, a }
  end
  local nd = #shape
  local perm
  if rng:chance(0.4) then
    perm = {}
    for d = 1, nd do perm[d] = d end
    for d = nd, 2, -1 do
      local j = rng:range(1, d)
      perm[d], perm[j] = perm[j], perm[d]
    end
  end
  local axis
  local k = rng:below(4)
  if k == 0 then axis = rng:range(1, nd)
  elseif k == 1 then axis = -rng:range(1, nd)
  elseif k == 2 then axis = { 1, nd }
  else
    axis = {}
    for d = 1, nd do axis[d] = d end
  end
  return { shape = shape, perm = perm, axis = axis, keepdims = rng:chance(0.3) }
end

--- The axis reduction of case c over `view` (compact, holding `values`) checked against the reference:
-- a list of problems, empty when it agrees.
local function check_axes(c, opts, values, exact_scale, view)
  local x = c.axes
  local v = view:view(x.shape)
  local ref = A.compact(values, x.shape)
  if x.perm then
    v = v:permute(x.perm)
    ref = A.permute(ref, x.perm)
  end
  local ao = { op = c.op, acc = opts.acc, ddof = opts.ddof, axis = x.axis, keepdims = x.keepdims }
  local ok, r1, r2 = pcall(gr.reduce, v, ao)
  if not ok then return { "along axes: raised " .. tostring(r1) } end
  local axes = assert(A.normalize(x.axis, #x.shape))
  local groups = A.groups(ref, axes)
  local t1, t2 = r1:totable(1), r2 and r2:totable(1)
  local shape = A.result_shape(ref.shape, axes, x.keepdims)
  if table.concat(r1:shape(), ",") ~= table.concat(shape, ",") then
    return { string.format("along axes: result shape {%s}, expected {%s}", table.concat(r1:shape(), ","),
      table.concat(shape, ",")) }
  end
  for g, group in ipairs(groups) do
    local got = t1[g]
    if c.op == "and" or c.op == "or" then got = got == 1 end
    local e = R.expect(c.op, group, { dtype = c.dtype, acc = opts.acc, exact_scale = exact_scale, ddof = opts.ddof })
    local good, why = R.check(c.op, true, got, e, t2 and t2[g])
    if not good then
      return { string.format("along axes: output %d of %d (%d values): %s; expected %s", g, #groups, #group, why,
        e.text) }
    end
  end
  return {}
end

--- Runs case `index`; returns nil when it passes, else the report (a string).
local function run_case(index)
  local seed = R.case_seed(SEED, index)
  local rng = R.rng(seed)                       -- the case's parameters
  local drng = R.rng(seed ~ 0x5DEECE66D)        -- its data: a stream of its own
  local c = { index = index }
  c.dtype, c.op = draw_head(rng)
  c.n = draw_size(rng)
  local opts = { op = c.op }
  local variant                                  -- the registry entry, nil for auto
  c.streamed = rng:chance(0.08)
  if c.streamed then
    c.where = "host"
    opts.streamed = true
    if rng:chance(0.8) then opts.chunk = rng:pick(CHUNKS) end
    if rng:chance(0.8) then opts.streams = rng:range(1, 4) end
    local f = rng:below(3)
    if f == 1 then opts.finish = "auto" elseif f == 2 then opts.finish = "single" end
    -- a device variant with the single finish that takes the op, or auto; the CPU backend takes no
    -- variant option
    local candidates = taking(STREAM_VARIANTS[c.op], c.dtype)
    if GPU and #candidates > 0 and rng:chance(0.6) then
      variant = rng:pick(candidates)
      opts.variant = variant.name
      if rng:chance(0.5) then opts.block = draw_block(rng, variant) end
    elseif GPU and rng:chance(0.2) then
      opts.variant = "auto"
    end
  else
    c.where = "device"
    local candidates = taking(VARIANTS[c.op], c.dtype)
    local k = rng:below(#candidates + 1)
    if k > 0 then
      variant = candidates[k]
      opts.variant = variant.name
      if rng:chance(0.5) then opts.block = draw_block(rng, variant) end
    elseif rng:chance(0.5) then
      opts.variant = "auto"
    end
    if rng:chance(0.2) then
      opts.async = true
      if rng:chance(0.5) then
        c.stream = rng:range(1, 2)
        opts.stream = user_stream(c.stream)
      end
    end
  end
  opts.acc = draw_acc(rng, c.dtype, c.op)
  if (c.op == "var" or c.op == "std") and rng:chance(0.5) then opts.ddof = rng:pick({ 0, 1, 1, 2, 5 }) end
  if rng:chance(0.35) then c.pad_lo, c.pad_hi = rng:range(1, 17), rng:range(0, 9) end
  c.from_table = not c.pad_lo and rng:chance(0.5)

  local values, data_desc, exact_scale = gen_data(drng, c.dtype, c.op, c.n)
  c.data = data_desc

  -- the buffer: gr.buffer(table), or a zeroed buffer then set, or a slice of a poisoned parent
  local where = { where = c.where }
  local parent, view
  if c.pad_lo then
    parent = gr.buffer(c.pad_lo + c.n + c.pad_hi, c.dtype, where)
    local pv = R.boolify(c.dtype, { by_op(POISON, c.op)(c.dtype) })[1]
    if R.is_float(c.dtype) and R.to_dtype(c.dtype, pv) == nil then     -- float8_e4m3's infinities: none
      pv = pv < 0 and -R.DTYPES[c.dtype].fmt.max or R.DTYPES[c.dtype].fmt.max
    end
    parent:fill(pv)
    if c.n > 0 then parent:set(values, c.pad_lo + 1) end
    view = parent:slice(c.pad_lo + 1, c.n)
  elseif c.from_table then
    parent = gr.buffer(values, c.dtype, where)
    view = parent
  else
    parent = gr.buffer(c.n, c.dtype, where)
    if c.n > 0 then parent:set(values) end
    view = parent
  end

  -- the finishing mode: one of the variant's (for auto: of the variant auto picks here)
  if not c.streamed then
    local finishes = variant and variant.finishes or gr.variant(gr.plan(view, { op = c.op }).variant).finishes
    local r = rng:below(#finishes + 2)
    if r == 1 then opts.finish = "auto" elseif r > 1 then opts.finish = finishes[r - 1] end
    if opts.finish == "hybrid" and rng:chance(0.85) then opts.threshold = draw_threshold(rng) end
  end

  -- a fifth of the synchronous cases also reduce the values as an N-d view along drawn axes (from a
  -- stream of their own, so that the other draws stay as they were)
  local arng = R.rng(seed ~ 0x243F6A88)
  if not c.streamed and not opts.async and c.n > 0 and arng:chance(0.2) then c.axes = draw_axis_case(arng, c.n) end

  local before = parent:tobytes()
  local ok, got, got2 = pcall(reduce, view, opts)
  local axis_problems = c.axes and check_axes(c, opts, values, exact_scale, view) or {}
  local after = parent:tobytes()
  if view ~= parent then view:free() end
  parent:free()

  local e = R.expect(c.op, values, { dtype = c.dtype, acc = opts.acc, exact_scale = exact_scale, ddof = opts.ddof })
  if STATS then
    stats.elements = stats.elements + c.n
    count("expectation", (R.is_float(c.dtype) and "float " or "int ") .. c.op .. ": " .. e.kind)
    count("data class", (R.is_float(c.dtype) and "float " or "int ") .. c.data:match("^[%w_]+"))
    count("variant", (opts.variant or "(none)") .. " finish=" .. tostring(opts.finish))
    count("mode", (c.streamed and "streamed" or opts.async and "async" or "sync") .. (c.pad_lo and ", slice" or "")
      .. (c.axes and ", and along axes" or ""))
  end
  local good, why = R.check(c.op, ok, got, e, got2)
  local problems = {}
  if not good then problems[#problems + 1] = why end
  for _, p in ipairs(axis_problems) do problems[#problems + 1] = p end
  if before ~= after then problems[#problems + 1] = "the reduction wrote to its input: " .. first_difference(before, after) end
  if #problems == 0 and not ONLY then return nil end

  local layout
  if c.pad_lo then
    layout = string.format("a slice at element %d of a %s buffer of %d (%d poison elements before, %d after)",
      c.pad_lo + 1, c.where, c.pad_lo + c.n + c.pad_hi, c.pad_lo, c.pad_hi)
  else
    layout = string.format("a whole %s buffer, made by %s", c.where, c.from_table and "gr.buffer(table)" or "b:set(table)")
  end
  local lines = {
    string.format("case %d of seed %d: %s %s, n = %d -- %s", index, SEED, c.dtype, c.op, c.n,
      #problems == 0 and "passed" or table.concat(problems, "; ")),
    "  options:  gr.reduce(b, " .. H.describe_opts(opts) .. ")",
    "  buffer:   " .. layout,
    c.axes and string.format("  axes:     as shape {%s}%s, axis %s%s", table.concat(c.axes.shape, ", "),
      c.axes.perm and (", permuted {" .. table.concat(c.axes.perm, ", ") .. "}") or "",
      type(c.axes.axis) == "table" and ("{" .. table.concat(c.axes.axis, ", ") .. "}") or tostring(c.axes.axis),
      c.axes.keepdims and ", keepdims" or "") or "  axes:     (not an axis case)",
    "  data:     " .. c.data,
    "  values:   " .. show_values(values, c.dtype, ONLY and 4096 or 16),
    "  expected: " .. e.text,
    "  got:      " .. (ok and R.fmt(got, c.dtype) .. " (" .. (math.type(got) or type(got)) .. ")"
      .. (got2 ~= nil and ", " .. R.fmt(got2, c.dtype) .. " (" .. (math.type(got2) or type(got2)) .. ")" or "")
      or "error: " .. tostring(got)),
    "  re-run:   " .. recipe(index),
  }
  local report = table.concat(lines, "\n")
  if #problems == 0 then
    print("\n" .. report)
    return nil
  end
  return report
end

---------------------------------------------------------------------------------------------------
-- the plan of the run: each case's (dtype, op) is its stream's first two draws

local groups, planned = {}, 0
do
  local first, last = 1, CASES
  if ONLY then first, last = ONLY, ONLY end
  for i = first, last do
    local dtype, op = draw_head(R.rng(R.case_seed(SEED, i)))
    local key = dtype .. " " .. op
    groups[key] = groups[key] or {}
    table.insert(groups[key], i)
    planned = planned + 1
  end
end

-- ran: cases run; due: the cases of the groups that ran (make test splits the groups over two busted
-- processes, so a process runs only part of the plan: each checks its own part, the summary adds them)
local ran, due, failed = 0, 0, 0

describe(string.format("differential fuzz (seed %d, %d cases, backend %s)", SEED, planned, gr.backend()), function()
  for _, dtype in ipairs(DTYPES) do
    for _, op in ipairs(OPS) do
      local list = groups[dtype .. " " .. op] or {}
      it(string.format("%s %s: %d cases agree with the reference", dtype, op, #list), function()
        local reports = {}
        due = due + #list
        for _, index in ipairs(list) do
          local ok, report = xpcall(run_case, debug.traceback, index)
          if not ok then
            report = string.format("case %d of seed %d: the fuzz itself failed: %s\n  re-run:   %s", index, SEED,
              tostring(report), recipe(index))
          end
          ran = ran + 1
          if report then reports[#reports + 1] = { index = index, text = report } end
        end
        failed = failed + #reports
        if #reports > 0 then
          local shown, indices = {}, {}
          for k, r in ipairs(reports) do
            if k <= REPORTED then shown[#shown + 1] = r.text end
            if k <= 40 then indices[#indices + 1] = tostring(r.index) end
          end
          assert(false, string.format("%s %s: %d of %d cases failed (cases %s%s)\n%s", dtype, op, #reports, #list,
            table.concat(indices, ", "), #reports > 40 and ", ..." or "", table.concat(shown, "\n")))
        end
      end)
    end
  end

  it("has a reference for every op of the engine", function()
    local missing = {}
    for _, op in ipairs(gr.ops()) do
      if not R.OPS[op] then missing[#missing + 1] = op end
    end
    assert(#missing == 0, "ops without a reference in spec/support/fuzz_reference.lua: " .. table.concat(missing, ", "))
  end)

  it(string.format("ran every case of the groups it ran (%d cases planned in all)", planned), function()
    assert(ran == due, string.format("ran %d of the %d cases of its groups", ran, due))
  end)

  teardown(function()
    if STATS then
      print(string.format("\nfuzz stats: %d elements", stats.elements))
      local whats = {}
      for what in pairs(stats.count) do whats[#whats + 1] = what end
      table.sort(whats)
      for _, what in ipairs(whats) do
        local keys = {}
        for k in pairs(stats.count[what]) do keys[#keys + 1] = k end
        table.sort(keys)
        for _, k in ipairs(keys) do print(string.format("  %-12s %-40s %6d", what, k, stats.count[what][k])) end
      end
    end
    print(string.format("\nfuzz: %d cases, seed %d, %d failures", ran, SEED, failed))
  end)
end)
