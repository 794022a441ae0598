--- Redraws the PNG plots of a saved sweep (the same code the sweep uses after a run).
--   lua5.4 experiments/plot.lua results/sweep.json [outdir]
-- Writes OUTDIR/BASE-{gbps,time}-DTYPE-OP.png, BASE being the JSON file's name without ".json";
-- OUTDIR defaults to the JSON file's directory. Needs gnuplot, not gpureduce.
local here = (arg and arg[0] or ""):match("^(.*)/[^/]*$") or "."
package.path = here .. "/?.lua;" .. package.path

local argparse = require "argparse"
local output = require "lab.output"
local plot = require "lab.plot"

local parser = argparse("plot.lua", "Redraw the PNG plots of a saved sweep (GB/s and time vs n per "
  .. "variant, one pair per dtype and op).")
parser:help_max_width(100)
parser:argument("json", "A sweep's JSON file (sweep.lua --out DIR writes DIR/sweep.json).")
parser:argument("outdir", "Where the PNGs go. (default: the JSON file's directory)"):args("?")
local args = parser:parse(arg)

local doc, err = output.read_json(args.json)
if not doc then
  io.stderr:write("plot: ", err, "\n")
  os.exit(1)
end
local outdir = args.outdir or args.json:match("^(.*)/[^/]*$") or "."
local base = args.json:match("([^/]*)$"):gsub("%.json$", "")
local ok, merr = output.mkdir(outdir)
if not ok then
  io.stderr:write("plot: ", merr, "\n")
  os.exit(1)
end
local files, why = plot.draw(doc, outdir, base)
if not files then
  io.stderr:write("plot: ", why, "\n")
  os.exit(1)
end
for _, f in ipairs(files) do print(f) end
