--[[
ops_out_async_spec.lua -- several ops in one call (opts.ops) with opts.out and with opts.async (issue 24).

What it checks
  - gr.reduce with ops and out, for segment, offsets and axis (keepdims too), over float32, int32, bfloat16,
    bool, float64 and uint8: out is a table keyed by op name, each entry what out takes for that op alone
    (a buffer, or a list of two for argmin/argmax/minmax); the ops with an entry return that very buffer
    (or those two), the others new ones; every result byte for byte the single call's. Entries given for
    some ops only, for the two-result ops, and for every op.
  - gr.reduce_by_key with ops and out = {keys = ..., sum = ..., argmax = {values, indices}}: views of the
    given buffers' first elements, the rest of them left as it was; byte for byte the single op's results.
  - gr.reduce with ops and async over whole buffers: a gpureduce.Pending whose wait gives the synchronous
    call's table bit for bit (again on a second wait), whose ready turns true; safe when the buffer is freed
    and collected before the wait; on a user stream; a failure to start (an empty buffer's mean) raises at
    once, as the synchronous call does. Along axes: a Pending whose wait gives the table of buffers (opts.out's
    entries too).
  - Where the ops fuse (a device buffer on the GPU), the async form's one read: the fused ops' values from
    one pass (gr.debug_events counts the launches: one, as the synchronous call's, for ops that all fuse;
    fewer than the single calls' with ops that do not), bit for bit the synchronous table and each single
    call (default and run_to_run, acc and ddof) over float32, float64, float16, bfloat16, int32, int8 and
    uint8 data with NaN, infinities and -0.0, on slices off a 16-byte boundary, with uncovered ops mixed
    in; on a user stream with the buffer freed and collected before the wait; every injected failure
    (alloc, launch, copy) of a start raises, holds no memory and leaves the next call right.
  - Every refusal, by its message: an entry not in ops (opts.out.<name>), a wrong buffer (the single call's
    message naming the entry), two entries sharing memory, an entry sharing memory with the input, out not a
    table keyed by name, streamed, async with segments -- and each leaves the given buffers as they were.
Where the cases run: device and pinned host buffers with a GPU, the cpu backend's buffers without. The
cases marked #gpu run on the device alone (pending without one).
]]
local gr = require "gpureduce"
-- `pending` is looked up when the test runs: inside a test it is busted's "mark this test pending"
local H = require("support.helpers").bind(it, function(reason) pending(reason) end)

local PLACES = H.has_gpu and { "device", "host" } or { "default" }
local DTYPES = { "float32", "int32", "bfloat16", "bool", "float64", "uint8" }
local OPS = { "sum", "max", "argmax", "minmax", "mean", "count" }
local FLOATS = { float32 = true, float64 = true, float16 = true, bfloat16 = true, float8_e4m3 = true,
                 float8_e5m2 = true }

local function new_buffer(n, dtype, where)
  if where == "default" then return gr.buffer(n, dtype) end
  return gr.buffer(n, dtype, { where = where })
end

local function random_buffer(n, dtype, where, seed)
  local b = new_buffer(n, dtype, where)
  if dtype == "bool" then return b:random(seed) end
  if FLOATS[dtype] then return b:random(seed, -2, 2) end
  return b:random(seed, 0, 100)
end

--- Fills b with a value no reduction here gives everywhere, so that an unwritten buffer shows.
local function junk(b)
  if b:dtype() == "bool" then return b:fill(true) end
  return b:fill(77)
end

--- A buffer of the shape, dtype and side of w (a result of a single call), filled with junk.
local function like(w)
  return junk(gr.buffer(#w, w:dtype(), { where = w:where() }):view(w:shape()))
end

local function merged(a, b)
  local t = {}
  for k, v in pairs(a) do t[k] = v end
  for k, v in pairs(b or {}) do t[k] = v end
  return t
end

--- The single call's result buffer(s) for op: a buffer, or a table of two.
local function single(v, op, form)
  local r = table.pack(gr.reduce(v, merged(form, { op = op })))
  return r.n > 1 and { r[1], r[2] } or r[1]
end

--- Asserts that got (a buffer, or a table of two) has want's dtypes, shapes and bytes.
local function same_buffers(got, want, what)
  if type(want) == "table" then
    assert(type(got) == "table", what .. ": expected a table of two buffers, got " .. tostring(got))
    same_buffers(got[1], want[1], what .. "[1]")
    same_buffers(got[2], want[2], what .. "[2]")
    return
  end
  assert.are.equal(want:dtype(), got:dtype(), what .. " dtype")
  assert.are.same(want:shape(), got:shape(), what .. " shape")
  assert(want:tobytes() == got:tobytes(), what .. ": not the single call's bytes")
end

local function same_tables(got, want, ops, what)
  for _, op in ipairs(ops) do
    assert(H.same_result(got[op], want[op]), string.format("%s: %s differs from the synchronous call", what, op))
  end
end

local expect = H.expect_error

--- Asserts that fn(...) raises a misuse of argument `arg` whose message holds text (its parenthesis).
local function refused_arg(arg, text, fn, ...)
  local err = expect("(" .. text, fn, ...)
  assert(err:find("bad argument #" .. arg .. " to '", 1, true), err .. ": not a misuse of argument #" .. arg)
end

--- The forms of a call over a 1-D buffer v of 6000 elements and over its view m {60, 100}.
local function forms(v, m, where)
  local offsets = new_buffer(5, "int64", where):set({ 0, 0, 17, 4000, 6000 })
  return {
    { "segment", v, { segment = 300 } },
    { "offsets", v, { offsets = offsets } },
    { "axis 1", m, { axis = 1 } },
    { "axis 2 keepdims", m, { axis = 2, keepdims = true } },
    { "axes {1, 2} keepdims", m, { axis = { 1, 2 }, keepdims = true } },
    { "axis -1", m, { axis = -1 } },
  }
end

---------------------------------------------------------------------------------------------------

--- Entries of the given names, each a buffer (or two) like the single call's result in want.
local function entries(want, names)
  local out = {}
  for _, op in ipairs(names) do
    local w = want[op]
    out[op] = type(w) == "table" and { like(w[1]), like(w[2]) } or like(w)
  end
  return out
end

--- Asserts that r holds want's results, and the given buffers of out where it has an entry.
local function check_ops_out(r, want, out, label)
  for _, op in ipairs(OPS) do
    same_buffers(r[op], want[op], label .. ": " .. op)
    local given = type(out[op]) == "table" and out[op] or { out[op] }
    local got = type(r[op]) == "table" and r[op] or { r[op] }
    for i = 1, #given do
      assert(rawequal(got[i], given[i]), label .. ": " .. op .. " is not the given buffer " .. i)
    end
  end
end

--- gr.reduce(v, {ops = OPS, out = ...}) over d in `where`, in every form, with entries for some ops (a
-- two-result one among them), for the two-result ones and for all.
local function ops_with_out(d, where)
  local v = random_buffer(6000, d, where, #d)
  for _, f in ipairs(forms(v, v:view{ 60, 100 }, where)) do
    local what, input, form = f[1], f[2], f[3]
    local want = {}
    for _, op in ipairs(OPS) do want[op] = single(input, op, form) end
    for _, given in ipairs({ { "sum", "argmax" }, { "argmax", "minmax" }, OPS }) do
      local out = entries(want, given)
      local r = gr.reduce(input, merged(form, { ops = OPS, out = out }))
      check_ops_out(r, want, out, string.format("%s %s {%s}", d, what, table.concat(given, ", ")))
    end
  end
end

describe("gr.reduce with opts.ops and opts.out", function()
  for _, where in ipairs(PLACES) do
    for _, d in ipairs(DTYPES) do
      it(string.format("%s %s: each op's entry filled and returned, the others new, bytes of the single calls",
                       d, where), function() ops_with_out(d, where) end)
    end
  end

  it("an entry takes the single call's out: the same buffer back, the same bytes as opts.out alone", function()
    local v = random_buffer(4096, "float32", PLACES[1], 7)
    local mine, alone = gr.buffer(16, "float32"), gr.buffer(16, "float32")
    local r = gr.reduce(v, { ops = { "sum", "mean" }, segment = 256, out = { mean = mine } })
    local back = gr.reduce(v, { op = "mean", segment = 256, out = alone })
    assert(rawequal(back, alone) and rawequal(r.mean, mine))
    assert.are.equal(alone:tobytes(), mine:tobytes())
  end)

  describe("refusals, each naming the entry and leaving the buffers as they were", function()
    local where = PLACES[1]
    local v = random_buffer(12, "float32", where, 3)
    local m = v:view{ 3, 4 }
    local function kept(b) return b:tobytes() end

    it("an entry whose name is not in opts.ops", function()
      local s = like(single(v, "sum", { segment = 3 }))
      local before = kept(s)
      refused_arg(2, "opts.out.min: not an op of opts.ops (accepted: sum, max))", gr.reduce, v,
                  { ops = { "sum", "max" }, segment = 3, out = { sum = s, min = like(s) } })
      assert.are.equal(before, kept(s))
    end)

    it("a wrong buffer: the single call's message, naming the entry; the entries before it unchanged", function()
      local s = like(single(v, "sum", { segment = 3 }))
      local before = kept(s)
      local cases = {
        { "opts.out.max: must be 4 elements of float32 (got 4 of int32)", { max = gr.buffer(4, "int32") } },
        { "opts.out.max: must be 4 elements of float32 (got 3 of float32)", { max = gr.buffer(3, "float32") } },
        { "opts.out.argmax: argmax has two results: give a table of two buffers",
          { argmax = gr.buffer(4, "float32") } },
        { "opts.out.argmax: argmax has 2 results: give a table of two buffers",
          { argmax = { gr.buffer(4, "float32") } } },
        { "opts.out.argmax[2]: must be 4 elements of int64 (got 4 of int32)",
          { argmax = { gr.buffer(4, "float32"), gr.buffer(4, "int32") } } },
        { "opts.out.argmax[2]: expected a gpureduce.Buffer, got number", { argmax = { gr.buffer(4, "float32"), 5 } } },
        { "opts.out.max: expected a gpureduce.Buffer, got string", { max = "buffer" } },
        { "opts.out.minmax: expected a table of two gpureduce.Buffers, got boolean", { minmax = true } },
        { "opts.out.max: shares memory with the input: give a buffer of its own", { max = v:slice(5, 4) } },
        { "opts.out.max: shares memory with opts.out.sum: give a buffer of its own", { max = s } },
        { "opts.out.argmax[1]: shares memory with opts.out.sum: give a buffer of its own",
          { argmax = { s, gr.buffer(4, "int64") } } },
        { "opts.out.minmax[2]: shares memory with the first result: give a buffer of its own",
          { minmax = { s:slice(1, 4), s } } },
      }
      for _, c in ipairs(cases) do
        local out = { sum = s }
        for k, x in pairs(c[2]) do out[k] = x end
        if c[1]:find("minmax", 1, true) then out.sum = nil end
        refused_arg(2, c[1], gr.reduce, v,
               { ops = { "sum", "max", "argmax", "minmax" }, segment = 3, out = out })
        assert.are.equal(before, kept(s), c[1] .. ": the sum's buffer was written")
      end
    end)

    it("along axes: the result's shape, naming the entry", function()
      local s = like(single(m, "sum", { axis = 1, keepdims = true }))
      local before = kept(s)
      expect("opts.out.max: must have the result's shape {1, 4} (got {4})", gr.reduce, m,
             { ops = { "sum", "max" }, axis = 1, keepdims = true, out = { sum = s, max = gr.buffer(4, "float32") } })
      expect("opts.out.minmax[2]: must have the result's shape {4} (got {3})", gr.reduce, m,
             { ops = { "minmax" }, axis = 1, out = { minmax = { gr.buffer(4, "float32"), gr.buffer(3, "float32") } } })
      expect("opts.out.count: must be 4 elements of int64 (got 4 of float32)", gr.reduce, m,
             { ops = { "sum", "count" }, axis = 1, keepdims = true,
               out = { sum = s, count = gr.buffer(4, "float32"):view{ 1, 4 } } })
      assert.are.equal(before, kept(s))
    end)

    it("an op that its own call refuses, with an entry or not, before any entry is written", function()
      local s = like(single(v, "sum", { segment = 3 }))
      local before = kept(s)
      expect("opts.determinism: 'gpu_to_gpu' is available for", gr.reduce, v,
             { ops = { "sum", "argmax" }, segment = 3, determinism = "gpu_to_gpu", out = { sum = s } })
      assert.are.equal(before, kept(s))
    end)

    it("a freed entry", function()
      local s = like(single(v, "sum", { segment = 3 }))
      s:free()
      expect("opts.out.sum: buffer has been freed", gr.reduce, v, { ops = { "sum" }, segment = 3, out = { sum = s } })
    end)

    it("out not a table keyed by op name", function()
      expect("opts.out: with opts.ops, a table keyed by op name {sum = buffer, argmax = {values, indices}, ...}, got "
             .. "a gpureduce.Buffer", gr.reduce, v, { ops = { "sum" }, segment = 3, out = gr.buffer(4, "float32") })
      expect("not a list (got a number key)", gr.reduce, v,
             { ops = { "sum" }, segment = 3, out = { gr.buffer(4, "float32") } })
      expect("opts.out goes with opts.segment, opts.offsets or opts.axis", gr.reduce, v,
             { ops = { "sum" }, out = { sum = gr.buffer(1, "float32") } })
    end)
  end)
end)

---------------------------------------------------------------------------------------------------

describe("gr.reduce_by_key with opts.ops and opts.out", function()
  local KEY_OPS = { "sum", "argmax", "minmax", "count", "mean" }

  for _, where in ipairs(PLACES) do
    for _, d in ipairs({ "float32", "int32", "bfloat16", "bool" }) do
      it(string.format("%s values, %s: views of the given buffers, the rest as it was, the single op's bytes",
                       d, where), function()
        local n = 5000
        local k = new_buffer(n, "int32", where):random(11, 0, 37)
        local vals = random_buffer(n, d, where, 5)
        local want_keys, want = nil, {}
        for _, op in ipairs(KEY_OPS) do
          local r = table.pack(gr.reduce_by_key(k, vals, { op = op }))
          want_keys = r[1]
          want[op] = r.n > 2 and { r[2], r[3] } or r[2]
        end
        local count = #want_keys
        local room = count + 5
        local function room_like(w)
          return junk(gr.buffer(room, w:dtype(), { where = w:where() }))
        end
        for _, given in ipairs({ { "keys", "sum", "argmax" }, { "minmax" }, { "keys", "sum", "argmax", "minmax",
                                                                              "count", "mean" } }) do
          local out, tails = {}, {}
          for _, name in ipairs(given) do
            local w = name == "keys" and want_keys or want[name]
            out[name] = type(w) == "table" and { room_like(w[1]), room_like(w[2]) } or room_like(w)
          end
          for name, b in pairs(out) do
            for i, x in ipairs(type(b) == "table" and b or { b }) do
              tails[name .. i] = { x, x:slice(count + 1, 5):tobytes() }
            end
          end
          local keys, r = gr.reduce_by_key(k, vals, { ops = KEY_OPS, out = out })
          local label = string.format("%s {%s}", d, table.concat(given, ", "))
          same_buffers(keys, want_keys, label .. " keys")
          for _, op in ipairs(KEY_OPS) do same_buffers(r[op], want[op], label .. " " .. op) end
          for name, t in pairs(tails) do
            assert.are.equal(t[2], t[1]:slice(count + 1, 5):tobytes(), label .. ": " .. name .. " past the keys")
          end
          -- the given buffers hold the results in their first elements
          if out.sum then assert.are.equal(want.sum:tobytes(), out.sum:slice(1, count):tobytes(), label) end
          if out.keys then assert.are.equal(want_keys:tobytes(), out.keys:slice(1, count):tobytes(), label) end
        end
      end)
    end
  end

  it("the single op keeps its list {keys, result [, second]}", function()
    local k = gr.buffer({ 3, 1, 3, 2, 1, 3 }, "int32")
    local v = gr.buffer({ 1.5, 2, 0.5, 4, -1, 2 }, "float32")
    local ko, vo, io = gr.buffer(4, "int32"), gr.buffer(4, "float32"), gr.buffer(4, "int64")
    local keys, best, at = gr.reduce_by_key(k, v, { op = "argmax", out = { ko, vo, io } })
    assert.are.same({ 1, 2, 3 }, keys:totable())
    assert.are.same({ 2.0, 4.0, 2.0 }, best:totable())
    assert.are.same({ 2, 4, 6 }, at:totable())
  end)

  it("refusals name the entry and leave the buffers as they were", function()
    local k = gr.buffer({ 3, 1, 3, 2, 1, 3 }, "int32")
    local v = gr.buffer({ 1.5, 2, 0.5, 4, -1, 2 }, "float32")
    local ko, so = junk(gr.buffer(5, "int32")), junk(gr.buffer(5, "float32"))
    local kb, sb = ko:tobytes(), so:tobytes()
    local function refused(text, out)
      refused_arg(3, text, gr.reduce_by_key, k, v,
             { ops = { "sum", "argmax" }, out = out })
      assert.are.equal(kb, ko:tobytes(), text .. ": the keys' buffer was written")
      assert.are.equal(sb, so:tobytes(), text .. ": the sum's buffer was written")
    end
    refused("opts.out.max: not an op of opts.ops (accepted: sum, argmax, and keys for the keys' buffer)",
            { keys = ko, sum = so, max = gr.buffer(5, "float32") })
    refused("opts.out.argmax[2]: is int32; this result is int64",
            { keys = ko, sum = so, argmax = { gr.buffer(5, "float32"), gr.buffer(5, "int32") } })
    refused("opts.out.argmax: argmax has two results: give a table of two buffers",
            { keys = ko, sum = so, argmax = gr.buffer(5, "float32") })
    refused("opts.out.keys: is int64; this result is int32", { keys = gr.buffer(5, "int64"), sum = so })
    refused("opts.out.sum: is float64; this result is float32", { keys = ko, sum = gr.buffer(5, "float64") })
    refused("opts.out.keys: expected a gpureduce.Buffer, got number", { keys = 1, sum = so })
    refused("opts.out: with opts.ops, a table keyed by op name {keys = buffer, sum = buffer, argmax = {values, "
            .. "indices}, ...}, not a list (got a number key)", { ko, so })
    refused("opts.out: with opts.ops, a table keyed by op name {keys = buffer", so)
    refused_arg(3, "opts.determinism: 'gpu_to_gpu' is available for", gr.reduce_by_key, k, v,
                { ops = { "sum", "argmax" }, determinism = "gpu_to_gpu", out = { keys = ko, sum = so } })
    assert.are.equal(kb, ko:tobytes(), "an op's refusal: the keys' buffer was written")
    -- too small for the distinct keys: known once the pairs are grouped (the engine names opts.out), and
    -- checked before any given buffer is written
    refused_arg(3, "opts.out: holds 2 elements, and there are 3 distinct keys", gr.reduce_by_key, k, v,
                { ops = { "sum", "argmax" }, out = { keys = ko, sum = so,
                                                      argmax = { gr.buffer(2, "float32"), gr.buffer(2, "int64") } } })
    assert.are.equal(kb, ko:tobytes(), "a refusal once grouped: the keys' buffer was written")
    assert.are.equal(sb, so:tobytes(), "a refusal once grouped: the sums' buffer was written")
  end)
end)

---------------------------------------------------------------------------------------------------

describe("gr.reduce with opts.ops and opts.async", function()
  for _, where in ipairs(PLACES) do
    for _, d in ipairs({ "float32", "int32", "bfloat16", "bool", "float64", "int8" }) do
      it(string.format("%s %s: a Pending whose wait gives the synchronous table, bit for bit", d, where), function()
        for _, n in ipairs({ 1, 33, 4097, 100003 }) do
          local b = random_buffer(n, d, where, n)
          for _, ops in ipairs({ gr.ops(), { "sum", "mean", "std", "min", "max", "count" }, { "argmin", "minmax" } }) do
            local want = gr.reduce(b, { ops = ops })
            local p = gr.reduce(b, { ops = ops, async = true })
            assert.matches("^gpureduce.Pending", tostring(p))
            local what = string.format("%s %s n=%d", d, where, n)
            same_tables(p:wait(), want, ops, what)
            same_tables(p:wait(), want, ops, what .. " (second wait)")
            assert.is_true(p:ready())
            assert.are.equal("gpureduce.Pending(ready)", tostring(p))
          end
        end
      end)
    end
  end

  it("takes the options the synchronous call takes (acc, ddof, determinism, stream)", function()
    local b = random_buffer(70001, "float32", PLACES[1], 9)
    local s = gr.stream()
    for _, o in ipairs({ { acc = "float64", ddof = 1 }, { determinism = "gpu_to_gpu" }, { stream = s } }) do
      local ops = { "sum", "mean", "var", "std", "norm" }
      local want = gr.reduce(b, merged(o, { ops = ops }))
      local p = gr.reduce(b, merged(o, { ops = ops, async = true }))
      same_tables(p:wait(), want, ops, H.describe_opts(o))
    end
  end)

  it("ready() turns true once every op is done", function()
    local b = random_buffer(1 << 20, "float64", PLACES[1], 1)
    local p = gr.reduce(b, { ops = { "sum", "max", "argmin" }, async = true })
    local deadline = gr.clock() + 10
    while not p:ready() and gr.clock() < deadline do end
    assert.is_true(p:ready())
    same_tables(p:wait(), gr.reduce(b, { ops = { "sum", "max", "argmin" } }), { "sum", "max", "argmin" }, "ready")
  end)

  it("keeps its buffer alive: freed and collected before the wait", function()
    local ops = { "sum", "min", "argmax", "mean" }
    local p, want
    do
      local b = random_buffer(1 << 20, "float32", PLACES[1], 3)
      want = gr.reduce(b, { ops = ops })
      p = gr.reduce(b, { ops = ops, async = true })
      b:free()
    end
    collectgarbage()
    collectgarbage()
    same_tables(p:wait(), want, ops, "collected")
  end)

  it("keeps a writer from overtaking it: fill waits for the ops reading the buffer", function()
    local b = new_buffer(1 << 20, "int32", PLACES[1]):fill(1)
    local p = gr.reduce(b, { ops = { "sum", "max" }, async = true, stream = gr.stream() })
    b:fill(2)
    local r = p:wait()
    assert.are.equal(1 << 20, r.sum)
    assert.are.equal(1, r.max)
  end)

  it("is safe to drop unfinished, and to close and free", function()
    for i = 1, 10 do
      gr.reduce(random_buffer(1 << 16, "float32", PLACES[1], i), { ops = { "sum", "max" }, async = true })
    end
    collectgarbage()
    collectgarbage()
    local b = gr.buffer(10):fill(1)
    H.closing(gr.reduce(b, { ops = { "sum", "count" }, async = true }), function(p)
      assert.are.same({ sum = 10.0, count = 10 }, p:wait())
    end)
    local p = gr.reduce(b, { ops = { "sum" }, async = true })
    p:free()
    p:free()
    expect("pending has been released", p.wait, p)
    expect("pending has been released", p.ready, p)
  end)

  it("raises at once where the synchronous call raises (an empty buffer's mean)", function()
    local e = gr.buffer(0, "float32")
    expect("gpureduce: mean of an empty buffer is undefined", gr.reduce, e, { ops = { "sum", "mean" }, async = true })
    assert.are.same({ sum = 0.0, count = 0 }, gr.reduce(e, { ops = { "sum", "count" }, async = true }):wait())
  end)

  for _, where in ipairs(PLACES) do
    it(where .. ": along axes, a Pending whose wait gives the table of buffers (opts.out's entries too)", function()
      for _, d in ipairs({ "float32", "int32", "bfloat16", "bool" }) do
        local m = random_buffer(6000, d, where, 2):view{ 60, 100 }
        for _, form in ipairs({ { axis = 1 }, { axis = 2, keepdims = true }, { axis = { 1, 2 } } }) do
          local want = gr.reduce(m, merged(form, { ops = OPS }))
          local out = { argmax = { like(want.argmax[1]), like(want.argmax[2]) }, mean = like(want.mean) }
          local p = gr.reduce(m, merged(form, { ops = OPS, async = true, out = out }))
          assert.matches("^gpureduce.Pending", tostring(p))
          local got = p:wait()
          for _, op in ipairs(OPS) do same_buffers(got[op], want[op], d .. " " .. op) end
          assert(rawequal(got.mean, out.mean) and rawequal(got.argmax[2], out.argmax[2]), "not the given buffers")
          assert.is_true(p:ready())
          assert(rawequal(p:wait(), p:wait()), "wait gives the same table again")
        end
      end
    end)
  end

  it("refuses segments, streamed data, reduce_by_key and describe, naming the option", function()
    local b = gr.buffer({ 1, 2, 3, 4 }, "float32")
    expect("opts.async: segmented reductions are synchronous", gr.reduce, b,
           { ops = { "sum" }, segment = 2, async = true })
    expect("opts.async: segmented reductions are synchronous", gr.reduce, b,
           { ops = { "sum" }, offsets = gr.buffer({ 0, 4 }, "int64"), async = true })
    expect("opts.ops: several ops read a buffer, not streamed data", gr.reduce, b, { ops = { "sum" }, streamed = true })
    expect("opts.ops: several ops read a buffer, not streamed data", gr.reduce, { 1, 2, 3 },
           { ops = { "sum" }, streamed = true, dtype = "float32" })
    expect("not async", gr.reduce_by_key, gr.buffer({ 1, 2 }, "int32"), b:slice(1, 2),
           { ops = { "sum" }, async = true })
    expect("opts.async: describe is synchronous", gr.describe, b, { async = true })
  end)

  H.gpu_it("device buffers of 2^24 + 3 elements on several streams: every op's value, the fused call's bits", function()
    local pendings, wants, ops = {}, {}, { "sum", "mean", "std", "min", "max", "count", "argmax", "minmax" }
    for i, d in ipairs({ "float32", "bfloat16", "int32", "float64" }) do
      local b = random_buffer((1 << 24) + 3, d, "device", i)
      wants[i] = gr.reduce(b, { ops = ops })
      pendings[i] = gr.reduce(b, { ops = ops, async = true, stream = gr.stream() })
    end
    for i, p in ipairs(pendings) do same_tables(p:wait(), wants[i], ops, "stream " .. i) end
  end)

  H.gpu_it("pinned host buffers: the same table as device buffers of the same data", function()
    local ops = { "sum", "mean", "min", "max", "argmin" }
    local h = random_buffer(100003, "int32", "host", 4)
    local dev = gr.buffer(#h, "int32"):set(h:tobytes())
    same_tables(gr.reduce(h, { ops = ops, async = true }):wait(), gr.reduce(dev, { ops = ops }), ops, "host")
  end)
end)

---------------------------------------------------------------------------------------------------

describe("gr.reduce with opts.ops and opts.async: one read where the ops fuse", function()
  local DESCRIBE = { "sum", "min", "max", "mean", "std", "count" }

  --- n elements of d from a buffer of n + 3, off a 16-byte boundary; floats with NaN, +-inf and -0.0.
  local function data(d, n, seed)
    local b = random_buffer(n + 3, d, "device", seed)
    if FLOATS[d] and n > 8 then
      local values = { 0 / 0, math.huge, -math.huge, -0.0 }
      math.randomseed(seed)
      for _ = 1, 3 do b[math.random(n) + 1] = values[math.random(#values)] end
    end
    return b:slice(2, n)
  end

  --- Launches that fn makes (gr.debug_events).
  local function launches(fn)
    local before = gr.debug_events().launch
    fn()
    return gr.debug_events().launch - before
  end

  for _, d in ipairs({ "float32", "float64", "float16", "bfloat16", "int32", "int8", "uint8" }) do
    H.gpu_it(d .. ": the async table is the synchronous one and each single call's, bit for bit", function()
      local R2R = { determinism = "run_to_run" }
      local cases = { { DESCRIBE, {} }, { DESCRIBE, R2R }, { gr.ops(), {} }, { gr.ops(), R2R },
                      { { "sum", "argmin", "nanmax", "prod" }, {} } }
      if FLOATS[d] then
        cases[#cases + 1] = { { "sum", "mean", "var", "std", "norm" }, { acc = "float64", ddof = 1 } }
      end
      for _, n in ipairs({ 1, 17, 4097, (1 << 20) + 3 }) do
        local b = data(d, n, n + #d)
        for _, case in ipairs(cases) do
          local ops, o = case[1], case[2]
          local what = string.format("%s n=%d %s {%s}", d, n, H.describe_opts(o), table.concat(ops, ", "))
          local want = gr.reduce(b, merged(o, { ops = ops }))
          local got = gr.reduce(b, merged(o, { ops = ops, async = true })):wait()
          same_tables(got, want, ops, what)
          for _, op in ipairs(ops) do
            local one = table.pack(gr.reduce(b, merged(o, { op = op })))
            assert(H.same_result(got[op], one.n > 1 and { one[1], one[2] } or one[1]),
                   what .. ": " .. op .. " differs from its single call")
          end
        end
      end
    end)
  end

  H.gpu_it("one read: the fused ops in one launch, as the synchronous call; uncovered ops one each", function()
    local b = random_buffer(1 << 22, "float32", "device", 5)
    local fused = { "sum", "min", "max", "mean", "std" }
    gr.reduce(b, { ops = fused })                           -- the kernel compiled (and cached) first
    local sync = launches(function() gr.reduce(b, { ops = fused }) end)
    local async = launches(function() gr.reduce(b, { ops = fused, async = true }):wait() end)
    assert.are.equal(1, sync, "the synchronous call is one pass")
    assert.are.equal(sync, async, "the async call reads the buffer once, as the synchronous one")
    local singles = 0
    for _, op in ipairs(fused) do
      singles = singles + launches(function() gr.reduce(b, { op = op, async = true }):wait() end)
    end
    assert(async < singles, string.format("%d launches, the single calls %d", async, singles))
    -- every op: those the kernel does not cover take their own calls, still fewer launches than one per op
    local all = gr.ops()
    gr.reduce(b, { ops = all })
    local mixed = launches(function() gr.reduce(b, { ops = all, async = true }):wait() end)
    local each = 0
    for _, op in ipairs(all) do
      each = each + launches(function() gr.reduce(b, { op = op, async = true }):wait() end)
    end
    assert(mixed < each, string.format("every op: %d launches, the single calls %d", mixed, each))
  end)

  H.gpu_it("on a user stream, the buffer freed and collected before the wait; several in flight", function()
    local ops = { "sum", "min", "max", "mean", "std", "count", "argmax", "prod" }
    local s = gr.stream()
    local pendings, wants = {}, {}
    for i, d in ipairs({ "float32", "int32", "bfloat16" }) do
      local b = data(d, (1 << 22) + 5, i)
      wants[i] = gr.reduce(b, { ops = ops })
      pendings[i] = gr.reduce(b, { ops = ops, async = true, stream = s })
      b:free()
    end
    collectgarbage()
    collectgarbage()
    for i, p in ipairs(pendings) do
      local got = p:wait()
      same_tables(got, wants[i], ops, "stream, collected " .. i)
      same_tables(p:wait(), wants[i], ops, "second wait " .. i)
    end
    for i = 1, 8 do                                   -- dropped unfinished: collected while in flight
      gr.reduce(data("float32", 1 << 20, i), { ops = ops, async = true, stream = s })
    end
    collectgarbage()
    collectgarbage()
  end)

  H.gpu_it("every injected failure of a start raises, holds no memory and leaves the next call right", function()
    local ops = { "sum", "min", "max", "mean", "argmax", "prod" }  -- fused ops and ops of their own
    local b = random_buffer(100003, "float32", "device", 6)
    local want = gr.reduce(b, { ops = ops })
    local function call() return gr.reduce(b, { ops = ops, async = true }):wait() end
    local held = H.held
    call()
    gr.pool_trim()
    local before = gr.debug_events()
    call()
    local after = gr.debug_events()
    local tried = 0
    for _, kind in ipairs({ "alloc", "launch", "copy" }) do
      for k = 1, after[kind] - before[kind] do
        local where, base = kind .. " " .. k, held()
        gr.debug_fault(kind, k)
        local ok, err = pcall(call)
        gr.debug_fault(kind, 0)
        assert(not ok and tostring(err):find("injected fault", 1, true), where .. ": " .. tostring(err))
        assert.are.equal(base, held(), where .. ": what is held after the failure")
        same_tables(call(), want, ops, where .. ", the next call")
        tried = tried + 1
      end
    end
    assert(tried > 0, "no event to fail")
  end)
end)
