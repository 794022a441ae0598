--[[
cpu_backend_spec.lua -- the cpu backend as the reference (issue 20): float ops as accurate as numpy's on
the same data, the summation order it documents, the same bits whatever the number of threads, and the
exact results of the extremes (first of equals, first NaN, a zero's sign).

The references are independent of the engine: exact sums in Lua integers (experiments/lab/exact.lua,
through spec/support/exact_reference.lua's loader), numpy's pairwise summation written out in Lua with
float32 rounding, and the error bounds of numpy's own algorithms (below, `numpy`), which every float op
must meet on the data the spec makes:
  sum, nansum   |error| <= gamma(d) sum |x|, d the depth of numpy's pairwise tree for n (a leaf of at
                most 128 elements in 8 lanes, halves otherwise; gamma(k) = k u / (1 - k u));
  mean, nanmean the sum's bound / n, plus u |mean| for the division;
  sumsq         gamma(d + 1) sum x^2 (each square rounded, then the pairwise sum), norm its square root:
                relative gamma(d + 1) / 2 + 3 u;
  var           numpy's two passes: the mean from the pairwise sum (error delta <= gamma(d) sum |x| / n +
                u |mean| (1 + ...)), then the pairwise sum of the rounded squared deviations from it:
                |error| <= gamma(d + 4) var + 1.01 delta^2 (deviations from a wrong mean add delta^2 each);
                std: half var's relative bound plus u;
  prod          numpy multiplies in turn: gamma(n - 1) |prod| (relative), checked where the exact
                product is known to double precision.
]]
local gr = require "gpureduce"
-- the lab's exact sums (experiments/lab/exact.lua), found the way the exact-reference helpers find them
require "support.exact_reference"
local exact = require "lab.exact"

local U = { float32 = 2.0 ^ -24, float64 = 2.0 ^ -53 }

--- The data of these tests lives in host memory, which the host backend reduces on every backend (on a
-- GPU machine a device buffer would go to the kernels, whose order and bits are not the subject here).
local function host_buffer(x, dtype) return gr.buffer(x, dtype, { where = "host" }) end

local function f32(x) return (string.unpack("<f", string.pack("<f", x))) end

--- The depth of numpy's pairwise summation tree for n elements: how many roundings one element's
-- value can go through (pairwise_sum in numpy/core/src/umath/loops_utils.h.src).
local depth_memo = {}
local function depth(n)
  if depth_memo[n] then return depth_memo[n] end
  local d
  if n < 8 then
    d = math.max(n - 1, 0)
  elseif n <= 128 then
    local rest = n % 8
    d = ((n - rest) // 8 - 1) + 3 + rest
  else
    local h = n // 2
    h = h - h % 8
    d = 1 + math.max(depth(h), depth(n - h))
  end
  depth_memo[n] = d
  return d
end
local function gamma(k, u) return k * u / (1 - k * u) end

--- Exact sums of a buffer's float data: the sum, the sum of squares, the sum of magnitudes (doubles), the
-- exact variance (population) and mean, rounded to double.
local function exact_stats(b)
  local bytes, dtype = b:tobytes(), b:dtype()
  local S, Q = exact.new(), exact.new()
  local absum = S:add_bytes(bytes, dtype)
  Q:add_bytes(bytes, dtype, true)
  local n = #b
  local V = exact.new()
  V:add_acc(Q, n)
  V:add_product(S, S, -1)
  return {
    n = n,
    sum = S:round("float64"),
    mean = S:round("float64", { n }),
    sumsq = Q:round("float64"),
    absum = absum,
    var = V:round("float64", { n, n }),
  }
end

--- numpy's bound for op over data with the exact statistics e, in the accumulator's unit u.
local function numpy_bound(op, e, u)
  local n, d = e.n, depth(e.n)
  if op == "sum" or op == "nansum" then return gamma(d, u) * e.absum end
  if op == "mean" or op == "nanmean" then return gamma(d, u) * e.absum / n + u * math.abs(e.mean) end
  if op == "sumsq" then return gamma(d + 1, u) * e.sumsq end
  if op == "norm" then return (gamma(d + 1, u) / 2 + 3 * u) * math.sqrt(e.sumsq) end
  local delta = gamma(d, u) * e.absum / n + u * (math.abs(e.mean) + gamma(d, u) * e.absum / n)
  local var_bound = gamma(d + 4, u) * e.var + 1.01 * delta * delta
  if op == "var" then return var_bound end
  if op == "std" then return (var_bound / e.var / 2 + u) * math.sqrt(e.var) end
  error("no bound for " .. op)
end

local function want_of(op, e)
  if op == "sum" or op == "nansum" then return e.sum end
  if op == "mean" or op == "nanmean" then return e.mean end
  if op == "sumsq" then return e.sumsq end
  if op == "norm" then return math.sqrt(e.sumsq) end
  if op == "var" then return e.var end
  return math.sqrt(e.var)
end

local function check(got, want, bound, what)
  local err = math.abs(got - want)
  assert(err <= bound, string.format("%s: %.17g, exact %.17g: error %.3g (relative %.3g), numpy's bound %.3g",
    what, got, want, err, err / math.abs(want), bound))
end

describe("cpu backend: float ops as accurate as numpy's algorithms (issue 20)", function()
  it("the default float32 var of 2^20 uniform values (1.4e-4 relative off before)", function()
    local b = host_buffer(1 << 20, "float32"):random(1, 0, 1)
    local e = exact_stats(b)
    check(gr.var(b), e.var, numpy_bound("var", e, U.float32), "var")
    check(gr.std(b), math.sqrt(e.var), numpy_bound("std", e, U.float32), "std")
  end)

  it("the cpu variant's float32 sum of 295,680 equal values (1.6e-4 relative off before)", function()
    local n = 295680
    local b = host_buffer(n, "float32"):fill(0.1)
    local x = f32(0.1)
    local e = { n = n, sum = x * n, absum = x * n, mean = x }   -- x * n is exact in double
    check(gr.sum(b, { variant = "cpu" }), e.sum, numpy_bound("sum", e, U.float32), "sum")
    check(gr.mean(b, { variant = "cpu" }), x, numpy_bound("mean", e, U.float32), "mean")
  end)

  -- every float op, float32 (in float32 and with acc = "float64") and float64, on data that makes a
  -- long sequential sum lose: positive values, a large offset, equal values
  local datasets = {
    { "uniform [0, 1)", function(b) return b:random(3, 0, 1) end },
    { "offset [1000, 1001)", function(b) return b:random(4, 1000, 1001) end },
    { "equal 0.1", function(b) return b:fill(0.1) end },
  }
  local OPS = { "sum", "mean", "nansum", "nanmean", "sumsq", "norm", "var", "std" }
  for _, dt in ipairs({ { "float32" }, { "float32", "float64" }, { "float64" } }) do
    local dtype, acc = dt[1], dt[2]
    for _, set in ipairs(datasets) do
      it(string.format("%s%s, %s: %s within numpy's bounds", dtype, acc and " (acc float64)" or "", set[1],
        table.concat(OPS, ", ")), function()
        local n = (1 << 18) + 3
        local b = set[2](host_buffer(n, dtype))
        local e = exact_stats(b)
        local u = U[acc or dtype]
        for _, op in ipairs(OPS) do
          for _, variant in ipairs({ "auto", "cpu" }) do
            local want = want_of(op, e)
            if not (op == "var" or op == "std") or e.var > 0 then
              check(gr.reduce(b, { op = op, acc = acc, variant = variant }), want, numpy_bound(op, e, u),
                op .. " (" .. variant .. ")")
            end
          end
        end
      end)
    end
  end

  it("equal elements have var and std exactly 0", function()
    for _, dtype in ipairs({ "float32", "float64" }) do
      for _, n in ipairs({ 5, 1000, 5000, 300001 }) do
        local b = host_buffer(n, dtype):fill(0.1)
        assert.are.equal(0.0, gr.var(b), dtype .. " " .. n)
        assert.are.equal(0.0, gr.std(b), dtype .. " " .. n)
      end
    end
  end)

  it("float32 prod within numpy's (sequential) bound", function()
    local n = (1 << 18) + 3
    local b = host_buffer(n, "float32"):random(5, 0.999, 1.001)
    local want = 1.0
    for _, x in ipairs(b:totable()) do want = want * x end     -- relative error below n 2^-53
    local got = gr.prod(b)
    assert(math.abs(got - want) <= (gamma(n - 1, U.float32) + n * U.float64) * math.abs(want),
      string.format("prod %.9g, want %.9g", got, want))
  end)
end)

describe("cpu backend: the documented order of float sums", function()
  -- numpy's pairwise tree in float32, written out: leaves of at most 128 summed in 8 lanes from 0 (lane
  -- j takes elements j, j + 8, ...; ((0+1)+(2+3))+((4+5)+(6+7)), then the tail), halves otherwise
  local function pairwise32(x, lo, n)
    if n > 128 then
      local h = n // 2
      h = h - h % 8
      return f32(pairwise32(x, lo, h) + pairwise32(x, lo + h, n - h))
    end
    local r, k = { 0, 0, 0, 0, 0, 0, 0, 0 }, 0
    while k + 8 <= n do
      for j = 1, 8 do r[j] = f32(r[j] + x[lo + k + j]) end
      k = k + 8
    end
    local s = f32(f32(f32(r[1] + r[2]) + f32(r[3] + r[4])) + f32(f32(r[5] + r[6]) + f32(r[7] + r[8])))
    for i = k + 1, n do s = f32(s + x[lo + i]) end
    return s
  end

  it("a float32 sum is numpy's pairwise sum, bit for bit (auto and cpu)", function()
    for _, n in ipairs({ 1, 7, 8, 9, 127, 128, 129, 1000, 100003 }) do
      local b = host_buffer(n, "float32"):random(n, -1, 1)
      local want = pairwise32(b:totable(), 0, n)
      assert.are.equal(want, gr.sum(b), "n = " .. n)
      assert.are.equal(want, gr.sum(b, { variant = "cpu" }), "n = " .. n)
    end
  end)
end)

describe("cpu backend: the same bits whatever GPUREDUCE_CPU_THREADS", function()
  -- every op on data large enough for every thread count to split it, printed bit for bit
  local script = [[
    local gr = require "gpureduce"
    local out = {}
    for _, dtype in ipairs(gr.dtypes()) do
      local b = gr.buffer((1 << 20) + 17, dtype)
      if dtype:find("float") then b:random(9, -1, 1) elseif dtype == "bool" then b:random(9) else b:random(9, 0, 100) end
      for _, op in ipairs(gr.ops()) do
        for _, acc in ipairs(dtype == "float32" and { false, "float64" } or { false }) do
          local ok, v1, v2 = pcall(gr.reduce, b, { op = op, acc = acc or nil })
          if ok then
            out[#out + 1] = string.format("%s %s %s %s %s", dtype, op, tostring(acc),
              math.type(v1) == "float" and string.format("%a", v1) or tostring(v1),
              math.type(v2) == "float" and string.format("%a", v2) or tostring(v2))
          end
        end
      end
    end
    print(table.concat(out, "\n"))
  ]]
  local function run(threads)
    local lua = arg and arg[-1] or "lua5.4"
    local cmd = string.format("GPUREDUCE_BACKEND=cpu GPUREDUCE_CPU_THREADS=%d LUA_PATH='lua/?.lua;lua/?/init.lua;%s' " ..
      "LUA_CPATH='%s' %s -e %q 2>&1", threads, package.path, package.cpath, lua, script)
    local f = assert(io.popen(cmd))
    local out = f:read("a")
    local ok, _, code = f:close()
    assert(ok and code == 0, "interpreter exited with " .. tostring(code) .. ": " .. out)
    return out
  end

  it("every op and dtype, 1, 2, 3 and 7 threads", function()
    local one = run(1)
    assert.matches("float32 sum", one)
    for _, threads in ipairs({ 2, 3, 7 }) do
      local other = run(threads)
      if other ~= one then
        local a, b = {}, {}
        for l in one:gmatch("[^\n]+") do a[#a + 1] = l end
        for l in other:gmatch("[^\n]+") do b[#b + 1] = l end
        for i = 1, math.max(#a, #b) do
          assert.are.equal(a[i], b[i], string.format("1 thread against %d", threads))
        end
      end
    end
  end)
end)

describe("cpu backend: exact results of the extremes", function()
  local nan = 0 / 0
  local function sign(z) return 1 / z > 0 and "+0" or "-0" end

  it("a zero result is the first zero's, whatever its position in the lanes and blocks", function()
    for _, dtype in ipairs({ "float32", "float64" }) do
      for _, n in ipairs({ 9, 130, 5000, 300001 }) do
        for _, at in ipairs({ 2, n // 2, n - 1 }) do
          local t = {}
          for i = 1, n do t[i] = 1.0 + i / n end
          t[at], t[n] = -0.0, 0.0
          local b = host_buffer(t, dtype)
          local what = string.format("%s n = %d, -0.0 at %d", dtype, n, at)
          assert.are.equal("-0", sign(gr.min(b)), what)
          assert.are.equal("-0", sign(gr.nanmin(b)), what)
          local lo = gr.minmax(b)
          assert.are.equal("-0", sign(lo), what)
          local v, i = gr.argmin(b)
          assert.are.equal("-0", sign(v), what)
          assert.are.equal(at, i, what)
        end
      end
    end
  end)

  it("the first NaN wins min, max, minmax, argmin and argmax; nanmin skips it", function()
    for _, dtype in ipairs({ "float32", "float64" }) do
      for _, n in ipairs({ 9, 5000, 300001 }) do
        local t = {}
        for i = 1, n do t[i] = i % 7 end
        local at = n - 1
        t[at], t[n] = nan, nan
        local b = host_buffer(t, dtype)
        local what = dtype .. " n = " .. n
        assert(gr.min(b) ~= gr.min(b), what)
        assert(gr.max(b) ~= gr.max(b), what)
        local lo, hi = gr.minmax(b)
        assert(lo ~= lo and hi ~= hi, what)
        local v, i = gr.argmax(b)
        assert(v ~= v, what)
        assert.are.equal(at, i, what)
        assert.are.equal(0.0, gr.nanmin(b), what)
        assert.are.equal(6.0, gr.nanmax(b), what)
      end
    end
  end)

  it("nanmin and nanmax of NaN only are NaN; of NaN and infinities, the infinities", function()
    for _, dtype in ipairs({ "float32", "float64" }) do
      for _, n in ipairs({ 3, 4100 }) do
        local t = {}
        for i = 1, n do t[i] = nan end
        local b = host_buffer(t, dtype)
        assert(gr.nanmin(b) ~= gr.nanmin(b), dtype)
        t[n // 2] = math.huge
        b = host_buffer(t, dtype)
        assert.are.equal(math.huge, gr.nanmin(b), dtype)
        assert.are.equal(math.huge, gr.nanmax(b), dtype)
      end
    end
  end)
end)
