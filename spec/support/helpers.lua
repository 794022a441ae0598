--- Shared by the specs: backend detection, GPU gating, case generation and the Lua reference.
local gr = require "gpureduce"

local M = {}

M.has_gpu = gr.backend() == "cuda"

-- busted's `it` and `pending` live in each spec file's environment, not in _G: a spec hands them over.
local it, pending

--- Binds the helpers to the calling spec's busted functions (its `it`, and a function that calls its
-- `pending` from inside a running test).
function M.bind(spec_it, spec_pending)
  it, pending = spec_it, spec_pending
  return M
end

-- Lua 5.4's to-be-closed variable, `local x <close> = v`, around body(x): a scope loaded with load() on
-- 5.4 and later, whose syntax it is, so that the specs that use it still load on 5.3; there, the scope's end
-- is v's __close called as 5.4 calls it (with nil: no error), which tests the same metamethod.
local close_scope = _VERSION >= "Lua 5.4" and
  load("return function(v, body) local x <close> = v; return body(x) end")()

function M.closing(v, body)
  if close_scope then return close_scope(v, body) end
  local r = body(v)
  getmetatable(v).__close(v, nil)
  return r
end

--- The build folder busted loads the module from (--cpath, else .busted's build/?.so): the host
-- programs of that build are the ones the specs run (`busted --cpath='build-cpu/?.so'` checks build-cpu's).
function M.build_dir()
  for dir in package.cpath:gmatch("([^;]+)/%?%.so") do
    local f = io.open(dir .. "/gpureduce/core.so")
    if f then
      f:close()
      return dir
    end
  end
  return "build"
end

--- The path of a host program of the build the module comes from (spec/host/), or nil and why when
-- that build has none (make check-asan builds the module alone).
function M.host_program(name)
  local path = M.build_dir() .. "/" .. name
  local f = io.open(path)
  if f then
    f:close()
    return path
  end
  return nil, "no " .. path .. ": the host programs are built by make, not by make check-asan"
end

--- An `it` that runs only with a CUDA device and is reported pending (never passed) without one.
function M.gpu_it(title, fn)
  it(title .. " #gpu", function()
    if not M.has_gpu then
      pending("gpu: no CUDA device")
      return
    end
    fn()
  end)
end

--- An `it` that runs when `ok` holds and is reported pending with `reason` otherwise (a tool the
-- machine may lack: NVRTC).
function M.it_if(ok, reason)
  return function(title, fn)
    it(title, function()
      if not ok then
        pending(reason)
        return
      end
      fn()
    end)
  end
end

--- `it` for a variant: GPU variants are gated (and tagged gpu), host variants always run.
function M.variant_it(variant, title, fn, dtype)
  if dtype and not M.takes(variant, dtype) then return end     -- reduce_spec checks the refusal
  if M.needs_cuda(variant) then M.gpu_it(title, fn) else it(title, fn) end
end

--- The dtypes of gr.dtypes() a variant takes, in that order.
function M.dtypes_taken(variant)
  local out = {}
  for _, d in ipairs(gr.dtypes()) do
    if M.takes(variant, d) then out[#out + 1] = d end
  end
  return out
end

--- Whether a variant takes data of a dtype: its registry row's `dtypes` (a variant table without that
-- list, such as the specs' own stand-in for auto, takes every dtype).
function M.takes(variant, dtype)
  if not variant.dtypes then return true end
  for _, d in ipairs(variant.dtypes) do
    if d == dtype then return true end
  end
  return false
end

function M.needs_cuda(variant)
  for _, need in ipairs(variant.needs) do
    if need == "cuda" then return true end
  end
  return false
end

--- Every variant of the catalogue, in teaching order (the specs never list variants by hand). User
-- kernels (gr.kernel) are left out: the registry is the process's, and one registered by an earlier
-- spec file must not change the cases of a later one (spec/kernel_spec.lua tests them).
function M.variants()
  local list = {}
  for _, v in ipairs(gr.variants()) do
    if not v.user then list[#list + 1] = v end
  end
  table.sort(list, function(a, b) return a.ordinal < b.ordinal end)
  return list
end

--- Any 64-bit pattern from rng (math.random or one of its shape): rng(0) where Lua has it (5.4), else
-- two 32-bit draws (5.3 raises for an empty interval).
function M.bits64(rng)
  rng = rng or math.random
  if _VERSION == "Lua 5.4" then return rng(0) end
  return (rng(0, 0xFFFFFFFF) << 32) | rng(0, 0xFFFFFFFF)
end

M.edge_sizes = { 0, 1, 31, 32, 33, 1023, 1024, 1025, 4096, 65536, 65537, 1000003, 1048576 }

-- the dtype classes of the reference (fuzz_reference.lua's R.DTYPES), not a list of names here
function M.is_float(dtype) return require("support.fuzz_reference").is_float(dtype) end

--- The ops M.reference and M.fill_case know: the engine's first six, whose results are one value of the
-- input's kind. The later ops (count, mean, var, std, argmin, ...) are specified by
-- support/ops_reference.lua and spec/ops_spec.lua; the specs built on M.reference iterate these.
M.classic_ops = { "sum", "prod", "min", "max", "and", "or" }
function M.is_unsigned(dtype) return dtype:sub(1, 1) == "u" end

--- The data one case reduces: random, with a range that keeps the op meaningful (products near 1
-- for floats, small magnitudes so and/or see both values), plus one zero placed for and/or.
function M.fill_case(b, dtype, op, seed)
  local n = #b
  if require("support.fuzz_reference").DTYPES[dtype].bool then
    b:random(seed)                    -- false and true (and/or: a false placed below)
  elseif M.is_float(dtype) then
    -- products near 1: wider where the format is coarse (bfloat16: 2^-8 apart below 1), so that the
    -- data holds more than 1.0
    local w = require("support.fuzz_reference").DTYPES[dtype].fmt.p < 11 and 0.01 or 0.001
    if op == "prod" then b:random(seed, 1 - w, 1 + w)
    elseif op == "and" or op == "or" then b:random(seed, 0, 1)
    else b:random(seed, -1, 1) end
  else
    if op == "and" or op == "or" then b:random(seed, 0, 3)
    elseif op == "prod" then
      -- ones with a few dozen odd factors scattered in: an even factor per ~64 elements would drive
      -- any 64-bit product to 0; odd ones keep it non-zero while it wraps many times over
      b:fill(1)
      local signed = not M.is_unsigned(dtype)
      for k = 1, math.min(n, 48) do
        local h = (seed * 2654435761 + k * 40503) & 0x7fffffff
        local v = 2 * (h % 5) + 3                    -- 3, 5, 7, 9, 11
        if signed and k % 3 == 0 then v = -v end
        b:set({ v }, h % n + 1)
      end
    else b:random(seed) end           -- the dtype's whole range: sums wrap, exactly
  end
  if (op == "and" or op == "or") and n > 0 then
    -- float data in [0, 1) is never exactly 0; make "all" false and "any" hinge on real work
    b:set({ 0 }, (seed * 7919) % n + 1)
  end
  return b
end

local function ult_min(a, b) return math.ult(b, a) and b or a end
local function ult_max(a, b) return math.ult(a, b) and b or a end

--- A source of cases: the data of (dtype, op, n), made on first use with seed(n, op), its expected
-- value and summed magnitude (and its bytes with keep_bytes, to check the input is left alone). Only
-- the current case is kept: generated specs visit each case's tests one after another.
function M.case_cache(gr, seed, keep_bytes)
  local current = {}
  return function(dtype, op, n)
    local key = table.concat({ dtype, op, n }, ":")
    if current.key ~= key then
      if current.b then current.b:free() end
      local b = M.fill_case(gr.buffer(n, dtype), dtype, op, seed(n, op))
      local R = require("support.fuzz_reference")
      local want, magnitude = M.reference(R.boolify(dtype, b:totable()), dtype, op)
      -- min and max of bool data are elements: booleans
      if R.DTYPES[dtype].bool and (op == "min" or op == "max") and want ~= nil then want = want == 1 end
      current = { key = key, b = b, want = want, magnitude = magnitude, bytes = keep_bytes and b:tobytes() }
    end
    return current
  end
end

--- The expected result, computed in Lua from the elements: integers exactly (Lua integers wrap
-- like the engine's 64-bit accumulators), floats in double with Neumaier's compensated sum.
function M.reference(values, dtype, op)
  local n = #values
  if op == "and" or op == "or" then
    local all, any = true, false
    for i = 1, n do
      local nz = values[i] ~= 0
      all = all and nz
      any = any or nz
    end
    return op == "and" and all or (op == "or" and any)
  end
  if n == 0 then
    if op == "sum" then return M.is_float(dtype) and 0.0 or 0 end
    if op == "prod" then return M.is_float(dtype) and 1.0 or 1 end
    return nil
  end
  local float = M.is_float(dtype)
  if op == "sum" and float then
    local s, c, mag = 0.0, 0.0, 0.0
    for i = 1, n do
      local x = values[i]
      local t = s + x
      if math.abs(s) >= math.abs(x) then c = c + ((s - t) + x) else c = c + ((x - t) + s) end
      s = t
      mag = mag + math.abs(x)
    end
    return s + c, mag
  end
  local acc = values[1]
  if op == "sum" then
    for i = 2, n do acc = acc + values[i] end
  elseif op == "prod" then
    for i = 2, n do acc = acc * values[i] end
  elseif op == "min" then
    local nan = false
    for i = 1, n do
      local x = values[i]
      if x ~= x then nan = true break end
      if dtype == "uint64" then acc = ult_min(acc, x) elseif x < acc then acc = x end
    end
    if nan then return 0 / 0 end
  elseif op == "max" then
    local nan = false
    for i = 1, n do
      local x = values[i]
      if x ~= x then nan = true break end
      if dtype == "uint64" then acc = ult_max(acc, x) elseif x > acc then acc = x end
    end
    if nan then return 0 / 0 end
  end
  return acc
end

--- Relative tolerance of a float result, by dtype, op and accumulator: relative to the summed
-- magnitude for sums (signed data cancels), to the value for products; 0 = exact.
function M.tolerance(dtype, op, acc)
  if not M.is_float(dtype) or op ~= "sum" and op ~= "prod" then return 0 end
  if dtype == "float64" or acc == "float64" then return 1e-12 end
  return op == "prod" and 1e-3 or 2e-5
end

--- Asserts a result against the expected value, exactly or within rtol of `magnitude` (default
-- the expected value's own size).
function M.assert_close(got, want, rtol, label, magnitude)
  if type(want) == "number" and want ~= want then
    assert(got ~= got, label .. ": expected NaN, got " .. tostring(got))
    return
  end
  if rtol == 0 or math.type(want) == "integer" or type(want) == "boolean" then
    assert(got == want and math.type(got) == math.type(want),
      string.format("%s: got %s (%s), expected %s (%s)", label, tostring(got), math.type(got) or type(got),
        tostring(want), math.type(want) or type(want)))
    return
  end
  local scale = math.max(magnitude or math.abs(want), 1e-300)
  local err = math.abs(got - want)
  assert(math.type(got) == "float" and err <= rtol * scale,
    string.format("%s: got %.17g, expected %.17g (error %.3g > %.3g relative)", label, got, want,
      err / scale, rtol))
end

--- A copy of the table base with the entries of changes set; an entry false removes the key (a spec
-- table of gr.operator or gr.kernel with one field replaced or left out).
function M.changed(base, changes)
  local t = {}
  for k, v in pairs(base) do t[k] = v end
  for k, v in pairs(changes or {}) do
    if v == false then t[k] = nil else t[k] = v end
  end
  return t
end

--- A fuzz case's length and layout, drawn with rng. "segment": a segment size from a fixed list and whole
--- segments of it, at most seg_most elements; otherwise a length from `edges`, or one time in four any up to
--- `most`; "offsets" adds 2 to 12 sorted bounds within it. Returns n and {segment = size}, {offsets = bounds}
--- (a Lua list) or nil.
function M.fuzz_layout(rng, form, edges, seg_most, most)
  if form == "segment" then
    local size = ({ 1, 2, 3, 5, 8, 16, 17, 33, 100, 1000 })[rng(10)]
    return size * rng(1, math.max(1, math.min(60, seg_most // size))), { segment = size }
  end
  local n = rng(4) == 1 and rng(0, most) or edges[rng(#edges)]
  if form ~= "offsets" then return n, nil end
  local bounds = {}
  for k = 1, rng(2, 12) do bounds[k] = rng(0, n) end
  table.sort(bounds)
  return n, { offsets = bounds }
end

--- What the context holds once the garbage and the pool's idle scratch are given back, as a string to
-- compare before and after a call that an injected fault failed (it must leave nothing held).
function M.held()
  collectgarbage()
  gr.pool_trim()
  local st = gr.pool_stats()
  return string.format("%d bytes in %d allocations", st.live_device_bytes + st.live_pinned_bytes,
                       st.live_allocations)
end

local function bits(x) return (string.unpack("<i8", string.pack("<d", x))) end

--- Whether two results of whole-buffer reductions are the same bits: floats bit for bit (NaN any NaN),
-- integers and booleans equal and of one Lua type; tables {value, index} / {min, max} element by element.
function M.same_result(a, b)
  if type(a) == "table" then
    return type(b) == "table" and M.same_result(a[1], b[1]) and M.same_result(a[2], b[2])
  end
  if math.type(a) == "float" and math.type(b) == "float" then
    return (a ~= a and b ~= b) or (a == b and bits(a) == bits(b))
  end
  return a == b and math.type(a) == math.type(b)
end

--- The message of the error fn(...) raises; fails when it raises none.
function M.error_message(fn, ...)
  local ok, err = pcall(fn, ...)
  assert(not ok, "expected an error")
  return tostring(err)
end

--- Asserts that fn(...) raises an error whose message contains text (plainly, not as a pattern); returns
-- the message.
function M.expect_error(text, fn, ...)
  local err = M.error_message(fn, ...)
  assert(err:find(text, 1, true), "error message\n  " .. err .. "\ndoes not contain\n  " .. text)
  return err
end

--- An options table as Lua source for failure messages, keys sorted ("{ block = 256, op = \"sum\" }");
-- a stream shows as "a user stream".
function M.describe_opts(opts)
  local keys = {}
  for k in pairs(opts) do keys[#keys + 1] = k end
  table.sort(keys)
  local parts = {}
  for _, k in ipairs(keys) do
    local v = opts[k]
    if k == "stream" then v = "a user stream" end
    parts[#parts + 1] = k .. " = " .. (type(v) == "string" and string.format("%q", v) or tostring(v))
  end
  return "{ " .. table.concat(parts, ", ") .. " }"
end

--- s as one word for the shell (in single quotes).
function M.quote(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

--- Runs a shell command; returns whether it exited 0, and everything it printed (stdout and stderr).
function M.sh(cmd)
  local f = assert(io.popen(cmd .. " 2>&1"))
  local out = f:read("a")
  local ok, _, code = f:close()
  return ok and code == 0, out
end

--- The interpreter running busted (the most negative index of arg), for specs that start a fresh Lua.
function M.interpreter()
  local i = -1
  while arg and arg[i - 1] do i = i - 1 end
  return arg and arg[i] or "lua5.4"
end

--- Runs a Lua chunk in a fresh interpreter that finds this checkout's module as the specs do; returns
-- whether it exited 0, its exit code and everything it printed (stdout and stderr).
function M.run_lua(code, env)
  local chunk = os.tmpname()
  local f = assert(io.open(chunk, "w"))
  f:write(code)
  f:close()
  local function q(v) return "'" .. tostring(v):gsub("'", "'\\''") .. "'" end
  local cmd = string.format("%s LUA_PATH=%s LUA_CPATH=%s %s %s 2>&1", env or "", q(package.path),
    q(package.cpath), q(M.interpreter()), q(chunk))
  local p = assert(io.popen(cmd))
  local out = p:read("a")
  local _, _, code_ = p:close()
  os.remove(chunk)
  return code_ == 0, code_, out
end

return M
