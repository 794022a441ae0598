--[[
sharded_reduce_spec.lua -- reductions of sharded buffers beyond the built-in ops over the whole buffer
(those are multi_gpu_spec.lua's): determinism = "gpu_to_gpu", user operators, and segments
(opts.segment, opts.offsets, opts.out), each checked against a plain buffer with the same contents.

What runs
  Every test runs over shards of one device repeated ({1, 1}, {1, 1, 1}, {1, 1, 1, 1, 1}): the same code
  paths as several GPUs, on one GPU and on the cpu backend (where shards are host buffers). With two
  devices or more the layouts {1, 2} and {2, 1, 2} join, with four {1, 2, 3, 4}.
  gpu_to_gpu: bit equality with a plain buffer's gpu_to_gpu result (and on the GPU with a host buffer's,
  which the host computes), on data with cancellation (1e30, 1, -1e30 in different shards), NaN, inf.
  Segments: every op and five dtypes, fixed sizes and CSR offsets chosen so that segments lie inside
  shards, cross one boundary, span three shards, are empty (first, at a boundary, last) or cover
  everything; integer results, min/max, count, and/or, argmin/argmax (value and index) bit for bit,
  float sums close to one buffer's and the same on every run; gpu_to_gpu segments bit for bit.
  Operators: integer and min operators equal one buffer's, a struct accumulator (a mean) with post, the
  index i counted over the whole array, segments; on the cpu backend the cpu functions run.
]]
local gr = require "gpureduce"
local H = require("support.helpers").bind(it, function(reason) pending(reason) end)

local nan, inf = 0 / 0, math.huge
local ndev = #gr.devices()
local cpu = gr.backend() == "cpu"
local EXACT_OPS = { "sum", "nansum", "asum", "mean", "nanmean", "sumsq", "norm", "var", "std" }
local TWO = { argmin = true, argmax = true, minmax = true }
-- results that must equal one buffer's bit for bit whatever the dtype
local BITWISE = { min = true, max = true, argmin = true, argmax = true, minmax = true, count = true,
  nanmin = true, nanmax = true, ["and"] = true, ["or"] = true }

local LAYOUTS = { { 1, 1 }, { 1, 1, 1 }, { 1, 1, 1, 1, 1 } }
if ndev >= 2 then
  LAYOUTS[#LAYOUTS + 1] = { 1, 2 }
  LAYOUTS[#LAYOUTS + 1] = { 2, 1, 2 }
end
if ndev >= 4 then LAYOUTS[#LAYOUTS + 1] = { 1, 2, 3, 4 } end

local function layout_name(devices) return "{" .. table.concat(devices, ",") .. "}" end

local function bits(v)
  if math.type(v) == "float" then
    if v ~= v then return "nan" end
    return string.pack("<d", v)
  end
  return tostring(v) .. type(v)
end

local function same_bits(got, want, label)
  assert(bits(got) == bits(want), string.format("%s: got %s, expected %s", label, tostring(got), tostring(want)))
end

--- A sharded buffer and a plain one (on the default device) holding the same n values of dtype, from
-- `values` (a table) or from random(seed, lo, hi).
local function pair(n, dtype, devices, values, seed, lo, hi)
  local s = gr.sharded(n, dtype, { devices = devices })
  local b = gr.buffer(n, dtype)
  if values then
    if n > 0 then
      s:set(values)
      b:set(values)
    end
  else
    s:random(seed, lo, hi)
    b:random(seed, lo, hi)
  end
  return s, b
end

--- Every result of gr.reduce as a list (errors as a string), for comparisons.
local function results(x, opts)
  local r = table.pack(pcall(gr.reduce, x, opts))
  if not r[1] then return { "error: " .. tostring(r[2]):gsub("^.-%(", "(") } end
  local out = {}
  for i = 2, r.n do
    local v = r[i]
    if type(v) == "userdata" then v = v:totable() end
    out[#out + 1] = v
  end
  return out
end

--- Floats with cancellation between shards and the dtype's edges: 1e30 first, -1e30 last, 1 between.
local function cancelling(n, dtype, with_nan)
  local t = {}
  for i = 1, n do t[i] = ((i * 37) % 101 - 50) / 8 end
  if n >= 3 then
    t[1], t[n // 2 + 1], t[n] = 1e30, 1, -1e30
  end
  if with_nan and n >= 4 then t[n - 1] = nan end
  return t
end

describe("sharded gpu_to_gpu", function()
  it("gives one buffer's bits for every op it takes, on data with cancellation across shards", function()
    for _, devices in ipairs(LAYOUTS) do
      for _, dtype in ipairs({ "float32", "float64" }) do
        for _, n in ipairs({ 0, 1, 3, 5, 7, 1000, 40001 }) do
          for _, with_nan in ipairs({ false, true }) do
            local s, b = pair(n, dtype, devices, cancelling(n, dtype, with_nan))
            local h = not cpu and gr.buffer(n, dtype, { where = "host" }) or nil
            if h and n > 0 then h:set(cancelling(n, dtype, with_nan)) end
            for _, op in ipairs(EXACT_OPS) do
              local label = string.format("%s %s n=%d nan=%s %s", layout_name(devices), dtype, n, with_nan, op)
              local opts = { op = op, determinism = "gpu_to_gpu" }
              local got, want = results(s, opts), results(b, opts)
              assert.are.equal(#want, #got, label)
              for i = 1, #want do same_bits(got[i], want[i], label) end
              if h then
                local host = results(h, opts)
                for i = 1, #host do same_bits(got[i], host[i], label .. " (host buffer)") end
              end
            end
          end
        end
      end
    end
  end)

  it("keeps 1 in 1e30 + 1 - 1e30 with one element per shard, where run_to_run may lose it", function()
    for _, dtype in ipairs({ "float32", "float64" }) do
      local s = gr.sharded(3, dtype, { devices = { 1, 1, 1 } }):set({ 1e30, 1, -1e30 })
      assert.are.equal(1.0, gr.sum(s, { determinism = "gpu_to_gpu" }), dtype)
      assert.are.equal(1 / 3, gr.mean(s, { determinism = "gpu_to_gpu", acc = "float64" }), dtype)
    end
  end)

  it("refuses what gpu_to_gpu does not take, as for one buffer", function()
    local s = gr.sharded(10, "int32", { devices = { 1, 1 } })
    H.expect_error("'gpu_to_gpu' is available for sum", gr.sum, s, { determinism = "gpu_to_gpu" })
    local f = gr.sharded(10, "float32", { devices = { 1, 1 } })
    H.expect_error("'gpu_to_gpu' is available for sum", gr.min, f, { determinism = "gpu_to_gpu" })
  end)
end)

--- Segment layouts over n elements: {segment = m} or the boundaries of {offsets = ...}.
local function segment_cases(n)
  local cases = {}
  for _, m in ipairs({ 1, 7, n // 4, n // 2, n }) do
    if m > 0 and n % m == 0 then cases[#cases + 1] = { segment = m } end
  end
  local third = n // 3
  cases[#cases + 1] = { bounds = { 0, 0, 1, third, third, n - 1, n, n } }          -- empty first, middle, last
  cases[#cases + 1] = { bounds = { 2, n // 5, n - 3 } }                            -- skips the ends
  cases[#cases + 1] = { bounds = { 0, n } }                                        -- one segment: every shard
  return cases
end

local function describe_case(c)
  return c.segment and ("segment=" .. c.segment) or ("offsets={" .. table.concat(c.bounds, ",") .. "}")
end

--- The options of a segment case, its offsets buffer made where `where` says (the default device, host
-- memory, or the last device).
local function case_opts(c, op, where)
  local opts = { op = op }
  if c.segment then
    opts.segment = c.segment
  else
    local place = where == "host" and { where = "host" } or where == "last" and { device = ndev } or nil
    opts.offsets = gr.buffer(c.bounds, "int64", place)
  end
  return opts
end

--- Asserts results of segments against one buffer's: bit for bit when `exact` (and integers, NaN and
-- infinities always), floats within a relative 1e-4.
local function assert_segments(got, want, exact, label)
  assert.are.equal(#want, #got, label .. ": result count")
  if type(want[1]) == "string" then
    assert.are.equal(want[1], got[1], label)
    return
  end
  for r = 1, #want do
    assert.are.equal(#want[r], #got[r], label .. ": segments")
    for s = 1, #want[r] do
      local l = label .. " result " .. r .. " segment " .. s
      local g, w = got[r][s], want[r][s]
      if exact or math.type(w) ~= "float" or w ~= w or w == inf or w == -inf then same_bits(g, w, l)
      else H.assert_close(g, w, 1e-4, l, math.max(math.abs(w), 1)) end
    end
  end
end

describe("sharded segments", function()
  it("give one buffer's results for every op: segments inside, across and over three shards, empty ones", function()
    local n = 600
    for _, devices in ipairs(LAYOUTS) do
      for _, dtype in ipairs({ "int8", "uint64", "int32", "float32", "float64" }) do
        local float = H.is_float(dtype)
        local s, b = pair(n, dtype, devices, nil, #devices * 7 + #dtype, float and -1.5 or 0, float and 1.5 or 3)
        -- floats within 1.5 keep partial products far from overflow; NaN and infinities, some in a
        -- segment that crosses shards
        if float then
          for _, x in ipairs({ { 5, nan }, { n // 2 + 1, inf }, { n // 2 + 2, -inf }, { n - 10, nan } }) do
            s[x[1]] = x[2]
            b[x[1]] = x[2]
          end
        end
        for ci, c in ipairs(segment_cases(n)) do
          for _, op in ipairs(gr.ops()) do
            local label = string.format("%s %s %s %s", layout_name(devices), dtype, describe_case(c), op)
            local where = ({ "host", "last", "default" })[ci % 3 + 1]
            local want = results(b, case_opts(c, op, nil))
            local got = results(s, case_opts(c, op, where))
            assert_segments(got, want, BITWISE[op], label)
            assert_segments(results(s, case_opts(c, op, where)), got, true, label .. " (run to run)")
          end
        end
      end
    end
  end)

  it("give one buffer's gpu_to_gpu bits, segments spanning shards included", function()
    local n = 300
    for _, devices in ipairs(LAYOUTS) do
      for _, dtype in ipairs({ "float32", "float64" }) do
        local s, b = pair(n, dtype, devices, cancelling(n, dtype, true))
        for _, c in ipairs(segment_cases(n)) do
          for _, op in ipairs(EXACT_OPS) do
            local label = string.format("%s %s %s %s gpu_to_gpu", layout_name(devices), dtype, describe_case(c), op)
            local ow, og = case_opts(c, op), case_opts(c, op, "host")
            ow.determinism, og.determinism = "gpu_to_gpu", "gpu_to_gpu"
            assert_segments(results(s, og), results(b, ow), true, label)
          end
        end
      end
    end
  end)

  -- var, std, norm and mean of integers of up to 32 bits are formed once from exact integer sums (docs/
  -- api.md), so a segment that spans shards (finished on the host) must give the bits of the same segment
  -- of one buffer (finished by the device's segmented kernel). Found on an H100: a product and a
  -- difference of moments_m2 fused into one fma on the device, rounded twice on the host.
  -- Small values matter: the two roundings differ only where the sum of squared deviations is small
  -- beside r^2 / n (short segments of values close together).
  it("give one buffer's bits for var, std, norm and mean of integers, small values and whole range", function()
    local n, k = 2183, 164
    local bounds = { 0 }
    for s = 1, k - 1 do bounds[s + 1] = (s * 7919 * 31) % n end
    bounds[k + 1] = n
    table.sort(bounds)
    for _, devices in ipairs({ { 1, 1, 1 }, LAYOUTS[#LAYOUTS] }) do
      for _, dtype in ipairs({ "int8", "uint8", "int32", "uint32" }) do
       for _, range in ipairs({ { 0, 3 }, { 0, 1 }, {} }) do
        local s, b = pair(n, dtype, devices, nil, 20261125 + #dtype, range[1], range[2])
        for _, op in ipairs({ "var", "std", "norm", "mean", "sumsq", "sum" }) do
          for _, c in ipairs({ { bounds = bounds }, { segment = 37 } }) do
            local label = string.format("%s %s [%s] %s %s", layout_name(devices), dtype,
              table.concat(range, ","), op, c.segment and "segment=37" or "offsets")
            local want = results(b, case_opts(c, op))
            assert_segments(results(s, case_opts(c, op)), want, true, label)
            assert_segments(results(s, case_opts(c, op, "host")), want, true, label .. " (offsets on the host)")
          end
        end
       end
      end
    end
  end)

  it("handle fewer elements than shards, empty shards and an empty buffer", function()
    for _, dtype in ipairs({ "int32", "float64" }) do
      local s, b = pair(2, dtype, { 1, 1, 1, 1, 1 }, { 7, -3 })
      for _, op in ipairs({ "sum", "min", "argmax", "minmax" }) do
        for _, c in ipairs({ { segment = 1 }, { segment = 2 }, { bounds = { 0, 0, 1, 2, 2 } } }) do
          local label = dtype .. " " .. op .. " " .. describe_case(c)
          assert_segments(results(s, case_opts(c, op)), results(b, case_opts(c, op)), true, label)
        end
      end
      local e, eb = pair(0, dtype, { 1, 1, 1 })
      for _, op in ipairs({ "sum", "max", "argmin", "mean" }) do
        local c = { bounds = { 0, 0, 0 } }
        assert_segments(results(e, case_opts(c, op)), results(eb, case_opts(c, op)), true, dtype .. " empty " .. op)
      end
    end
  end)

  it("write into opts.out and return it; refuse a wrong out, naming it", function()
    local s, b = pair(100, "int32", { 1, 1, 1 }, nil, 4, -50, 50)
    local out = gr.buffer(10, "int64")
    assert.are.equal(out, gr.sum(s, { segment = 10, out = out }))
    assert.are.same(gr.sum(b, { segment = 10 }):totable(), out:totable())
    local v, i = gr.buffer(4, "int32"), gr.buffer(4, "int64")
    local rv, ri = gr.argmin(s, { segment = 25, out = { v, i } })
    assert.are.equal(v, rv)
    assert.are.equal(i, ri)
    local wv, wi = gr.argmin(b, { segment = 25 })
    assert.are.same(wv:totable(), v:totable())
    assert.are.same(wi:totable(), i:totable())
    H.expect_error("opts.out: must be 10 elements of int64 (got 10 of int32)", gr.sum, s,
      { segment = 10, out = gr.buffer(10, "int32") })
    H.expect_error("opts.segment: 7 does not divide the buffer's size 100", gr.sum, s, { segment = 7 })
    H.expect_error("opts.offsets: boundary 2 (101) is past the end of the buffer", gr.sum, s,
      { offsets = gr.buffer({ 0, 101 }, "int64") })
    H.expect_error("opts.offsets: must be an int64 buffer", gr.sum, s, { offsets = gr.buffer({ 0, 1 }, "int32") })
    H.expect_error("opts.variant: segmented reductions choose their own kernel", gr.sum, s,
      { segment = 10, variant = "warp_shuffle" })
  end)
end)

--- An operator that sums into int64 (integers) or float64, with cpu functions.
local function int_sum()
  return gr.operator { name = "isum", map = "x", reduce = "a + b", identity = "0", acc = "int64",
    cpu = { map = function(x) return x end, reduce = function(a, b) return a + b end } }
end

describe("sharded user operators", function()
  it("equal one buffer's results where the operator is order-free (integers, min), segments too", function()
    local add = int_sum()
    local mn = gr.operator { name = "umin", map = "x", reduce = "b < a ? b : a", identity = "127", acc = "int8",
      cpu = { map = function(x) return x end, reduce = function(a, b) return math.min(a, b) end } }
    for _, devices in ipairs(LAYOUTS) do
      for _, n in ipairs({ 1, 2, 1000, 65537 }) do
        local label = layout_name(devices) .. " n=" .. n
        local s, b = pair(n, "int32", devices, nil, n, -1000, 1000)
        assert.are.equal(gr.sum(b), gr.reduce(s, { op = add }), label)
        assert.are.equal(gr.reduce(b, { op = add }), gr.reduce(s, { op = add }), label)
        local s8, b8 = pair(n, "int8", devices, nil, n + 1)
        if n > 1 then
          s8[n] = -128
          b8[n] = -128
        end
        assert.are.equal(gr.min(b8), gr.reduce(s8, { op = mn }), label .. " min")
        if n % 10 == 0 then
          for _, c in ipairs(segment_cases(n)) do
            assert_segments(results(s, case_opts(c, add)), results(b, case_opts(c, "sum")), true,
              label .. " " .. describe_case(c))
          end
        end
      end
    end
  end)

  it("see i over the whole array: the sum of i is n (n - 1) / 2", function()
    local op = gr.operator { name = "isum_i", map = "(double)i", reduce = "a + b", identity = "0", acc = "float64",
      cpu = { map = function(_, i) return i end, reduce = function(a, b) return a + b end } }
    for _, devices in ipairs(LAYOUTS) do
      for _, n in ipairs({ 1, 33, 100003 }) do
        assert.are.equal(n * (n - 1) / 2, gr.reduce(gr.sharded(n, "int8", { devices = devices }), { op = op }),
          layout_name(devices) .. " n=" .. n)
      end
    end
  end)

  it("give the identity of an empty sharded buffer", function()
    assert.are.equal(0, gr.reduce(gr.sharded(0, "int32", { devices = { 1, 1 } }), { op = int_sum() }))
  end)

  H.gpu_it("combine struct accumulators with post (a mean) without cpu functions, the same every run", function()
    local op = gr.operator {
      name = "smean", preamble = "struct MeanAcc { double s; unsigned long long n; };",
      map = "MeanAcc{(double)x, 1ull}", reduce = "MeanAcc{a.s + b.s, a.n + b.n}", identity = "MeanAcc{0.0, 0ull}",
      post = "a.n ? a.s / (double)a.n : 0.0", acc = "MeanAcc",
    }
    for _, devices in ipairs(LAYOUTS) do
      local label = layout_name(devices)
      -- integers: every partial sum is exact in a double, so the bits are one buffer's
      local s, b = pair(1000003, "int32", devices, nil, 5, -1000, 1000)
      same_bits(gr.reduce(s, { op = op }), gr.reduce(b, { op = op }), label .. " int32")
      local f = gr.sharded(1000003, "float32", { devices = devices }):random(9, -1, 1)
      local first = gr.reduce(f, { op = op })
      H.assert_close(first, gr.mean(f), 1e-9, label .. " float32", 1)
      for _ = 1, 3 do same_bits(gr.reduce(f, { op = op }), first, label .. " run to run") end
      local seg = gr.reduce(s, { op = op, segment = 1000003 }):totable()
      same_bits(seg[1], gr.reduce(b, { op = op }), label .. " one segment")
    end
  end)

  it("say what is missing: cpu functions on the cpu backend, gpu_to_gpu", function()
    local s = gr.sharded(10, "float32", { devices = { 1, 1 } })
    H.expect_error("opts.determinism: 'gpu_to_gpu' has no form for a user operator", gr.reduce, s,
      { op = int_sum(), determinism = "gpu_to_gpu" })
    if cpu then
      local bare = gr.operator { name = "bare", map = "x", reduce = "a + b", identity = "0", acc = "float64" }
      H.expect_error("opts.op: operator bare has no cpu functions", gr.reduce, s, { op = bare })
    end
  end)
end)

describe("sharded refusals", function()
  it("name the option that a sharded reduction does not take", function()
    local s = gr.sharded(100, "float32", { devices = { 1, 1 } })
    H.expect_error("opts.async: a sharded buffer is reduced synchronously", gr.sum, s, { async = true })
    H.expect_error("opts.streamed: a sharded buffer is on its devices already", gr.sum, s, { streamed = true })
    H.expect_error("opts.stream: a sharded reduction runs on the stream of each shard's device", gr.sum, s,
      { stream = gr.stream() })
    H.expect_error("opts.finish: each shard is finished in one kernel", gr.sum, s, { finish = "host" })
    H.expect_error("opts.dtype: only for a table or byte-string source", gr.sum, s, { dtype = "int32" })
  end)
end)

describe("sharded segments on several GPUs", function()
  H.gpu_it("put results on the first shard's device and refuse out on another #multi", function()
    if ndev < 2 then
      pending("multi: " .. ndev .. " device(s), 2 needed")
      return
    end
    local s = gr.sharded(100, "int32", { devices = { 2, 1 } }):iota(1)
    local r = gr.sum(s, { segment = 10 })
    assert.are.equal(2, r:device())
    assert.are.equal(55, r[1])
    H.expect_error("opts.out: is on device 1: a sharded buffer's segment results go to its first shard's device, 2",
      gr.sum, s, { segment = 10, out = gr.buffer(10, "int64", { device = 1 }) })
  end)
end)
