--[[
logical_bits_spec.lua -- and/or must test "non-zero", not combine bits.

What it checks
  For every variant of the registry (GPU variants go through the helpers' variant_it: pending without
  a CUDA device), plus auto, and every dtype, with every finishing mode the variant has: gr.reduce with
  op "and" and "or" over data whose values are ALL non-zero but have distinct bits -- 1, 2, 3, 0x80 and
  0x40 patterns, negatives (-1, -128), for floats also 0.5, 2.0 (bits 0x40000000, which share no bit
  with 1.0's 0x3f800000), the smallest subnormal (bits 0x1), NaN and infinities -- at sizes 1, 31, 62,
  63, 64, 150, 1025 and 150000. Then the same data with exactly one zero at a random position, and for
  floats with exactly one -0.0 there instead.
  Expected: and = true on the all-non-zero data, false as soon as one zero (or -0.0) is present;
  or = true in all three, except at n = 1 where the zero replaces the only element (or = false).
  A kernel that folds the elements with a bitwise & (1 & 2 = 0) instead of a logical one, or that
  tests float bits instead of float values (-0.0 has a bit set), fails here; so did the `thrust`
  variant for `and` on uint8.

Reproducing
  The data is fixed (seeded per dtype and size); a failure names the variant, finish, dtype, size, the
  position of the zero and the first values: `busted spec/logical_bits_spec.lua`.
]]
local gr = require "gpureduce"
local R = require "support.fuzz_reference"
-- `pending` is looked up when the test runs: inside a test it is busted's "mark this test pending"
local H = require("support.helpers").bind(it, function(reason) pending(reason) end)

local SIZES = { 1, 31, 62, 63, 64, 150, 1025, 150000 }

-- all non-zero; for every dtype several values that share no bit with one another
local INT_VALUES = { 1, 2, 3, 4, 0x40, 0x80, 0x81, 0xfe, 0x100, 0x8000, 0x80000000, 1 << 62, math.mininteger, -1,
  -2, -128, -127, 0x7f }
local function float_values(dtype)
  local F = R.DTYPES[dtype].fmt
  return { 1.0, 2.0, 3.0, 0.5, -1.0, -2.0, 128.0, -128.0, 0.25, F.denorm_min, -F.denorm_min, F.min_normal, 0 / 0,
    math.huge, -math.huge }
end

local function value_list(dtype)
  if R.is_float(dtype) then
    local list = {}       -- the values the format holds (float8_e4m3: no infinity)
    for _, v in ipairs(float_values(dtype)) do
      if R.fits(dtype, v) then list[#list + 1] = v end
    end
    return list
  end
  local list = {}
  for _, v in ipairs(INT_VALUES) do
    if R.fits(dtype, v) then list[#list + 1] = v end
  end
  return list
end

local function fmt_values(values, limit)
  local parts = {}
  for i = 1, math.min(#values, limit) do parts[i] = R.fmt_short(values[i]) end
  return "{ " .. table.concat(parts, ", ") .. (#values > limit and ", ... }" or " }")
end

-- The buffers of one dtype, made on first use and kept while that dtype's tests run: per size, the
-- all-non-zero values and where the zero goes.
local current = {}
local function cases_of(dtype)
  if current.dtype == dtype then return current.cases end
  for _, c in ipairs(current.cases or {}) do c.b:free() end
  local list = value_list(dtype)
  local cases = {}
  for k, n in ipairs(SIZES) do
    local rng = R.rng(R.case_seed(20261121, k * 16 + #dtype))
    local values = {}
    for i = 1, n do values[i] = rng:pick(list) end
    local at = rng:range(1, n)
    cases[k] = { n = n, values = values, at = at, b = gr.buffer(values, dtype) }
  end
  current = { dtype = dtype, cases = cases }
  return cases
end

-- What goes at the zero's position: nothing (all non-zero), a zero, and for floats a -0.0.
local function states(dtype)
  if R.is_float(dtype) then
    return { { name = "all non-zero" }, { name = "one 0.0", zero = 0.0 }, { name = "one -0.0", zero = -0.0 } }
  end
  return { { name = "all non-zero" }, { name = "one 0", zero = 0 } }
end

local function check_variant(v, dtype)
  local failures = {}
  for _, c in ipairs(cases_of(dtype)) do
    for _, state in ipairs(states(dtype)) do
      if state.zero ~= nil then c.b:set({ state.zero }, c.at) end
      for _, finish in ipairs(v and v.finishes or { "auto" }) do
        for _, op in ipairs({ "and", "or" }) do
          -- or: a non-zero element remains unless the zero replaced the only one (n = 1)
          local want = state.zero == nil or (op == "or" and c.n > 1)
          local opts = { op = op, finish = finish, variant = v and v.name or nil }
          local ok, got = pcall(gr.reduce, c.b, opts)
          if not ok or got ~= want then
            failures[#failures + 1] = string.format(
              "%s %s finish=%s %s n=%d, %s%s: expected %s, got %s\n    values %s",
              v and v.name or "auto", op, finish, dtype, c.n, state.name,
              state.zero ~= nil and string.format(" at [%d]", c.at) or "", tostring(want),
              ok and tostring(got) or "error: " .. tostring(got), fmt_values(c.values, 12))
          end
        end
      end
      if state.zero ~= nil then c.b:set({ c.values[c.at] }, c.at) end
    end
  end
  local shown = {}
  for k = 1, math.min(#failures, 8) do shown[k] = failures[k] end
  assert(#failures == 0, string.format("%d wrong results:\n  %s%s", #failures, table.concat(shown, "\n  "),
    #failures > 8 and "\n  ..." or ""))
end

describe("and/or on non-zero data with distinct bits", function()
  for _, dtype in ipairs(gr.dtypes()) do
    it(string.format("auto %s: and is false only with a zero, or is true", dtype), function()
      check_variant(nil, dtype)
    end)
    for _, v in ipairs(H.variants()) do
      if H.takes(v, dtype) then
        H.variant_it(v, string.format("%s %s: and is false only with a zero, or is true", v.name, dtype), function()
          check_variant(v, dtype)
        end)
      end
    end
  end
end)
