--[[
convert_spec.lua -- b:astype(dtype) and gr.copy(dst, src) between dtypes, for every pair of gr.dtypes(),
against spec/support/convert_reference.lua (the rules of docs/api.md "Conversions" written without the
engine: rounding to nearest even on the exact bits, truncation, ranges).

What it checks, for every pair (from, to), with values that reveal bugs (NaN of both signs, the
infinities, -0.0, each dtype's extremes, halfway cases, overflow thresholds and the values on either
side, subnormals, int64 near 2^53 and 2^63):
  - astype of a host buffer: every value that fits converts to the reference's value, to the bit;
    values that do not fit raise, naming the first such element (counted from 1), its value and both
    dtypes;
  - gr.copy into an existing host buffer: the same values; a failing copy leaves the destination's
    bytes as they were;
  - gr.copy between a device and a host buffer, both ways (on the cpu backend both are host memory);
  - on a GPU (pending without one): astype of device buffers, device -> device copies, and the device's
    bits against the host's on random data, aligned or not, with tails.
]]
local gr = require "gpureduce"
local H = require("support.helpers").bind(it, function(reason) pending(reason) end)
local R = require "support.convert_reference"

local DTYPES = gr.dtypes()

-- The values of each dtype worth converting (the reference's candidates that the dtype holds).
local VALUES = {}
for _, name in ipairs(DTYPES) do VALUES[name] = R.values_of(name) end

--- How the engine writes a value in a message (dtype.c's gr_format_float for floats).
local function value_text(name, v)
  if math.type(v) == "float" then
    if v ~= v then return nil end                       -- "nan" or "-nan", as the C library spells it
    if v == math.huge then return "inf" elseif v == -math.huge then return "-inf" end
    local s
    for digits = 15, 17 do
      s = string.format("%." .. digits .. "g", v)
      if tonumber(s) == v then break end
    end
    if not s:find("[%.eni]") then s = s .. ".0" end
    return s
  end
  if type(v) == "boolean" then return tostring(v) end
  if v < 0 and R.info(name).kind == "uint" then    -- 2^63 or more: the unsigned decimal of the bits
    local q = (v >> 1) // 5
    return tostring(q) .. tostring(v - q * 10)
  end
  return tostring(v)
end

local function plain(s) return (s:gsub("[%(%)%.%%%+%-%*%?%[%]%^%$]", "%%%0")) end

--- Checks that err says element i (1-based) of `from`, holding v, does not fit `to`.
local function assert_names(err, i, from, to, v)
  err = tostring(err)
  assert.matches("element " .. i .. " %(" .. from .. " ", err, 1)
  assert.matches(") does not fit in " .. plain(to), err, 1, true)
  local text = value_text(from, v)
  if text then assert.matches("%(" .. from .. " " .. plain(text), err) end
end

--- The values of `from` split by the reference into those that convert to `to` (with their expected
-- results) and those that do not.
local function split(from, to)
  local ok_in, ok_out, bad = {}, {}, {}
  for _, v in ipairs(VALUES[from]) do
    local fits, r = R.convert(R.value(from, v), to)
    if fits then
      ok_in[#ok_in + 1] = v
      ok_out[#ok_out + 1] = r
    else
      bad[#bad + 1] = v
    end
  end
  return ok_in, ok_out, bad
end

local function check_values(got, want, from, to, inputs)
  assert.are.equal(#want, #got)
  for i = 1, #want do
    if not R.same(got[i], want[i]) then
      error(string.format("%s -> %s: element %d (%s) became %s, expected %s", from, to, i, tostring(inputs[i]),
        tostring(got[i]), tostring(want[i])), 2)
    end
  end
end

--- A buffer of the values (a table; bool takes booleans).
local function buffer_of(values, dtype, where)
  return gr.buffer(values, dtype, { where = where })
end

--- A destination with recognisable contents (the dtype's own values, in turn): its bytes, to compare
-- after a failed copy.
local function filled(n, dtype, where)
  local values, own = {}, VALUES[dtype]
  for i = 1, n do values[i] = own[(i * 7) % #own + 1] end
  local b = buffer_of(values, dtype, where)
  return b, b:tobytes()
end

--- gr.copy(d, s) must raise naming element `at` (holding v) and leave d's bytes as they were.
local function assert_copy_refused(d, s, at, from, to, v)
  local before = d:tobytes()
  local ok, err = pcall(gr.copy, d, s)
  assert.is_false(ok, from .. " -> " .. to .. ": " .. tostring(v) .. " copied")
  assert_names(err, at, from, to, v)
  assert.are.equal(before, d:tobytes())
end

--- f(from, to) for every pair of dtypes, the same one twice included.
local function each_pair(f)
  for _, from in ipairs(DTYPES) do
    for _, to in ipairs(DTYPES) do f(from, to) end
  end
end

--- astype and copy of every value of `from` into `to`, the buffers on side `where`.
local function check_pair(from, to, where)
  local ok_in, ok_out, bad = split(from, to)
  -- astype: every value that fits
  local src = buffer_of(ok_in, from, where)
  local a = src:astype(to)
  assert.are.equal(to, a:dtype())
  assert.are.equal(where, a:where())
  check_values(a:totable(), ok_out, from, to, ok_in)
  -- copy into an existing buffer: the same values
  local dst = filled(#ok_in, to, where)
  assert.are.equal(dst, gr.copy(dst, src))
  check_values(dst:totable(), ok_out, from, to, ok_in)
  -- each value that does not fit, after one that does: astype raises naming it, copy leaves dst as it was
  local first = ok_in[1]
  for _, v in ipairs(bad) do
    local s = buffer_of(first ~= nil and { first, v } or { v }, from, where)
    local at = first ~= nil and 2 or 1
    local okc, err = pcall(s.astype, s, to)
    assert.is_false(okc, from .. " -> " .. to .. ": " .. tostring(v) .. " converted")
    assert_names(err, at, from, to, v)
    assert_copy_refused(filled(#s, to, where), s, at, from, to, v)
  end
  -- all of them at once: the first failing element is named, after every one that fits
  if #bad > 0 then
    local all = {}
    for _, v in ipairs(ok_in) do all[#all + 1] = v end
    for _, v in ipairs(bad) do all[#all + 1] = v end
    local s = buffer_of(all, from, where)
    local okc, err = pcall(s.astype, s, to)
    assert.is_false(okc)
    assert_names(err, #ok_in + 1, from, to, bad[1])
    assert_copy_refused(filled(#all, to, where), s, #ok_in + 1, from, to, bad[1])
  end
end

describe("b:astype and gr.copy between dtypes, on the host", function()
  each_pair(function(from, to)
    it(from .. " -> " .. to, function() check_pair(from, to, "host") end)
  end)
end)

describe("gr.copy between dtypes, between device and host buffers", function()
  each_pair(function(from, to)
    it(from .. " -> " .. to, function()
      local ok_in, ok_out, bad = split(from, to)
      for _, sides in ipairs({ { "device", "host" }, { "host", "device" } }) do
        local dst = filled(#ok_in, to, sides[2])
        gr.copy(dst, buffer_of(ok_in, from, sides[1]))
        check_values(dst:totable(), ok_out, from, to, ok_in)
        if bad[1] ~= nil then
          assert_copy_refused(filled(1, to, sides[2]), buffer_of({ bad[1] }, from, sides[1]), 1, from, to, bad[1])
        end
      end
    end)
  end)
end)

describe("b:astype and gr.copy between dtypes, on the device", function()
  each_pair(function(from, to)
    H.gpu_it(from .. " -> " .. to, function() check_pair(from, to, "device") end)
  end)

  -- The kernel's 16-byte chunks, the tail after them, and unaligned views (element-by-element), on
  -- random data: the device's bits are the host loops' bits.
  local function random_source(dtype, n)
    local d = R.info(dtype)
    local b = gr.buffer(n, dtype)
    if d.kind == "float" then b:random(7, -d.max / 2, d.max / 2) else b:random(7) end
    return b
  end
  each_pair(function(from, to)
    H.gpu_it(from .. " -> " .. to .. " on random data, aligned or not, as the host converts it", function()
      for _, n in ipairs({ 1, 7, 8, 9, 31, 33, 1000, 4099 }) do
        local src = random_source(from, n + 3)
        for _, off in ipairs({ 1, 2 }) do
          local view = src:slice(off, n)
          local host = gr.copy(gr.buffer(n, from, { where = "host" }), view)
          local okh, want = pcall(host.astype, host, to)
          local okd, got = pcall(view.astype, view, to)
          assert.are.equal(okh, okd)
          if okh then assert.are.equal(want:tobytes(), got:tobytes())
          else assert.are.equal(want, got) end
        end
      end
    end)
  end)

  H.gpu_it("float32 -> bfloat16 of 2^24 elements: every element as the host rounds it", function()
    local n = 1 << 24
    local src = gr.buffer(n, "float32"):random(3, -1e30, 1e30)
    local got = src:astype("bfloat16")
    local host = gr.copy(gr.buffer(n, "float32", { where = "host" }), src):astype("bfloat16")
    assert.are.equal(host:tobytes(), got:tobytes())
  end)
end)

describe("conversion edges", function()
  it("same dtype: a copy, a new buffer on the same side", function()
    local b = gr.buffer({ 1.5, -0.0, 0 / 0 }, "float32", { where = "host" })
    local c = b:astype("float32")
    assert.are_not.equal(b, c)
    assert.are.equal(b:tobytes(), c:tobytes())
    assert.are.equal("host", c:where())
    c[1] = 2
    assert.are.equal(1.5, b[1])
  end)

  it("an empty buffer converts to an empty buffer", function()
    for _, to in ipairs(DTYPES) do
      local a = gr.buffer(0, "float64"):astype(to)
      assert.are.equal(0, #a)
      assert.are.equal(to, a:dtype())
      gr.copy(gr.buffer(0, to), gr.buffer(0, "int8"))
    end
  end)

  it("a slice converts its own elements", function()
    local b = gr.buffer({ 1, 2, 300, 4, 5 }, "int32")
    assert.are.same({ 4, 5 }, b:slice(4):astype("uint8"):totable())
    local err = select(2, pcall(b.astype, b:slice(2, 3), "int8"))
    assert.matches("element 2 (int32 300) does not fit in int8", err, 1, true)
  end)

  it("the rules of docs/api.md, by example", function()
    local f64 = function(t) return gr.buffer(t, "float64") end
    assert.are.equal(65504.0, f64({ 65519 }):astype("float16")[1])
    assert.is_false(pcall(f64({ 65520 }).astype, f64({ 65520 }), "float16"))
    assert.are.same({ 2, -2, 0, 0 }, f64({ 2.9, -2.9, 0.5, -0.5 }):astype("int8"):totable())
    local big = gr.buffer({ (1 << 60) + (1 << 36) + 1 }, "int64"):astype("float32")[1]
    assert.are.equal(2.0 ^ 60 + 2.0 ^ 37, big)            -- rounded once, up: not to 2^60 through a double
    local tie = gr.buffer({ (1 << 60) + (1 << 52) + 1 }, "int64"):astype("bfloat16")[1]
    assert.are.equal(2.0 ^ 60 + 2.0 ^ 53, tie)
    assert.are.equal(2.0 ^ 53, gr.buffer({ (1 << 53) + 1 }, "int64"):astype("float64")[1])
    local err = select(2, pcall(function() f64({ 1, 0 / 0 }):astype("int32") end))
    assert.matches("element 2 %(float64 %-?nan%) does not fit in int32", err)
  end)

  it("copy refuses buffers of different sizes, naming both", function()
    local ok, err = pcall(gr.copy, gr.buffer(3, "int8"), gr.buffer(4, "float32"))
    assert.is_false(ok)
    assert.matches("bad argument #2 to '[^']*' %(src: source is 4 float32, destination 3 int8 %(the sizes must match%)%)",
      err)
  end)

  it("astype names its argument and lists the dtypes it accepts", function()
    local b = gr.buffer(2, "int32")
    local ok, err = pcall(b.astype, b, "float12")
    assert.is_false(ok)
    assert.matches("bad argument #2 to '[^']*' %(unknown dtype 'float12' %(accepted: " .. plain(table.concat(DTYPES, ", ")),
      err)
    ok, err = pcall(b.astype, b)
    assert.is_false(ok)
    assert.matches("dtype: expected a string %(accepted: int8, ", err)
    ok, err = pcall(b.astype, 5, "int8")
    assert.is_false(ok)
    assert.matches("gpureduce.Buffer expected", err, 1, true)
    b:free()
    assert.matches("buffer has been freed", select(2, pcall(b.astype, b, "int8")), 1, true)
  end)
end)
