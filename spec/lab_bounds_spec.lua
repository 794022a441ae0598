-- The sweep's validation (experiments/lab/reference.lua and validate.lua): the facts computed in Lua from
-- the data read back, the depth of a reduction from the launch shape gr.plan reports, and the error bound
-- of each op. The bounds must hold for every order the analysis allows (simulated here in float32 and
-- float64: sequential, pairwise, random trees, lopsided merges) and for the engine's results; a result a
-- few ulps beyond its bound must fail. On a GPU every variant, block and finish is checked the same way.
local gr = require "gpureduce"

local L = require "support.lab_script"          -- puts experiments/ on the path
local H = require("support.helpers").bind(it, function(reason) pending(reason) end)
local R = require "support.fuzz_reference"
local data = require "support.exact_data"
local exact = require "lab.exact"
local reference = require "lab.reference"
local validate = require "lab.validate"

local _ = L
local f32 = R.to_f32
local FLOAT_OPS = { "sum", "nansum", "mean", "nanmean", "sumsq", "norm", "var", "std", "prod" }
local INT_DTYPES = { "int8", "uint8", "int32", "uint32", "int64", "uint64" }

local function exact_sum(xs)
  local a = exact.new()
  for _, x in ipairs(xs) do a:add(x) end
  return a:round("float64")
end

--- n uniform values in [lo, hi) of dtype (floats rounded to it), from a seed.
local function uniform(n, seed, lo, hi, dtype)
  local rng, xs = R.rng(seed), {}
  for i = 1, n do
    local x = lo + (hi - lo) * rng:float()
    xs[i] = dtype == "float32" and f32(x) or x
  end
  return xs
end

local function all_needs() return reference.needs(FLOAT_OPS) end

describe("lab.reference: the facts of the data, in Lua", function()
  local saved = reference.CHUNK
  after_each(function() reference.CHUNK = saved end)

  it("are the direct results for every integer dtype, read in chunks that split the data anywhere", function()
    for _, dtype in ipairs(INT_DTYPES) do
      local rng, xs = R.rng(#dtype * 7), {}
      for i = 1, 103 do xs[i] = rng:int(dtype) end
      xs[50] = xs[7]                                   -- ties: the first index wins
      local unsigned = dtype:sub(1, 1) == "u"
      local function less(a, b) if unsigned and dtype == "uint64" then return math.ult(a, b) end return a < b end
      local sum, sq, prod, mn, imn, mx, imx, nz = 0, 0, 1, nil, nil, nil, nil, 0
      for i, v in ipairs(xs) do
        sum, sq, prod = sum + v, sq + v * v, prod * v
        if not mn or less(v, mn) then mn, imn = v, i end
        if not mx or less(mx, v) then mx, imx = v, i end
        if v ~= 0 then nz = nz + 1 end
      end
      for _, chunk in ipairs({ 1, 5, 16, 1 << 22 }) do
        reference.CHUNK = chunk
        local f = reference.of_values(xs, dtype, reference.needs({ "sum", "sumsq", "prod", "min", "count", "var" }))
        local label = dtype .. " chunk " .. chunk
        assert.equal(sum, f.isum, label)
        assert.equal(sq, f.isumsq, label)
        assert.equal(prod, f.iprod, label)
        assert.same({ mn, imn, mx, imx, nz }, { f.min, f.imin, f.max, f.imax, f.count }, label)
        -- the exact sums: of the integers, or of the float64 values the engine converts 64-bit ones to
        local conv = {}
        for i, v in ipairs(xs) do conv[i] = reference.to_double(v, unsigned) end
        local want = (dtype == "int64" or dtype == "uint64") and exact_sum(conv) or nil
        if not want then
          local a = exact.new()
          for _, v in ipairs(xs) do a:add_int(v, 0) end
          want = a:round("float64")
        end
        assert.equal(want, f.S:round("float64"), label)
      end
    end
  end)

  it("converts 64-bit integers as the engine does: to nearest, uint64 unsigned", function()
    assert.equal(2.0 ^ 64, reference.to_double(-1, true))              -- 2^64 - 1 rounds up
    assert.equal(2.0 ^ 63, reference.to_double(math.mininteger, true))
    assert.equal(-2.0 ^ 63, reference.to_double(math.mininteger, false))
    assert.equal(2.0 ^ 53, reference.to_double((1 << 53) + 1, false))  -- a tie: to even
    assert.equal(2.0 ^ 53 + 4, reference.to_double((1 << 53) + 3, false))
    assert.equal(2.0 ^ 64 - 2048, reference.to_double(-1 - 1024 - 1, true))
  end)

  it("keep NaN apart: the first NaN, the extremes of the numbers, the nan ops' sums", function()
    local xs = { 2.0, 0 / 0, -1.0, 5.0, 0 / 0, -1.0, -0.0 }
    for _, chunk in ipairs({ 2, 1 << 22 }) do
      reference.CHUNK = chunk
      local f = reference.of_values(xs, "float64", reference.needs({ "min", "nansum", "count" }))
      assert.same({ -1.0, 3, 5.0, 4, 2, 2 }, { f.min, f.imin, f.max, f.imax, f.first_nan, f.nan })
      assert.equal(6, f.count)                       -- NaN counts, -0.0 does not
      local s = f.S:round("float64")
      assert.is_true(s ~= s)
      assert.equal(5.0, f.S_nan:round("float64"))
    end
  end)

  it("of a buffer are those of its values, on both sides of a chunk", function()
    reference.CHUNK = 1000
    for _, dtype in ipairs({ "float32", "float64", "int8", "uint64" }) do
      local b = gr.buffer(2501, dtype)
      validate.fill(b, dtype, "sum", 3)
      local want = reference.of_values(b:totable(), dtype, all_needs())
      local got = validate.facts(b, dtype, FLOAT_OPS)
      for _, k in ipairs({ "isum", "count", "min", "imin", "max", "imax", "X", "A", "P" }) do
        assert.equal(want[k], got[k], dtype .. " " .. k)
      end
      assert.equal(want.S:round("float64"), got.S:round("float64"), dtype)
      b:free()
    end
  end)
end)

describe("lab.validate: the depth of a reduction, from its launch shape", function()
  local cpu = gr.variant("cpu")
  local pairwise = gr.variant("cpu_pairwise")
  local kernel = { name = "k", needs = { "cuda", "power-of-two block" }, block = { min = 32, max = 1024 },
                   determinism = "run_to_run" }
  local atomic = { name = "a", needs = { "cuda", "power-of-two block" }, block = { min = 32, max = 1024 },
                   determinism = "not_guaranteed" }
  local library = { name = "cub", needs = { "cuda" }, block = { min = 1, max = 1 }, determinism = "run_to_run" }
  local user = { name = "mine", needs = { "cuda" }, block = { min = 32, max = 1024 }, user = true,
                 determinism = "run_to_run" }
  local function dev(m, p, t) return { where = "device", elements = m, blocks = p, block = t } end
  local function host(m) return { where = "host", elements = m, blocks = 0, block = 1 } end

  it("adds each pass: a thread's share and its block on the device, any order on the CPU", function()
    local n = 1 << 20
    assert.equal(n - 1, validate.depth({ finish = "host", passes = { host(n) } }, cpu, nil, n))
    assert.equal(2 * 20 + 2, validate.depth({ finish = "host", passes = { host(n) } }, pairwise, nil, n))
    -- single: a grid-stride pass, then the last block folds the partials (or atomics, in any order)
    local one = { finish = "single", passes = { dev(n, 528, 256) } }
    assert.equal((8 + 64 + 256) + (3 + 256), validate.depth(one, kernel, 132, n))
    assert.equal((8 + 64 + 256) + 528, validate.depth(one, atomic, 132, n))
    -- device: passes down to one value
    local three = { finish = "device", passes = { dev(n, 4096, 256), dev(4096, 16, 256), dev(16, 1, 256) } }
    assert.equal(3 * (1 + 64 + 256), validate.depth(three, kernel, 132, n))
    -- hybrid / host: the CPU adds the partials in any order
    local mixed = { finish = "hybrid", passes = { dev(n, 4096, 256), host(4096) } }
    assert.equal((1 + 64 + 256) + 4095, validate.depth(mixed, kernel, 132, n))
    -- CUB and Thrust show no shape: their model, from the SM count
    local m = 1 << 24
    assert.equal(3972 + 661 + 2112, validate.depth({ finish = "single", passes = { dev(m, 1, 1) } }, library, 132, m))
    -- a user kernel folds its block in any order
    local u = { finish = "single", passes = { dev(n, 100, 256) } }
    assert.equal(10486 + 64 * 256 + 100, validate.depth(u, user, 132, n))
    -- no plan: any order
    assert.equal(n - 1, validate.depth(nil, nil, nil, n))
  end)

  it("of a real plan on this backend", function()
    local b = gr.buffer(5000, "float32")
    local plan = gr.plan(b, { op = "sum", variant = "cpu" })
    assert.equal(4999, validate.depth(plan, gr.variant(plan.variant), nil, 5000))
    b:free()
  end)
end)

-- Reductions simulated in Lua in the accumulator's precision, in several orders, each with its depth.
local function rounder(fmt) return fmt == "float32" and f32 or function(x) return x end end

local function fold(xs, fmt, way, rng, combine, leaf)
  local nodes = {}
  for i, x in ipairs(xs) do nodes[i] = { v = leaf(x), d = 0 } end
  local function join(a, b) return { v = combine(a.v, b.v), d = math.max(a.d, b.d) + 1 } end
  if way == "sequential" then
    local a = nodes[1]
    for i = 2, #nodes do a = join(a, nodes[i]) end
    return a
  elseif way == "pairwise" then
    local function rec(lo, hi)
      if lo == hi then return nodes[lo] end
      local mid = (lo + hi) // 2
      return join(rec(lo, mid), rec(mid + 1, hi))
    end
    return rec(1, #nodes)
  elseif way == "lopsided" then                    -- the last element merged into all the others
    local a = nodes[1]
    for i = 2, #nodes - 1 do a = join(a, nodes[i]) end
    return #nodes > 1 and join(nodes[#nodes], a) or a
  end
  while #nodes > 1 do                              -- a random tree
    local a = table.remove(nodes, rng:range(1, #nodes))
    local j = rng:range(1, #nodes)
    nodes[j] = join(a, nodes[j])
  end
  return nodes[1]
end

--- The result of op over xs computed in `fmt` along one order: value and depth.
local function simulate(op, xs, fmt, way, rng)
  local rnd = rounder(fmt)
  local add = function(a, b) return rnd(a + b) end
  local n = #xs
  if op == "sum" or op == "nansum" or op == "mean" or op == "nanmean" then
    local r = fold(xs, fmt, way, rng, add, function(x) return x end)
    local v = (op == "mean" or op == "nanmean") and rnd(r.v / n) or r.v
    return v, r.d
  elseif op == "sumsq" or op == "norm" then
    local r = fold(xs, fmt, way, rng, add, function(x) return rnd(x * x) end)
    return op == "norm" and rnd(math.sqrt(r.v)) or r.v, r.d
  elseif op == "prod" then
    local r = fold(xs, fmt, way, rng, function(a, b) return rnd(a * b) end, function(x) return x end)
    return r.v, r.d
  end
  -- var, std: the engine's Welford update and Chan merge (cuda/device/ops.cuh), every operation rounded
  local function merge(a, b)
    local m = a.n + b.n
    local delta = rnd(b.mean - a.mean)
    local wb = rnd(rnd(b.n) / rnd(m))
    local wab = rnd(rnd(a.n) * wb)
    return { n = m, mean = rnd(a.mean + rnd(delta * wb)), m2 = rnd(rnd(a.m2 + b.m2) + rnd(rnd(delta * delta) * wab)) }
  end
  local r = fold(xs, fmt, way, rng, merge, function(x) return { n = 1, mean = x, m2 = 0.0 } end)
  local var = rnd(r.v.m2 / rnd(n))
  return op == "std" and rnd(math.sqrt(var)) or var, r.d
end

-- the bounds assume no overflow or underflow: products only of the data near 1
local function fits(op, name) return op ~= "prod" or name == "positive" end

local function data_sets(fmt, n)
  local f = fmt == "float32"
  return {
    uniform = uniform(n, n, -1, 1, fmt),
    positive = uniform(n, n + 1, 0.999, 1.001, fmt),
    offset = uniform(n, n + 2, 100, 101, fmt),
    heavy = data("heavy", n, n + 3, f),
    cancelling = not f and data("cancelling", n, n + 4, f) or nil,   -- float32: its squares overflow
  }
end

--- Every configuration configs(op, name) lists (option tables) of the engine, over stress data of both
-- float formats at sizes `ns`, checked against its bound; returns the failures.
local function engine_failures(ns, configs)
  local bad = {}
  for _, fmt in ipairs({ "float32", "float64" }) do
    for _, n in ipairs(ns) do
      for name, xs in pairs(data_sets(fmt, n)) do
        local b = gr.buffer(xs, fmt)
        local f = validate.facts(b, fmt, FLOAT_OPS)
        for _, op in ipairs(FLOAT_OPS) do
          local check = validate.checker(gr, b, fmt, op, f)
          for _, opts in ipairs(fits(op, name) and configs(op) or {}) do
            local ok, got, got2 = pcall(gr.reduce, b, opts)
            local good, why = ok, tostring(got)
            if ok then good, why = check(got, got2, opts) end
            if not good then
              bad[#bad + 1] = string.format("%s %s n=%d %s %s finish %s block %s acc %s: %s", fmt, name, n, op,
                opts.variant, tostring(opts.finish), tostring(opts.block), tostring(opts.acc), why)
            end
          end
        end
        b:free()
      end
    end
  end
  return bad
end

describe("lab.validate: the bounds", function()
  it("hold for every order simulated: sequential, pairwise, random trees, lopsided merges", function()
    local bad, worst = {}, 0
    for _, fmt in ipairs({ "float32", "float64" }) do
      for _, n in ipairs({ 1, 2, 3, 17, 256, 1001 }) do
        for name, xs in pairs(data_sets(fmt, n)) do
          local f = reference.of_values(xs, fmt, all_needs())
          for _, op in ipairs(FLOAT_OPS) do
            for _, way in ipairs(fits(op, name) and { "sequential", "pairwise", "random", "lopsided" } or {}) do
              local got, depth = simulate(op, xs, fmt, way, R.rng(n * 31 + #op))
              local e = validate.expect(f, op, depth, fmt)
              local ok, why = validate.check(got, nil, e)
              if not ok then bad[#bad + 1] = string.format("%s %s n=%d %s %s: %s", fmt, name, n, op, way, why) end
              if e.bound > 0 then worst = math.max(worst, math.abs(got - e.value) / e.bound) end
            end
          end
        end
      end
    end
    assert(#bad == 0, table.concat(bad, "\n"))
    assert.is_true(worst > 0 and worst < 1)
  end)

  it("catch a result a few ulps beyond the bound and pass one within it", function()
    for _, fmt in ipairs({ "float32", "float64" }) do
      local rnd = rounder(fmt)
      local p = fmt == "float32" and 24 or 53
      local xs = data_sets(fmt, 1001)
      for _, op in ipairs(FLOAT_OPS) do
        local values = op == "prod" and xs.positive or op == "var" and xs.offset or xs.uniform
        local f = reference.of_values(values, fmt, all_needs())
        local e = validate.expect(f, op, 40, fmt)
        local ulp = exact.ulp(e.value, p, fmt == "float32" and -149 or -1074)
        assert.is_true(e.bound > 8 * ulp, op)
        for _, sign in ipairs({ 1, -1 }) do
          local label = string.format("%s %s %+d", fmt, op, sign)
          local inside = rnd(e.value + sign * (e.bound - 2 * ulp))
          local beyond = rnd(e.value + sign * (e.bound + 4 * ulp))
          assert.is_true((validate.check(inside, nil, e)), label .. " within")
          local ok, why = validate.check(beyond, nil, e)
          assert.is_false(ok, label .. " beyond")
          assert.matches("beyond the bound", why)
        end
      end
    end
  end)

  it("compare integers, extremes, indices, counts and flags exactly", function()
    local f = reference.of_values({ 3, -7, 9, -7, 0 }, "int32", reference.needs({ "sum", "argmin", "count", "and" }))
    local function e(op) return validate.expect(f, op, 10, "int64") end
    assert.is_true((validate.check(-2, nil, e("sum"))))
    assert.is_false((validate.check(-1, nil, e("sum"))))
    assert.is_false((validate.check(-2.0, nil, e("sum"))))        -- a float where an integer is due
    assert.is_true((validate.check(-7, 2, e("argmin"))))
    local ok, why = validate.check(-7, 4, e("argmin"))             -- the second -7: not the first
    assert.is_false(ok)
    assert.matches("second result 4, expected 2", why)
    assert.is_true((validate.check(4, nil, e("count"))))
    assert.is_true((validate.check(false, nil, e("and"))))
    assert.is_true((validate.check(true, nil, e("or"))))
    assert.is_true((validate.check(9, -7, { value = 9, value2 = -7, bound = 0 })))
    assert.is_true((validate.check(-0.4, nil, e("mean"))))            -- the exact sum over n, in double
    assert.is_true((validate.check(-2 / 5, nil, e("mean"))))
    assert.is_false((validate.check(-0.4 + 2 ^ -54, nil, e("mean"))))
    local g = reference.of_values({ 1.5, -2.25, 0 / 0 }, "float32", reference.needs({ "min", "argmax", "nanmax" }))
    assert.is_true((validate.check(0 / 0, nil, validate.expect(g, "min", 1, "float32"))))
    assert.is_false((validate.check(-2.25, nil, validate.expect(g, "min", 1, "float32"))))
    assert.is_true((validate.check(1.5, nil, validate.expect(g, "nanmax", 1, "float32"))))
    assert.is_true((validate.check(0 / 0, 3, validate.expect(g, "argmax", 1, "float32"))))
  end)

  it("perturbed for the self-test, fail every correct result", function()
    local f = reference.of_values(uniform(100, 9, -1, 1, "float64"), "float64", all_needs())
    for _, op in ipairs(FLOAT_OPS) do
      local e = validate.expect(f, op, 10, "float64")
      assert.is_true((validate.check(e.value, nil, e)), op)
      assert.is_false((validate.check(e.value, nil, validate.perturb(e))), op)
    end
    assert.is_false((validate.check(true, nil, validate.perturb({ value = true, bound = 0 }))))
    assert.is_false((validate.check(7, nil, validate.perturb({ value = 7, bound = 0 }))))
  end)

  it("hold for the engine's results on this backend: host variants, both accumulators, stress data", function()
    local bad = engine_failures({ 1, 33, 4099 }, function(op)
      local list = {}
      for _, variant in ipairs({ "cpu", "cpu_pairwise" }) do
        list[#list + 1] = { op = op, variant = variant }
        list[#list + 1] = { op = op, variant = variant, acc = "float64" }
      end
      return list
    end)
    assert(#bad == 0, table.concat(bad, "\n"))
  end)

  it("hold for every integer op of the engine on this backend", function()
    local bad = {}
    for _, dtype in ipairs(INT_DTYPES) do
      for _, n in ipairs({ 1, 1000 }) do
        for _, op in ipairs(gr.ops()) do
          local b = validate.fill(gr.buffer(n, dtype), dtype, op, n + #op)
          local check = validate.checker(gr, b, dtype, op)
          for _, variant in ipairs({ "cpu", "cpu_pairwise" }) do
            local opts = { op = op, variant = variant }
            local got, got2 = gr.reduce(b, opts)
            local ok, why = check(got, got2, opts)
            if not ok then bad[#bad + 1] = string.format("%s n=%d %s %s: %s", dtype, n, op, variant, why) end
          end
          b:free()
        end
      end
    end
    assert(#bad == 0, table.concat(bad, "\n"))
  end)
end)

describe("lab.validate on the GPU", function()
  H.gpu_it("every variant, block and finish lies within its bound: float ops, stress data", function()
    local bad = engine_failures({ 1000, (1 << 20) + 3 }, function(op)
      local list = {}
      for _, v in ipairs(gr.variants()) do
        local takes = false
        for _, o in ipairs(v.ops or {}) do takes = takes or o == op end
        if v.available and takes and not v.user then
          for _, finish in ipairs(v.finishes) do
            for _, block in ipairs(v.block.max > 1 and { 64, 1024 } or { false }) do
              for _, acc in ipairs({ false, "float64" }) do
                list[#list + 1] = { op = op, variant = v.name, finish = finish, block = block or nil, acc = acc or nil }
              end
            end
          end
        end
      end
      return list
    end)
    assert(#bad == 0, table.concat(bad, "\n"))
  end)
end)
