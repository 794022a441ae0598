--[[
sharded_dot_ops_spec.lua -- gr.dot of two sharded buffers, opts.ops and gr.describe of a sharded buffer,
each checked against plain buffers with the same contents.

What runs
  As in sharded_reduce_spec.lua, shards of one device repeated ({1, 1}, {1, 1, 1}, {1, 1, 1, 1, 1}) run
  the code paths of several GPUs on one GPU and on the cpu backend; {1, 2} and {2, 1, 2} join with two
  devices. Sizes include 0, 1 and fewer elements than shards (empty shards).
  gr.dot: integer results bit for bit with one buffer's (64-bit wrapping sums of exact products), float
  results within the sum's bound of one buffer's and the same bits on every run, gpu_to_gpu bit for bit
  with one buffer's exactly rounded dot on data with cancellation across shards. The reference for
  integers is a Lua loop here, not the engine.
  opts.ops: each entry bit for bit what the op's own call on the sharded buffer gives; gr.describe's
  count is the element count and its other values the ops' own.
  Bad input: a sharded buffer with a plain one, different splits, different dtypes, async, segments.
]]
local gr = require "gpureduce"
local H = require("support.helpers").bind(it, function(reason) pending(reason) end)

local ndev = #gr.devices()
local LAYOUTS = { { 1, 1 }, { 1, 1, 1 }, { 1, 1, 1, 1, 1 } }
if ndev >= 2 then
  LAYOUTS[#LAYOUTS + 1] = { 1, 2 }
  LAYOUTS[#LAYOUTS + 1] = { 2, 1, 2 }
end

local function layout_name(devices) return "{" .. table.concat(devices, ",") .. "}" end

local function same_bits(got, want, label)
  assert(H.same_result(got, want), string.format("%s: got %s, expected %s", label, tostring(got), tostring(want)))
end

--- n values of dtype with signs and magnitudes that vary (integers within the dtype's range).
local function values(n, dtype, salt)
  local t = {}
  local unsigned = dtype:match("^uint") or dtype == "bool"
  for i = 1, n do
    local k = (i * 7919 + salt * 104729) % 255
    if dtype == "bool" then t[i] = k % 3 ~= 0
    elseif dtype:match("int") then t[i] = unsigned and k % 100 or k - 127
    else t[i] = (k - 127) / 16 end
  end
  return t
end

local function both(n, dtype, devices, t)
  local s = gr.sharded(n, dtype, { devices = devices })
  local b = gr.buffer(n, dtype)
  if n > 0 then
    s:set(t)
    b:set(t)
  end
  return s, b
end

--- The dot product of two integer tables as the engine's 64-bit wrapping sum (bools as 0 and 1).
local function int_dot(x, y)
  local s = 0
  for i = 1, #x do
    local u = x[i] == true and 1 or x[i] == false and 0 or x[i]
    local v = y[i] == true and 1 or y[i] == false and 0 or y[i]
    s = s + u * v
  end
  return s
end

--- fn(...) raises naming argument n (whichever name the function is reached by) with `text` in the message.
local function expect_arg(n, text, fn, ...)
  local err = H.expect_error(text, fn, ...)
  assert(err:find("bad argument #" .. n .. " to '", 1, true), err)
end

local SIZES = { 0, 1, 2, 3, 5, 64, 1000, 40001 }

describe("gr.dot of sharded buffers", function()
  it("gives one buffer's integer results bit for bit, against a Lua reference", function()
    for _, devices in ipairs(LAYOUTS) do
      for _, dtype in ipairs({ "int8", "uint8", "int16", "int32", "int64", "uint32", "bool" }) do
        for _, n in ipairs(SIZES) do
          local x, y = values(n, dtype, 1), values(n, dtype, 2)
          local sa, a = both(n, dtype, devices, x)
          local sb, b = both(n, dtype, devices, y)
          local label = string.format("%s %s n=%d", layout_name(devices), dtype, n)
          local got = gr.dot(sa, sb)
          same_bits(got, gr.dot(a, b), label)
          assert.are.equal(int_dot(x, y), got, label .. " (reference)")
        end
      end
    end
  end)

  it("gives float results within the sum's bound of one buffer's, the same on every run", function()
    for _, devices in ipairs(LAYOUTS) do
      for _, dtype in ipairs({ "float32", "float64", "float16", "bfloat16" }) do
        for _, n in ipairs(SIZES) do
          local x, y = values(n, dtype, 3), values(n, dtype, 4)
          local sa, a = both(n, dtype, devices, x)
          local sb, b = both(n, dtype, devices, y)
          local label = string.format("%s %s n=%d", layout_name(devices), dtype, n)
          local got, want = gr.dot(sa, sb), gr.dot(a, b)
          local mag = 0
          for i = 1, n do mag = mag + math.abs(sa[i] * sb[i]) end
          local eps = dtype == "float64" and 2 ^ -52 or 2 ^ -23
          assert(math.abs(got - want) <= 2 * n * eps * mag, string.format("%s: %s against %s", label, got, want))
          for _ = 1, 3 do same_bits(gr.dot(sa, sb), got, label .. " (again)") end
          same_bits(gr.dot(sa, sb, { determinism = "run_to_run" }), got, label .. " (run_to_run)")
        end
      end
    end
  end)

  it("gives one buffer's exactly rounded dot at gpu_to_gpu, cancellation across shards included", function()
    for _, devices in ipairs(LAYOUTS) do
      for _, dtype in ipairs({ "float32", "float64", "bfloat16" }) do
        for _, n in ipairs({ 1, 3, 7, 1000, 40001 }) do
          local x, y = values(n, dtype, 5), values(n, dtype, 6)
          if n >= 3 then
            local big = dtype == "bfloat16" and 2 ^ 60 or 1e30
            x[1], x[n // 2 + 1], x[n] = big, 1, -big
            y[1], y[n // 2 + 1], y[n] = 1, 1, 1
          end
          local sa, a = both(n, dtype, devices, x)
          local sb, b = both(n, dtype, devices, y)
          local label = string.format("%s %s n=%d", layout_name(devices), dtype, n)
          local opts = { determinism = "gpu_to_gpu" }
          same_bits(gr.dot(sa, sb, opts), gr.dot(a, b, opts), label)
          if n == 3 then assert.are.equal(1.0, gr.dot(sa, sb, opts), label) end
        end
      end
    end
  end)

  it("refuses a plain buffer beside a sharded one, other splits, other dtypes and what it does not take", function()
    local sa = gr.sharded(10, "float32", { devices = { 1, 1 } }):fill(1)
    local sb = gr.sharded(10, "float32", { devices = { 1, 1 } }):fill(2)
    local three = gr.sharded(10, "float32", { devices = { 1, 1, 1 } }):fill(2)
    local ints = gr.sharded(10, "int32", { devices = { 1, 1 } }):fill(2)
    local plain = gr.buffer(10, "float32"):fill(2)
    expect_arg(2, "gr.dot of a sharded buffer takes two sharded buffers", gr.dot, sa, plain)
    expect_arg(1, "gr.dot of a sharded buffer takes two sharded buffers", gr.dot, plain, sb)
    expect_arg(2, "b has 3 shards, a 2", gr.dot, sa, three)
    H.expect_error("gr.dot takes two buffers of one dtype", gr.dot, sa, ints)
    expect_arg(3, "opts: gr.dot of sharded buffers is one synchronous number", gr.dot, sa, sb, { async = true })
    expect_arg(3, "opts: gr.dot of sharded buffers is one synchronous number", gr.dot, sa, sb, { segment = 5 })
    H.expect_error("this option does not apply to it", gr.dot, sa, sb, { variant = "cub" })
    local eleven = gr.sharded(11, "float32", { devices = { 1, 1 } })
    H.expect_error("shard 1 of b has 6 elements, shard 1 of a 5", gr.dot, sa, eleven)
    assert.are.equal(20.0, gr.dot(sa, sb))
    sb:free()
    expect_arg(2, "sharded buffer has been freed)", gr.dot, sa, sb)
  end)
end)

local OPS = { "sum", "min", "max", "mean", "std", "var", "count", "argmax", "argmin", "minmax", "absmax", "asum",
  "nansum", "prod", "and", "or" }

describe("opts.ops of a sharded buffer", function()
  it("gives each op what its own call on the sharded buffer gives, bit for bit", function()
    for _, devices in ipairs(LAYOUTS) do
      for _, dtype in ipairs({ "float32", "float64", "int32", "uint8", "bfloat16" }) do
        for _, n in ipairs({ 1, 5, 1000, 40001 }) do
          local s = gr.sharded(n, dtype, { devices = devices })
          s:set(values(n, dtype, 7))
          local ops = {}
          for _, op in ipairs(OPS) do       -- those the dtype takes
            if pcall(gr.reduce, s, { op = op }) then ops[#ops + 1] = op end
          end
          local got = gr.reduce(s, { ops = ops })
          for _, op in ipairs(ops) do
            local label = string.format("%s %s n=%d %s", layout_name(devices), dtype, n, op)
            local want = table.pack(gr.reduce(s, { op = op }))
            same_bits(got[op], want.n == 2 and { want[1], want[2] } or want[1], label)
          end
        end
      end
    end
  end)

  it("gives gr.describe the count and the ops' own values", function()
    local s = gr.sharded(1001, "float32", { devices = { 1, 1, 1 } }):random(11, -4, 4)
    local d = gr.describe(s)
    assert.are.equal(1001, d.count)
    for _, op in ipairs({ "sum", "mean", "std", "min", "max" }) do same_bits(d[op], gr.reduce(s, { op = op }), op) end
    local e = gr.describe(s, { ddof = 1 })
    same_bits(e.std, gr.std(s, { ddof = 1 }), "std ddof=1")
  end)

  it("refuses ops with segments, and an unknown or repeated op", function()
    local s = gr.sharded(10, "float32", { devices = { 1, 1 } }):fill(1)
    expect_arg(2, "opts.ops: a sharded buffer's segments are reduced one op per call", gr.reduce, s, { ops = { "sum" }, segment = 5 })
    expect_arg(2, "opts.async: a sharded buffer is reduced synchronously", gr.reduce, s, { ops = { "sum" }, async = true })
    H.expect_error("'sum' is named twice", gr.reduce, s, { ops = { "sum", "sum" } })
    H.expect_error("total", gr.reduce, s, { ops = { "total" } })
  end)
end)

describe("gr.reduce_by_key of sharded keys and values", function()
  --- Every result of reduce_by_key as plain values: a buffer's elements, a table of them for ops.
  local function flat(x)
    if type(x) == "table" and getmetatable(x) == nil then
      local t = {}
      for name, v in pairs(x) do t[name] = flat(v) end
      return t
    end
    return x:totable()
  end

  local function same_tables(got, want, label)
    if type(want) == "table" and want[1] == nil and next(want) ~= nil and type(next(want)) == "string" then
      for name, w in pairs(want) do same_tables(got[name], w, label .. " " .. name) end
      return
    end
    assert.are.equal(#want, #got, label .. ": length")
    for i = 1, #want do same_bits(got[i], want[i], label .. " [" .. i .. "]") end
  end

  it("gives one buffer's keys and results bit for bit, for ops, ops = {...}, sorted and gpu_to_gpu", function()
    for _, devices in ipairs(LAYOUTS) do
      for _, n in ipairs({ 0, 1, 7, 1000, 40001 }) do
        local kt, vt = {}, {}
        for i = 1, n do
          kt[i] = (i * 7919) % 37 - 5
          vt[i] = ((i * 104729) % 255 - 127) / 8
        end
        local sk, k = both(n, "int32", devices, kt)
        local sv, v = both(n, "float32", devices, vt)
        for _, opts in ipairs({ { op = "sum" }, { op = "argmax" }, { op = "mean" }, { op = "count" },
          { ops = { "sum", "min", "max", "std" } }, { op = "sum", determinism = "gpu_to_gpu" } }) do
          local label = string.format("%s n=%d %s", layout_name(devices), n, H.describe_opts(opts))
          local got, want = table.pack(gr.reduce_by_key(sk, sv, opts)), table.pack(gr.reduce_by_key(k, v, opts))
          assert.are.equal(want.n, got.n, label)
          for r = 1, want.n do same_tables(flat(got[r]), flat(want[r]), label .. " result " .. r) end
        end
        table.sort(kt)
        local ss, s = both(n, "int32", devices, kt)
        local got, want = table.pack(gr.reduce_by_key(ss, sv, { op = "sum", sorted = true })),
          table.pack(gr.reduce_by_key(s, v, { op = "sum", sorted = true }))
        for r = 1, want.n do same_tables(got[r]:totable(), want[r]:totable(), "sorted result " .. r) end
      end
    end
  end)

  it("refuses a sharded buffer beside a plain one, and other lengths", function()
    local sk = gr.sharded(10, "int32", { devices = { 1, 1 } }):fill(1)
    local sv = gr.sharded(10, "float32", { devices = { 1, 1 } }):fill(1)
    expect_arg(2, "sharded keys take sharded values", gr.reduce_by_key, sk, gr.buffer(10, "float32"))
    expect_arg(1, "sharded keys take sharded values", gr.reduce_by_key, gr.buffer(10, "int32"), sv)
    expect_arg(2, "values: 9 elements, keys 10", gr.reduce_by_key, sk, gr.sharded(9, "float32", { devices = { 1, 1 } }))
    local keys, sums = gr.reduce_by_key(sk, sv, { op = "sum" })
    assert.are.same({ 1 }, keys:totable())
    assert.are.same({ 10.0 }, sums:totable())
  end)
end)

describe("sharded buffers of the 16-bit, 8-bit float and bool dtypes", function()
  it("reduce as one buffer does: integers, extremes and counts bit for bit, float sums within the bound", function()
    local ops = { "sum", "min", "max", "absmax", "asum", "count", "argmax", "minmax", "mean" }
    for _, devices in ipairs(LAYOUTS) do
      for _, dtype in ipairs({ "float16", "bfloat16", "float8_e4m3", "float8_e5m2", "int16", "uint16", "bool" }) do
        for _, n in ipairs({ 1, 5, 1000, 40001 }) do
          local s, b = both(n, dtype, devices, values(n, dtype, 9))
          for _, op in ipairs(ops) do
            local label = string.format("%s %s n=%d %s", layout_name(devices), dtype, n, op)
            local okw, w1, w2 = pcall(gr.reduce, b, { op = op })
            local okg, g1, g2 = pcall(gr.reduce, s, { op = op })
            assert.are.equal(okw, okg, label .. ": " .. tostring(okw and g1 or w1))
            if okw then
              if math.type(w1) == "float" and (op == "sum" or op == "asum" or op == "mean") then
                -- float32 sums in another order: within 2 n u of the sum of magnitudes (of the mean's sum)
                local mag = gr.reduce(b, { op = "asum" }) / (op == "mean" and n or 1)
                assert(math.abs(g1 - w1) <= 2 * n * 2 ^ -23 * mag, label .. ": " .. g1 .. " against " .. w1)
              else
                same_bits(g1, w1, label)
                if w2 ~= nil then same_bits(g2, w2, label .. " (second)") end
              end
            end
          end
          local label = string.format("%s %s n=%d dot", layout_name(devices), dtype, n)
          local got, want = gr.dot(s, s), gr.dot(b, b)
          if math.type(want) == "float" then       -- float32 sums of other lengths: within the sum's bound
            assert(math.abs(got - want) <= 2 * n * 2 ^ -23 * math.abs(want), label .. ": " .. got .. " against " .. want)
          else
            same_bits(got, want, label)
          end
        end
      end
    end
  end)
end)
