--- The accuracy lab's printed tables: per (dtype, op, n) the data sets (condition number, exact result),
-- the error of every (variant, level, accumulator) on each data set, and the bits the variants share.
local sizes = require "lab.sizes"

local M = {}

local function rel(v)
  if v == nil then return "-" end
  if v == 0 then return "0" end
  if v == math.huge then return "inf" end
  return string.format("%.1e", v)
end

local function ulps(r)
  if r == nil then return "-" end
  if r.error then return "error" end
  if r.correctly_rounded then return "exact" end
  local v = r.ulps
  if v == math.huge then return "inf" end
  if v >= 1e5 then return string.format("%.1e", v) end
  return string.format("%.3g", v)
end

local function num(v)
  if v ~= v then return "nan" end
  return string.format("%.9g", v)
end

--- The title of a group, e.g. "float32 sum, n = 2^20 (1048576 elements)".
function M.title(g)
  return string.format("%s %s, n = %s (%d elements)", g.dtype, g.op, sizes.format(g.n), g.n)
end

--- The lines of the data sets of a group: condition number and the exact result in each format.
function M.datasets(g, facts)
  local how = (g.op == "norm" or g.op == "std") and "the square root of the exact value, in double, then rounded"
    or "the exact value, correctly rounded"
  local out = { string.format("   %-11s %16s  exact %s (%s)", "data set", "sum|x|/|sum x|", g.op, how) }
  for _, name in ipairs(g.datasets) do
    local f = facts[name]
    local parts = {}
    for _, acc in ipairs(g.accs) do parts[#parts + 1] = acc .. " " .. num(f.exact[acc]) end
    out[#out + 1] = string.format("   %-11s %16s  %s", name, string.format("%.3g", f.condition),
      table.concat(parts, ", "))
  end
  return out
end

--- The error table of a group: one row per configuration, rel err and ulps per data set, and whether
-- repeated runs gave the same bits.
function M.table(g, facts)
  local out = { "== " .. M.title(g) }
  for _, line in ipairs(M.datasets(g, facts)) do out[#out + 1] = line end
  local head1 = string.format("%-20s %-14s %-7s", "variant", "level", "acc")
  local head2 = string.format("%-20s %-14s %-7s", "", "", "")
  for _, name in ipairs(g.datasets) do
    head1 = head1 .. string.format(" | %-18s", name)
    head2 = head2 .. string.format(" | %8s %9s", "rel err", "ulps")
  end
  out[#out + 1] = head1 .. " | runs"
  out[#out + 1] = head2 .. " |"
  for i, c in ipairs(g.configs) do
    local line = string.format("%-20s %-14s %-7s", c.variant, c.level, c.acc)
    local differ = {}
    for _, name in ipairs(g.datasets) do
      local r = g.cells[i][name]
      line = line .. string.format(" | %8s %9s", r and not r.error and rel(r.rel_err) or "-", ulps(r))
      if r and r.same_runs == false then differ[#differ + 1] = name end
    end
    out[#out + 1] = line .. " | " .. (#differ == 0 and "same" or "differ: " .. table.concat(differ, ","))
  end
  return table.concat(out, "\n")
end

--- The bits table of a group: per (level, acc) and data set, distinct results among the variants and how
-- many equal auto's; then, per (level, acc), the variants that differ from auto somewhere.
function M.bits(g, bits)
  local out = { string.format("   bits: distinct results / variants, and (=auto) how many give auto's bits") }
  local line = string.format("   %-14s %-7s", "level", "acc")
  for _, name in ipairs(g.datasets) do line = line .. string.format(" | %-18s", name) end
  out[#out + 1] = line
  local notes = {}
  for _, key in ipairs(g.bit_keys) do
    line = string.format("   %-14s %-7s", key.level, key.acc)
    local differ = {}
    for _, name in ipairs(g.datasets) do
      local b = bits[key.id .. "|" .. name]
      line = line .. string.format(" | %-18s", b and string.format("%d / %d (%s=auto)", b.distinct, b.variants,
        b.agree_with_auto and #b.agree_with_auto or "-") or "-")
      for _, v in ipairs(b and b.differ_from_auto or {}) do differ[v] = true end
    end
    out[#out + 1] = line
    local list = {}
    for _, c in ipairs(g.configs) do
      if differ[c.variant] and c.level == key.level and c.acc == key.acc then list[#list + 1] = c.variant end
    end
    if #list > 0 then
      notes[#notes + 1] = string.format("   %s %s: other bits than auto on some data set: %s", key.level,
        key.acc, table.concat(list, ", "))
    end
  end
  for _, n in ipairs(notes) do out[#out + 1] = n end
  return table.concat(out, "\n")
end

--- What the columns mean, printed once under the tables.
M.LEGEND = table.concat({
  "rel err: |result - exact| / |exact|, exact the real value, computed exactly (Lua integers, no engine call);",
  "ulps: |result - exact| / ulp, the spacing of the accumulator format's numbers at the correctly rounded exact",
  "  value; 'exact': the result is that correctly rounded value (norm, std: within 0.5 ulp);",
  "runs: each configuration ran twice; 'differ' names the data sets whose two results had other bits;",
  "bits: for each level and accumulator, how many distinct results the variants gave (gpu_to_gpu: 1),",
  "  and how many gave the bits of auto (not_guaranteed and run_to_run: auto's run_to_run result).",
}, "\n")

return M
