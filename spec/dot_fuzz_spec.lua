--[[
dot_fuzz_spec.lua -- a differential fuzz of gr.dot against a reference written here.

What it checks
  Each case draws, from Lua's generator seeded with (seed, case index): a dtype (gr.dtypes()), a size
  biased to the edges of 16-byte vectors, warps and blocks (0, 1, 2, 7..9, 15..17, 31..33, 63..65,
  127..129, 255..257, 1023..1025, 4095..4097, up to 70,000), the form (a whole pair, async or not; fixed
  segments; CSR offsets with empty segments; an axis or both of a 2-D view, transposed or not), where
  each input starts (a slice 0..7 elements into a longer buffer whose other elements would change the
  result if read), the data and the determinism:
    - integers over their whole range, or small ones; bool: random truth values -- exact, wrapping in 64
      bits as Lua integers do;
    - floats that are small integers (every product and partial sum exact in the accumulator: one
      answer whatever the order);
    - floats of full precision: within gamma(n) sum|a b| of the exact dot at the default level, bit for
      bit the exactly rounded dot (Dekker's two-product and an exact sum, spec/support/axes_reference.lua)
      at gpu_to_gpu; acc = "float64" now and then;
    - NaN and infinities dropped in (whole pairs): NaN where IEEE arithmetic gives NaN in any order (a NaN,
      inf * 0, +inf and -inf products together), else the infinity.
  Every case also checks that neither input's buffer (the whole parent of a slice) changed.

How it reports
  One `it` per dtype runs its cases and shows the first few failures in full (case index, seed, the
  draw, expected and got); a last `it` says how many ran.

Reproducing
  GPUREDUCE_FUZZ_SEED       the run's seed (default 20261126)
  GPUREDUCE_DOT_FUZZ_CASES  how many cases (default 1200)
  e.g.  GPUREDUCE_FUZZ_SEED=7 GPUREDUCE_DOT_FUZZ_CASES=5000 busted spec/dot_fuzz_spec.lua
  A case depends only on (seed, index): re-run it on the same kind of machine (CPU backend or GPU).
]]
local gr = require "gpureduce"
local A = require "support.axes_reference"
local bits64 = require("support.helpers").bits64

local function env_int(name, default)
  local v = math.tointeger(tonumber(os.getenv(name) or ""))
  return v or default
end

local SEED = env_int("GPUREDUCE_FUZZ_SEED", 20261126)
local CASES = env_int("GPUREDUCE_DOT_FUZZ_CASES", 1200)
local DTYPES = gr.dtypes()
local FLOAT = { float32 = 2.0 ^ -24, float64 = 2.0 ^ -53, float16 = 2.0 ^ -24, bfloat16 = 2.0 ^ -24,
                float8_e4m3 = 2.0 ^ -24, float8_e5m2 = 2.0 ^ -24 }
local RANGE = {
  int8 = { -128, 127 }, uint8 = { 0, 255 }, int16 = { -32768, 32767 }, uint16 = { 0, 65535 },
  int32 = { -2147483648, 2147483647 }, uint32 = { 0, 4294967295 }, int64 = { 0, 0 }, uint64 = { 0, 0 },
}
local EDGES = { 0, 1, 2, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 256, 257, 1023, 1024,
                1025, 4095, 4096, 4097 }

local two_product = require("support.exact_reference").two_prod
local function bits(x) return (string.unpack("<i8", string.pack("<d", x))) end
local function same(a, b)
  if a ~= a and b ~= b then return true end
  return a == b and (a ~= 0 or bits(a) == bits(b))
end
local function show(x) return math.type(x) == "float" and string.format("%a", x) or tostring(x) end

-- ---- one case's draw ------------------------------------------------------------------------------

local function draw_size(rnd)
  local r = rnd()
  if r < 0.6 then return EDGES[math.random(#EDGES)] end
  if r < 0.9 then return math.random(0, 5000) end
  return math.random(5000, 70000)
end

--- The case's data kind and values: a list for each input.
local function draw_data(d, n, rnd)
  local kind
  if d == "bool" then kind = "bool"
  elseif not FLOAT[d] then kind = rnd() < 0.5 and "full" or "small"
  else
    local r = rnd()
    kind = r < 0.4 and "small" or r < 0.9 and "precise" or "specials"
  end
  local function value()
    if kind == "bool" then return math.random(0, 1) == 1 end
    if kind == "small" then return FLOAT[d] and math.random(-8, 8) + 0.0 or math.random(0, 9) end
    if kind == "full" then
      if RANGE[d][1] == RANGE[d][2] then return bits64() end        -- any 64-bit pattern
      return math.random(RANGE[d][1], RANGE[d][2])
    end
    return (math.random() * 2 - 1) * 2.0 ^ math.random(-3, 3)
  end
  local xs, ys = {}, {}
  for i = 1, n do xs[i], ys[i] = value(), value() end
  if kind == "specials" and n > 0 then
    local specials = d == "float8_e4m3" and { 0 / 0, 0.0, -0.0 }     -- e4m3 has no infinity
                     or { 0 / 0, math.huge, -math.huge, 0.0, -0.0 }
    for _ = 1, math.random(1, 3) do
      local t = math.random(2) == 1 and xs or ys
      t[math.random(n)] = specials[math.random(#specials)]
    end
  end
  return kind, xs, ys
end

-- ---- the reference ------------------------------------------------------------------------------

--- The dot of xs[lo..hi] and ys[lo..hi]: { value, bound } (bound 0: exact).
local function reference(d, kind, det, acc, xs, ys, lo, hi)
  if kind == "bool" then
    local c = 0
    for i = lo, hi do if xs[i] and ys[i] then c = c + 1 end end
    return c, 0
  end
  if not FLOAT[d] then
    local s = 0
    for i = lo, hi do s = s + xs[i] * ys[i] end
    return s, 0
  end
  local nan, pinf, ninf = false, false, false
  local terms, mass = {}, 0.0
  for i = lo, hi do
    local x, y = xs[i], ys[i]
    local p = x * y
    if p ~= p then nan = true
    elseif p == math.huge then pinf = true
    elseif p == -math.huge then ninf = true
    else
      local e
      p, e = two_product(x, y)
      terms[#terms + 1] = p
      if e ~= 0 then terms[#terms + 1] = e end
      mass = mass + math.abs(p)
    end
  end
  if nan or (pinf and ninf) then return 0 / 0, 0 end
  if pinf then return math.huge, 0 end
  if ninf then return -math.huge, 0 end
  local f32 = acc ~= "float64" and d ~= "float64"
  local exact = A.exact_sum(terms, f32 and "float32" or "float64")
  if kind == "small" or det == "gpu_to_gpu" then
    if kind == "small" and #terms == 0 then return 0.0, 0 end
    return exact, 0
  end
  local u = f32 and 2.0 ^ -24 or 2.0 ^ -53
  local m = hi - lo + 1
  return exact, (m * u / (1 - m * u)) * mass + u * math.abs(exact)
end

local function matches(got, want, bound)
  if bound == 0 then
    if math.type(want) == "integer" then return got == want end
    if want == 0 then return got == 0 end          -- the sign of a zero sum is the order's
    return same(got, want)
  end
  return math.abs(got - want) <= bound
end

-- ---- one case -------------------------------------------------------------------------------------

local function placed(values, d, skew, n)
  local whole = gr.buffer(n + skew + 3, d)
  if d == "bool" then whole:fill(true) elseif FLOAT[d] then whole:fill(256) else whole:fill(7) end
  local b = whole:slice(skew + 1, n)
  if n > 0 then gr.copy(b, gr.buffer(values, d)) end
  return b, whole
end

local function run_case(d, index)
  math.randomseed(SEED, index)
  local rnd = math.random
  local n = draw_size(rnd)
  local kind, xs, ys = draw_data(d, n, rnd)
  local det = FLOAT[d] and kind ~= "specials" and rnd() < 0.3 and "gpu_to_gpu" or nil
  local acc = FLOAT[d] and d ~= "float64" and rnd() < 0.25 and "float64" or nil
  local r = rnd()
  local form = kind == "specials" and "whole" or r < 0.35 and "whole" or r < 0.55 and "segment"
               or r < 0.75 and "offsets" or "axis"
  local sx, sy = math.random(0, 7), math.random(0, 7)
  local a, pa = placed(xs, d, sx, n)
  local b, pb = placed(ys, d, sy, n)
  xs, ys = a:totable(), b:totable()          -- the values as stored (rounded to the dtype)
  local before = pa:tobytes() .. pb:tobytes()
  local desc = string.format("case %d (seed %d): %s n=%d %s %s det=%s acc=%s skews %d/%d", index, SEED, d, n, kind,
                             form, tostring(det), tostring(acc), sx, sy)
  local opts = { determinism = det, acc = acc }
  local checks = {}                          -- { got, want, bound, what }
  if form == "whole" then
    local async = rnd() < 0.3
    opts.async = async or nil
    local got = gr.dot(a, b, opts)
    if async then got = got:wait() end
    local want, bound = reference(d, kind, det, acc, xs, ys, 1, n)
    checks[1] = { got, want, bound, "whole" }
  elseif form == "segment" or form == "offsets" then
    local bounds
    if form == "segment" then
      local size = math.max(1, math.random(1, math.max(1, n // math.random(1, 40))))
      while n % size ~= 0 do size = size - 1 end
      if n == 0 then size = 1 end
      opts.segment = size
      bounds = {}
      for s = 0, n // size do bounds[#bounds + 1] = s * size end
    else
      bounds = { 0 }
      for _ = 1, math.random(0, 30) do bounds[#bounds + 1] = math.random(0, n) end
      bounds[#bounds + 1] = n
      table.sort(bounds)
      opts.offsets = gr.buffer(bounds, "int64")
    end
    local got = gr.dot(a, b, opts):totable()
    for s = 1, #bounds - 1 do
      local want, bound = reference(d, kind, det, acc, xs, ys, bounds[s] + 1, bounds[s + 1])
      checks[#checks + 1] = { got[s], want, bound, "segment " .. s }
    end
  else
    local cols = ({ 1, 2, 3, 5, 16, 33, 100 })[math.random(7)]
    local rows = n // cols
    local m = rows * cols
    local av, bv = a:slice(1, m):view{ rows, cols }, b:slice(1, m):view{ rows, cols }
    local transposed = rnd() < 0.3
    local axis = ({ 1, 2, { 1, 2 } })[math.random(3)]
    local shape = { rows, cols }
    local vx, vy = table.move(xs, 1, m, 1, {}), table.move(ys, 1, m, 1, {})
    if transposed then
      av, bv = av:transpose(), bv:transpose()
      shape = { cols, rows }
      local tx, ty = {}, {}
      for i = 1, rows do
        for j = 1, cols do
          tx[(j - 1) * rows + i], ty[(j - 1) * rows + i] = vx[(i - 1) * cols + j], vy[(i - 1) * cols + j]
        end
      end
      vx, vy = tx, ty
    end
    opts.axis = axis
    local res = gr.dot(av, bv, opts)
    local got = res:view{ #res }:totable()
    local norm = A.normalize(axis, 2)
    local ix = {}
    for i = 1, m do ix[i] = i end
    local groups = A.groups(A.compact(ix, shape), norm)
    desc = desc .. string.format(" shape %dx%d%s axis %s", shape[1], shape[2], transposed and " (transposed)" or "",
                                 type(axis) == "table" and "{1,2}" or axis)
    for g, members in ipairs(groups) do
      local gx, gy = {}, {}
      for k, i in ipairs(members) do gx[k], gy[k] = vx[i], vy[i] end
      local want, bound = reference(d, kind, det, acc, gx, gy, 1, #gx)
      checks[#checks + 1] = { got[g], want, bound, "position " .. g }
    end
  end
  local failures = {}
  for _, c in ipairs(checks) do
    if not matches(c[1], c[2], c[3]) then
      failures[#failures + 1] = string.format("%s: %s got %s, want %s (bound %g)", desc, c[4], show(c[1]), show(c[2]),
                                              c[3])
      break
    end
  end
  if pa:tobytes() .. pb:tobytes() ~= before then failures[#failures + 1] = desc .. ": an input changed" end
  return failures
end

describe("gr.dot fuzz", function()
  local ran = 0
  for t, d in ipairs(DTYPES) do
    it(d, function()
      local failures = {}
      for index = t, CASES, #DTYPES do
        ran = ran + 1
        for _, f in ipairs(run_case(d, index)) do failures[#failures + 1] = f end
      end
      assert(#failures == 0, #failures .. " failures; first:\n" .. table.concat(failures, "\n", 1,
                                                                                  math.min(5, #failures)))
    end)
  end
  it("ran every case", function()
    print(string.format("\ndot fuzz: %d cases, seed %d", ran, SEED))
    assert.are.equal(CASES, ran)
  end)
end)
