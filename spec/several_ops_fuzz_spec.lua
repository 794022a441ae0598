--[[
several_ops_fuzz_spec.lua -- a differential fuzz of several results in one pass (gr.reduce(b, {ops = {...}})).

The contract of opts.ops is that every result is, bit for bit, what gr.reduce gives for that op alone (on the GPU
one fused kernel stands for the single ones); the single calls themselves are checked against the independent
reference by fuzz_spec.lua. So each case here compares the fused call's results with the single calls' on the same
data: the values (NaN, -0.0 and argmin/argmax's indices included), the result buffers byte for byte, or an error
raised by both.

A case depends only on (seed, index). The run first draws a few families -- a set of ops and a dtype -- so that the
GPU compiles a few dozen fused kernels (each new set and dtype is one NVRTC compile, seconds for a segmented one),
not one per case; each case then draws a family and what varies cheaply: the size (biased to edges), a slice off a
16-byte boundary, specials (NaN, infinities, signed zeros for floats; the extremes for integers), acc float64
sometimes (over the set's ops that take it), and the path: whole (synchronous or async), segment, offsets, or axes of a 2-D or 3-D view (one axis,
counted from either end, or several; keepdims).

  GPUREDUCE_OPS_FUZZ_CASES  cases (default 300)
  GPUREDUCE_FUZZ_SEED       the seed (default 20261128)
  e.g.  GPUREDUCE_FUZZ_SEED=7 GPUREDUCE_OPS_FUZZ_CASES=2000 busted spec/several_ops_fuzz_spec.lua
]]
local gr = require "gpureduce"
local H = require "support.helpers"

local function env_int(name, default)
  local v = tonumber(os.getenv(name) or "")
  return v and math.floor(v) or default
end
local CASES = env_int("GPUREDUCE_OPS_FUZZ_CASES", 300)
local SEED = env_int("GPUREDUCE_FUZZ_SEED", 20261128)

local FLOATS = { float32 = true, float64 = true, float16 = true, bfloat16 = true, float8_e4m3 = true,
                 float8_e5m2 = true }
local EDGES = { 1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 255, 256, 257, 1023, 1024, 1025, 4095,
                4096, 4097 }
local FORMS = { "whole", "whole", "async", "segment", "offsets", "axes" }
local FAMILIES = 10
local TAKE_FLOAT64 = { sum = true, prod = true, mean = true, var = true, std = true, sumsq = true, norm = true,
                       nansum = true, nanmean = true, asum = true }
local INT_EXTREMES = { int8 = { -128, 127 }, uint8 = { 0, 255 }, int16 = { -32768, 32767 }, uint16 = { 0, 65535 },
                       int32 = { -2147483648, 2147483647 }, uint32 = { 0, 4294967295 },
                       int64 = { math.mininteger, math.maxinteger }, uint64 = { 0, math.maxinteger } }

--- The sets the families draw from: the describe set, the two-result and nan ops, a set whose accumulators
--- fit the kernel's reply (at most 32 bytes), and random subsets of every op.
local function families()
  math.randomseed(SEED, 0)
  local ops = gr.ops()
  local sets = {
    { "sum", "mean", "std", "min", "max", "count" },
    { "argmin", "argmax", "minmax", "nansum", "nanmax", "norm", "prod" },
    { "sum", "min" },
  }
  local out = {}
  for f = 1, FAMILIES do
    local set = sets[math.random(#sets + 2)]
    if not set then
      set = {}
      for _, op in ipairs(ops) do if math.random() < 0.3 then set[#set + 1] = op end end
      if #set < 2 then
        local op = ops[math.random(#ops)]
        set = { op, op == "count" and "asum" or "count" }
      end
    end
    local dtypes = gr.dtypes()
    out[f] = { ops = set, dtype = dtypes[math.random(#dtypes)] }
  end
  return out
end

--- n + 3 elements of dtype d with specials, as a slice that starts off a 16-byte boundary.
local function data(d, n, rng)
  local b = gr.buffer(n + 3, d)
  local seed = rng(1, 1 << 30)
  if d == "bool" then b:random(seed) elseif FLOATS[d] then b:random(seed, -3, 3) else b:random(seed) end
  local specials
  if FLOATS[d] then
    specials = d == "float8_e4m3" and { 0 / 0, 0.0, -0.0 } or { 0 / 0, math.huge, -math.huge, -0.0, 0.0 }
  elseif INT_EXTREMES[d] then
    specials = { INT_EXTREMES[d][1], INT_EXTREMES[d][2], 0, -1 < INT_EXTREMES[d][1] and 1 or -1 }
  end
  if specials and n > 0 and rng(3) > 1 then
    for _ = 1, rng(1, 4) do b[rng(n) + 1] = specials[rng(#specials)] end
  end
  return b:slice(2, n)
end

--- A result buffer's (or a pair's) dtype, shape and bytes; nil for values.
local function bytes_of(x)
  if type(x) == "table" then
    local a, b = bytes_of(x[1]), bytes_of(x[2])
    return a and b and a .. "|" .. b or nil
  end
  if type(x) == "userdata" then return x:dtype() .. ":" .. table.concat(x:shape(), "x") .. ":" .. x:tobytes() end
  return nil
end

local function show(x)
  if type(x) == "table" then return "{" .. show(x[1]) .. ", " .. show(x[2]) .. "}" end
  return math.type(x) == "float" and string.format("%a", x) or tostring(x)
end

local tally = { results = 0, raised = 0 }

--- The fused call against each op's single call: nil when they agree, else what differs.
local function compare(v, ops, opts)
  local ok, got = pcall(gr.reduce, v, H.changed(opts, { ops = ops }))
  if ok and opts.async then ok, got = pcall(got.wait, got) end
  local raised, singles = {}, {}
  for _, op in ipairs(ops) do
    local r = table.pack(pcall(gr.reduce, v, H.changed(opts, { op = op, async = false })))
    if not r[1] then raised[#raised + 1] = op .. ": " .. tostring(r[2])
    else singles[op] = r.n > 2 and { r[2], r[3] } or r[2] end
  end
  if not ok then
    if #raised == 0 then return "the fused call raised " .. tostring(got) .. " where no single call did" end
    tally.raised = tally.raised + 1
    return nil
  end
  if #raised > 0 then return "the fused call did not raise where the single calls did: " .. raised[1] end
  for _, op in ipairs(ops) do
    local want, have = singles[op], got[op]
    local bw, bh = bytes_of(want), bytes_of(have)
    if bw or bh then
      if bw ~= bh then return op .. ": the result buffers differ from the single call's" end
    elseif not H.same_result(want, have) then
      return string.format("%s: fused %s, alone %s", op, show(have), show(want))
    end
    tally.results = tally.results + 1
  end
  return nil
end

--- One case from (seed, index) alone: what it was, and nil or what went wrong.
local function fuzz_case(fams, index)
  math.randomseed(SEED, index)
  local rng = math.random
  local fam = fams[rng(#fams)]
  local d, ops = fam.dtype, fam.ops
  local form = FORMS[rng(#FORMS)]
  local opts = {}
  if FLOATS[d] and rng(4) == 1 then             -- acc float64: the ops of the set that take it
    local wide = {}
    for _, op in ipairs(ops) do if TAKE_FLOAT64[op] then wide[#wide + 1] = op end end
    if #wide >= 2 then ops, opts.acc = wide, "float64" end
  end
  local what = string.format("{%s} %s %s%s", table.concat(ops, ","), d, form, opts.acc and " acc float64" or "")
  local ok, problem = pcall(function()
    if form == "axes" then
      local shape = {}
      for k = 1, rng(2, 3) do shape[k] = rng(1, k == 1 and 300 or 40) end
      local n = 1
      for _, s in ipairs(shape) do n = n * s end
      local v = data(d, n, rng):contiguous():view(shape)
      local axis
      if rng(2) == 1 then
        axis = rng(#shape)
        if rng(2) == 1 then axis = axis - #shape - 1 end
      else
        axis = {}
        for a = 1, #shape do if rng(2) == 1 then axis[#axis + 1] = a end end
        if #axis == 0 then axis[1] = 1 end
      end
      opts.axis, opts.keepdims = axis, rng(2) == 1
      what = what .. string.format(" shape {%s} axis %s keepdims %s", table.concat(shape, ","),
        type(axis) == "table" and "{" .. table.concat(axis, ",") .. "}" or tostring(axis), tostring(opts.keepdims))
      return compare(v, ops, opts)
    end
    local n, layout = H.fuzz_layout(rng, form, EDGES, 40000, 300000)
    if layout and layout.segment then
      opts.segment = layout.segment
      what = what .. " segment=" .. layout.segment
    elseif layout then
      opts.offsets = gr.buffer(layout.offsets, "int64")
      what = what .. " offsets {" .. table.concat(layout.offsets, ",") .. "}"
    end
    if form == "async" then opts.async = true end
    what = what .. " n=" .. n
    return compare(data(d, n, rng), ops, opts)
  end)
  if not ok then return what, "raised " .. tostring(problem) end
  return what, problem
end

describe("several results in one pass: differential fuzz", function()
  it(string.format("%d cases (seed %d): each op of the fused call its single call's, bit for bit", CASES, SEED),
    function()
      local fams = families()
      local bad = {}
      for index = 1, CASES do
        local what, problem = fuzz_case(fams, index)
        if problem then bad[#bad + 1] = string.format("case %d (GPUREDUCE_FUZZ_SEED=%d) %s: %s", index, SEED, what,
          problem) end
        if index % 50 == 0 then collectgarbage() end
      end
      print(string.format("several ops fuzz: %d cases, seed %d, %d failures (%d results compared; %d cases raised in "
        .. "both forms)", CASES, SEED, #bad, tally.results, tally.raised))
      assert(CASES == 0 or tally.results > 0, "no result was compared")
      assert(#bad == 0, #bad .. " of " .. CASES .. " cases failed:\n" .. table.concat(bad, "\n", 1, math.min(#bad, 10)))
    end)
end)
