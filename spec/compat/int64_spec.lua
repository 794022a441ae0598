-- int64 and uint64 values on every Lua (docs/api.md, "Lua versions"). On 5.3 and later a Lua integer
-- holds every one; on 5.1 and LuaJIT numbers are doubles, exact up to 2^53, and a value beyond that
-- raises unless gr.int64 says "string" or "float": never a silently rounded number. Lua 5.1 syntax.
local gr = require "gpureduce"

local INT64 = math.type ~= nil            -- 5.3 and later: 64-bit integers
local BIG = "1152921504606846977"         -- 2^60 + 1: no double holds it

-- An int64 (or uint64) buffer of one element from its 8 little-endian bytes, built without string.pack.
local function from_bytes(dtype, bytes)
  local s = {}
  for i = 1, 8 do s[i] = string.char(bytes[i] or 0) end
  return gr.buffer(table.concat(s), dtype)
end
local TWO60_PLUS1 = { 1, 0, 0, 0, 0, 0, 0, 16 }
local MINUS_BIG = { 255, 255, 255, 255, 255, 255, 255, 239 }   -- -(2^60 + 1)
local UINT64_MAX = { 255, 255, 255, 255, 255, 255, 255, 255 }

local function with_mode(mode, f)
  local before = gr.int64(mode)
  local ok, err = pcall(f)
  gr.int64(before)
  if not ok then error(err, 0) end
end

describe("compat: int64 results", function()
  it("gr.int64 keeps a mode, returns the one before, and refuses others", function()
    assert.equal("error", gr.int64())
    assert.equal("error", gr.int64("string"))
    assert.equal("string", gr.int64("float"))
    assert.equal("float", gr.int64("error"))
    local ok, err = pcall(gr.int64, "wide")
    assert.is_false(ok)
    assert.matches("invalid option 'wide'", err, 1, true)
  end)

  it("values up to 2^53 are numbers, exactly, whatever the mode", function()
    local b = gr.buffer(2, "int64"):fill(2 ^ 53)
    assert.equal(2 ^ 53, b[1])
    assert.equal(2 ^ 53, gr.max(b))
    with_mode("string", function() assert.equal(2 ^ 53, gr.min(b)) end)
  end)

  if INT64 then
    it("are Lua integers on " .. _VERSION .. ", beyond 2^53 too, whatever the mode", function()
      local b = from_bytes("int64", TWO60_PLUS1)
      with_mode("string", function()
        assert.equal(BIG, string.format("%d", b[1]))
        assert.equal(-1, from_bytes("uint64", UINT64_MAX)[1])      -- the bits, as two's complement
      end)
    end)
  else
    it("beyond 2^53 raise by default, naming the value and the options", function()
      local b = from_bytes("int64", TWO60_PLUS1)
      local ok, err = pcall(function() return b[1] end)
      assert.is_false(ok)
      assert.matches("the int64 value " .. BIG .. " is beyond 2^53", err, 1, true)
      assert.matches('gr.int64("string")', err, 1, true)
      ok, err = pcall(gr.sum, from_bytes("uint64", UINT64_MAX))
      assert.is_false(ok)
      assert.matches("the uint64 value 18446744073709551615 is beyond 2^53", err, 1, true)
      ok = pcall(function() return b:totable() end)
      assert.is_false(ok)
    end)

    it("beyond 2^53 come back as decimal strings with gr.int64(\"string\")", function()
      with_mode("string", function()
        assert.equal(BIG, from_bytes("int64", TWO60_PLUS1)[1])
        assert.equal("-" .. BIG, from_bytes("int64", MINUS_BIG)[1])
        assert.equal("18446744073709551615", from_bytes("uint64", UINT64_MAX)[1])
        assert.same({ 1, BIG }, gr.buffer(2, "int64"):set({ 1 }):set(from_bytes("int64", TWO60_PLUS1):tobytes(), 2)
          :totable())
      end)
    end)

    it("beyond 2^53 round to the nearest number with gr.int64(\"float\")", function()
      with_mode("float", function()
        assert.equal(2 ^ 60, from_bytes("int64", TWO60_PLUS1)[1])
        assert.equal(2 ^ 64, gr.max(from_bytes("uint64", UINT64_MAX)))
      end)
    end)

    it("integers in: exact integral doubles are integers, others are refused", function()
      assert.equal(3, gr.buffer(3.0, "int64"):size())
      local ok, err = pcall(gr.buffer, 3.5)
      assert.is_false(ok)
      assert.matches("expected an integer, got 3.5", err, 1, true)
      with_mode("string", function()             -- 2^60 is a double: stored exactly, read back exactly
        assert.equal("1152921504606846976", gr.sum(gr.buffer(1, "int64"):fill(2 ^ 60)))
      end)
    end)
  end
end)
