-- opts.determinism and the registry's levels: every variant but the two atomic ones promises run_to_run
-- (the same bits on every run of the same call), which is checked here on the GPU by repetition -- sync,
-- async and replayed graphs, a float32 sum of cancelling data, where a changed order shows in the bits --
-- and asking an atomic variant for it is an error. gpu_to_gpu is the exactly rounded sum: checked here on
-- the host (the cpu backend, host buffers) against an exact Shewchuk expansion on ill-conditioned data
-- (cancellation, magnitudes from 1e-30 to 1e30, subnormals), and for the same bits in every order;
-- spec/exact_gpu_spec.lua checks the other ops and the GPU's paths.
local gr = require "gpureduce"
local H = require("support.helpers").bind(it, function(reason) pending(reason) end)

local expect = H.expect_error
local ATOMIC = { atomic_shared = true, grid_stride_atomic = true }

local function bits(x) return string.pack("d", x) end

describe("determinism", function()
  -- the catalogue's rows (H.variants): user kernels registered by other spec files in this process give
  -- their own level (kernel_spec's spec_small says not_guaranteed)
  it("the registry gives every variant a level: not_guaranteed for the atomic ones, run_to_run else", function()
    for _, v in ipairs(H.variants()) do
      assert.are.equal(ATOMIC[v.name] and "not_guaranteed" or "run_to_run", v.determinism, v.name)
    end
  end)

  it("opts.determinism takes its three words, and gpu_to_gpu refuses the ops and dtypes it has no form for", function()
    local b = gr.buffer(1000, "float32"):random(1, -1, 1)
    local base = gr.sum(b)
    assert.are.equal(bits(base), bits(gr.sum(b, { determinism = "run_to_run" })))
    assert.are.equal(bits(base), bits(gr.sum(b, { determinism = "not_guaranteed" })))
    expect("opts.determinism: unknown value 'sometimes' (accepted: not_guaranteed, run_to_run, gpu_to_gpu)",
      function() gr.sum(b, { determinism = "sometimes" }) end)
    local exact = gr.sum(b, { determinism = "gpu_to_gpu" })
    assert.are.equal(bits(exact), bits(gr.sum(b, { determinism = "gpu_to_gpu", async = true }):wait()))
    assert.are.equal(100, #gr.sum(b, { determinism = "gpu_to_gpu", segment = 10 }))
    expect("opts.determinism: 'gpu_to_gpu' is available for sum, nansum, asum, mean, nanmean, sumsq, norm, var "
      .. "and std of the float dtypes (not max of float32)",
      function() gr.max(b, { determinism = "gpu_to_gpu" }) end)
    expect("opts.determinism: 'gpu_to_gpu' is available for sum, nansum, asum, mean, nanmean, sumsq, norm, var "
      .. "and std of the float dtypes (not sum of int32)",
      function() gr.sum(gr.buffer(3, "int32"), { determinism = "gpu_to_gpu" }) end)
    local h = gr.buffer({ 1, 2, 3 }, "float64", { where = "host" })
    assert.are.equal(6.0, gr.sum(h, { determinism = "gpu_to_gpu", variant = "cpu", finish = "host" }))
    assert.are.equal(100, #gr.sum(b, { determinism = "run_to_run", segment = 10 }))
  end)

  H.gpu_it("asking an atomic variant for run_to_run is an error naming it; not_guaranteed runs", function()
    local b = gr.buffer(1 << 16, "float32"):random(2, -1, 1)
    for name in pairs(ATOMIC) do
      expect("opts.determinism: variant '" .. name .. "' gives not_guaranteed",
        function() gr.sum(b, { variant = name, determinism = "run_to_run" }) end)
      local v = gr.sum(b, { variant = name, determinism = "not_guaranteed" })
      local want = gr.sum(b, { variant = "cpu", acc = "float64" })
      assert(math.abs(v - want) <= 1e-4 * (1 << 16), name .. ": " .. v .. " against " .. want)   -- float32 sums
    end
  end)

  H.gpu_it("every run_to_run variant gives the same bits on every run: sync, async and replayed graphs", function()
    local bad = {}
    for _, n in ipairs({ 1000003, (1 << 22) + 17 }) do
      local b = gr.buffer(n, "float32"):random(n, -1, 1)      -- cancelling data: the order shows in the bits
      for _, v in ipairs(H.variants()) do        -- the catalogue: user kernels say their own level
        if not ATOMIC[v.name] and v.available and H.needs_cuda(v) then
          local opts = { variant = v.name, determinism = "run_to_run" }
          local first = bits(gr.sum(b, opts))
          for rep = 1, 4 do
            if bits(gr.sum(b, opts)) ~= first then bad[#bad + 1] = v.name .. " n=" .. n .. " sync rep " .. rep end
          end
          if bits(gr.sum(b, { variant = v.name, async = true }):wait()) ~= first then
            bad[#bad + 1] = v.name .. " n=" .. n .. " async"
          end
        end
      end
      local auto = bits(gr.sum(b))
      for rep = 1, 5 do                                       -- the second call on is a replayed graph
        if bits(gr.sum(b)) ~= auto then bad[#bad + 1] = "auto n=" .. n .. " graph rep " .. rep end
      end
      local segs = gr.sum(b, { segment = 1 })                 -- every size's shape: lanes to blocks
      local parts = gr.reduce(b, { op = "sum", offsets = gr.buffer({ 0, 1, 1000, n - 5, n }, "int64") }):totable()
      local again = gr.reduce(b, { op = "sum", offsets = gr.buffer({ 0, 1, 1000, n - 5, n }, "int64") }):totable()
      for k = 1, #parts do
        if bits(parts[k]) ~= bits(again[k]) then bad[#bad + 1] = "offsets n=" .. n .. " segment " .. k end
      end
      segs:free()
      b:free()
    end
    assert(#bad == 0, table.concat(bad, "\n"))
  end)
end)

describe("gpu_to_gpu: the exactly rounded sum", function()
  local where = gr.backend() == "cuda" and "host" or "device"   -- the host's computation (exact.c)

  local correctly_rounded = require("support.exact_reference").correctly_rounded_sum

  local data = require "support.exact_data"

  --- op of float64 xs and of xs reversed, with gpu_to_gpu.
  local function both_orders(op, xs)
    local rev = {}
    for i = #xs, 1, -1 do rev[#rev + 1] = xs[i] end
    local function run(v) return gr[op](gr.buffer(v, "float64", { where = where }), { determinism = "gpu_to_gpu" }) end
    return run(xs), run(rev)
  end

  it("is correctly rounded on cancelling, mixed, subnormal and heavy-tailed data, float32 and float64", function()
    local bad = {}
    for _, dtype in ipairs({ "float32", "float64" }) do
      local f32 = dtype == "float32"
      for _, kind in ipairs({ "cancelling", "mixed", "subnormal", "heavy" }) do
        for _, n in ipairs({ 1, 2, 3, 1000, 20001 }) do
          local xs = data(kind, n, n * 7 + #kind, f32)
          local b = gr.buffer(xs, dtype, { where = where })
          local got = gr.sum(b, { determinism = "gpu_to_gpu" })
          local ok, why = correctly_rounded(xs, got, f32 and 24 or 53, f32 and -149 or -1074)
          if not ok then bad[#bad + 1] = string.format("%s %s n=%d: %.17g, %s", dtype, kind, n, got, why) end
          if f32 then
            local wide = gr.sum(b, { determinism = "gpu_to_gpu", acc = "float64" })
            ok, why = correctly_rounded(xs, wide, 53, -1074)
            if not ok then bad[#bad + 1] = string.format("%s %s n=%d acc float64: %.17g, %s", dtype, kind, n, wide, why) end
          end
          b:free()
        end
      end
    end
    assert(#bad == 0, table.concat(bad, "\n"))
  end)

  it("gives the same bits in every order of the data, and nansum skips NaN", function()
    local a, r = both_orders("sum", data("mixed", 5001, 99, false))
    assert.are.equal(string.pack("d", a), string.pack("d", r))
    local withnan = { 1.5, 0 / 0, 2.25 }
    assert.are.equal(3.75, gr.nansum(gr.buffer(withnan, "float64", { where = where }), { determinism = "gpu_to_gpu" }))
    local s = gr.sum(gr.buffer(withnan, "float64", { where = where }), { determinism = "gpu_to_gpu" })
    assert(s ~= s, "a NaN makes the sum NaN")
  end)

  it("mean and nanmean are the correctly rounded quotient of the exact sum by the count, in every order", function()
    local xs = { 1e30, 1, -1e30, 3 }
    local b = gr.buffer(xs, "float64", { where = where })
    assert.are.equal(1.0, gr.mean(b, { determinism = "gpu_to_gpu" }))
    local mixed = data("mixed", 3001, 5, false)
    local m1, m2 = both_orders("mean", mixed)
    assert.are.equal(string.pack("d", m1), string.pack("d", m2))
    assert.are.equal(1 / 3, gr.mean(gr.buffer({ 0.5, 0.5, 0 }, "float64", { where = where }), { determinism = "gpu_to_gpu" }))
    assert.are.equal(1.5, gr.nanmean(gr.buffer({ 1, 0 / 0, 2 }, "float32", { where = where }), { determinism = "gpu_to_gpu" }))
    local none = gr.nanmean(gr.buffer({ 0 / 0 }, "float32", { where = where }), { determinism = "gpu_to_gpu" })
    assert(none ~= none, "nanmean of no number is NaN")
    expect("mean of an empty buffer is undefined",
      function() gr.mean(gr.buffer(0, "float32", { where = where }), { determinism = "gpu_to_gpu" }) end)
  end)

  it("follows IEEE at the edges: -0.0, infinities, overflow, an empty buffer", function()
    local function sum(xs, dtype) return gr.sum(gr.buffer(xs, dtype or "float64", { where = where }), { determinism = "gpu_to_gpu" }) end
    local z = sum({ -0.0, -0.0 })
    assert(z == 0 and 1 / z < 0, "a sum of -0.0 is -0.0")
    local p = sum({ 1, -1 })
    assert(p == 0 and 1 / p > 0, "an exact zero of other values is +0.0")
    assert.are.equal(math.huge, sum({ math.huge, 1 }))
    local n = sum({ math.huge, -math.huge })
    assert(n ~= n, "inf - inf is NaN")
    assert.are.equal(math.huge, sum({ 1.7976931348623157e308, 1.7976931348623157e308 }))
    assert.are.equal(1.7976931348623157e308, sum({ 1.7976931348623157e308, 1.7976931348623157e308, -1.7976931348623157e308 }))
    assert.are.equal(0.0, sum({}))
    assert.are.equal(math.huge, sum({ 3.4028234663852886e38, 3.4028234663852886e38 }, "float32"))
  end)
end)
