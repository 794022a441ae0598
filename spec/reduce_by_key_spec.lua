--[[
reduce_by_key_spec.lua -- reductions by key: `keys, results = gr.reduce_by_key(k, v, {op = ...})`, checked
against a reference written here.

The reference
  Groups v's elements by their key, each group in v's order, and sorts the distinct keys (signed dtypes as
  signed numbers, uint64 unsigned, bool false before true). Each group's result is checked by the per-op
  reference of spec/support/fuzz_reference.lua and ops_reference.lua, which never calls the engine: exact
  for integers and where every partial sum of the floats is exact (small multiples of 0.5), within a bound
  valid for every summation order for other floats. argmin/argmax indices are checked as the element's
  1-based position in v (the first one wins a tie). Result dtypes are written out here from the table of
  segmented results in docs/api.md. Besides, where the spec allows one engine-against-engine check, a call
  is compared bit for bit with gr.reduce(v2, {op = op, offsets = o}) over the values grouped by key
  (stably): everywhere for integers, counts, argmin/argmax and gpu_to_gpu; on the device the other ops
  come from one pass over runs of keys, whose order is its own: float sums and moments (and int64's) are
  checked against the reference's bound and for the same bits run to run, with and without sorted, and
  float extremes as numbers (which NaN or which zero is kept depends on the order).

What runs
  - every key dtype with float32 values (sum, min, argmax) over every key distribution -- 40 keys, a
    Zipf-like skew over 300, one key, every key distinct, the dtype's extremes -- laid out shuffled, in
    runs of equal keys (not ascending) and ascending, with and without sorted = true;
  - every value dtype with int32 keys, every op of the reference, over values of the dtype's range and
    small values with NaN, infinities, -0.0 or the integer limits placed in;
  - sizes 0 (empty buffers), 1, one key, every key distinct, skew, int64/uint64 keys at their extremes,
    strided views and unaligned slices, 2^20 elements on the GPU;
  - the two-result ops, opts.ops (each entry the single call's bytes), count, user operators (their
    kernels on the GPU, their cpu functions on host buffers), sorted, out, determinism (run_to_run: the
    same bits on repeated calls and on data re-interleaved with each key's values unchanged; gpu_to_gpu:
    each key's sum that of gr.reduce over the key's values at gpu_to_gpu), the two backends (a child on
    the cpu backend gives the GPU's bits where they are exact), the errors, and a fuzz.
  Host buffers run everywhere (on the cpu backend everything runs on the host); device buffers only with
  a CUDA device (tagged #gpu, pending without one).

Reproducing
  busted --cpath='build-cpu/?.so' spec/reduce_by_key_spec.lua     the cpu backend (make ... build-cpu)
  busted spec/reduce_by_key_spec.lua                               the build in build/ (a GPU machine)
  GPUREDUCE_BY_KEY_FUZZ_CASES   fuzz cases per place (default 100)
  GPUREDUCE_FUZZ_SEED           the fuzz's seed (default 20261204); a failure names its case and seed
  e.g.  GPUREDUCE_FUZZ_SEED=7 GPUREDUCE_BY_KEY_FUZZ_CASES=2000 busted --filter=fuzz spec/reduce_by_key_spec.lua
]]
local gr = require "gpureduce"
local H = require("support.helpers").bind(it, function(reason) pending(reason) end)
local R = require "support.fuzz_reference"       -- ops_reference.lua's ops join it: R.OPS has every op

local TWO = { argmin = true, argmax = true, minmax = true }
local KEY_DTYPES = { "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "bool" }
local FLOAT_DTYPES = { "float32", "float64", "float16", "bfloat16", "float8_e4m3", "float8_e5m2" }
local PLACES = { "host", "device" }

local function env_int(name, default) return math.tointeger(tonumber(os.getenv(name) or "")) or default end
local FUZZ_SEED = env_int("GPUREDUCE_FUZZ_SEED", 20261204)
local FUZZ_CASES = env_int("GPUREDUCE_BY_KEY_FUZZ_CASES", 100)

--- Host buffers are tested on every machine; device buffers need a CUDA device.
local function place_it(where, title, fn)
  if where == "device" then H.gpu_it(title .. " (device buffers)", fn) else it(title .. " (host buffers)", fn) end
end

---------------------------------------------------------------------------------------------------
-- data

--- A seed from a case's description, so that each case draws its own numbers.
local function seed_of(...)
  local s, h = table.concat({ ... }, "|"), 0x3c6ef372fe94f82b
  for i = 1, #s do h = (h ~ s:byte(i)) * 0x100000001b3 end
  return h
end

local function shuffle(rng, t)
  for i = #t, 2, -1 do
    local j = rng:below(i) + 1
    t[i], t[j] = t[j], t[i]
  end
  return t
end

--- How many values a key dtype holds (math.maxinteger stands for "more than any test draws").
local function span(kd)
  local d = R.DTYPES[kd]
  if d.min == math.mininteger or d.max == -1 then return math.maxinteger end
  return d.max - d.min + 1
end

--- `count` distinct keys drawn over the dtype's whole range.
local function key_pool(rng, kd, count)
  local d, pool = R.DTYPES[kd], {}
  if count * 2 > span(kd) then
    -- most of a small dtype: every value, shuffled (rejection would crawl near the end)
    for x = d.min, d.max do pool[#pool + 1] = x end
    shuffle(rng, pool)
    for i = #pool, count + 1, -1 do pool[i] = nil end
    return pool
  end
  local seen = {}
  while #pool < count do
    local x = rng:int(kd)
    if not seen[x] then
      seen[x] = true
      pool[#pool + 1] = x
    end
  end
  return pool
end

--- The dtype's lowest and highest keys and their neighbours (uint64: the Lua integers with its bits, so
-- 2^63 and up are negative here but above every positive key).
local function extreme_keys(kd)
  local d = R.DTYPES[kd]
  local list
  if kd == "uint64" then
    list = { 0, 1, math.maxinteger - 1, math.maxinteger, math.mininteger, math.mininteger + 1, -2, -1 }
  elseif d.kind == "int" then
    list = { d.min, d.min + 1, -1, 0, 1, d.max - 1, d.max }
  else
    list = { d.min, d.min + 1, d.max - 1, d.max }
  end
  local seen, out = {}, {}
  for _, x in ipairs(list) do
    if not seen[x] then
      seen[x] = true
      out[#out + 1] = x
    end
  end
  return out
end

--- Draws ranks 1..d with weight 1 / r^s: a few keys take most elements, many take one or two.
local function zipf_picker(rng, d, s)
  local cum, total = {}, 0.0
  for r = 1, d do
    total = total + r ^ -s
    cum[r] = total
  end
  return function()
    local x = rng:float() * total
    local lo, hi = 1, d
    while lo < hi do
      local mid = (lo + hi) // 2
      if cum[mid] > x then hi = mid else lo = mid + 1 end
    end
    return lo
  end
end

--- n keys of a distribution: "uniform" over d keys, "zipf" over d keys, "one", "distinct" (n at most the
-- dtype's span), "extremes" (every extreme key present when n allows).
local function make_keys(rng, kd, n, dist, d)
  local keys = {}
  if n == 0 then return keys end
  if dist == "distinct" then return key_pool(rng, kd, n) end
  local pool
  if dist == "extremes" then
    pool = shuffle(rng, extreme_keys(kd))
  else
    pool = key_pool(rng, kd, dist == "one" and 1 or math.min(d, span(kd)))
  end
  local pick
  if dist == "zipf" then
    local rank = zipf_picker(rng, #pool, 1.1)
    pick = function() return pool[rank()] end
  else
    pick = function() return pool[rng:below(#pool) + 1] end
  end
  for i = 1, n do keys[i] = pick() end
  if dist == "extremes" then
    for i = 1, math.min(n, #pool) do keys[i] = pool[i] end
    shuffle(rng, keys)
  end
  return keys
end

local function key_less(kd)
  if kd == "uint64" then return math.ult end
  return function(a, b) return a < b end
end

--- The keys laid out: "shuffled" as drawn; "grouped": each key's elements one run, the runs in an order
-- that is not ascending (where there are two keys or more); "ascending": the runs in ascending order.
local function arrange(rng, kd, keys, layout)
  if layout == "shuffled" then return keys end
  local count, order = {}, {}
  for _, k in ipairs(keys) do
    if not count[k] then
      count[k] = 0
      order[#order + 1] = k
    end
    count[k] = count[k] + 1
  end
  local less = key_less(kd)
  table.sort(order, less)
  if layout == "grouped" and #order > 1 then
    shuffle(rng, order)
    local ascending = true
    for i = 2, #order do
      if less(order[i], order[i - 1]) then ascending = false end
    end
    -- sorted = true must be seen to take runs that are grouped but not in order
    if ascending then order[1], order[2] = order[2], order[1] end
  end
  local out = {}
  for _, k in ipairs(order) do
    for _ = 1, count[k] do out[#out + 1] = k end
  end
  return out
end

--- A value over much of the dtype's range (floats: magnitudes 2^-20..2^20, scaled into the small formats).
local function wide_value(rng, vd)
  if R.is_float(vd) then
    local x = (rng:float() * 2 - 1) * 2.0 ^ rng:range(-20, 20)
    local d = R.DTYPES[vd]
    if d.small then x = x * 2.0 ^ (d.fmt.p <= 4 and -12 or -8) end     -- below float16's and FP8's largest
    return R.to_dtype(vd, x)
  end
  return rng:int(vd)
end

local function wide_values(rng, vd, n)
  local v = {}
  for i = 1, n do v[i] = wide_value(rng, vd) end
  return v
end

--- Small values (ties for argmin/argmax; float sums exact in every order: multiples of 0.5), with NaN, the
-- infinities, -0.0 and 0.0 (floats) or the dtype's limits (integers) put in at random places.
local function tricky_values(rng, vd, n)
  local d, v = R.DTYPES[vd], {}
  for i = 1, n do
    local x = rng:range(0, 6)
    if R.is_float(vd) then v[i] = (x - 3) * 0.5
    elseif d.bool then v[i] = x % 2
    elseif d.kind == "uint" then v[i] = x
    else v[i] = x - 3 end
  end
  local specials = {}
  if R.is_float(vd) then
    local big = d.fmt.no_inf and d.fmt.max or math.huge      -- float8_e4m3 has no infinity
    specials = { 0 / 0, big, -big, -0.0, 0.0 }
  elseif not d.bool then
    specials = { d.min, d.max }
  end
  if n > 0 and #specials > 0 then
    for _ = 1, math.max(1, n // 60) do v[rng:below(n) + 1] = specials[rng:below(#specials) + 1] end
  end
  return v
end

--- A case's keys and values as Lua lists, and the exact scale of the values where their float sums are
-- exact (nil otherwise): the reference then requires the exact sum.
local function make_case(kd, vd, n, dist, d, layout, set, salt)
  local rng = R.rng(seed_of(kd, vd, n, dist, d or 0, layout, set, salt or ""))
  local keys = arrange(rng, kd, make_keys(rng, kd, n, dist, d or 8), layout)
  if set == "wide" then return keys, wide_values(rng, vd, n), nil end
  return keys, tricky_values(rng, vd, n), 0.5
end

local function buffer_of(list, dtype, where)
  local b = gr.buffer(#list, dtype, where and { where = where } or nil)
  if #list > 0 then b:set(list) end
  return b
end

local function flat(b)
  if #b == 0 then return {} end
  return b:totable(1, #b)
end

---------------------------------------------------------------------------------------------------
-- the reference

local function key_number(x)
  if type(x) == "boolean" then return x and 1 or 0 end
  return x
end

--- The distinct keys ascending, each with its values in v's order and their 1-based positions in v.
local function group_by_key(kd, keys, values)
  local at, groups = {}, {}
  for i = 1, #keys do
    local k = key_number(keys[i])
    local g = at[k]
    if not g then
      g = { key = k, positions = {}, values = {} }
      at[k] = g
      groups[#groups + 1] = g
    end
    g.positions[#g.positions + 1] = i
    g.values[#g.values + 1] = values[i]
  end
  local less = key_less(kd)
  table.sort(groups, function(a, b) return less(a.key, b.key) end)
  return groups
end

local WIDE_UNSIGNED = { int8 = "uint8", uint8 = "uint8", int16 = "uint16", uint16 = "uint16", int32 = "uint32",
  uint32 = "uint32", int64 = "uint64", uint64 = "uint64", bool = "bool" }

--- The result dtypes of an op over vd data, as docs/api.md's table of segmented results gives them.
local function result_dtypes(op, vd)
  local float = R.is_float(vd)
  local acc = vd == "float64" and "float64" or "float32"
  local signed = R.DTYPES[vd].kind == "int"
  if op == "sum" or op == "prod" or op == "sumsq" or op == "nansum" then
    return float and acc or (signed and "int64" or "uint64")
  elseif op == "asum" then
    return float and acc or "uint64"
  elseif op == "absmax" then
    return float and vd or WIDE_UNSIGNED[vd]
  elseif op == "argmin" or op == "argmax" then
    return vd, "int64"
  elseif op == "minmax" then
    return vd, vd
  elseif op == "count" then
    return "int64"
  elseif op == "and" or op == "or" then
    return "uint8"
  elseif op == "mean" or op == "var" or op == "std" or op == "norm" or op == "nanmean" then
    return float and acc or "float64"
  end
  return vd                                    -- min, max, nanmin, nanmax
end

--- What a built-in op must give: its result dtypes, and a check of one key's result(s).
local function builtin(op, vd, exact_scale)
  local d1, d2 = result_dtypes(op, vd)
  return {
    results = TWO[op] and 2 or 1, dtypes = { d1, d2 },
    check = function(g, got, got2)
      if op == "and" or op == "or" then got = got ~= 0 end       -- segmented and/or give uint8 flags
      local e = R.expect(op, g.values, { dtype = vd, exact_scale = exact_scale })
      if e.index then e.index = g.positions[e.index] end         -- a position in v, not in the group
      local ok, why = R.check(op, true, got, e, got2)
      if ok then return true end
      return false, string.format("%s (expected %s; an index there counts within the key's values)", why, e.text)
    end,
  }
end

local function show(x)
  if math.type(x) == "float" then return string.format("%.17g", x) end
  return tostring(x)
end

local function is_buffer(x) return tostring(x):match("^gpureduce%.Buffer%(") ~= nil and not tostring(x):find("freed") end

--- The call's values, packed (n = how many), or nil and the error.
local function by_key(kb, vb, opts)
  local r = table.pack(pcall(gr.reduce_by_key, kb, vb, opts))
  if not r[1] then return nil, tostring(r[2]) end
  return table.pack(table.unpack(r, 2, r.n))
end

--- Checks one call's results against the reference over the elements of kb and vb (`want`: from builtin or
-- a user operator's); adds what is wrong to bad. Returns the reference's groups.
local function verify(bad, label, kb, vb, want, res)
  local function fail(fmt, ...) bad[#bad + 1] = label .. ": " .. string.format(fmt, ...) end
  local kd = kb:dtype()
  local groups = group_by_key(kd, flat(kb), flat(vb))
  local m = #groups
  if res.n ~= want.results + 1 then
    fail("%d values returned, expected %d (the keys, then %d result buffer(s))", res.n, want.results + 1, want.results)
    return groups
  end
  for r = 1, res.n do
    if not is_buffer(res[r]) then
      fail("value %d returned is %s, not a buffer", r, tostring(res[r]))
      return groups
    end
    if res[r]:where() ~= vb:where() then fail("value %d is on the %s side, v on the %s", r, res[r]:where(), vb:where()) end
    if #res[r] ~= m then
      fail("value %d has %d elements for %d distinct keys", r, #res[r], m)
      return groups
    end
  end
  if res[1]:dtype() ~= kd then fail("the keys are %s, not k's dtype %s", res[1]:dtype(), kd) end
  for r = 1, want.results do
    local d = want.dtypes[r]
    if d and res[r + 1]:dtype() ~= d then fail("result %d is %s, expected %s", r, res[r + 1]:dtype(), d) end
  end
  local keys, r1, r2 = flat(res[1]), flat(res[2]), res[3] and flat(res[3])
  local wrong = 0
  for g = 1, m do
    local k, why = keys[g], nil
    if (kd == "bool") ~= (type(k) == "boolean") then
      why = "bool keys come back as booleans, other keys as integers: got a " .. type(k)
    elseif key_number(k) ~= groups[g].key then
      why = string.format("key %s where %s was expected", R.fmt(key_number(k), kd), R.fmt(groups[g].key, kd))
    else
      local ok, w = want.check(groups[g], r1[g], r2 and r2[g])
      if not ok then why = w end
    end
    if why then
      wrong = wrong + 1
      if wrong <= 4 then
        fail("key %d of %d (%s, %d values, first at %d): %s; got %s%s", g, m, R.fmt(groups[g].key, kd),
          #groups[g].values, groups[g].positions[1], why, show(r1[g]), r2 and (", " .. show(r2[g])) or "")
      end
    end
  end
  if wrong > 4 then fail("and %d more keys wrong", wrong - 4) end
  return groups
end

--- The first element where two buffers' bytes differ, or nil.
local function first_difference(a, b)
  local x, y = a:tobytes(), b:tobytes()
  if x == y then return nil end
  if #a ~= #b or #a == 0 then return 0 end
  local size = #x // #a
  for i = 1, #a do
    if x:sub((i - 1) * size + 1, i * size) ~= y:sub((i - 1) * size + 1, i * size) then return i end
  end
  return 0
end

--- v's elements grouped by key (stable), as a new buffer on v's side, and the int64 offsets of the groups.
local function grouped_copy(vb, groups)
  local bytes = vb:tobytes()
  local size = #bytes // #vb
  local parts, offsets = {}, { 0 }
  for _, g in ipairs(groups) do
    for _, p in ipairs(g.positions) do parts[#parts + 1] = bytes:sub((p - 1) * size + 1, p * size) end
    offsets[#offsets + 1] = offsets[#offsets] + #g.positions
  end
  local side = { where = vb:where() }
  return gr.buffer(table.concat(parts), vb:dtype(), side), gr.buffer(offsets, "int64", side)
end

--- Whether the groups are uneven as the engine's launch shape sees them: the longest over 16 times the mean
-- and over 8 KiB (engine/core/policy.c, gr_policy_uneven_segments). Such groups are shared out by blocks, not
-- as a segmented reduction of the same offsets shares them, so their rounding may differ from its.
local function uneven(vb, groups)
  local longest, n = 0, 0
  for _, g in ipairs(groups) do
    longest = math.max(longest, #g.positions)
    n = n + #g.positions
  end
  local es = n > 0 and #vb:tobytes() // #vb or 1
  return longest * es > 16 * (n // #groups) * es and longest * es > 8192
end

--- Ops whose float results depend on the order their elements are combined in (the extremes, counts and
-- logical ops do not; integer sums are exact, and so are the moments and norms of integers up to 32 bits;
-- int64 and uint64 take them in float64, as their nanmean).
local ORDERED = { sum = true, mean = true, var = true, std = true, norm = true, sumsq = true, asum = true,
                  nansum = true, nanmean = true, prod = true }
local WIDE_ORDERED = { var = true, std = true, norm = true, nanmean = true }
--- The extremes of floats: which NaN or which zero is kept depends on the order too.
local EXTREMES = { min = true, max = true, nanmin = true, nanmax = true, absmax = true, minmax = true }

--- The first element at which two float buffers differ as numbers (NaN is NaN, -0.0 is 0.0), or nil.
local function first_numeric_difference(a, b)
  if #a ~= #b then return 0 end
  local x, y = flat(a), flat(b)
  for i = 1, #x do
    if not (x[i] == y[i] or (x[i] ~= x[i] and y[i] ~= y[i])) then return i end
  end
  return nil
end

--- Whether a call's results on the device come from the one pass over runs of keys (engine/core/by_key.c),
-- which combines each key's values in an order of its own: built-in ops other than argmin/argmax, short of
-- gpu_to_gpu.
local function by_runs(vb, op, extra)
  return vb:where() == "device" and gr.backend() == "cuda" and type(op) == "string" and op ~= "argmin"
    and op ~= "argmax" and not (extra and extra.determinism == "gpu_to_gpu")
end

--- The spec's one engine-against-engine check: the results are, bit for bit, the segmented reduction's over
-- the values grouped by key (argmin/argmax: its indices within a segment mapped to positions in v), where the
-- groups are not uneven (above); those are checked against the reference alone. So are the float results of
-- ordered ops from the pass over runs, whose order is not the segmented kernel's.
local function same_as_segments(bad, label, vb, groups, op, res, extra, sorted)
  if #groups == 0 or not res or res.n < 2 or not is_buffer(res[2]) or #res[2] ~= #groups then return end
  if uneven(vb, groups) then return end
  local d = vb:dtype()
  local floats, runs = d:match("^float") or d == "bfloat16", by_runs(vb, op, extra)
  if runs and floats and ORDERED[op] then return end
  if runs and (d == "int64" or d == "uint64") and WIDE_ORDERED[op] then return end
  local differ = runs and floats and EXTREMES[op] and first_numeric_difference or first_difference
  local v2, o = grouped_copy(vb, groups)
  local opts = { op = op, offsets = o }
  for key, x in pairs(extra or {}) do opts[key] = x end
  local s = table.pack(gr.reduce(v2, opts))
  local i = differ(s[1], res[2])
  if i then
    bad[#bad + 1] = string.format("%s: not the segmented reduction's bits (first at key %d: %s, segmented %s)", label, i,
      show(i > 0 and res[2][i]), show(i > 0 and s[1][i]))
  end
  if s.n == 2 and res[3] and #res[3] == #groups then
    if op == "argmin" or op == "argmax" then
      local within, got = flat(s[2]), flat(res[3])
      for g = 1, #groups do
        if groups[g].positions[within[g]] ~= got[g] then
          bad[#bad + 1] = string.format("%s: key %d: index %s, but the segmented reduction chose the key's value %d, at %s",
            label, g, show(got[g]), within[g], show(groups[g].positions[within[g]]))
          break
        end
      end
    elseif differ(s[2], res[3]) then
      bad[#bad + 1] = label .. ": the second results are not the segmented reduction's bits"
    end
  end
  for r = 1, s.n do s[r]:free() end
  v2:free()
  o:free()
end

--- The options of a call that a segmented reduction takes too (determinism); op, sorted and out are not.
local function segment_options(opts)
  local extra = {}
  for key, x in pairs(opts) do
    if key ~= "op" and key ~= "sorted" and key ~= "out" then extra[key] = x end
  end
  return extra
end

local function release(res)
  if not res then return end
  for r = 1, res.n do
    if is_buffer(res[r]) then res[r]:free() end
  end
end

--- One call and its checks: the reference, the inputs left as they were, and (segments) the segmented bits.
-- Returns the call's values (packed) and the reference's groups.
local function run_case(bad, label, kb, vb, want, opts, segments)
  local kbytes, vbytes = kb:tobytes(), vb:tobytes()
  local res, err = by_key(kb, vb, opts)
  if not res then
    bad[#bad + 1] = label .. ": raised " .. err
    return nil
  end
  local groups = verify(bad, label, kb, vb, want, res)
  if kb:tobytes() ~= kbytes or vb:tobytes() ~= vbytes then bad[#bad + 1] = label .. ": an input changed" end
  if segments then same_as_segments(bad, label, vb, groups, opts.op, res, segment_options(opts), opts.sorted) end
  return res, groups
end

local function report(bad)
  if #bad > 0 then
    error(string.format("%d failure(s):\n  %s", #bad, table.concat(bad, "\n  ", 1, math.min(#bad, 16))), 0)
  end
end

local function bits(x) return string.pack("<d", x) end
local function same_value(a, b)
  if math.type(a) == "float" and math.type(b) == "float" then return (a ~= a and b ~= b) or bits(a) == bits(b) end
  return a == b and math.type(a) == math.type(b)
end

--- Every value of two calls, byte for byte.
local function same_results(a, b)
  if a.n ~= b.n then return false, string.format("%d values against %d", a.n, b.n) end
  for r = 1, a.n do
    local i = first_difference(a[r], b[r])
    if i then return false, string.format("value %d differs (first at element %d)", r, i) end
  end
  return true
end

--- Asserts that fn(...) raises an error naming one of `names` (whole words, so "out" is not "without";
-- "#1" is Lua's "bad argument #1", not "#12"); returns the message.
local function refuses(names, fn, ...)
  local ok, err = pcall(fn, ...)
  assert(not ok, "no error; expected one naming " .. table.concat(names, " or "))
  err = tostring(err)
  for _, name in ipairs(names) do
    local escaped = name:gsub("%p", "%%%0")
    local pattern = name:sub(1, 1) == "#" and escaped .. "%f[%D]" or "%f[%w_]" .. escaped .. "%f[^%w_]"
    if err:find(pattern) then return err end
  end
  error("the error\n  " .. err .. "\nnames none of: " .. table.concat(names, ", "), 2)
end

-- k is named `keys` (the spec says so); v by its name or, as for other calls' non-buffers (dot_spec), its position
local KEYS_NAMES = { "keys", "#1" }
local VALUES_NAMES = { "values", "vals", "v", "#2" }
local EITHER_NAMES = { "keys", "values", "vals", "v", "#1", "#2" }

---------------------------------------------------------------------------------------------------

describe("gr.reduce_by_key against the reference", function()
  local DISTRIBUTIONS = {
    { name = "40 keys", dist = "uniform", d = 40 },
    { name = "Zipf-like over 300 keys", dist = "zipf", d = 300 },
    { name = "one key", dist = "one", d = 1 },
    { name = "every key distinct", dist = "distinct" },
    { name = "the dtype's extremes", dist = "extremes" },
  }

  for _, where in ipairs(PLACES) do
    for _, kd in ipairs(KEY_DTYPES) do
      place_it(where, kd .. " keys, float32 values: sum, min and argmax, every distribution and layout, sorted or not",
        function()
          local bad = {}
          for _, dist in ipairs(DISTRIBUTIONS) do
            for _, layout in ipairs({ "shuffled", "grouped", "ascending" }) do
              local n = dist.dist == "distinct" and math.min(1500, span(kd)) or 1500
              -- runs of keys take small values: their sums must be exact
              local set = layout == "grouped" and "tricky" or "wide"
              local keys, values, scale = make_case(kd, "float32", n, dist.dist, dist.d, layout, set)
              local kb, vb = buffer_of(keys, kd, where), buffer_of(values, "float32", where)
              for _, op in ipairs({ "sum", "min", "argmax" }) do
                for _, sorted in ipairs(layout == "shuffled" and { false } or { false, true }) do
                  local opts = { op = op, sorted = sorted or nil }
                  local label = string.format("%s keys, %s, %s, %s values %s", kd, dist.name, layout, set,
                    H.describe_opts(opts))
                  release(run_case(bad, label, kb, vb, builtin(op, "float32", scale), opts, true))
                end
              end
              kb:free()
              vb:free()
            end
          end
          report(bad)
        end)
    end

    for _, vd in ipairs(gr.dtypes()) do
      place_it(where, "int32 keys, " .. vd .. " values: every op, wide and tricky values", function()
        local bad = {}
        local shapes = {
          { dist = "uniform", d = 40, layout = "shuffled" },
          { dist = "zipf", d = 200, layout = "grouped", sorted = true },
          { dist = "one", d = 1, layout = "shuffled" },
        }
        for _, shape in ipairs(shapes) do
          for _, set in ipairs({ "wide", "tricky" }) do
            local keys, values, scale = make_case("int32", vd, 1200, shape.dist, shape.d, shape.layout, set)
            local kb, vb = buffer_of(keys, "int32", where), buffer_of(values, vd, where)
            for _, op in ipairs(R.OP_ORDER) do
              local opts = { op = op, sorted = shape.sorted }
              local label = string.format("%s values (%s), %s keys %s", vd, set, shape.dist, H.describe_opts(opts))
              release(run_case(bad, label, kb, vb, builtin(op, vd, scale), opts, true))
            end
            kb:free()
            vb:free()
          end
        end
        report(bad)
      end)
    end
  end
end)

---------------------------------------------------------------------------------------------------

describe("gr.reduce_by_key: sizes and distributions", function()
  for _, where in ipairs(PLACES) do
    place_it(where, "0 elements: empty buffers of the right dtypes for every op, sorted or not", function()
      local bad = {}
      for _, kd in ipairs(KEY_DTYPES) do
        for _, vd in ipairs({ "float32", "int8", "bool", "uint64" }) do
          local kb, vb = gr.buffer(0, kd, { where = where }), gr.buffer(0, vd, { where = where })
          -- ops that raise for an empty buffer have no key to raise for here
          for _, op in ipairs(R.OP_ORDER) do
            for _, sorted in ipairs({ false, true }) do
              local opts = { op = op, sorted = sorted }
              release(run_case(bad, string.format("%s keys, %s values %s", kd, vd, H.describe_opts(opts)), kb, vb,
                builtin(op, vd), opts, false))
            end
          end
        end
      end
      report(bad)
    end)

    place_it(where, "1 element: every op, keys at each extreme of every key dtype", function()
      local bad = {}
      for _, kd in ipairs(KEY_DTYPES) do
        for _, key in ipairs(extreme_keys(kd)) do
          for _, vd in ipairs({ "float64", "int16" }) do
            local kb, vb = buffer_of({ key }, kd, where), buffer_of({ vd == "float64" and -2.5 or -7 }, vd, where)
            for _, op in ipairs(R.OP_ORDER) do
              release(run_case(bad, string.format("%s key %s, %s value, %s", kd, R.fmt(key, kd), vd, op), kb, vb,
                builtin(op, vd, 0.5), { op = op }, true))
            end
          end
        end
      end
      report(bad)
    end)

    place_it(where, "one distinct key over 5000 elements: every op", function()
      local bad = {}
      for _, set in ipairs({ "wide", "tricky" }) do
        local keys, values, scale = make_case("int64", "float64", 5000, "one", 1, "shuffled", set)
        local kb, vb = buffer_of(keys, "int64", where), buffer_of(values, "float64", where)
        for _, op in ipairs(R.OP_ORDER) do
          for _, sorted in ipairs({ false, true }) do
            local opts = { op = op, sorted = sorted }
            release(run_case(bad, set .. " " .. H.describe_opts(opts), kb, vb, builtin(op, "float64", scale), opts, true))
          end
        end
      end
      report(bad)
    end)

    place_it(where, "every key distinct (as many as the dtype holds, up to 3000): each key its own value", function()
      local bad = {}
      for _, kd in ipairs(KEY_DTYPES) do
        local n = math.min(3000, span(kd))
        local keys, values, scale = make_case(kd, "float32", n, "distinct", nil, "shuffled", "tricky")
        local kb, vb = buffer_of(keys, kd, where), buffer_of(values, "float32", where)
        for _, op in ipairs({ "sum", "min", "argmin", "count", "mean", "var", "minmax", "and" }) do
          -- distinct keys are grouped (each one a run): sorted = true is allowed
          for _, sorted in ipairs({ false, true }) do
            local opts = { op = op, sorted = sorted }
            release(run_case(bad, kd .. " " .. H.describe_opts(opts), kb, vb, builtin(op, "float32", scale), opts, true))
          end
        end
      end
      report(bad)
    end)

    place_it(where, "skewed keys: Zipf-like over 20000 keys, and one key with 90% of the elements", function()
      local bad = {}
      local keys, values = make_case("int64", "float32", 50000, "zipf", 20000, "shuffled", "wide")
      local skew_rng = R.rng(seed_of("skew"))
      local heavy = {}
      for i = 1, 30000 do heavy[i] = skew_rng:chance(0.9) and 7 or i * 1000003 end
      local cases = {
        { "Zipf-like", keys, values },
        { "90% one key", heavy, wide_values(skew_rng, "float32", #heavy) },
      }
      for _, c in ipairs(cases) do
        local kb, vb = buffer_of(c[2], "int64", where), buffer_of(c[3], "float32", where)
        for _, op in ipairs({ "sum", "mean", "argmin", "count", "minmax", "std" }) do
          release(run_case(bad, c[1] .. " " .. op, kb, vb, builtin(op, "float32"), { op = op }, true))
        end
      end
      report(bad)
    end)

    place_it(where, "int64, uint64, int8 and bool keys at their extremes come back in their own order", function()
      local MIN, MAX = math.mininteger, math.maxinteger
      local k = { MAX, MIN, 0, -1, 1, MIN, MAX, 0 }
      local v = buffer_of({ 1, 2, 3, 4, 5, 6, 7, 8 }, "int32", where)
      local cases = {
        -- signed: as numbers; uint64: 2^63 (MIN's bits) and 2^64 - 1 (-1's) above every positive key
        { "int64", k, { MIN, -1, 0, 1, MAX }, { 8, 4, 11, 5, 8 } },
        { "uint64", k, { 0, 1, MAX, MIN, -1 }, { 11, 5, 8, 8, 4 } },
        { "int8", { 127, -128, 0, -1, 1, -128, 127, 0 }, { -128, -1, 0, 1, 127 }, { 8, 4, 11, 5, 8 } },
      }
      for _, c in ipairs(cases) do
        local keys, sums = gr.reduce_by_key(buffer_of(c[2], c[1], where), v, { op = "sum" })
        assert.are.same(c[3], keys:totable(), c[1] .. " keys")
        assert.are.same(c[4], sums:totable(), c[1] .. " sums")
        assert.are.equal("int64", sums:dtype())
      end
      local keys, sums = gr.reduce_by_key(buffer_of({ true, false, true }, "bool", where),
        buffer_of({ 1, 2, 3 }, "int32", where), { op = "sum" })
      assert.are.same({ false, true }, keys:totable())
      assert.are.same({ 2, 4 }, sums:totable())
    end)

    --- Each pair of views gives the results of compact 1-D copies of its elements, byte for byte.
    local function views_case(pairs_of)
      local bad = {}
      for _, p in ipairs(pairs_of) do
        local kv, vv = p[2], p[3]
        -- the same elements in compact 1-D buffers: a view must give their results, byte for byte
        local kc = gr.buffer(kv:tobytes(), "int16", { where = where })
        local vc = gr.buffer(vv:tobytes(), "float64", { where = where })
        for _, op in ipairs({ "sum", "argmin", "minmax", "count" }) do
          local res = run_case(bad, p[1] .. " " .. op, kv, vv, builtin(op, "float64", 0.5), { op = op }, true)
          local compact = by_key(kc, vc, { op = op })
          if res and compact then
            local ok, why = same_results(res, compact)
            if not ok then bad[#bad + 1] = p[1] .. " " .. op .. ": not the compact copies' results: " .. why end
          end
        end
      end
      report(bad)
    end

    local function view_data()
      local keys, values = make_case("int16", "float64", 600, "uniform", 25, "shuffled", "tricky")
      return buffer_of(keys, "int16", where), buffer_of(values, "float64", where)
    end

    place_it(where, "slices that start off the 16-byte grid, at other offsets in k and v", function()
      local kp, vp = view_data()
      views_case({ { "slices at 3 and 6", kp:slice(3, 590), vp:slice(6, 590) },
                   { "slices at 2 and 1", kp:slice(2, 597), vp:slice(1, 597) } })
    end)

    -- no 1-D view is strided (a transpose or an inner narrow has two axes): "strided views are read as their
    -- elements in order" means k and v of one such shape, read in row-major order
    place_it(where, "strided views (transposed, narrowed along the inner axis) are read as their elements in order",
      function()
        local kp, vp = view_data()
        views_case({
          { "transposed", kp:view { 20, 30 }:transpose(), vp:view { 20, 30 }:transpose() },
          { "narrowed along the inner axis", kp:view { 20, 30 }:narrow(2, 3, 25), vp:view { 20, 30 }:narrow(2, 3, 25) },
        })
      end)
  end

  H.gpu_it("2^20 elements on the device: int32 keys over 5000 (Zipf-like), runs with sorted, uint64 keys nearly all distinct", function()
    local bad = {}
    local n = 1 << 20
    local keys, values = make_case("int32", "float32", n, "zipf", 5000, "shuffled", "wide")
    local kb, vb = buffer_of(keys, "int32"), buffer_of(values, "float32")
    for _, op in ipairs({ "sum", "min", "argmax", "count", "mean", "minmax" }) do
      release(run_case(bad, "zipf " .. op, kb, vb, builtin(op, "float32"), { op = op }, true))
    end
    local gkeys = make_case("int32", "float32", n, "zipf", 5000, "grouped", "wide")
    local gb = buffer_of(gkeys, "int32")
    for _, op in ipairs({ "sum", "argmin" }) do
      release(run_case(bad, "runs, sorted " .. op, gb, vb, builtin(op, "float32"), { op = op, sorted = true }, true))
    end
    -- 2^64 values: about 2^20 distinct keys, nearly every group one element
    local ub = gr.buffer(n, "uint64"):random(41)
    local ib = gr.buffer(n, "int64"):random(42, -1000, 1000)
    release(run_case(bad, "uint64 keys sum", ub, ib, builtin("sum", "int64"), { op = "sum" }, true))
    report(bad)
  end)
  -- The pass over runs takes tiles of 2048 elements, 8 a thread, or of 4096, 16 a thread (cuda/device/runs.cuh;
  -- 16 for the values of 4 bytes or fewer here): runs that end on and beside tile and thread boundaries, that
  -- cross one tile or hundreds, and inputs of every key width, aligned and not. Both shapes are checked
  -- against a reference of their own further down (GPUREDUCE_RUNS_ITEMS).
  H.gpu_it("runs across the pass's tiles: lengths about 2048, one run over many tiles, every key width", function()
    local bad = {}
    local TILE = 2048
    local function runs_of(lengths, n, first)
      local keys, k, left = {}, first, lengths[1]
      local r = 1
      for i = 1, n do
        if left == 0 then
          r = r % #lengths + 1
          left = lengths[r]
          k = k + 1
        end
        keys[i] = k
        left = left - 1
      end
      return keys
    end
    local patterns = {
      { "one key, 2047", { 1 << 30 }, TILE - 1 }, { "one key, 2048", { 1 << 30 }, TILE },
      { "one key, 2049", { 1 << 30 }, TILE + 1 }, { "one key over 150 tiles", { 1 << 30 }, 150 * TILE + 3 },
      { "runs of 2048", { TILE }, 5 * TILE }, { "runs of 2047", { TILE - 1 }, 5 * TILE + 1 },
      { "runs of 2049", { TILE + 1 }, 5 * TILE + 7 }, { "runs of 8 and 9", { 8, 9 }, 3 * TILE + 5 },
      { "runs of 1", { 1 }, 2 * TILE + 3 }, { "runs of 7, 5000, 1, 30000", { 7, 5000, 1, 30000 }, 40000 },
    }
    local function among_singles(singles, long)
      local lengths = {}
      for i = 1, singles do lengths[i] = 1 end
      lengths[singles + 1] = long
      return lengths
    end
    table.insert(patterns, { "a run over 150 tiles after 300 single keys", among_singles(300, 150 * TILE), 150 * TILE + 305 })
    table.insert(patterns, { "runs of 3000 among 500 single keys", among_singles(500, 3000), 4 * 3500 + 11 })
    table.insert(patterns, { "runs of 2049 among 150 single keys", among_singles(150, TILE + 1), 5 * (TILE + 151) })
    local values = {}
    local rng = R.rng(20261126)
    for i = 1, 151 * TILE do values[i] = rng:range(-64, 64) * 0.25 end
    for _, p in ipairs(patterns) do
      local label, lengths, n = p[1], p[2], p[3]
      for _, kd in ipairs({ "int8", "int16", "int32", "int64" }) do
        local keys = runs_of(lengths, n, kd == "int8" and -100 or -1000)
        local distinct = keys[n] - keys[1] + 1
        local big = n > 100000                  -- the long patterns: int32 keys, float32 and int32 values
        if (kd ~= "int8" or distinct <= 200) and not (big and kd ~= "int32") then
          for _, vd in ipairs(big and { "float32", "int32" } or { "float32", "int32", "float16", "bool" }) do
            local v = {}
            for i = 1, n do
              if vd == "bool" then v[i] = values[i] > 0
              elseif vd == "int32" then v[i] = math.floor(values[i] * 4)
              else v[i] = values[i] end
            end
            local kb = buffer_of(keys, kd)
            local vb = buffer_of(v, vd)
            local ops = vd == "bool" and { "sum", "max", "count", "minmax" } or { "sum", "max", "mean", "var", "minmax" }
            for _, op in ipairs(ops) do
              for _, sorted in ipairs({ false, true }) do
                local name = string.format("%s, %s keys, %s values, %s%s", label, kd, vd, op, sorted and ", sorted" or "")
                release(run_case(bad, name, kb, vb, builtin(op, vd, 0.25), { op = op, sorted = sorted or nil }, true))
              end
            end
            -- off the 16-byte grid: the element loads
            if n > 40 then
              local ks, vs = kb:slice(2, n - 9), vb:slice(3, n - 9)
              release(run_case(bad, label .. ", " .. kd .. "/" .. vd .. " slices", ks, vs, builtin("sum", vd, 0.25),
                { op = "sum" }, false))
              ks:free()
              vs:free()
            end
            kb:free()
            vb:free()
          end
        end
      end
    end
    report(bad)
  end)

  -- Past 2^31 elements: the ops of the pass over runs take any length (argmin/argmax, operators and
  -- gpu_to_gpu, which group the keys as CSR segments, stop at 2^31 - 1 and say so).
  H.gpu_it("past 2^31 elements: keys cycling through int8, one run, two runs #slow", function()
    local n = (1 << 31) + 37
    local keys = gr.buffer(n, "int8"):iota()            -- 0, 1, ..., 127, -128, ..., -1, 0, ...: wraps
    local ones = gr.buffer(n, "int8"):fill(1)
    local k, c = gr.reduce_by_key(keys, ones, { op = "sum" })
    assert.are.equal(256, #k)
    local kt, ct = k:totable(), c:totable()
    for i = 1, 256 do
      local key = i - 129                               -- -128 .. 127
      local residue = key % 256                         -- where it first appears, 0-based
      assert.are.equal(key, kt[i])
      assert.are.equal((n // 256) + (residue < n % 256 and 1 or 0), ct[i], "key " .. key)
    end
    k:free()
    c:free()
    -- grouped: -5 for the first m, 7 after, sorted = true; each run's sum and count against gr.reduce's
    local m = (1 << 31) - 11
    keys:slice(1, m):fill(-5)
    keys:slice(m + 1, n - m):fill(7)
    local vals = gr.buffer(n, "int8"):random(5, -100, 100)
    local r
    k, r = gr.reduce_by_key(keys, vals, { ops = { "sum", "max", "count" }, sorted = true })
    assert.are.same({ -5, 7 }, k:totable())
    local head, tail = vals:slice(1, m), vals:slice(m + 1, n - m)
    assert.are.same({ gr.sum(head), gr.sum(tail) }, r.sum:totable())
    assert.are.same({ gr.max(head), gr.max(tail) }, r.max:totable())
    assert.are.same({ gr.count(head), gr.count(tail) }, r.count:totable())
    local ok, err = pcall(gr.reduce_by_key, keys, vals, { op = "argmax" })
    assert.is_false(ok)
    assert.truthy(tostring(err):find("2^31 - 1", 1, true), err)
  end)

  H.gpu_it("runs across the pass's tiles: sorted and unsorted give the same bits, run after run", function()
    local n = 300001
    local keys, values = {}, {}
    local rng = R.rng(77)
    local key, left, r = 0, 1, 0
    for i = 1, n do                     -- ascending keys, runs of 1 to 20 elements and every 50th of 40000
      if left == 0 then
        r = r + 1
        key = key + 1 + r % 3
        left = r % 50 == 0 and 40000 or 1 + (r * 7) % 20
      end
      keys[i] = key
      left = left - 1
      values[i] = rng:range(-1000000, 1000000) / 7
    end
    local vb = buffer_of(values, "float32")
    local kb = buffer_of(keys, "int32")
    for _, op in ipairs({ "sum", "var", "norm", "nanmean" }) do
      local a = assert(by_key(kb, vb, { op = op, sorted = true }))
      local b = assert(by_key(kb, vb, { op = op }))
      local c = assert(by_key(kb, vb, { op = op, sorted = true }))
      local ok, why = same_results(a, b)
      assert(ok, op .. ", sorted against unsorted: " .. tostring(why))
      ok, why = same_results(a, c)
      assert(ok, op .. ", sorted twice: " .. tostring(why))
      release(a)
      release(b)
      release(c)
    end
  end)

  -- Both tile shapes of the pass over runs: GPUREDUCE_RUNS_ITEMS=8 (tiles of 2048 elements, 8 a thread)
  -- and 16 (tiles of 4096, 16 a thread), each in a child process (the variable is read when the module's
  -- context is made; Lua cannot set it here). Each child checks its calls against a reference of its own, in Lua:
  -- heads on and beside tile and thread edges, runs of exactly one tile, tiles without a head followed by
  -- one whose first element is a head, runs crossing 16 and 17 tiles (the fixup's walk by one thread and
  -- by the block), all keys distinct, unaligned slices, and runs over thousands of tiles; sorted and
  -- unsorted give the same bytes, and so does each op alone and inside ops = {...}.
  local TILES_BODY = [[
    local gr, ITEMS = ...
    local TILE = 256 * ITEMS
    local bad = {}
    local function fail(fmt, ...) if #bad < 20 then bad[#bad + 1] = string.format(fmt, ...) end end
    local OPS = { "sum", "max", "minmax", "count" }
    -- n keys ascending from -3 in runs of the lengths, taken in turn
    local function runs_of(lengths, n)
      local keys, at, r = {}, 1, 0
      while at <= n do
        local len = lengths[r % #lengths + 1]
        for i = at, math.min(n, at + len - 1) do keys[i] = r - 3 end
        at, r = at + len, r + 1
      end
      return keys
    end
    -- the groups of ascending keys and their values, from the buffers' elements
    local function groups_of(keys, vals)
      local gs = {}
      for i = 1, #keys do
        local g = gs[#gs]
        if not g or g.key ~= keys[i] then
          g = { key = keys[i], sum = 0, max = -math.huge, min = math.huge, count = 0, n = 0, abs = 0 }
          gs[#gs + 1] = g
        end
        local x = vals[i]
        g.sum, g.n, g.abs = g.sum + x, g.n + 1, g.abs + math.abs(x)
        if x > g.max then g.max = x end
        if x < g.min then g.min = x end
        if x ~= 0 then g.count = g.count + 1 end
      end
      return gs
    end
    local function call(kb, vb, opts)
      local r = table.pack(pcall(gr.reduce_by_key, kb, vb, opts))
      if not r[1] then return nil, tostring(r[2]) end
      return table.pack(table.unpack(r, 2, r.n))
    end
    local function bytes_of(r) local t = {} for i = 1, r.n do t[i] = r[i]:tobytes() end return table.concat(t, "|") end
    -- one op's results against the groups; float sums exact (tolerance 0) or within `tol` of the sum's bound
    local function check(label, op, r, gs, tol)
      if #r[1] ~= #gs then return fail("%s %s: %d keys, expected %d", label, op, #r[1], #gs) end
      local k, a, b = r[1]:totable(), r[2]:totable(), r[3] and r[3]:totable()
      for i, g in ipairs(gs) do
        local ok
        if k[i] ~= g.key then ok = false
        elseif op == "sum" then ok = math.abs(a[i] - g.sum) <= tol * g.n * g.abs
        elseif op == "max" then ok = a[i] == g.max
        elseif op == "minmax" then ok = a[i] == g.min and b[i] == g.max
        else ok = a[i] == g.count end
        if not ok then
          return fail("%s %s: key %d of %d (%s, %d values): got %s %s", label, op, i, #gs, tostring(g.key), g.n,
            tostring(a[i]), tostring(b and b[i] or ""))
        end
      end
    end
    -- every op sorted and not, alone and in one call of all four, on keys kb and values vb
    local function all_ways(label, kb, vb, tol)
      local gs = groups_of(kb:totable(), vb:totable())
      local alone = {}
      for _, op in ipairs(OPS) do
        local r, err = call(kb, vb, { op = op, sorted = true })
        local u = call(kb, vb, { op = op })
        if not r then return fail("%s %s: raised %s", label, op, err) end
        check(label .. ", sorted", op, r, gs, tol)
        if not u or bytes_of(r) ~= bytes_of(u) then fail("%s %s: sorted and unsorted differ", label, op) end
        alone[op] = bytes_of(r)
      end
      for _, sorted in ipairs({ true, false }) do
        local r, err = call(kb, vb, { ops = OPS, sorted = sorted or nil })
        if not r then return fail("%s ops: raised %s", label, err) end
        for _, op in ipairs(OPS) do
          local e = r[2][op]
          local got = type(e) == "table" and (r[1]:tobytes() .. "|" .. e[1]:tobytes() .. "|" .. e[2]:tobytes())
            or (r[1]:tobytes() .. "|" .. e:tobytes())
          if got ~= alone[op] then fail("%s %s: inside ops (sorted %s) not the bytes of the call alone", label, op,
            tostring(sorted)) end
        end
      end
    end
    local I = ITEMS
    local patterns = {
      { "runs of a tile", { TILE }, 4 * TILE }, { "runs of a tile less one", { TILE - 1 }, 4 * TILE + 3 },
      { "runs of a tile and one", { TILE + 1 }, 4 * TILE + 5 }, { "runs of a thread's items", { I }, 2 * TILE + 1 },
      { "runs of a thread's items less one, more one", { I - 1, I + 1 }, 2 * TILE + 7 },
      { "three tiles without a head, then a head at a tile's start", { 3 * TILE, 1, TILE - 1 }, 9 * TILE },
      { "a run over 16 tiles, then a head at a tile's start", { 16 * TILE, 2 }, 3 * 16 * TILE },
      { "runs crossing 16 tiles", { 15 * TILE + 9, 3 }, 50 * TILE },
      { "runs crossing 17 tiles", { 17 * TILE + 9, 3 }, 60 * TILE + 1 },
      { "a run over 40 tiles among single keys", { 40 * TILE + 5, 1, 1, 1 }, 45 * TILE },
      { "every key distinct", { 1 }, 3 * TILE + 11 }, { "one element", { 1 }, 1 },
      { "one key over two tiles and one", { 1 << 30 }, 2 * TILE + 1 },
    }
    for _, p in ipairs(patterns) do
      local label, n = p[1], p[3]
      local kb = gr.buffer(runs_of(p[2], n), "int32")
      local fv, iv = {}, {}
      for i = 1, n do
        iv[i] = (i * 7919) % 2001 - 1000
        fv[i] = ((i * 104729) % 129 - 64) * 0.25     -- exact partial sums: the float sums must be exact
      end
      local fb, ib = gr.buffer(fv, "float32"), gr.buffer(iv, "int32")
      all_ways(label .. ", float32", kb, fb, 0)
      all_ways(label .. ", int32", kb, ib, 0)
      if n > 40 then                                 -- off the 16-byte grid: the element loads
        local ks, vs = kb:slice(3, n - 9), fb:slice(3, n - 9)
        all_ways(label .. ", slices", ks, vs, 0)
        ks:free()
        vs:free()
      end
      kb:free()
      fb:free()
      ib:free()
    end
    -- runs over thousands of tiles: keys laid out on the device, values drawn there, sums checked in Lua
    local n = 2600 * TILE + 77
    local a, b = 1234, 1234 + 2500 * TILE + 3
    local kb = gr.buffer(n, "int32"):fill(5)
    kb:slice(a + 1, b - a):fill(6)
    kb:slice(b + 1, n - b):fill(7)
    for _, vd in ipairs({ "int32", "float32" }) do
      local vb = gr.buffer(n, vd)
      if vd == "int32" then vb:random(31, -1000, 1000) else vb:random(32, -1, 1) end
      -- the three groups' reference, from the values' bytes a thousand at a time
      local s, code = vb:tobytes(), vd == "int32" and "i4" or "f"
      local gs = {}
      for g, key in ipairs({ 5, 6, 7 }) do
        gs[g] = { key = key, sum = 0, max = -math.huge, min = math.huge, count = 0, n = 0, abs = 0 }
      end
      for i = 1, n, 1000 do
        local m = math.min(1000, n - i + 1)
        local t = table.pack(string.unpack("<" .. string.rep(code, m), s, 4 * (i - 1) + 1))
        for j = 1, m do
          local at, x = i + j - 1, t[j]
          local g = gs[at <= a and 1 or at <= b and 2 or 3]
          g.sum, g.n, g.abs = g.sum + x, g.n + 1, g.abs + math.abs(x)
          if x > g.max then g.max = x end
          if x < g.min then g.min = x end
          if x ~= 0 then g.count = g.count + 1 end
        end
      end
      for _, op in ipairs(OPS) do
        local r, err = call(kb, vb, { op = op, sorted = true })
        if not r then fail("long runs %s %s: raised %s", vd, op, err)
        else
          check("long runs " .. vd, op, r, gs, vd == "int32" and 0 or 2 ^ -24)
          local u = call(kb, vb, { op = op })
          if not u or bytes_of(r) ~= bytes_of(u) then fail("long runs %s %s: sorted and unsorted differ", vd, op) end
        end
      end
      vb:free()
    end
    kb:free()
    return #bad == 0 and "ok" or table.concat(bad, "\n")
  ]]

  H.gpu_it("tiles of 8 and of 16 items a thread (GPUREDUCE_RUNS_ITEMS): every edge against a reference #slow", function()
    for _, items in ipairs({ 8, 16 }) do
      local ok, code, out = H.run_lua(string.format(
        "local gr = require 'gpureduce'\nassert(gr.backend() == 'cuda')\nio.write((load(%q))(gr, %d))", TILES_BODY,
        items), "GPUREDUCE_RUNS_ITEMS=" .. items)
      assert(ok, "GPUREDUCE_RUNS_ITEMS=" .. items .. ": the child exited " .. tostring(code) .. ":\n" .. out)
      assert.are.equal("ok", out, "GPUREDUCE_RUNS_ITEMS=" .. items)
    end
  end)
end)

---------------------------------------------------------------------------------------------------

describe("gr.reduce_by_key: the two-result ops", function()
  for _, where in ipairs(PLACES) do
    place_it(where, "argmin, argmax and minmax return keys and two buffers; an index is a position in v", function()
      local kb = buffer_of({ 2, 1, 2, 1, 2, 1 }, "int32", where)
      local vb = buffer_of({ 5, 3, 7, 3, 7, 1 }, "int32", where)
      local keys, vals, idx = gr.reduce_by_key(kb, vb, { op = "argmin" })
      assert.are.same({ 1, 2 }, keys:totable())
      assert.are.same({ 1, 5 }, vals:totable())
      assert.are.same({ 6, 1 }, idx:totable())
      assert.are.same({ "int32", "int64" }, { vals:dtype(), idx:dtype() })
      -- ties: key 1's 3 at 2 and 4, key 2's 7 at 3 and 5: the first in v's order
      keys, vals, idx = gr.reduce_by_key(kb, vb, { op = "argmax" })
      assert.are.same({ 3, 7 }, vals:totable())
      assert.are.same({ 2, 3 }, idx:totable())
      local lo, hi
      keys, lo, hi = gr.reduce_by_key(kb, vb, { op = "minmax" })
      assert.are.same({ 1, 2 }, keys:totable())
      assert.are.same({ 1, 5 }, lo:totable())
      assert.are.same({ 3, 7 }, hi:totable())
    end)

    place_it(where, "NaN and signed zeros: the first NaN wins, and a tie of 0.0 and -0.0 keeps the first", function()
      local kb = buffer_of({ 1, 1, 1, 2, 2, 2 }, "uint8", where)
      local vb = buffer_of({ 0.0, -0.0, 3.0, 5.0, 0 / 0, 0 / 0 }, "float64", where)
      local _, vals, idx = gr.reduce_by_key(kb, vb, { op = "argmin" })
      local v = vals:totable()
      assert.are.equal(0.0, v[1])
      assert.is_true(1 / v[1] > 0, "the value must be the element chosen: +0.0")
      assert.is_true(v[2] ~= v[2])
      assert.are.same({ 1, 5 }, idx:totable())
      _, vals, idx = gr.reduce_by_key(kb, vb, { op = "argmax" })
      assert.are.same({ 3, 5 }, idx:totable())
      local _, lo, hi = gr.reduce_by_key(kb, vb, { op = "minmax" })
      assert.is_true(lo[2] ~= lo[2] and hi[2] ~= hi[2])
      assert.are.same({ 0.0, 3.0 }, { lo[1], hi[1] })
    end)
  end
end)

---------------------------------------------------------------------------------------------------

describe("gr.reduce_by_key with opts.ops", function()
  for _, where in ipairs(PLACES) do
    place_it(where, "keys and a table by op name, each entry the single call's bytes", function()
      local bad = {}
      local all = table.move(R.OP_ORDER, 1, #R.OP_ORDER, 1, {})
      local lists = { all, { "sum", "argmin", "minmax", "count" }, { "mean" } }
      for _, data in ipairs({ { "float32", "tricky" }, { "int16", "wide" } }) do
        local keys, values = make_case("int32", data[1], 3000, "zipf", 60, "grouped", data[2])
        local kb, vb = buffer_of(keys, "int32", where), buffer_of(values, data[1], where)
        for li, list in ipairs(lists) do
          for _, sorted in ipairs({ false, true }) do
            local label = string.format("%s values, list %d, sorted %s", data[1], li, tostring(sorted))
            local r = table.pack(pcall(gr.reduce_by_key, kb, vb, { ops = list, sorted = sorted }))
            if not r[1] then
              bad[#bad + 1] = label .. ": raised " .. tostring(r[2])
            elseif r.n ~= 3 or type(r[3]) ~= "table" then
              bad[#bad + 1] = label .. ": expected the keys and a table"
            else
              local got = r[3]
              local names = 0
              for _ in pairs(got) do names = names + 1 end
              if names ~= #list then bad[#bad + 1] = string.format("%s: %d entries for %d ops", label, names, #list) end
              for _, op in ipairs(list) do
                local single = assert(by_key(kb, vb, { op = op, sorted = sorted }))
                if first_difference(single[1], r[2]) then bad[#bad + 1] = label .. ": keys differ from the single " .. op end
                local entry = got[op]
                local as_call = { n = single.n, single[1] }
                if TWO[op] then
                  if type(entry) ~= "table" then
                    bad[#bad + 1] = label .. ": " .. op .. " must be a table of two buffers"
                    entry = {}
                  end
                  as_call[2], as_call[3] = entry[1], entry[2]
                else
                  as_call[2] = entry
                end
                local ok = true
                for i = 2, single.n do ok = ok and is_buffer(as_call[i]) end
                local same, why = false, "not buffers"
                if ok then same, why = same_results(as_call, single) end
                if not same then bad[#bad + 1] = label .. ": " .. op .. " is not the single call's: " .. why end
              end
            end
          end
        end
      end
      report(bad)
    end)
  end
end)

---------------------------------------------------------------------------------------------------

describe("gr.reduce_by_key: count", function()
  for _, where in ipairs(PLACES) do
    place_it(where, "counts the non-zero values per key: NaN counts, 0.0 and -0.0 do not", function()
      local kb = buffer_of({ 1, 1, 1, 2, 2, 3, 1 }, "int32", where)
      local vb = buffer_of({ 0.0, -0.0, 0 / 0, 0.0, 0.0, 5.0, 2.0 }, "float32", where)
      local keys, counts = gr.reduce_by_key(kb, vb, { op = "count" })
      assert.are.same({ 1, 2, 3 }, keys:totable())
      assert.are.same({ 2, 0, 1 }, counts:totable())
      assert.are.equal("int64", counts:dtype())
      local bad = {}
      local k2, v2 = make_case("uint16", "int8", 4000, "zipf", 100, "shuffled", "tricky")
      release(run_case(bad, "int8 values with zeros", buffer_of(k2, "uint16", where), buffer_of(v2, "int8", where),
        builtin("count", "int8"), { op = "count" }, true))
      report(bad)
    end)
  end
end)

---------------------------------------------------------------------------------------------------

describe("gr.reduce_by_key with user operators", function()
  local function usum()
    return gr.operator { name = "bykey_sum", map = "x", reduce = "a + b", identity = "0", acc = "float64",
      cpu = { map = function(x) return x end, reduce = function(a, b) return a + b end } }
  end
  local function l2()
    return gr.operator { name = "bykey_l2", map = "x * x", reduce = "a + b", identity = "0", post = "sqrt(a)",
      acc = "float64", cpu = { map = function(x) return x * x end, reduce = function(a, b) return a + b end,
                               post = function(a) return math.sqrt(a) end } }
  end
  -- no cpu table: its kernels are the only way it runs
  local function sumsq64()
    return gr.operator { name = "bykey_sumsq", map = "x * x", reduce = "a + b", identity = "0", acc = "int64" }
  end

  --- What an operator's call must give: one float64 (or int64) buffer, each key's value from `value(group)`,
  -- exactly or within rtol.
  local function operator_want(dtype, value, rtol)
    return {
      results = 1, dtypes = { dtype },
      check = function(g, got)
        local want = value(g.values)
        if math.type(got) ~= math.type(want) then return false, "a " .. tostring(math.type(got)) .. " result" end
        if rtol and math.abs(got - want) <= rtol * math.abs(want) then return true end
        return got == want, "expected " .. show(want)
      end,
    }
  end
  local function exact_sum(vs)
    local s = 0
    for _, x in ipairs(vs) do s = s + x end
    return s
  end
  local function exact_sumsq(vs)
    local s = 0
    for _, x in ipairs(vs) do s = s + x * x end
    return s
  end

  local function operator_cases(where, ops, bad)
    local keys, small = make_case("int32", "int32", 5000, "zipf", 120, "shuffled", "tricky")
    -- small values only: every partial sum exact in float64 (the tricky set's limits would not be)
    for i, x in ipairs(small) do small[i] = x % 17 - 8 end
    local kb, ib = buffer_of(keys, "int32", where), buffer_of(small, "int32", where)
    local _, wide = make_case("int32", "float32", 5000, "zipf", 120, "shuffled", "wide")
    local fb = buffer_of(wide, "float32", where)
    for _, c in ipairs(ops) do
      release(run_case(bad, c.name, kb, c.floats and fb or ib, c.want, { op = c.op }, true))
    end
  end

  for _, where in ipairs(PLACES) do
    place_it(where, "an operator with a cpu table: per key through its kernels (device) or cpu functions (host)", function()
      local s, n2 = usum(), l2()
      if where == "device" and s:info().origin == "none" then
        pending("no NVRTC: operators are not compiled")
        return
      end
      local bad = {}
      operator_cases(where, {
        { name = "sum of small integers", op = s,
          want = operator_want("float64", function(vs) return exact_sum(vs) + 0.0 end) },
        { name = "l2 (post) of small integers", op = n2,
          want = operator_want("float64", function(vs) return math.sqrt(exact_sumsq(vs)) end, 0x1p-52) },
        { name = "sum of wide float32 values", op = s, floats = true, want = {
          results = 1, dtypes = { "float64" },
          check = function(g, got)
            local e = R.expect("sum", g.values, { dtype = "float32", acc = "float64" })
            local ok, why = R.check("sum", true, got, e)
            return ok, why and (why .. "; expected " .. e.text)
          end } },
      }, bad)
      report(bad)
    end)
  end

  H.gpu_it("an operator without cpu functions runs on device buffers", function()
    local op = sumsq64()
    if op:info().origin == "none" then
      pending("no NVRTC: operators are not compiled")
      return
    end
    local bad = {}
    operator_cases("device", { { name = "int64 sum of squares", op = op, want = operator_want("int64", exact_sumsq) } }, bad)
    report(bad)
  end)

  it("an operator without cpu functions raises on host buffers, as segments do", function()
    local kb = buffer_of({ 1, 2, 1 }, "int32", "host")
    local vb = buffer_of({ 1, 2, 3 }, "int32", "host")
    H.expect_error("cpu functions", gr.reduce_by_key, kb, vb, { op = sumsq64() })
  end)
end)

---------------------------------------------------------------------------------------------------

describe("gr.reduce_by_key with sorted = true", function()
  for _, where in ipairs(PLACES) do
    place_it(where, "keys in runs, ascending or not: the same results as without sorted", function()
      local bad = {}
      for _, kd in ipairs({ "int8", "uint16", "int32", "int64", "uint64", "bool" }) do
        for _, layout in ipairs({ "grouped", "ascending" }) do
          for _, set in ipairs({ "wide", "tricky" }) do
            local keys, values, scale = make_case(kd, "float32", 3000, "zipf", 80, layout, set)
            local kb, vb = buffer_of(keys, kd, where), buffer_of(values, "float32", where)
            for _, op in ipairs({ "sum", "argmin", "minmax", "mean", "count", "var" }) do
              local label = string.format("%s keys %s, %s values, %s", kd, layout, set, op)
              local plain = by_key(kb, vb, { op = op })
              local sorted = run_case(bad, label, kb, vb, builtin(op, "float32", scale), { op = op, sorted = true }, true)
              if plain and sorted then
                local ok, why = same_results(sorted, plain)
                if not ok then bad[#bad + 1] = label .. ": sorted = true changed the results: " .. why end
              end
              release(plain)
              release(sorted)
            end
          end
        end
      end
      report(bad)
    end)

    place_it(where, "keys that are not grouped raise with sorted = true, naming sorted", function()
      local cases = {
        { "int32", { 1, 2, 1 } },
        { "int32", { 5, 5, 6, 6, 5 } },
        { "int8", { 1, 2, 3, 4, 2 } },              -- ascending but for the last
        { "uint64", { -1, 0, -1 } },
        { "bool", { true, false, true } },
      }
      local drawn = make_case("int32", "float32", 2000, "uniform", 30, "shuffled", "wide")
      cases[#cases + 1] = { "int32", drawn }
      for _, c in ipairs(cases) do
        local kb = buffer_of(c[2], c[1], where)
        local vb = gr.buffer(#c[2], "float32", { where = where }):fill(1)
        refuses({ "sorted" }, gr.reduce_by_key, kb, vb, { op = "sum", sorted = true })
        -- without sorted the same keys are fine
        assert(by_key(kb, vb, { op = "sum" }))
      end
    end)
  end

  H.gpu_it("results of calls in a row are buffers of their own: a write to one changes no other", function()
    -- small calls hand back the head of the pass's buffers, larger ones copies of their own; either way
    -- every result must own its elements
    for _, n in ipairs({ 40, 5000, 300000 }) do
      local kt, vt = {}, {}
      for i = 1, n do kt[i], vt[i] = (i - 1) // 4, i % 7 end
      local kb, vb = gr.buffer(kt, "int32"), gr.buffer(vt, "float32")
      local held = H.held()
      local k1, s1 = gr.reduce_by_key(kb, vb, { op = "sum", sorted = true })
      local k2, s2 = gr.reduce_by_key(kb, vb, { op = "sum", sorted = true })
      local m = (n + 3) // 4
      assert.are.equal(m, #k1)
      assert.are.equal(m, #s2)
      s1:fill(-1)
      k1:fill(-1)
      local ks, ss = k2:totable(), s2:totable()
      for g = 1, m do
        local want = 0
        for i = 4 * g - 3, math.min(4 * g, n) do want = want + vt[i] end
        assert(ks[g] == g - 1 and ss[g] == want,
          string.format("n = %d, key %d: got %s, %s after writing into the first call's results", n, g, ks[g], ss[g]))
      end
      assert.are.equal(-1.0, s1:get(m))
      assert.are.equal(-1, k1:get(1))
      -- the results are ordinary inputs, and nothing stays held once they are dropped
      assert.are.equal(gr.sum(vb), gr.sum(s2))
      k1, s1, k2, s2 = nil, nil, nil, nil
      assert.are.equal(held, H.held())
    end
  end)
end)

---------------------------------------------------------------------------------------------------

describe("gr.reduce_by_key with opts.out", function()
  for _, where in ipairs(PLACES) do
    place_it(where, "results go to the first m elements, and come back as views of those m elements", function()
      local kb = buffer_of({ 5, 2, 5, 9, 2 }, "int32", where)
      local vb = buffer_of({ 1, 2, 3, 4, 5 }, "float64", where)
      local ko = gr.buffer(8, "int32", { where = where }):fill(-7)
      local vo = gr.buffer(8, "float64", { where = where }):fill(-7)
      local rk, rv = gr.reduce_by_key(kb, vb, { op = "sum", out = { ko, vo } })
      assert.are.same({ 3, 3 }, { #rk, #rv })
      assert.are.same({ 2, 5, 9 }, rk:totable())
      assert.are.same({ 7.0, 4.0, 4.0 }, rv:totable())
      assert.are.same({ 2, 5, 9, -7, -7, -7, -7, -7 }, ko:totable())
      assert.are.same({ 7.0, 4.0, 4.0, -7.0, -7.0, -7.0, -7.0, -7.0 }, vo:totable())
      -- views: a write through them lands in the given buffers
      rk[2] = 42
      rv[1] = 0.5
      assert.are.same({ 42, 0.5 }, { ko[2], vo[1] })

      local exact = { gr.buffer(3, "int32", { where = where }), gr.buffer(3, "float64", { where = where }) }
      rk, rv = gr.reduce_by_key(kb, vb, { op = "max", out = exact })
      assert.are.same({ 2, 5, 9 }, rk:totable())
      assert.are.same({ 5.0, 3.0, 4.0 }, exact[2]:totable())

      local io = gr.buffer(5, "int64", { where = where }):fill(-1)
      local rvals, ridx
      rk, rvals, ridx = gr.reduce_by_key(kb, vb, { op = "argmin", out = { ko, vo, io } })
      assert.are.same({ 3, 3, 3 }, { #rk, #rvals, #ridx })
      assert.are.same({ 2.0, 1.0, 4.0 }, rvals:totable())
      assert.are.same({ 2, 1, 4, -1, -1 }, io:totable())
      local lo = gr.buffer(4, "float64", { where = where })
      local hi = gr.buffer(3, "float64", { where = where })
      local _, rlo, rhi = gr.reduce_by_key(kb, vb, { op = "minmax", out = { ko, lo, hi } })
      assert.are.same({ 2.0, 1.0, 4.0 }, rlo:totable())
      assert.are.same({ 5.0, 3.0, 4.0 }, rhi:totable())
    end)

    place_it(where, "out gives the bytes of a call without it, for drawn data and every layout", function()
      local bad = {}
      for _, layout in ipairs({ "shuffled", "grouped" }) do
        local keys, values, scale = make_case("uint32", "float32", 4000, "zipf", 300, layout, "wide")
        local kb, vb = buffer_of(keys, "uint32", where), buffer_of(values, "float32", where)
        for _, op in ipairs({ "sum", "argmax", "mean" }) do
          local opts = { op = op, sorted = layout == "grouped" or nil }
          local d1, d2 = result_dtypes(op, "float32")
          local out = { gr.buffer(4000, "uint32", { where = where }), gr.buffer(4000, d1, { where = where }) }
          if d2 then out[3] = gr.buffer(4000, d2, { where = where }) end
          local plain = by_key(kb, vb, opts)
          opts.out = out
          local label = layout .. " " .. op .. " into out"
          local res = run_case(bad, label, kb, vb, builtin(op, "float32", scale), opts, false)
          if res and plain then
            local ok, why = same_results(res, plain)
            if not ok then bad[#bad + 1] = label .. ": " .. why end
          end
        end
      end
      report(bad)
    end)

    place_it(where, "out buffers with fewer than m elements raise, naming out", function()
      local kb = buffer_of({ 5, 2, 5, 9, 2 }, "int32", where)
      local vb = buffer_of({ 1, 2, 3, 4, 5 }, "float64", where)
      local function b(n, d) return gr.buffer(n, d, { where = where }) end
      refuses({ "out" }, gr.reduce_by_key, kb, vb, { op = "sum", out = { b(2, "int32"), b(3, "float64") } })
      refuses({ "out" }, gr.reduce_by_key, kb, vb, { op = "sum", out = { b(3, "int32"), b(2, "float64") } })
      refuses({ "out" }, gr.reduce_by_key, kb, vb,
        { op = "argmin", out = { b(3, "int32"), b(3, "float64"), b(2, "int64") } })
      refuses({ "out" }, gr.reduce_by_key, kb, vb,
        { op = "minmax", out = { b(3, "int32"), b(1, "float64"), b(3, "float64") } })
    end)
  end
end)

---------------------------------------------------------------------------------------------------

describe("gr.reduce_by_key: determinism", function()
  --- n pairs over `d` keys whose values, per key, are one fixed sequence; `seed` only interleaves the keys.
  local function interleaved(d, n, seed)
    local rng = R.rng(seed_of("interleave", d, n))
    local pool = key_pool(rng, "int32", d)
    local rank = zipf_picker(rng, d, 1.1)
    local labels, per_key = {}, {}
    for i = 1, n do
      local k = pool[rank()]
      labels[i] = k
      per_key[k] = per_key[k] or {}
      per_key[k][#per_key[k] + 1] = wide_value(rng, "float32")
    end
    shuffle(R.rng(seed), labels)
    local next_of, values = {}, {}
    for i, k in ipairs(labels) do
      next_of[k] = (next_of[k] or 0) + 1
      values[i] = per_key[k][next_of[k]]
    end
    return labels, values
  end

  for _, where in ipairs(PLACES) do
    place_it(where, "run_to_run: the same bits on every call, and on re-interleaved data with the same values per key",
      function()
        local bad = {}
        -- argmin/argmax are left out: re-interleaving moves the positions their indices give
        local ops = { "sum", "mean", "var", "std", "norm", "sumsq", "asum", "nansum", "nanmean", "prod", "minmax" }
        local datasets = {}
        for s = 1, 3 do datasets[s] = { interleaved(150, 20000, s) } end
        for _, op in ipairs(ops) do
          local first
          for s, data in ipairs(datasets) do
            for round = 1, 3 do
              -- fresh buffers each round: the same data elsewhere in memory
              local kb, vb = buffer_of(data[1], "int32", where), buffer_of(data[2], "float32", where)
              for rep = 1, 2 do
                local res = assert(by_key(kb, vb, { op = op }))
                if not first then
                  first = res
                else
                  local ok, why = same_results(res, first)
                  if not ok then
                    bad[#bad + 1] = string.format("%s: interleaving %d, round %d, call %d: %s", op, s, round, rep, why)
                  end
                  release(res)
                end
              end
              kb:free()
              vb:free()
            end
          end
          release(first)
        end
        report(bad)
      end)

    place_it(where, "gpu_to_gpu: each key's float sum is gr.reduce's gpu_to_gpu sum of the key's values", function()
      local bad = {}
      for _, vd in ipairs({ "float32", "float64", "float16", "bfloat16" }) do
        local keys, values = make_case("int32", vd, 8000, "zipf", 80, "shuffled", "wide")
        local kb, vb = buffer_of(keys, "int32", where), buffer_of(values, vd, where)
        local opts = { op = "sum", determinism = "gpu_to_gpu" }
        local res, groups = run_case(bad, vd .. " gpu_to_gpu", kb, vb, builtin("sum", vd), opts, true)
        if res then
          local got = flat(res[2])
          for g, group in ipairs(groups) do
            local gb = buffer_of(group.values, vd, where)
            local want = gr.reduce(gb, opts)
            if not same_value(got[g], want) then
              bad[#bad + 1] = string.format("%s key %d (%d values): %a, gr.reduce gives %a", vd, g, #group.values,
                got[g], want)
              break
            end
            gb:free()
          end
        end
      end
      report(bad)
    end)
  end

  H.gpu_it("gpu_to_gpu: device and host buffers give the same bits", function()
    for _, vd in ipairs({ "float32", "float64", "bfloat16" }) do
      local keys, values = make_case("int64", vd, 30000, "zipf", 500, "shuffled", "wide")
      local opts = { op = "sum", determinism = "gpu_to_gpu" }
      local d = assert(by_key(buffer_of(keys, "int64", "device"), buffer_of(values, vd, "device"), opts))
      local h = assert(by_key(buffer_of(keys, "int64", "host"), buffer_of(values, vd, "host"), opts))
      local ok, why = same_results(d, h)
      assert(ok, vd .. ": " .. tostring(why))
    end
  end)
end)

---------------------------------------------------------------------------------------------------

describe("gr.reduce_by_key on both backends", function()
  -- Run where the data is made by random (the same bits on every backend); returns a line per call with
  -- a hash of each result's bytes. Only ops whose bits are fixed by the spec are compared: integer data,
  -- float extremes and counts, and float sums at gpu_to_gpu.
  local BODY = [[
    local gr = ...
    local function hash(s)
      local h = 0xcbf29ce484222325
      for i = 1, #s do h = (h ~ s:byte(i)) * 0x100000001b3 end
      return string.format("%016x", h)
    end
    local lines = {}
    local k = gr.buffer(40000, "int16"):random(21, -300, 300)
    local cases = {
      { "int32", -1000, 1000, gr.ops() },
      { "float32", -1, 1, { "min", "max", "argmin", "argmax", "minmax", "count", "and", "or", "nanmin", "nanmax",
                            "absmax", "sum" } },
    }
    for _, c in ipairs(cases) do
      local v = gr.buffer(40000, c[1]):random(22, c[2], c[3])
      for _, op in ipairs(c[4]) do
        local opts = { op = op }
        if c[1] == "float32" and op == "sum" then opts.determinism = "gpu_to_gpu" end
        local r = table.pack(gr.reduce_by_key(k, v, opts))
        local line = { c[1], op }
        for i = 1, r.n do line[#line + 1] = r[i]:dtype() .. ":" .. #r[i] .. ":" .. hash(r[i]:tobytes()) end
        lines[#lines + 1] = table.concat(line, " ")
      end
    end
    return table.concat(lines, "\n")
  ]]

  H.gpu_it("the cpu backend (a child process) gives the GPU's bits where the spec fixes them", function()
    local mine = assert(load(BODY))(gr)
    local ok, code, out = H.run_lua(string.format(
      "local gr = require 'gpureduce'\nassert(gr.backend() == 'cpu')\nio.write((load(%q))(gr))", BODY),
      "GPUREDUCE_BACKEND=cpu")
    assert(ok, "the child exited " .. tostring(code) .. ":\n" .. out)
    local theirs = {}
    for line in out:gmatch("[^\n]+") do theirs[#theirs + 1] = line end
    local i = 0
    for line in mine:gmatch("[^\n]+") do
      i = i + 1
      assert.are.equal(line, theirs[i], "the GPU's line, then the cpu backend's")
    end
    assert.are.equal(i, #theirs)
  end)
end)

---------------------------------------------------------------------------------------------------

describe("gr.reduce_by_key: errors name the argument", function()
  for _, where in ipairs(PLACES) do
    place_it(where, "float keys, other lengths, non-buffers, an unknown op", function()
      local function b(list, d) return buffer_of(list, d, where) end
      local vb = b({ 1, 2, 3, 4 }, "float32")
      for _, fd in ipairs(FLOAT_DTYPES) do
        refuses({ "keys" }, gr.reduce_by_key, gr.buffer(4, fd, { where = where }), vb, { op = "sum" })
      end
      refuses(EITHER_NAMES, gr.reduce_by_key, b({ 1, 2, 3 }, "int32"), vb, { op = "sum" })
      refuses(EITHER_NAMES, gr.reduce_by_key, b({ 1, 2, 3, 4, 5 }, "int32"), vb, { op = "sum" })
      for _, bad in ipairs({ { 1, 2, 3, 4 }, 5, "x", false }) do
        refuses(KEYS_NAMES, gr.reduce_by_key, bad, vb, { op = "sum" })
      end
      local kb = b({ 1, 2, 1, 2 }, "int32")
      for _, bad in ipairs({ { 1, 2, 3, 4 }, 5, "x" }) do
        refuses(VALUES_NAMES, gr.reduce_by_key, kb, bad, { op = "sum" })
      end
      local err = refuses({ "op" }, gr.reduce_by_key, kb, vb, { op = "nosuchop" })
      assert(err:find("nosuchop", 1, true), err)
      refuses({ "sorted" }, gr.reduce_by_key, b({ 1, 2, 1, 2 }, "int32"), vb, { op = "sum", sorted = true })
      refuses({ "out" }, gr.reduce_by_key, kb, vb,
        { op = "sum", out = { gr.buffer(1, "int32", { where = where }), gr.buffer(1, "float32", { where = where }) } })
    end)
  end

  H.gpu_it("keys and values on different sides", function()
    local kd, kh = buffer_of({ 1, 2 }, "int32", "device"), buffer_of({ 1, 2 }, "int32", "host")
    local vd, vh = buffer_of({ 1, 2 }, "float32", "device"), buffer_of({ 1, 2 }, "float32", "host")
    refuses(EITHER_NAMES, gr.reduce_by_key, kd, vh, { op = "sum" })
    refuses(EITHER_NAMES, gr.reduce_by_key, kh, vd, { op = "sum" })
  end)
end)

---------------------------------------------------------------------------------------------------

describe("gr.reduce_by_key: the example of docs/api.md", function()
  it("sums, argmax and ops per key", function()
    local k = gr.buffer({ 3, 1, 3, 2, 1, 3 }, "int32")
    local v = gr.buffer({ 1.5, 2.0, 0.5, 4.0, -1.0, 2.0 }, "float32")
    local keys, sums = gr.reduce_by_key(k, v, { op = "sum" })
    assert.are.same({ 1, 2, 3 }, keys:totable())
    assert.are.same({ 1.0, 4.0, 4.0 }, sums:totable())
    local _, best, at = gr.reduce_by_key(k, v, { op = "argmax" })
    assert.are.same({ 2.0, 4.0, 2.0 }, best:totable())
    assert.are.same({ 2, 4, 6 }, at:totable())
    local _, r = gr.reduce_by_key(k, v, { ops = { "count", "mean" } })
    assert.are.same({ 2, 1, 3 }, r.count:totable())
    assert.are.same({ 0.5, 4.0, R.to_f32(4 / 3) }, r.mean:totable())
  end)
end)

---------------------------------------------------------------------------------------------------

describe("gr.reduce_by_key: fuzz", function()
  local SIZES = { 0, 1, 2, 3, 5, 8, 15, 16, 17, 31, 32, 33, 64, 100, 127, 128, 129, 255, 256, 257, 1000, 1023, 1024,
                  1025, 4095, 4096, 4097, 10000, 30000 }

  --- A buffer of the list that is a slice `skew` elements into a longer one (unaligned starts), whose other
  -- elements would change the results if they were read.
  local function sliced(list, dtype, where, skew)
    local parent = gr.buffer(#list + skew + 3, dtype, { where = where }):fill(R.DTYPES[dtype].bool and true or 1)
    if #list > 0 then parent:set(list, skew + 1) end
    return parent:slice(skew + 1, #list)
  end

  for _, where in ipairs(PLACES) do
    place_it(where, string.format("fuzz: %d cases (GPUREDUCE_FUZZ_SEED=%d)", FUZZ_CASES, FUZZ_SEED), function()
      local bad = {}
      for index = 1, FUZZ_CASES do
        local rng = R.rng(R.case_seed(FUZZ_SEED, index))
        local kd, vd, op = rng:pick(KEY_DTYPES), rng:pick(gr.dtypes()), rng:pick(R.OP_ORDER)
        local dist = rng:pick({ "uniform", "uniform", "zipf", "zipf", "one", "distinct", "extremes" })
        local d = rng:pick({ 1, 2, 3, 7, 16, 100, 1000, 5000 })
        local n = rng:pick(SIZES)
        if dist == "distinct" then n = math.min(n, span(kd)) end
        local layout = rng:pick({ "shuffled", "shuffled", "grouped", "ascending" })
        local sorted = layout ~= "shuffled" and rng:chance(0.6) or nil
        local set = rng:pick({ "wide", "tricky" })
        local keys, values, scale = make_case(kd, vd, n, dist, d, layout, set, "fuzz" .. FUZZ_SEED .. ":" .. index)
        local kb = sliced(keys, kd, where, rng:range(0, 7))
        local vb = sliced(values, vd, where, rng:range(0, 7))
        local opts = { op = op, sorted = sorted }
        if rng:chance(0.2) then
          -- room for every key, and some to spare that must stay as it was
          local room = n + rng:range(0, 5)
          local d1, d2 = result_dtypes(op, vd)
          opts.out = { gr.buffer(room, kd, { where = where }), gr.buffer(room, d1, { where = where }) }
          if d2 then opts.out[3] = gr.buffer(room, d2, { where = where }) end
        end
        local label = string.format("case %d (GPUREDUCE_FUZZ_SEED=%d): %s keys %s/%s/%s, %s %s values, n=%d %s", index,
          FUZZ_SEED, kd, dist, tostring(d), layout, set, vd, n, H.describe_opts(opts))
        release(run_case(bad, label, kb, vb, builtin(op, vd, scale), opts, true))
        if #bad > 12 then break end
      end
      report(bad)
    end)
  end
end)
