--[[
several_inputs_spec.lua -- user operators of several inputs: gr.operator{inputs = {...}} and
gr.reduce({a, w, ...}, {op = op}), against a reference written here.

What it checks
  - gr.operator's `inputs`: 1 to 8 distinct C identifiers other than `i`; without the field an operator
    has one input named x. Each refusal names the field.
  - A catalogue of operators -- a weighted sum, a masked sum, a max of products, a squared distance,
    x * y + z, a map that reads the index i, a mean of products with post (a / n), a weighted mean in a
    struct accumulator, a product sum that wraps in uint64, eight inputs -- over whole buffers of 0 to
    65539 elements (and 1000003 on the GPU) whose inputs start at different offsets from a 16-byte
    boundary; per segment and per CSR offsets (empty segments: the identity or post's value of it; i
    from each segment's start, n its length; out); along axes of 2-D and 3-D views (each axis, sets of
    them, negative, keepdims, out, an empty axis); transposed, permuted and narrowed views read in
    their row-major order, i that ordinal (within each row along axes).
  - Every dtype in both positions of the weighted sum and of the wrapping product sum (integers over
    their whole range), and as the mask of the masked sum (non-zero patterns whose low bytes are all
    zero, -0.0, NaN); inputs of different dtypes; every element converted to the accumulator's dtype
    before map (floats truncated into int64, uint64 past 2^63 and int64 past 2^53 rounded into
    float64), and cpu.map's arguments: the inputs in order, converted, then i.
  - NaN, infinities and signed zeros as C's arithmetic gives them; floats of full precision within the
    accumulator's bound of the exact sum; async; the refusals, each naming what it refuses.
  - Every call leaves its inputs' bytes as they were, and the memory around them (each input is a
    slice of a longer buffer whose other elements would change the result if read).
  Values are small integers, also in the float dtypes, so every product and partial sum is exact and
  the answer is one number in any order: results are compared exactly (a zero's sign only where it is
  the point).

How it runs
  Each test runs twice: through the operator's cpu functions (every buffer on the cpu backend, host
  buffers on a GPU machine), and through the kernels on device buffers (tagged gpu: pending without a
  CUDA device). The tests of a compile at creation are pending without NVRTC. The last block is a
  differential fuzz: random operators of the catalogue, dtypes per input, sizes, offsets and paths
  (whole buffers, async, segments, offsets, axes, strided views).

Reproducing
  Deterministic (fixed seeds): `busted spec/several_inputs_spec.lua`.
  GPUREDUCE_INPUTS_FUZZ_CASES  fuzz cases per path (default 200)
  GPUREDUCE_FUZZ_SEED          the fuzz's seed (default 20261130)
  e.g.  GPUREDUCE_FUZZ_SEED=7 GPUREDUCE_INPUTS_FUZZ_CASES=2000 busted --filter=fuzz spec/several_inputs_spec.lua
  A fuzz case depends only on (seed, case index); a failure prints both.
]]
local gr = require "gpureduce"
local H = require("support.helpers").bind(it, function(reason) pending(reason) end)

local function env_int(name, default)
  return math.tointeger(tonumber(os.getenv(name) or "")) or default
end

local FUZZ_CASES = env_int("GPUREDUCE_INPUTS_FUZZ_CASES", 200)
local FUZZ_SEED = env_int("GPUREDUCE_FUZZ_SEED", 20261130)

-- where the cpu functions run: every buffer on the cpu backend, host buffers on a GPU machine
local CPU_SIDE = gr.backend() == "cuda" and "host" or "device"

local SIZES = { 0, 1, 3, 15, 16, 17, 1000, 4097, 65539 }
-- elements before each input's first in its longer buffer (cycled over the inputs): equal offsets from a
-- 16-byte boundary, and different ones
local SKEWS = { { 0, 0, 0 }, { 1, 1, 1 }, { 0, 1, 2 }, { 3, 0, 5 }, { 7, 2, 0 } }

local inf, nan = math.huge, 0 / 0

---------------------------------------------------------------------------------------------------
-- dtypes and values

--- What a dtype is, from its name: "bool", "float" (float16, bfloat16 and the FP8 formats too),
-- "unsigned" or "signed".
local function kind(d)
  if d == "bool" then return "bool" end
  if d:find("float", 1, true) then return "float" end
  return d:sub(1, 1) == "u" and "unsigned" or "signed"
end

local function int_bits(d) return tonumber(d:match("%d+")) end

local ALL_DTYPES = gr.dtypes()
local INT_DTYPES = {}                  -- integers and bool: what a uint64 accumulator takes exactly
for _, d in ipairs(ALL_DTYPES) do
  if kind(d) ~= "float" then INT_DTYPES[#INT_DTYPES + 1] = d end
end
-- the dtypes the struct operator's map casts with double(x): its C++ needs no conversion of a
-- 16- or 8-bit float class
local STRUCT_DTYPES = { "float32", "float64", "int8", "int16", "int32", "uint8", "uint16" }

-- the float dtypes that hold infinities (float8_e4m3 has none: storing one is refused)
local HAS_INF = {}
for _, d in ipairs(ALL_DTYPES) do
  if kind(d) == "float" then HAS_INF[d] = (pcall(gr.buffer, { inf }, d)) end
end

--- A small integer for dtype d: exact in every format (float8_e5m2 holds the integers to 8), and so are
-- products and sums of them in a double.
local function small(d, rng)
  local k = kind(d)
  if k == "bool" then return rng(0, 1) end
  if k == "unsigned" then return rng(0, 8) end
  local v = rng(-8, 8)
  return k == "float" and v + 0.0 or v
end

--- Any value of an integer dtype (a uint64 as the Lua integer of its bits); bool 0 or 1.
local function whole(d, rng)
  local k = kind(d)
  if k == "bool" then return rng(0, 1) end
  local bits = int_bits(d)
  if bits == 64 then return H.bits64(rng) end
  if k == "unsigned" then return rng(0, (1 << bits) - 1) end
  return rng(-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
end

--- Mask elements of dtype d: zeros (-0.0 among them), and non-zeros that a mask read as its low byte or
-- word would miss (256, 2^32, the top bit alone), a small power of two (2^-9: FP8's smallest), NaN.
local function mask_patterns(d)
  local k = kind(d)
  if k == "bool" then return { 0, 1 } end
  if k == "float" then return { 0.0, 0.0, -0.0, 1.0, -2.0, 2.0 ^ -9, nan } end
  local bits = int_bits(d)
  local t = { 0, 0, 1, k == "signed" and -1 or 2 }
  t[#t + 1] = k == "signed" and -(1 << (bits - 1)) or 1 << (bits - 1)
  if bits > 8 then t[#t + 1] = 256 end
  if bits > 32 then t[#t + 1] = 1 << 32 end
  return t
end

local function f32(x) return (string.unpack("<f", string.pack("<f", x))) end

--- An element as map sees it: converted to the accumulator's dtype when that is a dtype -- integers
-- rounded once into a float (a uint64 from its bits), floats truncated toward zero into an integer --
-- and in its own type for a struct accumulator.
local function to_acc(v, d, acc)
  if acc == "float64" or acc == "float32" then
    local f = v
    if math.type(v) == "integer" then
      -- a uint64 from 2^63 on is a negative Lua integer: halve it, keeping the lost bit so that the
      -- one rounding is still right
      f = (d == "uint64" and v < 0) and ((v >> 1) | (v & 1)) * 2.0 or v + 0.0
    end
    return acc == "float32" and f32(f) or f
  elseif acc == "int64" or acc == "uint64" then
    if math.type(v) == "float" then return math.tointeger(v < 0 and math.ceil(v) or math.floor(v)) end
    return v
  end
  return v
end

local function bits(x) return (string.unpack("<i8", string.pack("<d", x))) end

local function show(v)
  if math.type(v) == "float" then return string.format("%.17g", v) end
  return tostring(v)
end

--- got is want: the same kind of number and value, NaN for NaN; a zero of either sign for a zero (the
-- sign is checked where it is the point).
local function same(got, want)
  if want ~= want then return type(got) == "number" and got ~= got end
  return math.type(got) == math.type(want) and got == want
end

local function range(first, count)
  local t = {}
  for k = 1, count do t[k] = first + k - 1 end
  return t
end

---------------------------------------------------------------------------------------------------
-- the catalogue: each operator in C, its cpu functions, and the Lua that is the reference's statement
-- of it (the same map, reduce and post, fed by to_acc rather than by the engine)

local function add(a, b) return a + b end
local function float_zero() return 0.0 end

local OPS, ORDER = {}, {}

local function entry(e)
  e.identity = e.identity or float_zero
  e.reduce = e.reduce or add
  OPS[e.spec.name] = e
  if not e.extra then ORDER[#ORDER + 1] = e end
  return e
end

entry {
  spec = { name = "wsum", inputs = { "x", "w" }, map = "x * w", reduce = "a + b", identity = "0", acc = "float64" },
  map = function(x, w) return x * w end,
  dtypes = { "float32", "float32" },
}
entry {
  spec = { name = "masked", inputs = { "x", "mask" }, map = "mask != 0 ? x : 0.0", reduce = "a + b", identity = "0",
           acc = "float64" },
  map = function(x, mask) return mask ~= 0 and x or 0.0 end,
  dtypes = { "float32", "uint8" },
  draw = function(j, d, rng)
    if j == 1 then return small(d, rng) end
    local p = mask_patterns(d)
    return p[rng(#p)]
  end,
}
entry {
  spec = { name = "maxprod", inputs = { "p", "q" }, map = "p * q", reduce = "a > b ? a : b", identity = "-INFINITY",
           acc = "float64" },
  map = function(p, q) return p * q end,
  reduce = function(a, b) return a > b and a or b end,
  identity = function() return -inf end,
  dtypes = { "int16", "float32" },
}
entry {
  spec = { name = "sqdist", inputs = { "left", "right" }, map = "(left - right) * (left - right)", reduce = "a + b",
           identity = "0", acc = "float64" },
  map = function(l, r) return (l - r) * (l - r) end,
  dtypes = { "float64", "bfloat16" },
}
entry {
  spec = { name = "fma3", inputs = { "x", "y", "z" }, map = "x * y + z", reduce = "a + b", identity = "0",
           acc = "float64" },
  map = function(x, y, z) return x * y + z end,
  dtypes = { "float32", "int8", "bfloat16" },
}
entry {
  spec = { name = "every3rd", inputs = { "x", "w" }, map = "i % 3 == 0 ? x * w : 0.0", reduce = "a + b",
           identity = "0", acc = "float64" },
  map = function(x, w, i) return i % 3 == 0 and x * w or 0.0 end,
  dtypes = { "float32", "int32" },
}
entry {
  spec = { name = "pmean", inputs = { "x", "w" }, map = "x * w", reduce = "a + b", identity = "0", acc = "float64",
           post = "a / n" },
  map = function(x, w) return x * w end,
  post = function(a, n) return a / n end,
  dtypes = { "float32", "float16" },
}
entry {
  spec = { name = "wmean", inputs = { "x", "w" }, acc = "WMean", preamble = "struct WMean { double s; double w; };",
           map = "WMean{double(x) * double(w), double(w)}", reduce = "WMean{a.s + b.s, a.w + b.w}",
           identity = "WMean{0.0, 0.0}", post = "a.w != 0.0 ? a.s / a.w : 0.0" },
  map = function(x, w) return { s = x * w, w = w } end,
  reduce = function(a, b) return { s = a.s + b.s, w = a.w + b.w } end,
  identity = function() return { s = 0.0, w = 0.0 } end,
  post = function(a) return a.w ~= 0 and a.s / a.w or 0.0 end,
  cpu_identity = true,                 -- the host cannot read a struct's identity
  dtypes = { "float32", "int8" },
  only = STRUCT_DTYPES,
}
entry {
  spec = { name = "wrap", inputs = { "x", "w" }, map = "x * w", reduce = "a + b", identity = "0", acc = "uint64" },
  map = function(x, w) return x * w end,     -- Lua integers wrap as uint64 does
  identity = function() return 0 end,
  dtypes = { "int64", "uint32" },
  draw = function(_, d, rng) return whole(d, rng) end,
  only = INT_DTYPES,
}
entry {
  spec = { name = "eight", inputs = { "v1", "v2", "v3", "v4", "v5", "v6", "v7", "v8" },
           map = "v1 * v2 + v3 * v4 + v5 * v6 + v7 * v8", reduce = "a + b", identity = "0", acc = "float64" },
  map = function(v1, v2, v3, v4, v5, v6, v7, v8) return v1 * v2 + v3 * v4 + v5 * v6 + v7 * v8 end,
  dtypes = { "float32", "int8", "uint8", "bfloat16", "float16", "int32", "float64", "bool" },
}
-- for the tests of one point each, not the catalogue's loops
entry {
  extra = true,
  spec = { name = "wsum_f32", inputs = { "x", "w" }, map = "x * w", reduce = "a + b", identity = "0", acc = "float32" },
  map = function(x, w) return x * w end,
}
entry {
  extra = true,
  spec = { name = "wsum_negzero", inputs = { "x", "w" }, map = "x * w", reduce = "a + b", identity = "-0.0",
           acc = "float64" },
  map = function(x, w) return x * w end,
  identity = function() return -0.0 end,
}
entry {
  extra = true,
  spec = { name = "trunc", inputs = { "x", "w" }, map = "x * w", reduce = "a + b", identity = "0", acc = "int64" },
  map = function(x, w) return x * w end,
  identity = function() return 0 end,
}
entry {
  extra = true,       -- one input, no inputs field: today's operator
  spec = { name = "usum", map = "x", reduce = "a + b", identity = "0", acc = "float64" },
  map = function(x) return x end,
}

local made = {}

--- The catalogue entry's operator, with its cpu functions (made once).
local function op_of(e)
  if not made[e.spec.name] then
    local spec = {}
    for k, v in pairs(e.spec) do spec[k] = v end
    spec.cpu = { map = e.map, reduce = e.reduce, post = e.post, identity = e.cpu_identity and e.identity or nil }
    made[e.spec.name] = gr.operator(spec)
  end
  return made[e.spec.name]
end

--- The dtype of a segment's or an axis' results: the accumulator's, float64 with post.
local function result_dtype(e) return e.post and "float64" or e.spec.acc end

--- The reference of one result: map over the elements at positions idx of each column (i counting from
-- 0 along idx), folded from the identity, then post of it and the element count.
local function fold(e, columns, dtypes, idx)
  local acc = e.identity()
  local m = #columns
  local args = {}
  for k, at in ipairs(idx) do
    for j = 1, m do args[j] = to_acc(columns[j][at], dtypes[j], e.spec.acc) end
    args[m + 1] = k - 1
    acc = e.reduce(acc, e.map(table.unpack(args, 1, m + 1)))
  end
  if e.post then return e.post(acc, #idx) end
  return acc
end

--- n values per input of the entry, drawn by its draw (small integers by default), from Lua's generator
-- (seeded with seed when one is given).
local function columns_of(e, dtypes, n, seed)
  if seed then math.randomseed(seed) end
  local draw = e.draw or function(_, d, rng) return small(d, rng) end
  local columns = {}
  for j, d in ipairs(dtypes) do
    local t = {}
    for k = 1, n do t[k] = draw(j, d, math.random) end
    columns[j] = t
  end
  return columns
end

---------------------------------------------------------------------------------------------------
-- inputs as buffers

--- Input j as a slice that starts skews[j] elements into a longer buffer of 1s (a read outside it would
-- change the result). Returns the inputs, and their longer buffers with the bytes they hold.
local function inputs_of(columns, dtypes, where, skews)
  local set = { buffers = {}, parents = {}, bytes = {} }
  for j, values in ipairs(columns) do
    local skew = skews and skews[(j - 1) % #skews + 1] or 0
    local parent = gr.buffer(#values + skew + 3, dtypes[j], { where = where }):fill(1)
    local b = parent:slice(skew + 1, #values)
    if #values > 0 then b:set(values) end
    set.buffers[j], set.parents[j], set.bytes[j] = b, parent, parent:tobytes()
  end
  return set
end

--- nil when no input's memory changed, else which one did.
local function changed(set)
  for j, parent in ipairs(set.parents) do
    if parent:tobytes() ~= set.bytes[j] then return "input " .. j .. " (or the memory around it) was written" end
  end
  return nil
end

-- every multi-index (1-based) of lengths in row-major order (axes_reference's walk)
local each_index = require("support.axes_reference").each_index

--- The 1-based row-major position of a multi-index in shape.
local function flat(idx, shape)
  local f = 0
  for k = 1, #shape do f = f * shape[k] + idx[k] - 1 end
  return f + 1
end

local function product(shape)
  local n = 1
  for _, len in ipairs(shape) do n = n * len end
  return n
end

--- An input of shape `shape` whose elements in the view's row-major order are `values`, laid out as
-- `layout` says: "compact" (a slice `skew` elements into a longer buffer, given the shape), "permuted"
-- (a transpose of a compact buffer in 2-D, a permute{3, 1, 2} in 3-D: strided, no gaps) or "narrowed"
-- (the last axis narrowed out of a buffer 3 elements wider: rows with gaps of 1s). Returns the view and
-- the buffer under it.
local function laid_out(values, d, shape, layout, where, skew)
  local nd = #shape
  if layout == "compact" then
    local parent = gr.buffer(#values + skew + 3, d, { where = where }):fill(1)
    local b = parent:slice(skew + 1, #values)
    if #values > 0 then b:set(values) end
    return b:view(shape), parent
  end
  local storage, stored_shape = {}, {}
  if layout == "permuted" then
    local p = nd == 2 and { 2, 1 } or { 3, 1, 2 }      -- new axis k is stored axis p[k]
    for k = 1, nd do stored_shape[p[k]] = shape[k] end
    each_index(shape, function(l)
      local s = {}
      for k = 1, nd do s[p[k]] = l[k] end
      storage[flat(s, stored_shape)] = values[flat(l, shape)]
    end)
    local b = gr.buffer(#values, d, { where = where })
    if #values > 0 then b:set(storage) end
    local v = nd == 2 and b:view(stored_shape):transpose() or b:view(stored_shape):permute(p)
    return v, b
  end
  for k = 1, nd do stored_shape[k] = shape[k] end
  stored_shape[nd] = shape[nd] + 3
  for k = 1, product(stored_shape) do storage[k] = 1 end
  each_index(shape, function(l)
    local s = {}
    for k = 1, nd do s[k] = l[k] end
    s[nd] = s[nd] + 1
    storage[flat(s, stored_shape)] = values[flat(l, shape)]
  end)
  local b = gr.buffer(#storage, d, { where = where })
  if #storage > 0 then b:set(storage) end
  return b:view(stored_shape):narrow(nd, 2, shape[nd]), b
end

--- Views of every column in the layouts given (cycled over the inputs), as a set changed() checks.
local function views_of(columns, dtypes, shape, layouts, where)
  local set = { buffers = {}, parents = {}, bytes = {} }
  for j, values in ipairs(columns) do
    local v, parent = laid_out(values, dtypes[j], shape, layouts[(j - 1) % #layouts + 1], where, j % 4)
    set.buffers[j], set.parents[j], set.bytes[j] = v, parent, parent:tobytes()
  end
  return set
end

---------------------------------------------------------------------------------------------------
-- the reference of reductions along axes

--- opts.axis as the sorted list of positive axes.
local function axes_of(axis, ndim)
  local out = {}
  for _, a in ipairs(type(axis) == "table" and axis or { axis }) do out[#out + 1] = a < 0 and ndim + a + 1 or a end
  table.sort(out)
  return out
end

--- The elements each result covers (1-based row-major positions in the view): results in row-major
-- order of the kept axes, each one's elements in row-major order of the reduced axes -- so that an
-- element's place in its list, from 0, is map's i.
local function groups_of(shape, axes)
  local reduced = {}
  for _, a in ipairs(axes) do reduced[a] = true end
  local kept_axes, kept_lengths, reduced_axes, reduced_lengths = {}, {}, {}, {}
  for a = 1, #shape do
    if reduced[a] then
      reduced_axes[#reduced_axes + 1], reduced_lengths[#reduced_lengths + 1] = a, shape[a]
    else
      kept_axes[#kept_axes + 1], kept_lengths[#kept_lengths + 1] = a, shape[a]
    end
  end
  local groups = {}
  each_index(kept_lengths, function(kept)
    local full, members = {}, {}
    for k, a in ipairs(kept_axes) do full[a] = kept[k] end
    each_index(reduced_lengths, function(red)
      for k, a in ipairs(reduced_axes) do full[a] = red[k] end
      members[#members + 1] = flat(full, shape)
    end)
    groups[#groups + 1] = members
  end)
  return groups
end

--- The shape of the results: without the reduced axes ({1} when none is left), or with them at length 1.
local function result_shape(shape, axes, keepdims)
  local reduced = {}
  for _, a in ipairs(axes) do reduced[a] = true end
  local out = {}
  for a = 1, #shape do
    if keepdims then out[a] = reduced[a] and 1 or shape[a]
    elseif not reduced[a] then out[#out + 1] = shape[a] end
  end
  if #out == 0 then out[1] = 1 end
  return out
end

---------------------------------------------------------------------------------------------------
-- checks

--- Collects failures of a test and raises with the first dozen at the end.
local function failures()
  local list = {}
  local t = {}
  function t.add(label, problem)
    if problem then list[#list + 1] = label .. ": " .. problem end
  end
  function t.done()
    if #list == 0 then return end
    local shown = {}
    for k = 1, math.min(#list, 12) do shown[k] = list[k] end
    error(string.format("%d failures, the first %d:\n%s", #list, #shown, table.concat(shown, "\n")), 2)
  end
  return t
end

--- nil when the result buffer has the dtype, the shape (when given) and the values wanted, else what
-- differs.
local function result_problem(r, wants, dtype, shape)
  if r:dtype() ~= dtype then return "results of " .. r:dtype() .. ", want " .. dtype end
  if shape and table.concat(r:shape(), ",") ~= table.concat(shape, ",") then
    return string.format("result shape {%s}, want {%s}", table.concat(r:shape(), ","), table.concat(shape, ","))
  end
  if #r ~= #wants then return string.format("%d results, want %d", #r, #wants) end
  local got = r:totable(1, #r)
  for k = 1, #wants do
    if not same(got[k], wants[k]) then
      return string.format("result %d: got %s, want %s", k, show(got[k]), show(wants[k]))
    end
  end
  return nil
end

--- Reduces whole inputs (async on request) and compares with the reference: nil, or what went wrong.
local function whole_problem(e, columns, dtypes, set, async)
  local want = fold(e, columns, dtypes, range(1, #columns[1]))
  local ok, got = pcall(function()
    local r = gr.reduce(set.buffers, { op = op_of(e), async = async or nil })
    if async then return r:wait() end
    return r
  end)
  if not ok then return "raised " .. tostring(got) end
  if not same(got, want) then
    return string.format("got %s (%s), want %s (%s)", show(got), math.type(got) or type(got), show(want),
      math.type(want) or type(want))
  end
  return changed(set)
end

--- Reduces per segment (opts: segment or offsets, given as a Lua list; out on request) and compares:
-- nil, or what went wrong.
local function segments_problem(e, columns, dtypes, set, where, opts, with_out)
  local n = #columns[1]
  local bounds = opts.offsets
  if not bounds then
    bounds = {}
    for s = 0, n // opts.segment do bounds[s + 1] = s * opts.segment end
  end
  local wants = {}
  for s = 1, #bounds - 1 do
    wants[s] = fold(e, columns, dtypes, range(bounds[s] + 1, bounds[s + 1] - bounds[s]))
  end
  local call = { op = op_of(e), segment = opts.segment }
  if opts.offsets then call.offsets = gr.buffer(opts.offsets, "int64", { where = where }) end
  if with_out then call.out = gr.buffer(#wants, result_dtype(e), { where = where }) end
  local ok, r = pcall(gr.reduce, set.buffers, call)
  if not ok then return "raised " .. tostring(r) end
  if with_out and r ~= call.out then return "did not return opts.out" end
  return result_problem(r, wants, result_dtype(e)) or changed(set)
end

--- Reduces along axes and compares: nil, or what went wrong.
local function axes_problem(e, columns, dtypes, set, shape, axis, keepdims, where, with_out)
  local axes = axes_of(axis, #shape)
  local wants = {}
  for g, members in ipairs(groups_of(shape, axes)) do wants[g] = fold(e, columns, dtypes, members) end
  local rshape = result_shape(shape, axes, keepdims)
  local call = { op = op_of(e), axis = axis, keepdims = keepdims or nil }
  if with_out then call.out = gr.buffer(product(rshape), result_dtype(e), { where = where }):view(rshape) end
  local ok, r = pcall(gr.reduce, set.buffers, call)
  if not ok then return "raised " .. tostring(r) end
  if with_out and r ~= call.out then return "did not return opts.out" end
  return result_problem(r, wants, result_dtype(e), rshape) or changed(set)
end

local function describe_axis(axis)
  return type(axis) == "table" and "{" .. table.concat(axis, ",") .. "}" or tostring(axis)
end

--- Asserts that fn(...) raises, with a message that holds every key word (Lua patterns; a table of them:
-- one of those). Returns the message.
local function refused(words, fn, ...)
  local ok, err = pcall(fn, ...)
  err = tostring(err)
  local wanted = {}
  for k, w in ipairs(words) do wanted[k] = type(w) == "table" and table.concat(w, " or ") or w end
  assert(not ok, "expected an error that says " .. table.concat(wanted, ", ") .. "; the call returned")
  for k, w in ipairs(words) do
    local found = false
    for _, option in ipairs(type(w) == "table" and w or { w }) do found = found or err:find(option) ~= nil end
    assert(found, "the error\n  " .. err .. "\ndoes not say " .. wanted[k])
  end
  return err
end

--- A test twice: through the cpu functions (where they run here), and through the kernels on device
-- buffers (tagged gpu, pending without a CUDA device).
local function both(title, fn)
  it(title .. " (cpu functions)", function() fn({ where = CPU_SIDE, kernels = false }) end)
  H.gpu_it(title .. " (kernels)", function() fn({ where = "device", kernels = true }) end)
end

-- NVRTC is there when an operator compiles at creation (its compile has an origin)
local probe_ok, probe = pcall(gr.operator, { name = "probe", map = "x", reduce = "a + b", identity = "0", acc = "float64" })
local has_nvrtc = probe_ok and probe:info().origin ~= "none"
local nvrtc_it = H.it_if(has_nvrtc, "no NVRTC on this machine: operators are not compiled")

---------------------------------------------------------------------------------------------------

describe("gr.operator's inputs", function()
  it("names 1 to 8 inputs; without the field an operator has one input named x", function()
    local one = gr.operator { name = "one", inputs = { "x" }, map = "x", reduce = "a + b", identity = "0", acc = "float64",
                              cpu = { map = function(x) return x end, reduce = add } }
    local b = gr.buffer({ 1, 2, 3 }, "int32", { where = CPU_SIDE })
    assert.are.equal(6.0, gr.reduce(b, { op = one }))
    assert.are.equal(6.0, gr.reduce(b, { op = op_of(OPS.usum) }))
    gr.operator { name = "named", inputs = { "weight", "_b2" }, map = "weight * _b2", reduce = "a + b", identity = "0",
                  acc = "float64" }
    assert(op_of(OPS.eight), "eight inputs")
    -- i is the index, not an input: a map that reads it is indexed
    assert.is_true(op_of(OPS.every3rd):info().indexed)
    assert.is_false(op_of(OPS.wsum):info().indexed)
  end)

  it("refuses inputs that are not a list of 1 to 8 distinct C identifiers other than i, naming the field", function()
    local function with(inputs, map)
      return { name = "bad", inputs = inputs, map = map or "x", reduce = "a + b", identity = "0", acc = "float64" }
    end
    refused({ "inputs" }, gr.operator, with("x"))
    refused({ "inputs" }, gr.operator, with({ 1, 2 }))
    refused({ "inputs" }, gr.operator, with({ "x", true }))
    refused({ "inputs" }, gr.operator, with({ "x", { "w" } }))
    refused({ "inputs" }, gr.operator, with({}))
    local nine = {}
    for k = 1, 9 do nine[k] = "v" .. k end
    refused({ "inputs", "%f[%d]8%f[%D]" }, gr.operator, with(nine, "v1"))
    refused({ "inputs" }, gr.operator, with({ "x", "x" }))
    refused({ "inputs", "2w" }, gr.operator, with({ "x", "2w" }))
    refused({ "inputs" }, gr.operator, with({ "x", "w-1" }))
    refused({ "inputs" }, gr.operator, with({ "x", "" }))
    refused({ "inputs" }, gr.operator, with({ "x", "i" }))
    refused({ "inputs" }, gr.operator, with({ "i" }, "i"))
  end)

  nvrtc_it("compile at creation; a map that names what is not an input is NVRTC's error, in map's terms", function()
    assert.are_not.equal("none", op_of(OPS.fma3):info().origin)
    local err = refused({ "map", "\"y\"" }, gr.operator,
      { name = "typo", inputs = { "x", "w" }, map = "x * y", reduce = "a + b", identity = "0", acc = "float64" })
    assert(err:find("undefined", 1, true), err)
    -- without inputs there is no w
    refused({ "map", "\"w\"" }, gr.operator, { name = "typo", map = "x * w", reduce = "a + b", identity = "0", acc = "float64" })
  end)
end)

describe("whole buffers", function()
  for _, e in ipairs(ORDER) do
    both(e.spec.name .. ": sizes 0 to 65539, inputs at equal and different offsets from 16 bytes", function(path)
      local bad = failures()
      local sizes = { table.unpack(SIZES) }
      if path.kernels then sizes[#sizes + 1] = 1000003 end    -- many blocks: the multi-pass finish
      for _, n in ipairs(sizes) do
        local columns = columns_of(e, e.dtypes, n, 100 + n)
        for s, skews in ipairs(SKEWS) do
          if n < 100000 or s <= 2 then
            local set = inputs_of(columns, e.dtypes, path.where, skews)
            bad.add(string.format("n=%d skews {%s}", n, table.concat(skews, ",")), whole_problem(e, columns, e.dtypes, set))
          end
        end
      end
      bad.done()
    end)
  end

  both("a table of one buffer with a one-input operator is the buffer's own call", function(path)
    local op = op_of(OPS.usum)
    local b = gr.buffer(4097, "float32", { where = path.where }):random(5, -8, 8)
    assert.are.equal(gr.reduce(b, { op = op }), gr.reduce({ b }, { op = op }))
    local by_table = gr.reduce({ b:slice(1, 4096) }, { op = op, segment = 64 }):totable()
    assert.are.same(gr.reduce(b:slice(1, 4096), { op = op, segment = 64 }):totable(), by_table)
    local m = b:slice(1, 4096):view { 64, 64 }
    assert.are.same(gr.reduce(m, { op = op, axis = 1 }):totable(), gr.reduce({ m }, { op = op, axis = 1 }):totable())
  end)

  both("async: a Pending whose wait gives the value (the cpu functions refuse async)", function(path)
    local bad = failures()
    for _, name in ipairs({ "wsum", "pmean", "wrap", "every3rd", "fma3" }) do
      local e = OPS[name]
      for _, n in ipairs({ 0, 1000, 65539 }) do
        local columns = columns_of(e, e.dtypes, n, 7 * n + 1)
        local set = inputs_of(columns, e.dtypes, path.where, { 1, 0, 2 })
        if path.kernels then
          bad.add(name .. " n=" .. n, whole_problem(e, columns, e.dtypes, set, true))
        else
          refused({ "async" }, gr.reduce, set.buffers, { op = op_of(e), async = true })
        end
      end
    end
    bad.done()
  end)
end)

describe("dtypes", function()
  for _, d in ipairs(ALL_DTYPES) do
    both(d .. ": in both places of the weighted sum, as the mask of the masked sum, in the wrapping sum", function(path)
      local bad = failures()
      local cases = { { OPS.wsum, { d, "float32" } }, { OPS.wsum, { "float32", d } }, { OPS.masked, { "float32", d } } }
      if kind(d) ~= "float" then
        cases[#cases + 1] = { OPS.wrap, { d, "int16" } }
        cases[#cases + 1] = { OPS.wrap, { "int16", d } }
      end
      for _, case in ipairs(cases) do
        local e, dtypes = case[1], case[2]
        for _, n in ipairs({ 0, 1, 17, 4097 }) do
          local columns = columns_of(e, dtypes, n, 31 * n + 5)
          for _, skews in ipairs({ { 0, 0 }, { 1, 3 }, { 5, 2 } }) do
            local set = inputs_of(columns, dtypes, path.where, skews)
            bad.add(string.format("%s {%s} n=%d skews {%s}", e.spec.name, table.concat(dtypes, ","), n,
              table.concat(skews, ",")), whole_problem(e, columns, dtypes, set))
          end
        end
      end
      bad.done()
    end)
  end

  both("inputs of different dtypes, through every operator", function(path)
    local bad = failures()
    local cases = {
      { "wsum", { "float32", "int8" } }, { "wsum", { "bfloat16", "float32" } }, { "wsum", { "float16", "float32" } },
      { "wsum", { "int32", "float64" } }, { "wsum", { "float8_e5m2", "uint16" } }, { "wsum", { "bool", "float8_e4m3" } },
      { "masked", { "float32", "uint8" } }, { "masked", { "bfloat16", "int64" } }, { "masked", { "int32", "float16" } },
      { "maxprod", { "uint8", "float64" } }, { "sqdist", { "float16", "int8" } }, { "every3rd", { "bfloat16", "uint32" } },
      { "pmean", { "int16", "float32" } }, { "wmean", { "float64", "uint8" } }, { "wrap", { "uint64", "int8" } },
      { "fma3", { "uint8", "float64", "bool" } }, { "fma3", { "float16", "bfloat16", "int64" } },
    }
    for _, case in ipairs(cases) do
      local e, dtypes = OPS[case[1]], case[2]
      for _, n in ipairs({ 17, 4097 }) do
        local columns = columns_of(e, dtypes, n, n + #case[1])
        local set = inputs_of(columns, dtypes, path.where, { 2, 5, 1 })
        bad.add(string.format("%s {%s} n=%d", case[1], table.concat(dtypes, ","), n), whole_problem(e, columns, dtypes, set))
      end
    end
    bad.done()
  end)

  both("every element reaches map converted to the accumulator's dtype", function(path)
    local function run(name, columns, dtypes)
      local set = inputs_of(columns, dtypes, path.where, { 0, 1, 3 })
      local got = gr.reduce(set.buffers, { op = op_of(OPS[name]) })
      assert.is_nil(changed(set))
      return got
    end
    -- into int64: truncated toward zero, 2.7 * 3 is 2 * 3
    local got = run("trunc", { { 2.7, -1.5, 100.9, -0.5 }, { 3, 2, -1, 7 } }, { "float32", "int8" })
    assert.are.equal(2 * 3 + -1 * 2 + 100 * -1 + 0 * 7, got)
    assert.are.equal("integer", math.type(got))
    assert.are.equal(-96, run("trunc", { { 2.7, -1.5, 100.9, -0.5 }, { 3, 2, -1, 7 } }, { "float64", "int16" }))
    -- into float64: a uint64 past 2^63 is that large, not negative (-128 * 2^63 + 1 rounds to -2^70;
    -- 2^64 - 1 rounds to 2^64); bool is 1.0
    got = run("fma3", { { -128, 3 }, { math.mininteger, -1 }, { 1, 0 } }, { "int8", "uint64", "bool" })
    assert.are.equal(-2.0 ^ 70 + 3 * 2.0 ^ 64, got)
    assert.are.equal("float", math.type(got))
    -- an int64 past 2^53 is rounded once to a double (2^53 + 1 to 2^53, ties to even)
    assert.are.equal(2.0 ^ 53, run("wsum", { { (1 << 53) + 1 }, { 1 } }, { "int64", "float32" }))
    assert.are.equal(2.0 ^ 53 + 4, run("wsum", { { (1 << 53) + 3 }, { 1 } }, { "int64", "float32" }))
  end)

  it("cpu.map gets each input's element in the inputs' order, converted, then the 0-based index", function()
    local seen
    local function recorder(acc)
      return gr.operator { name = "args", inputs = { "x", "w", "z" }, map = "x", reduce = "a + b", identity = "0", acc = acc,
                           cpu = { map = function(...) seen[#seen + 1] = table.pack(...) return 0 end, reduce = add } }
    end
    local xs, ws, zs = { 1.5, -2.5, 3.25, 7.75 }, { -7, 100, 5, -128 }, { 1, 0, 1, 1 }
    local set = inputs_of({ xs, ws, zs }, { "float32", "int8", "bool" }, CPU_SIDE, { 1, 2, 3 })
    for _, acc in ipairs({ "float64", "int64" }) do
      seen = {}
      local op = recorder(acc)
      seen = {}                 -- the cpu backend's identity check at creation called map too
      gr.reduce(set.buffers, { op = op })
      assert.are.equal(#xs, #seen, acc .. ": one call per element")
      local at = {}
      for _, args in ipairs(seen) do
        assert.are.equal(4, args.n, acc .. ": three elements and the index")
        assert.are.equal("integer", math.type(args[4]), acc .. ": the index is an integer")
        local k = args[4] + 1
        assert.is_nil(at[k], acc .. ": index " .. args[4] .. " once")
        at[k] = true
        local want = { to_acc(xs[k], "float32", acc), to_acc(ws[k], "int8", acc), to_acc(zs[k], "bool", acc) }
        for j = 1, 3 do
          assert(same(args[j], want[j]), string.format("%s element %d, input %d: got %s (%s), want %s (%s)", acc, k, j,
            show(args[j]), math.type(args[j]) or type(args[j]), show(want[j]), math.type(want[j])))
        end
      end
      for k = 1, #xs do assert.is_true(at[k], acc .. ": index " .. (k - 1) .. " seen") end
    end
  end)
end)

describe("segments", function()
  for _, name in ipairs({ "wsum", "every3rd", "pmean", "wmean", "wrap", "maxprod", "fma3" }) do
    local e = OPS[name]
    both(name .. ": fixed sizes, offsets with empty segments, out; i and n per segment", function(path)
      local bad = failures()
      for _, size in ipairs({ 1, 2, 5, 16, 33, 300, 5000 }) do
        local k = math.max(1, math.min(100, 40000 // size))
        local columns = columns_of(e, e.dtypes, k * size, size)
        local set = inputs_of(columns, e.dtypes, path.where, { 1, 2, 3 })
        bad.add("segment=" .. size, segments_problem(e, columns, e.dtypes, set, path.where, { segment = size }))
      end
      local columns = columns_of(e, e.dtypes, 20000, 91)
      local set = inputs_of(columns, e.dtypes, path.where, { 3, 0, 1 })
      for _, bounds in ipairs({ { 0, 0, 3, 3, 4, 100, 117, 4000, 4001, 19999, 20000, 20000 }, { 5, 5, 17, 1000 },
                                { 0, 20000 }, { 7, 7 } }) do
        local label = "offsets {" .. table.concat(bounds, ",") .. "}"
        bad.add(label, segments_problem(e, columns, e.dtypes, set, path.where, { offsets = bounds }))
        bad.add(label .. " out", segments_problem(e, columns, e.dtypes, set, path.where, { offsets = bounds }, true))
      end
      bad.add("segment=50 out", segments_problem(e, columns, e.dtypes, set, path.where, { segment = 50 }, true))
      bad.done()
    end)
  end
end)

-- shapes and the axes reduced along them: each axis, negative ones, pairs, all; an empty axis
local AXIS_CASES = {
  { shape = { 7, 5 }, axes = { 1, 2, -1, { 1, 2 } } },
  { shape = { 1, 9 }, axes = { 1, -1 } },
  { shape = { 40, 33 }, axes = { 1, 2 } },
  { shape = { 3, 0 }, axes = { 2 } },
  { shape = { 3, 4, 6 }, axes = { 1, 2, 3, -2, { 1, 3 }, { 2, 3 }, { -3, -2 }, { 1, 2, 3 } } },
  { shape = { 2, 1, 5 }, axes = { 2, { 1, 3 } } },
}
-- how the inputs lie (cycled over them): all compact, one strided, strided with gaps
local LAYOUTS = { { "compact" }, { "permuted", "compact" }, { "narrowed", "permuted", "compact" } }

describe("axes", function()
  for _, name in ipairs({ "wsum", "every3rd", "pmean", "wrap", "fma3", "wmean" }) do
    local e = OPS[name]
    both(name .. ": each axis and sets of them of 2-D and 3-D views, negative, keepdims, out, strided inputs", function(path)
      local bad = failures()
      for c, case in ipairs(AXIS_CASES) do
        local columns = columns_of(e, e.dtypes, product(case.shape), 17 * c)
        for l, layouts in ipairs(LAYOUTS) do
          local set = views_of(columns, e.dtypes, case.shape, layouts, path.where)
          for _, axis in ipairs(case.axes) do
            for _, keepdims in ipairs({ false, true }) do
              local label = string.format("shape {%s} axis %s keepdims %s layouts %s", table.concat(case.shape, ","),
                describe_axis(axis), tostring(keepdims), table.concat(layouts, "/"))
              bad.add(label, axes_problem(e, columns, e.dtypes, set, case.shape, axis, keepdims, path.where, false))
              if l == 1 then
                bad.add(label .. " out", axes_problem(e, columns, e.dtypes, set, case.shape, axis, keepdims, path.where, true))
              end
            end
          end
        end
      end
      bad.done()
    end)
  end
end)

describe("views", function()
  both("whole strided views are read in their row-major order, i that ordinal", function(path)
    local bad = failures()
    for _, name in ipairs({ "wsum", "every3rd", "sqdist", "fma3" }) do
      local e = OPS[name]
      for _, shape in ipairs({ { 5, 7 }, { 64, 33 }, { 3, 4, 6 }, { 9, 1, 17 } }) do
        local columns = columns_of(e, e.dtypes, product(shape), #shape * 100 + shape[1])
        for _, layouts in ipairs({ { "permuted", "compact" }, { "compact", "permuted" }, { "permuted" },
                                   { "narrowed", "compact", "permuted" }, { "narrowed" } }) do
          local set = views_of(columns, e.dtypes, shape, layouts, path.where)
          bad.add(string.format("%s shape {%s} layouts %s", name, table.concat(shape, ","), table.concat(layouts, "/")),
            whole_problem(e, columns, e.dtypes, set))
        end
      end
    end
    bad.done()
  end)

  both("narrow(1, ...) of 1-D buffers at different offsets from 16 bytes", function(path)
    local bad = failures()
    local e = OPS.every3rd
    for _, n in ipairs({ 1, 15, 16, 17, 4097 }) do
      local columns = columns_of(e, e.dtypes, n, n)
      for _, starts in ipairs({ { 2, 2 }, { 2, 5 }, { 9, 1 } }) do
        local set = { buffers = {}, parents = {}, bytes = {} }
        for j = 1, 2 do
          local parent = gr.buffer(n + starts[j] + 2, e.dtypes[j], { where = path.where }):fill(1)
          local v = parent:narrow(1, starts[j], n)
          v:set(columns[j])
          set.buffers[j], set.parents[j], set.bytes[j] = v, parent, parent:tobytes()
        end
        bad.add(string.format("n=%d starts {%d,%d}", n, starts[1], starts[2]), whole_problem(e, columns, e.dtypes, set))
      end
    end
    bad.done()
  end)
end)

describe("special values", function()
  -- an operator's name, x, w, and what C's arithmetic gives
  local CASES = {
    { "wsum", { inf, 1 }, { 0, 1 }, nan },                -- inf * 0
    { "wsum", { inf, 2 }, { 2, 1 }, inf },
    { "wsum", { -inf, 1 }, { 3, 1 }, -inf },
    { "wsum", { inf, -inf }, { 1, 1 }, nan },             -- inf + -inf
    { "wsum", { nan, 1 }, { 0, 1 }, nan },                -- NaN * 0
    { "wsum", { 1, nan }, { 1, 1 }, nan },
    { "masked", { nan, 2 }, { 0, 1 }, 2.0 },              -- a masked NaN never reaches the sum
    { "masked", { 5, 7 }, { -0.0, nan }, 7.0 },           -- -0.0 masks, a NaN mask does not
    { "masked", { inf, -inf }, { 1, 0 }, inf },
    { "sqdist", { inf, 1 }, { inf, 1 }, nan },            -- inf - inf
    { "sqdist", { -inf, 1 }, { 2, 1 }, inf },
    { "maxprod", { -inf, -inf }, { 1, 2 }, -inf },
    { "maxprod", { inf, -3 }, { -1, 2 }, -6.0 },
  }
  -- the cases whose other products are zeros (x 1, w 0) go in the middle and at the end of a longer buffer too
  local EMBEDS = { wsum = true, masked = true }

  both("NaN and infinities give what C's arithmetic gives, in every float dtype, in a longer buffer and a segment",
    function(path)
      local bad = failures()
      for _, d in ipairs(ALL_DTYPES) do
        if kind(d) == "float" then
          for c, case in ipairs(CASES) do
            local name, xs, ws, want = table.unpack(case)
            local infinite = false
            for _, v in ipairs({ xs[1], xs[2], ws[1], ws[2] }) do infinite = infinite or v == inf or v == -inf end
            if HAS_INF[d] or not infinite then
              local e = OPS[name]
              local label = string.format("%s case %d", d, c)
              for _, dtypes in ipairs({ { d, d }, { d, "float32" } }) do
                local set = inputs_of({ xs, ws }, dtypes, path.where, { 1, 2 })
                local got = gr.reduce(set.buffers, { op = op_of(e) })
                bad.add(label .. " {" .. table.concat(dtypes, ",") .. "}",
                  not same(got, want) and ("got " .. show(got) .. ", want " .. show(want)) or changed(set))
              end
              if EMBEDS[name] then
                local n = 4097
                local long_x, long_w = {}, {}
                for k = 1, n do long_x[k], long_w[k] = 1, 0 end
                long_x[2049], long_w[2049], long_x[n], long_w[n] = xs[1], ws[1], xs[2], ws[2]
                local set = inputs_of({ long_x, long_w }, { d, d }, path.where, { 3, 0 })
                local got = gr.reduce(set.buffers, { op = op_of(e) })
                bad.add(label .. " in 4097", not same(got, want) and ("got " .. show(got) .. ", want " .. show(want)))
                -- per segment: the special value stays in its own
                local seg = gr.reduce(inputs_of({ { xs[1], 1, xs[2], 1 }, { ws[1], 0, ws[2], 0 } }, { d, d }, path.where).buffers,
                  { op = op_of(e), segment = 1 }):totable()
                bad.add(label .. " segments", (not same(seg[1], fold(e, { xs, ws }, { d, d }, { 1 })) or seg[2] ~= 0.0
                  or not same(seg[3], fold(e, { xs, ws }, { d, d }, { 2 })) or seg[4] ~= 0.0)
                  and ("got {" .. table.concat(seg, ",") .. "}") or nil)
              end
            end
          end
        end
      end
      bad.done()
    end)

  both("signed zeros: a fold from identity 0 gives +0.0; from identity -0.0, -0.0 while every product is", function(path)
    local bad = failures()
    local cases = {
      { "wsum", { -0.0 }, { 1 }, 0.0 }, { "wsum", { -0.0, -0.0 }, { 1, 2 }, 0.0 }, { "wsum", {}, {}, 0.0 },
      { "wsum_negzero", { -0.0, -0.0 }, { 1, 2 }, -0.0 }, { "wsum_negzero", { 0.0 }, { -1 }, -0.0 },
      { "wsum_negzero", { -0.0, 0.0 }, { 1, 1 }, 0.0 }, { "wsum_negzero", {}, {}, -0.0 },
      { "wsum_negzero", { -0.0, 3 }, { 2, -1 }, -3.0 },
    }
    for _, d in ipairs(ALL_DTYPES) do
      if kind(d) == "float" then
        for c, case in ipairs(cases) do
          local name, xs, ws, want = table.unpack(case)
          for _, wd in ipairs({ d, "int8" }) do
            local set = inputs_of({ xs, ws }, { d, wd }, path.where, { 0, 1 })
            local got = gr.reduce(set.buffers, { op = op_of(OPS[name]) })
            bad.add(string.format("%s {%s,%s} case %d", name, d, wd, c),
              (math.type(got) ~= "float" or bits(got) ~= bits(want)) and string.format("got %a, want %a", got, want) or nil)
          end
        end
        local set = inputs_of({ { -0.0, 0.0, -0.0, -0.0 }, { 1, 1, 1, 1 } }, { d, d }, path.where)
        local seg = gr.reduce(set.buffers, { op = op_of(OPS.wsum_negzero), segment = 2 }):totable()
        bad.add(d .. " segments", (bits(seg[1]) ~= bits(0.0) or bits(seg[2]) ~= bits(-0.0))
          and string.format("got {%a, %a}, want {0x0p+0, -0x0p+0}", seg[1], seg[2]) or nil)
      end
    end
    bad.done()
  end)
end)

describe("full-precision floats", function()
  both("within the accumulator's bound of the exact sum of the exact products", function(path)
    local bad = failures()
    -- an operator, the dtypes, the accumulator's unit roundoff
    local cases = {
      { "wsum", { "float32", "float32" }, 2.0 ^ -53 }, { "wsum", { "bfloat16", "float32" }, 2.0 ^ -53 },
      { "wsum", { "float32", "int16" }, 2.0 ^ -53 }, { "wsum_f32", { "float32", "float32" }, 2.0 ^ -24 },
      { "wsum_f32", { "float16", "float32" }, 2.0 ^ -24 },
    }
    local sizes = { 17, 4097, 65539 }
    if path.kernels then sizes[#sizes + 1] = 1000003 end
    for c, case in ipairs(cases) do
      local name, dtypes, u = table.unpack(case)
      for _, n in ipairs(sizes) do
        local set = { buffers = {}, parents = {}, bytes = {} }
        local columns = {}
        for j, d in ipairs(dtypes) do
          local b = gr.buffer(n, d, { where = path.where })
          if kind(d) == "float" then b:random(c * 1000 + j + n, -1, 1) else b:random(c * 1000 + j + n) end
          set.buffers[j], set.parents[j], set.bytes[j], columns[j] = b, b, b:tobytes(), b:totable()
        end
        -- each product is exact in a double (at most 24 + 24 bits); Neumaier's sum of them is the exact
        -- sum within a rounding or two, far below the bound
        local s, comp, magnitude = 0.0, 0.0, 0.0
        for k = 1, n do
          local p = to_acc(columns[1][k], dtypes[1], "float64") * to_acc(columns[2][k], dtypes[2], "float64")
          local t = s + p
          if math.abs(s) >= math.abs(p) then comp = comp + ((s - t) + p) else comp = comp + ((p - t) + s) end
          s = t
          magnitude = magnitude + math.abs(p)
        end
        local exact = s + comp
        local got = gr.reduce(set.buffers, { op = op_of(OPS[name]) })
        local bound = (n + 2) * u * magnitude
        local label = string.format("%s {%s} n=%d", name, table.concat(dtypes, ","), n)
        bad.add(label, (math.type(got) ~= "float" or not (math.abs(got - exact) <= bound))
          and string.format("got %.17g, exact %.17g, error %.3g > bound %.3g", got, exact, math.abs(got - exact), bound) or nil)
        bad.add(label, changed(set))
      end
    end
    bad.done()
  end)
end)

describe("refusals", function()
  both("inputs of other lengths or shapes, non-buffers, freed buffers, the wrong count, a lone buffer, two sides",
    function(path)
      local where = { where = path.where }
      local a, w = gr.buffer(12, "float32", where), gr.buffer(12, "int8", where)
      local wsum, fma3 = op_of(OPS.wsum), op_of(OPS.fma3)
      refused({ { "shape", "length", "size", "elements" } }, gr.reduce, { a, gr.buffer(13, "int8", where) }, { op = wsum })
      refused({ { "shape", "length", "size", "elements" } }, gr.reduce, { a, gr.buffer(0, "int8", where) }, { op = wsum })
      refused({ "shape" }, gr.reduce, { a:view { 3, 4 }, w }, { op = wsum })
      refused({ "shape" }, gr.reduce, { a:view { 3, 4 }, w:view { 4, 3 } }, { op = wsum })
      refused({ "shape" }, gr.reduce, { a:view { 3, 4 }, w:view { 3, 4 }, a:view { 2, 6 } }, { op = fma3 })
      refused({ "[Bb]uffer" }, gr.reduce, { a, 5 }, { op = wsum })
      refused({ "[Bb]uffer" }, gr.reduce, { a, "w" }, { op = wsum })
      refused({ "[Bb]uffer" }, gr.reduce, { a, { 1, 2 } }, { op = wsum })
      refused({ "[Bb]uffer" }, gr.reduce, { 5, w }, { op = wsum })
      local freed = gr.buffer(12, "int8", where)
      freed:free()
      refused({ "freed" }, gr.reduce, { a, freed }, { op = wsum })
      -- the count: the message says how many the operator takes
      refused({ "input", "%f[%d]2%f[%D]" }, gr.reduce, { a }, { op = wsum })
      refused({ "input", "%f[%d]2%f[%D]" }, gr.reduce, {}, { op = wsum })
      refused({ "input", "%f[%d]3%f[%D]" }, gr.reduce, { a, w }, { op = fma3 })
      refused({ "input", "%f[%d]3%f[%D]" }, gr.reduce, { a, w, a, w }, { op = fma3 })
      refused({ "input" }, gr.reduce, { a, w }, { op = op_of(OPS.usum) })
      -- a several-input operator given one buffer, not a table of them
      refused({ "input" }, gr.reduce, a, { op = wsum })
      refused({ "input" }, gr.reduce, a, { op = wsum, segment = 4 })
      if path.kernels then
        refused({ { "side", "host" } }, gr.reduce, { a, gr.buffer(12, "int8", { where = "host" }) }, { op = wsum })
        refused({ { "side", "host" } }, gr.reduce, { gr.buffer(12, "float32", { where = "host" }), w }, { op = wsum })
      end
      -- nothing was left half done: the same inputs reduce after
      assert.are.equal(0.0, gr.reduce({ a, w }, { op = wsum }))
    end)

  both("options a several-input call does not take: gpu_to_gpu, ops, streamed", function(path)
    local where = { where = path.where }
    local a, w = gr.buffer(12, "float32", where), gr.buffer(12, "int8", where)
    refused({ "determinism" }, gr.reduce, { a, w }, { op = op_of(OPS.wsum), determinism = "gpu_to_gpu" })
    refused({ "determinism" }, gr.reduce, { a, w }, { op = op_of(OPS.wsum), determinism = "gpu_to_gpu", segment = 3 })
    refused({ "determinism" }, gr.reduce, { a }, { op = op_of(OPS.usum), determinism = "gpu_to_gpu" })
    refused({ "ops" }, gr.reduce, { a, w }, { ops = { "sum", "max" } })
    refused({ "streamed" }, gr.reduce, { a, w }, { op = op_of(OPS.wsum), streamed = true })
    assert.are.equal(0.0, gr.reduce({ a, w }, { op = op_of(OPS.wsum) }))
  end)

  it("an operator without cpu functions, where the cpu functions would run", function()
    local nocpu = gr.operator { name = "nocpu", inputs = { "x", "w" }, map = "x * w", reduce = "a + b", identity = "0",
                                acc = "float64" }
    local a, w = gr.buffer(4, "float32", { where = CPU_SIDE }), gr.buffer(4, "float32", { where = CPU_SIDE })
    local err = H.error_message(gr.reduce, { a, w }, { op = nocpu })
    if gr.backend() == "cpu" then assert(err:find("cpu", 1, true), err) end
  end)
end)

---------------------------------------------------------------------------------------------------
-- the differential fuzz

local FUZZ_OPS = {}
for _, e in ipairs(ORDER) do FUZZ_OPS[#FUZZ_OPS + 1] = e end
local EDGES = { 0, 1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 255, 256, 257, 1023, 1024, 1025, 4095, 4096,
                4097 }
local FORMS = { "whole", "whole", "segment", "offsets", "axes", "view" }

--- One case, drawn from (seed, index) alone: what it was, and nil or what went wrong.
local function fuzz_case(index, path)
  math.randomseed(FUZZ_SEED, index)
  local rng = math.random
  local e = FUZZ_OPS[rng(#FUZZ_OPS)]
  local pool = e.only or ALL_DTYPES
  local dtypes = {}
  for j = 1, #e.spec.inputs do dtypes[j] = pool[rng(#pool)] end
  local form = FORMS[rng(#FORMS)]
  local what = string.format("%s {%s} %s", e.spec.name, table.concat(dtypes, ","), form)
  local ok, problem = pcall(function()
    if form == "whole" or form == "segment" or form == "offsets" then
      local n, opts = H.fuzz_layout(rng, form, EDGES, 20000, 70000)
      local skews = {}
      for j = 1, #dtypes do skews[j] = rng(0, 7) end
      what = what .. string.format(" n=%d skews {%s}", n, table.concat(skews, ","))
      local columns = columns_of(e, dtypes, n)
      local set = inputs_of(columns, dtypes, path.where, skews)
      if form == "whole" then
        local async = path.kernels and rng(2) == 1
        if async then what = what .. " async" end
        return whole_problem(e, columns, dtypes, set, async)
      end
      local with_out = rng(3) == 1
      what = what .. (opts.segment and " segment=" .. opts.segment or " offsets {" .. table.concat(opts.offsets, ",") .. "}")
        .. (with_out and " out" or "")
      return segments_problem(e, columns, dtypes, set, path.where, opts, with_out)
    end
    local shape = {}
    for k = 1, rng(2, 3) do shape[k] = rng(8) == 1 and 0 or rng(1, #shape == 0 and 40 or 12) end
    local layouts = {}
    for j = 1, #dtypes do layouts[j] = ({ "compact", "permuted", "narrowed" })[rng(3)] end
    what = what .. string.format(" shape {%s} layouts %s", table.concat(shape, ","), table.concat(layouts, "/"))
    local columns = columns_of(e, dtypes, product(shape))
    local set = views_of(columns, dtypes, shape, layouts, path.where)
    if form == "view" then return whole_problem(e, columns, dtypes, set) end
    local axis
    if rng(2) == 1 then
      axis = rng(#shape)
      if rng(2) == 1 then axis = axis - #shape - 1 end        -- the same axis, counted from the end
    else
      axis = {}
      for a = 1, #shape do
        if rng(2) == 1 then axis[#axis + 1] = a end
      end
      if #axis == 0 then axis[1] = rng(#shape) end
    end
    local keepdims, with_out = rng(2) == 1, rng(3) == 1
    what = what .. string.format(" axis %s keepdims %s%s", describe_axis(axis), tostring(keepdims), with_out and " out" or "")
    return axes_problem(e, columns, dtypes, set, shape, axis, keepdims, path.where, with_out)
  end)
  if not ok then return what, "raised " .. tostring(problem) end
  return what, problem
end

describe("fuzz", function()
  both("random operators, dtypes per input, sizes, offsets and paths against the reference", function(path)
    local bad = failures()
    for index = 1, FUZZ_CASES do
      local what, problem = fuzz_case(index, path)
      bad.add(string.format("case %d (GPUREDUCE_FUZZ_SEED=%d) %s", index, FUZZ_SEED, what), problem)
      if index % 50 == 0 then collectgarbage() end
    end
    bad.done()
  end)
end)
