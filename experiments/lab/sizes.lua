--- Element counts as people write them: "1048576", "2^20", "2^20+1", "2^24-3", "64K", "1M", "1G".
-- Parsing and printing live together so a size read from the command line prints back the same way.
local M = {}

M.MAX = 1 << 40     -- far beyond any device memory; catches typos like 2^400

local SUFFIX = { K = 1 << 10, M = 1 << 20, G = 1 << 30 }

--- The integer a size string denotes, or nil and a reason.
function M.parse(text)
  local s = tostring(text):gsub("%s", "")
  local n
  local base, exp, off = s:match("^(%d+)%^(%d+)([%+%-]?%d*)$")
  if base then
    base, exp = tonumber(base), tonumber(exp)
    if base < 2 or exp > 62 then return nil, "base or exponent out of range" end
    n = 1
    for _ = 1, exp do
      n = n * base
      if n > M.MAX then return nil, "larger than 2^40" end
    end
    if off ~= "" then
      if off == "+" or off == "-" then return nil, "missing offset after " .. off end
      n = n + math.tointeger(tonumber(off))
    end
  else
    local digits, suffix = s:match("^(%d+)([KMG]?)$")
    if not digits or #digits > 15 then return nil, "write 1048576, 2^20, 2^20+1 or 1M" end
    n = math.tointeger(tonumber(digits)) * (SUFFIX[suffix] or 1)
  end
  if n < 1 then return nil, "must be at least 1" end
  if n > M.MAX then return nil, "larger than 2^40" end
  return n
end

--- "2^20" for powers of two, "2^20+1" just above one, the decimal integer otherwise.
function M.format(n)
  for k = 0, 62 do
    local p = 1 << k
    if p == n then return "2^" .. k end
    if p > n then break end
    if k >= 10 and n - p > 0 and n - p <= 64 then return string.format("2^%d+%d", k, n - p) end
  end
  return tostring(n)
end

--- A byte count in binary units: "4 KiB", "64.0 MiB", "1.00 GiB".
function M.bytes(b)
  if b < 1024 then return b .. " B" end
  local units = { "KiB", "MiB", "GiB", "TiB" }
  local v, i = b / 1024, 1
  while v >= 1024 and i < #units do v, i = v / 1024, i + 1 end
  return string.format(v >= 100 and "%.0f %s" or v >= 10 and "%.1f %s" or "%.2f %s", v, units[i])
end

--- An argparse converter for one size, naming `option` in its error.
function M.converter(option)
  return function(text)
    local n, why = M.parse(text)
    if not n then return nil, string.format("%s: '%s' is not a size (%s)", option, text, why) end
    return n
  end
end

--- An argparse converter for a comma-separated list of sizes.
function M.list_converter(option)
  local one = M.converter(option)
  return function(text)
    local out = {}
    for item in text:gmatch("[^,%s]+") do
      local n, err = one(item)
      if not n then return nil, err end
      out[#out + 1] = n
    end
    return out
  end
end

return M
