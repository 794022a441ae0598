--[[
several_ops_spec.lua -- several results in one pass: gr.reduce(b, {ops = {...}}) and gr.describe.

What it checks
  - Every dtype: all 21 ops at once (8 accumulators fuse, the rest take single calls), the describe set,
    and a drawn subset, on sizes around vectors, warps
    and the grid (1, 17, 4097, 2^20 + 3) and on slices that start off a 16-byte boundary; each result
    bit for bit what gr.reduce with that op alone gives (NaN, -0.0 and the index of argmin/argmax
    included): on the GPU the fused kernel stands for the single ones, so this is the contract. Floats
    carry NaN, infinities and signed zeros in some cases.
  - acc = "float64", ddof, gpu_to_gpu (the sum family), every op's own error where its single call has
    one (an empty buffer's mean).
  - gr.describe: count is #b, the rest the single calls' values.
  - With segment, offsets and axis: each op's result buffers, byte for byte the single calls'.
  - Bad input: an unknown or repeated name, an empty list, ops with op, ops on a shortcut, with streamed,
    on reduce_many and plan, describe with op -- each a clear error naming opts.ops (opts.out and opts.async
    with ops: ops_out_async_spec.lua).
]]
local gr = require "gpureduce"

local OPS = gr.ops()
local FLOATS = { float32 = true, float64 = true, float16 = true, bfloat16 = true, float8_e4m3 = true,
                 float8_e5m2 = true }

local same = require("support.helpers").same_result
local function show(x)
  if type(x) == "table" then return "{" .. show(x[1]) .. ", " .. show(x[2]) .. "}" end
  return math.type(x) == "float" and string.format("%a", x) or tostring(x)
end

--- The single call's result of op over b (a table for the two-result ops), or the error it raises.
local function single(b, op, opts)
  local o = { op = op }
  for k, v in pairs(opts or {}) do o[k] = v end
  local r = table.pack(pcall(gr.reduce, b, o))
  if not r[1] then return nil, r[2] end
  return r.n > 2 and { r[2], r[3] } or r[2]
end

local function data(d, n, seed, specials)
  local b = gr.buffer(n + 3, d)
  if d == "bool" then b:random(seed) elseif FLOATS[d] then b:random(seed, -2, 2) else b:random(seed) end
  if specials and FLOATS[d] and n > 8 then
    local values = d == "float8_e4m3" and { 0 / 0, 0.0, -0.0 } or { 0 / 0, math.huge, -math.huge, -0.0 }
    math.randomseed(seed)
    for _ = 1, 3 do b[math.random(n) + 1] = values[math.random(#values)] end
  end
  return b:slice(2, n)                          -- off a 16-byte boundary
end

local function check(b, ops, opts, what)
  local o = { ops = ops }
  for k, v in pairs(opts or {}) do o[k] = v end
  local got = gr.reduce(b, o)
  for _, op in ipairs(ops) do
    local want, err = single(b, op, opts)
    assert(err == nil, what .. ": the single " .. op .. " raised " .. tostring(err))
    assert(same(got[op], want), string.format("%s: %s got %s, alone %s", what, op, show(got[op]), show(want)))
  end
end

describe("gr.reduce with opts.ops", function()
  for _, d in ipairs(gr.dtypes()) do
    it(d .. ": every op at once, the describe set and subsets, bit for bit the single calls", function()
      math.randomseed(#d)
      -- one drawn subset per dtype: each new set is a compile (NVRTC) on the GPU
      local subset = {}
      for _, op in ipairs(OPS) do if math.random() < 0.3 then subset[#subset + 1] = op end end
      if #subset == 0 then subset = { "prod", "argmin" } end
      -- 2^20 + 3 elements take many blocks on the GPU; the cpu backend's single calls are the same code
      for _, n in ipairs({ 1, 17, 4097, gr.backend() == "cuda" and (1 << 20) + 3 or 70001 }) do
        for _, specials in ipairs({ false, true }) do
          local b = data(d, n, n + #d, specials)
          local what = string.format("%s n=%d%s", d, n, specials and " with specials" or "")
          check(b, OPS, nil, what .. " all ops")
          check(b, { "sum", "mean", "std", "min", "max", "count" }, nil, what .. " describe set")
          check(b, subset, nil, what .. " subset")
        end
      end
    end)
  end

  it("acc, ddof and gpu_to_gpu take the single calls' meaning", function()
    for _, d in ipairs({ "float32", "bfloat16", "float16" }) do
      local b = data(d, 100003, 9, false)
      check(b, { "sum", "mean", "var", "std", "norm", "sumsq" }, { acc = "float64", ddof = 1 }, d .. " acc float64")
      check(b, { "sum", "mean", "var", "std", "norm", "sumsq", "asum" }, { determinism = "gpu_to_gpu" },
            d .. " gpu_to_gpu")
    end
    local i = data("int32", 5000, 3, false)
    check(i, { "sum", "mean", "var", "min", "max", "argmin" }, { ddof = 1 }, "int32 ddof 1")
  end)

  it("with segment, offsets and axis: each op's buffers, the single calls' bit for bit", function()
    local function same_buffers(got, want, what)
      if type(want) == "table" then
        same_buffers(got[1], want[1], what .. "[1]")
        same_buffers(got[2], want[2], what .. "[2]")
        return
      end
      assert.are.equal(want:dtype(), got:dtype(), what)
      assert.are.equal(want:tobytes(), got:tobytes(), what)
    end
    local ops = { "sum", "mean", "argmax", "minmax", "std", "count" }
    for _, d in ipairs({ "float32", "int16", "bfloat16" }) do
      local b = gr.buffer(6000, d):random(4)
      local m = b:view{ 60, 100 }
      for _, opts in ipairs({ { segment = 300 }, { offsets = gr.buffer({ 0, 0, 17, 4000, 6000 }, "int64") },
                              { axis = 1 }, { axis = 2 }, { axis = { 1, 2 }, keepdims = true } }) do
        local v = opts.axis and m or b
        local o = { ops = ops }
        for k, x in pairs(opts) do o[k] = x end
        local got = gr.reduce(v, o)
        for _, op in ipairs(ops) do
          local one = { op = op }
          for k, x in pairs(opts) do one[k] = x end
          local r = table.pack(gr.reduce(v, one))
          same_buffers(got[op], r.n > 1 and { r[1], r[2] } or r[1], d .. " " .. op)
        end
      end
    end
  end)

  it("an op whose single call raises makes the call raise", function()
    local ok, err = pcall(gr.reduce, gr.buffer(0, "float32"), { ops = { "sum", "mean" } })
    assert(not ok and tostring(err):find("mean", 1, true), tostring(err))
    local r = gr.reduce(gr.buffer(0, "int32"), { ops = { "sum", "count" } })
    assert.are.equal(0, r.sum)
    assert.are.equal(0, r.count)
  end)

  it("errors name opts.ops", function()
    local b = gr.buffer({ 1, 2, 3 }, "float32")
    local function fails(pattern, f, ...)
      local ok, err = pcall(f, ...)
      assert(not ok, "expected an error matching " .. pattern)
      assert(tostring(err):find(pattern, 1, true), tostring(err))
    end
    fails("opts.ops[2]: unknown op 'foo'", gr.reduce, b, { ops = { "sum", "foo" } })
    fails("named twice", gr.reduce, b, { ops = { "sum", "sum" } })
    fails("1 to 21", gr.reduce, b, { ops = {} })
    fails("opts.ops[1]: expected an op's name", gr.reduce, b, { ops = { 3 } })
    fails("opts.ops: expected a list", gr.reduce, b, { ops = "sum" })
    fails("opts.ops and opts.op", gr.reduce, b, { ops = { "sum" }, op = "max" })
    fails("goes with gr.reduce", gr.sum, b, { ops = { "sum" } })
    fails("opts.out: with opts.ops, a table keyed by op name", gr.reduce, b,
          { ops = { "sum" }, segment = 1, out = gr.buffer(3, "float32") })
    fails("opts.ops: several ops read a buffer, not streamed data", gr.reduce, b, { ops = { "sum" }, streamed = true })
    fails("opts.async: segmented reductions are synchronous", gr.reduce, b, { ops = { "sum" }, segment = 1, async = true })
    fails("goes with gr.reduce", gr.reduce_many, { b }, { ops = { "sum" } })
    fails("goes with gr.reduce", gr.plan, b, { ops = { "sum" } })
    fails("opts.op", gr.describe, b, { op = "sum" })
  end)
end)

describe("gr.describe", function()
  it("count, sum, mean, std, min and max: #b and the single calls' values", function()
    for _, d in ipairs({ "float32", "float64", "bfloat16", "int32", "uint8" }) do
      local b = data(d, 70001, 5, false)
      for _, ddof in ipairs({ 0, 1 }) do
        local r = gr.describe(b, { ddof = ddof })
        assert.are.equal(#b, r.count)
        for _, op in ipairs({ "sum", "mean", "min", "max" }) do
          assert(same(r[op], (single(b, op))), d .. " " .. op)
        end
        assert(same(r.std, (single(b, "std", { ddof = ddof }))), d .. " std ddof " .. ddof)
      end
    end
    local r = gr.describe(gr.buffer({ 2, 4, 4, 4, 5, 5, 7, 9 }, "float64"))
    assert.are.same({ count = 8, sum = 40.0, mean = 5.0, std = 2.0, min = 2.0, max = 9.0 }, r)
  end)
end)
