--- The segments lab: segmented reductions over segment sizes 1 .. 2^20, against CUB in the same run.
--
--   lua5.4 experiments/segments.lua [--n 2^28] [--sizes 2^0,2^2,...] [--op sum] [--dtype float32]
--                                  [--reps 20] [--offsets] [--cub build/cub_yardsticks] [--quick] [--out DIR]
--
-- 1. Validate: every size is reduced once (fixed-size segments and, with --offsets, CSR boundaries) and
--    a sample of its segments (the first and the last among them; at most 256 segments and 2^20
--    elements) is compared with the exact value of each segment, computed in Lua from the bytes read
--    back (lab/reference.lua), within the error bound of lab/validate.lua for any order of additions
--    (segments choose their own shape, which no plan reports). A size that fails is marked ✗ and not
--    timed; the lab then exits 1.
-- 2. Time: gr.bench with device events (warm-up, median of --reps), the read ceiling (gr.bench_read) of
--    the same buffer, and CUB's DeviceSegmentedReduce::Sum on the same shape (build/cub_yardsticks,
--    float32 sum only) in the same run.
-- 3. Report, per segment size: segments, ms, GB/s of input read, % of the read ceiling, GB/s counting
--    the results written too ("mem"), and CUB's figures beside them; DIR/segments.json and
--    DIR/segments.csv with the sweep's header (schema: experiments/README.md).
-- Without a GPU it runs the host backend at a small n and says so; CUB is skipped.
local here = (arg and arg[0] or ""):match("^(.*)/[^/]*$") or "."
package.path = here .. "/?.lua;" .. package.path

local gr = require "gpureduce"
local argparse = require "argparse"
local cli = require "lab.cli"
local header = require "lab.header"
local output = require "lab.output"
local reference = require "lab.reference"
local sizes = require "lab.sizes"
local validate = require "lab.validate"

-- The JSON/CSV schema: the sweep's header keys that apply, one record per (segment size, layout).
local SCHEMA = {
  header = { "tool", "version", "backend", "device", "sms", "l2", "cc", "memory", "cuda_runtime", "cuda_driver",
    "git_revision", "date", "read_ceiling_gbps", "reps", "warmup", "seed", "configs", "failed", "options",
    "argv" },
  lists = {
    { "results", { "n", "dtype", "op", "layout", "segment", "segments", "bytes", "out_bytes", "ms", "ms_min",
      "ms_max", "gbps", "pct_ceiling", "mem_gbps", "cub_ms", "cub_gbps", "cub_mem_gbps", "ratio_to_cub", "valid",
      "checked", "timer", "error" } },
  },
}

local function size_item(item)
  local v, why = sizes.parse(item)
  if not v then return nil, "is not a size (" .. why .. ")" end
  return v
end

local parser = argparse("segments.lua", "Segmented reductions over segment sizes, against CUB. Each size is "
  .. "validated first (a sample of its segments within their error bound of the exact value, computed in "
  .. "Lua); only valid sizes are timed.")
parser:help_max_width(100)
parser:epilog("Writes DIR/segments.json and DIR/segments.csv (experiments/README.md documents them; no plots).\n"
  .. "Exit status: 0, or 1 when a size failed validation (or the options were wrong).")
parser:option("--n", "Elements in all. (default: 2^28; 2^20 with --quick or without a GPU)"):argname("<n>")
  :convert(cli.count_of("--n", 1))
parser:option("--sizes", "Segment sizes. (default: 2^0 .. 2^20; --quick: 2^0, 2^2, ..., 2^10)")
  :argname("<list>"):convert(cli.list_of("--sizes", size_item))
parser:option("--op", "The op."):default("sum"):choices(gr.ops())
parser:option("--dtype", "The dtype."):default("float32"):choices(gr.dtypes())
parser:option("--reps", "Timed repetitions. (default: 20)"):argname("<n>"):convert(cli.count_of("--reps", 1))
parser:option("--warmup", "Untimed repetitions first. (default: 3)"):argname("<n>"):convert(cli.count_of("--warmup", 0))
parser:option("--seed", "Seed of the random data. (default: 3)"):argname("<n>"):convert(cli.count_of("--seed", 0))
parser:option("--cub", "The CUB yardstick program."):default("build/cub_yardsticks")
parser:option("--out", "Directory of the results. (default: results)"):argname("<dir>")
parser:flag("--offsets", "Also time CSR boundaries of the same segments.")
parser:flag("--quick", "A small n and a few sizes.")
local args = parser:parse(arg)                -- on a bad option: usage and the error on stderr, exit 1

local function note(msg)
  io.stdout:flush()
  io.stderr:write("segments: ", msg, "\n")
end

local gpu = gr.backend() == "cuda"
local n = args.n or ((args.quick or not gpu) and (1 << 20) or (1 << 28))
local list = args.sizes
if not list then
  list = {}
  for k = 0, args.quick and 10 or 20, args.quick and 2 or 1 do list[#list + 1] = 1 << k end
end
local reps, warmup, seed = args.reps or 20, args.warmup or 3, args.seed or 3
local out_dir = args.out or "results"
local op, dtype = args.op, args.dtype
do
  local ok, why = output.check_writable(out_dir)
  if not ok then
    note("cannot write results to " .. tostring(out_dir) .. ": " .. tostring(why))
    os.exit(1)
  end
end

local h = header.build(gr, here, "gpureduce experiments/segments.lua")
h.reps, h.warmup, h.seed = reps, warmup, seed
h.options = { n = n, sizes = list, op = op, dtype = dtype, offsets = args.offsets or false, quick = args.quick or false,
              cub = args.cub, out = out_dir }
h.argv = { arg[0] }
for i = 1, #arg do h.argv[#h.argv + 1] = arg[i] end
print("# " .. header.describe(h))
print(string.format("# segments: %s %s, n = %s%s", op, dtype, sizes.format(n),
  gpu and "" or " (no GPU: host backend, small n, no CUB)"))

local b = validate.fill(gr.buffer(n, dtype), dtype, op, seed)
local read = gpu and gr.bench_read(b, { reps = reps }).gbps or nil
h.read_ceiling_gbps = read
local need = reference.needs({ op })
local elem_bytes = #b:tobytes(1, 1)

--- The CUB figures for one size, or nil.
local function cub(m)
  if not gpu or op ~= "sum" or dtype ~= "float32" then return nil end
  local p = io.popen(string.format("%s segsum %d %d %d 2>&1", header.shell_quote(args.cub), m, n, reps))
  if not p then return nil end
  local text = p:read("a")
  p:close()
  local ms, gbps, mem = text:match("ms=([%d.]+) gbps=([%d.]+) mem_gbps=([%d.]+)")
  if not ms then return nil, text end
  return { ms = tonumber(ms), gbps = tonumber(gbps), mem = tonumber(mem) }
end

--- Checks a sample of the k = n / m segments of `results` (and `results2`, the second buffer of argmin,
-- argmax and minmax) against the exact value of each segment: true and the number checked, or false
-- and why. Segments choose their own shape: the bound is that of any order (depth m - 1).
local function check(m, results, results2)
  local k = n // m
  local count = math.max(1, math.min(k, 256, (1 << 20) // m))
  for i = 0, count - 1 do
    local s = count == 1 and 0 or (i * (k - 1)) // (count - 1)      -- 0-based; the first and the last
    local f = reference.from_reader(function(first, c) return b:tobytes(s * m + first, c) end, m, dtype, need)
    local e = validate.expect(f, op, m - 1, dtype)
    local ok, why = validate.check(results:get(s + 1), results2 and results2:get(s + 1), e)
    if not ok then return false, string.format("segment %d: %s", s + 1, why) end
  end
  return true, count
end

local results, failed = {}, 0
print(string.format("%10s %12s %10s %9s %7s %9s | %10s %9s %9s %7s", "m", "segments", "ms", "GB/s", "%read",
  "mem GB/s", "cub ms", "cub GB/s", "cub mem", "vs cub"))
for _, m in ipairs(list) do
  if n % m ~= 0 then
    note(string.format("segment size %d does not divide n = %d: skipped", m, n))
  else
    local k = n // m
    local layouts = { { name = "segment", opts = { op = op, segment = m } } }
    if args.offsets then
      layouts[2] = { name = "offsets", opts = { op = op, offsets = gr.buffer(k + 1, "int64"):iota(0, m) } }
    end
    for _, layout in ipairs(layouts) do
      local row = { n = n, dtype = dtype, op = op, layout = layout.name, segment = m, segments = k, bytes = n * elem_bytes,
                    valid = false }
      local ok, r1, r2 = pcall(gr.reduce, b, layout.opts)
      if ok then
        row.out_bytes = k * (#r1:tobytes(1, 1) + (r2 and #r2:tobytes(1, 1) or 0))
        row.valid, row.checked = check(m, r1, r2)
        if not row.valid then row.error, row.checked = row.checked, nil end
      else
        row.error = "error: " .. tostring(r1)
      end
      if row.valid then
        local bopts = { reps = reps, warmup = warmup }
        for key, v in pairs(layout.opts) do bopts[key] = v end
        local t = gr.bench(b, bopts)
        row.ms, row.ms_min, row.ms_max, row.gbps, row.timer = t.ms, t.ms_min, t.ms_max, t.gbps, t.timer
        row.pct_ceiling = read and 100 * t.gbps / read or nil
        local extra = layout.name == "offsets" and (k + 1) * 8 or 0
        row.mem_gbps = (row.bytes + row.out_bytes + extra) / (t.ms * 1e6)
        local c = layout.name == "segment" and cub(m) or nil
        if c then
          row.cub_ms, row.cub_gbps, row.cub_mem_gbps, row.ratio_to_cub = c.ms, c.gbps, c.mem, c.ms / t.ms
        end
        print(string.format("%10s %12s %10.4f %9.1f %6.1f%% %9.1f | %10s %9s %9s %7s",
          layout.name == "segment" and tostring(m) or "", layout.name == "segment" and tostring(k) or "",
          t.ms, t.gbps, row.pct_ceiling or 0, row.mem_gbps, c and string.format("%.4f", c.ms) or "-",
          c and string.format("%.1f", c.gbps) or "-", c and string.format("%.1f", c.mem) or "-",
          c and string.format("%.2fx", c.ms / t.ms) or (layout.name == "offsets" and "  (CSR offsets)" or "-")))
      else
        failed = failed + 1
        print(string.format("%10d %12d  ✗ %s%s", m, k, layout.name == "offsets" and "(CSR offsets) " or "", row.error))
      end
      results[#results + 1] = row
    end
  end
end
if read then print(string.format("read ceiling: %.1f GB/s", read)) end

h.configs, h.failed = #results, failed
output.save({ header = h, results = results }, out_dir, "segments", SCHEMA, note)
if failed > 0 then
  note(string.format("FAILED: %d size(s) not within their error bound of the reference (marked ✗, not timed)",
    failed))
  os.exit(1, true)
end
os.exit(0, true)
