--- The accuracy lab's named data sets, generated in Lua from a seed: the same (name, n, seed) always gives
-- the same bytes, and a float32 set is its float64 twin rounded to float32 -- but for uniform, which
-- draws 24 bits instead (so that it stays below 1), and subnormal, which is scaled to float32's own
-- subnormal range. Each generator returns the little-endian bytes of n elements, ready for
-- gr.buffer(bytes, dtype).
local M = {}

local PI = math.pi
local CHUNK = 1024                    -- values per string.pack call

--- name -> what it holds (the order is M.NAMES).
M.ABOUT = {
  uniform = "U[0,1): no cancellation, condition number 1",
  cancelling = "pairs x, -x(1+d) with x in [-1,1), |d| < 2^-18, the second halves n/2 later: sum|x| / |sum x| about 5e5 sqrt(n)",
  heavy = "Cauchy, tan(pi (u - 1/2)): most values near 1, a few near 1e15, both signs",
  mixed = "both signs, magnitudes log-uniform over 1e-30 .. 1e30",
  subnormal = "both signs, all below the smallest normal of the dtype (float32 2^-126, float64 2^-1022)",
}
M.NAMES = { "uniform", "cancelling", "heavy", "mixed", "subnormal" }

--- A sink of doubles that packs them CHUNK at a time, as float32 or float64.
local function writer(dtype)
  local code = dtype == "float32" and "f" or "d"
  local fmt = "<" .. code:rep(CHUNK)
  local parts, buf, k = {}, {}, 0
  local w = {}
  function w.put(x)
    k = k + 1
    buf[k] = x
    if k == CHUNK then
      parts[#parts + 1] = string.pack(fmt, table.unpack(buf, 1, k))
      k = 0
    end
  end
  function w.bytes()
    if k > 0 then parts[#parts + 1] = string.pack("<" .. code:rep(k), table.unpack(buf, 1, k)) end
    k = 0
    return table.concat(parts)
  end
  return w
end

local GEN = {}

function GEN.uniform(n, f32, out)
  local shift, scale = f32 and 40 or 11, f32 and 2.0 ^ -24 or 2.0 ^ -53
  -- the top 64 - shift bits of a 64-bit draw (Lua 5.4's math.random(0); 5.3 draws them directly)
  local top = _VERSION == "Lua 5.4" and function() return math.random(0) >> shift end
    or function() return math.random(0, (1 << (64 - shift)) - 1) end
  for _ = 1, n do out.put(top() * scale) end
end

function GEN.cancelling(n, f32, out)
  local second = writer(f32 and "float32" or "float64")
  for _ = 1, n // 2 do
    local x = 2 * math.random() - 1
    local d = (math.random() - 0.5) * 2.0 ^ -17
    out.put(x)
    second.put(-x * (1 + d))
  end
  if n % 2 == 1 then second.put((math.random() - 0.5) * 2.0 ^ -17) end
  return second.bytes()
end

function GEN.heavy(n, _, out)
  for _ = 1, n do out.put(math.tan(PI * (math.random() - 0.5))) end
end

function GEN.mixed(n, _, out)
  for _ = 1, n do
    local s = math.random() < 0.5 and -1 or 1
    out.put(s * 10.0 ^ (60 * math.random() - 30))
  end
end

function GEN.subnormal(n, f32, out)
  local scale = f32 and 2.0 ^ -125 or 2.0 ^ -1021     -- (u - 1/2) times this: below 2^-126 / 2^-1022
  for _ = 1, n do out.put((math.random() - 0.5) * scale) end
end

--- The seed of one (name, n, seed): data sets and sizes draw independent streams.
local function seed_of(name, n, seed)
  local v = seed
  for c in (name .. ":" .. n):gmatch(".") do v = (v * 31 + c:byte()) % 2147483647 end
  return v
end

--- The bytes of data set `name` with n elements of dtype (float32 or float64), by seed.
function M.bytes(name, n, dtype, seed)
  local gen = GEN[name]
  if not gen then error("datasets: unknown data set '" .. tostring(name) .. "'", 2) end
  math.randomseed(seed_of(name, n, seed))
  local out = writer(dtype)
  local tail = gen(n, dtype == "float32", out)
  return out.bytes() .. (tail or "")
end

return M
