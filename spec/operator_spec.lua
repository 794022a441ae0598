-- User operators (gr.operator): the table's checks and their messages, the generated source, compile
-- errors said in the field's terms, the caches in memory and on disk, and the identity check. NVRTC
-- needs no GPU, so all but the GPU's identity check run in CI; without NVRTC those tests are pending.
local gr = require "gpureduce"
local H = require("support.helpers").bind(it, function(reason) pending(reason) end)

local expect = H.expect_error

--- A valid spec with some fields replaced (false removes a field).
local function spec(changes)
  local s = { name = "l2", map = "x * x", reduce = "a + b", post = "sqrt(a)", identity = "0", acc = "float64" }
  for k, v in pairs(changes or {}) do
    if v == false then s[k] = nil else s[k] = v end
  end
  return s
end

-- NVRTC is there when an operator compiles at creation (its last compile has an origin).
local probe_ok, probe = pcall(gr.operator, spec { name = "probe" })
local has_nvrtc = probe_ok and probe:info().origin ~= "none"

local nvrtc_it = H.it_if(has_nvrtc, "no NVRTC on this machine: operators are not compiled")

local function quote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

--- A shell command's success and output. The tools run without the sanitizers make check-asan preloads
-- (their own leaks would change their exit status); the Lua processes of H.run_lua keep them.
local function sh(cmd)
  local f = assert(io.popen("unset LD_PRELOAD; " .. cmd .. " 2>&1"))
  local out = f:read("a")
  local ok, _, code = f:close()
  return ok and code == 0, out
end

local function tempdir()
  local ok, out = sh("mktemp -d")
  assert(ok, out)
  return (out:gsub("%s+$", ""))
end

describe("gr.operator", function()
  it("makes an Operator from C expressions, with its fields and cpu functions", function()
    local cpu = { map = function(x) return x * x end, reduce = function(a, b) return a + b end,
      post = function(a) return math.sqrt(a) end }
    local op = gr.operator(spec { cpu = cpu, preamble = "" })
    assert.equal("l2", op.name)
    assert.equal("gpureduce.Operator(l2: map x * x, reduce a + b, acc float64)", tostring(op))
    local info = op:info()
    assert.equal("l2", info.name)
    assert.equal("float64", info.acc)
    assert.is_false(info.indexed)
    assert.is_true(info.has_cpu)
    assert.same({ map = "x * x", reduce = "a + b", post = "sqrt(a)", identity = "0", preamble = "" }, info.expressions)
    assert.is_false(gr.operator(spec { name = "plain" }):info().has_cpu)
  end)

  it("is released once by free, __close and the collector alike", function()
    local op = gr.operator(spec())
    op:free()
    op:free()
    assert.equal("gpureduce.Operator(freed)", tostring(op))
    expect("operator has been freed", op.source, op)
    expect("operator has been freed", function() return op.name end)
    H.closing(gr.operator(spec()), function(closed)
      assert.equal("l2", closed.name)
    end)
  end)

  it("knows whether map uses the index i: the word i alone, not ix, a member, a literal or a comment", function()
    local preamble = "struct P { double i; }; __device__ const double ix = 1;"
    local cases = {
      ["x * i"] = true, ["i * 1e-3 + x"] = true, ["x + (double)(i % 2)"] = true,
      ["x + ix"] = false, ["x + P{1}.i"] = false, ["x + 'i'"] = false, ["x + \"i\"[0]"] = false,
      ["x /* i */ + 1"] = false, ["x // i\n"] = false, ["x + 1e1"] = false,
    }
    for map, indexed in pairs(cases) do
      local op = gr.operator(spec { map = map, preamble = preamble })
      assert(op:info().indexed == indexed, map .. ": expected indexed = " .. tostring(indexed))
    end
  end)

  describe("refuses", function()
    it("anything but a table", function()
      expect("table expected, got string", gr.operator, "x * x")
    end)

    it("an unknown field, listing the accepted ones", function()
      expect("bad argument #1 to", gr.operator, spec { mapp = "x" })
      expect("unknown field 'mapp' (accepted: acc, cpu, identity, inputs, map, name, post, preamble, reduce)",
        gr.operator, spec { mapp = "x" })
      expect("unknown field '1' (accepted: acc", gr.operator, { "x", name = "a" })
    end)

    it("a field that is not a string, naming it", function()
      expect("map: expected a string (a C expression), got number", gr.operator, spec { map = 1 })
      expect("reduce: expected a string (a C expression), got boolean", gr.operator, spec { reduce = true })
      expect("post: expected a string (a C expression), got table", gr.operator, spec { post = {} })
      expect("identity: expected a string (a C expression), got number", gr.operator, spec { identity = 0 })
      expect("acc: expected a string, got number", gr.operator, spec { acc = 8 })
      expect("name: expected a string, got number", gr.operator, spec { name = 2 })
      expect("preamble: expected a string (C declarations), got function", gr.operator, spec { preamble = print })
      expect("map: has a zero byte inside", gr.operator, spec { map = "x\0y" })
    end)

    it("a missing or empty expression, naming the field", function()
      expect("map: is required (a C expression over x and i)", gr.operator, spec { map = false })
      expect("reduce: is empty (expected a C expression over a and b)", gr.operator, spec { reduce = "  \n" })
      expect("identity: is empty (expected a C initializer of the accumulator)", gr.operator, spec { identity = "" })
      expect("post: is empty (expected a C expression over a and n)", gr.operator, spec { post = "" })
    end)

    it("a name that is not a word", function()
      expect("name: is required", gr.operator, spec { name = false })
      expect("name: '2x' is not a word of at most 64 letters", gr.operator, spec { name = "2x" })
      expect("name: 'my op' is not a word", gr.operator, spec { name = "my op" })
      expect("is not a word", gr.operator, spec { name = string.rep("a", 65) })
    end)

    it("an unknown accumulator, listing the dtypes", function()
      expect("acc: unknown accumulator 'flaot64': neither a dtype (int8, uint8, int32, uint32, int64, uint64, " ..
        "float32, float64, float16, bfloat16, int16, uint16, bool, float8_e4m3, " ..
        "float8_e5m2) nor a struct declared in the preamble", gr.operator, spec { acc = "flaot64" })
      expect("acc: 'double' is a C type: name it by its dtype (int8,", gr.operator, spec { acc = "double" })
      expect("acc: 'unsigned int' is a C type", gr.operator, spec { acc = "unsigned int" })
      expect("acc: unknown accumulator 'S'", gr.operator, spec { acc = "S", preamble = "struct T { double s; };" })
      expect("acc: is required", gr.operator, spec { acc = false })
    end)

    it("a struct accumulator without post: a struct cannot be a result", function()
      expect("post: is required when acc is a struct (S): a struct cannot be a result", gr.operator,
        spec { acc = "S", post = false, preamble = "struct S { double s; };" })
    end)

    it("cpu that is not a table of functions", function()
      local map, reduce = function(x) return x end, function(a, b) return a + b end
      expect("cpu: expected a table of functions {map =, reduce =, post =}, got number", gr.operator, spec { cpu = 3 })
      expect("cpu.map: expected a function, got nil", gr.operator, spec { cpu = { reduce = reduce } })
      expect("cpu.reduce: expected a function, got string", gr.operator, spec { cpu = { map = map, reduce = "+" } })
      expect("cpu.post: expected a function or nil, got number", gr.operator,
        spec { cpu = { map = map, reduce = reduce, post = 1 } })
      expect("unknown field 'cpu.combine' (accepted: identity, map, post, reduce)", gr.operator,
        spec { cpu = { map = map, reduce = reduce, combine = reduce } })
    end)
  end)

  describe("on the cpu backend, checks the identity against cpu.reduce", function()
    local function cpu_it(title, fn)
      it(title, function()
        if gr.backend() ~= "cpu" then
          pending("the cuda backend checks the identity on the GPU instead")
          return
        end
        fn()
      end)
    end
    local sum = { map = function(x) return x end, reduce = function(a, b) return a + b end }
    local max = { map = function(x) return x end, reduce = function(a, b) return math.max(a, b) end }
    local min = { map = function(x) return x end, reduce = function(a, b) return math.min(a, b) end }
    -- an identity the host cannot read is given to the cpu functions (cpu.identity)
    local function with_identity(cpu, e) return { map = cpu.map, reduce = cpu.reduce, identity = e } end

    cpu_it("and refuses one that is not neutral, saying for which value", function()
      expect("identity: 1 is not neutral for cpu.reduce: cpu.reduce(identity, cpu.map(x, i)) gave 1.0, " ..
        "not cpu.map(x, i) = 0.0, for x = 0.0", gr.operator, spec { identity = "1", post = false, cpu = sum })
      expect("identity: 0 is not neutral for cpu.reduce: cpu.reduce(identity, cpu.map(x, i)) gave 0, " ..
        "not cpu.map(x, i) = 1, for x = 1", gr.operator,
        spec { acc = "int8", map = "x", identity = "0", reduce = "a < b ? a : b", post = false, cpu = min })
    end)

    cpu_it("and takes the literals C writes: integers, hex, floats, INFINITY, in parentheses", function()
      gr.operator(spec { identity = "0.0", post = false, cpu = sum })
      gr.operator(spec { identity = "-INFINITY", reduce = "a > b ? a : b", post = false, cpu = max })
      gr.operator(spec { identity = "(INFINITY)", reduce = "a < b ? a : b", post = false, cpu = min })
      gr.operator(spec { acc = "int32", map = "x", identity = "0x7fffffff", reduce = "a < b ? a : b", post = false, cpu = min })
      gr.operator(spec { acc = "int64", map = "x", identity = "-9223372036854775807LL - 1", reduce = "a > b ? a : b",
        post = false, cpu = with_identity(max, math.mininteger) })     -- not a literal: left to the GPU
      expect("identity: -2147483648 is not neutral", gr.operator,
        spec { acc = "int32", map = "x", identity = "-2147483648", reduce = "a < b ? a : b", post = false, cpu = min })
    end)

    cpu_it("but not an identity the host cannot read, nor a struct's: those the GPU checks", function()
      gr.operator(spec { identity = "1.0 - 1.0 + 1.0", post = false, cpu = with_identity(sum, 1.0) })
      gr.operator(spec { acc = "S", preamble = "struct S { double s; };", map = "{x}", reduce = "{a.s + b.s}",
        identity = "{1}", post = "a.s", cpu = { map = sum.map, reduce = sum.reduce, post = function(a) return a end,
                                                  identity = 1 } })
    end)
  end)

  H.gpu_it("checks the identity against reduce on the GPU", function()
    expect("identity: 1 is not neutral for reduce: reduce(identity, map(x)) differs from map(x) byte for byte",
      gr.operator, spec { identity = "1", post = false })
    expect("identity: 0 is not neutral for reduce", gr.operator,
      spec { acc = "int32", map = "x", reduce = "a < b ? a : b", identity = "0", post = false })
    gr.operator(spec { acc = "int32", map = "x", reduce = "a < b ? a : b", identity = "0x7fffffff", post = false })
    gr.operator(spec { acc = "S", preamble = "struct S { double s; unsigned long long n; };", map = "{x, 1}",
      reduce = "{a.s + b.s, a.n + b.n}", identity = "{0, 0}", post = "a.s / a.n" })
  end)

  describe("compiled with NVRTC", function()
    nvrtc_it("at creation, for the accumulator's dtype, with what the image says of it", function()
      local info = gr.operator(spec()):info()
      assert.truthy(({ nvrtc = true, disk = true, memory = true })[info.origin], info.origin)
      assert.equal("float64", info.dtype)
      assert.equal(8, info.acc_size)
      assert.equal(8, info.acc_align)
      assert.equal("float", info.result)
      assert(info.image_bytes > 1000 and info.total_ms >= 0 and info.nvrtc_ms >= 0)
      if info.origin ~= "nvrtc" then assert.equal(0, info.nvrtc_ms) end
      local d = gr.backend() == "cuda" and gr.device()
      assert.equal(d and d.cc_major * 10 + d.cc_minor or 90, info.arch)     -- sm_90 without a GPU
    end)

    nvrtc_it("with the result's kind from post, or from the accumulator without one", function()
      assert.equal("bool", gr.operator(spec { post = "a > 1" }):info().result)
      assert.equal("int", gr.operator(spec { acc = "int8", post = false }):info().result)
      assert.equal("uint", gr.operator(spec { acc = "uint64", post = false }):info().result)
      assert.equal("uint", gr.operator(spec { acc = "int32", post = "(unsigned)a" }):info().result)
      assert.equal("float", gr.operator(spec { acc = "float32", post = false }):info().result)
    end)

    nvrtc_it("for a struct accumulator of the preamble, elements as float32", function()
      local op = gr.operator(spec { name = "mean", acc = "Mean", map = "{x, 1}", reduce = "{a.s + b.s, a.n + b.n}",
        identity = "{0, 0}", post = "a.s / a.n", preamble = "struct Mean { double s; unsigned long long n; };" })
      local info = op:info()
      assert.equal("float32", info.dtype)
      assert.equal(16, info.acc_size)
      assert.equal(8, info.acc_align)
      assert.equal("float", info.result)
    end)

    nvrtc_it("once per source: an equal operator comes from memory", function()
      gr.operator(spec { name = "again", map = "x * 3" })
      assert.equal("memory", gr.operator(spec { name = "again", map = "x * 3" }):info().origin)
    end)
  end)

  describe("op:source", function()
    it("is a whole translation unit: the headers, the preamble, each field after its #line", function()
      local op = gr.operator(spec { preamble = "__device__ double twice(double v) { return 2 * v; }",
        map = "twice(x) * x" })
      local src = op:source()
      for _, piece in ipairs {
        '#include "thread_load.cuh"', '#include "warp_block.cuh"', '#include "epilogue.cuh"',
        '#line 1 "preamble"\n__device__ double twice(double v) { return 2 * v; }\n#line ',
        '#line 1 "map"\ntwice(x) * x\n#line ', '#line 1 "reduce"\na + b\n#line ', '#line 1 "identity"\n0\n#line ',
        '#line 1 "post"\nsqrt(a)\n#line ', "using gr_op_in = double;", "using gr_op_acc = double;",
        'extern "C" __global__ void __launch_bounds__(1024)\ngr_op_main(', "gr_op_partials(",
        "gr_op_post(", "gr_op_check(", "gr_op_acc_size",
      } do
        assert(src:find(piece, 1, true), "the source lacks " .. piece)
      end
    end)

    it("numbers the generated lines truly after each field", function()
      local src = gr.operator(spec { reduce = "a +\n b" }):source()
      local n = 0
      for line in (src .. "\n"):gmatch("([^\n]*)\n") do
        n = n + 1
        local resume = line:match('^#line (%d+) "generated"$')
        if resume then assert.equal(n + 1, tonumber(resume)) end
      end
    end)

    it("takes the input dtype, the accumulator's by default, float32 for a struct", function()
      local op = gr.operator(spec())
      assert.truthy(op:source("int8"):find("using gr_op_in = signed char;", 1, true))
      assert.truthy(op:source("uint64"):find("using gr_op_in = unsigned long long;", 1, true))
      expect("unknown dtype 'half'", op.source, op, "half")
      local s = gr.operator(spec { acc = "S", preamble = "struct S { double s; };", map = "{x}", reduce = "{a.s + b.s}",
        identity = "{0}", post = "a.s" })
      assert.truthy(s:source():find("using gr_op_in = float;", 1, true))
      assert.truthy(s:source():find("using gr_op_acc = S;", 1, true))
    end)
  end)

  describe("compile errors", function()
    nvrtc_it("name the field, its line and column, with NVRTC's log", function()
      local err = expect('gpureduce: map: 1:5: identifier "y" is undefined (operator l2 over float64 elements)',
        gr.operator, spec { map = "x * y" })
      assert.truthy(err:find("NVRTC's log:\nmap(1): error: identifier \"y\" is undefined", 1, true), err)
      expect("reduce: 2:6: identifier \"zz\" is undefined", gr.operator, spec { reduce = "a +\n b + zz" })
      expect("post: 1:1: identifier \"sqr\" is undefined", gr.operator, spec { post = "sqr(a)" })
      expect("preamble: 1:", gr.operator, spec { preamble = "__device__ double f(double v) { return v +; }" })
    end)

    nvrtc_it("say an unfinished expression at its end", function()
      expect("identity: at its end: expected an expression", gr.operator, spec { identity = "1 +" })
      expect("post: at its end: expected an expression", gr.operator, spec { post = "sqrt(a) *" })
    end)

    nvrtc_it("say what the accumulator and the result must be", function()
      expect("acc: 1:1: static assertion failed with \"the accumulator struct must be a whole number of 32-bit words",
        gr.operator, spec { acc = "B3", preamble = "struct B3 { unsigned char c[3]; };", map = "{}",
          reduce = "a", identity = "{}", post = "a.c[0]" })
      expect("post: 1:1: static assertion failed with \"the result must be a number or a bool\"", gr.operator,
        spec { acc = "S", preamble = "struct S { double s; };", map = "{x}", reduce = "{a.s + b.s}",
          identity = "{0}", post = "a" })
    end)

    nvrtc_it("of one dtype name it", function()
      expect("map: 1:1: expression must have integral or unscoped enum type (operator l2 over float64 elements)",
        gr.operator, spec { map = "x % 2" })
    end)
  end)

  describe("the disk cache (GPUREDUCE_CACHE)", function()
    local make = [[
      local gr = require "gpureduce"
      local op = gr.operator{name = "disk", map = "x * x + 1", reduce = "a + b", identity = "0", acc = "float64"}
      io.write("origin ", op:info().origin, "\n")
    ]]
    local two = make .. [[
      local other = gr.operator{name = "disk2", map = "x - 1", reduce = "a + b", identity = "0", acc = "float64"}
      io.write("origin ", other:info().origin, "\n")
    ]]

    nvrtc_it("lets a new process find an image another one compiled", function()
      local dir = tempdir()
      local env = "GPUREDUCE_CACHE=" .. quote(dir)
      local ok, _, out = H.run_lua(make, env)
      assert(ok, out)
      assert.equal("origin nvrtc\n", out)
      local files = select(2, sh("ls " .. quote(dir)))
      assert.truthy(files:match("^%x+%.kernel\n$"), files)
      ok, _, out = H.run_lua(make, env)
      assert(ok, out)
      assert.equal("origin disk\n", out)
      sh("rm -rf " .. quote(dir))
    end)

    nvrtc_it("rebuilds a corrupt or truncated file, never loads it", function()
      local dir = tempdir()
      local env = "GPUREDUCE_CACHE=" .. quote(dir)
      assert(H.run_lua(make, env))
      local file = dir .. "/" .. select(2, sh("ls " .. quote(dir))):gsub("%s+$", "")
      for _, damage in ipairs {
        "printf 'XXXXXXXX' | dd of=" .. quote(file) .. " bs=1 seek=200 conv=notrunc",
        "truncate -s 100 " .. quote(file),
        "printf 'not a kernel' > " .. quote(file),
      } do
        assert(sh(damage))
        local ok, _, out = H.run_lua(make, env)
        assert(ok, out)
        assert.equal("origin nvrtc\n", out, damage)
        ok, _, out = H.run_lua(make, env)
        assert.equal("origin disk\n", out, damage)
      end
      sh("rm -rf " .. quote(dir))
    end)

    nvrtc_it("that cannot be made: one warning, and the operators still compile", function()
      local dir = tempdir()
      assert(sh("touch " .. quote(dir .. "/file")))
      local ok, _, out = H.run_lua(two, "GPUREDUCE_CACHE=" .. quote(dir .. "/file/cache"))
      assert(ok, out)
      local _, warnings = out:gsub("gpureduce: the kernel cache directory", "")
      assert.equal(1, warnings, out)
      assert.truthy(out:find("cannot be made", 1, true), out)
      assert.truthy(out:find("origin nvrtc\norigin nvrtc\n", 1, true), out)
      sh("rm -rf " .. quote(dir))
    end)

    nvrtc_it("turned off: no warning, no file", function()
      local ok, _, out = H.run_lua(make, "GPUREDUCE_CACHE=off")
      assert(ok, out)
      assert.equal("origin nvrtc\n", out)
    end)
  end)
end)
