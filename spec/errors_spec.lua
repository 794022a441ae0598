-- Misuse raises errors that name the argument and what is accepted; failures leave the module usable.
local gr = require "gpureduce"
-- `pending` is looked up when the test runs: inside a test it is busted's "mark this test pending"
local H = require("support.helpers").bind(it, function(reason) pending(reason) end)

local message, expect = H.error_message, H.expect_error

describe("errors", function()
  local b = gr.buffer(100, "float32"):random(1)

  it("name an unknown op and list the accepted ones", function()
    expect("opts.op: unknown op 'avg' (accepted: sum, prod, min, max, and, or, count, mean, var, std, argmin, "
      .. "argmax, minmax, sumsq, norm, nansum, nanmin, nanmax, nanmean, absmax, asum)", gr.reduce, b, { op = "avg" })
  end)

  it("reject an op that contradicts the shortcut", function()
    expect("opts.op: 'max' conflicts with this function's op 'sum'", gr.sum, b, { op = "max" })
  end)

  it("name an unknown dtype and list the accepted ones", function()
    expect("bad argument #2 to", gr.buffer, 4, "half")
    expect("unknown dtype 'half' (accepted: int8, uint8, int32, uint32, int64, uint64, float32, float64, float16, bfloat16, int16, uint16, bool, float8_e4m3, float8_e5m2)",
      gr.buffer, 4, "half")
    expect("opts.acc: unknown dtype 'float128'", gr.sum, b, { acc = "float128" })
  end)

  it("name an unknown variant and list the accepted ones", function()
    local err = message(gr.sum, b, { variant = "fastest" })
    assert.truthy(err:find("opts.variant: unknown variant 'fastest' (accepted: auto, cpu", 1, true), err)
    for _, v in ipairs(gr.variants()) do assert.truthy(err:find(v.name, 1, true), v.name) end
  end)

  it("name an unknown finishing mode", function()
    expect("opts.finish: unknown mode 'later' (accepted: auto, device, hybrid, host, single)",
      gr.sum, b, { finish = "later" })
  end)

  it("name a misspelt option", function()
    expect("unknown option 'varaint' (accepted: acc, async, axis, block", gr.sum, b, { varaint = "cpu" })
  end)

  it("name wrong argument types", function()
    expect("bad argument #1 to", gr.sum, 42)
    expect("gpureduce.Buffer expected, got number", gr.sum, 42)
    expect("expected a size, a table or a byte string, got boolean", gr.buffer, true)
    expect("opts.block: expected an integer, got string", gr.sum, b, { block = "big" })
    expect("opts.async: expected a boolean, got number", gr.sum, b, { async = 1 })
    expect("opts.stream: expected a gpureduce.Stream, got string", gr.sum, b, { stream = "s" })
    expect("element 2: expected a number, got string", gr.buffer, { 1, "two" }, "int32")
  end)

  it("reject a negative size and values that do not fit the dtype", function()
    expect("size must be >= 0 (got -1)", gr.buffer, -1)
    expect("element 1: 300 does not fit in uint8", gr.buffer, { 300 }, "uint8")
    expect("element 1: 1.5 does not fit in int32", gr.buffer, { 1.5 }, "int32")
    expect("byte string of length 7 is not a whole number of float32 elements (4 bytes each)",
      gr.buffer, "1234567", "float32")
    expect("value: -1 does not fit in uint32", function() gr.buffer(3, "uint32"):fill(-1) end)
  end)

  it("reject slices and indices out of range", function()
    expect("slice 95..104 is outside the buffer (size 100)", b.slice, b, 95, 10)
    expect("offset must be >= 1 (got 0)", b.slice, b, 0, 1)
    expect("index 101 out of range (1..100)", b.get, b, 101)
    expect("3 values from offset 99 do not fit in a buffer of 100 (room for 2)", b.set, b, { 1, 2, 3 }, 99)
  end)

  it("reject a block size the variant cannot take, listing the accepted ones", function()
    if H.has_gpu then
      expect("opts.block: 48 is not accepted by variant 'warp_shuffle' (accepted: 32, 64, 128, 256, 512, 1024)",
        gr.sum, b, { variant = "warp_shuffle", block = 48 })
      expect("opts.block: 2048 is not accepted by variant 'warp_shuffle'", gr.sum, b,
        { variant = "warp_shuffle", block = 2048 })
    else
      expect("opts.block: 48 is not accepted by variant 'cpu' (accepted: 1)", gr.sum, b, { variant = "cpu", block = 48 })
    end
  end)

  it("reject a finishing mode the variant does not support", function()
    expect("opts.finish: 'single' is not supported by variant 'cpu' (accepted: auto, host)", gr.sum, b,
      { variant = "cpu", finish = "single" })
  end)

  it("reject use after free; a second free is harmless", function()
    local f = gr.buffer(10)
    f:free()
    f:free()
    expect("buffer has been freed", gr.sum, f)
    expect("buffer has been freed", f.get, f, 1)
    expect("buffer has been freed", f.slice, f, 1, 1)
  end)

  it("give min and max of an empty buffer an error, and the others their identity", function()
    local e = gr.buffer(0, "int32")
    expect("min of an empty buffer is undefined", gr.min, e)
    expect("max of an empty buffer is undefined", gr.max, e)
    assert.are.equal(0, gr.sum(e))
    assert.are.equal(1, gr.prod(e))
    assert.is_true(gr.all(e))
    assert.is_false(gr.any(e))
    assert.are.equal(0.0, gr.sum(gr.buffer(0, "float64")))
  end)

  it("say when a variant needs a CUDA device", function()
    if H.has_gpu then return end
    expect("opts.variant: 'warp_shuffle' needs a CUDA device (backend is cpu)", gr.sum, b,
      { variant = "warp_shuffle" })
  end)

  it("report running out of memory and leave the module usable", function()
    local err = message(gr.buffer, 1 << 50, "float64")
    if H.has_gpu then
      assert.truthy(err:find("cudaErrorMemoryAllocation", 1, true), err)
    else
      assert.truthy(err:find("out of host memory", 1, true), err)
    end
    assert.are.equal(b:totable()[1], b:get(1))
    assert.are.equal(gr.sum(b, { variant = "cpu" }), gr.sum(b, { variant = "cpu" }))
  end)

  H.gpu_it("a failed launch carries the CUDA error name and leaves the module usable", function()
    local before = gr.sum(b)
    local err = message(gr.sum, b, { variant = "warp_shuffle", grid = 1 << 32 })
    assert.truthy(err:find("cudaError", 1, true), err)
    assert.are.equal(before, gr.sum(b))
    assert.are.equal(before, gr.sum(b, { variant = "warp_shuffle", finish = "single" }))
  end)
end)
