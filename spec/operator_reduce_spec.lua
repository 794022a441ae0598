-- Reductions with user operators: gr.reduce(b, {op = operator}). On the GPU the generated kernels run
-- the engine's passes (warp_shuffle's shape): an operator equal to sum gives warp_shuffle's sum bit for
-- bit, on every dtype and edge size; an indexed map, a struct accumulator with post, the "device"
-- finish, async, the graph cache, empty buffers and the refusals. On the cpu backend (and for host
-- buffers) the operator's cpu functions run, checked here against the built-in ops in CI.
local gr = require "gpureduce"
local H = require("support.helpers").bind(it, function(reason) pending(reason) end)
local R = require "support.fuzz_reference"

local expect = H.expect_error
local SIZES = { 0, 1, 31, 33, 1025, 65537, 1000003 }

local function sum_like(acc)
  return gr.operator { name = "usum", map = "x", reduce = "a + b", identity = "0", acc = acc,
                       cpu = { map = function(x) return x end, reduce = function(a, b) return a + b end } }
end

--- The accumulator of the built-in sum for dtype (an equal operator's, so the bits can match).
local function sum_acc(dtype)
  if dtype == "float64" then return dtype end
  if H.is_float(dtype) then return "float32" end    -- the 16-bit floats accumulate in float32
  return H.is_unsigned(dtype) and "uint64" or "int64"
end

local function same_bits(a, b)
  if math.type(a) == "float" and math.type(b) == "float" then return string.pack("d", a) == string.pack("d", b) end
  return a == b
end

local function fill(b, dtype, seed)
  if H.is_float(dtype) then b:random(seed, -10, 10) else b:random(seed) end
  return b
end

describe("gr.reduce with a user operator", function()
  H.gpu_it("equal to sum gives auto's variant's sum bit for bit, every dtype and edge size, both finishes", function()
    local bad = {}
    for _, dtype in ipairs(gr.dtypes()) do
      local op = sum_like(sum_acc(dtype))
      for _, n in ipairs(SIZES) do
        local b = fill(gr.buffer(n, dtype), dtype, n + 7)
        for _, finish in ipairs({ "single", "device" }) do
          local want = gr.sum(b, { variant = gr.plan(b, { op = "sum" }).variant, finish = finish })
          local got = gr.reduce(b, { op = op, finish = finish })
          if not same_bits(got, want) then
            bad[#bad + 1] = string.format("%s n=%d finish=%s: %s, auto's variant %s", dtype, n, finish, tostring(got),
              tostring(want))
          end
        end
        b:free()
      end
    end
    assert(#bad == 0, table.concat(bad, "\n"))
  end)

  H.gpu_it("min and max operators give the built-in extremes, integers at their limits", function()
    for _, dtype in ipairs(gr.dtypes()) do
      local lo, hi = R.DTYPES[dtype].min, R.DTYPES[dtype].max
      local acc = dtype
      -- min's identity, the dtype's largest value as a C literal of the accumulator: a bool accumulator's
      -- is 1 (true), an integer literal the host reads too; bool is no unsigned dtype, so no "u"
      -- float8_e4m3 has no infinity: its largest value, 448, is min's identity there
      local identity = dtype == "float8_e4m3" and "448" or H.is_float(dtype) and "INFINITY" or dtype == "uint64" and "~0ull"
        or dtype == "int64" and "9223372036854775807ll" or R.DTYPES[dtype].bool and "1"
        or tostring(hi) .. (H.is_unsigned(dtype) and "u" or "")
      local mn = gr.operator { name = "umin", map = "x", reduce = "b < a ? b : a", identity = identity, acc = acc }
      for _, n in ipairs({ 1, 1025, 1000003 }) do
        local b = fill(gr.buffer(n, dtype), dtype, 3 * n)     -- bool: random falses and trues
        -- the smallest value placed (bool: 0, false, which a bool element takes)
        if not H.is_float(dtype) and n > 1 then b[n // 2] = lo end
        assert.are.equal(gr.min(b), gr.reduce(b, { op = mn }), dtype .. " n=" .. n)
        b:free()
      end
    end
  end)

  H.gpu_it("map sees the 0-based index i: the sum of i is n (n - 1) / 2, in a slice too", function()
    local op = gr.operator { name = "isum", map = "(double)i", reduce = "a + b", identity = "0", acc = "float64" }
    for _, n in ipairs({ 1, 33, 65537, 1000003 }) do
      local b = gr.buffer(n, "int8")
      assert.are.equal(n * (n - 1) / 2, gr.reduce(b, { op = op }), "n=" .. n)
      assert.are.equal(n * (n - 1) / 2, gr.reduce(b, { op = op, finish = "device" }), "device n=" .. n)
      b:free()
    end
    local parent = gr.buffer(1000, "float32")
    local view = parent:slice(101, 500)
    assert.are.equal(500 * 499 / 2, gr.reduce(view, { op = op }), "a slice counts from its own start")
  end)

  H.gpu_it("a struct accumulator with post: a mean equal to gr.mean's", function()
    local mean = gr.operator {
      name = "smean", preamble = "struct MeanAcc { double s; unsigned long long n; };",
      map = "MeanAcc{double(x), 1ull}", reduce = "MeanAcc{a.s + b.s, a.n + b.n}", identity = "MeanAcc{0.0, 0ull}",
      post = "a.n ? a.s / double(a.n) : 0.0", acc = "MeanAcc" }
    for _, n in ipairs({ 1, 1025, 1000003 }) do
      local b = gr.buffer(n, "int32"):random(n, -1000, 1000)
      local got, want = gr.reduce(b, { op = mean }), gr.mean(b)
      assert(math.abs(got - want) <= 1e-12 * math.max(1, math.abs(want)), string.format("n=%d: %.17g vs %.17g", n,
        got, want))
      b:free()
    end
    assert.are.equal(0.0, gr.reduce(gr.buffer(0, "int32"), { op = mean }), "post of the identity for no element")
    assert.are.equal("MeanAcc", gr.plan(gr.buffer(10, "int32"), { op = mean }).acc, "gr.plan names the struct")
  end)

  H.gpu_it("post with an integer result comes back as a Lua integer", function()
    local op = gr.operator { name = "cnt", map = "x > 0 ? 1ll : 0ll", reduce = "a + b", identity = "0", acc = "int64",
                             post = "a * 2" }
    local b = gr.buffer({ 1, -1, 2, 0, 3 }, "int32")
    local v = gr.reduce(b, { op = op })
    assert.are.equal(6, v)
    assert.are.equal("integer", math.type(v))
  end)

  H.gpu_it("async, repeated calls (the graph cache) and a refilled buffer give the right values", function()
    local op = sum_like("int64")
    local b = gr.buffer(100000, "int32"):iota(1, 1)
    local p = gr.reduce(b, { op = op, async = true })
    assert.are.equal(5000050000, p:wait())
    for _ = 1, 5 do assert.are.equal(5000050000, gr.reduce(b, { op = op })) end
    b:fill(2)
    for _ = 1, 3 do assert.are.equal(200000, gr.reduce(b, { op = op })) end
    assert.are.equal(200000, gr.sum(b), "the built-in sum after the operator's graphs")
  end)

  H.gpu_it("gr.plan and gr.bench take an operator", function()
    local op = sum_like("float64")
    local b = gr.buffer(1 << 20, "float32"):random(1)
    local plan = gr.plan(b, { op = op })
    assert.are.equal("warp_shuffle", plan.variant)
    local t = gr.bench(b, { op = op, reps = 3, warmup = 1 })
    assert(t.ms > 0, "bench time")
  end)

  H.gpu_it("finishes hybrid and host fold the partials with cpu.reduce, then post on the device", function()
    for _, dtype in ipairs({ "int32", "uint8", "int64" }) do
      local op = sum_like("int64")
      for _, n in ipairs({ 1, 1025, 1000003 }) do
        local b = fill(gr.buffer(n, dtype), dtype, n)
        local want = gr.sum(b)
        for _, o in ipairs({ { finish = "host" }, { finish = "hybrid" }, { finish = "hybrid", threshold = 1 },
                             { finish = "host", block = 128, grid = 37 } }) do
          o.op = op
          assert.are.equal(want, gr.reduce(b, o), dtype .. " n=" .. n .. " " .. H.describe_opts(o))
        end
        b:free()
      end
    end
    local l2 = gr.operator { name = "l2", map = "x * x", reduce = "a + b", post = "sqrt(a)", identity = "0",
      acc = "float64", cpu = { map = function(x) return x * x end, reduce = function(a, b) return a + b end,
                               post = function(a) return math.sqrt(a) end } }
    assert.are.equal(5.0, gr.reduce(gr.buffer({ 3, 4 }, "float32"), { op = l2, finish = "host" }))
    local plan = gr.plan(gr.buffer(1 << 20, "float32"), { op = l2, finish = "hybrid" })
    assert.are.equal("hybrid", plan.finish)
    local t = gr.bench(gr.buffer(1 << 20, "float32"), { op = l2, finish = "host", reps = 2, warmup = 1 })
    assert(t.ms > 0, "bench time")
  end)

  H.gpu_it("a CPU finish refuses async and struct accumulators, and reports an error in cpu.reduce", function()
    local op = sum_like("int64")
    local b = gr.buffer(100000, "int32")
    expect("opts.finish: 'hybrid' runs the operator's cpu.reduce, synchronously", function()
      gr.reduce(b, { op = op, finish = "hybrid", async = true })
    end)
    local mean = gr.operator {
      name = "smean", preamble = "struct MeanAcc { double s; unsigned long long n; };",
      map = "MeanAcc{double(x), 1ull}", reduce = "MeanAcc{a.s + b.s, a.n + b.n}", identity = "MeanAcc{0.0, 0ull}",
      post = "a.s", acc = "MeanAcc", cpu = { map = function(x) return x end, reduce = function(p, q) return p + q end,
                                             post = function(a) return a end, identity = 0 } }
    expect("over numbers, which a struct accumulator's partials are not", function()
      gr.reduce(b, { op = mean, finish = "host" })
    end)
    local broken = gr.operator { name = "broken", map = "x", reduce = "a + b", identity = "0", acc = "int64",
      cpu = { map = function(x) return x end, reduce = function() error("no way") end } }
    expect("opts.op: the operator's cpu.reduce failed:", function()
      gr.reduce(b, { op = broken, finish = "host" })
    end)
    assert.are.equal(0, gr.reduce(b, { op = op }), "the context works after")
  end)

  H.gpu_it("refuses the CPU finishes, other variants, acc, and host buffers without cpu functions", function()
    local op = gr.operator { name = "nocpu", map = "x", reduce = "a + b", identity = "0", acc = "float64" }
    local b = gr.buffer(100, "float32")
    expect("opts.finish: 'hybrid' combines partials on the CPU", function() gr.reduce(b, { op = op, finish = "hybrid" }) end)
    expect("give gr.operator a cpu table (accepted here: auto, single, device)", function()
      gr.reduce(b, { op = op, finish = "host" })
    end)
    expect("opts.variant: 'pipelined' does not take a user operator", function() gr.reduce(b, { op = op, variant = "pipelined" }) end)
    expect("opts.acc: a user operator's accumulator is its own", function() gr.reduce(b, { op = op, acc = "float32" }) end)
    local h = gr.buffer(100, "float32", { where = "host" })
    expect("opts.op: operator nocpu has no cpu functions, and a user operator's kernels reduce device buffers " ..
      "(this one is in host memory: gr.copy it to a device buffer, or give gr.operator a cpu table)",
      function() gr.reduce(h, { op = op }) end)
  end)
end)

describe("gr.reduce with a user operator's cpu functions", function()
  local function cpu_it(title, fn)
    it(title, function()
      if gr.backend() == "cuda" then
        -- host buffers take the cpu functions on a GPU machine too
        fn("host")
      else
        fn("device")
      end
    end)
  end

  cpu_it("equal to sum gives the built-in sum, every dtype (floats within rounding)", function(where)
    for _, dtype in ipairs(gr.dtypes()) do
      local op = sum_like(sum_acc(dtype))
      for _, n in ipairs({ 0, 1, 33, 5000 }) do
        local b = fill(gr.buffer(n, dtype, { where = where }), dtype, n + 1)
        local got, want = gr.reduce(b, { op = op }), gr.sum(b)
        if H.is_float(dtype) then
          assert(math.abs(got - want) <= 1e-4 * math.max(1, math.abs(want)), dtype .. " n=" .. n)
        else
          assert.are.equal(want, got, dtype .. " n=" .. n)
        end
        b:free()
      end
    end
  end)

  cpu_it("map gets the 0-based index, post the element count", function(where)
    local op = gr.operator { name = "firstbig", map = "x > 500 ? (long long)i : 1000000000LL", reduce = "a < b ? a : b",
      identity = "1000000000", acc = "int64", post = "a + n",
      cpu = { map = function(x, i) return x > 500 and i or 1000000000 end, reduce = math.min,
              post = function(a, n) return a + n end } }
    local b = gr.buffer(1000, "int32", { where = where }):iota(1, 1)
    assert.are.equal(500 + 1000, gr.reduce(b, { op = op }))
  end)

  cpu_it("over an empty buffer give the identity, or post's value of it", function(where)
    local l2 = gr.operator { name = "l2", map = "x * x", reduce = "a + b", post = "sqrt(a)", identity = "0",
      acc = "float64", cpu = { map = function(x) return x * x end, reduce = function(a, b) return a + b end,
                               post = function(a) return math.sqrt(a) end } }
    assert.are.equal(0.0, gr.reduce(gr.buffer(0, "float32", { where = where }), { op = l2 }))
    assert.are.equal(5.0, gr.reduce(gr.buffer({ 3, 4 }, "float32", { where = where }), { op = l2 }))
  end)

  it("refuse what they cannot do, naming the option", function()
    local op = sum_like("int64")
    local b = gr.buffer(10, "int32")
    expect("opts.op: a gr.operator conflicts with this function's op 'sum'", function() gr.sum(b, { op = op }) end)
    if gr.backend() ~= "cuda" then
      local nocpu = gr.operator { name = "nocpu", map = "x", reduce = "a + b", identity = "0", acc = "float64" }
      expect("operator nocpu has no cpu functions", function() gr.reduce(b, { op = nocpu }) end)
      expect("opts.variant: a user operator's cpu functions take no variant, block, grid, finish, threshold or acc",
        function() gr.reduce(b, { op = op, variant = "cpu" }) end)
      expect("opts.async: a user operator's cpu functions run synchronously", function() gr.reduce(b, { op = op, async = true }) end)
    end
  end)
end)
