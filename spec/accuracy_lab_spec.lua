-- The accuracy lab (experiments/accuracy.lua) and its parts: the exact sums in Lua integers
-- (lab/exact.lua), checked against the specs' other exact method (Shewchuk expansions) and at the
-- rounding edges; the error of a result (lab/errors.lua); the data sets (lab/datasets.lua); and a quick
-- run on this backend whose JSON must show gpu_to_gpu as the correctly rounded result, the same for every
-- variant, and run_to_run as the same on every run. On a GPU the run covers every variant.
local gr = require "gpureduce"
local json = require "dkjson"

local L = require "support.lab_script"          -- puts experiments/ on the path
local X = require "support.exact_reference"
local R = require "support.fuzz_reference"
local data = require "support.exact_data"
local exact = require "lab.exact"
local errors = require "lab.errors"
local datasets = require "lab.datasets"

local q = L.q

local function sum_of(xs, format, divisors)
  local acc = exact.new()
  for _, x in ipairs(xs) do acc:add(x) end
  return acc:round(format, divisors)
end

local function pack(xs, dtype)
  local parts = {}
  for i, x in ipairs(xs) do parts[i] = string.pack(dtype == "float32" and "<f" or "<d", x) end
  return table.concat(parts)
end

local function bits(x) return string.pack("<d", x) end

describe("lab.exact: sums in Lua integers", function()
  it("agrees with Shewchuk expansions on ill-conditioned data: sums, means and sums of squares", function()
    local bad = {}
    for _, dtype in ipairs({ "float32", "float64" }) do
      local f32 = dtype == "float32"
      local p, emin = f32 and 24 or 53, f32 and -149 or -1074
      for _, kind in ipairs({ "cancelling", "offset", "mixed", "subnormal", "heavy" }) do
        for _, n in ipairs({ 1, 2, 3, 1000, 20001 }) do
          local xs = data(kind, n, n * 31 + #kind, f32)
          local label = string.format("%s %s n=%d", dtype, kind, n)
          local e, m = X.sum_of(xs)
          local s = sum_of(xs, dtype)
          local ok, why = X.correctly_rounded(e, m, s, 1, p, emin)
          if not ok then bad[#bad + 1] = label .. " sum: " .. why end
          ok, why = X.correctly_rounded(e, m, sum_of(xs, dtype, { n }), n, p, emin)
          if not ok then bad[#bad + 1] = label .. " mean: " .. why end
          -- the bytes of a buffer give the same accumulator as the numbers one by one
          local acc = exact.new()
          acc:add_bytes(pack(xs, dtype), dtype)
          if bits(acc:round(dtype)) ~= bits(s) then bad[#bad + 1] = label .. " add_bytes" end
          local sq = exact.new()
          sq:add_bytes(pack(xs, dtype), dtype, true)
          local qe, qm = X.squares_of(xs)
          ok, why = X.correctly_rounded(qe, qm, sq:round("float64"), 1, 53, -1074)
          if not ok then bad[#bad + 1] = label .. " squares: " .. why end
        end
      end
    end
    assert(#bad == 0, table.concat(bad, "\n"))
  end)

  it("rounds to nearest, ties to even, through subnormals and overflow; NaN and infinities as IEEE", function()
    local max32, max64 = 0x1.fffffep127, 1.7976931348623157e308
    local cases = {
      { { 1, 2 ^ -53 }, "float64", 1.0 },                          -- a tie: to the even 1
      { { 1, 2 ^ -53, 2 ^ -106 }, "float64", 1 + 2 ^ -52 },         -- above the midpoint
      { { 1, 2 ^ -53, -2 ^ -106 }, "float64", 1.0 },                -- below it
      { { 1 + 2 ^ -52, 2 ^ -53 }, "float64", 1 + 2 ^ -51 },         -- a tie: to the even neighbour
      { { -1, -2 ^ -53, -2 ^ -106 }, "float64", -(1 + 2 ^ -52) },
      { { 1, 2 ^ -24 }, "float32", 1.0 },
      { { 1, 2 ^ -24, 2 ^ -60 }, "float32", 1 + 2 ^ -23 },
      { { 2 ^ -150 }, "float32", 0.0 },                              -- half the smallest subnormal: to 0
      { { 3 * 2 ^ -151 }, "float32", 2 ^ -149 },
      { { 2 ^ -150, 2 ^ -160 }, "float32", 2 ^ -149 },
      { { 2 ^ -1074, -2 ^ -1073, 2 ^ -1072 }, "float64", 3 * 2 ^ -1074 },
      { { max32, max32 }, "float32", math.huge },
      { { max32, 2 ^ 103 }, "float32", math.huge },                  -- a tie past the largest: to infinity
      { { max32, 2 ^ 102 }, "float32", max32 },
      { { max64, max64, -max64 }, "float64", max64 },
      { { max64, max64 }, "float64", math.huge },
      { { 1e300, 1e-300, -1e300 }, "float64", 1e-300 },
      { {}, "float64", 0.0 },
      { { math.huge, 1 }, "float64", math.huge },
      { { -math.huge, 1 }, "float64", -math.huge },
    }
    for _, c in ipairs(cases) do
      local got = sum_of(c[1], c[2])
      assert(bits(got) == bits(c[3]), string.format("%s of %d values: %a, expected %a", c[2], #c[1], got, c[3]))
    end
    local nan = sum_of({ math.huge, -math.huge }, "float64")
    assert(nan ~= nan, "inf - inf is NaN")
    nan = sum_of({ 1, 0 / 0 }, "float32")
    assert(nan ~= nan, "a NaN makes the sum NaN")
    assert.are.equal(1.0, sum_of({ 1, 1, 1 + 2 ^ -52 }, "float64", { 3 }))   -- 1 + 2^-52/3: down
    assert.are.equal(1 / 3, sum_of({ 1 }, "float64", { 3 }))
    assert.are.equal(0.1, sum_of({ 1 }, "float64", { 2, 5 }))              -- divisors in turn: 1/10
  end)

  it("gives the same sum in every order, and exact products and scaled sums", function()
    local xs = data("mixed", 4001, 17, false)
    local rev = {}
    for i = #xs, 1, -1 do rev[#rev + 1] = xs[i] end
    assert.are.equal(bits(sum_of(xs, "float64")), bits(sum_of(rev, "float64")))
    local a, b = exact.new(), exact.new()
    a:add(3.0)
    a:add(2 ^ -60)
    b:add(5.0)
    local p = exact.new()
    p:add_product(a, b, -1)                  -- -(3 + 2^-60) * 5
    p:add(15.0)
    assert.are.equal(-5 * 2 ^ -60, p:round("float64"))
    local s = exact.new()
    s:add_acc(a, (1 << 37) + 1)
    s:add(3.0, -((1 << 37) + 1))
    assert.are.equal(((1 << 37) + 1) * 2 ^ -60, s:round("float64"))
    local sq = exact.new()
    sq:add_square(1 + 2 ^ -52, 3)           -- 3 (1 + 2^-51 + 2^-104)
    sq:add(3.0, -1)
    sq:add(3 * 2 ^ -51, -1)
    assert.are.equal(3 * 2 ^ -104, sq:round("float64"))
  end)

  it("reads every element of a buffer's bytes, sixteen per unpack or fewer at the end, specials anywhere", function()
    local rng = R.rng(41)
    for _, dtype in ipairs({ "float32", "float64" }) do
      for n = 0, 40 do
        local xs = {}
        for i = 1, n do xs[i] = (rng:float() - 0.5) * 2.0 ^ rng:range(-30, 30) end
        if dtype == "float32" then for i = 1, n do xs[i] = R.to_f32(xs[i]) end end
        for _, special in ipairs(n > 0 and { false, math.huge, -math.huge, 0 / 0 } or { false }) do
          local ys = { table.unpack(xs) }
          if special then ys[rng:range(1, n)] = special end
          local one, bytes = exact.new(), exact.new()
          for _, y in ipairs(ys) do one:add(y) end
          bytes:add_bytes(pack(ys, dtype), dtype)
          local label = string.format("%s n=%d %s", dtype, n, tostring(special))
          assert.equal(bits(one:round("float64")), bits(bytes:round("float64")), label)
          local sq_one, sq_bytes = exact.new(), exact.new()
          for _, y in ipairs(ys) do sq_one:add_square(y) end
          sq_bytes:add_bytes(pack(ys, dtype), dtype, true)
          assert.equal(bits(sq_one:round("float64")), bits(sq_bytes:round("float64")), label .. " squares")
        end
      end
    end
  end)

  it("gives frexp, ulp and the ulp steps between two numbers", function()
    local a = exact.new()
    a:add(3.0)
    assert.same({ 0.75, 2 }, { a:frexp() })
    a:add(1e300)
    a:add(1e300)
    local f, e = a:frexp()
    assert(f >= 0.5 and f < 1)
    assert.are.equal(2e300, f * 2.0 ^ e)
    assert.are.equal(2 ^ -23, exact.ulp(1.0, 24, -149))
    assert.are.equal(2 ^ -149, exact.ulp(0.0, 24, -149))
    assert.are.equal(2 ^ -1074, exact.ulp(2 ^ -1070, 53, -1074))
    assert.are.equal(1, exact.ord(1 + 2 ^ -52, "float64") - exact.ord(1.0, "float64"))
    assert.are.equal(1, exact.ord(1 + 2 ^ -23, "float32") - exact.ord(1.0, "float32"))
    assert.are.equal(2, exact.ord(2 ^ -149, "float32") - exact.ord(-2 ^ -149, "float32"))
    assert.are.equal(0, exact.ord(-0.0, "float64"))
  end)

  it("is what the gpu_to_gpu specs check against: a result one ulp away is refused", function()
    local xs = data("cancelling", 1000, 3, true)
    local s = sum_of(xs, "float32")
    assert.is_true(X.correctly_rounded_sum(xs, s, 24, -149))
    local ok, why = X.correctly_rounded_sum(xs, s + exact.ulp(s, 24, -149), 24, -149)
    assert.is_false(ok)
    assert.matches("the correctly rounded sum is", why)
  end)
end)

describe("lab.errors: a result against the exact value", function()
  local function facts(xs, dtype)
    return errors.facts(pack(xs, dtype), dtype, #xs, true)
  end

  it("counts ulps and steps, and the relative error, of sums", function()
    local f = facts({ 1, 2, 3 }, "float64")
    local m = errors.measure(f, "sum", "float64", 6.0)
    assert.same({ 6.0, 0.0, 0.0, 0, true }, { m.exact, m.rel_err, m.ulps, m.steps, m.correctly_rounded })
    m = errors.measure(f, "sum", "float64", 6 + 2 ^ -50)
    assert.same({ 1, false }, { m.steps, m.correctly_rounded })
    assert.are.equal(1.0, m.ulps)
    assert.are.equal(2 ^ -50 / 6, m.rel_err)
    -- float32: 1 + 2^-24 + 2^-24 summed in order is 1; the exact sum 1 + 2^-23 is one step away
    f = facts({ 1, 2 ^ -24, 2 ^ -24 }, "float32")
    m = errors.measure(f, "sum", "float32", 1.0)
    assert.same({ 1 + 2 ^ -23, 1, 1.0 }, { m.exact, m.steps, m.ulps })
    m = errors.measure(f, "sum", "float64", 1 + 2 ^ -23)
    assert.is_true(m.correctly_rounded)
    m = errors.measure(f, "sum", "float32", 1 + 2 ^ -22)       -- one ulp above
    assert.are.equal(1.0, m.ulps)
  end)

  it("knows mean, sumsq, var, std and norm", function()
    local f = facts({ 1, 2, 3, 4 }, "float64")
    local want = { mean = 2.5, sumsq = 30.0, var = 1.25, std = math.sqrt(1.25), norm = math.sqrt(30) }
    for op, v in pairs(want) do
      local m = errors.measure(f, op, "float64", v)
      assert(m.correctly_rounded, op .. ": " .. m.ulps .. " ulps")
      assert.are.equal(v, m.exact, op)
      m = errors.measure(f, op, "float64", v * (1 + 2 ^ -50))
      assert(m.ulps > 1 and m.ulps < 9, op .. ": " .. m.ulps .. " ulps")
      assert(math.abs(m.rel_err - 2 ^ -50) < 2 ^ -52, op .. ": rel " .. m.rel_err)
    end
    local var1 = errors.measure(f, "var", "float64", 5 / 3, 1)    -- ddof = 1
    assert.is_true(var1.correctly_rounded)
    assert.is_nil(errors.measure(f, "norm", "float64", math.sqrt(30)).steps)
  end)

  it("gives inf, NaN and zero their own answers", function()
    local f = facts({ 3e38, 3e38 }, "float32")
    local m = errors.measure(f, "sum", "float32", math.huge)      -- the exact sum overflows float32 too
    assert.same({ math.huge, math.huge, true, 0 }, { m.exact, m.rel_err, m.correctly_rounded, m.steps })
    m = errors.measure(f, "sum", "float32", 0x1.fffffep127)       -- a finite result below it: measured
    assert.same({ false, 1 }, { m.correctly_rounded, m.steps })
    assert(m.rel_err > 0.4 and m.rel_err < 0.5 and m.ulps > 1e6, m.rel_err .. " " .. m.ulps)
    m = errors.measure(f, "sum", "float64", math.huge)            -- but not float64
    assert.same({ math.huge, false }, { m.rel_err, m.correctly_rounded })
    f = facts({ math.huge, 1 }, "float64")
    m = errors.measure(f, "sum", "float64", math.huge)            -- the real sum is infinite
    assert.same({ 0.0, true }, { m.rel_err, m.correctly_rounded })
    f = facts({ 1, -1 }, "float64")
    m = errors.measure(f, "sum", "float64", 0.0)
    assert.same({ 0.0, 0.0, true }, { m.rel_err, m.ulps, m.correctly_rounded })
    m = errors.measure(f, "sum", "float64", 2 ^ -1074)
    assert.same({ math.huge, 1.0, 1 }, { m.rel_err, m.ulps, m.steps })
    assert.are.equal(math.huge, errors.condition(f))
  end)
end)

describe("lab.datasets", function()
  it("gives the same bytes for the same seed, and float32 data as its float64 twin rounded (uniform and "
    .. "subnormal at float32's own precision and range)", function()
    for _, name in ipairs(datasets.NAMES) do
      local a = datasets.bytes(name, 1001, "float64", 5)
      assert.are.equal(a, datasets.bytes(name, 1001, "float64", 5), name)
      assert.are_not.equal(a, datasets.bytes(name, 1001, "float64", 6), name)
      assert.are.equal(8008, #a)
      local f = datasets.bytes(name, 1001, "float32", 5)
      assert.are.equal(4004, #f)
      for i = 0, 1000, 37 do
        local x, y = string.unpack("<d", a, 8 * i + 1), string.unpack("<f", f, 4 * i + 1)
        if name == "uniform" then
          assert(y >= 0 and y < 1 and x >= 0 and x < 1, name)
        elseif name == "subnormal" then
          assert(math.abs(x) <= 2 ^ -1022 and math.abs(y) <= 2 ^ -126)
        else
          assert.are.equal(R.to_f32(x), y, name .. " element " .. i)
        end
      end
    end
  end)

  it("makes cancelling data ill-conditioned and uniform data well-conditioned", function()
    local n = 4096
    local function cond(name) return errors.condition(errors.facts(datasets.bytes(name, n, "float64", 1), "float64", n)) end
    assert(cond("cancelling") > 1e6, "cancelling: " .. cond("cancelling"))
    assert(math.abs(cond("uniform") - 1) < 1e-12, "uniform: " .. cond("uniform"))   -- sum|x| in doubles
  end)
end)

describe("accuracy lab runs", function()
  teardown(function() L.cleanup() end)

  local function accuracy(args) return L.run("accuracy.lua", args) end

  it("--quick --ops all: exact gpu_to_gpu, one result for all its variants, the same bits on each run", function()
    local dir = L.tmpdir()
    local code, out, stderr = accuracy("--quick --ops all --out " .. q(dir))
    assert.are.equal(0, code, stderr .. out)
    assert.matches("== float32 sum, n = 2%^14", out)
    assert.matches("== float64 std, n = 2%^14", out)
    assert.matches("cancelling", out)
    local doc = L.decode(dir .. "/accuracy.json")
    assert.are.equal("gpureduce experiments/accuracy.lua", doc.header.tool)
    assert.are.equal(gr.backend(), doc.header.backend)
    assert.are.equal(0, doc.header.failed)
    assert.are.equal(#doc.results, doc.header.configs)
    assert.are.equal(#datasets.NAMES * 2, #doc.datasets)            -- five data sets, two dtypes, one size
    for _, d in ipairs(doc.datasets) do assert(d.condition ~= json.null and d.about ~= json.null) end

    local g2g, per_group, seen = {}, {}, {}
    local variants = { auto = true }
    for _, name in ipairs(gr.variant_names()) do if not gr.variant(name).user then variants[name] = true end end
    for _, r in ipairs(doc.results) do
      local label = string.format("%s %s %s %s acc %s %s", r.variant, r.level, r.op, r.dtype, r.acc, r.dataset)
      assert.are.equal(json.null, r.error, label)
      assert.are.equal(1 << 14, r.n)
      assert(variants[r.variant], label)
      seen[r.variant] = true
      if r.level ~= "not_guaranteed" then assert.is_true(r.same_runs, label) end
      if r.level == "gpu_to_gpu" then
        if errors.ROOT[r.op] then
          assert(type(r.ulps) == "number" and r.ulps < 1, label .. ": " .. tostring(r.ulps))
        else
          assert.is_true(r.correctly_rounded, label)
          assert.are.equal(0, r.steps, label)
          assert.are.equal(r.exact, r.value, label)
        end
        local key = r.op .. r.dtype .. r.acc .. r.dataset
        per_group[key] = per_group[key] or r.value
        assert.are.equal(per_group[key], r.value, label .. ": another gpu_to_gpu variant gave other bits")
        g2g[#g2g + 1] = r
      end
      -- a float32 accumulator over cancelling data loses most digits: the table shows it
      if r.variant == "cpu" and r.level == "run_to_run" and r.acc == "float32" and r.op == "sum"
        and r.dataset == "cancelling" then
        assert(r.ulps > 1, label .. ": " .. r.ulps)
      end
    end
    for name in pairs(variants) do assert(seen[name], name .. " has no row") end
    -- every variant at gpu_to_gpu, for 6 ops x 5 data sets x (float32: 2 accumulators, float64: 1)
    local n_variants = 0
    for _ in pairs(variants) do n_variants = n_variants + 1 end
    assert.are.equal(n_variants * 6 * 5 * 3, #g2g)
    for _, b in ipairs(doc.bits) do
      if b.level == "gpu_to_gpu" then assert.are.equal(1, b.distinct, b.dataset .. " " .. b.op) end
      assert(b.distinct >= 1 and b.distinct <= b.variants)
      assert.are.equal(b.variants, #b.agree_with_auto + #b.differ_from_auto)
    end

    -- each table's bits lines are that table's own (not another op's with the same level and accumulator)
    for _, group in ipairs({ { "sum", "float32" }, { "sumsq", "float64" } }) do
      local op, dtype = group[1], group[2]
      local section = out:match("== " .. dtype .. " " .. op .. ", n = 2%^14.-\n(.-)\n==")
      local line = section:match("\n(%s+run_to_run%s+" .. dtype .. "%s+|[^\n]*)")
      local want = {}
      for _, b in ipairs(doc.bits) do
        if b.op == op and b.dtype == dtype and b.level == "run_to_run" and b.acc == dtype then
          want[#want + 1] = string.format("%d / %d (%d=auto)", b.distinct, b.variants, #b.agree_with_auto)
        end
      end
      local cells = {}
      for cell in (line .. "|"):gmatch("|%s*([^|]-)%s*%f[|]") do cells[#cells + 1] = cell end
      assert.are.equal(#datasets.NAMES, #want)
      assert.are.same(want, cells, line)
    end

    local lines = {}
    for line in L.read(dir .. "/accuracy.csv"):gmatch("[^\n]+") do
      if not line:match("^#") then lines[#lines + 1] = line end
    end
    assert.are.equal(#doc.results + 1, #lines)
    local columns = L.csv_split(lines[1])
    assert.are.equal("dataset", columns[1])
    for i = 2, #lines do assert.are.equal(#columns, #L.csv_split(lines[i]), lines[i]) end
  end)

  it("names the option on a bad value and documents its options", function()
    local code, out, stderr = accuracy("--datasets uniform,nope")
    assert.are.equal(1, code)
    assert.are.equal("", out)
    assert.matches("Error: %-%-datasets: 'nope' is not one of: uniform", stderr)
    code, out = accuracy("--help")
    assert.are.equal(0, code)
    for _, opt in ipairs({ "--variants", "--levels", "--dtypes", "--ops", "--datasets", "--sizes", "--seed",
      "--ddof", "--kernels", "--out", "--quick" }) do
      assert.matches(opt:gsub("%-", "%%-"), out)
    end
  end)
end)
