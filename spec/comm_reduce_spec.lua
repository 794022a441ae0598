-- c:reduce (engine/multi/comm.c; docs/api.md "Communicators"): one value, and along axes, on a
-- communicator of one rank -- where it must give gr.reduce's results bit for bit, NCCL's all-reduce of one
-- rank leaving them as they are -- and its errors. Several ranks: experiments/multi_gpu/env_rank.lua,
-- which launch.lua starts (comm_env_spec.lua runs it on two GPUs), checks every rank against the ranks'
-- local results combined in Lua (experiments/multi_gpu/across.lua).
-- Needs a GPU and NCCL (pending without them): a communicator is NCCL's.
local gr = require "gpureduce"
local H = require("support.helpers").bind(it, function(reason) pending(reason) end)
local L = require "support.lab_script"            -- puts experiments/ on package.path
local across = require "multi_gpu.across"

--- An `it` that needs a GPU and NCCL; pending without either.
local function nccl_it(title, fn)
  H.gpu_it(title, function()
    if not gr.nccl_version() then
      pending("nccl: libnccl.so.2 cannot be opened")
      return
    end
    fn()
  end)
end

--- A communicator of one rank, for the length of body(c).
local function with_comm(body)
  local c = gr.comm { rank = 0, size = 1, id = gr.comm_id(), timeout = 20 }
  local ok, err = pcall(body, c)
  c:destroy()
  if not ok then error(err, 0) end
end

local FORMS = { { axis = 1 }, { axis = 2 }, { axis = -1, keepdims = true }, { axis = { 1, 2 } },
  { axis = { 2, 1 }, keepdims = true } }

local function form_name(f)
  return "axis " .. (type(f.axis) == "table" and "{" .. table.concat(f.axis, ", ") .. "}" or tostring(f.axis)) ..
    (f.keepdims and " keepdims" or "")
end

describe("c:reduce along axes on one rank", function()
  nccl_it("gives gr.reduce's result buffer bit for bit: every op across ranks, every dtype, every form", function()
    with_comm(function(c)
      for _, dtype in ipairs(across.DTYPES) do
        for _, op in ipairs(across.OPS) do
          local m = across.data(gr, dtype, op, 0, 37 * 129, 1):view { 37, 129 }
          for _, form in ipairs(FORMS) do
            local opts = { op = op, axis = form.axis, keepdims = form.keepdims }
            local want = gr.reduce(m, opts)
            local got = c:reduce(m, opts)
            local label = string.format("%s %s %s", dtype, op, form_name(form))
            assert.are.same(want:shape(), got:shape(), label .. ": shape")
            assert.are.equal(want:dtype(), got:dtype(), label .. ": dtype")
            assert.are.equal(1, got:device(), label .. ": device")
            assert.are.equal(want:tobytes(), got:tobytes(), label)
          end
        end
      end
    end)
  end)

  nccl_it("sums bfloat16 and float16 in float32 partials: the reference, not 16-bit roundings", function()
    with_comm(function(c)
      for _, dtype in ipairs({ "bfloat16", "float16", "float8_e4m3" }) do
        -- 4096 ones down each column: 16-bit sums would stop at 256 (bfloat16) or 2048 (float16)
        local m = gr.buffer(4096 * 8, dtype):fill(1):view { 4096, 8 }
        local r = c:reduce(m, { op = "sum", axis = 1 })
        assert.are.equal("float32", r:dtype(), dtype)
        assert.are.same({ 4096, 4096, 4096, 4096, 4096, 4096, 4096, 4096 }, r:totable(), dtype)
      end
    end)
  end)

  nccl_it("checks its results against Lua's own sums, minima and flags of the elements", function()
    with_comm(function(c)
      local rows, cols = 41, 23
      local m = gr.buffer(rows * cols, "int32"):random(5, -1000, 1000):view { rows, cols }
      local t = m:totable()
      local sums, mins, anys = c:reduce(m, { op = "sum", axis = 1 }):totable(),
        c:reduce(m, { op = "min", axis = 2 }):totable(), c:reduce(m, { op = "or", axis = 1 }):totable()
      for j = 1, cols do
        local s, any = 0, 0
        for i = 1, rows do
          s = s + t[i][j]
          if t[i][j] ~= 0 then any = 1 end
        end
        assert.are.equal(s, sums[j], "sum of column " .. j)
        assert.are.equal(any, anys[j], "or of column " .. j)
      end
      for i = 1, rows do
        local lo = math.huge
        for j = 1, cols do lo = math.min(lo, t[i][j]) end
        assert.are.equal(lo, mins[i], "min of row " .. i)
      end
    end)
  end)

  nccl_it("reduces strided views as they are, and writes into opts.out", function()
    with_comm(function(c)
      local m = gr.buffer(64 * 48, "float32"):random(3, -1, 1):view { 64, 48 }
      local t = m:transpose()
      assert.are.equal(gr.sum(t, { axis = 1 }):tobytes(), c:reduce(t, { op = "sum", axis = 1 }):tobytes())
      assert.are.equal(gr.max(m:narrow(2, 5, 20), { axis = 2 }):tobytes(),
        c:reduce(m:narrow(2, 5, 20), { op = "max", axis = 2 }):tobytes())
      local out = gr.buffer(48, "float32")
      assert.are.equal(out, c:reduce(m, { op = "sum", axis = 1, out = out }))
      assert.are.equal(gr.sum(m, { axis = 1 }):tobytes(), out:tobytes())
    end)
  end)

  nccl_it("refuses what does not combine across ranks or does not apply, naming it", function()
    with_comm(function(c)
      local m = gr.buffer(12, "float32"):iota(1):view { 3, 4 }
      local accepted = "(accepted: sum, prod, min, max, and, or, count, sumsq, nansum, nanmin, nanmax, absmax, asum)"
      for _, op in ipairs({ "mean", "var", "std", "norm", "nanmean", "argmin", "argmax", "minmax" }) do
        H.expect_error("opts.op: '" .. op .. "' across ranks is not built " .. accepted, c.reduce, c, m,
          { op = op, axis = 1 })
        H.expect_error("'" .. op .. "' across ranks is not built", c.reduce, c, m:contiguous(), { op = op })
      end
      H.expect_error("opts.axis: 3 is not an axis of this 2-axis buffer", c.reduce, c, m, { axis = 3 })
      H.expect_error("opts.keepdims goes with opts.axis", c.reduce, c, m, { keepdims = true })
      H.expect_error("opts.stream: c:reduce along axes runs on the communicator's stream", c.reduce, c, m,
        { axis = 1, stream = gr.stream() })
      H.expect_error("opts: c:reduce takes a built-in op", c.reduce, c, m, { axis = 1, async = true })
      H.expect_error("opts.out: must have the result's shape {4} (got {3})", c.reduce, c, m,
        { axis = 1, out = gr.buffer(3, "float32") })
      local host = gr.buffer(12, "float32", { where = "host" }):view { 3, 4 }
      H.expect_error("b: the buffer is host memory of device 1, the communicator's device is 1", c.reduce, c, host,
        { axis = 1 })
    end)
  end)
end)

describe("c:reduce of one value on one rank", function()
  nccl_it("gives gr.reduce's value bit for bit, kept on the device or through the host", function()
    with_comm(function(c)
      local ways = { {}, { finish = "device" }, { finish = "hybrid" }, { finish = "host" }, { finish = "single" },
        { determinism = "gpu_to_gpu" }, { variant = "interleaved" }, { variant = "cpu" } }
      for _, dtype in ipairs(across.DTYPES) do
        for _, op in ipairs(across.OPS) do
          for _, n in ipairs({ 1, 33, 4097, 1000003 }) do
            local b = across.data(gr, dtype, op, 0, n, 1)
            for _, way in ipairs(ways) do
              local opts = { op = op }
              for k, v in pairs(way) do opts[k] = v end
              local ok, want = pcall(gr.reduce, b, opts)
              if ok then
                local got = c:reduce(b, opts)
                assert(H.same_result(want, got), string.format("%s %s n = %d %s: %s, gr.reduce %s", dtype, op, n,
                  H.describe_opts(opts), tostring(got), tostring(want)))
              else
                -- what gr.reduce refuses (a variant without the op or dtype), c:reduce refuses with its words
                H.expect_error(tostring(want):match("opts%.%a+") or "", c.reduce, c, b, opts)
              end
            end
          end
        end
      end
    end)
  end)

  nccl_it("reduces host buffers, strided views and buffers of every dtype's kinds as gr.reduce does", function()
    with_comm(function(c)
      local h = gr.buffer(1000, "int64", { where = "host" }):iota(1)
      assert.are.equal(500500, c:reduce(h))
      local m = gr.buffer(60, "float64"):random(2, -1, 1):view { 6, 10 }
      assert(H.same_result(gr.sum(m:transpose()), c:reduce(m:transpose())))
      assert.are.equal(false, c:reduce(gr.buffer(8, "bool"), { op = "or" }))
      assert.are.equal(true, c:reduce(gr.buffer(8, "bool"):fill(true), { op = "min" }))
      assert.are.equal(math.type(gr.sum(gr.buffer(4, "uint8"))), math.type(c:reduce(gr.buffer(4, "uint8"))))
      assert.are.equal(0, c:reduce(gr.buffer(0, "int32")))
      H.expect_error("min of an empty buffer is undefined", c.reduce, c, gr.buffer(0, "float32"), { op = "min" })
    end)
  end)
end)

describe("gr.comm on a device that does not exist", function()
  it("says which device was asked for and how many there are (the cpu backend: that it needs CUDA)", function()
    local ndev = #gr.devices()
    local want = gr.backend() == "cuda" and gr.nccl_version() and
      string.format("opts.device: %d is out of range (devices: 1 to %d)", ndev + 1, ndev) or
      gr.backend() == "cpu" and "communicators need NCCL and a CUDA device (backend is cpu)" or "NCCL"
    H.expect_error(want, gr.comm, { rank = 0, size = 1, id = "/nonexistent/id", timeout = 1, device = ndev + 1 })
  end)
end)
