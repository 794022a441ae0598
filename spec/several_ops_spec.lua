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
  - Repeated calls, interleaved: sets of one, two and three accumulators (a tuple of at most 32 bytes comes
    back as the kernel's reply, a wider one after its flag), the same ops in another order, another acc --
    each op still its single call's, so a kernel found again is never another set's.
  - gr.describe: count is #b, the rest the single calls' values.
  - With segment, offsets and axis: each op's result buffers, byte for byte the single calls'.
  - Along segments, offsets and rows, where the ops fuse (one launch of the segmented fused kernel on the
    GPU): every way a segment is shared out -- lanes (tiny segments, short rows), a block, several blocks
    of one segment (two huge segments, a row over 2 MiB), very uneven offsets -- over nine dtypes and two
    sets of ops (the describe set; the two-result and nan ops with prod and norm, one over the 6
    accumulators a segmented kernel takes), on a slice off a 16-byte boundary; rows of 5, 100 and 3000
    elements (argmin/argmax's 100 go to the column kernel: calls of their own), several reduced axes,
    keepdims, a stream, async, opts.out, a narrowed (strided) view and gpu_to_gpu (calls of their own):
    each buffer byte for byte the single call's. With a GPU the launches are counted (the ops that fuse
    take one launch together) and every injected failure of a fused call (alloc, launch, copy) raises,
    holds nothing and leaves the next call right. int32 sums, extremes and counts also against a Lua loop.
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

  it("repeated calls: tuples of one, two and three accumulators, each op in its place, acc and order apart", function()
    -- On the GPU a repeated set finds its kernel without writing its source again, and the call waits for
    -- the tuple as a single call waits for its value: sets of at most 32 bytes of accumulators come back
    -- as the kernel's reply, wider ones after its flag. Each set is called three times, interleaved with
    -- the others, so a reused kernel is never another set's.
    local sets = {
      { "sum", "mean" },                        -- one accumulator, shared
      { "min", "max" }, { "max", "min" },       -- two, the order kept apart
      { "sum", "min" }, { "count", "argmax" },
      { "sum", "min", "max" }, { "sum", "min", "max", "count", "mean", "std" },
    }
    for _, d in ipairs({ "float32", "float64", "int32", "bfloat16", "uint8" }) do
      local b = data(d, 70001, 11, true)
      for round = 1, 3 do
        for _, ops in ipairs(sets) do
          check(b, ops, nil, string.format("%s round %d {%s}", d, round, table.concat(ops, ", ")))
        end
        if FLOATS[d] then
          check(b, { "sum", "mean", "std" }, { acc = "float64" }, d .. " acc float64, round " .. round)
          check(b, { "sum", "mean", "std" }, nil, d .. " acc default, round " .. round)
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

describe("gr.reduce with opts.ops along segments, offsets and rows", function()
  local has_gpu = gr.backend() == "cuda"
  local DESCRIBE = { "sum", "mean", "std", "min", "max", "count" }
  local WIDE = { "argmin", "argmax", "minmax", "nansum", "nanmax", "norm", "prod" }
  -- each (dtype, set) is one NVRTC compile on the GPU: both sets for two dtypes, one for the others
  local CASES = { { "float32", DESCRIBE }, { "float32", WIDE }, { "int16", DESCRIBE }, { "int16", WIDE },
                  { "float64", WIDE }, { "float16", DESCRIBE }, { "bfloat16", WIDE }, { "float8_e5m2", DESCRIBE },
                  { "int32", DESCRIBE }, { "uint8", WIDE }, { "bool", DESCRIBE } }

  local function launches(fn)
    local before = gr.debug_events().launch
    local r = fn()
    return gr.debug_events().launch - before, r
  end

  local changed = require("support.helpers").changed
  local function bytes_of(x)
    if type(x) == "table" then return bytes_of(x[1]) .. "|" .. bytes_of(x[2]) end
    return x:dtype() .. ":" .. x:tobytes()
  end

  --- gr.reduce(v, opts + ops) against each op's single call, byte for byte; with a GPU the fused call
  --- takes at most `most` launches (nil: fewer than the single calls'; false: as many, nothing fuses).
  --- Returns the fused table.
  local function check(v, ops, opts, what, most)
    local n, got = launches(function() return gr.reduce(v, changed(opts, { ops = ops })) end)
    if opts.async then got = got:wait() end
    local singles = 0
    for _, op in ipairs(ops) do
      local alone = changed(opts, { op = op, out = false })    -- opts.out is keyed by op name
      local k, r = launches(function() return table.pack(gr.reduce(v, alone)) end)
      if opts.async then r = table.pack(r[1]:wait()) end
      singles = singles + k
      local want = r.n > 1 and { r[1], r[2] } or r[1]
      assert.are.equal(bytes_of(want), bytes_of(got[op]), what .. ": " .. op .. " differs from its single call")
    end
    if has_gpu and singles > 0 then
      local bound = most == false and singles or most or singles - 1
      assert(n <= bound, string.format("%s: %d launches, the single calls %d", what, n, singles))
    end
    return got
  end

  local function data(d, n, seed)
    local b = gr.buffer(n + 3, d)
    if d == "bool" then b:random(seed) elseif FLOATS[d] then b:random(seed, -2, 2) else b:random(seed) end
    if FLOATS[d] then b[5] = 0 / 0 end
    return b:slice(2, n)                        -- off a 16-byte boundary
  end

  for _, case in ipairs(CASES) do
    local d, ops = case[1], case[2]
    it(d .. " {" .. table.concat(ops, ", ") .. "}: lanes, blocks, split blocks and uneven offsets", function()
      -- the describe set fuses whole over 2-byte and wider data (a byte's mean and std are not pipelined's)
      local one = ops == DESCRIBE and #gr.buffer(1, d):tobytes() > 1 and 1 or nil
      local n = 1 << 20
      local b = data(d, n, #d)
      for _, size in ipairs({ 4, 64, 4096, n // 2 }) do
        check(b, ops, { segment = size }, string.format("%s segment %d", d, size), one)
      end
      local bounds = { 0, 0, 17, 5000, 5001 }
      for i = 1, 58 do bounds[#bounds + 1] = 5001 + i * 97 end
      bounds[#bounds + 1] = n // 2 + 3          -- one segment of about 2 MiB among short ones
      bounds[#bounds + 1] = n
      check(b, ops, { offsets = gr.buffer(bounds, "int64") }, d .. " uneven offsets", one and 2)
      check(b, ops, { offsets = gr.buffer({ 0, 3, 3, 40, 41, 141 }, "int64") }, d .. " short offsets", one and 2)
    end)
  end

  -- rows of 33 to 64 bytes (argmin/argmax: up to 1 KiB) go to the column kernel, op by op (the policy's
  -- gr_policy_rows_segmented): where fewer than two ops' rows are the segmented kernel's, nothing fuses
  local function rows_fuse(d, len, ops)
    local bytes, taken = len * #gr.buffer(1, d):tobytes(), 0
    for _, op in ipairs(ops) do
      local limit = (op == "argmin" or op == "argmax") and 1024 or 64
      if bytes <= 32 or bytes > limit then taken = taken + 1 end
    end
    if taken < 2 then return false end
  end

  for _, case in ipairs(CASES) do
    local d, ops = case[1], case[2]
    it(d .. " {" .. table.concat(ops, ", ") .. "}: rows, several axes, keepdims, async, a stream", function()
      for _, cols in ipairs({ 5, 100, 3000 }) do
        local m = data(d, 120 * cols, cols):contiguous():view{ 120, cols }
        check(m, ops, { axis = 2 }, string.format("%s (120, %d) axis 2", d, cols), rows_fuse(d, cols, ops))
        check(m, ops, { axis = -1, keepdims = true }, string.format("%s (120, %d) keepdims", d, cols),
          rows_fuse(d, cols, ops))
      end
      local t = data(d, 4 * 5 * 60, 7):contiguous():view{ 4, 5, 60 }
      check(t, ops, { axis = { 2, 3 } }, d .. " (4, 5, 60) axes 2, 3", rows_fuse(d, 300, ops))
      check(t, ops, { axis = 3, async = true }, d .. " (4, 5, 60) axis 3 async", rows_fuse(d, 60, ops))
      check(t, ops, { axis = 3, stream = gr.stream() }, d .. " (4, 5, 60) axis 3 on a stream", rows_fuse(d, 60, ops))
      local long = data(d, 2 * ((1 << 19) + 5), 3):contiguous():view{ 2, (1 << 19) + 5 }
      check(long, ops, { axis = 2 }, d .. " rows of 2 MiB and more: split blocks")
    end)
  end

  it("calls of their own where nothing fuses (columns, a strided view, gpu_to_gpu); two ops fuse", function()
    local m = data("float32", 60 * 100, 11):contiguous():view{ 60, 100 }
    check(m, DESCRIBE, { axis = 1 }, "columns", false)
    check(m:narrow(2, 2, 50), DESCRIBE, { axis = 2 }, "a narrowed view", false)
    local b = data("float32", 6000, 12)
    check(b, { "sum", "mean", "std" }, { segment = 300, determinism = "gpu_to_gpu" }, "gpu_to_gpu", false)
    check(b, { "sum", "argmax" }, { segment = 300 }, "sum and argmax")
  end)

  it("opts.out: the given buffers written and returned, the others new", function()
    local b = data("float32", 6000, 13)
    local sums, where = gr.buffer(20, "float32"):fill(7), { gr.buffer(20, "float32"), gr.buffer(20, "int64") }
    local got = check(b, { "sum", "argmax", "std", "max" }, { segment = 300, out = { sum = sums, argmax = where } },
                      "out")
    assert.are.equal(sums, got.sum)
    assert.are.equal(where[1], got.argmax[1])
    assert.are.equal(where[2], got.argmax[2])
  end)

  -- with a GPU: every injected failure (alloc, launch, copy) of a fused call raises, holds nothing after it,
  -- and the next call is right
  local gpu_it = has_gpu and it or pending
  gpu_it("every injected failure raises, holds no memory and leaves the next call right", function()
    local ops = { "sum", "min", "max", "mean", "argmax", "norm" }
    local b = data("float32", 1 << 20, 31)
    local m = data("float32", 2 * ((1 << 19) + 5), 32):contiguous():view{ 2, (1 << 19) + 5 }  -- split rows
    local calls = {
      segment = function() return gr.reduce(b, { ops = ops, segment = 1 << 18 }) end,
      axis_async = function() return gr.reduce(m, { ops = ops, axis = 2, async = true }):wait() end,
    }
    local held = require("support.helpers").held
    local tried = 0
    for name, call in pairs(calls) do
      local want = {}
      for op, r in pairs(call()) do want[op] = bytes_of(r) end
      gr.pool_trim()
      local before = gr.debug_events()
      call()
      local after = gr.debug_events()
      for _, kind in ipairs({ "alloc", "launch", "copy" }) do
        for k = 1, after[kind] - before[kind] do
          local where, base = string.format("%s: %s %d", name, kind, k), held()
          gr.debug_fault(kind, k)
          local ok, err = pcall(call)
          gr.debug_fault(kind, 0)
          assert(not ok and tostring(err):find("injected fault", 1, true), where .. ": " .. tostring(err))
          assert.are.equal(base, held(), where .. ": what is held after the failure")
          for op, r in pairs(call()) do assert.are.equal(want[op], bytes_of(r), where .. ", the next call: " .. op) end
          tried = tried + 1
        end
      end
    end
    assert(tried > 0, "no event to fail")
  end)

  it("int32: sums, extremes, counts and argmax per segment as a Lua loop gives them", function()
    local n, size = 30000, 250
    local b = gr.buffer(n, "int32"):random(21, -1000, 1000)
    local x = b:totable()
    local r = gr.reduce(b, { ops = { "sum", "min", "max", "count", "argmax" }, segment = size })
    local sum, min, max, count, arg = r.sum:totable(), r.min:totable(), r.max:totable(), r.count:totable(),
                                      r.argmax[2]:totable()
    for s = 1, n // size do
      local ws, wmin, wmax, wc, wi = 0, math.huge, -math.huge, 0, 0
      for i = 1, size do
        local v = x[(s - 1) * size + i]
        ws = ws + v
        if v < wmin then wmin = v end
        if v > wmax then wmax, wi = v, i end
        if v ~= 0 then wc = wc + 1 end
      end
      assert.are.same({ ws, wmin, wmax, wc, wi }, { sum[s], min[s], max[s], count[s], arg[s] }, "segment " .. s)
    end
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
