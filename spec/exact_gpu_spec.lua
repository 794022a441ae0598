-- opts.determinism = "gpu_to_gpu" for every op that has an exact form (sum, nansum, asum, mean, nanmean,
-- sumsq, norm, var, std) over float32 and float64: accurate against exact references built here from error-free
-- transformations (Shewchuk expansions, Dekker products) on ill-conditioned data, IEEE edges, a mutation
-- check that a truncating rounding fails; and on the GPU the same bits for every variant name, block,
-- forced grid, finish, async, stream, streamed chunk size, segment form, reduce_many, and for a device
-- buffer against a host buffer (which the host reduces: the GPU against the CPU's code).
local gr = require "gpureduce"
local H = require("support.helpers").bind(it, function(reason) pending(reason) end)
local R = require "support.fuzz_reference"

local grow, approx = R.lib.grow, R.lib.approx
local expect = H.expect_error
local EXACT_OPS = { "sum", "nansum", "asum", "mean", "nanmean", "sumsq", "norm", "var", "std" }
local G2G = { determinism = "gpu_to_gpu" }

local function bits(x) return string.pack("<d", x) end
local function with(extra)
  local o = { determinism = "gpu_to_gpu" }
  for k, v in pairs(extra or {}) do o[k] = v end
  return o
end

-- ---- exact references ------------------------------------------------------------------------------

local X = require "support.exact_reference"
local two_prod, sum_of, squares_of, ulp, correctly_rounded = X.two_prod, X.sum_of, X.squares_of, X.ulp,
  X.correctly_rounded

--- Whether got is within `ulps` ulps of the reference value ref (a double near the exact value).
local function near(got, ref, ulps, p, emin)
  local largest = p == 24 and 0x1.ffffffp127 or math.huge   -- the largest float32 and half its ulp
  if math.abs(ref) >= largest then                   -- rounds past the format's range: an infinity
    return got == (ref > 0 and math.huge or -math.huge), string.format("%.17g against %.17g", got, ref)
  end
  local d = math.abs(got - ref)
  if d <= ulps * ulp(ref, p, emin) then return true end
  return false, string.format("%.17g against %.17g: off by %.3g ulp", got, ref, d / ulp(ref, p, emin))
end

--- The exact variance's reference: (n Q - S^2) / (n (n - ddof)), the numerator an exact expansion.
local function variance_ref(xs, ddof)
  local n = #xs
  local s, ms = sum_of(xs)
  local q, mq = squares_of(xs)
  local num, m = {}, 0
  for i = 1, mq do
    local a, b = two_prod(q[i], n)
    m = grow(num, grow(num, m, a), b)
  end
  for i = 1, ms do
    for j = 1, ms do
      local a, b = two_prod(s[i], s[j])
      m = grow(num, grow(num, m, -a), -b)
    end
  end
  return approx(num, m) / n / (n - ddof)
end

local data = require "support.exact_data"

-- where the accuracy checks run: device buffers (the exact kernel on a GPU, the host's code on cpu)
local where = "device"

describe("gpu_to_gpu ops: accuracy against exact references", function()
  it("sum, asum, mean, sumsq are correctly rounded; norm, var, std within one ulp, float32 and float64", function()
    local bad = {}
    for _, dtype in ipairs({ "float32", "float64" }) do
      local f32 = dtype == "float32"
      local p, emin = f32 and 24 or 53, f32 and -149 or -1074
      for _, kind in ipairs({ "cancelling", "offset", "mixed", "heavy" }) do
        for _, n in ipairs({ 1, 3, 1000, 20001 }) do
          local xs = data(kind, n, n * 13 + #kind, f32)
          local b = gr.buffer(xs, dtype, { where = where })
          local function check(label, ok, why)
            if not ok then bad[#bad + 1] = string.format("%s %s n=%d %s: %s", dtype, kind, n, label, why) end
          end
          local s, ms = sum_of(xs)
          check("sum", correctly_rounded(s, ms, gr.sum(b, G2G), 1, p, emin))
          check("mean", correctly_rounded(s, ms, gr.mean(b, G2G), n, p, emin))
          local mags = {}
          for i = 1, n do mags[i] = math.abs(xs[i]) end
          local a, ma = sum_of(mags)
          check("asum", correctly_rounded(a, ma, gr.asum(b, G2G), 1, p, emin))
          local q, mq = squares_of(xs)
          local sumsq = gr.sumsq(b, G2G)
          if sumsq < math.huge then check("sumsq", correctly_rounded(q, mq, sumsq, 1, p, emin)) end
          check("norm", near(gr.norm(b, G2G), math.sqrt(approx(q, mq)), 1, p, emin))
          if kind ~= "mixed" then                     -- squares of 1e30 overflow the reference's doubles
            for _, ddof in ipairs({ 0, 1 }) do
              if n > ddof then
                local v = variance_ref(xs, ddof)
                check("var ddof " .. ddof, near(gr.var(b, with { ddof = ddof }), v, 1, p, emin))
                check("std ddof " .. ddof, near(gr.std(b, with { ddof = ddof }), math.sqrt(v), 1, p, emin))
              end
            end
          end
          b:free()
        end
      end
    end
    assert(#bad == 0, table.concat(bad, "\n"))
  end)

  it("rounds to nearest, ties to even: a truncating or upward rounding fails here", function()
    local function sum(xs) return gr.sum(gr.buffer(xs, "float64", { where = where }), G2G) end
    assert.are.equal(1 + 2 ^ -52, sum({ 1, 2 ^ -53, 2 ^ -106 }))         -- above the midpoint: up
    assert.are.equal(1.0, sum({ 1, 2 ^ -53 }))                             -- a tie: to the even 1
    assert.are.equal(1 + 2 ^ -51, sum({ 1 + 2 ^ -52, 2 ^ -53 }))           -- a tie: to the even neighbour
    assert.are.equal(1.0, sum({ 1, 2 ^ -53, -2 ^ -106 }))                  -- below the midpoint: down
    assert.are.equal(-(1 + 2 ^ -52), sum({ -1, -2 ^ -53, -2 ^ -106 }))
    local m = gr.mean(gr.buffer({ 1, 1, 1 + 2 ^ -52 }, "float64", { where = where }), G2G)
    assert.are.equal(1.0, m)                                               -- 1 + 2^-52/3: down, not up
  end)

  it("keeps sums of squares of float64 whole from 2^-1074 to 2^1023 (no overflow, no underflow)", function()
    local b = gr.buffer({ 1e300, 1e300 }, "float64", { where = where })
    assert.are.equal(math.huge, gr.sumsq(b, G2G))
    assert.are.equal(1e300 * math.sqrt(2), gr.norm(b, G2G))
    assert.are.equal(0.0, gr.var(b, G2G))
    assert.are.equal(1e300, gr.std(gr.buffer({ 1e300, -1e300 }, "float64", { where = where }), G2G))
    local tiny = gr.buffer({ 2 ^ -1074, 3 * 2 ^ -1074 }, "float64", { where = where })
    assert.are.equal(0.0, gr.sumsq(tiny, G2G))
    assert.are.equal(3 * 2 ^ -1074, gr.norm(tiny, G2G))                     -- sqrt(10) 2^-1074, rounded
    assert.are.equal(2 ^ -1074, gr.std(tiny, G2G))
    assert.are.equal(2 * 2 ^ -1074, gr.mean(tiny, G2G))
    local f = gr.buffer({ 3e30, 4e30 }, "float32", { where = where })
    assert.are.equal(R.to_f32(5e30), gr.norm(f, G2G))
    assert.are.equal(math.huge, gr.sumsq(f, G2G))
    local q, m = squares_of({ R.to_f32(3e30), R.to_f32(4e30) })
    assert(correctly_rounded(q, m, gr.sumsq(f, with { acc = "float64" }), 1, 53, -1074))
  end)

  it("follows the ops' rules at the edges: NaN, infinities, -0.0, empty buffers, n <= ddof", function()
    local function run(op, xs, extra)
      return gr[op](gr.buffer(xs, "float64", { where = where }), with(extra))
    end
    local nan, inf = 0 / 0, math.huge
    for _, op in ipairs({ "sum", "mean", "sumsq", "norm", "var", "std" }) do
      local v = run(op, { 1, nan, 2 })
      assert(v ~= v, op .. " of a NaN is NaN")
    end
    assert.are.equal(3.0, run("nansum", { 1, nan, 2 }))
    assert.are.equal(1.5, run("nanmean", { 1, nan, 2 }))
    assert.are.equal(inf, run("sum", { 1, inf }))
    assert.are.equal(-inf, run("mean", { 1, -inf }))
    assert.are.equal(inf, run("sumsq", { 1, -inf }))
    assert.are.equal(inf, run("norm", { -inf, 2 }))
    local v = run("var", { 1, inf })
    assert(v ~= v, "var of an infinity is NaN")
    local z = run("sum", { -0.0, -0.0 })
    assert(z == 0 and 1 / z < 0, "a sum of -0.0 is -0.0")
    z = run("mean", { -0.0 })
    assert(z == 0 and 1 / z < 0, "a mean of -0.0 is -0.0")
    z = run("sumsq", { -0.0 })
    assert(z == 0 and 1 / z > 0, "a square is +0.0")
    z = run("asum", { -0.0, -0.0 })
    assert(z == 0 and 1 / z > 0, "an asum of -0.0 is +0.0")
    assert.are.equal(inf, run("asum", { 1, -inf }))
    assert.are.equal(inf, run("asum", { inf, -inf }))                       -- |x|: no inf - inf
    v = run("asum", { -1, nan })
    assert(v ~= v, "asum of a NaN is NaN")
    assert.are.equal(0.0, run("asum", {}))
    assert.are.equal(3.5, run("asum", { -1.25, 2.25 }))
    assert.are.equal(0.0, run("sum", {}))
    assert.are.equal(0.0, run("norm", {}))
    for _, op in ipairs({ "mean", "var", "std", "nanmean" }) do
      expect(op .. " of an empty buffer is undefined", function() run(op, {}) end)
    end
    v = run("var", { 5 }, { ddof = 1 })
    assert(v ~= v, "var with n <= ddof is NaN")
    v = run("nanmean", { nan })
    assert(v ~= v, "nanmean of no number is NaN")
  end)

  it("refuses what has no exact form, naming the option", function()
    local b = gr.buffer(10, "float32"):random(1, -1, 1)
    expect("opts.determinism: 'gpu_to_gpu' is available for sum, nansum, asum, mean, nanmean, sumsq, norm, var and std",
      function() gr.prod(b, G2G) end)
    expect("opts.determinism: 'gpu_to_gpu' has no form for a user operator",
      function()
        local op = gr.operator { name = "plus", map = "x", reduce = "a + b", identity = "0", acc = "float64",
          cpu = { map = function(x) return x end, reduce = function(a, c) return a + c end } }
        gr.reduce(b, { op = op, determinism = "gpu_to_gpu" })
      end)
    expect("opts.block: the exact kernel of 'gpu_to_gpu' takes 32, 64, 128, 256, 512 or 1024 threads (got 100)",
      function() gr.sum(b, with { block = 100 }) end)
    expect("opts.grid: the exact kernel of 'gpu_to_gpu' takes at most 2^30 blocks",
      function() gr.sum(b, with { grid = (1 << 30) + 1 }) end)
  end)

  it("gives segments, streamed data and reduce_many the whole buffer's bits, piece by piece", function()
    local xs = data("mixed", 3000, 4, false)
    local b = gr.buffer(xs, "float64", { where = where })
    for _, op in ipairs(EXACT_OPS) do
      local whole = gr[op](b, G2G)
      local segs = gr.reduce(b, with { op = op, segment = 3000 }):totable()
      assert.are.equal(bits(whole), bits(segs[1]), op)
      local parts = gr.reduce(b, with { op = op, offsets = gr.buffer({ 0, 0, 1000, 3000 }, "int64", { where = where }) })
      assert.are.equal(bits(gr[op](b:slice(1001, 2000), G2G)), bits(parts:totable()[3]), op)
      local many = gr.reduce_many({ b, b:slice(1, 1000) }, with { op = op })
      assert.are.equal(bits(whole), bits(many[1]), op)
      local h = gr.buffer(xs, "float64", { where = "host" })
      assert.are.equal(bits(whole), bits(gr.reduce(h, with { op = op, streamed = true, chunk = 4096 })), op)
    end
  end)
end)

-- ---- the same bits on every path of the GPU -------------------------------------------------------------

describe("gpu_to_gpu on the GPU: the same bits whatever the path", function()
  local function cases()
    local list = {}
    for _, dtype in ipairs({ "float32", "float64" }) do
      for _, kind in ipairs({ "uniform", "mixed" }) do
        local n = kind == "uniform" and (1 << 20) + 13 or 50001
        local b
        if kind == "uniform" then
          b = gr.buffer(n, dtype):random(n + #dtype, -1, 1)
        else
          b = gr.buffer(data("mixed", n, 7, dtype == "float32"), dtype)
        end
        list[#list + 1] = { dtype = dtype, kind = kind, b = b, host = gr.copy(gr.buffer(n, dtype, { where = "host" }), b) }
      end
    end
    return list
  end

  H.gpu_it("for every variant name, block, forced grid (1, 7, 100000) and finish, and against the host", function()
    local bad = {}
    for _, c in ipairs(cases()) do
      for _, op in ipairs(EXACT_OPS) do
        local label = c.dtype .. " " .. c.kind .. " " .. op
        local want = bits(gr[op](c.host, G2G))             -- the host's code (exact.c)
        local function same(extra, what)
          local ok, v = pcall(gr[op], c.b, with(extra))
          if not ok then bad[#bad + 1] = label .. " " .. what .. ": " .. tostring(v)
          elseif bits(v) ~= want then bad[#bad + 1] = label .. " " .. what .. string.format(": %.17g", v) end
        end
        same(nil, "default")
        for _, v in ipairs(gr.variants()) do same({ variant = v.name }, "variant " .. v.name) end
        for _, block in ipairs({ 32, 64, 128, 256, 512, 1024 }) do same({ block = block }, "block " .. block) end
        for _, grid in ipairs({ 1, 7, 100000 }) do same({ grid = grid }, "grid " .. grid) end
        for _, finish in ipairs({ "device", "hybrid", "host", "single" }) do same({ finish = finish }, "finish " .. finish) end
        want = bits(gr[op](c.host, with { acc = "float64" }))
        same({ acc = "float64" }, "acc float64")
        same({ acc = "float64", grid = 3, block = 64 }, "acc float64 grid 3")
      end
    end
    assert(#bad == 0, table.concat(bad, "\n"))
  end)

  -- The exact kernel runs whatever variant is named, so a user kernel named there is never compiled for the
  -- call: one that takes scalar accumulators only (not var's or norm's) must not fail it.
  H.gpu_it("a user kernel named as the variant is not compiled, even one that cannot take the op", function()
    gr.kernel { name = "g2g_scalars_only", source = [[
template <class Op, class In>
__device__ typename Op::acc_t g2g_scalars_only(const In *in, size_t n, unsigned long long first) {
    typename Op::acc_t v = 0;
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        v = Op::combine(v, gr::load_at<Op>(in[i], first + i));
    return gr::block_reduce<Op>(v);
}
]] }
    local b = gr.buffer(100003, "float32"):random(11, -1, 1)
    for _, op in ipairs(EXACT_OPS) do
      local want = bits(gr[op](b, G2G))
      assert.are.equal(want, bits(gr[op](b, with { variant = "g2g_scalars_only" })), op)
    end
  end)

  H.gpu_it("async, on a stream, streamed in chunks of any size, segmented and in reduce_many", function()
    local bad = {}
    local s = gr.stream()
    for _, c in ipairs(cases()) do
      for _, op in ipairs(EXACT_OPS) do
        local label = c.dtype .. " " .. c.kind .. " " .. op
        local want = bits(gr[op](c.b, G2G))
        local function check(v, what)
          if bits(v) ~= want then bad[#bad + 1] = label .. " " .. what .. string.format(": %.17g", v) end
        end
        check(gr[op](c.b, with { async = true }):wait(), "async")
        check(gr[op](c.b, with { async = true, stream = s, grid = 5 }):wait(), "async stream")
        check(gr[op](c.b, with { stream = s }), "stream")
        for _, chunk in ipairs({ 4096, 65536 + 16, 1 << 22 }) do
          check(gr.reduce(c.host, with { op = op, streamed = true, chunk = chunk, streams = 3 }), "streamed " .. chunk)
        end
        check(gr.reduce(c.b, with { op = op, segment = #c.b }):totable()[1], "one segment")
        check(gr.reduce_many({ c.b }, with { op = op })[1], "reduce_many")
        local n = #c.b
        local offsets = gr.buffer({ 0, 1, 1, 1000, n }, "int64")
        local parts = gr.reduce(c.b, with { op = op, offsets = offsets }):totable()
        local host_parts = gr.reduce(c.host, with { op = op, offsets = gr.buffer({ 0, 1, 1, 1000, n }, "int64",
          { where = "host" }) }):totable()
        for k = 1, 4 do
          if bits(parts[k]) ~= bits(host_parts[k]) then
            bad[#bad + 1] = string.format("%s segment %d: %.17g on the GPU, %.17g on the host", label, k, parts[k], host_parts[k])
          end
        end
        local small = gr.reduce(c.b, with { op = op, segment = 1 }):totable()
        local host_small = gr.reduce(c.host, with { op = op, segment = 1 }):totable()
        for k = 1, #small, 997 do
          if bits(small[k]) ~= bits(host_small[k]) then bad[#bad + 1] = label .. " segment = 1, element " .. k end
        end
      end
    end
    assert(#bad == 0, table.concat(bad, "\n"))
  end)

  H.gpu_it("is exact where the expansion cannot hold the sum: every element through the accumulator", function()
    -- magnitudes 1e-300 .. 1e300 interleaved: nearly every addition leaves an error the expansion drops
    local xs = {}
    for i = 1, 20000 do xs[i] = (i % 2 == 0 and 1 or -1) * 10.0 ^ ((i * 37) % 600 - 300) end
    local d, h = gr.buffer(xs, "float64"), gr.buffer(xs, "float64", { where = "host" })
    for _, op in ipairs({ "sum", "mean", "norm", "std" }) do
      assert.are.equal(bits(gr[op](h, G2G)), bits(gr[op](d, with { grid = 1 })), op)
      assert.are.equal(bits(gr[op](h, G2G)), bits(gr[op](d, with { grid = 100000, block = 32 })), op)
    end
    local s, m = sum_of(xs)
    assert(correctly_rounded(s, m, gr.sum(d, G2G), 1, 53, -1074))
  end)

  H.gpu_it("folds a long segment in rounds with carry steps between them (rounds of 64 elements, in a child)", function()
    -- GPUREDUCE_EXACT_ROUND shortens the rounds that segments over 2^30 elements take, so that the carry
    -- steps between them run here; the data sends nearly every element through the block's words
    local code = [[
local gr = require "gpureduce"
local xs = {}
for i = 1, 20000 do xs[i] = (i % 2 == 0 and 1 or -1) * 10.0 ^ ((i * 37) % 300 - 150) * (1 + i % 7 / 8) end
for _, dtype in ipairs({ "float64", "float32" }) do
  if dtype == "float32" then for i = 1, #xs do xs[i] = (i % 2 == 0 and 1 or -1) * 2.0 ^ ((i * 37) % 110 - 55) * (1 + i % 5 / 4) end end
  local b = gr.buffer(xs, dtype)
  local offsets = gr.buffer({ 0, 1, 65, 5000, 5001, 20000 }, "int64")
  for _, op in ipairs({ "sum", "nansum", "asum", "mean", "sumsq", "norm", "var", "std" }) do
    local parts = gr.reduce(b, { op = op, offsets = offsets, determinism = "gpu_to_gpu" }):totable()
    local fixed = gr.reduce(b, { op = op, segment = 10000, determinism = "gpu_to_gpu" }):totable()
    local line = { dtype, op }
    for _, v in ipairs(parts) do line[#line + 1] = string.format("%a", v) end
    for _, v in ipairs(fixed) do line[#line + 1] = string.format("%a", v) end
    print(table.concat(line, " "))
  end
end
]]
    local ok, status, out = H.run_lua(code, "GPUREDUCE_EXACT_ROUND=64")
    assert.is_true(ok, "the child exited with " .. tostring(status) .. ":\n" .. out)
    local ok_cpu, _, want = H.run_lua(code, "GPUREDUCE_BACKEND=cpu")    -- the host's code (exact.c)
    assert.is_true(ok_cpu, want)
    assert.are.equal(want, out)
    assert.are.equal(16, select(2, out:gsub("\n", "")))     -- 2 dtypes x 8 ops
  end)

  H.gpu_it("gr.plan says the exact kernel runs, with the launch shape asked for", function()
    local b = gr.buffer(1 << 20, "float32"):random(1, -1, 1)
    local p = gr.plan(b, with { block = 128, grid = 7, variant = "neighbored" })
    assert.is_true(p.exact)
    assert.are.equal(7, p.passes[1].blocks)
    assert.are.equal(128, p.passes[1].block)
    assert.are.equal("device", p.passes[1].where)
    local t = gr.bench(b, with { reps = 3, warmup = 1 })
    assert.are.equal("events", t.timer)
  end)
end)
