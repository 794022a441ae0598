-- Streamed host data: pinned buffers, tables and byte strings, copied in chunks and reduced as they land.
local gr = require "gpureduce"
-- `pending` is looked up when the test runs: inside a test it is busted's "mark this test pending"
local H = require("support.helpers").bind(it, function(reason) pending(reason) end)

describe("streamed reductions", function()
  for _, dtype in ipairs(gr.dtypes()) do
    for _, op in ipairs(H.classic_ops) do       -- the later ops streamed: ops_spec.lua
      it(string.format("of a pinned %s buffer, %s, in many chunks on 3 streams", dtype, op), function()
        local h = H.fill_case(gr.buffer(300007, dtype, { where = "host" }), dtype, op, 17)
        local R = require "support.fuzz_reference"
        local want, magnitude = H.reference(R.boolify(dtype, h:totable()), dtype, op)
        if R.DTYPES[dtype].bool and (op == "min" or op == "max") then want = want == 1 end
        for _, cfg in ipairs({ { chunk = 4096, streams = 3 }, { chunk = 1 << 20, streams = 1 }, {} }) do
          local got = gr.reduce(h, { op = op, streamed = true, chunk = cfg.chunk, streams = cfg.streams })
          H.assert_close(got, want, H.tolerance(dtype, op), dtype .. " " .. op, magnitude)
        end
      end)
    end
  end

  it("of a Lua table and of a byte string, staged through pinned memory", function()
    local t = {}
    for i = 1, 100001 do t[i] = i % 1000 - 500 end
    local want = 0
    for i = 1, #t do want = want + t[i] end
    assert.are.equal(want, gr.sum(t, { streamed = true, dtype = "int32", chunk = 8192 }))
    local bytes = gr.buffer(t, "int32"):tobytes()
    assert.are.equal(want, gr.sum(bytes, { streamed = true, dtype = "int32", chunk = 8192, streams = 2 }))
    assert.are.equal(499, gr.max(bytes, { streamed = true, dtype = "int32" }))
    assert.are.equal(6.0, gr.sum({ 1, 2, 3 }, { streamed = true }))   -- float32 by default
  end)

  it("of an empty source give the identity, or the min/max error", function()
    assert.are.equal(0.0, gr.sum({}, { streamed = true }))
    assert.has_error(function() gr.min({}, { streamed = true }) end,
      "gpureduce: min of an empty buffer is undefined (it has no identity)")
  end)

  it("reject misuse with clear messages", function()
    local h = gr.buffer(10, "float32", { where = "host" })
    assert.has_error(function() gr.sum(h, { chunk = 4096 }) end)
    local ok, err = pcall(gr.sum, h, { streamed = true, async = true })
    assert.is_false(ok)
    assert.truthy(err:find("streamed reductions are synchronous", 1, true), err)
    ok, err = pcall(gr.sum, gr.buffer(10), { dtype = "int32" })
    assert.truthy(err:find("opts.dtype: only for a table or byte-string source", 1, true), err)
    ok, err = pcall(gr.sum, h, { streamed = true, chunk = 100 })
    assert.truthy(err:find("opts.chunk: must be at least 4096 bytes (got 100)", 1, true), err)
  end)

  it("need host data, with or without a GPU", function()
    local ok, err = pcall(gr.sum, gr.buffer(10), { streamed = true })
    assert.is_false(ok)
    assert.truthy(err:find("opts.streamed: needs host data", 1, true), err)
  end)
end)

describe("async ordering", function()
  H.gpu_it("reductions queued on one stream complete in order", function()
    local s = gr.stream()
    local bufs, ps = {}, {}
    for i = 1, 6 do
      bufs[i] = gr.buffer(1 << 21, "float32"):random(i)
      ps[i] = gr.sum(bufs[i], { async = true, stream = s })
    end
    ps[6]:wait()
    for i = 1, 5 do assert.is_true(ps[i]:ready(), "pending " .. i .. " behind the last one") end
    for i = 1, 6 do assert.are.equal(gr.sum(bufs[i]), ps[i]:wait()) end
  end)
end)
