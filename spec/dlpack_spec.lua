--[[
dlpack_spec.lua -- interoperation (issue 27, DLPack part): b:ptr(), b:to_dlpack() and gr.from_dlpack(p).

Generated over every dtype of gr.dtypes() x both sides of the current backend (device and host buffers; on
a GPU device memory and pinned host memory): an export imported back is the same memory (its address,
dtype, side, device, shape, strides and bytes; a write through one shows in the other). Then views (a 1-D
slice, a 2-D view, transposed, narrowed and permuted 3-D ones) keep their layout and elements; then
lifetimes, counted in the context's live bytes (gr.pool_stats): an export keeps its memory after the
buffer is freed and collected, and the import's last view freed runs the deleter, which gives it back.
A producer's tensor is written here into host buffers' memory (string.pack of the structure): imported, and
each refusal checked by its message. Deleter calls counted exactly, and the legacy structure, are
spec/host/c_api_host.c's, run here; PyTorch's side is spec/support/dlpack_torch.py, run where python3 can
import torch (on the GPU through the CUDA build's libgpureduce.so).
]]
local gr = require "gpureduce"
local H = require("support.helpers").bind(it, function(reason) pending(reason) end)

-- A light userdata's address as an integer (tostring gives "userdata: 0x...").
local function addr(p)
  assert.equals("userdata", type(p))
  return tonumber(tostring(p):match("0x(%x+)"), 16)
end

local function live() return gr.pool_stats().live_device_bytes + gr.pool_stats().live_pinned_bytes end

local ES = { int8 = 1, uint8 = 1, int16 = 2, uint16 = 2, int32 = 4, uint32 = 4, int64 = 8, uint64 = 8,
  float16 = 2, bfloat16 = 2, float32 = 4, float64 = 8, bool = 1, float8_e4m3 = 1, float8_e5m2 = 1 }

-- On the cpu backend a kDLCPU tensor comes back a "device" buffer (the backend's default side: plain
-- host memory either way); on cuda each side comes back as itself.
local function imported_side(side) return H.has_gpu and side or "device" end

describe("b:ptr()", function()
  it("is the address of the view's first element, on the side b:where() names", function()
    for _, dtype in ipairs(gr.dtypes()) do
      local b = gr.buffer(24, dtype)
      local base = addr(b:ptr())
      assert.equals(base + 5 * ES[dtype], addr(b:slice(6):ptr()), dtype)
      local m = b:view { 4, 6 }
      assert.equals(base, addr(m:ptr()), dtype)
      assert.equals(base + 6 * ES[dtype], addr(m:narrow(1, 2, 2):ptr()), dtype)
      assert.equals(base + 2 * ES[dtype], addr(m:narrow(2, 3, 4):transpose():ptr()), dtype)
    end
  end)

  it("refuses a freed buffer", function()
    local b = gr.buffer(3)
    b:free()
    H.expect_error("buffer has been freed", function() return b:ptr() end)
    H.expect_error("buffer has been freed", function() return b:to_dlpack() end)
  end)
end)

describe("b:to_dlpack() then gr.from_dlpack(p), every dtype and side", function()
  for _, dtype in ipairs(gr.dtypes()) do
    for _, side in ipairs { "device", "host" } do
      it(dtype .. " on the " .. side .. " side: the same memory, layout and bytes", function()
        local b = gr.buffer(37, dtype, { where = side }):random(11)
        local p = b:to_dlpack()
        assert.equals("userdata", type(p))
        local c = gr.from_dlpack(p)
        assert.equals(dtype, c:dtype())
        assert.equals(imported_side(side), c:where())
        assert.equals(b:device(), c:device())
        assert.same({ 37 }, c:shape())
        assert.same({ 1 }, c:strides())
        assert.equals(addr(b:ptr()), addr(c:ptr()))
        assert.equals(b:tobytes(), c:tobytes())
        -- no copy: a write through the import is a write to b
        c:fill(dtype == "bool" and true or 1)
        assert.equals(dtype == "bool" and true or 1, b[37])
        c:free()
        b:free()
      end)
    end
  end

  it("an empty buffer", function()
    local b = gr.buffer(0, "int16")
    local c = gr.from_dlpack(b:to_dlpack())
    assert.same({ 0 }, c:shape())
    assert.equals(0, #c)
  end)
end)

describe("views keep their shape and strides", function()
  local base = gr.buffer(120, "int32"):iota(1)
  local cases = {
    { "a 1-D slice", function() return base:slice(11, 30) end, { 30 }, { 1 } },
    { "a 2-D view", function() return base:view { 10, 12 } end, { 10, 12 }, { 12, 1 } },
    { "a transposed one", function() return base:view { 10, 12 }:transpose() end, { 12, 10 }, { 1, 12 } },
    { "a narrowed one", function() return base:view { 10, 12 }:narrow(2, 4, 5) end, { 10, 5 }, { 12, 1 } },
    { "a permuted 3-D one", function() return base:view { 2, 3, 20 }:permute { 3, 1, 2 } end, { 20, 2, 3 },
      { 1, 60, 20 } },
  }
  for _, case in ipairs(cases) do
    it(case[1], function()
      local v = case[2]()
      assert.same(case[3], v:shape())
      assert.same(case[4], v:strides())
      local c = gr.from_dlpack(v:to_dlpack())
      assert.same(case[3], c:shape())
      assert.same(case[4], c:strides())
      assert.equals(addr(v:ptr()), addr(c:ptr()))
      assert.same(v:totable(), c:totable())
      assert.equals(gr.sum(v:contiguous()), gr.sum(c:contiguous()))
      c:free()
    end)
  end
end)

describe("lifetimes", function()
  it("an export keeps the memory after the buffer is freed and collected; the import's deleter gives it back",
    function()
      collectgarbage()
      local before = live()
      local b = gr.buffer(1000, "float64"):iota(0.5)
      local want = b:totable()
      local p = b:view { 10, 100 }:transpose():to_dlpack()
      b:free()
      b = nil
      collectgarbage()
      collectgarbage()
      assert.equals(before + 8000, live())
      local c = gr.from_dlpack(p)
      assert.same({ 100, 10 }, c:shape())
      for i = 1, 100 do
        for j = 1, 10 do assert.equals(want[(j - 1) * 100 + i], c[(i - 1) * 10 + j]) end
      end
      assert.equals(500000, gr.sum(c:contiguous()))
      c:free()
      collectgarbage()      -- the contiguous copy
      assert.equals(before, live())
    end)

  it("an import's slices and views keep it; the last one freed (or collected) releases the tensor", function()
    collectgarbage()
    local before = live()
    local c = gr.from_dlpack(gr.buffer(64, "uint16"):iota(3):to_dlpack())
    collectgarbage()
    local part = c:slice(9, 4)
    local grid = c:view { 8, 8 }
    c:free()
    assert.same({ 11, 12, 13, 14 }, part:totable())
    part:free()
    assert.equals(before + 128, live())
    assert.equals(66, grid:totable()[8][8])
    grid = nil
    collectgarbage()
    collectgarbage()
    assert.equals(before, live())
  end)

  it("exporting twice gives two tensors, each released on its own", function()
    collectgarbage()
    local before = live()
    local b = gr.buffer(10, "int8"):iota(1)
    local p, q = b:to_dlpack(), b:to_dlpack()
    assert.are_not.equal(addr(p), addr(q))
    b:free()
    local c = gr.from_dlpack(p)
    c:free()
    assert.equals(before + 10, live())
    local d = gr.from_dlpack(q)
    assert.equals(55, gr.sum(d))
    d:free()
    assert.equals(before, live())
  end)

  it("a producer's tensors from C: counted deleter calls, refusals by name (spec/host/c_api_host.c)", function()
    local exe, why = H.host_program("c_api_host")
    if not exe then
      pending(why)
      return
    end
    local ok, out = H.sh(exe)
    assert(ok, out)
    assert.matches("c_api_host: dlpack: ok (deleter calls: 3 versioned, 1 legacy)", out, 1, true)
  end)
end)

-- A producer's DLManagedTensorVersioned written into host buffers' memory (x86-64 layout, 80 bytes;
-- deleter NULL): six float64 over a {2, 3} shape, with fields changed per case.
local function producer(changes)
  local c = changes or {}
  local meta = gr.buffer(string.pack("<jjjj", 2, 3, c.stride0 or 3, 1) ..
    string.pack("<dddddd", 1.5, 2.5, 3.5, 4.5, 5.5, 6.5), "uint8", { where = "host" })
  local at = addr(meta:ptr())
  local header = string.pack("<I4I4jjI8jiiiBBI2jjI8", c.major or 1, 1, 0, 0, c.flags or 0, at + 32,
    c.device_type or 1, c.device_id or 0, c.ndim or 2, c.code or 2, c.bits or 64, c.lanes or 1, at, at + 16,
    c.byte_offset or 0)
  assert.equals(80, #header)
  return gr.buffer(header, "uint8", { where = "host" }), meta
end

describe("a producer's tensor (written into host buffers)", function()
  it("imports with its shape and strides, no copy", function()
    local t, meta = producer()
    local c = gr.from_dlpack(t:ptr())
    assert.same({ 2, 3 }, c:shape())
    assert.same({ 3, 1 }, c:strides())
    assert.equals("float64", c:dtype())
    assert.equals(addr(meta:ptr()) + 32, addr(c:ptr()))
    assert.same({ { 1.5, 2.5, 3.5 }, { 4.5, 5.5, 6.5 } }, c:totable())
    assert.equals(24, gr.sum(c))
    c:free()
  end)

  local refusals = {
    { { major = 2 }, "DLPack version 2.1 (accepted: 1.x; a DLManagedTensor of before 1.0 is read by "
      .. "gr_buffer_from_dlpack_legacy)" },
    { { flags = 1 }, "a read-only tensor (accepted: writable ones, as every buffer is writable)" },
    { { lanes = 4 }, "a vector type of 4 lanes (accepted: 1 lane)" },
    { { code = 5 }, "type code 5 with 64 bits (accepted: int8 (code 0, 8 bits), uint8 (code 1, 8 bits)" },
    { { bits = 8 }, "type code 2 with 8 bits (accepted:" },
    { { stride0 = -3 }, "stride -3 on axis 0 (accepted: strides >= 0; a negative one is a flipped view, which a "
      .. "buffer cannot take: make it contiguous first)" },
    { { ndim = 9 }, "a tensor of 9 dimensions (accepted: 0 to 8)" },
    { { byte_offset = 4 }, "not a multiple of 8 (accepted: the first element aligned to its size)" },
    { { device_type = 13 }, "memory of device type 13 (kDLCUDAManaged: unified memory) (accepted: kDLCPU (1), "
      .. "kDLCUDAHost (3) and, on the cuda backend, kDLCUDA (2))" },
    { { device_type = 2, device_id = 99 }, H.has_gpu and "memory of CUDA device 99, which this machine lacks"
      or "memory of device type 2 while the backend is cpu" },
  }
  for _, case in ipairs(refusals) do
    local name = next(case[1])
    it("refuses " .. name .. " = " .. tostring(case[1][name]) .. ", naming the argument", function()
      local t = producer(case[1])
      local err = H.expect_error(case[2], gr.from_dlpack, t:ptr())
      assert.matches("bad argument #1 to '", err, 1, true)
    end)
  end
end)

describe("misuse", function()
  it("gr.from_dlpack takes a light userdata and {legacy = boolean}", function()
    local err = H.expect_error("(expected a DLManagedTensorVersioned* as a light userdata (b:to_dlpack() gives one), "
      .. "got number)", gr.from_dlpack, 12345)
    assert.matches("bad argument #1 to '", err, 1, true)
    H.expect_error("got userdata", gr.from_dlpack, gr.buffer(1))
    H.expect_error("got no value", gr.from_dlpack)
    local b = gr.buffer(2)
    H.expect_error("opts.legacy: expected a boolean, got number", gr.from_dlpack, b:ptr(), { legacy = 1 })
    H.expect_error("unknown option 'version' (accepted: legacy)", gr.from_dlpack, b:ptr(), { version = 1 })
  end)
end)

describe("on the GPU", function()
  H.gpu_it("a buffer on device 2 comes back on device 2 (skipped with one GPU)", function()
    if #gr.devices() < 2 then
      pending("one GPU: no second device")
      return
    end
    local b = gr.buffer(100, "float32", { device = 2 }):iota(1)
    local c = gr.from_dlpack(b:to_dlpack())
    assert.equals(2, c:device())
    assert.equals("device", c:where())
    assert.equals(5050, gr.sum(c))
  end)

  H.gpu_it("pinned host memory and device memory keep their sides, and reduce on them", function()
    for _, side in ipairs { "device", "host" } do
      local b = gr.buffer(1000003, "float32", { where = side }):random(5)
      local want = gr.sum(b)
      local c = gr.from_dlpack(b:to_dlpack())
      b:free()
      collectgarbage()
      assert.equals(side, c:where())
      assert.equals(want, gr.sum(c))
    end
  end)
end)

-- PyTorch in the same process as libgpureduce.so (ctypes): our export read by torch.from_dlpack, and a
-- torch tensor's DLPack capsule imported and reduced by the engine, on cpu tensors and, with a GPU, on
-- cuda ones. Pending where python3 cannot import torch.
local has_torch = H.sh("python3 -c 'import torch' >/dev/null 2>&1")
describe("PyTorch", function()
  H.it_if(has_torch, "no python3 with torch on this machine")(
    "torch.from_dlpack reads our export; we read torch's (spec/support/dlpack_torch.py)", function()
      local lib = H.build_dir() .. "/libgpureduce.so"
      local ok, out = H.sh("python3 spec/support/dlpack_torch.py " .. H.quote(lib))
      assert(ok, out)
      assert.matches("dlpack_torch: ok", out, 1, true)
      if H.has_gpu then assert.matches("cuda: ok", out, 1, true) end
    end)
end)
