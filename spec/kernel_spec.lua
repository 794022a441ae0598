-- User kernel variants (gr.kernel): the table's checks and their messages, the registry's rows, compile
-- errors in the source's own lines, a missing or mismatched entry point, the cpu backend's refusal, and
-- on the GPU the worked examples of experiments/kernels/ over every op, dtype, edge size and finishing
-- mode against the independent Lua reference, with user operators, plans, benchmarks, and a kernel that
-- faults (in a child process: the CUDA context is lost for good). NVRTC needs no GPU: the compile tests
-- run in CI, pending where there is no NVRTC.
--
-- The registry is the process's: the kernels registered here stay for the spec files after this one,
-- whose generated cases take the catalogue only (H.variants()).
local gr = require "gpureduce"
local H = require("support.helpers").bind(it, function(reason) pending(reason) end)
local R = require "support.fuzz_reference"

local expect = H.expect_error

local root = (debug.getinfo(1, "S").source:match("^@(.*)/spec/[^/]*$")) or "."
local TWO_STAGE = dofile(root .. "/experiments/kernels/two_stage.lua")[1]
local KAHAN = dofile(root .. "/experiments/kernels/kahan.lua")[1].operator

local two_stage = gr.kernel(TWO_STAGE)

-- NVRTC is there when a kernel compiles (without it, gr.kernel registers and compiles nothing).
local has_nvrtc = pcall(gr.kernel_compile, "two_stage", {})

local nvrtc_it = H.it_if(has_nvrtc, "no NVRTC on this machine: kernels are not compiled")

--- A spec of a kernel that reduces with the catalogue's loop, with some fields replaced (false removes).
local PLAIN = [[
template <class Op, class In>
__device__ typename Op::acc_t plain(const In *in, size_t n, unsigned long long first) {
    return gr::block_reduce<Op>(gr::thread_accumulate<Op, In, 2>(in, n, first));
}
]]
local function spec(changes)
  local s = { name = "plain", source = PLAIN }
  for k, v in pairs(changes or {}) do
    if v == false then s[k] = nil else s[k] = v end
  end
  return s
end

local function names(list)
  local c = { table.unpack(list) }
  table.sort(c)
  return table.concat(c, ",")
end

--- A restricted kernel, registered by whichever test needs it first (the same spec again is the same
-- row): busted may run these tests in different processes.
local function small_kernel()
  return gr.kernel(spec { name = "spec_small", entry = "plain", block = { min = 64, max = 256 },
    finishes = { "host", "device" }, ops = { "max", "sum" }, determinism = "not_guaranteed",
    summary = "a small one" })
end

describe("gr.kernel", function()
  it("registers a user kernel: a registry row after the catalogue, marked user", function()
    assert.equal("two_stage", two_stage.name)
    assert.is_true(two_stage.user)
    assert.is_true(two_stage.ordinal >= 100)
    assert.equal("a user kernel (gr.kernel)", two_stage.origin)
    assert.equal(TWO_STAGE.summary, two_stage.summary)
    assert.equal("device,host,hybrid,single", names(two_stage.finishes))
    assert.equal("single", two_stage.default_finish)
    assert.same({ min = 32, max = 1024, default = 256 }, two_stage.block)
    assert.same(gr.ops(), two_stage.ops)
    assert.equal("run_to_run", two_stage.determinism)
    assert.same({ "cuda", "power-of-two block" }, two_stage.needs)
    assert.equal(gr.backend() == "cuda", two_stage.available)
    assert.same(two_stage, gr.variant("two_stage"))
    assert.is_false(gr.variant("warp_shuffle").user)
    for _, v in ipairs(H.variants()) do assert.not_equal("two_stage", v.name, "H.variants() is the catalogue") end
    local all = gr.variant_names({ all = true })
    assert.equal("two_stage", all[#all])
  end)

  it("takes the same spec again (the same row), and refuses the name for another", function()
    local again = gr.kernel(TWO_STAGE)
    assert.equal(two_stage.ordinal, again.ordinal)
    local n = #gr.variants()
    gr.kernel(TWO_STAGE)
    assert.equal(n, #gr.variants())
    local other = {}
    for k, v in pairs(TWO_STAGE) do other[k] = v end
    other.block = { min = 64 }
    expect("name: 'two_stage' is registered already, with another definition", gr.kernel, other)
    expect("name: 'warp_shuffle' is a catalogue variant", gr.kernel, spec { name = "warp_shuffle" })
    expect("name: 'auto' is what opts.variant calls the automatic choice", gr.kernel, spec { name = "auto" })
  end)

  it("keeps the block range, finishing modes, ops and determinism it is given", function()
    local v = small_kernel()
    assert.same({ min = 64, max = 256, default = 256 }, v.block)
    assert.equal("device,host", names(v.finishes))
    assert.equal("device", v.default_finish)
    assert.same({ "sum", "max" }, v.ops)
    assert.equal("not_guaranteed", v.determinism)
    assert.equal("a small one", v.summary)
    local one = gr.kernel(spec { name = "spec_one_block", entry = "plain", block = 128, ops = { "all" } })
    assert.same({ min = 128, max = 128, default = 128 }, one.block)
    assert.same({ "and" }, one.ops)
  end)

  it("refuses a bad table, naming the field and what it accepts", function()
    local cases = {
      { spec { sorce = "x" }, "unknown field 'sorce' (accepted: block, determinism, entry, finishes, name, ops, source, summary)" },
      { spec { name = false }, "name: is required" },
      { spec { name = "2x" }, "name: '2x' is not a word" },
      { spec { name = 7 }, "name: expected a string, got number" },
      { spec { source = false }, "source: is required (expected CUDA C++ that defines the entry point plain)" },
      { spec { source = 42 }, "source: expected a string (CUDA C++ that defines the entry point), got number" },
      { spec { source = "  " }, "source: is empty" },
      { spec { name = "nothing_here" }, "source: does not define the entry point nothing_here" },
      { spec { name = "k1", entry = "missing" }, "source: does not define the entry point missing" },
      { spec { name = "k1", entry = "not a name" }, "entry: 'not a name' is not a C name" },
      { spec { name = "k1", entry = "plain", block = "big" }, "block: expected a table {min =, max =, default =} or one block size, got string" },
      { spec { name = "k1", entry = "plain", block = { min = 48 } }, "block: min 48 is not a power of two from 32 to 1024" },
      { spec { name = "k1", entry = "plain", block = { max = 2048 } }, "block: max 2048 is not a power of two" },
      { spec { name = "k1", entry = "plain", block = { min = 512, max = 128 } }, "expected min <= default <= max" },
      { spec { name = "k1", entry = "plain", block = { min = 64, max = 128, default = 256 } }, "block: min 64, default 256, max 128" },
      { spec { name = "k1", entry = "plain", block = { min = 64.5 } }, "block.min: expected a block size (a power of two from 32 to 1024), got 64.5" },
      { spec { name = "k1", entry = "plain", block = { mn = 64 } }, "unknown field 'block.mn' (accepted: default, max, min)" },
      { spec { name = "k1", entry = "plain", finishes = "single" }, "finishes: expected a list of names (device, hybrid, host, single), got string" },
      { spec { name = "k1", entry = "plain", finishes = {} }, "finishes: is empty" },
      { spec { name = "k1", entry = "plain", finishes = { "fast" } }, "finishes[1]: 'fast' is not accepted (accepted: device, hybrid, host, single)" },
      { spec { name = "k1", entry = "plain", finishes = { "single", "auto" } }, "finishes[2]: 'auto' is not accepted" },
      { spec { name = "k1", entry = "plain", ops = { "sum", 3 } }, "ops[2]: number is not accepted (accepted: sum, prod" },
      { spec { name = "k1", entry = "plain", ops = { "summ" } }, "ops[1]: 'summ' is not accepted" },
      { spec { name = "k1", entry = "plain", determinism = "gpu_to_gpu" }, "determinism: a user kernel can promise not_guaranteed or run_to_run" },
      { spec { name = "k1", entry = "plain", determinism = "always" }, "determinism: unknown level 'always' (accepted: not_guaranteed, run_to_run)" },
      { spec { name = "k1", entry = "plain", summary = {} }, "summary: expected a string (one line), got table" },
    }
    for _, c in ipairs(cases) do expect(c[2], gr.kernel, c[1]) end
    expect("bad argument #1", gr.kernel, "plain")
    assert.is_nil(gr.variant("k1"), "a refused kernel is not registered")
  end)

  it("refuses to reduce with a user kernel where it cannot run, naming it", function()
    local b = gr.buffer({ 1, 2, 3 }, "int32")
    expect("opts.variant: user kernel 'two_stage' reduces one buffer per call", gr.reduce_many, { b },
      { variant = "two_stage" })
    if gr.backend() ~= "cuda" then
      expect("opts.variant: 'two_stage' needs a CUDA device (backend is cpu)", gr.sum, b, { variant = "two_stage" })
      expect("opts.variant: 'two_stage' needs a CUDA device (backend is cpu)", gr.plan, b, { variant = "two_stage" })
      expect("opts.variant: 'two_stage' needs a CUDA device (backend is cpu)", gr.bench, b, { variant = "two_stage" })
    end
    expect("opts.variant: segmented reductions choose their own kernel", gr.sum, b, { variant = "two_stage", segment = 1 })
    expect("'nope' is not a user kernel", gr.kernel_source, "nope")
    expect("'warp_shuffle' is not a user kernel", gr.kernel_compile, "warp_shuffle")
    expect("opts: takes op, dtype and acc", gr.kernel_source, "two_stage", { block = 64 })
  end)

  it("generates a source with the user's lines and the entry point's call numbered apart", function()
    local src = gr.kernel_source("two_stage", { op = "argmin", dtype = "int8" })
    assert.truthy(src:find('#include "user_kernel.cuh"', 1, true))
    assert.truthy(src:find('#line 1 "source"\n' .. TWO_STAGE.source, 1, true))
    assert.truthy(src:find('#line 1 "entry"\n        two_stage<gr_op_functor, gr_op_in>(in, n, first)', 1, true))
    assert.truthy(src:find("two_stage<gr::AccInput<gr_op_functor>, gr_op_acc>(in, n, 0ull)", 1, true))
    assert.truthy(src:find("gr::OpOf<gr::op_argmin, gr_op_in, signed char>::type", 1, true))
    assert.truthy(src:find("__launch_bounds__(1024)", 1, true))
    local with_op = gr.kernel_source("two_stage", { op = KAHAN, dtype = "float64" })
    assert.truthy(with_op:find("struct KahanAcc", 1, true))
    assert.truthy(with_op:find("gr_op_post", 1, true))
    expect("opts.acc: float64 is not accepted for min of float32", gr.kernel_source, "two_stage",
      { op = "min", acc = "float64" })
  end)

  describe("compiled with NVRTC", function()
    nvrtc_it("compiles the worked examples: two_stage for every op and every dtype, with the Kahan operator", function()
      local function ok(opts)
        local info = gr.kernel_compile("two_stage", opts)
        assert.truthy(info.origin == "nvrtc" or info.origin == "disk" or info.origin == "memory", info.origin)
        return info
      end
      for _, op in ipairs(gr.ops()) do ok({ op = op, dtype = "float32" }) end
      for _, dtype in ipairs(gr.dtypes()) do ok({ op = "sum", dtype = dtype }) end
      for _, op in ipairs({ "absmax", "max", "var" }) do
        for _, dtype in ipairs({ "float16", "bfloat16", "float8_e4m3", "float8_e5m2" }) do ok({ op = op, dtype = dtype }) end
      end
      for _, op in ipairs({ "argmax", "var", "norm", "minmax", "and" }) do ok({ op = op, dtype = "int8" }) end
      ok({ op = "sum", dtype = "float32", acc = "float64" })
      assert.equal(8, ok({ op = "sum", dtype = "int32" }).acc_size)
      assert.equal(16, ok({ op = "argmin", dtype = "float64" }).acc_size)
      for _, dtype in ipairs({ "float32", "float64", "int32" }) do
        assert.equal(16, ok({ op = KAHAN, dtype = dtype }).acc_size)
      end
    end)

    nvrtc_it("says a compile error in the source's own lines, with NVRTC's log", function()
      local src = "template <class Op, class In>\n__device__ typename Op::acc_t broken(const In *in, size_t n,\n"
        .. "                                       unsigned long long first) {\n    return y;\n}\n"
      local err = expect('gpureduce: source: 4:12: identifier "y" is undefined (kernel broken for sum over float32 elements)',
        gr.kernel, { name = "broken", source = src })
      assert.truthy(err:find("NVRTC's log:\nsource(4): error: identifier \"y\" is undefined", 1, true), err)
      assert.is_nil(gr.variant("broken"), "a kernel that does not compile is not registered")
      -- the first op it takes is the one compiled at registration
      expect("kernel broken for max over float32 elements", gr.kernel, { name = "broken", source = src, ops = { "max", "or" } })
    end)

    nvrtc_it("says when the entry point cannot be called as the engine calls it", function()
      local err = expect("gpureduce: source: the entry point wrongsig cannot be called as wrongsig<Op, In>(in, n, first): "
        .. "expected template <class Op, class In> __device__ typename Op::acc_t wrongsig(const In *in, size_t n, "
        .. "unsigned long long first)", gr.kernel, { name = "wrongsig", source = "__device__ float wrongsig(float x) { return x; }" })
      assert.truthy(err:find("NVRTC's log:", 1, true))
      expect("the entry point two_args cannot be called", gr.kernel, { name = "two_args", source =
        "template <class Op, class In> __device__ typename Op::acc_t two_args(const In *in, size_t n) { return Op::identity(); }" })
    end)

    nvrtc_it("compiles an op lazily: one its source cannot take fails at its first use, in its lines", function()
      gr.kernel { name = "scalar_only", source = [[
template <class Op, class In>
__device__ typename Op::acc_t scalar_only(const In *in, size_t n, unsigned long long first) {
    typename Op::acc_t v = 0;   // a number: not an accumulator struct
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        v = Op::combine(v, gr::load_at<Op>(in[i], first + i));
    return gr::block_reduce<Op>(v);
}
]] }
      gr.kernel_compile("scalar_only", { op = "max", dtype = "int32" })
      local err = expect("gpureduce: source: 3:28: ", gr.kernel_compile, "scalar_only", { op = "argmin", dtype = "float32" })
      assert.truthy(err:find("(kernel scalar_only for argmin over float32 elements)", 1, true), err)
    end)
  end)
end)

---------------------------------------------------------------------------------------------------------
-- On the GPU

--- A fresh buffer of n elements of the case's data (H.fill_case: every op meaningful), its values and
-- the reference's expectation.
local function case(dtype, op, n, seed)
  local b = H.fill_case(gr.buffer(n, dtype), dtype, op, seed)
  return b, R.expect(op, b:totable(), { dtype = dtype })
end

--- One reduction checked against the expectation; a failure's line, or nil.
local function check(b, op, e, opts)
  local ok, a, c = pcall(gr.reduce, b, opts)
  local good, why = R.check(op, ok, a, e, c)
  if good then return nil end
  return string.format("%s n=%d %s: %s", b:dtype(), #b, H.describe_opts(opts), tostring(why))
end

local function report(failures)
  assert(#failures == 0, #failures .. " failed:\n" .. table.concat(failures, "\n", 1, math.min(#failures, 20)))
end

local SMALL = { 0, 1, 31, 32, 33, 1023, 1024, 1025 }
local LARGE = (1 << 20) + 3
local LARGE_CASES = { sum = true, min = true, argmax = true, var = true }   -- over int8, float32, float64

describe("user kernels on the GPU", function()
  for _, dtype in ipairs(gr.dtypes()) do
    for _, op in ipairs(gr.ops()) do
      H.gpu_it(string.format("two_stage: %s over %s, every finishing mode, edge sizes, against the reference", op, dtype),
        function()
          local failures = {}
          local sizes = { table.unpack(SMALL) }
          if LARGE_CASES[op] and (dtype == "int8" or dtype == "float32" or dtype == "float64") then
            sizes[#sizes + 1] = LARGE
          end
          for k, n in ipairs(sizes) do
            local b, e = case(dtype, op, n, 1000 + k)
            local before = b:tobytes()
            for _, o in ipairs({ { finish = "single" }, { finish = "device" }, { finish = "host" },
                                 { finish = "hybrid", threshold = 2 }, { finish = "device", block = 32 },
                                 { finish = "single", block = 1024 } }) do
              o.op, o.variant = op, "two_stage"
              failures[#failures + 1] = check(b, op, e, o)
            end
            if b:tobytes() ~= before then failures[#failures + 1] = "n=" .. n .. ": the reduction wrote to its input" end
            b:free()
          end
          report(failures)
        end)
    end
  end

  H.gpu_it("two_stage: run_to_run float sums (sync, async, a kept graph) give the same bits", function()
    local b = gr.buffer(1000003, "float32"):random(5, -1, 1)
    local first = gr.sum(b, { variant = "two_stage" })
    for _ = 1, 5 do assert.equal(first, gr.sum(b, { variant = "two_stage" })) end
    assert.equal(first, gr.sum(b, { variant = "two_stage", async = true }):wait())
    local dev = gr.sum(b, { variant = "two_stage", finish = "device" })
    assert.equal(dev, gr.sum(b, { variant = "two_stage", finish = "device" }))
  end)

  H.gpu_it("two_stage: a slice at any element, streamed host data, a stream", function()
    local parent = gr.buffer(4099, "int32"):iota(1)
    for _, off in ipairs({ 2, 3, 4, 5 }) do
      local view = parent:slice(off, 4000)
      local want = 0
      for i = off, off + 3999 do want = want + i end
      assert.equal(want, gr.sum(view, { variant = "two_stage" }))
      assert.equal(off + 3999, select(2, gr.argmax(view, { variant = "two_stage" })) + off - 1)
    end
    local h = gr.buffer(100000, "float64", { where = "host" }):iota(1)
    assert.equal(100000 * 100001 / 2, gr.sum(h, { variant = "two_stage", streamed = true, chunk = 65536 }))
    local s = gr.stream()
    assert.equal(45, gr.sum(gr.buffer(10, "int8"):iota(0), { variant = "two_stage", stream = s }))
  end)

  H.gpu_it("two_stage with a user operator: the Kahan sum, device finishes only", function()
    local failures = {}
    for _, dtype in ipairs({ "float32", "float64" }) do
      for k, n in ipairs({ 0, 1, 33, 1025, 65537 }) do
        local b = gr.buffer(n, dtype):random(70 + k, -1, 1)
        local e = R.expect("sum", b:totable(), { dtype = dtype, acc = "float64" })
        for _, f in ipairs({ "single", "device" }) do
          failures[#failures + 1] = check(b, "sum", e, { op = KAHAN, variant = "two_stage", finish = f })
        end
      end
    end
    report(failures)
    local b = gr.buffer({ 1e16, 1, -1e16, 1 }, "float64")
    assert.equal(2.0, gr.reduce(b, { op = KAHAN, variant = "two_stage" }))
    expect("opts.finish: 'host' combines partials on the CPU, with the operator's cpu.reduce over numbers", gr.reduce, b,
      { op = KAHAN, variant = "two_stage", finish = "host" })
    small_kernel()
    expect("opts.op: user kernel 'spec_small' lists the ops it takes", gr.reduce, b, { op = KAHAN, variant = "spec_small" })
  end)

  H.gpu_it("a restricted kernel takes only its ops, finishes and blocks", function()
    small_kernel()
    local b = gr.buffer(5000, "float32"):iota(1)
    assert.equal(12502500.0, gr.sum(b, { variant = "spec_small", block = 64, finish = "host" }))
    assert.equal(5000.0, gr.max(b, { variant = "spec_small" }))
    expect("opts.finish: 'single' is not supported by variant 'spec_small' (accepted: auto, device, host)", gr.sum, b,
      { variant = "spec_small", finish = "single" })
    expect("opts.block: 512 is not accepted by variant 'spec_small' (accepted: 64, 128, 256)", gr.sum, b,
      { variant = "spec_small", block = 512 })
    expect("opts.op: 'min' is not taken by variant 'spec_small'", gr.min, b, { variant = "spec_small" })
    expect("opts.determinism: variant 'spec_small' gives not_guaranteed", gr.sum, b,
      { variant = "spec_small", determinism = "run_to_run" })
  end)

  H.gpu_it("gr.plan and gr.bench with a user kernel", function()
    local b = gr.buffer(1 << 20, "float32"):random(3)
    local p = gr.plan(b, { variant = "two_stage", finish = "device", block = 128 })
    assert.equal("two_stage", p.variant)
    assert.equal("device", p.finish)
    assert.is_true(#p.passes >= 2)
    assert.equal(128, p.passes[1].block)
    assert.equal("single", gr.plan(b, { variant = "two_stage" }).finish)
    local r = gr.bench(b, { variant = "two_stage", reps = 5, warmup = 1 })
    assert.equal("two_stage", r.plan.variant)
    assert.equal("events", r.timer)
    assert.is_true(r.ms > 0 and r.gbps > 0)
  end)

  H.gpu_it("a kernel that faults: the error says the CUDA context is lost (in a child process)", function()
    local ok, code, out = H.run_lua([[
local gr = require "gpureduce"
gr.kernel { name = "faulty", source = [=[
template <class Op, class In>
__device__ typename Op::acc_t faulty(const In *in, size_t n, unsigned long long first) {
    if (blockIdx.x == 0 && threadIdx.x == 0) *reinterpret_cast<volatile unsigned *>(gr::uptr(8)) = 1u;
    return gr::block_reduce<Op>(Op::identity());
}
]=] }
local b = gr.buffer(1000, "float32"):fill(1)
local ok1, e1 = pcall(gr.sum, b, { variant = "faulty" })
print("FIRST", ok1, e1)
local ok2, e2 = pcall(gr.sum, b)
print("AFTER", ok2, e2)
]])
    assert.is_true(ok, "the child exited with " .. tostring(code) .. ":\n" .. out)
    assert.truthy(out:find("FIRST\tfalse\tgpureduce: ", 1, true), out)
    assert.truthy(out:find("The CUDA context is lost (a kernel faulted, a user kernel perhaps): every later CUDA call "
      .. "of this process fails; restart the process", 1, true), out)
    assert.truthy(out:find("AFTER\tfalse\tgpureduce: ", 1, true), out)
    local _, lost = out:gsub("restart the process", "")
    assert.equal(2, lost, out)
  end)
end)
