-- The reductions beyond a whole buffer's one op, on every Lua the module builds for: along axes, per
-- segment, dot products, several ops in one call, describe, by key, many buffers, streamed data,
-- streams and pendings, and the registry, plans and timings (docs/api.md). Every value is checked
-- against compat/reference.lua. Lua 5.1 syntax, as api_spec.lua.
local gr = require "gpureduce"
local R = require "compat.reference"

local expect_error = R.expect_error

-- Small integers and halves: exact in float32, so every reference below is exact but var and std.
local FLAT = { 3, -1, 4, 1.5, -5, 9, 2, 6, -5, 3, 5, 0.5 }
local ROWS, COLS = 3, 4
local TWO = { argmin = true, argmax = true, minmax = true }
local ROUNDED = { mean = 1e-6, var = 1e-5, std = 1e-6, norm = 1e-6, nanmean = 1e-6 }

--- Checks result buffers (one, or two for the two-result ops) against the reference over `lists`.
local function check_lists(op, lists, got1, got2, label)
  local t1 = got1:totable()
  local t2 = got2 and got2:totable()
  assert.equal(#lists, #t1, label)
  for k, list in ipairs(lists) do
    local w1, w2 = R.ops[op](list)
    if op == "and" or op == "or" then w1 = w1 and 1 or 0 end       -- uint8 flags in a buffer
    assert.is_true(R.close(t1[k], w1, ROUNDED[op]), string.format("%s %s [%d]: %s, want %s", label, op, k,
      tostring(t1[k]), tostring(w1)))
    if TWO[op] then assert.equal(w2, t2[k], label .. " " .. op .. " second result") end
  end
end

describe("compat: reductions along axes", function()
  local m = gr.buffer(FLAT, "float32"):view({ ROWS, COLS })

  for _, axis in ipairs({ 1, 2 }) do
    it("every op along axis " .. axis .. " against the reference", function()
      local lines = R.lines(FLAT, ROWS, COLS, axis)
      for _, op in ipairs(gr.ops()) do
        local a, b = gr[op](m, { axis = axis })
        check_lists(op, lines, a, b, "axis " .. axis)
        assert.same({ #lines }, a:shape())
      end
    end)
  end

  it("negative axes, keepdims, a list of axes, out, and a transposed view as it is", function()
    assert.same(gr.sum(m, { axis = 2 }):totable(), gr.sum(m, { axis = -1 }):totable())
    assert.same({ 1, COLS }, gr.max(m, { axis = 1, keepdims = true }):shape())
    assert.same({ R.ops.sum(FLAT) }, gr.sum(m, { axis = { 1, 2 } }):totable())
    local out = gr.buffer(ROWS, "float32")
    assert.equal(out, gr.sum(m, { axis = 2, out = out }))
    check_lists("sum", R.lines(FLAT, ROWS, COLS, 2), out, nil, "out")
    local v, i = gr.argmax(m:transpose(), { axis = 2 })
    check_lists("argmax", R.lines(FLAT, ROWS, COLS, 1), v, i, "transposed")
    expect_error("axis", gr.sum, m, { axis = 3 })
    expect_error("axis", gr.sum, m, { axis = 0 })
  end)

  it("var and std take ddof along an axis", function()
    local rows = R.lines(FLAT, ROWS, COLS, 2)
    local got = gr.std(m, { axis = 2, ddof = 1 }):totable()
    for r = 1, ROWS do assert.is_true(R.close(got[r], R.ops.std(rows[r], { ddof = 1 }), 1e-6)) end
  end)
end)

describe("compat: segments", function()
  local list = { 4, -2, 7, 7, 0, 3, -8, 1, 5 }
  local b = gr.buffer(list, "int32")

  it("every op over offsets, with an empty segment where the op has an identity", function()
    local bounds = { 0, 2, 2, 6, 9 }
    local offsets = gr.buffer(bounds, "int64")
    local segs = R.segments(list, bounds)
    for _, op in ipairs(gr.ops()) do
      local a, c = gr[op](b, { offsets = offsets })
      assert.equal(4, #a)
      local full = { segs[1], segs[3], segs[4] }    -- the non-empty ones, positions 1, 3, 4
      local t1, t2 = a:totable(), c and c:totable()
      for k, seg in ipairs(full) do
        local at = ({ 1, 3, 4 })[k]
        local w1, w2 = R.ops[op](seg)
        if op == "and" or op == "or" then w1 = w1 and 1 or 0 end
        assert.is_true(R.close(t1[at], w1, ROUNDED[op]), op .. " segment " .. at)
        if TWO[op] then assert.equal(w2, t2[at], op .. " second result, segment " .. at) end
      end
      if op == "sum" or op == "count" then assert.equal(0, t1[2]) end
      if op == "prod" then assert.equal(1, t1[2]) end
      if op == "mean" then assert.is_true(t1[2] ~= t1[2], "the mean of an empty segment is NaN") end
      if op == "argmax" then assert.equal(0, t2[2], "an empty segment's index is 0") end
    end
  end)

  it("fixed-size segments into out buffers, and the result dtypes", function()
    local out = gr.buffer(3, "int64")
    assert.equal(out, gr.sum(b, { segment = 3, out = out }))
    assert.same({ 9, 10, -2 }, out:totable())
    assert.equal("int64", gr.sum(b, { segment = 3 }):dtype())
    assert.equal("float64", gr.mean(b, { segment = 3 }):dtype())
    assert.equal("uint8", gr.any(b, { segment = 3 }):dtype())
    local v, i = gr.argmin(b, { segment = 3, out = { gr.buffer(3, "int32"), gr.buffer(3, "int64") } })
    assert.same({ -2, 0, -8 }, v:totable())
    assert.same({ 2, 2, 1 }, i:totable())
    expect_error("divide", gr.sum, b, { segment = 4 })
    expect_error("boundary", gr.sum, b, { offsets = gr.buffer({ 0, 5, 3 }, "int64") })
    expect_error("opts.variant", gr.sum, b, { segment = 3, variant = "cpu" })
  end)
end)

describe("compat: dot products", function()
  local a = { 1, 2, -3, 4.5, 0, 6 }
  local c = { 2, -1, 0.5, 2, 7, -1 }

  it("of every dtype against the reference", function()
    for _, dtype in ipairs(gr.dtypes()) do
      if dtype ~= "bool" then
        local x, y = a, c
        if not R.float[dtype] then x, y = { 1, 2, 3, 4, 0, 6 }, { 2, 1, 5, 2, 7, 1 } end
        local bx, by = gr.buffer(x, dtype), gr.buffer(y, dtype)     -- (4.5 is 4 in float8_e5m2)
        assert.equal(R.dot(bx:totable(), by:totable()), gr.dot(bx, by), dtype)
      end
    end
    assert.equal(2, gr.dot(gr.buffer({ true, true, false }, "bool"), gr.buffer({ true, true, true }, "bool")))
    assert.equal(0, gr.dot(gr.buffer(0), gr.buffer(0)))
  end)

  it("async, gpu_to_gpu, per segment and along an axis", function()
    local x, y = gr.buffer(a, "float64"), gr.buffer(c, "float64")
    local p = gr.dot(x, y, { async = true })
    assert.equal(R.dot(a, c), p:wait())
    assert.equal(1, gr.dot(gr.buffer({ 1e30, 1, -1e30 }, "float64"), gr.buffer({ 1, 1, 1 }, "float64"),
      { determinism = "gpu_to_gpu" }))
    local segs = gr.dot(x, y, { segment = 3 }):totable()
    assert.same({ R.dot({ 1, 2, -3 }, { 2, -1, 0.5 }), R.dot({ 4.5, 0, 6 }, { 2, 7, -1 }) }, segs)
    local rows = gr.dot(x:view({ 2, 3 }), y:view({ 2, 3 }), { axis = 2 }):totable()
    assert.same(segs, rows)
    expect_error("dtype", gr.dot, x, gr.buffer(6, "float32"))
    expect_error("shape", gr.dot, x, x:view({ 2, 3 }))
    expect_error("opts.variant", gr.dot, x, y, { variant = "cpu" })
  end)
end)

describe("compat: several ops at once and describe", function()
  local list = { 2, 7, -1, 8, 2.5, -4 }
  local b = gr.buffer(list, "float64")

  it("gr.reduce with ops: each entry what the op's own call gives, sync and async", function()
    local ops = { "sum", "prod", "min", "max", "mean", "var", "argmin", "minmax", "count", "norm" }
    local r = gr.reduce(b, { ops = ops, ddof = 1 })
    local pr = gr.reduce(b, { ops = ops, ddof = 1, async = true }):wait()
    for _, op in ipairs(ops) do
      local single = { gr.reduce(b, { op = op, ddof = 1 }) }
      if TWO[op] then
        assert.same(single, r[op], op)
        assert.same(single, pr[op], op)
      else
        assert.equal(single[1], r[op], op)
        assert.equal(single[1], pr[op], op)
      end
      local want = { R.ops[op](list, { ddof = 1 }) }
      assert.is_true(R.close(TWO[op] and r[op][1] or r[op], want[1], ROUNDED[op]), op)
    end
    expect_error("opts.ops", gr.reduce, b, { ops = { "sum", "sum" } })
    expect_error("opts.ops", gr.reduce, b, { ops = { "summ" } })
  end)

  it("describe: count, sum, mean, std, min and max", function()
    local d = gr.describe(b, { ddof = 1 })
    assert.equal(#list, d.count)
    assert.equal(R.ops.sum(list), d.sum)
    assert.is_true(R.close(d.mean, R.ops.mean(list), 1e-12))
    assert.is_true(R.close(d.std, R.ops.std(list, { ddof = 1 }), 1e-12))
    assert.equal(-4, d.min)
    assert.equal(8, d.max)
    expect_error("describe reduces its own ops", gr.describe, b, { op = "sum" })
    expect_error("opts.async", gr.describe, b, { async = true })
  end)
end)

describe("compat: reductions by key", function()
  local keys = { 3, 1, 3, 2, 1, 3, -4 }
  local vals = { 1.5, 2, 0.5, 4, -1, 2, 8 }
  local k, v = gr.buffer(keys, "int32"), gr.buffer(vals, "float64")
  local order, groups = R.by_key(keys, vals)

  it("every op against the reference, keys ascending, indices into v", function()
    for _, op in ipairs(gr.ops()) do
      local ks, a, c = gr.reduce_by_key(k, v, { op = op })
      assert.same(order, ks:totable(), op)
      local lists = {}
      for i, g in ipairs(groups) do lists[i] = g.values end
      if op == "argmin" or op == "argmax" then
        local t = c:totable()
        for i, g in ipairs(groups) do
          local _, at = R.ops[op](g.values)
          assert.equal(g.at[at], t[i], op .. " index of key " .. order[i])
        end
        check_lists(op == "argmin" and "min" or "max", lists, a, nil, "by key")
      else
        check_lists(op, lists, a, c, "by key")
      end
    end
  end)

  it("ops, sorted, out, empty inputs and bool keys", function()
    local ks, r = gr.reduce_by_key(k, v, { ops = { "count", "max" } })
    assert.same({ 1, 2, 1, 3 }, r.count:totable())
    assert.same({ 8, 2, 4, 2 }, r.max:totable())
    assert.equal(4, #ks)
    local sk, ss = gr.reduce_by_key(gr.buffer({ 5, 5, 1, 9, 9 }, "int64"), gr.buffer({ 1, 2, 3, 4, 5 }, "int32"),
      { op = "sum", sorted = true })
    assert.same({ 1, 5, 9 }, sk:totable())
    assert.same({ 3, 3, 9 }, ss:totable())
    expect_error("sorted", gr.reduce_by_key, gr.buffer({ 1, 2, 1 }, "int32"), gr.buffer(3), { op = "sum", sorted = true })
    local ko, so = gr.buffer(8, "int32"), gr.buffer(8, "float64")
    local kv, sv = gr.reduce_by_key(k, v, { op = "sum", out = { ko, so } })
    assert.same(order, kv:totable())
    assert.equal(4, #sv)
    assert.same(kv:totable(), ko:totable(1, 4))
    local e1, e2 = gr.reduce_by_key(gr.buffer(0, "int8"), gr.buffer(0, "float32"), { op = "mean" })
    assert.equal(0, #e1)
    assert.equal(0, #e2)
    local bk, bs = gr.reduce_by_key(gr.buffer({ true, false, true }, "bool"), gr.buffer({ 1, 2, 3 }, "int32"),
      { op = "sum" })
    assert.same({ false, true }, bk:totable())
    assert.same({ 2, 4 }, bs:totable())
    expect_error("keys", gr.reduce_by_key, v, v, { op = "sum" })
    expect_error("opts.op", gr.reduce_by_key, k, v, { op = "summ" })
  end)
end)

describe("compat: many buffers, streamed data, streams and pendings", function()
  it("reduce_many: each result what gr.reduce gives, two-result ops as tables", function()
    local lists = { { 1, 5, 3 }, { -2.5, 8 }, { 7 } }
    local bufs = { gr.buffer(lists[1], "int32"), gr.buffer(lists[2], "float64"), gr.buffer(lists[3], "int8") }
    for _, op in ipairs({ "sum", "max", "mean", "argmax", "minmax" }) do
      local r = gr.reduce_many(bufs, { op = op })
      for i, list in ipairs(lists) do
        local want = { R.ops[op](list) }
        if TWO[op] then assert.same(want, r[i], op) else assert.equal(want[1], r[i], op) end
      end
    end
    expect_error("a list with holes", gr.reduce_many, { [1] = bufs[1], [3] = bufs[3] }, { op = "sum" })
    expect_error("element 2: expected a gpureduce.Buffer", gr.reduce_many, { bufs[1], 5 }, { op = "sum" })
  end)

  it("streamed: a host buffer, a table and a byte string, reduced where they are", function()
    local h = gr.buffer({ 4, -2, 9, 1 }, "float32", { where = "host" })
    assert.equal(12, gr.sum(h, { streamed = true }))
    assert.same({ 9, 3 }, { gr.argmax(h, { streamed = true, chunk = 4096, streams = 2 }) })
    assert.equal(6, gr.reduce({ 1, 2, 3 }, { op = "sum", streamed = true, dtype = "int32" }))
    assert.equal(4, gr.sum("\0\0\192\63\0\0\32\64", { streamed = true }))      -- float32 1.5 and 2.5
    expect_error("async", gr.sum, h, { streamed = true, async = true })
  end)

  it("streams and pendings: queued work, ready, wait again, free", function()
    local s = gr.stream()
    assert.equal("gpureduce.Stream", tostring(s))
    local b = gr.buffer({ 1, 2, 3, 4 }, "int64")
    local p = gr.sum(b, { async = true, stream = s })
    local q = gr.argmax(b, { async = true })
    assert.is_nil(s:sync())
    assert.is_true(p:ready())
    assert.equal(10, p:wait())
    assert.equal(10, p:wait())
    assert.same({ 4, 4 }, { q:wait() })
    p:free()
    expect_error("pending has been released", p.wait, p)
    expect_error("pending has been released", p.ready, p)
    s:free()
    assert.equal("gpureduce.Stream(freed)", tostring(s))
    expect_error("freed", gr.sum, b, { async = true, stream = s })
  end)
end)

describe("compat: the registry, plans and timings", function()
  local b = gr.buffer(1000, "float32"):iota(1)

  it("ops, dtypes, finishes, variants, variant and variant_names", function()
    local ops = {}
    for name in pairs(R.ops) do ops[#ops + 1] = name end
    local listed = gr.ops()
    table.sort(ops)
    table.sort(listed)
    assert.same(ops, listed)
    assert.equal(15, #gr.dtypes())
    assert.same({ "auto", "device", "hybrid", "host", "single" }, gr.finishes())
    local names = gr.variant_names()
    assert.is_true(#names >= 1)
    for _, name in ipairs(names) do
      local v = gr.variant(name)
      assert.equal(name, v.name)
      assert.is_true(v.available)
      assert.equal("table", type(v.ops))
      assert.equal("table", type(v.block))
    end
    assert.is_nil(gr.variant("no_such_variant"))
    assert.is_true(#gr.variant_names({ all = true }) >= #names)
    assert.is_true(#gr.variants() >= #gr.variant_names({ all = true }))
  end)

  it("plan and format_plan describe a reduction without running it", function()
    local plan = gr.plan(b, { op = "sum" })
    assert.equal("string", type(plan.variant))
    assert.equal(1000, plan.passes[1].elements)
    local text = gr.format_plan(plan)
    assert.matches("^variant " .. plan.variant, text)
    assert.matches("Pass 1: 1000 ", text, 1, true)
    assert.same({}, gr.plan(gr.buffer(0), { op = "sum" }).passes)
  end)

  it("bench and bench_dot time a call and say what they timed", function()
    local r = gr.bench(b, { op = "sum", reps = 3, warmup = 1 })
    assert.equal(3, r.reps)
    assert.equal(1, r.warmup)
    assert.equal(1000, r.n)
    assert.equal(4000, r.bytes)
    assert.is_true(r.ms_min <= r.ms and r.ms <= r.ms_max)
    assert.equal("table", type(r.plan))
    local d = gr.bench_dot(b, b, { reps = 2, warmup = 0 })
    assert.equal(8000, d.bytes)
    assert.is_true(d.ms >= 0)
    local t0 = gr.clock()
    assert.is_true(gr.clock() >= t0)
    expect_error("unknown option 'async'", gr.bench, b, { op = "sum", async = true })
  end)
end)
