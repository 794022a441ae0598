-- The experiment lab (experiments/sweep.lua): options, configurations, result files, and validation that
-- fails loudly. Runs on any backend; sub-processes use this interpreter and this checkout's module.
local gr = require "gpureduce"
local json = require "dkjson"

local L = require "support.lab_script"          -- puts experiments/ on the path
local H = require("support.helpers").bind(it, function(reason) pending(reason) end)
local cli = require "lab.cli"
local matrix = require "lab.matrix"
local output = require "lab.output"

local root, q = L.root, L.q
local tmpdir, write_file, read, decode, csv_split = L.tmpdir, L.write_file, L.read, L.decode, L.csv_split

--- Runs sweep.lua; returns the exit code, stdout and stderr.
local function sweep(args, extra_env) return L.run("sweep.lua", args, extra_env) end

local function parse(argv)
  local args, err = cli.parse(gr, argv)
  if not args then return nil, err end
  return (cli.settings(gr, args))
end

describe("sweep options", function()
  it("have defaults for this backend", function()
    local s = assert(parse({}))
    assert.same({ "sum" }, s.ops)
    assert.same({ "float32" }, s.dtypes)
    assert.same({ "default" }, s.blocks)
    assert.same({ "default" }, s.finishes)
    assert.equal(20, s.reps)
    assert.equal(3, s.warmup)
    assert.equal(1 << 24, s.host_max)
    assert.equal("results", s.out)
    assert.is_false(s.rotate)
    local catalogue = {}                     -- user kernels other specs registered are not swept by default
    for _, name in ipairs(gr.variant_names()) do
      if not gr.variant(name).user then catalogue[#catalogue + 1] = name end
    end
    assert.same(catalogue, s.variants)
    if gr.backend() == "cuda" then
      assert.same({ 1 << 20, 1 << 24, 1 << 28 }, s.sizes)
    else
      assert.same({ 1 << 20, 1 << 22 }, s.sizes)    -- the CPU backend's cap
    end
  end)

  it("parse lists of sizes, names and block sizes", function()
    local s = assert(parse({ "--sizes", "2^20,1024", "--ops", "sum,max", "--dtypes", "float32,int8",
      "--blocks", "256,default", "--finishes", "default,device,single", "--host-max", "2^20" }))
    assert.same({ 1048576, 1024 }, s.sizes)
    assert.same({ "sum", "max" }, s.ops)
    assert.same({ "float32", "int8" }, s.dtypes)
    assert.same({ 256, "default" }, s.blocks)
    assert.same({ "default", "device", "single" }, s.finishes)
    assert.equal(1 << 20, s.host_max)
    s = assert(parse({ "--sizes", "2^20+1, 1M,64K", "--ops", "all", "--dtypes", "all" }))
    assert.same({ 1048577, 1048576, 65536 }, s.sizes)
    assert.same(gr.ops(), s.ops)
    assert.same(gr.dtypes(), s.dtypes)
  end)

  it("--quick picks a small sweep, explicit options win", function()
    local s = assert(parse({ "--quick" }))
    assert.same({ 1 << 16, 1 << 20 }, s.sizes)
    assert.equal(5, s.reps)
    assert.equal(1, s.warmup)
    assert.truthy(#s.variants >= 1 and #s.variants <= #cli.QUICK_VARIANTS)
    s = assert(parse({ "--quick", "--reps", "7", "--sizes", "2^10" }))
    assert.equal(7, s.reps)
    assert.same({ 1024 }, s.sizes)
  end)

  it("name the option in errors on bad values", function()
    local cases = {
      { { "--sizes", "2^x" }, "%-%-sizes: '2%^x' is not a size" },
      { { "--sizes", "0" }, "%-%-sizes: '0' is not a size" },
      { { "--ops", "sum,foo" }, "%-%-ops: 'foo' is not one of: sum" },
      { { "--dtypes", "float128" }, "%-%-dtypes: 'float128'" },
      { { "--variants", "nope" }, "%-%-variants: 'nope' is not one of" },
      { { "--variants", "all,cpu" }, "%-%-variants: 'all' cannot be combined" },
      { { "--blocks", "2048" }, "%-%-blocks: '2048'" },
      { { "--finishes", "sometimes" }, "%-%-finishes: 'sometimes'" },
      { { "--reps", "0" }, "%-%-reps: '0'" },
      { { "--frobnicate" }, "unknown option '%-%-frobnicate'" },
      { { "--operators", "/nonexistent.lua" }, "%-%-operators: cannot open /nonexistent.lua" },
      { { "--kernels", "/nonexistent.lua" }, "%-%-kernels: cannot open /nonexistent.lua" },
    }
    for _, c in ipairs(cases) do
      local s, err = parse(c[1])
      assert.is_nil(s, table.concat(c[1], " "))
      assert.matches(c[2], err)
    end
  end)

  it("exits 1 with usage and the error on a bad value", function()
    local code, out, stderr = sweep("--sizes 2^x")
    assert.equal(1, code)
    assert.equal("", out)
    assert.matches("Usage: sweep.lua", stderr)
    assert.matches("Error: %-%-sizes: '2%^x' is not a size", stderr)
  end)

  it("take --inject-wrong-reference alone or with a variant", function()
    assert.equal("all", assert(parse({ "--inject-wrong-reference" })).inject)
    assert.equal("cpu", assert(parse({ "--inject-wrong-reference", "cpu" })).inject)
    assert.is_nil(assert(parse({})).inject)
  end)

  it("--help documents the options and the self-test", function()
    local code, out = sweep("--help")
    assert.equal(0, code)
    for _, opt in ipairs({ "--variants", "--sizes", "--ops", "--dtypes", "--blocks", "--finishes", "--reps",
      "--warmup", "--rotate", "--host-max", "--out", "--quick", "--inject-wrong-reference" }) do
      assert.matches(opt:gsub("%-", "%%-"), out)
    end
  end)
end)

describe("sweep configurations", function()
  local kernel = { name = "k", ordinal = 2, finishes = { "device", "hybrid", "single" },
    default_finish = "device", block = { min = 64, max = 512, default = 256 },
    needs = { "cuda", "power-of-two block" } }
  local yardstick = { name = "y", ordinal = 14, finishes = { "single" }, default_finish = "single",
    block = { min = 1, max = 1, default = 1 }, needs = { "cuda" } }
  local host = { name = "h", ordinal = 0, finishes = { "host" }, default_finish = "host",
    block = { min = 1, max = 1, default = 1 }, needs = {} }

  it("skip and count what a variant cannot run", function()
    local blocks, finishes = { "default", 32, 384, 512 }, { "default", "host", "single" }
    local list, skipped = matrix.variant_configs(kernel, blocks, finishes)
    local got = {}
    for _, c in ipairs(list) do got[#got + 1] = c.block .. "/" .. c.finish end
    -- 32 is below the range, 384 not a power of two, "host" not a finish of k
    assert.same({ "256/device", "256/single", "512/device", "512/single" }, got)
    assert.equal(8, skipped)
    -- a fixed block ignores --blocks; "default" and "single" name one run
    list, skipped = matrix.variant_configs(yardstick, blocks, finishes)
    assert.equal(1, #list)
    assert.equal("single", list[1].finish)
    assert.equal(1, skipped)
  end)

  it("cap host variants at --host-max and cross dtypes x ops x sizes", function()
    local s = { variants = { "k", "h" }, blocks = { "default" }, finishes = { "default" },
      dtypes = { "float32" }, ops = { "sum", "max" }, sizes = { 1024, 1 << 26 }, host_max = 1 << 24 }
    local groups, counts = matrix.build({ host, kernel }, s)
    assert.equal(4, #groups)
    assert.equal(6, counts.configs)
    assert.equal(2, counts.host_capped)
    assert.equal(0, counts.unsupported)
    assert.equal("h", groups[1].configs[1].variant.name)      -- teaching order
    assert.equal(1, #groups[2].configs)                         -- n = 2^26: the kernel only
  end)

  -- On a GPU `--quick --ops all` ran the classic kernels over the ops they do not take and counted each
  -- refusal as a failure (832 of 2128 on an H100).
  it("skip and count the ops a variant does not take", function()
    local classic = { name = "c", ordinal = 3, finishes = { "device" }, default_finish = "device",
      block = { min = 32, max = 1024, default = 256 }, needs = { "cuda" }, ops = { "sum", "max" } }
    local s = { variants = { "c", "h" }, blocks = { "default" }, finishes = { "default" },
      dtypes = { "float32" }, ops = { "sum", "var" }, sizes = { 1024 }, host_max = 1 << 24 }
    local groups, counts = matrix.build({ host, classic }, s)
    assert.equal(2, #groups)
    assert.equal(2, #groups[1].configs)                         -- sum: both
    assert.equal(1, #groups[2].configs)                         -- var: the host variant only
    assert.equal("h", groups[2].configs[1].variant.name)
    assert.equal(1, counts.unsupported)
    assert.is_true(matrix.takes(host, "var"))                   -- a row without a list takes every op
    assert.is_false(matrix.takes(classic, "var"))
  end)

  -- On an H100 `--ops all --dtypes all` ran atomic_shared over float16, which it refuses, and counted the
  -- refusal as a failure: a dtype the row does not list is skipped and counted like an op.
  it("skip and count the dtypes a variant does not take", function()
    local narrow = { name = "a", ordinal = 5, finishes = { "device" }, default_finish = "device",
      block = { min = 32, max = 1024, default = 256 }, needs = { "cuda" }, ops = { "sum" },
      dtypes = { "float32", "int32" } }
    local s = { variants = { "a", "h" }, blocks = { "default" }, finishes = { "default" },
      dtypes = { "float32", "float16" }, ops = { "sum" }, sizes = { 1024 }, host_max = 1 << 24 }
    local groups, counts = matrix.build({ host, narrow }, s)
    assert.equal(2, #groups)
    assert.equal("float32", groups[1].dtype)
    assert.equal(2, #groups[1].configs)                         -- float32: both
    assert.equal("float16", groups[2].dtype)
    assert.equal(1, #groups[2].configs)                         -- float16: the host variant only
    assert.equal("h", groups[2].configs[1].variant.name)
    assert.equal(3, counts.configs)
    assert.equal(1, counts.unsupported)
    assert.is_true(matrix.takes(narrow, "sum", "int32"))
    assert.is_false(matrix.takes(narrow, "sum", "float16"))
    assert.is_true(matrix.takes(host, "sum", "float16"))        -- a row without a list takes every dtype
  end)
end)

describe("sweep result files", function()
  it("keep a float a float: integral values past 14 digits read back as floats, every bit kept", function()
    local doc = { header = { tool = "t" }, results = { { value = 4612345678901234.0, reference = 2.0 ^ 60 } } }
    local back = json.decode(output.encode_json(doc))
    assert.equal("float", math.type(back.results[1].value))
    assert.equal(4612345678901234.0, back.results[1].value)
    assert.equal("float", math.type(back.results[1].reference))
    assert.equal(2.0 ^ 60, back.results[1].reference)
  end)
end)

describe("sweep validation", function()
  teardown(function()
    L.cleanup()
  end)

  it("passes correct results: var of float64 (issue 20), every op and dtype, each within its bound", function()
    local dir = tmpdir()
    local code, out, stderr = sweep("--quick --ops var --dtypes float64 --no-plot --no-progress --out " .. q(dir))
    assert.equal(0, code, out .. stderr)
    assert.matches("reference computed in Lua", out)
    local doc = decode(dir .. "/sweep.json")
    assert.is_true(#doc.results > 0)
    for _, r in ipairs(doc.results) do
      assert.is_true(r.valid, r.variant)
      assert.is_true(r.bound > 0 and r.bound < 1e-6, r.variant)     -- float64, even in any order (cpu)
      assert.equal("integer", math.type(r.depth))
      assert.is_true(math.abs(r.value - r.reference) <= r.bound)
    end
    code, out, stderr = sweep("--ops all --dtypes all --sizes 1000,2^12+1 --reps 1 --warmup 0 --no-plot "
      .. "--no-progress --out " .. q(dir))
    assert.equal(0, code, out .. stderr)
    doc = decode(dir .. "/sweep.json")
    assert.equal(0, doc.header.failed)
    -- each variant over the ops and the dtypes it takes (the classic kernels take six ops, atomic_shared
    -- no float16), at two sizes
    local taken = 0
    for _, name in ipairs(doc.header.options.variants) do
      local v = gr.variant(name)
      taken = taken + #v.ops * #v.dtypes
    end
    assert.equal(taken * 2, #doc.results)
    assert.equal(#doc.results, doc.header.configs)
    for _, r in ipairs(doc.results) do
      local label = r.variant .. " " .. r.dtype .. " " .. r.op
      if type(r.value) == "boolean" or math.type(r.value) == "integer" then assert.equal(0, r.bound, label) end
      if r.dtype:find("float") and (r.op == "sum" or r.op == "var") then assert.is_true(r.bound > 0, label) end
    end
  end)
end)

describe("sweep runs", function()
  teardown(function()
    L.cleanup()
  end)

  it("write JSON and CSV with the documented header and fields", function()
    local dir = tmpdir()
    local code, out, stderr = sweep("--sizes 2^10,2^12 --ops sum,max --dtypes float32,int32 "
      .. "--reps 2 --warmup 0 --variants cpu,cpu_pairwise --out " .. q(dir) .. " --no-progress")
    assert.equal(0, code, out .. stderr)
    assert.matches("== float32 sum, n = 2%^10", out)
    assert.matches("✓", out)

    local doc = decode(dir .. "/sweep.json")
    local h = doc.header
    for _, k in ipairs(output.HEADER_KEYS) do assert.is_not_nil(h[k], "header." .. k) end
    assert.equal(gr.version, h.version)
    assert.equal(gr.backend(), h.backend)
    assert.equal("string", type(h.device))
    assert.equal("string", type(h.git_revision))
    assert.matches("^%d%d%d%d%-%d%d%-%d%dT%d%d:%d%d:%d%dZ$", h.date)
    for _, k in ipairs({ "sms", "l2", "read_ceiling_gbps" }) do     -- device facts: null on the CPU
      local got = h[k] == json.null and "null" or type(h[k])
      assert.equal(gr.backend() == "cuda" and "number" or "null", got, "header." .. k)
    end
    assert.same({ 1024, 4096 }, h.options.sizes)
    assert.equal("--sizes", h.argv[2])
    assert.equal(16, h.configs)
    assert.equal(0, h.failed)

    assert.equal(16, #doc.results)
    for _, r in ipairs(doc.results) do
      local label = r.variant .. " " .. r.dtype .. " " .. r.op .. " " .. tostring(r.n)
      for _, k in ipairs(output.RESULT_KEYS) do assert.is_not_nil(r[k], label .. ": " .. k) end
      assert.equal("string", type(r.variant))
      assert.equal("integer", math.type(r.ordinal))
      assert.equal("integer", math.type(r.n))
      assert.is_true(r.valid, label)
      assert.equal(json.null, r.error)
      assert.equal("number", type(r.ms), label)
      assert.is_true(r.ms > 0 and r.ms_min <= r.ms and r.ms <= r.ms_max, label)
      assert.is_true(r.gbps > 0, label)
      assert.equal(1, r.passes)
      if r.dtype == "int32" then
        assert.equal("integer", math.type(r.value), label)
        assert.equal(r.reference, r.value, label)
      else
        assert.equal("float", math.type(r.value), label)
      end
    end

    local lines = {}
    for line in read(dir .. "/sweep.csv"):gmatch("[^\n]+") do lines[#lines + 1] = line end
    for i, k in ipairs(output.HEADER_KEYS) do
      assert.matches("^# " .. k .. "=", lines[i])
    end
    assert.equal(table.concat(output.RESULT_KEYS, ","), lines[#output.HEADER_KEYS + 1])
    assert.equal(#output.HEADER_KEYS + 1 + 16, #lines)
    for i = #output.HEADER_KEYS + 2, #lines do
      assert.equal(#output.RESULT_KEYS, #csv_split(lines[i]), lines[i])
    end

    if os.execute("command -v gnuplot >/dev/null 2>&1") then
      for _, name in ipairs({ "sweep-gbps-float32-sum.png", "sweep-time-int32-max.png" }) do
        local f = io.open(dir .. "/" .. name, "rb")
        assert.is_not_nil(f, name)
        assert.equal("\137PNG", f:read(4))
        f:close()
      end
    end
  end)

  it("exit 1 at once when the results cannot be written", function()
    local code, out, stderr = sweep("--variants cpu --sizes 2^10 --ops sum --reps 1 --no-plot --no-progress "
      .. "--out /proc/nope")
    assert.equal(1, code)
    assert.matches("cannot write results to /proc/nope", stderr)
    assert.is_nil(out:find("wrote", 1, true))
  end)

  it("fail loudly when the reference is wrong: ✗, not timed, exit status 1", function()
    local dir = tmpdir()
    local code, out, stderr = sweep("--inject-wrong-reference cpu_pairwise --variants cpu,cpu_pairwise "
      .. "--sizes 2^10 --ops sum,and --reps 2 --warmup 0 --no-plot --no-progress --out " .. q(dir))
    assert.equal(1, code)
    assert.matches("✗", out)
    assert.matches("FAILED: 2 configuration%(s%) not within their error bound", stderr)
    local doc = decode(dir .. "/sweep.json")
    assert.equal(2, doc.header.failed)
    for _, r in ipairs(doc.results) do
      if r.variant == "cpu_pairwise" then
        assert.is_false(r.valid)
        assert.equal(json.null, r.ms)
        assert.equal(json.null, r.gbps)
        assert.equal("string", type(r.error))
      else
        assert.is_true(r.valid)
        assert.equal("number", type(r.ms))
      end
    end
    code, out = sweep("--inject-wrong-reference --variants cpu --sizes 2^10 --reps 1 --no-plot --no-progress "
      .. "--out " .. q(dir))
    assert.equal(1, code)
    assert.matches("0 ✓, 1 ✗", out)
  end)

  it("--operators reads user operators from a file, refusing a bad one by entry", function()
    local ok_nvrtc = pcall(gr.operator, { name = "probe", map = "x", reduce = "a + b", identity = "0", acc = "float64" })
    local file = os.tmpname()
    local function write(text) write_file(file, text) end
    write("return { { like = 'sum' } }")
    local s, err = parse({ "--operators", file })
    assert.is_nil(s)
    assert.matches("entry 1: expected {operator = gr.operator{...}, like = <op>}", err, 1, true)
    if ok_nvrtc then
      write("local gr = require 'gpureduce' return { { like = 'summ', operator = gr.operator { name = 'u', "
        .. "map = 'x', reduce = 'a + b', identity = '0', acc = 'float64' } } }")
      s, err = parse({ "--operators", file })
      assert.is_nil(s)
      assert.matches("like = summ is not an op", err, 1, true)
      s = assert(parse({ "--operators", root .. "/experiments/operators/basic.lua" }))
      if gr.backend() == "cuda" then
        assert.equal("op_sum", s.operators[1].name)
        assert.equal("sum", s.operators[1].like)
      else
        assert.is_nil(s.operators, "the cpu backend skips them")
      end
    end
    os.remove(file)
  end)

  it("--operators on the CPU backend says they are skipped and completes", function()
    local dir = tmpdir()
    local code, out, stderr = sweep("--quick --no-plot --no-progress --operators "
      .. q(root .. "/experiments/operators/basic.lua") .. " --out " .. q(dir), "GPUREDUCE_BACKEND=cpu")
    assert.equal(0, code, out .. stderr)
    assert.matches("skipping --operators: user operators are timed on the GPU only", stderr, 1, true)
  end)

  it("--kernels registers user kernels from a file, refusing a bad one by entry", function()
    local file = os.tmpname()
    local function write(text) write_file(file, text) end
    local cases = {
      { "return 42", "must return a list, got number" },
      { "return {}", "returned no kernel" },
      { "return { 42 }", "entry 1: expected a gr.kernel spec {name =, source =, ...}" },
      { "return { 'no_such_kernel' }", "entry 1: expected a gr.kernel spec" },
      { "return { { name = 'sweep_k', source = 'int y;' } }", "entry 1: bad argument #1 to" },
      { "return { { name = 'sweep_k', source = 'sweep_k', block = { min = 48 } } }", "block: min 48 is not a power of two" },
      { "error('boom')", "raised:" },
    }
    for _, c in ipairs(cases) do
      write(c[1])
      local s, err = parse({ "--kernels", file })
      assert.is_nil(s, c[1])
      assert.matches(c[2], err, 1, true)
    end
    os.remove(file)
    local s = assert(parse({ "--kernels", root .. "/experiments/kernels/two_stage.lua" }))
    assert.is_true(gr.variant("two_stage").user)
    if gr.backend() == "cuda" then
      assert.same({ "two_stage" }, s.kernels)
      assert.equal("two_stage", s.variants[#s.variants])
    else
      assert.is_nil(s.kernels, "the cpu backend skips them")
      for _, v in ipairs(s.variants) do assert.not_equal("two_stage", v) end
    end
  end)

  it("--kernels on the CPU backend says they are skipped and completes", function()
    local dir = tmpdir()
    local code, out, stderr = sweep("--quick --no-plot --no-progress --sizes 2^10 --kernels "
      .. q(root .. "/experiments/kernels/two_stage.lua") .. " --out " .. q(dir), "GPUREDUCE_BACKEND=cpu")
    assert.equal(0, code, out .. stderr)
    assert.matches("skipping --kernels: user kernels run on the GPU only (registered: two_stage)", stderr, 1, true)
  end)

  it("--quick completes on the CPU backend and says so", function()
    local dir = tmpdir()
    local code, out, stderr = sweep("--quick --no-plot --no-progress --out " .. q(dir),
      "GPUREDUCE_BACKEND=cpu")
    assert.equal(0, code, out .. stderr)
    assert.matches("CPU backend", stderr)
    assert.matches("CPU backend", out)
    assert.matches("== float32 sum, n = 2%^16", out)
    assert.matches("== float32 sum, n = 2%^20", out)
    local doc = decode(dir .. "/sweep.json")
    assert.equal("cpu", doc.header.backend)
    assert.is_true(#doc.results > 0)
    for _, r in ipairs(doc.results) do assert.is_true(r.valid) end
  end)
end)

describe("sweep on the GPU", function()
  teardown(function()
    L.cleanup()
  end)

  H.gpu_it("--quick over every op and dtype exits 0: every variant within its bound #slow", function()
    local dir = tmpdir()
    local code, out, stderr = sweep("--quick --ops all --dtypes all --no-plot --no-progress --out " .. q(dir))
    assert.equal(0, code, out .. stderr)
    assert.equal(0, decode(dir .. "/sweep.json").header.failed)
  end)

  H.gpu_it("a wrong kernel fails validation: ✗, not timed, exit status 1", function()
    local dir = tmpdir()
    local code, out, stderr = sweep("--kernels " .. q(root .. "/experiments/kernels/drop_first.lua")
      .. " --variants warp_shuffle --ops sum --dtypes float64,int32 --sizes 2^20+3 --reps 2 --warmup 0"
      .. " --no-plot --no-progress --out " .. q(dir))
    assert.equal(1, code, out .. stderr)
    assert.matches("beyond the bound", stderr)
    local doc = decode(dir .. "/sweep.json")
    for _, r in ipairs(doc.results) do
      assert.equal(r.variant ~= "drop_first", r.valid, r.variant .. " " .. r.dtype)
    end
  end)
end)
