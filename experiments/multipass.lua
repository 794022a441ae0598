--- Multi-pass and hybrid reductions, step by step.
--
--   lua5.4 experiments/multipass.lua [--n 10000000] [--variants neighbored,unroll8,warp_shuffle] ...
--
-- 1. Plans: for a large n, the passes of each finishing mode, as the classic multi-pass tutorial prints
--    them ("Pass 1: 10000000 elements, 19532 blocks of 512 threads"): device (kernel passes until one
--    value remains), hybrid (kernel passes until at most --threshold partials, then the CPU), host (one
--    kernel pass, the CPU finishes every partial) and single (one kernel; its last block combines).
-- 2. Crossover (CUDA only): for a mid-size n, the time of finish=hybrid at several thresholds against
--    device and host. Small thresholds pay a kernel launch per extra pass; large ones copy more
--    partials to the host and add them there. Every configuration is validated before it is timed.
local here = (arg and arg[0] or ""):match("^(.*)/[^/]*$") or "."
package.path = here .. "/?.lua;" .. package.path

local argparse = require "argparse"
local gr = require "gpureduce"
local sizes = require "lab.sizes"
local validate = require "lab.validate"

local size_arg, size_list = sizes.converter, sizes.list_converter

local parser = argparse("multipass.lua", "The passes of each finishing mode for a large n, then the time "
  .. "of finish=hybrid by threshold against device and host (CUDA only).")
parser:help_max_width(100)
parser:option("--n", "Elements of the planned reduction."):argname("<n>"):default("10000000")
  :convert(size_arg("--n"))
parser:option("--variants", "Variants whose plans are shown and whose crossover is measured.")
  :argname("<list>"):default("neighbored,unroll8,warp_shuffle")
parser:option("--threshold", "Hybrid threshold of the plans."):argname("<n>"):default("1024")
  :convert(size_arg("--threshold"))
parser:option("--mid", "Elements of the crossover measurement."):argname("<n>"):default("2^22")
  :convert(size_arg("--mid"))
parser:option("--thresholds", "Hybrid thresholds measured."):argname("<list>")
  :default("1,64,256,512,1024,2048,4096,8192,16384,65536"):convert(size_list("--thresholds"))
parser:option("--reps", "Timed repetitions (median reported)."):argname("<n>"):default("20")
  :convert(size_arg("--reps"))
local args = parser:parse(arg)

local variants = {}
for name in args.variants:gmatch("[^,%s]+") do
  local v = gr.variant(name)
  if not v then parser:error("--variants: unknown variant '" .. name .. "'") end
  variants[#variants + 1] = v
end

local backend = gr.backend()
print(string.format("gpureduce %s, backend %s%s", gr.version, backend,
  backend == "cuda" and " (" .. gr.device().name .. ")" or " (no CUDA device)"))

-- 1. Plans. A plan does not depend on the data: a zero-filled buffer will do.
print(string.format("\n== Plans for n = %d float32 (hybrid threshold %d)", args.n, args.threshold))
local big = gr.buffer(args.n, "float32")
local shown = { gr.variant("cpu") }
for _, v in ipairs(variants) do shown[#shown + 1] = v end
for _, v in ipairs(shown) do
  if not v.available then
    print(string.format("\n-- %s: needs a CUDA device; the engine plans its passes only on the cuda backend",
      v.name))
  else
    for _, finish in ipairs({ "device", "hybrid", "host", "single" }) do
      for _, f in ipairs(v.finishes) do
        if f == finish then
          local opts = { variant = v.name, finish = finish }
          if finish == "hybrid" then opts.threshold = args.threshold end
          print()
          print(gr.format_plan(gr.plan(big, opts)))
        end
      end
    end
  end
end
big:free()

-- 2. The hybrid crossover.
print(string.format("\n== Hybrid crossover at n = %s float32 sum (wall time per call, median of %d reps)",
  sizes.format(args.mid), args.reps))
if backend ~= "cuda" then
  print("needs a CUDA device (backend is cpu): plans only")
  os.exit(0)
end

local b = validate.fill(gr.buffer(args.mid, "float32"), "float32", "sum", 11)
local check = validate.checker(gr, b, "float32", "sum")

-- rows: device, hybrid at each threshold, host; a cell is "ms" or "✗" (failed validation, not timed)
local rows = { { label = "device", finish = "device" } }
for _, t in ipairs(args.thresholds) do
  local name = t < 1024 and tostring(t) or sizes.format(t)
  rows[#rows + 1] = { label = "hybrid " .. name, finish = "hybrid", threshold = t }
end
rows[#rows + 1] = { label = "host", finish = "host" }

local failed = 0
local cells = {}
local timed = {}
for _, v in ipairs(variants) do
  if v.available then timed[#timed + 1] = v end
end
-- validate everything first
for ri, row in ipairs(rows) do
  cells[ri] = {}
  for vi, v in ipairs(timed) do
    local opts = { op = "sum", variant = v.name, finish = row.finish, threshold = row.threshold }
    local supported = false
    for _, f in ipairs(v.finishes) do supported = supported or f == row.finish end
    local ok, got = true, nil
    if supported then ok, got = pcall(gr.reduce, b, opts) end
    local good, why = false, tostring(got)
    if supported and ok then good, why = check(got, nil, opts) end
    cells[ri][vi] = { opts = opts, ok = good, supported = supported }
    if supported and not good then
      failed = failed + 1
      io.stderr:write(string.format("multipass: ✗ %s %s: %s\n", v.name, row.label, why))
    end
  end
end
-- then time the valid ones (runs of their own: a checked run is never a timed one)
for ri, row in ipairs(rows) do
  for vi in ipairs(timed) do
    local c = cells[ri][vi]
    if c.ok then
      -- wall time of whole calls: the CPU finish of hybrid and host is part of the cost being compared,
      -- and device events would leave it out
      for _ = 1, 3 do gr.reduce(b, c.opts) end
      local t = {}
      for i = 1, args.reps do
        local t0 = gr.clock()
        gr.reduce(b, c.opts)
        t[i] = (gr.clock() - t0) * 1e3
      end
      table.sort(t)
      c.ms, c.passes = t[(#t + 1) // 2], #gr.plan(b, c.opts).passes
    end
  end
end

local head = { string.format("%-14s", "finish") }
for _, v in ipairs(timed) do head[#head + 1] = string.format("%22s", v.name) end
print(table.concat(head, " "))
local best = {}
for vi in ipairs(timed) do
  for ri in ipairs(rows) do
    local ms = cells[ri][vi].ms
    if ms and (not best[vi] or ms < cells[best[vi]][vi].ms) then best[vi] = ri end
  end
end
for ri, row in ipairs(rows) do
  local line = { string.format("%-14s", row.label) }
  for vi in ipairs(timed) do
    local c = cells[ri][vi]
    local text = c.ms and string.format("%.4f ms (%d pass%s)%s", c.ms, c.passes, c.passes == 1 and "" or "es",
      best[vi] == ri and "*" or " ") or c.supported and "✗" or "-"
    line[#line + 1] = string.format("%22s", text)
  end
  print(table.concat(line, " "))
end
print("* fastest for that variant; passes include the CPU finish; - not supported; ✗ failed validation")
if failed > 0 then
  io.stderr:write(string.format("multipass: %d configuration(s) failed validation\n", failed))
  os.exit(1)
end
