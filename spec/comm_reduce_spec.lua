-- c:reduce (engine/multi/comm.c, comm_parts.c; docs/api.md "Communicators"): one value, and along axes,
-- on a communicator of one rank -- where it must give gr.reduce's results bit for bit, NCCL's collectives
-- of one rank leaving them as they are -- and its errors. Several ranks: experiments/multi_gpu/env_rank.lua,
-- which launch.lua starts (comm_env_spec.lua runs it on two GPUs), checks every rank against the ranks'
-- local results combined in Lua, and the gathered ops (mean, var, argmin, ...) against the reference of
-- every rank's data (experiments/multi_gpu/across.lua).
-- The communicator cases need a GPU and NCCL (pending without them). The merge of the gathered ops'
-- parts runs on every backend through gr.debug_comm_combine (several ranks' buffers in one process),
-- checked against spec/support/fuzz_reference.lua's reference of the data concatenated in rank order.
local gr = require "gpureduce"
local H = require("support.helpers").bind(it, function(reason) pending(reason) end)
local L = require "support.lab_script"            -- puts experiments/ on package.path
local R = require "support.fuzz_reference"
local across = require "multi_gpu.across"

--- Every op c:reduce takes for one value: those one all-reduce combines, then the gathered ones.
local ALL_OPS = {}
for _, op in ipairs(across.OPS) do ALL_OPS[#ALL_OPS + 1] = op end
for _, op in ipairs(across.GATHERED) do ALL_OPS[#ALL_OPS + 1] = op end

--- An `it` that needs a GPU and NCCL; pending without either.
local function nccl_it(title, fn)
  H.gpu_it(title, function()
    if not gr.nccl_version() then
      pending("nccl: libnccl.so.2 cannot be opened")
      return
    end
    fn()
  end)
end

--- A communicator of one rank, for the length of body(c).
local function with_comm(body)
  local c = gr.comm { rank = 0, size = 1, id = gr.comm_id(), timeout = 20 }
  local ok, err = pcall(body, c)
  c:destroy()
  if not ok then error(err, 0) end
end

--- The ops c:reduce gathers along axes whole (no partial result rebuilds their accumulators), with options.
local WHOLE_OPS = { { op = "norm" }, { op = "nanmean" }, { op = "var" }, { op = "std", ddof = 1 },
  { op = "sum", determinism = "gpu_to_gpu" }, { op = "mean", determinism = "gpu_to_gpu" },
  { op = "norm", determinism = "gpu_to_gpu" }, { op = "var", determinism = "gpu_to_gpu" } }
--- Whether c:reduce gathers o whole along axes for float (or other) data: gpu_to_gpu takes float data
-- only; var and std go whole for integers (those of floats have parts); norm and nanmean for any.
local function gathered_whole(float, o)
  if o.determinism then return float end
  return not (float and (o.op == "var" or o.op == "std"))
end

local FORMS = { { axis = 1 }, { axis = 2 }, { axis = -1, keepdims = true }, { axis = { 1, 2 } },
  { axis = { 2, 1 }, keepdims = true } }

local function form_name(f)
  return "axis " .. (type(f.axis) == "table" and "{" .. table.concat(f.axis, ", ") .. "}" or tostring(f.axis)) ..
    (f.keepdims and " keepdims" or "")
end

describe("c:reduce along axes on one rank", function()
  nccl_it("gives gr.reduce's result buffer bit for bit: every op across ranks, every dtype, every form", function()
    with_comm(function(c)
      for _, dtype in ipairs(across.DTYPES) do
        for _, op in ipairs(across.OPS) do
          local m = across.data(gr, dtype, op, 0, 37 * 129, 1):view { 37, 129 }
          for _, form in ipairs(FORMS) do
            local opts = { op = op, axis = form.axis, keepdims = form.keepdims }
            local want = gr.reduce(m, opts)
            local got = c:reduce(m, opts)
            local label = string.format("%s %s %s", dtype, op, form_name(form))
            assert.are.same(want:shape(), got:shape(), label .. ": shape")
            assert.are.equal(want:dtype(), got:dtype(), label .. ": dtype")
            assert.are.equal(1, got:device(), label .. ": device")
            assert.are.equal(want:tobytes(), got:tobytes(), label)
          end
        end
      end
    end)
  end)

  nccl_it("sums bfloat16 and float16 in float32 partials: the reference, not 16-bit roundings", function()
    with_comm(function(c)
      for _, dtype in ipairs({ "bfloat16", "float16", "float8_e4m3" }) do
        -- 4096 ones down each column: 16-bit sums would stop at 256 (bfloat16) or 2048 (float16)
        local m = gr.buffer(4096 * 8, dtype):fill(1):view { 4096, 8 }
        local r = c:reduce(m, { op = "sum", axis = 1 })
        assert.are.equal("float32", r:dtype(), dtype)
        assert.are.same({ 4096, 4096, 4096, 4096, 4096, 4096, 4096, 4096 }, r:totable(), dtype)
      end
    end)
  end)

  nccl_it("checks its results against Lua's own sums, minima and flags of the elements", function()
    with_comm(function(c)
      local rows, cols = 41, 23
      local m = gr.buffer(rows * cols, "int32"):random(5, -1000, 1000):view { rows, cols }
      local t = m:totable()
      local sums, mins, anys = c:reduce(m, { op = "sum", axis = 1 }):totable(),
        c:reduce(m, { op = "min", axis = 2 }):totable(), c:reduce(m, { op = "or", axis = 1 }):totable()
      for j = 1, cols do
        local s, any = 0, 0
        for i = 1, rows do
          s = s + t[i][j]
          if t[i][j] ~= 0 then any = 1 end
        end
        assert.are.equal(s, sums[j], "sum of column " .. j)
        assert.are.equal(any, anys[j], "or of column " .. j)
      end
      for i = 1, rows do
        local lo = math.huge
        for j = 1, cols do lo = math.min(lo, t[i][j]) end
        assert.are.equal(lo, mins[i], "min of row " .. i)
      end
    end)
  end)

  nccl_it("gathers mean, var, argmin, ... along axes through NCCL as the parts merge in one process", function()
    with_comm(function(c)
      for _, dtype in ipairs({ "float32", "float64", "bfloat16", "int32", "uint8" }) do
        for _, op in ipairs({ "mean", "var", "std", "argmin", "argmax", "minmax" }) do
          if dtype:match("float") or (op ~= "var" and op ~= "std") then
            local m = across.data(gr, dtype, op, 1, 37 * 21, 1):view { 37, 21 }
            for _, form in ipairs({ { axis = 1 }, { axis = 2 }, { axis = { 1, 2 } }, { axis = -1, keepdims = true } }) do
              local opts = H.changed({ op = op, ddof = op == "std" and 1 or nil }, form)
              local got = { c:reduce(m, opts) }
              local want = { gr.debug_comm_combine({ m }, opts) }
              assert.are.equal(#want, #got)
              for k = 1, #want do
                assert.are.same(want[k]:shape(), got[k]:shape())
                assert.are.equal(want[k]:tobytes(), got[k]:tobytes(), dtype .. " " .. op .. " " .. H.describe_opts(form))
              end
            end
          end
        end
      end
      local out = gr.buffer(21, "float32")
      assert.are.equal(out, c:reduce(gr.buffer(37 * 21, "float32"):iota(1):view { 37, 21 }, { op = "mean", axis = 1,
        out = out }))
      assert.are.equal(gr.mean(gr.buffer(37 * 21, "float32"):iota(1):view { 37, 21 }, { axis = 1 }):tobytes(),
        out:tobytes())
    end)
  end)

  nccl_it("reduces strided views as they are, and writes into opts.out", function()
    with_comm(function(c)
      local m = gr.buffer(64 * 48, "float32"):random(3, -1, 1):view { 64, 48 }
      local t = m:transpose()
      assert.are.equal(gr.sum(t, { axis = 1 }):tobytes(), c:reduce(t, { op = "sum", axis = 1 }):tobytes())
      assert.are.equal(gr.max(m:narrow(2, 5, 20), { axis = 2 }):tobytes(),
        c:reduce(m:narrow(2, 5, 20), { op = "max", axis = 2 }):tobytes())
      local out = gr.buffer(48, "float32")
      assert.are.equal(out, c:reduce(m, { op = "sum", axis = 1, out = out }))
      assert.are.equal(gr.sum(m, { axis = 1 }):tobytes(), out:tobytes())
    end)
  end)

  nccl_it("gathers norm, nanmean, integer var and gpu_to_gpu along axes whole: gr.reduce's bits", function()
    with_comm(function(c)
      for _, dtype in ipairs({ "float32", "bfloat16", "float64", "int32", "int16" }) do
        for _, o in ipairs(WHOLE_OPS) do
          local m = gathered_whole(dtype:match("float") ~= nil, o) and
            across.data(gr, dtype, o.op, 1, 37 * 21, 1):view { 37, 21 }
          local forms = m and { { axis = 1 }, { axis = 2 }, { axis = { 1, 2 } }, { axis = -1, keepdims = true } }
          for _, form in ipairs(forms or {}) do
            local opts = H.changed(o, form)
            local label = dtype .. " " .. H.describe_opts(opts)
            local want = { gr.reduce(m, opts) }
            local got = { c:reduce(m, opts) }
            assert.are.equal(#want, #got, label)
            for k = 1, #want do
              assert.are.same(want[k]:shape(), got[k]:shape(), label)
              assert.are.equal(want[k]:tobytes(), got[k]:tobytes(), label)
            end
          end
        end
      end
      -- a strided view, and opts.out
      local m = gr.buffer(64 * 48, "float32"):random(3, -1, 1):view { 64, 48 }
      assert.are.equal(gr.norm(m:transpose(), { axis = 1 }):tobytes(),
        c:reduce(m:transpose(), { op = "norm", axis = 1 }):tobytes())
      local out = gr.buffer(48, "float32")
      assert.are.equal(out, c:reduce(m, { op = "sum", axis = 1, determinism = "gpu_to_gpu", out = out }))
      assert.are.equal(gr.sum(m, { axis = 1, determinism = "gpu_to_gpu" }):tobytes(), out:tobytes())
    end)
  end)

  nccl_it("refuses what does not apply, naming it", function()
    with_comm(function(c)
      local m = gr.buffer(12, "float32"):iota(1):view { 3, 4 }
      H.expect_error("opts.axis: 3 is not an axis of this 2-axis buffer", c.reduce, c, m, { axis = 3 })
      H.expect_error("opts.keepdims goes with opts.axis", c.reduce, c, m, { keepdims = true })
      H.expect_error("opts.stream: c:reduce along axes runs on the communicator's stream", c.reduce, c, m,
        { axis = 1, stream = gr.stream() })
      H.expect_error("opts: c:reduce takes a built-in op", c.reduce, c, m, { axis = 1, async = true })
      H.expect_error("opts.out: must have the result's shape {4} (got {3})", c.reduce, c, m,
        { axis = 1, out = gr.buffer(3, "float32") })
      local host = gr.buffer(12, "float32", { where = "host" }):view { 3, 4 }
      H.expect_error("b: the buffer is host memory of device 1, the communicator's device is 1", c.reduce, c, host,
        { axis = 1 })
    end)
  end)
end)

describe("c:reduce of one value on one rank", function()
  nccl_it("gives gr.reduce's value bit for bit, kept on the device or through the host", function()
    with_comm(function(c)
      local ways = { {}, { finish = "device" }, { finish = "hybrid" }, { finish = "host" }, { finish = "single" },
        { determinism = "gpu_to_gpu" }, { variant = "interleaved" }, { variant = "cpu" } }
      ways[#ways + 1] = { ddof = 1 }
      ways[#ways + 1] = { acc = "float64" }
      for _, dtype in ipairs(across.DTYPES) do
        for _, op in ipairs(ALL_OPS) do
          for _, n in ipairs({ 1, 33, 4097, 1000003 }) do
            local b = across.data(gr, dtype, op, 0, n, 1)
            for _, way in ipairs(ways) do
              local opts = { op = op }
              for k, v in pairs(way) do opts[k] = v end
              local ok, want = pcall(gr.reduce, b, opts)
              if ok then
                local got = c:reduce(b, opts)
                assert(H.same_result(want, got), string.format("%s %s n = %d %s: %s, gr.reduce %s", dtype, op, n,
                  H.describe_opts(opts), tostring(got), tostring(want)))
              else
                -- what gr.reduce refuses (a variant without the op or dtype), c:reduce refuses with its words
                H.expect_error(tostring(want):match("opts%.%a+") or "", c.reduce, c, b, opts)
              end
            end
          end
        end
      end
    end)
  end)

  nccl_it("combines one value through its mailbox, decided at the first call; with ncclAllReduce when asked", function()
    with_comm(function(c)
      assert.is_nil(c:_oneshot())
      local b = gr.buffer(4097, "float32"):random(7, -1, 1)
      assert(H.same_result(gr.sum(b), c:reduce(b)))
      assert.is_true(c:_oneshot())
      -- the parities alternate call by call: many calls in a row, each the value of its own buffer
      for i = 1, 50 do
        assert.are.equal(i * 4097, c:reduce(gr.buffer(4097, "int32"):fill(i)))
        assert.are.equal(-i, c:reduce(gr.buffer(3, "float64"):fill(-i), { op = "min" }))
      end
      -- allreduce and the gathered ops go through NCCL as before, and leave the mailbox's order intact
      local v = gr.buffer(8, "float32"):fill(2)
      c:allreduce(v, "sum")
      assert(H.same_result(gr.mean(b), c:reduce(b, { op = "mean" })))
      assert.are.equal(16, c:reduce(v))
    end)
    -- GPUREDUCE_COMM_ONESHOT=0: the same values through ncclAllReduce
    local ok, _, out = H.run_lua([[
      local gr = require "gpureduce"
      local c = gr.comm { rank = 0, size = 1, id = gr.comm_id(), timeout = 20 }
      local b = gr.buffer(1000, "int64"):iota(1)
      print(c:reduce(b), tostring(c:_oneshot()), c:reduce(gr.buffer(2, "bool"):fill(true), { op = "and" }))
      c:destroy()]], "GPUREDUCE_COMM_ONESHOT=0")
    assert(ok, out)
    assert.matches("500500\tfalse\ttrue", out)
  end)

  nccl_it("reduces host buffers, strided views and buffers of every dtype's kinds as gr.reduce does", function()
    with_comm(function(c)
      local h = gr.buffer(1000, "int64", { where = "host" }):iota(1)
      assert.are.equal(500500, c:reduce(h))
      local m = gr.buffer(60, "float64"):random(2, -1, 1):view { 6, 10 }
      assert(H.same_result(gr.sum(m:transpose()), c:reduce(m:transpose())))
      assert.are.equal(false, c:reduce(gr.buffer(8, "bool"), { op = "or" }))
      assert.are.equal(true, c:reduce(gr.buffer(8, "bool"):fill(true), { op = "min" }))
      assert.are.equal(math.type(gr.sum(gr.buffer(4, "uint8"))), math.type(c:reduce(gr.buffer(4, "uint8"))))
      assert.are.equal(0, c:reduce(gr.buffer(0, "int32")))
      H.expect_error("min of an empty buffer is undefined", c.reduce, c, gr.buffer(0, "float32"), { op = "min" })
    end)
  end)

  nccl_it("gathers mean, var, argmin, ... through NCCL as the parts merge in one process, of every buffer kind", function()
    with_comm(function(c)
      for _, dtype in ipairs(across.GATHERED_DTYPES) do
        for _, op in ipairs(across.GATHERED) do
          local d = across.data(gr, dtype, op, 1, 5001, 1)
          local h = gr.buffer(#d, dtype, { where = "host" })
          gr.copy(h, d)
          for _, b in ipairs({ d, h, d:slice(17, 3000) }) do
            local opts = { op = op, ddof = (op == "var" or op == "std") and 1 or nil }
            local label = string.format("%s %s (%s, %d)", dtype, op, b:where(), #b)
            local w1, w2 = gr.reduce(b, opts)
            local g1, g2 = c:reduce(b, opts)
            assert(H.same_result({ w1, w2 }, { g1, g2 }), label .. ": gr.reduce " .. tostring(w1) .. ", got " ..
              tostring(g1))
            local m1, m2 = gr.debug_comm_combine({ b }, opts)
            assert(H.same_result({ m1, m2 }, { g1, g2 }), label .. ": merged in one process " .. tostring(m1))
          end
        end
      end
      H.expect_error("mean of an empty buffer is undefined", c.reduce, c, gr.buffer(0, "float32"), { op = "mean" })
      assert.are.equal(0.0, c:reduce(gr.buffer(0, "float32"), { op = "norm" }))
    end)
  end)
end)

--- Rank q's buffer of a merge case: across.lua's data, of length n.
local function parts_of(dtype, op, lengths)
  local parts = {}
  for q = 0, #lengths - 1 do parts[q + 1] = across.data(gr, dtype, op, q, lengths[q + 1]) end
  return parts
end

--- One buffer holding the parts' elements in order.
local function joined(parts)
  local bytes = {}
  for i, p in ipairs(parts) do bytes[i] = p:tobytes() end
  return gr.buffer(table.concat(bytes), parts[1]:dtype())
end

describe("c:reduce's gathered parts merged in one process (gr.debug_comm_combine), on every backend", function()
  it("gives the reference of every rank's data concatenated in rank order: every op, dtype and rank count", function()
    for _, dtype in ipairs(across.GATHERED_DTYPES) do
      for _, op in ipairs(across.GATHERED) do
        for _, size in ipairs({ 1, 2, 3, 5 }) do
          local variants = { { op = op } }
          if op == "var" or op == "std" then variants[2] = { op = op, ddof = 1 } end
          if dtype == "float32" and R.OPS[op] and require("support.ops_reference").TAKES_FLOAT64_ACC[op] then
            variants[#variants + 1] = { op = op, acc = "float64" }
          end
          for _, opts in ipairs(variants) do
            local parts = {}
            for q = 0, size - 1 do parts[q + 1] = across.data(gr, dtype, op, q, across.length(q)) end
            local got, got2 = gr.debug_comm_combine(parts, opts)
            local ok, why = across.check_gathered(gr, R, dtype, op, opts, size, nil, got, got2)
            assert(ok, string.format("%s %s %d ranks %s: %s", dtype, op, size, H.describe_opts(opts), tostring(why)))
          end
        end
      end
    end
  end)

  --- Checks that the parts give gr.reduce(b, opts)'s bits wherever b is the only part holding elements;
  -- where gr.reduce refuses opts, that the merge refuses them in its words.
  local function alone_as_reduce(b, opts, label)
    local ok, w1, w2 = pcall(gr.reduce, b, opts)
    if not ok then
      H.expect_error(tostring(w1):match("opts%.%a+") or tostring(w1):match("gpureduce: (.*)$"), gr.debug_comm_combine,
        { b }, opts)
      return
    end
    local empty = gr.buffer(0, b:dtype())
    for _, parts in ipairs({ { b }, { empty, b }, { b, empty, empty } }) do
      local g1, g2 = gr.debug_comm_combine(parts, opts)
      assert(H.same_result({ w1, w2 }, { g1, g2 }), string.format("%s, %d parts: %s, gr.reduce %s", label, #parts,
        tostring(g1), tostring(w1)))
    end
  end

  it("gives gr.reduce's result bit for bit where one rank holds every element, however it was reduced", function()
    local ways = { {}, { finish = "host" }, { finish = "hybrid" }, { determinism = "gpu_to_gpu" }, { acc = "float64" },
      { ddof = 1 }, { variant = "cpu" }, { variant = "cpu_pairwise" }, { variant = "warp_shuffle" } }
    for _, dtype in ipairs(across.GATHERED_DTYPES) do
      for _, op in ipairs(across.GATHERED) do
        for _, n in ipairs({ 1, 33, 4097 }) do
          local b = across.data(gr, dtype, op, 1, n)
          for _, way in ipairs(ways) do
            local opts = H.changed({ op = op }, way)
            alone_as_reduce(b, opts, string.format("%s %s n = %d %s", dtype, op, n, H.describe_opts(opts)))
          end
        end
      end
    end
  end)

  it("merges gpu_to_gpu's exact sums: the bits of one buffer of every rank's data, whatever the split", function()
    local lengths = { { 1000 }, { 1, 999 }, { 500, 0, 333, 167 }, { 250, 250, 250, 250 } }
    for _, dtype in ipairs({ "float32", "float64", "bfloat16" }) do
      for _, op in ipairs({ "sum", "nansum", "asum", "sumsq", "mean", "nanmean", "norm", "var", "std" }) do
        for _, split in ipairs(lengths) do
          local parts = {}
          for q = 1, #split do
            parts[q] = gr.buffer(split[q], dtype):random(100 + q, -1e3, 1e3)
            if split[q] > 2 and op:sub(1, 3) == "nan" then parts[q]:set({ 0 / 0 }, 2) end
          end
          local opts = { op = op, determinism = "gpu_to_gpu", ddof = op == "var" and 1 or nil }
          local ok, want = pcall(gr.reduce, joined(parts), opts)
          if ok then
            local got = gr.debug_comm_combine(parts, opts)
            assert(H.same_result(want, got), string.format("%s %s split {%s}: %s, one buffer %s", dtype, op,
              table.concat(split, ", "), tostring(got), tostring(want)))
          else
            H.expect_error("opts.determinism", gr.debug_comm_combine, parts, opts)
          end
        end
      end
    end
  end)

  it("counts argmin and argmax indices in the ranks' data in rank order: first on ties, the first NaN wins", function()
    local function arg(op, lists, dtype)
      local parts = {}
      for i, t in ipairs(lists) do parts[i] = #t > 0 and gr.buffer(t, dtype or "float64") or gr.buffer(0, dtype or "float64") end
      return { gr.debug_comm_combine(parts, { op = op }) }
    end
    assert.are.same({ 1.0, 2 }, arg("argmin", { { 3, 1, 2 }, { 1, 5 } }))
    assert.are.same({ 5.0, 5 }, arg("argmax", { { 3, 1, 2 }, { 1, 5 } }))
    assert.are.same({ 1.0, 4 }, arg("argmin", { {}, { 2, 2, 2 }, { 1, 1 }, {}, { 1 } }))
    assert.are.same({ 7, 1 }, arg("argmax", { { 7 }, {}, { 7, 7 } }, "int32"))   -- a tie across ranks: the first
    assert.are.same({ 7, 2 }, arg("argmax", { {}, { 6, 7 }, { 7 } }, "int32"))
    local nan = arg("argmax", { { 1, 9 }, { 4, 0 / 0, 2 }, { 0 / 0 } })
    assert(nan[1] ~= nan[1] and nan[2] == 4, "argmax with NaNs: " .. tostring(nan[1]) .. ", " .. tostring(nan[2]))
    nan = arg("argmin", { { 0 / 0 }, { 0 / 0, -5 } })
    assert(nan[1] ~= nan[1] and nan[2] == 1, "argmin with NaNs: " .. tostring(nan[2]))
    -- minmax: any NaN makes both NaN; otherwise the extremes of every rank
    assert.are.same({ -5.0, 9.0 }, arg("minmax", { { 1, 9 }, {}, { -5, 2 } }))
    local mm = arg("minmax", { { 1, 9 }, { 0 / 0 } })
    assert(mm[1] ~= mm[1] and mm[2] ~= mm[2], "minmax with a NaN")
    -- integers of the whole range: argmin of int64 and uint64 (unsigned order)
    assert.are.same({ math.mininteger, 3 }, arg("argmin", { { 0, 5 }, { math.mininteger, math.mininteger } }, "int64"))
    assert.are.same({ -1, 2 }, arg("argmax", { { 0 }, { -1, 1 } }, "uint64"))
  end)

  it("refuses a merge of parts that differ, and the ops NCCL combines, naming what it takes", function()
    local f, i = gr.buffer({ 1, 2 }, "float32"), gr.buffer({ 1, 2 }, "int32")
    H.expect_error("b: rank 1 reduced int32 with 'mean' (accumulator uint64, ddof 0), rank 0 float32 with 'mean' " ..
      "(accumulator float32, ddof 0): every rank makes the same call on the same dtype", gr.debug_comm_combine,
      { f, i }, { op = "mean" })
    H.expect_error("opts.op: 'sum' is combined by NCCL's all-reduce of the ranks' results, not from their parts " ..
      "(parts are gathered for mean, nanmean, var, std, norm, argmin, argmax, minmax, and every op at determinism " ..
      "gpu_to_gpu)", gr.debug_comm_combine, { f }, { op = "sum" })
    H.expect_error("element 2: expected a buffer, got number", gr.debug_comm_combine, { f, 3 }, { op = "mean" })
    H.expect_error("expected a list of 1 to 65536 buffers (got 0)", gr.debug_comm_combine, {}, { op = "mean" })
    H.expect_error("opts: c:reduce's parts are whole-buffer reductions of a built-in op, or ones along axes",
      gr.debug_comm_combine, { f }, { op = "mean", async = true })
    H.expect_error("mean of an empty buffer is undefined", gr.debug_comm_combine,
      { gr.buffer(0, "float32"), gr.buffer(0, "float32") }, { op = "mean" })
    H.expect_error("argmax of an empty buffer is undefined", gr.debug_comm_combine, { gr.buffer(0, "int32") },
      { op = "argmax" })
    assert.are.equal(0.0, gr.debug_comm_combine({ gr.buffer(0, "float64"), gr.buffer(0, "float64") }, { op = "norm" }))
    -- every part is left as it was
    local before = f:tobytes()
    gr.debug_comm_combine({ f, f }, { op = "var" })
    assert.are.equal(before, f:tobytes())
  end)
end)

describe("c:reduce's gathered ops along axes merged in one process (gr.debug_comm_combine with axis)", function()
  local A = require "support.axes_reference"
  local OPS = { { op = "mean" }, { op = "var" }, { op = "std", ddof = 1 }, { op = "argmin" }, { op = "argmax" },
    { op = "minmax" }, { op = "mean", acc = "float64" }, { op = "norm" }, { op = "nanmean" },
    { op = "sum", determinism = "gpu_to_gpu" }, { op = "mean", determinism = "gpu_to_gpu" } }
  --- Each rank's shape (they differ along the first reduced axis only), and the axes.
  local CASES = {
    { shapes = { { 3, 4 }, { 2, 4 }, { 5, 4 } }, axis = 1 },
    { shapes = { { 4, 3 }, { 4, 1 } }, axis = 2 },
    { shapes = { { 2, 3, 4 }, { 1, 3, 4 } }, axis = { 1, 3 } },
    { shapes = { { 2, 5, 3 }, { 2, 2, 3 }, { 2, 0, 3 } }, axis = -2 },
    { shapes = { { 0, 4 }, { 3, 4 }, { 1, 4 } }, axis = 1 },
  }
  local FLOAT = { float32 = true, float64 = true, bfloat16 = true, float16 = true }

  --- Rank q's part: a buffer of the shape, its values as stored (a flat list), with NaNs in some floats.
  local function part(dtype, shape, q, nan)
    local n = A.product(shape)
    local lo = FLOAT[dtype] and -2 or dtype:match("^uint") and 0 or -100
    local b = gr.buffer(n, dtype):random(500 + 37 * q, lo, FLOAT[dtype] and 2 or 100)
    if nan and n > 0 then b:set({ 0 / 0 }, (q * 5) % n + 1) end
    return b:view(shape), R.boolify(dtype, b:totable(1))
  end

  --- One call of the merge against the reference of every part's data: nil, or what went wrong.
  local function merge_case(dtype, case, o, nan)
    local parts, groups = {}, {}
    local axes = assert(A.normalize(case.axis, #case.shapes[1]))
    for q, shape in ipairs(case.shapes) do
      local data
      parts[q], data = part(dtype, shape, q, nan and q > 1)
      -- the first reduced axis is the outermost of the reduced ones: the whole's group of an output is the
      -- ranks' groups one after another
      for g, group in ipairs(A.groups(A.compact(data, shape), axes)) do
        groups[g] = groups[g] or {}
        table.move(group, 1, #group, #groups[g] + 1, groups[g])
      end
    end
    local opts = H.changed({ axis = case.axis }, o)
    local label = string.format("%s %s axis %s of %d parts%s", dtype, H.describe_opts(o),
      type(case.axis) == "table" and table.concat(case.axis, ",") or case.axis, #parts, nan and " with NaN" or "")
    local ok, r1, r2 = pcall(gr.debug_comm_combine, parts, opts)
    if not ok then return label .. ": raised " .. tostring(r1) end
    local t1, t2 = r1:totable(1), r2 and r2:totable(1)
    for g, group in ipairs(groups) do
      local good, why = R.check(o.op, true, t1[g], R.expect(o.op, group, { dtype = dtype, acc = o.acc, ddof = o.ddof }),
        t2 and t2[g])
      if not good then
        return string.format("%s: output %d: %s (got %s%s)", label, g, why, tostring(t1[g]),
          t2 and (", " .. tostring(t2[g])) or "")
      end
    end
  end

  it("gives the reference of the ranks' data one after another along the first reduced axis", function()
    local failures, total = {}, 0
    for _, dtype in ipairs({ "float32", "float64", "bfloat16", "int32", "int16", "uint8" }) do
      local float = FLOAT[dtype]
      for _, case in ipairs(CASES) do
        for _, o in ipairs(OPS) do
          local moments = o.op == "var" or o.op == "std"
          for _, nan in ipairs(float and not moments and { false, true } or { false }) do
            if float or not (o.acc or o.determinism) then
              total = total + 1
              failures[#failures + 1] = merge_case(dtype, case, o, nan)
            end
          end
        end
      end
    end
    assert(#failures == 0, string.format("%d of %d calls failed:\n  %s", #failures, total,
      table.concat(failures, "\n  ", 1, math.min(#failures, 10))))
  end)

  --- The parts' elements one after another along the first reduced axis, as one buffer: built from their
  -- bytes here (each part's row-major bytes cut at the first reduced axis), not by the engine's gathering.
  local function concatenated(dtype, shapes, parts, axes)
    local d0 = axes[1]
    for _, a in ipairs(axes) do d0 = math.min(d0, a) end
    local outer, lead, held = 1, 0, nil
    for d = 1, d0 - 1 do outer = outer * shapes[1][d] end
    local chunks = {}
    for q, shape in ipairs(shapes) do
      local n = A.product(shape)
      if n > 0 then
        held = held or shape
        lead = lead + shape[d0]
        local bytes = parts[q]:tobytes()
        local each = #bytes // outer
        for o = 1, outer do
          chunks[o] = chunks[o] or {}
          table.insert(chunks[o], bytes:sub((o - 1) * each + 1, o * each))
        end
      end
    end
    local flat = {}
    for o = 1, outer do flat[o] = table.concat(chunks[o] or {}) end
    local shape = { table.unpack(held) }
    shape[d0] = lead
    return gr.buffer(table.concat(flat), dtype):view(shape)
  end

  it("gathers the ops without parts whole: gr.reduce's bits over the ranks' elements one after another", function()
    local failures, total = {}, 0
    for _, dtype in ipairs({ "float32", "float64", "bfloat16", "float16", "int32", "int16", "uint8" }) do
      for _, case in ipairs(CASES) do
        local axes = assert(A.normalize(case.axis, #case.shapes[1]))
        for _, o in ipairs(WHOLE_OPS) do
          if gathered_whole(FLOAT[dtype] ~= nil, o) then
            local parts = {}
            for q, shape in ipairs(case.shapes) do parts[q] = part(dtype, shape, q, FLOAT[dtype] and q == 2) end
            local whole = concatenated(dtype, case.shapes, parts, axes)
            local opts = H.changed({ axis = case.axis }, o)
            local label = string.format("%s %s of %d parts", dtype, H.describe_opts(opts), #parts)
            total = total + 1
            local ok, g1, g2 = pcall(gr.debug_comm_combine, parts, opts)
            local w1, w2 = gr.reduce(whole, opts)
            if not ok then
              failures[#failures + 1] = label .. ": raised " .. tostring(g1)
            elseif g1:tobytes() ~= w1:tobytes() or (w2 and g2:tobytes() ~= w2:tobytes()) then
              failures[#failures + 1] = label .. ": not gr.reduce's bits of the whole"
            end
          end
        end
      end
    end
    assert(total == 180, total .. " calls, expected 180")
    assert(#failures == 0, string.format("%d of %d calls failed:\n  %s", #failures, total,
      table.concat(failures, "\n  ", 1, math.min(#failures, 10))))
  end)

  it("gathers strided views whole as their elements: the compact concatenation's bits; one part: its own", function()
    local a = gr.buffer(7 * 5, "float32"):random(41, -2, 2):view { 7, 5 }
    local b = gr.buffer(3 * 5, "float32"):random(42, -2, 2):view { 3, 5 }
    local parts = { a:transpose(), b:transpose() }         -- {5, 7} and {5, 3}, reduced along axis 2
    local whole = concatenated("float32", { { 5, 7 }, { 5, 3 } }, parts, { 2 })
    for _, o in ipairs({ { op = "norm" }, { op = "nanmean" }, { op = "sum", determinism = "gpu_to_gpu" } }) do
      local opts = H.changed({ axis = 2 }, o)
      assert.are.equal(gr.reduce(whole, opts):tobytes(), gr.debug_comm_combine(parts, opts):tobytes(),
        H.describe_opts(opts))
      assert.are.equal(gr.reduce(parts[1], opts):tobytes(), gr.debug_comm_combine({ parts[1] }, opts):tobytes(),
        H.describe_opts(opts) .. " of one part")
    end
  end)

  it("gives gr.reduce's bits where one rank holds every element, but var and std (rebuilt from results)", function()
    for _, dtype in ipairs({ "float32", "bfloat16", "int32" }) do
      local b = part(dtype, { 6, 5 }, 1, false)
      local empty = gr.buffer(0, dtype):view { 0, 5 }
      for _, op in ipairs({ "mean", "argmin", "argmax", "minmax" }) do
        local w1, w2 = gr.reduce(b, { op = op, axis = 1 })
        for _, parts in ipairs({ { b }, { empty, b }, { b, empty } }) do
          local g1, g2 = gr.debug_comm_combine(parts, { op = op, axis = 1 })
          assert.are.equal(w1:tobytes(), g1:tobytes(), dtype .. " " .. op)
          if w2 then assert.are.equal(w2:tobytes(), g2:tobytes(), dtype .. " " .. op .. ": the second result") end
        end
      end
    end
  end)

  it("refuses parts whose results or reduced axes differ in shape, naming it", function()
    local f = gr.buffer(12, "float32"):iota(1):view { 3, 4 }
    H.expect_error("b: rank 1's reduced axes past the first have the shape {2}, rank 0's {4}: 'norm' puts the " ..
      "ranks' elements one after another along the first reduced axis, so the others must match",
      gr.debug_comm_combine, { gr.buffer(8, "float32"):view { 2, 1, 4 }, gr.buffer(4, "float32"):view { 2, 1, 2 } },
      { op = "norm", axis = { 1, 3 } })
    H.expect_error("b: rank 2's reduced axes past the first have the shape {3}, rank 1's {4}",
      gr.debug_comm_combine, { gr.buffer(0, "int32"):view { 0, 5 }, gr.buffer(8, "int32"):view { 2, 4 },
        gr.buffer(6, "int32"):view { 2, 3 } }, { op = "var", axis = { 1, 2 } })
    H.expect_error("opts.op: 'sum' is combined by NCCL's all-reduce of the ranks' results", gr.debug_comm_combine,
      { f }, { op = "sum", axis = 1 })
    H.expect_error("b: rank 1's results along the axes have the shape {4}, rank 0's {3}: every rank gives the same " ..
      "result shape", gr.debug_comm_combine, { f, gr.buffer(8, "float32"):view { 4, 2 } }, { op = "mean", axis = 2 })
    H.expect_error("b: rank 1's reduced axes past the first hold 2 elements, rank 0's 4", gr.debug_comm_combine,
      { gr.buffer(8, "float32"):view { 2, 1, 4 }, gr.buffer(4, "float32"):view { 2, 1, 2 } },
      { op = "argmax", axis = { 1, 3 } })
    H.expect_error("b: rank 1 reduced int32 with 'mean'", gr.debug_comm_combine,
      { f, gr.buffer(12, "int32"):view { 3, 4 } }, { op = "mean", axis = 1 })
  end)
end)

describe("gr.comm on a device that does not exist", function()
  it("says which device was asked for and how many there are (the cpu backend: that it needs CUDA)", function()
    local ndev = #gr.devices()
    local want = gr.backend() == "cuda" and gr.nccl_version() and
      string.format("opts.device: %d is out of range (devices: 1 to %d)", ndev + 1, ndev) or
      gr.backend() == "cpu" and "communicators need NCCL and a CUDA device (backend is cpu)" or "NCCL"
    H.expect_error(want, gr.comm, { rank = 0, size = 1, id = "/nonexistent/id", timeout = 1, device = ndev + 1 })
  end)
end)
