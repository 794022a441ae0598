-- What users write into generated CUDA sources is untrusted (engine/jit/user_text.h): operator fields,
-- preambles and kernel sources may hold no preprocessor directive in any spelling, no inline assembly,
-- no name of the generated code, no ';' in an expression, no unbalanced bracket, and a bounded size.
-- Before, `map = 'x\n#include "/proc/self/environ"\n'` compiled and its error returned the environment,
-- `map = "x; } extern \"C\" __global__ ..."` defined kernels, `map = "gr_value"` read an uninitialised
-- variable, and `#define sizeof(t) 4` in a preamble made the host read a float64 accumulator as 4 bytes.
-- The checks run before NVRTC: these tests need none, except the ones that compile what is accepted.
local gr = require "gpureduce"
local H = require("support.helpers").bind(it, function(reason) pending(reason) end)

local expect = H.expect_error

local function spec(changes)
  return H.changed({ name = "ut", map = "x * x", reduce = "a + b", identity = "0", acc = "float64" }, changes)
end

local probe_ok, probe = pcall(gr.operator, spec { name = "ut_probe" })
local has_nvrtc = probe_ok and probe:info().origin ~= "none"
local nvrtc_it = H.it_if(has_nvrtc, "no NVRTC on this machine: operators are not compiled")

local KERNEL = [[
template <class Op, class In>
__device__ typename Op::acc_t ut_entry(const In *in, size_t n, unsigned long long first) {
    return gr::block_reduce<Op>(gr::thread_accumulate<Op, In, 2>(in, n, first));
}
]]
local function kernel(source, changes)
  return H.changed({ name = "ut_kernel", entry = "ut_entry", source = source }, changes)
end

describe("a field that reads host files at compile time", function()
  it("is refused: #include in map, before NVRTC sees it, and nothing of the file comes back", function()
    local err = expect("map: 2:1: a preprocessor directive ('#include') is not accepted: an expression field holds one "
      .. "C expression", gr.operator, spec { map = 'x\n#include "/proc/self/environ"\n' })
    assert.falsy(err:find("PATH=", 1, true), err)
    expect("map: 1:5: a preprocessor directive ('#include')", gr.operator, spec { map = 'x + #include "/etc/passwd"' })
  end)

  it("is refused in the preamble, and every other directive there (#define makes macro bombs)", function()
    expect("preamble: 1:1: a preprocessor directive ('#include') is not accepted: a preamble holds C++ declarations "
      .. "only", gr.operator, spec { preamble = '#include "/etc/passwd"' })
    expect("preamble: 2:3: a preprocessor directive ('#define')", gr.operator,
      spec { preamble = "struct S { double s; };\n  #define sizeof(t) 4" })
    expect("preamble: 1:1: a preprocessor directive ('#if')", gr.operator, spec { preamble = "#if 1\n#endif" })
  end)

  it("is refused in every other spelling: digraph, splice, _Pragma, a lone carriage return, a raw string", function()
    expect("map: 2:1: a preprocessor directive ('%:include')", gr.operator,
      spec { map = 'x\n%:include "/etc/passwd"\n' })
    expect("map: 2:2: a '\\' at the end of a line (a line continuation) is not accepted", gr.operator,
      spec { map = 'x\n%\\\n:include "/etc/passwd"\n' })
    expect("preamble: 1:1: _Pragma is not accepted (it is a preprocessor directive in another spelling)", gr.operator,
      spec { preamble = '_Pragma("once")' })
    expect("map: 1:5: __pragma is not accepted", gr.operator, spec { map = 'x + __pragma(once) 0' })
    expect("map: 1:7: a carriage return not followed by a line feed is not accepted", gr.operator,
      spec { map = 'x // c\r#include "/etc/passwd"\n' })
    -- a raw string ends where its delimiter says: a reader that missed it would take code for a string
    expect('preamble: 1:28: raw string literals (R"...") are not accepted', gr.operator,
      spec { preamble = '__device__ const char *s = R"a(" /* ")a";\n#include "/etc/passwd"\n*/' })
    expect("map: 1:3: the trigraph '??=' is not accepted", gr.operator, spec { map = 'x ??=include' })
  end)

  it("is refused in a kernel source, which may use #pragma unroll and #pragma nounroll only", function()
    expect("source: 1:1: a preprocessor directive ('#include') is not accepted: of the directives a kernel source "
      .. "may use #pragma unroll and #pragma nounroll only", gr.kernel, kernel('#include "/etc/passwd"\n' .. KERNEL))
    expect("source: 1:1: a preprocessor directive ('#define')", gr.kernel, kernel("#define N 4\n" .. KERNEL))
    expect("source: 1:1: a preprocessor directive ('#pragma')", gr.kernel, kernel("#pragma once\n" .. KERNEL))
    expect("source: 1:12: a preprocessor directive ('#pragma')", gr.kernel,
      kernel("int x = 1; #pragma unroll\n" .. KERNEL))
    local with_pragmas = KERNEL:gsub("return", "#pragma unroll\n  #pragma unroll 4 // four\n#pragma nounroll\n"
      .. "    /* a */ #pragma unroll kCount\n    return")
    assert.truthy(with_pragmas:find("#pragma unroll 4", 1, true))
    -- registering runs the check (and compiles, where NVRTC is: kCount is then undefined, said by NVRTC)
    local ok, err = pcall(gr.kernel, kernel(with_pragmas, { name = "ut_pragmas" }))
    assert(ok or not err:find("is not accepted", 1, true), err)
  end)
end)

describe("a field that leaves its place in the generated source", function()
  it("is refused: ';' in an expression, which could end the function and define kernels", function()
    expect("map: 1:2: ';' is not accepted: an expression field holds one C expression, not statements", gr.operator,
      spec { map = 'x; } extern "C" __global__ void gr_op_main() { int y = 0' })
    expect("reduce: 1:6: ';' is not accepted", gr.operator, spec { reduce = "a + b; " })
    expect("post: 1:13: ';' is not accepted", gr.operator, spec { post = "[]{ return 1; }()" })
  end)

  it("is refused: unbalanced brackets, in expressions, the preamble and kernel sources", function()
    expect("map: 1:2: ')' closes nothing", gr.operator, spec { map = "x) + (x" })
    expect("reduce: 1:1: the '(' opened here is never closed", gr.operator, spec { reduce = "(a + b" })
    expect("identity: 1:3: ']' does not close the '{' opened at 1:1", gr.operator, spec { identity = "{0]" })
    expect("preamble: 1:10: the '{' opened here is never closed", gr.operator, spec { preamble = "struct S {" })
    expect("preamble: 1:1: '}' closes nothing", gr.operator, spec { preamble = "} struct S {" })
    expect("source: 5:1: '}' closes nothing", gr.kernel, kernel(KERNEL .. "}\n"))
    expect("preamble: 1:1: the comment opened here is never closed", gr.operator, spec { preamble = "/* struct S {};" })
    expect("map: 1:5: the string literal opened here is not closed on its line", gr.operator, spec { map = 'x + "a' })
  end)

  it("is refused: a name of the generated code (gr_value, gr_op_post) or inline assembly", function()
    expect("map: 1:1: the name gr_value is reserved: names that begin with gr_ are the generated code's", gr.operator,
      spec { map = "gr_value" })
    expect("post: 1:1: the name gr_op_kind_of is reserved", gr.operator, spec { post = "gr_op_kind_of<double>::value" })
    expect("source: 5:28: the name gr_op_post is reserved", gr.kernel,
      kernel(KERNEL .. 'extern "C" __global__ void gr_op_post(const double *, unsigned long long, void *) {}\n'))
    expect("preamble: 1:18: __asm__ is not accepted (inline assembly could change what the host reads of the image)",
      gr.operator, spec { preamble = "__device__ int v __asm__(\"gr_op_acc_size\") = 4;" })
    expect("acc: the name gr_acc is reserved", gr.operator, spec { acc = "gr_acc", preamble = "struct S {};", post = "1.0" })
    expect("entry: the name gr_entry is reserved", gr.kernel, kernel(KERNEL, { entry = "gr_entry" }))
  end)

  it("is refused over its size, with the limit: 4096 bytes an expression, 65536 a preamble or kernel source",
    function()
      expect("map: is 4097 bytes, over the 4096 an expression may hold", gr.operator,
        spec { map = "x" .. string.rep(" + x", 1024) })
      expect("preamble: is 65537 bytes, over the 65536 a preamble may hold", gr.operator,
        spec { preamble = string.rep(" ", 65537) })
      expect("source: is 65537 bytes, over the 65536 a kernel source may hold", gr.kernel,
        kernel(KERNEL .. string.rep(" ", 65537 - #KERNEL)))
    end)

  it("a struct acc name of 1,101 characters is refused as a name, not as a lack of memory", function()
    local long = string.rep("A", 1101)
    expect("acc: unknown accumulator '" .. string.rep("A", 80) .. "...': neither a dtype", gr.operator,
      spec { acc = long, preamble = "struct " .. long .. " { double v; };", post = "a.v" })
  end)

  it("a #line in map is refused naming map (it blamed reduce)", function()
    expect("map: 2:1: a preprocessor directive ('#line')", gr.operator, spec { map = 'x\n#line 1 "reduce"\n+ y' })
  end)
end)

describe("what the checks accept", function()
  nvrtc_it("compiles: literals and comments with ; # { inside, members, casts, gr:: helpers", function()
    for _, s in ipairs {
      spec { map = 'x + (sizeof("#;{[(") - 6) /* ; # } */ // ; #include' },
      spec { map = "x < 0 ? -x : x", reduce = "a > b ? a : b", identity = "-INFINITY" },
      spec { map = "(double)(int)x + 'a' - '\\''", identity = "(0)" },
      spec { acc = "M", preamble = "// a helper; #not a directive inside a comment\nstruct M { double s; unsigned long long n; };\n"
        .. "__device__ inline M mk(double v) { M m; m.s = v; m.n = 1; return m; }",
        map = "mk(x)", reduce = "{a.s + b.s, a.n + b.n}", identity = "{0, 0}", post = "a.s / a.n" },
      spec { map = "gr::limits<double>::max() > x ? x : 0.0" },
    } do
      local ok, err = pcall(gr.operator, s)
      assert(ok, err)
    end
  end)
end)

describe("a compile that would take too long or too much", function()
  --- Runs code after loading the module under env; its success, output and the seconds the code took in
  --- that process (gr.clock: the start of a sanitized interpreter on a busy machine is not the limit's).
  local function timed(env, code)
    local ok, _, out = H.run_lua('local gr = require "gpureduce"\nlocal t0 = gr.clock()\n' .. code
      .. '\nio.write(string.format("seconds %.3f\\n", gr.clock() - t0))', "GPUREDUCE_CACHE=off " .. env)
    local seconds = tonumber(out:match("seconds ([%d.]+)\n"))
    return ok, (out:gsub("seconds [%d.]+\n", "")), seconds or math.huge
  end
  local sines = {}
  for k = 1, 100 do sines[#sines + 1] = "sin(x + " .. k .. ")" end
  local SLOW = 'print(pcall(gr.operator, {name = "slow", map = "' .. table.concat(sines, " + ") .. '", '
    .. 'reduce = "a + b", identity = "0", acc = "float64"}))'

  nvrtc_it("is stopped at GPUREDUCE_COMPILE_TIMEOUT, with an error that says the limit", function()
    -- 1 KB of sin calls: 15 s of NVRTC on two cores, more in reduce; stopped at 2 s
    local ok, out, seconds = timed("GPUREDUCE_COMPILE_TIMEOUT=2", SLOW)
    assert(ok, out)
    assert.truthy(out:find("false\tgpureduce: operator slow over float64 elements: the compile took longer than the 2 "
      .. "s limit and was stopped (GPUREDUCE_COMPILE_TIMEOUT sets the limit", 1, true), out)
    assert(seconds <= 5, "took " .. seconds .. " s")
  end)

  nvrtc_it("is stopped by the time limit or by memory: a template that instantiates itself 2^40 times", function()
    local ok, out, seconds = timed("GPUREDUCE_COMPILE_TIMEOUT=3", [[
      print(pcall(gr.operator, {name = "bomb", map = "x + B<40, 0>::v", reduce = "a + b", identity = "0",
        acc = "float64", preamble = "template <int N, int K> struct B { static constexpr double v = "
          .. "B<N - 1, 2 * K>::v + B<N - 1, 2 * K + 1>::v; };\ntemplate <int K> struct B<0, K> { "
          .. "static constexpr double v = K; };"}))
    ]])
    assert(ok, out)
    -- under ASan the child may instead die in the sanitizer's own allocator when the memory limit bites
    local sanitized = os.getenv("SANITIZER_PRELOAD") and out:find("the compiler process ended", 1, true)
    assert.truthy(out:find("took longer than the 3 s limit", 1, true) or out:find("out of memory", 1, true)
      or sanitized, out)
    assert(seconds <= 6, "took " .. seconds .. " s")
  end)

  nvrtc_it("compiles in this process without a limit with GPUREDUCE_COMPILE_TIMEOUT=0", function()
    local ok, out = timed("GPUREDUCE_COMPILE_TIMEOUT=0", 'print(gr.operator{name = "quick", map = "x", '
      .. 'reduce = "a + b", identity = "0", acc = "float64"}:info().origin)')
    assert(ok, out)
    assert.equal("nvrtc\n", out)
  end)
end)

describe("what the host believes of an image", function()
  local sh = H.sh
  local function q(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

  it("is not what a preamble's macro says: #define sizeof(t) 4 is refused", function()
    expect("preamble: 1:1: a preprocessor directive ('#define')", gr.operator,
      spec { preamble = "#define sizeof(t) 4", acc = "float64" })
  end)

  nvrtc_it("is derived from the declared types: another operator's image under this one's key is refused", function()
    local kcache_host, missing = H.host_program("kcache_host")
    if not kcache_host then
      pending(missing)
      return
    end
    local dir = select(2, sh("mktemp -d")):gsub("%s+$", "")
    local env = "GPUREDUCE_CACHE=" .. q(dir)
    local function make(name, acc)
      return H.run_lua('local gr = require "gpureduce"\nprint(gr.operator{name = "' .. name .. '", map = "x", '
        .. 'reduce = "a + b", identity = "0", acc = "' .. acc .. '"}:info().origin)', env)
    end
    assert(make("f64", "float64"))
    local f64 = select(2, sh("ls " .. q(dir))):gsub("%s+$", "")
    assert(make("f32", "float32"))
    local f32
    for name in select(2, sh("ls " .. q(dir))):gmatch("%S+") do
      if name ~= f64 then f32 = name end
    end
    -- the float32 operator's image, well formed, under the float64 operator's key
    local ok, out = sh(env .. " " .. kcache_host .. " forge " .. q(dir .. "/" .. f32) .. " " .. q(dir .. "/" .. f64))
    assert(ok, out)
    local made, _, said = make("f64", "float64")
    assert.is_false(made, said)
    assert.truthy(said:find("operator f64 over float64 elements: the image's accumulator has 4 bytes aligned to 4, "
      .. "where float64 has 8: the image is not this operator's", 1, true), said)
    sh("rm -rf " .. q(dir))
  end)
end)
