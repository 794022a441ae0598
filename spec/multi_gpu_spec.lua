-- Several devices: gr.devices, buffers on device k, gr.sharded, gr.comm (NCCL).
-- Runs everywhere: on the cpu backend device 1 is the host and sharded buffers over {1, 1, ...} work;
-- GPU tests need one device (#gpu), multi-device tests two (#multi, pending with fewer).
local gr = require "gpureduce"
local H = require("support.helpers").bind(it, function(reason) pending(reason) end)
local L = require "support.lab_script"

local ndev = #gr.devices()
local INTS = { "int8", "uint8", "int32", "uint32", "int64", "uint64" }

--- An `it` that needs two devices; pending (never passed) with fewer.
local function multi_it(title, fn)
  H.gpu_it(title .. " #multi", function()
    if ndev < 2 then
      pending("multi: " .. ndev .. " device(s), 2 needed")
      return
    end
    fn()
  end)
end

--- Both values of every op of gr.ops() over a buffer or a sharded buffer (errors as values).
local function all_ops(x)
  local out = {}
  for _, op in ipairs(gr.ops()) do
    local r = table.pack(pcall(gr.reduce, x, { op = op }))
    out[op] = r
  end
  return out
end

--- Asserts that a sharded buffer gives a plain buffer's results: bit for bit for integer results and
-- min/max/argmin/argmax/minmax/count, within the float tolerance for the sums of floats.
local function assert_same_results(s, b, dtype)
  local got, want = all_ops(s), all_ops(b)
  local exact_ops = { min = true, max = true, argmin = true, argmax = true, minmax = true, count = true,
    nanmin = true, nanmax = true, ["and"] = true, ["or"] = true }
  for _, op in ipairs(gr.ops()) do
    local g, w = got[op], want[op]
    assert.are.equal(w[1], g[1], op .. ": raised " .. tostring(g[2]) .. " / " .. tostring(w[2]))
    for i = 2, w.n do
      if math.type(w[i]) == "float" and not exact_ops[op] and w[i] ~= g[i] then
        H.assert_close(g[i], w[i], 1e-5, dtype .. " " .. op)
      else
        assert.are.equal(w[i], g[i], dtype .. " " .. op .. " value " .. (i - 1))
      end
    end
  end
end

describe("devices", function()
  it("are listed from 1, the default one marked; on the cpu backend the host is device 1", function()
    local list = gr.devices()
    assert.is_true(#list >= 1)
    local defaults = 0
    for k, d in ipairs(list) do
      assert.are.equal(k, d.index)
      assert.is_string(d.name)
      if d.default then defaults = defaults + 1 end
    end
    assert.are.equal(1, defaults)
    if gr.backend() == "cpu" then
      assert.are.same({ index = 1, name = "cpu", backend = "cpu", default = true }, list[1])
    end
  end)

  it("take a buffer's device from opts.device and say it with b:device()", function()
    local default = 1
    for _, d in ipairs(gr.devices()) do if d.default then default = d.index end end
    assert.are.equal(default, gr.buffer(4):device())
    assert.are.equal(1, gr.buffer(4, "int32", { device = 1 }):device())
    assert.are.equal(1, gr.buffer(4, "int32", { device = 1 }):slice(2, 2):device())
  end)

  it("refuse a device out of range, naming opts.device and the range", function()
    H.expect_error("opts.device: " .. (ndev + 1) .. " is out of range (devices: 1 to " .. ndev,
      gr.buffer, 4, "float32", { device = ndev + 1 })
    H.expect_error("opts.device: must be 1 to", gr.buffer, 4, "float32", { device = 0 })
  end)

  it("offer iota and random at an offset: a piece of a larger buffer gets its indices' values", function()
    for _, dtype in ipairs({ "float32", "float64", "int32", "uint64" }) do
      local whole = gr.buffer(100, dtype):random(5, 0, 90)
      local piece = gr.buffer(30, dtype):random(5, 0, 90, 41)
      assert.are.equal(whole:tobytes(41, 30), piece:tobytes(), dtype .. " random")
      whole:iota(3, 2)
      piece:iota(3, 2, 41)
      assert.are.equal(whole:tobytes(41, 30), piece:tobytes(), dtype .. " iota")
    end
    H.expect_error("at must be >= 1 (got 0)", gr.buffer(4).random, gr.buffer(4), 1, 0, 1, 0)
  end)
end)

describe("sharded buffers", function()
  it("split n into contiguous, balanced shards on the devices asked for", function()
    local s = gr.sharded(10, "int32", { devices = { 1, 1, 1 } })
    assert.are.equal(10, #s)
    assert.are.equal("int32", s:dtype())
    local shards = s:shards()
    assert.are.same({ 4, 3, 3 }, { shards[1].size, shards[2].size, shards[3].size })
    assert.are.same({ 1, 5, 8 }, { shards[1].offset, shards[2].offset, shards[3].offset })
    assert.are.same({ 1, 1, 1 }, s:devices())
    local tiny = gr.sharded(1, "float32", { devices = { 1, 1, 1 } }):fill(2.5)
    assert.are.same({ 1, 0, 0 }, { tiny:shards()[1].size, tiny:shards()[2].size, tiny:shards()[3].size })
    assert.are.equal(2.5, gr.sum(tiny))
    assert.are.equal(2.5, gr.max(tiny))
  end)

  it("hold what one buffer holds for the same seed, iota and fill, and read and write across shards", function()
    for _, dtype in ipairs({ "float32", "float64", "int8", "uint32", "int64" }) do
      local s = gr.sharded(1001, dtype, { devices = { 1, 1, 1 } }):random(11)
      local b = gr.buffer(1001, dtype):random(11)
      assert.are.equal(b:tobytes(), s:tobytes(), dtype .. " random")
      s:iota(5, 3)
      b:iota(5, 3)
      assert.are.same(b:totable(), s:totable(), dtype .. " iota")
      assert.are.same(b:totable(330, 20), s:totable(330, 20), dtype .. " totable across a border")
      s:set({ 1, 2, 3, 4, 5 }, 333)
      b:set({ 1, 2, 3, 4, 5 }, 333)
      s[668] = 7
      b[668] = 7
      assert.are.equal(b:tobytes(), s:tobytes(), dtype .. " set")
      assert.are.equal(b[334], s[334])
      assert.are.equal(b:get(668), s:get(668))
      s:set(b:tobytes(1, 10), 330)
      b:set(b:tobytes(1, 10), 330)
      assert.are.equal(b:tobytes(), s:tobytes(), dtype .. " set from bytes")
    end
  end)

  it("slice to a plain buffer inside one shard, to a sharded view across shards", function()
    local s = gr.sharded(12, "int32", { devices = { 1, 1, 1 } }):iota(1)
    local inside = s:slice(2, 3)
    assert.matches("^gpureduce.Buffer", tostring(inside))
    assert.are.same({ 2, 3, 4 }, inside:totable())
    local across = s:slice(3, 6)
    assert.matches("^gpureduce.Sharded", tostring(across))
    assert.are.same({ 3, 4, 5, 6, 7, 8 }, across:totable())
    assert.are.equal(33, gr.sum(across))
    assert.are.equal(6, select(2, gr.argmax(across)))
  end)

  it("reduce to one buffer's results for every op and dtype (shards of every size, an empty one too)", function()
    for _, dtype in ipairs({ "float32", "float64", "int32", "uint8", "int64" }) do
      for _, devices in ipairs({ { 1 }, { 1, 1 }, { 1, 1, 1, 1, 1 } }) do
        local n = #devices == 5 and 3 or 4099
        local s = gr.sharded(n, dtype, { devices = devices })
        local b = gr.buffer(n, dtype)
        local lo, hi = H.is_float(dtype) and -5 or 0, H.is_float(dtype) and 5 or 100
        s:random(3, lo, hi)
        b:random(3, lo, hi)
        assert_same_results(s, b, dtype)
      end
    end
  end)

  it("keep empty reductions' rules: the identity, or the error of min/max", function()
    local s = gr.sharded(0, "float32", { devices = { 1, 1 } })
    assert.are.equal(0, gr.sum(s))
    H.expect_error("min of an empty buffer is undefined", gr.min, s)
  end)

  it("refuse what they do not take, naming it (more in sharded_reduce_spec.lua)", function()
    local s = gr.sharded(100, "float32", { devices = { 1, 1 } })
    H.expect_error("opts.async: a sharded buffer is reduced synchronously", gr.sum, s, { async = true })
    H.expect_error("opts.finish: each shard is finished in one kernel", gr.sum, s, { finish = "host" })
    H.expect_error("opts.devices[2]: " .. (ndev + 1) .. " is not a device (devices: 1 to " .. ndev,
      gr.sharded, 4, "float32", { devices = { 1, ndev + 1 } })
    H.expect_error("opts.devices: expected a non-empty list", gr.sharded, 4, "float32", { devices = {} })
    H.expect_error("opts.copies: unknown option (accepted: devices)", gr.sharded, 4, "float32", { copies = 2 })
    H.expect_error("size: expected an integer >= 0", gr.sharded, -1)
    H.expect_error("index 101 out of range (1..100)", s.get, s, 101)
    s:free()
    H.expect_error("the sharded buffer has been freed", s.fill, s, 1)
    H.expect_error("sharded buffer has been freed", gr.sum, s)
  end)
end)

describe("communicators", function()
  it("check their table before anything else", function()
    H.expect_error("opts.rank: must be 0 to 1 for a size of 2 (got 2)", gr.comm, { rank = 2, size = 2, id = "x" })
    H.expect_error("opts: rank, size and id are required", gr.comm, { rank = 0, size = 1 })
    H.expect_error("opts.timeout: expected a positive number of seconds", gr.comm,
      { rank = 0, size = 1, id = "x", timeout = 0 })
    H.expect_error("unknown option 'ranks'", gr.comm, { ranks = 2 })
  end)

  it("say why NCCL cannot be used: the cpu backend, or where it looked", function()
    if gr.backend() == "cpu" then
      H.expect_error("communicators need NCCL and a CUDA device (backend is cpu)", gr.comm_id)
    end
    local ok, _, out = H.run_lua([[
      local gr = require "gpureduce"
      print(gr.nccl_version())
      print(select(2, pcall(gr.comm_id)))
    ]], "GPUREDUCE_NCCL=/nonexistent/libnccl.so.2")
    assert(ok, out)
    assert.matches("^nil\n", out)
    if gr.backend() == "cuda" then assert.matches("no NCCL at GPUREDUCE_NCCL=/nonexistent/libnccl.so.2", out) end
  end)
end)

describe("one GPU", function()
  H.gpu_it("reduces a buffer made with {device = 1} as the default buffer", function()
    local a = gr.buffer(100003, "float32", { device = 1 }):random(4)
    local b = gr.buffer(100003, "float32"):random(4)
    assert.are.equal(gr.sum(b), gr.sum(a))
    assert.are.equal(gr.max(b), gr.max(a))
  end)

  H.gpu_it("runs a one-rank communicator: allreduce leaves the buffer, reduce is the local value", function()
    local c = gr.comm { rank = 0, size = 1, id = gr.comm_id(), timeout = 20 }
    assert.are.equal(0, c:rank())
    assert.are.equal(1, c:size())
    local b = gr.buffer(4097, "int32"):random(2, -50, 50)
    local before = b:tobytes()
    assert.are.equal(b, c:allreduce(b, "sum"))
    assert.are.equal(before, b:tobytes())
    for _, op in ipairs({ "prod", "min", "max" }) do c:allreduce(b, op) end
    assert.are.equal(before, b:tobytes())
    assert.are.equal(gr.sum(b), c:reduce(b))
    assert.are.equal(gr.min(b), c:reduce(b, { op = "min" }))
    local f = gr.buffer(1000, "float64"):random(1)
    assert.are.equal(gr.sum(f), c:reduce(f, { op = "sum" }))
    c:barrier()
    assert.are.equal(gr.mean(b), c:reduce(b, { op = "mean" }))     -- gathered parts (comm_parts.c), one rank's
    H.expect_error("invalid option 'mean'", c.allreduce, c, b, "mean")
    H.expect_error("the buffer is host memory", c.allreduce, c, gr.buffer(4, "float32", { where = "host" }))
    c:destroy()
    H.expect_error("communicator has been destroyed", c.allreduce, c, b)
    H.expect_error("communicator has been destroyed", c.barrier, c)
  end)

  H.gpu_it("exchanges the id through a file (rank 0 removes it once every rank has joined)", function()
    local path = os.tmpname()
    os.remove(path)
    local c = gr.comm { rank = 0, size = 1, id = path, timeout = 20 }
    assert.is_nil(io.open(path))
    c:destroy()
  end)

  H.gpu_it("ends with a clear error, not a hang, when the other rank never joins", function()
    local path = os.tmpname()
    os.remove(path)
    local t0 = gr.clock()
    H.expect_error("rank 0 of 2: the other rank never joined within 2 s", gr.comm,
      { rank = 0, size = 2, id = path, timeout = 2 })
    assert.is_true(gr.clock() - t0 < 30)
    os.remove(path)
    H.expect_error("rank 1: rank 0 did not write the id file", gr.comm,
      { rank = 1, size = 2, id = path, timeout = 0.5 })
  end)
end)

describe("several GPUs", function()
  multi_it("put buffers on device 2, reduce them there, copy between devices", function()
    local a = gr.buffer(1000003, "float32", { device = 2 }):random(8)
    local b = gr.buffer(1000003, "float32", { device = 1 }):random(8)
    assert.are.equal(2, a:device())
    assert.are.equal(2, a:slice(5, 10):device())
    assert.are.equal(b:tobytes(), a:tobytes())
    local same_model = gr.devices()[1].name == gr.devices()[2].name and gr.devices()[1].sms == gr.devices()[2].sms
    for _, op in ipairs({ "sum", "min", "max", "mean", "argmax" }) do
      local ga, wa = table.pack(gr.reduce(a, { op = op })), table.pack(gr.reduce(b, { op = op }))
      if same_model or op ~= "sum" and op ~= "mean" then assert.are.same(wa, ga, op)
      else H.assert_close(ga[1], wa[1], 1e-5, op) end
    end
    local i = gr.buffer(100000, "int64", { device = 2 }):random(3, -1000, 1000)
    local j = gr.buffer(100000, "int64", { device = 1 }):random(3, -1000, 1000)
    assert.are.equal(gr.sum(j), gr.sum(i))
    local back = gr.buffer(1000003, "float32", { device = 1 })
    gr.copy(back, a)
    assert.are.equal(a:tobytes(), back:tobytes())
    local p = gr.sum(a, { async = true })
    assert.are.equal(gr.sum(a), p:wait())
  end)

  multi_it("run user operators and user kernels on a buffer of device 2 (their kernels loaded there)", function()
    local op = gr.operator { name = "dev2sum", map = "x", reduce = "a + b", identity = "0", acc = "int64" }
    local mean = gr.operator {
      name = "dev2mean", preamble = "struct M2 { double s; unsigned long long n; };",
      map = "M2{double(x), 1ull}", reduce = "M2{a.s + b.s, a.n + b.n}", identity = "M2{0.0, 0ull}",
      post = "a.n ? a.s / double(a.n) : 0.0", acc = "M2" }
    local a = gr.buffer(1000003, "int32", { device = 2 }):random(5, -1000, 1000)
    local b = gr.buffer(1000003, "int32", { device = 1 }):random(5, -1000, 1000)
    local want = gr.sum(b)
    assert.are.equal(want, gr.reduce(a, { op = op }))
    assert.are.equal(want, gr.reduce(b, { op = op }), "device 1 after device 2")
    assert.are.equal(want, gr.reduce(a, { op = op, async = true }):wait(), "async")
    assert.are.equal(gr.reduce(b, { op = mean }), gr.reduce(a, { op = mean }), "a struct accumulator")
    local seg_a = gr.reduce(a, { op = op, segment = 1000003 })
    assert.are.equal(2, seg_a:device())
    assert.are.equal(want, seg_a:totable()[1], "segments")
    assert.are.same({ want, want }, gr.reduce_many({ a, a }, { op = op }), "reduce_many")
    local k = gr.kernel { name = "dev2_kernel", source = [[
template <class Op, class In>
__device__ typename Op::acc_t dev2_kernel(const In *in, size_t n, unsigned long long first) {
    typename Op::acc_t acc = Op::identity();
    for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
        acc = Op::combine(acc, gr::load_at<Op>(in[i], first + i));
    return gr::block_reduce<Op>(acc);
}
]] }
    assert.are.equal(want, gr.sum(a, { variant = "dev2_kernel" }), "a user kernel")
    assert.are.equal(want, gr.sum(b, { variant = "dev2_kernel" }), "a user kernel, device 1")
    assert.are.equal(want, gr.reduce(a, { op = op, variant = "dev2_kernel" }), "an operator through a user kernel")
  end)

  multi_it("refuse to mix devices where a reduction cannot, naming the argument", function()
    local a = gr.buffer(1000, "float32", { device = 2 }):random(1)
    local b = gr.buffer(1000, "float32", { device = 1 }):random(1)
    H.expect_error("is on device 1, the buffer reduced on device 2", gr.reduce, a,
      { op = "sum", segment = 10, out = { gr.buffer(100, "float32", { device = 1 }) } })
    H.expect_error("bufs: is on device 1, the buffer reduced on device 2", gr.reduce_many, { a, b }, { op = "sum" })
    H.expect_error("opts.stream: was made on device 1, the buffer is on device 2", gr.sum, a,
      { stream = gr.stream() })
  end)

  multi_it("shard over two devices with one device's results (integers and min/max exactly)", function()
    for _, dtype in ipairs({ "float32", "int32", "uint64" }) do
      local s = gr.sharded(3000017, dtype, { devices = { 1, 2 } })
      local b = gr.buffer(3000017, dtype)
      s:random(6, 0, 100)
      b:random(6, 0, 100)
      assert.are.same({ 1, 2 }, s:devices())
      assert.are.equal(b:tobytes(1, 1000), s:tobytes(1, 1000))
      assert.are.equal(b:tobytes(1500000, 1000), s:tobytes(1500000, 1000))
      assert_same_results(s, b, dtype)
    end
    for _, dtype in ipairs(INTS) do
      local s = gr.sharded(100001, dtype, { devices = { 2, 1, 2 } }):random(9)
      local b = gr.buffer(100001, dtype):random(9)
      assert.are.equal(gr.sum(b), gr.sum(s), dtype)
      assert.are.same({ gr.argmin(b) }, { gr.argmin(s) }, dtype)
    end
    local f = gr.sharded(1 << 20, "float32", { devices = { 1, 2 } }):random(1)
    local first = gr.sum(f)
    for _ = 1, 5 do assert.are.equal(first, gr.sum(f)) end     -- run_to_run: the same bits
  end)

  multi_it("end an all-reduce or c:reduce whose peer died in a clear error within the timeout, then exit #fault",
    function()
      -- dead_rank.lua checks the survivor: the error names the collective, comes within 5 s and a margin,
      -- the communicator is then aborted, and the process exits 0 (each rank under `timeout`: no hang);
      -- `reduce`: a one-value c:reduce, which waits in the mailbox kernel where the ranks took mailboxes
      local code, out, err = L.run("multi_gpu/dead_rank.lua", "5 all")
      assert.are.equal(0, code, out .. err)
      assert.matches("dead_rank first: ok", out, nil, true)
      assert.matches("dead_rank later: ok", out, nil, true)
      assert.matches("dead_rank reduce: ok", out, nil, true)
    end)

  multi_it("all-reduce across two processes, one per GPU", function()
    local path = os.tmpname()
    os.remove(path)
    local code = [[
      local gr = require "gpureduce"
      local rank = tonumber(os.getenv("RANK"))
      local c = gr.comm { rank = rank, size = 2, id = os.getenv("ID"), timeout = 60, device = rank + 1 }
      local b = gr.buffer(1000, "int64", { device = rank + 1 }):iota(rank * 1000)
      c:allreduce(b, "sum")
      local f = gr.buffer(4096, "float64", { device = rank + 1 }):fill(rank + 1)
      c:allreduce(f, "max")
      print("allreduce", b[1], b[1000], gr.min(f))
      print("reduce", c:reduce(b), c:reduce(gr.buffer(10, "int32", { device = rank + 1 }):fill(rank), { op = "max" }))
      c:barrier()
      c:destroy()
      print("done")
    ]]
    local chunk = os.tmpname()
    local f = assert(io.open(chunk, "w"))
    f:write(code)
    f:close()
    local procs = {}
    for rank = 0, 1 do
      procs[rank] = assert(io.popen(string.format("RANK=%d ID=%s LUA_PATH='%s' LUA_CPATH='%s' %s %s 2>&1", rank, path,
        package.path, package.cpath, H.interpreter(), chunk)))
    end
    local outs = {}
    for rank = 0, 1 do
      outs[rank] = procs[rank]:read("a")
      procs[rank]:close()
    end
    os.remove(chunk)
    for rank = 0, 1 do
      -- element 1: 0 + 1000; element 1000: 999 + 1999; max of the fills: 2
      assert.matches("allreduce\t1000\t2998\t2.0", outs[rank], nil, true)
      -- the local sums 499500 and 1499500 (of the reduced buffers: both hold the summed values)
      assert.matches("reduce\t" .. (2 * 1999000) .. "\t1", outs[rank], nil, true)
      assert.matches("done", outs[rank], nil, true)
    end
  end)
end)
