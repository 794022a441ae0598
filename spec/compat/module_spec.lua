-- The module's whole surface on every Lua the module builds for: each function of gr and each method
-- of its types is listed below with the compat spec that calls it and checks its result, and a new
-- export fails here until one does. Then the functions that no other compat spec needs: the backend
-- and its devices, memory and the pool, the testing hooks, the clock, the float formats' conversions,
-- and the communicators (a one-rank one where a GPU and NCCL are there). Lua 5.1 syntax.
local gr = require "gpureduce"
local R = require "compat.reference"

local expect_error = R.expect_error
local GPU = gr.backend() == "cuda"

-- Every exported name, and the spec of spec/compat/ that calls it (module: this file).
local COVERED = {
  functions = {
    absmax = "api", all = "api", ["and"] = "api", any = "api", argmax = "api", argmin = "api", asum = "api",
    backend = "module", bench = "reductions", bench_dot = "reductions", bench_read = "module", buffer = "buffers",
    clock = "reductions", comm = "module", comm_id = "module", copy = "buffers", count = "api",
    debug_comm_combine = "module", debug_events = "module", debug_fault = "module", debug_float_decode = "module",
    debug_float_device = "module", debug_float_encode = "module", describe = "reductions", device = "module",
    devices = "module", dot = "reductions", dtypes = "api", finishes = "reductions", format_plan = "reductions",
    from_dlpack = "buffers", int64 = "int64", kernel = "operators", kernel_compile = "operators",
    kernel_source = "operators", max = "api", mean = "api", memory_limit = "module", min = "api", minmax = "api",
    nanmax = "api", nanmean = "api", nanmin = "api", nansum = "api", nccl_version = "module", norm = "api",
    operator = "operators", ops = "api", ["or"] = "api", plan = "reductions", pool_stats = "module",
    pool_trim = "module", prod = "api", reduce = "api", reduce_by_key = "reductions", reduce_many = "reductions",
    sharded = "sharded", std = "api", stream = "reductions", sum = "api", sumsq = "api", var = "api",
    variant = "reductions", variant_names = "reductions", variants = "reductions", wrap = "buffers",
  },
  ["gpureduce.Buffer"] = {
    astype = "buffers", contiguous = "buffers", device = "buffers", dtype = "buffers", fill = "buffers",
    free = "buffers", get = "buffers", iota = "buffers", narrow = "buffers", ndim = "buffers", permute = "buffers",
    ptr = "buffers", random = "buffers", set = "buffers", shape = "buffers", size = "buffers", slice = "buffers",
    strides = "buffers", to_dlpack = "buffers", tobytes = "buffers", totable = "buffers", transpose = "buffers",
    view = "buffers", where = "buffers",
  },
  ["gpureduce.Stream"] = { free = "reductions", sync = "reductions" },
  ["gpureduce.Pending"] = { free = "reductions", ready = "reductions", wait = "reductions" },
  ["gpureduce.Operator"] = { free = "operators", info = "operators", source = "operators" },
  ["gpureduce.Comm"] = { _bench_raw = "module", _oneshot = "module", allreduce = "module", barrier = "module", destroy = "module",
    device = "module", handle = "module", rank = "module", reduce = "module", size = "module" },
  ["gpureduce.Sharded"] = { devices = "sharded", dtype = "sharded", fill = "sharded", free = "sharded",
    get = "sharded", iota = "sharded", random = "sharded", set = "sharded", shards = "sharded", size = "sharded",
    slice = "sharded", tobytes = "sharded", totable = "sharded", where = "sharded", ndim = "sharded",
    shape = "sharded", strides = "sharded", view = "sharded" },
}

--- The method names of a type's metatable: its __index table, or the table an __index function keeps
-- as its second upvalue (visible where debug.getupvalue reads C functions: 5.2 and later, LuaJIT);
-- nil where it cannot be read.
local function methods_of(type_name)
  local mt = debug.getregistry()[type_name]
  local index = mt and mt.__index
  if type(index) == "function" then index = select(2, debug.getupvalue(index, 2)) end
  if type(index) ~= "table" then return nil end
  local names = {}
  for name in pairs(index) do names[#names + 1] = name end
  table.sort(names)
  return names
end

describe("compat: the module's surface", function()
  it("every function of gr is called by a compat spec", function()
    local missing = {}
    for name, value in pairs(gr) do
      if type(value) == "function" and not COVERED.functions[name] then missing[#missing + 1] = name end
    end
    table.sort(missing)
    assert.same({}, missing, "exported but checked by no compat spec")
    for name in pairs(COVERED.functions) do assert.equal("function", type(gr[name]), name) end
    assert.matches("^%d+%.%d+%.%d+", gr.version)
  end)

  it("every method of the module's types is called by a compat spec", function()
    local read = 0
    for type_name, covered in pairs(COVERED) do
      if type_name ~= "functions" then
        local names = methods_of(type_name)
        if names then
          read = read + 1
          local listed = {}
          for name in pairs(covered) do listed[#listed + 1] = name end
          table.sort(listed)
          assert.same(listed, names, type_name)
        end
      end
    end
    -- Lua 5.1's debug library cannot read a C function's upvalues: Buffer's and Operator's methods
    -- are read on LuaJIT and 5.3 and later
    assert.is_true(read >= 4, "method tables read: " .. read)
  end)
end)

describe("compat: backend, devices, memory and hooks", function()
  it("backend, device and devices", function()
    assert.is_true(gr.backend() == "cpu" or gr.backend() == "cuda")
    local list = gr.devices()
    assert.is_true(#list >= 1)
    assert.equal(1, list[1].index)
    if GPU then
      local d = gr.device()
      assert.equal("string", type(d.name))
      assert.is_true(d.sms > 0 and d.memory > 0)
      assert.matches("^%d+%.%d+$", d.cc)
    else
      assert.is_nil(gr.device())
      assert.equal(1, #list)
      assert.same({ index = 1, name = "cpu", backend = "cpu", default = true },
        { index = list[1].index, name = list[1].name, backend = list[1].backend, default = list[1].default })
    end
    expect_error("opts.device: 9 is out of range", gr.buffer, 4, "float32", { device = 9 })
  end)

  it("pool_stats, pool_trim and memory_limit", function()
    local s = gr.pool_stats()
    for _, k in ipairs({ "device_allocs", "host_allocs", "slots", "live_device_bytes", "live_pinned_bytes",
      "live_allocations", "buffer_cached_bytes", "buffer_idle_bytes", "buffer_used_bytes", "buffer_hits",
      "buffer_misses" }) do
      assert.equal("number", type(s[k]), k)
    end
    assert.equal("boolean", type(s.buffer_pool))
    collectgarbage()
    collectgarbage("stop")          -- (a new buffer steps the collector, which may free other garbage)
    gr.pool_trim()                  -- (idle scratch given back, and frees queued on a device done)
    local before = gr.pool_stats().live_allocations
    local b = gr.buffer(1000, "float64")
    local during = gr.pool_stats().live_allocations
    b:free()
    gr.pool_trim()
    local after = gr.pool_stats().live_allocations
    collectgarbage("restart")
    assert.equal(before + 1, during)
    assert.equal(before, after)
    gr.memory_limit(4096)
    local ok, err = pcall(gr.buffer, 100000, "float64")
    gr.memory_limit(0)
    assert.is_false(ok)
    assert.matches("over the context's memory limit of 4096 bytes", err, 1, true)
    assert.equal(100000, #gr.buffer(100000, "float64"))
    expect_error("bytes: expected an integer", gr.memory_limit)
  end)

  it("debug_events counts, debug_fault makes the k-th event fail until disarmed", function()
    local n = gr.debug_events().alloc
    gr.buffer(10, "int32")
    assert.is_true(gr.debug_events().alloc > n)
    assert.equal("number", type(gr.debug_events().launch))
    assert.equal("number", type(gr.debug_events().copy))
    gr.debug_fault("alloc", 1)
    local ok, err = pcall(gr.buffer, 10, "int32")
    local again = pcall(gr.buffer, 10, "int32")          -- every later one fails too
    gr.debug_fault("alloc", 0)
    assert.is_false(ok)
    assert.is_false(again)
    assert.matches("injected fault", err, 1, true)
    assert.equal(10, #gr.buffer(10, "int32"))
    expect_error("kind: unknown fault 'alocc' (accepted: alloc, launch, copy)", gr.debug_fault, "alocc", 1)
  end)

  it("debug_float_encode and _decode: the formats' rounding, against the reference", function()
    for _, fmt in ipairs({ "float16", "bfloat16", "float8_e4m3", "float8_e5m2" }) do
      for _, x in ipairs({ 0, 1, -1.5, 1 / 3, 0.1, 100.7, 2 ^ -20, 448 }) do
        local want = R.round_float(fmt, x)
        local bits = gr.debug_float_encode(fmt, x)
        assert.equal(want, gr.debug_float_decode(fmt, bits), fmt .. " " .. x)
        assert.equal(gr.buffer({ x }, fmt):tobytes(), gr.buffer({ want }, fmt):tobytes(), fmt .. " " .. x)
      end
    end
    assert.equal(0x3c00, gr.debug_float_encode("float16", 1))
    assert.equal(-2, gr.debug_float_decode("float16", 0xc000))
    expect_error("65520.0 does not fit in float16", gr.debug_float_encode, "float16", 65520)
    local xs = gr.buffer({ 1.5, 1 / 3 }, "float64")
    if GPU then
      local out = gr.buffer(8, "uint64")
      gr.debug_float_device("float16", xs, out)
      assert.equal(gr.debug_float_encode("float16", 1.5), out[1])        -- ours, from the double
      assert.equal(out[1], out[2])                                        -- CUDA's, from the double
    else
      expect_error("needs a device buffer on a CUDA device", gr.debug_float_device, "float16", xs,
        gr.buffer(8, "uint64"))
    end
  end)

  it("bench_read: the read ceiling on a GPU, an error on the cpu backend", function()
    local b = gr.buffer(4096, "float32")
    if GPU then
      local r = gr.bench_read(b, { reps = 2, warmup = 1 })
      assert.equal(2, r.reps)
      assert.equal(16384, r.bytes)
      assert.is_true(r.gbps > 0)
    else
      expect_error("bench_read: needs a CUDA device", gr.bench_read, b)
    end
  end)
end)

describe("compat: communicators", function()
  local version = gr.nccl_version()
  local has_nccl = GPU and version ~= nil

  it("nccl_version is a number or nil; without a GPU and NCCL, comm and comm_id say so", function()
    assert.is_true(version == nil or (type(version) == "number" and version > 0))
    expect_error("opts: rank, size and id are required", gr.comm, { rank = 0, size = 1 })
    expect_error("unknown option 'ranks'", gr.comm, { ranks = 2 })
    if not GPU then
      expect_error("communicators need NCCL and a CUDA device (backend is cpu)", gr.comm_id)
      expect_error("communicators need NCCL and a CUDA device (backend is cpu)", gr.comm,
        { rank = 0, size = 1, id = "/nonexistent/compat.id" })
    end
  end)

  it("debug_comm_combine merges the ranks' parts of a gathered op as c:reduce does, on every backend", function()
    local parts = { gr.buffer({ 5, -3 }, "int32"), gr.buffer({ 8, 1 }, "int32") }
    assert.equal(2.75, gr.debug_comm_combine(parts, { op = "mean" }))
    assert.equal(17.1875, gr.debug_comm_combine(parts, { op = "var" }))   -- exact sums of int32
    local value, index = gr.debug_comm_combine(parts, { op = "argmax" })
    assert.equal(8, value)
    assert.equal(3, index)                                 -- counted in the parts in order
    expect_error("'sum' is combined by NCCL's all-reduce", gr.debug_comm_combine, parts, { op = "sum" })
  end)

  it("a one-rank communicator: every method #gpu", function()
    if not has_nccl then
      pending("gpu: needs a CUDA device and NCCL")
      return
    end
    local c = gr.comm { rank = 0, size = 1, id = gr.comm_id(), timeout = 20 }
    assert.equal(0, c:rank())
    assert.equal(1, c:size())
    assert.equal(1, c:device())
    assert.equal("userdata", type(c:handle()))
    assert.equal("gpureduce.Comm(rank 0 of 1, device 1)", tostring(c))
    local list = { 5, -3, 8, 1 }
    local b = gr.buffer(list, "int32")
    assert.equal(b, c:allreduce(b, "sum"))               -- one rank: the buffer as it was
    assert.same(list, b:totable())
    assert.equal(R.ops.sum(list), c:reduce(b))
    assert.equal(-3, c:reduce(b, { op = "min" }))
    assert.equal(2.75, c:reduce(b, { op = "mean" }))      -- gathered: each rank's accumulator
    local value, index = c:reduce(b, { op = "argmax" })
    assert.equal(8, value)
    assert.equal(3, index)
    assert.is_nil(c:barrier())
    assert.is_true(c:_bench_raw(b, "sum", 2) >= 0)
    c:destroy()
    assert.equal("gpureduce.Comm(destroyed)", tostring(c))
    expect_error("communicator has been destroyed", c.barrier, c)
  end)
end)
