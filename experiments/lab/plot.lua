--- PNG plots of a sweep through gnuplot: GB/s vs n and time vs n, one line per variant (or per
-- variant/block/finish when the sweep varied those), log2 x axis, one pair of PNGs per (dtype, op).
-- Used by sweep.lua after a run and by plot.lua on a saved JSON.
local header = require "lab.header"

local M = {}

local COLORS = {
  "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
  "#bcbd22", "#17becf", "#000080", "#808000", "#008080", "#800000", "#ff1493", "#4b0082",
}

--- The best PNG terminal of the gnuplot on the PATH ("pngcairo", "png"), or nil without gnuplot.
function M.terminal()
  if not os.execute("command -v gnuplot >/dev/null 2>&1") then return nil end
  for _, t in ipairs({ "pngcairo", "png" }) do
    if os.execute("gnuplot -e 'set terminal " .. t .. "' >/dev/null 2>&1") then return t end
  end
  return nil
end

local function label_of(r, varied)
  local label = r.variant
  if varied[r.variant].blocks > 1 and r.block then label = label .. " b=" .. r.block end
  if varied[r.variant].finishes > 1 then label = label .. " " .. r.finish end
  return label
end

--- Valid, timed results by (dtype, op), each split into series ordered by variant ordinal.
local function collect(results)
  local groups, order = {}, {}
  for _, r in ipairs(results) do
    if r.valid and type(r.ms) == "number" then
      local key = r.dtype .. "-" .. r.op
      local g = groups[key]
      if not g then
        g = { dtype = r.dtype, op = r.op, rows = {} }
        groups[key], order[#order + 1] = g, key
      end
      g.rows[#g.rows + 1] = r
    end
  end
  for _, key in ipairs(order) do
    local g = groups[key]
    local varied, seen = {}, {}
    for _, r in ipairs(g.rows) do
      local v = varied[r.variant] or { blocks = 0, finishes = 0, b = {}, f = {} }
      varied[r.variant] = v
      local bk = tostring(r.block)
      if not v.b[bk] then v.b[bk], v.blocks = true, v.blocks + 1 end
      if not v.f[r.finish] then v.f[r.finish], v.finishes = true, v.finishes + 1 end
    end
    g.series = {}
    for _, r in ipairs(g.rows) do
      local label = label_of(r, varied)
      local s = seen[label]
      if not s then
        s = { label = label, ordinal = r.ordinal, points = {} }
        seen[label], g.series[#g.series + 1] = s, s
      end
      s.points[#s.points + 1] = r
    end
    table.sort(g.series, function(a, b)
      if a.ordinal ~= b.ordinal then return a.ordinal < b.ordinal end
      return a.label < b.label
    end)
    for _, s in ipairs(g.series) do table.sort(s.points, function(a, b) return a.n < b.n end) end
    g.nmin, g.nmax = math.huge, 0
    for _, r in ipairs(g.rows) do g.nmin, g.nmax = math.min(g.nmin, r.n), math.max(g.nmax, r.n) end
  end
  local list = {}
  for i, key in ipairs(order) do list[i] = groups[key] end
  return list
end

-- a gnuplot double-quoted string: "\n" inside stays a line break, quotes are escaped
local function quote(s) return '"' .. tostring(s):gsub('"', '\\"') .. '"' end

--- The gnuplot script of one plot; `field` is "gbps" or "ms".
local function script(g, field, term, path, h)
  local lines = {
    string.format("set terminal %s size 1200,720 enhanced font 'sans,11'", term),
    "set output " .. quote(path),
    string.format("set title %s noenhanced", quote(string.format("%s %s: %s vs n\\n%s, %s, rev %s",
      g.dtype, g.op, field == "gbps" and "bandwidth" or "time",
      h.backend == "cuda" and h.device or "CPU backend (no CUDA device)", h.date or "?",
      h.git_revision or "?"))),
    "set logscale x 2", "set format x '2^{%L}'", "set xlabel 'n (elements, log_2 scale)'",
    string.format("set xrange [%g:%g]", g.nmin / 1.5, g.nmax * 1.5),
    "set grid", "set key outside right top noenhanced",
  }
  if field == "gbps" then
    lines[#lines + 1] = "set ylabel 'GB/s (bytes read / median time)'"
    lines[#lines + 1] = "set yrange [0:*]"
  else
    lines[#lines + 1] = "set logscale y 10"
    lines[#lines + 1] = "set ylabel 'time per reduction (ms, median; log scale)'"
  end
  local plots = {}
  for i, s in ipairs(g.series) do
    lines[#lines + 1] = string.format("$s%d << EOD", i)
    for _, r in ipairs(s.points) do
      lines[#lines + 1] = string.format("%d %.9g", r.n, r[field])
    end
    lines[#lines + 1] = "EOD"
    plots[#plots + 1] = string.format(
      "$s%d using 1:2 with linespoints lw 2 pt %d ps 1.2 lc rgb '%s' title %s",
      i, (i - 1) % 14 + 1, COLORS[(i - 1) % #COLORS + 1], quote(s.label))
  end
  if field == "gbps" and type(h.read_ceiling_gbps) == "number" then
    plots[#plots + 1] = string.format("%.6g with lines dt 2 lw 2 lc rgb 'black' title %s",
      h.read_ceiling_gbps, quote(string.format("read ceiling %.0f GB/s", h.read_ceiling_gbps)))
  end
  lines[#lines + 1] = "plot " .. table.concat(plots, ", \\\n  ")
  return table.concat(lines, "\n") .. "\n"
end

--- Draws every plot of doc ({header=, results=}) into outdir as BASE-{gbps,time}-DTYPE-OP.png.
-- Returns the list of files, or nil and a message (no gnuplot, nothing valid to plot, gnuplot failed).
function M.draw(doc, outdir, base)
  local term = M.terminal()
  if not term then return nil, "gnuplot not found: no plots" end
  local groups = collect(doc.results)
  if #groups == 0 then return nil, "no valid timed results to plot" end
  local files = {}
  local tmp = os.tmpname()
  for _, g in ipairs(groups) do
    for _, field in ipairs({ "gbps", "ms" }) do
      local path = string.format("%s/%s-%s-%s-%s.png", outdir, base, field == "gbps" and "gbps" or "time",
        g.dtype, g.op)
      local f = assert(io.open(tmp, "w"))
      f:write(script(g, field, term, path, doc.header or {}))
      f:close()
      local p = io.popen("gnuplot " .. header.shell_quote(tmp) .. " 2>&1")
      local msg = p:read("a")
      local ok = p:close()
      if not ok then
        os.remove(tmp)
        return nil, "gnuplot failed on " .. path .. ": " .. msg
      end
      files[#files + 1] = path
    end
  end
  os.remove(tmp)
  return files
end

return M
