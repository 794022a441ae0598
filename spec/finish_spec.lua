-- Finishing modes: every mode of every variant that supports it, plans, hybrid thresholds, the pool.
local gr = require "gpureduce"
-- `pending` is looked up when the test runs: inside a test it is busted's "mark this test pending"
local H = require("support.helpers").bind(it, function(reason) pending(reason) end)

local sizes = { 1, 1025, 65537, 1000003 }

local case = H.case_cache(gr, function(n, op) return 3 * n + #op end, false)

describe("finishing modes against the reference", function()
  for _, dtype in ipairs(gr.dtypes()) do
    for _, op in ipairs(H.classic_ops) do       -- the later ops' finishing modes: ops_spec.lua
      for _, n in ipairs(sizes) do
        for _, v in ipairs(H.variants()) do
          for _, finish in ipairs(H.takes(v, dtype) and v.finishes or {}) do
            if finish ~= v.default_finish then    -- the default is covered by reduce_spec
              local title = string.format("%s finish=%s %s %s n=%d", v.name, finish, op, dtype, n)
              H.variant_it(v, title, function()
                local c = case(dtype, op, n)
                local opts = { op = op, variant = v.name, finish = finish }
                if finish == "hybrid" then opts.threshold = 100 end
                H.assert_close(gr.reduce(c.b, opts), c.want, H.tolerance(dtype, op), title, c.magnitude)
              end, dtype)
            end
          end
        end
      end
    end
  end
end)

describe("plans", function()
  it("describe a host variant as one pass on the CPU", function()
    local p = gr.plan(gr.buffer(1000), { variant = "cpu" })
    assert.are.equal("cpu", p.variant)
    assert.are.equal(1, #p.passes)
    assert.are.equal("host", p.passes[1].where)
    assert.are.equal(1000, p.passes[1].elements)
  end)

  H.gpu_it("of auto pick pipelined for 1-byte types and warp_shuffle for wider ones", function()
    for dtype, want in pairs({ int8 = "pipelined", uint8 = "pipelined", float32 = "warp_shuffle",
                               int32 = "warp_shuffle", float64 = "warp_shuffle" }) do
      local p = gr.plan(gr.buffer(100000, dtype), { op = "prod" })
      assert.are.equal(want, p.variant, dtype)
      assert.are.equal("single", p.finish, dtype)
    end
  end)

  it("have no passes for an empty buffer", function()
    assert.are.equal(0, #gr.plan(gr.buffer(0), {}).passes)
  end)

  for _, v in ipairs(H.variants()) do
    for _, finish in ipairs(v.finishes) do
      H.variant_it(v, string.format("chain the passes of %s finish=%s", v.name, finish), function()
        local n = 10000000
        local p = gr.plan(gr.buffer(n, "float32"), { variant = v.name, finish = finish, threshold = 50 })
        assert.are.equal(v.name, p.variant)
        assert.are.equal(finish, p.finish)
        assert.are.equal(n, p.passes[1].elements)
        for i = 2, #p.passes do
          assert.are.equal(p.passes[i - 1].blocks, p.passes[i].elements, "pass " .. i)
        end
        local last = p.passes[#p.passes]
        if finish == "single" then
          assert.are.equal(1, #p.passes)
        elseif finish == "device" then
          assert.are.equal(1, last.blocks)
          assert.are.equal("device", last.where)
        elseif finish == "host" then
          assert.is_true(#p.passes <= 2)
          if #p.passes == 2 then assert.are.equal("host", last.where) end
        elseif finish == "hybrid" then
          assert.is_true(last.where == "host" and last.elements <= 50 or last.blocks == 1)
        end
        assert.matches("Pass 1: 10000000 elements", gr.format_plan(p))
      end)
    end
  end
end)

describe("hybrid thresholds around the crossover", function()
  H.gpu_it("hand over to the CPU exactly when the partials fit under the threshold", function()
    local b = gr.buffer(1000003, "int64"):random(8, -1000, 1000)
    local want = gr.sum(b, { variant = "cpu" })
    for _, v in ipairs(H.variants()) do
      if v.available and H.needs_cuda(v) then
        for _, f in ipairs(v.finishes) do
          if f == "hybrid" then
            local first = gr.plan(b, { variant = v.name, finish = "device" }).passes[1].blocks
            for _, t in ipairs({ 1, 2, first - 1, first, first + 1, 1 << 40 }) do
              if t >= 1 then
                local p = gr.plan(b, { variant = v.name, finish = "hybrid", threshold = t })
                local last = p.passes[#p.passes]
                if t >= first then
                  assert.are.equal(2, #p.passes, v.name .. " threshold " .. t)
                  assert.are.equal("host", last.where)
                else
                  assert.is_true(last.where == "host" and last.elements <= t or last.blocks == 1)
                end
                assert.are.equal(want, gr.sum(b, { variant = v.name, finish = "hybrid", threshold = t }),
                  v.name .. " threshold " .. t)
              end
            end
          end
        end
      end
    end
  end)
end)

describe("the scratch pool", function()
  H.gpu_it("allocates nothing after warm-up, whatever the mode", function()
    -- from an empty pool: slots and graphs that earlier spec files left (a graph evicted here frees a
    -- slot that the next capture takes again) would otherwise enter the counts below
    gr.pool_trim()
    local b = gr.buffer(1 << 22, "float32"):random(1)
    local modes = {
      {}, { finish = "device" }, { finish = "hybrid" }, { finish = "host" }, { finish = "single" },
      { variant = "warp_shuffle", block = 1024 }, { op = "max" }, { acc = "float64" },
    }
    for _, m in ipairs(modes) do m.op = m.op or "sum" end
    local function all() for _, m in ipairs(modes) do gr.reduce(b, m) end end
    all()
    local before = gr.pool_stats()
    for _ = 1, 50 do all() end
    local pendings = {}
    for i = 1, 4 do pendings[i] = gr.sum(b, { async = true }) end
    for i = 1, 4 do pendings[i]:wait() end
    local mid = gr.pool_stats()
    for _ = 1, 10 do
      for i = 1, 4 do pendings[i] = gr.sum(b, { async = true }) end
      for i = 1, 4 do pendings[i]:wait() end
      all()
    end
    local after = gr.pool_stats()
    assert.are.equal(before.device_allocs + (mid.device_allocs - before.device_allocs), after.device_allocs)
    assert.are.equal(mid.host_allocs, after.host_allocs)
    assert.are.equal(mid.slots, after.slots)
    assert.are.equal(before.device_allocs, mid.device_allocs - 2 * (mid.slots - before.slots))
  end)
end)
