-- opts.determinism and the registry's levels: every variant but the two atomic ones promises run_to_run
-- (the same bits on every run of the same call), which is checked here on the GPU by repetition -- sync,
-- async and replayed graphs, a float32 sum of cancelling data, where a changed order shows in the bits --
-- and asking an atomic variant for it is an error; gpu_to_gpu is refused until it exists.
local gr = require "gpureduce"
local H = require("support.helpers").bind(it, function(reason) pending(reason) end)

local expect = H.expect_error
local ATOMIC = { atomic_shared = true, grid_stride_atomic = true }

local function bits(x) return string.pack("d", x) end

describe("determinism", function()
  it("the registry gives every variant a level: not_guaranteed for the atomic ones, run_to_run else", function()
    for _, v in ipairs(gr.variants()) do
      assert.are.equal(ATOMIC[v.name] and "not_guaranteed" or "run_to_run", v.determinism, v.name)
    end
  end)

  it("opts.determinism takes not_guaranteed and run_to_run, and refuses gpu_to_gpu and unknown words", function()
    local b = gr.buffer(1000, "float32"):random(1, -1, 1)
    local base = gr.sum(b)
    assert.are.equal(bits(base), bits(gr.sum(b, { determinism = "run_to_run" })))
    assert.are.equal(bits(base), bits(gr.sum(b, { determinism = "not_guaranteed" })))
    expect("opts.determinism: 'gpu_to_gpu' is not available yet (accepted: not_guaranteed, run_to_run)",
      function() gr.sum(b, { determinism = "gpu_to_gpu" }) end)
    expect("opts.determinism: unknown value 'sometimes' (accepted: not_guaranteed, run_to_run, gpu_to_gpu)",
      function() gr.sum(b, { determinism = "sometimes" }) end)
    expect("opts.determinism: 'gpu_to_gpu' is not available yet",
      function() gr.sum(b, { determinism = "gpu_to_gpu", segment = 10 }) end)
    assert.are.equal(100, #gr.sum(b, { determinism = "run_to_run", segment = 10 }))
  end)

  H.gpu_it("asking an atomic variant for run_to_run is an error naming it; not_guaranteed runs", function()
    local b = gr.buffer(1 << 16, "float32"):random(2, -1, 1)
    for name in pairs(ATOMIC) do
      expect("opts.determinism: variant '" .. name .. "' gives not_guaranteed",
        function() gr.sum(b, { variant = name, determinism = "run_to_run" }) end)
      local v = gr.sum(b, { variant = name, determinism = "not_guaranteed" })
      local want = gr.sum(b, { variant = "cpu", acc = "float64" })
      assert(math.abs(v - want) <= 1e-4 * (1 << 16), name .. ": " .. v .. " against " .. want)   -- float32 sums
    end
  end)

  H.gpu_it("every run_to_run variant gives the same bits on every run: sync, async and replayed graphs", function()
    local bad = {}
    for _, n in ipairs({ 1000003, (1 << 22) + 17 }) do
      local b = gr.buffer(n, "float32"):random(n, -1, 1)      -- cancelling data: the order shows in the bits
      for _, v in ipairs(gr.variants()) do
        if not ATOMIC[v.name] and v.available and H.needs_cuda(v) then
          local opts = { variant = v.name, determinism = "run_to_run" }
          local first = bits(gr.sum(b, opts))
          for rep = 1, 4 do
            if bits(gr.sum(b, opts)) ~= first then bad[#bad + 1] = v.name .. " n=" .. n .. " sync rep " .. rep end
          end
          if bits(gr.sum(b, { variant = v.name, async = true }):wait()) ~= first then
            bad[#bad + 1] = v.name .. " n=" .. n .. " async"
          end
        end
      end
      local auto = bits(gr.sum(b))
      for rep = 1, 5 do                                       -- the second call on is a replayed graph
        if bits(gr.sum(b)) ~= auto then bad[#bad + 1] = "auto n=" .. n .. " graph rep " .. rep end
      end
      local segs = gr.sum(b, { segment = 1 })                 -- every size's shape: lanes to blocks
      local parts = gr.reduce(b, { op = "sum", offsets = gr.buffer({ 0, 1, 1000, n - 5, n }, "int64") }):totable()
      local again = gr.reduce(b, { op = "sum", offsets = gr.buffer({ 0, 1, 1000, n - 5, n }, "int64") }):totable()
      for k = 1, #parts do
        if bits(parts[k]) ~= bits(again[k]) then bad[#bad + 1] = "offsets n=" .. n .. " segment " .. k end
      end
      segs:free()
      b:free()
    end
    assert(#bad == 0, table.concat(bad, "\n"))
  end)
end)
