-- Every variant x op x dtype x edge size against the Lua reference, generated from the registry: the
-- first six ops (H.classic_ops); the later ones, which not every variant takes, are in ops_spec.lua.
-- Each case's data is generated once (on the device, by seed) and reduced by every variant; after
-- each reduction the input must be byte-for-byte what it was.
local gr = require "gpureduce"
-- `pending` is looked up when the test runs: inside a test it is busted's "mark this test pending"
local H = require("support.helpers").bind(it, function(reason) pending(reason) end)

local variants = H.variants()

-- The data and expected value of the current case, made by the first test that needs it.
local case = H.case_cache(gr, function(n, op) return n + #op end, true)

describe("reductions against the reference", function()
  for _, dtype in ipairs(gr.dtypes()) do
    for _, op in ipairs(H.classic_ops) do
      for _, n in ipairs(H.edge_sizes) do
        for _, v in ipairs(variants) do
          if not H.takes(v, dtype) then goto next_variant end
          local title = string.format("%s %s %s n=%d", v.name, op, dtype, n)
          H.variant_it(v, title, function()
            local c = case(dtype, op, n)
            if n == 0 and (op == "min" or op == "max") then
              assert.has_error(function() gr.reduce(c.b, { op = op, variant = v.name }) end,
                "gpureduce: " .. op .. " of an empty buffer is undefined (it has no identity)")
              return
            end
            local got = gr.reduce(c.b, { op = op, variant = v.name })
            H.assert_close(got, c.want, H.tolerance(dtype, op), title, c.magnitude)
            assert(c.b:tobytes() == c.bytes, title .. ": the input buffer changed")
          end)
          ::next_variant::
        end
      end
    end
  end
end)

describe("a variant refuses the dtypes its row does not list, by name", function()
  for _, dtype in ipairs(gr.dtypes()) do
    for _, v in ipairs(variants) do
      if not H.takes(v, dtype) then
        H.variant_it(v, string.format("%s refuses %s", v.name, dtype), function()
          local b = gr.buffer(5, dtype)
          local ok, err = pcall(gr.reduce, b, { op = "sum", variant = v.name })
          assert(not ok, v.name .. " reduced " .. dtype .. " data")
          assert(tostring(err):find("'" .. v.name .. "' does not take " .. dtype .. " data", 1, true), tostring(err))
          local plan_ok = pcall(gr.plan, b, { op = "sum", variant = v.name })
          assert(not plan_ok, "gr.plan took " .. v.name .. " for " .. dtype)
        end)
      end
    end
  end
end)

describe("float32 with a float64 accumulator", function()
  for _, v in ipairs(variants) do
    for _, op in ipairs({ "sum", "prod" }) do
      local title = string.format("%s %s float32 acc=float64 n=1000003", v.name, op)
      H.variant_it(v, title, function()
        local c = case("float32", op, 1000003)
        local got = gr.reduce(c.b, { op = op, variant = v.name, acc = "float64" })
        H.assert_close(got, c.want, op == "sum" and 1e-12 or 1e-9, title, c.magnitude)
      end)
    end
  end
end)

describe("NaN propagates through min and max", function()
  for _, v in ipairs(variants) do
    for _, dtype in ipairs({ "float32", "float64" }) do
      for _, op in ipairs({ "min", "max" }) do
        H.variant_it(v, string.format("%s %s %s with one NaN", v.name, op, dtype), function()
          local b = gr.buffer(70001, dtype):random(5, -1, 1)
          b:set({ 0 / 0 }, 40000)
          local got = gr.reduce(b, { op = op, variant = v.name })
          assert(got ~= got, "expected NaN, got " .. tostring(got))
        end)
      end
    end
  end
end)

describe("repeated reductions give identical bits", function()
  for _, v in ipairs(variants) do
    -- atomics in shared or global memory combine floats in arrival order: only exact types there
    local dtype = v.name:find("atomic") and "int64" or "float32"
    H.variant_it(v, string.format("%s sum %s, five times", v.name, dtype), function()
      local b = gr.buffer(3000017, dtype):random(11, -1000, 1000)
      local first = gr.sum(b, { variant = v.name })
      for _ = 1, 4 do
        local again = gr.sum(b, { variant = v.name })
        assert(string.pack("d", again) == string.pack("d", first), "result changed: " .. again .. " vs " .. first)
      end
    end)
  end
end)

describe("sizes above 2^31 elements #slow", function()
  local n = (1 << 31) + 33
  local cached = {}
  local function big(op)
    if cached.op ~= op then
      if cached.b then cached.b:free() end
      cached = { op = op, b = H.fill_case(gr.buffer(n, "uint8"), "uint8", op, 2) }
      -- the host backend is the reference here (threaded C): 2^31 elements are too many for Lua
      cached.want = gr.reduce(cached.b, { op = op, variant = "cpu" })
      cached.sum_before = gr.sum(cached.b, { variant = "cpu" })
    end
    return cached
  end
  for _, op in ipairs(H.classic_ops) do          -- indices past 2^31 of the later ops: ops_spec.lua
    for _, v in ipairs(variants) do
      if H.needs_cuda(v) then
        H.gpu_it(string.format("%s %s uint8 n=2^31+33", v.name, op), function()
          local c = big(op)
          assert.are.equal(c.want, gr.reduce(c.b, { op = op, variant = v.name }))
          assert.are.equal(c.sum_before, gr.sum(c.b, { variant = "cpu" }))
        end)
      end
    end
  end
end)
