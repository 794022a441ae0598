-- User operators and user kernels on every Lua the module builds for (docs/api.md, "User operators",
-- "The cpu functions", "User kernels"). The operators run through their cpu functions here: on the cpu
-- backend every buffer, on a GPU machine host buffers. Every result is checked against
-- compat/reference.lua. Lua 5.1 syntax, as api_spec.lua.
local gr = require "gpureduce"
local R = require "compat.reference"

local expect_error = R.expect_error

-- where the cpu functions run: every buffer on the cpu backend, host buffers on a GPU machine
local WHERE = gr.backend() == "cuda" and "host" or "device"
local INT64 = math.type ~= nil              -- 5.3 and later: Lua integers hold every int64

local function buffer(list, dtype) return gr.buffer(list, dtype, { where = WHERE }) end

local function add(a, b) return a + b end

--- sqrt(sum of squares), in float64, with its cpu functions.
local function l2(name)
  return gr.operator { name = name or "compat_l2", map = "x * x", reduce = "a + b", post = "sqrt(a)", identity = "0",
    acc = "float64",
    cpu = { map = function(x) return x * x end, reduce = add, post = function(a) return math.sqrt(a) end } }
end

local LIST = { 3, -4, 12, 0.5, -2, 7 }

describe("compat: user operators with cpu functions", function()
  it("name, info, source, tostring and free", function()
    local op = l2()
    assert.equal("compat_l2", op.name)
    local info = op:info()
    assert.equal("compat_l2", info.name)
    assert.equal("float64", info.acc)
    assert.is_true(info.has_cpu)
    assert.is_false(info.indexed)
    assert.equal("float", info.result)
    assert.equal("x * x", info.expressions.map)
    assert.equal("sqrt(a)", info.expressions.post)
    assert.is_true(info.origin == "none" or info.origin == "nvrtc" or info.origin == "disk" or info.origin == "memory",
      info.origin)
    local src = op:source("int8")
    assert.equal("string", type(src))
    assert.truthy(src:find("x * x", 1, true))
    assert.equal("gpureduce.Operator(compat_l2: map x * x, reduce a + b, acc float64)", tostring(op))
    op:free()
    assert.equal("gpureduce.Operator(freed)", tostring(op))
    expect_error("operator has been freed", op.info, op)
  end)

  it("a whole buffer, segments, reduce_many and reduce_by_key, against the reference", function()
    local op = l2()
    local b = buffer(LIST, "float64")
    local function norm(list) return math.sqrt(R.ops.sumsq(list)) end
    assert.equal(norm(LIST), gr.reduce(b, { op = op }))
    local segs = gr.reduce(b, { op = op, segment = 2 })
    assert.equal("float64", segs:dtype())                     -- post's value, as float64
    for k, seg in ipairs(R.segments(LIST, { 0, 2, 4, 6 })) do assert.equal(norm(seg), segs[k]) end
    local offs = gr.reduce(b, { op = op, offsets = buffer({ 0, 0, 6 }, "int64") }):totable()
    assert.same({ 0, norm(LIST) }, offs)                      -- an empty segment: post of the identity
    local many = gr.reduce_many({ buffer({ 3, 4 }, "float64"), buffer({ 5, 12 }, "int32") }, { op = op })
    assert.same({ 5, 13 }, many)
    local keys = { 2, 1, 2, 1, 3, 2 }
    local ks, vs = gr.reduce_by_key(buffer(keys, "int32"), b, { op = op })
    local order, groups = R.by_key(keys, LIST)
    assert.same(order, ks:totable())
    for k, g in ipairs(groups) do assert.equal(norm(g.values), vs[k]) end
    assert.equal(0, gr.reduce(buffer({}, "float32"), { op = op }))   -- post(identity) of nothing
  end)

  it("accumulators of a dtype wrap and round as the kernels do; an index reaches map", function()
    local i8 = gr.operator { name = "compat_i8", map = "x", reduce = "a + b", identity = "0", acc = "int8",
      cpu = { map = function(x) return x end, reduce = add } }
    assert.equal(44, gr.reduce(buffer({ 100, 100, 100 }, "int32"), { op = i8 }))        -- 300 wraps to 44
    local f32 = gr.operator { name = "compat_f32", map = "x", reduce = "a + b", identity = "0", acc = "float32",
      cpu = { map = function(x) return x end, reduce = add } }
    assert.equal(2 ^ 24, gr.reduce(buffer({ 2 ^ 24, 1, 1 }, "float64"), { op = f32 }))  -- rounded each step
    local at = gr.operator { name = "compat_at", map = "x * i", reduce = "a + b", identity = "0", acc = "float64",
      cpu = { map = function(x, i) return x * i end, reduce = add } }
    assert.is_true(at:info().indexed)
    local want = 0
    for i = 1, #LIST do want = want + LIST[i] * (i - 1) end
    assert.equal(want, gr.reduce(buffer(LIST, "float64"), { op = at }))
  end)

  it("a struct accumulator: Lua tables, cpu.identity a function", function()
    local mean = gr.operator { name = "compat_mean", acc = "M", preamble = "struct M { double s; double n; };",
      map = "{x, 1}", reduce = "{a.s + b.s, a.n + b.n}", identity = "{0, 0}", post = "a.s / a.n",
      cpu = { map = function(x) return { s = x, n = 1 } end,
              reduce = function(a, b) return { s = a.s + b.s, n = a.n + b.n } end,
              post = function(a) return a.s / a.n end,
              identity = function() return { s = 0, n = 0 } end } }
    assert.equal(R.ops.mean(LIST), gr.reduce(buffer(LIST, "float64"), { op = mean }))
    expect_error("cpu.identity", gr.operator, { name = "compat_noid", acc = "M", preamble = "struct M { double s; };",
      map = "{x}", reduce = "{a.s + b.s}", identity = "{0}", post = "a.s",
      cpu = { map = function(x) return { s = x } end, reduce = function(a, b) return { s = a.s + b.s } end,
              post = function(a) return a.s end } })
  end)

  it("several inputs: map sees element k of each, then the index", function()
    local wsum = gr.operator { name = "compat_wsum", inputs = { "x", "w" }, map = "x * w", reduce = "a + b",
      identity = "0", acc = "float64", cpu = { map = function(x, w) return x * w end, reduce = add } }
    local x, w = { 1, 2, 3, 4 }, { 4, 0, 1, -1 }
    assert.equal(R.dot(x, w), gr.reduce({ buffer(x, "float32"), buffer(w, "int8") }, { op = wsum }))
    assert.same({ 4, -1 }, gr.reduce({ buffer(x, "float32"), buffer(w, "int8") }, { op = wsum, segment = 2 }):totable())
    expect_error("operator compat_wsum reads 2 inputs: give a list of 2 buffers (got 1)", gr.reduce,
      { buffer(x, "float32") }, { op = wsum })
  end)

  it("an int64 accumulator: 64-bit wrapping sums; on 5.1 a value beyond 2^53 is a clear error", function()
    local i64 = gr.operator { name = "compat_i64", map = "x", reduce = "a + b", identity = "0", acc = "int64",
      cpu = { map = function(x) return x end, reduce = add } }
    assert.equal(6, gr.reduce(buffer({ 1, 2, 3 }, "int32"), { op = i64 }))
    if INT64 then
      assert.equal(-2 ^ 63, gr.reduce(buffer({ 2 ^ 62, 2 ^ 62 }, "int64"), { op = i64 }))    -- wraps
    else
      -- an element of 2^63 - 1 cannot reach cpu.map as a number of 5.1: the call fails naming the
      -- function and gr.int64 (not an error thrown through the engine), and the state stays usable
      local big = buffer({ 0, 0 }, "int64")
      big:set(string.rep("\255", 7) .. "\127" .. string.rep("\0", 8))             -- 2^63 - 1, 0
      expect_error("the operator's cpu.map cannot be given a value: gpureduce: the int64 value "
        .. "9223372036854775807 is beyond 2^53", gr.reduce, big, { op = i64 })
      assert.equal(6, gr.reduce(buffer({ 1, 2, 3 }, "int32"), { op = i64 }))
    end
  end)

  it("errors name the field or the function and what it gave", function()
    expect_error("unknown field 'mapp' (accepted: acc, cpu, identity, inputs, map, name, post, preamble, reduce)",
      gr.operator, { name = "x", mapp = "x" })
    expect_error("map: expected a string (a C expression), got number", gr.operator,
      { name = "x", map = 1, reduce = "a + b", identity = "0", acc = "float64" })
    local nocpu = gr.operator { name = "compat_nocpu", map = "x", reduce = "a + b", identity = "0", acc = "float64" }
    assert.is_false(nocpu:info().has_cpu)
    expect_error("operator compat_nocpu has no cpu functions", gr.reduce, buffer({ 1 }, "float64"), { op = nocpu })
    local picky = gr.operator { name = "compat_picky", map = "x", reduce = "a + b", identity = "0", acc = "float64",
      cpu = { map = function(x)
                if x == 7 then error("seven is refused") end
                if x == 8 then return "eight" end
                return x
              end, reduce = add } }
    expect_error("the operator's cpu.map failed: ", gr.reduce, buffer({ 1, 7 }, "float64"), { op = picky })
    expect_error("seven is refused", gr.reduce, buffer({ 1, 7 }, "float64"), { op = picky })
    expect_error("the operator's cpu.map returned a string, not a number (its accumulator is float64)", gr.reduce,
      buffer({ 8 }, "float64"), { op = picky })
    expect_error("opts.acc", gr.reduce, buffer({ 1 }, "float64"), { op = picky, acc = "float32" })
    expect_error("gpu_to_gpu", gr.reduce, buffer({ 1 }, "float64"), { op = picky, determinism = "gpu_to_gpu" })
  end)
end)

describe("compat: user kernels", function()
  local SOURCE = "template <class Op, class In>\n" ..
    "__device__ typename Op::acc_t compat_k(const In *in, size_t n, unsigned long long first) {\n" ..
    "    return gr::block_reduce<Op>(gr::thread_accumulate<Op, In, 2>(in, n, first));\n" ..
    "}\n"
  local entry = gr.kernel { name = "compat_k", source = SOURCE, block = { min = 64, max = 512 } }
  local has_nvrtc = pcall(gr.kernel_compile, "compat_k", {})

  it("gr.kernel registers a variant; the same table again is the same entry", function()
    assert.equal("compat_k", entry.name)
    assert.is_true(entry.user)
    assert.is_true(entry.ordinal >= 100)
    assert.equal("single", entry.default_finish)
    assert.same({ min = 64, max = 512, default = 256 }, entry.block)
    assert.equal(gr.backend() == "cuda", entry.available)
    assert.same(entry, gr.variant("compat_k"))
    assert.equal(entry.ordinal, gr.kernel({ name = "compat_k", source = SOURCE, block = { min = 64, max = 512 } }).ordinal)
    expect_error("'compat_k' is registered already, with another definition", gr.kernel,
      { name = "compat_k", source = SOURCE })
    expect_error("source: does not define the entry point other", gr.kernel, { name = "other", source = SOURCE })
  end)

  it("kernel_source and kernel_compile: the generated source, and what the compile found", function()
    local src = gr.kernel_source("compat_k", { op = "max", dtype = "int32" })
    assert.truthy(src:find("compat_k", 1, true))
    expect_error("is not a user kernel", gr.kernel_source, "warp_shuffle", {})
    if has_nvrtc then
      local info = gr.kernel_compile("compat_k", { op = "sum", dtype = "float32" })
      assert.is_true(info.origin == "nvrtc" or info.origin == "disk" or info.origin == "memory", info.origin)
      assert.is_true(info.image_bytes > 0)
    end
  end)

  it("reduces where there is a CUDA device, and says so where there is none", function()
    local b = gr.buffer({ 4, -1, 9, 2 }, "int32")
    if gr.backend() == "cuda" and has_nvrtc then
      assert.equal(14, gr.sum(b, { variant = "compat_k" }))
      assert.equal(9, gr.max(b, { variant = "compat_k", finish = "device", block = 128 }))
    else
      expect_error("opts.variant: 'compat_k' needs a CUDA device (backend is cpu)", gr.sum, b, { variant = "compat_k" })
    end
  end)
end)
