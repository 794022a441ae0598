--- The printed summary: one aligned table per (dtype, op, n), in the textbook's style.
local sizes = require "lab.sizes"

local M = {}

local COLUMNS = {
  { "variant", "%-18s" }, { "block", "%5s" }, { "grid", "%9s" }, { "passes", "%6s" }, { "finish", "%-7s" },
  { "ms med", "%10s" }, { "ms min", "%10s" }, { "GB/s", "%9s" }, { "%peak", "%6s" }, { "vs neighb", "%9s" },
  { "vs cub", "%7s" }, { "ok", "%s" },
}

local function fmt_or_dash(fmt, v)
  if v == nil then return "-" end
  return string.format(fmt, v)
end

local function fmt_ms(v)
  if v == nil then return "-" end
  return string.format(v < 10 and "%.4f" or v < 1000 and "%.2f" or "%.0f", v)
end

local function line(cells)
  local parts = {}
  for i, c in ipairs(COLUMNS) do parts[i] = string.format(c[2], cells[i]) end
  return table.concat(parts, " ")
end

--- The title of a group, e.g. "float32 sum, n = 2^24 (16777216 elements, 64.0 MiB)".
function M.title(g, bytes)
  return string.format("%s %s, n = %s (%d elements, %s)", g.dtype, g.op, sizes.format(g.n), g.n,
    sizes.bytes(bytes))
end

--- The table of one group as text. rows: the group's result records (lab/output's fields).
function M.table(g, rows, bytes)
  local out = { "== " .. M.title(g, bytes) }
  local head = {}
  for i, c in ipairs(COLUMNS) do head[i] = c[1] end
  out[#out + 1] = line(head)
  local failures = {}
  for _, r in ipairs(rows) do
    out[#out + 1] = line({
      r.variant, fmt_or_dash("%d", r.block), fmt_or_dash("%d", r.grid), fmt_or_dash("%d", r.passes),
      r.finish, fmt_ms(r.ms), fmt_ms(r.ms_min), fmt_or_dash("%.1f", r.gbps),
      fmt_or_dash("%.1f%%", r.pct_ceiling), fmt_or_dash("%.2fx", r.speedup_vs_neighbored),
      fmt_or_dash("%.2f", r.ratio_to_cub), r.valid and "✓" or "✗",
    })
    if not r.valid then failures[#failures + 1] = r end
  end
  for _, r in ipairs(failures) do
    out[#out + 1] = string.format("   ✗ %s block %s finish %s: %s (not timed)", r.variant,
      r.block or "-", r.finish, r.error)
  end
  return table.concat(out, "\n")
end

--- How the derived columns are computed, printed once under the tables.
M.LEGEND = table.concat({
  "ms: median and minimum of the timed reps; GB/s: bytes read / median; %peak: of the read ceiling;",
  "vs neighb: neighbored's median / this median (neighbored at its default block and finish, else its",
  "  fastest);",
  "vs cub: cub's median / this median (1.00 = as fast as CUB); ✓/✗: within the error bound of the exact",
  "  value (lab/validate.lua).",
}, "\n")

return M
