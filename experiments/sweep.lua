--- The experiment lab: every variant over sizes, dtypes, ops, block sizes and finishing modes.
--
--   lua5.4 experiments/sweep.lua [--quick] [--variants a,b] [--sizes 2^20,2^24] [--ops sum,max] ...
--   (lua5.4 experiments/sweep.lua --help lists every option)
--
-- 1. Validate: every configuration reduces fresh random data once; its result must lie within a bound
--    from error analysis of the exact value, which lab/reference.lua computes in Lua from the data read
--    back once per (dtype, data, n) -- no variant is compared with another (lab/validate.lua says how).
--    A configuration that fails is marked ✗, never timed, and makes the lab exit 1 at the end.
-- 2. Time: the read-bandwidth ceiling once (gr.bench_read, CUDA only), then gr.bench for every valid
--    configuration on regenerated data (same seed, same bits): device events, --warmup untimed reps,
--    median and minimum of --reps. With --rotate, buffers that fit in L2 are timed round-robin over
--    copies, one rep per gr.bench call, so each rep reads from DRAM.
-- 3. Report: a table per (dtype, op, n) on stdout, a progress line on stderr (on a terminal),
--    DIR/sweep.json and DIR/sweep.csv (schema: experiments/README.md), PNG plots when gnuplot is there.
--
-- Shared code lives in experiments/lab/, found relative to this script; gpureduce itself comes from
-- LUA_PATH/LUA_CPATH (the Makefile sets them).
local here = (arg and arg[0] or ""):match("^(.*)/[^/]*$") or "."
package.path = here .. "/?.lua;" .. package.path

local gr = require "gpureduce"
local cli = require "lab.cli"
local header = require "lab.header"
local matrix = require "lab.matrix"
local output = require "lab.output"
local plot = require "lab.plot"
local Progress = require "lab.progress"
local report = require "lab.report"
local sizes = require "lab.sizes"
local validate = require "lab.validate"

local args = cli.parser(gr):parse(arg)        -- on a bad option: usage and the error on stderr, exit 1
local s, notes = cli.settings(gr, args)
local function note(msg)
  io.stdout:flush()                   -- keep the order when stdout and stderr go to one file
  io.stderr:write("sweep: ", msg, "\n")
end
for _, msg in ipairs(notes) do note(msg) end

local groups, counts = matrix.build(gr.variants(), s)
if counts.configs == 0 then
  note("nothing to run: no variant supports the requested blocks/finishes at these sizes")
  os.exit(1)
end

-- a run that cannot write its results fails now, not after the timing
do
  local ok, why = output.check_writable(s.out)
  if not ok then
    note("cannot write results to " .. tostring(s.out) .. ": " .. tostring(why))
    os.exit(1)
  end
end

local h = header.build(gr, here)
local dev = gr.device()
h.reps, h.warmup, h.rotate, h.seed = s.reps, s.warmup, s.rotate, s.seed
-- the settings as the results' header records them: user operators by name and the op they stand for
h.options = {}
for k, v in pairs(s) do h.options[k] = v end
if s.operators then
  h.options.operators = {}
  for i, u in ipairs(s.operators) do h.options.operators[i] = { name = u.name, like = u.like } end
end
h.argv = { arg[0] }
for i = 1, #arg do h.argv[#h.argv + 1] = arg[i] end
if s.rotate and not (dev and dev.l2 and dev.l2 > 0) then
  note("--rotate: no L2 size on this backend, ignored")
end

-- a seed per group from its key, so a group's data does not depend on what else is swept; ops that take
-- the same kind of data (validate.kind) share it, and its reference
local function seed_of(g)
  local v = s.seed
  for c in (g.dtype .. validate.kind(g.like or g.op) .. g.n):gmatch(".") do v = (v * 31 + c:byte()) % 2147483647 end
  return v
end

-- the ops swept on each kind of data: the reference of a data set computes what all of them need
local ops_of_kind = {}
do
  local function add_op(op)
    local k = validate.kind(op)
    ops_of_kind[k] = ops_of_kind[k] or {}
    table.insert(ops_of_kind[k], op)
  end
  for _, op in ipairs(s.ops) do add_op(op) end
  for _, u in ipairs(s.operators or {}) do add_op(u.like) end
end

local dtype_bytes = {}
local function bytes_of(g)
  if not dtype_bytes[g.dtype] then
    local probe = gr.buffer(1, g.dtype)
    dtype_bytes[g.dtype] = #probe:tobytes()
    probe:free()
  end
  return g.n * dtype_bytes[g.dtype]
end

--- The options of one configuration; a user operator's group (--operators) passes its Operator and runs
-- the plan auto gives it (its kernels have one shape).
local function reduce_opts(c, g)
  local o = { op = g.operator or g.op, variant = c.variant.option or c.variant.name, finish = c.finish }
  if not c.fixed_block then o.block = c.block end
  if c.finish == "hybrid" and s.threshold then o.threshold = s.threshold end
  return o
end

local function label(phase, c, g)
  return string.format("%-5s %s%s %s %s %s n=%s", phase, c.variant.name,
    c.fixed_block and "" or " b=" .. c.block, c.finish, g.dtype, g.op, sizes.format(g.n))
end

local function kind(phase, c) return phase .. (matrix.is_host(c.variant) and "-host" or "-device") end

-- Planned work for the ETA: every configuration checked, then (until validation says otherwise) timed.
local totals, steps = {}, 1 + #groups
local function add(k, units) totals[k] = (totals[k] or 0) + units end
for _, g in ipairs(groups) do
  g.seed, g.bytes = seed_of(g), bytes_of(g)
  add("check-host", g.bytes)                  -- the reference
  for _, c in ipairs(g.configs) do
    add(kind("check", c), g.bytes)
    add(kind("time", c), g.bytes * (s.reps + s.warmup))
    steps = steps + 2
  end
end
local show_progress = s.progress
if show_progress == nil then show_progress = Progress.stderr_is_tty() end
local progress = Progress.new(totals, steps, show_progress, gr.clock)

print("# " .. header.describe(h))
print(string.format("# %d configurations (%d skipped: %d unsupported op/dtype/block/finish, %d host variant "
  .. "above --host-max %s); reps %d after %d warm-up, %s", counts.configs, counts.unsupported + counts.host_capped,
  counts.unsupported, counts.host_capped, sizes.format(s.host_max), s.reps, s.warmup,
  h.backend == "cuda" and "device events" or "wall clock (CPU backend)"))
if s.inject then
  print("# SELF-TEST: the reference is perturbed for " .. s.inject .. " (validation must fail)")
end

local function new_buffer(g)
  local ok, b = pcall(gr.buffer, g.n, g.dtype)
  if not ok then return nil, tostring(b) end
  validate.fill(b, g.dtype, g.like or g.op, g.seed)
  return b
end

---------------------------------------------------------------------------------------------------------
-- 1. Validation: every configuration, before anything is timed.
local failed, ref_seconds = 0, 0.0
local sms = dev and dev.sms
-- the reference facts of the current dtype's data sets, by kind and n (dropped when the dtype changes)
local facts_cache, facts_dtype = {}, nil

local function facts_of(g, b)
  if facts_dtype ~= g.dtype then facts_cache, facts_dtype = {}, g.dtype end
  local key = validate.kind(g.like or g.op) .. " " .. g.n .. " " .. g.seed
  if not facts_cache[key] then
    progress:start("check-host", g.bytes,
      string.format("ref   lua %s %s n=%s", g.dtype, validate.kind(g.like or g.op), sizes.format(g.n)))
    local t0 = gr.clock()
    local ok, f = pcall(validate.facts, b, g.dtype, ops_of_kind[validate.kind(g.like or g.op)])
    ref_seconds = ref_seconds + (gr.clock() - t0)
    progress:finish()
    facts_cache[key] = ok and f or { error = "reference failed: " .. tostring(f) }
  end
  local f = facts_cache[key]
  if f.error then return nil, f.error end
  return f
end

for _, g in ipairs(groups) do
  g.rows = {}
  local b, err = new_buffer(g)
  local facts
  if b then facts, err = facts_of(g, b) end
  for i, c in ipairs(g.configs) do
    local row = {
      variant = c.variant.name, ordinal = c.variant.ordinal, n = g.n, dtype = g.dtype, op = g.op,
      block = not c.fixed_block and c.block or nil, finish = c.finish, bytes = g.bytes, seed = g.seed,
      valid = false, error = err,
    }
    if facts then
      progress:start(kind("check", c), g.bytes, label("check", c, g))
      local opts = reduce_opts(c, g)
      local pok, plan = pcall(gr.plan, b, opts)      -- the passes: the depth of the bound (nothing runs)
      if pok then
        row.passes = #plan.passes
        row.grid = plan.passes[1] and plan.passes[1].where == "device" and plan.passes[1].blocks or nil
      end
      row.depth = validate.depth(pok and plan or nil, pok and gr.variant(plan.variant) or nil, sms, g.n)
      local eok, e = pcall(validate.expect, facts, g.like or g.op, row.depth, pok and plan.acc or nil)
      if not eok then
        row.error = "reference failed: " .. tostring(e)
      else
        if s.inject == "all" or s.inject == c.variant.name then e = validate.perturb(e) end
        row.reference, row.bound = e.value, e.bound
        local res = table.pack(pcall(gr.reduce, b, opts))
        if res[1] then
          row.value = res[2]
          row.valid, row.error = validate.check(res[2], res[3], e)
        else
          row.error = "error: " .. tostring(res[2])
        end
      end
      progress:finish()
    end
    if not row.valid then
      failed = failed + 1
      progress:clear()
      note(string.format("✗ %s %s %s n=%s block %s finish %s: %s", row.variant, g.dtype, g.op,
        sizes.format(g.n), row.block or "-", row.finish, row.error))
    end
    g.rows[i] = row
  end
  if b then b:free() end
end

-- Timings of failed configurations drop out of the plan.
local tsteps, ttotals = 1 + #groups + counts.configs, { ["time-host"] = 0, ["time-device"] = 0 }
for _, g in ipairs(groups) do
  for i, c in ipairs(g.configs) do
    if g.rows[i].valid then
      local k = kind("time", c)
      ttotals[k] = ttotals[k] + g.bytes * (s.reps + s.warmup)
      tsteps = tsteps + 1
    end
  end
end
progress:replan("time-host", ttotals["time-host"], tsteps)
progress:replan("time-device", ttotals["time-device"])
progress:clear()
print(string.format("# validation: %d configurations against the exact reference within their error bounds: "
  .. "%d ✓, %d ✗ (reference computed in Lua in %.2f s)", counts.configs, counts.configs - failed, failed, ref_seconds))

---------------------------------------------------------------------------------------------------------
-- 2. Timing.
local ceiling
progress:start("time-device", 0, "time  read-bandwidth ceiling")
if h.backend == "cuda" then
  -- 1 GiB, far beyond any L2, or a quarter of a smaller device's memory
  local n = math.min(1 << 28, (dev.memory // 4) // 4)
  local ok, r = pcall(function()
    local rb = gr.buffer(n, "float32")
    local r = gr.bench_read(rb, { reps = s.reps, warmup = s.warmup })
    rb:free()
    return r
  end)
  progress:clear()
  if ok then
    ceiling = r.gbps
    print(string.format("# read-bandwidth ceiling: %.1f GB/s (gr.bench_read over %s, median of %d)", ceiling,
      sizes.bytes(r.bytes), r.reps))
  else
    note("read ceiling not measured: " .. tostring(r))
  end
end
progress:finish()
h.read_ceiling_gbps = ceiling

local function median(sorted)
  local m = #sorted
  if m % 2 == 1 then return sorted[(m + 1) // 2] end
  return (sorted[m // 2] + sorted[m // 2 + 1]) / 2
end

-- Round-robin over k copies, one rep per call (a gr.bench of several reps would re-read the same
-- buffer from L2 after its first rep): median and minimum over the calls.
local function bench_rotated(bufs, opts)
  local one = { reps = 1, warmup = 0 }
  for k, v in pairs(opts) do
    if k ~= "reps" and k ~= "warmup" then one[k] = v end
  end
  local k = #bufs
  for i = 1, opts.warmup do gr.bench(bufs[(i - 1) % k + 1], one) end
  local times, last = {}, nil
  for i = 1, opts.reps do
    last = gr.bench(bufs[(opts.warmup + i - 1) % k + 1], one)
    times[i] = last.ms
  end
  table.sort(times)
  local ms = median(times)
  return { ms = ms, ms_min = times[1], ms_max = times[#times], gbps = last.bytes / (ms * 1e6),
    plan = last.plan, timer = last.timer }
end

local function rotation(b, g)
  local l2 = dev and dev.l2 or 0
  if not s.rotate or l2 <= 0 or g.bytes > l2 then return { b } end
  local k = math.min(256, math.max(2, (2 * l2) // g.bytes + 1))
  if k * g.bytes <= 2 * l2 then
    note(string.format("--rotate: %d copies of %s do not exceed 2x L2 at n=%s; timings may still hit L2",
      k, sizes.bytes(g.bytes), sizes.format(g.n)))
  end
  local bufs = { b }
  for i = 2, k do bufs[i] = new_buffer(g) end
  return bufs
end

local function derive(g)
  local base, cub
  for i, r in ipairs(g.rows) do
    if r.ms then
      local v = g.configs[i].variant
      if r.variant == "neighbored" then
        local default = r.finish == v.default_finish and (r.block or v.block.default) == v.block.default
        if default then
          base = { ms = r.ms, default = true }
        elseif not (base and base.default) and (not base or r.ms < base.ms) then
          base = { ms = r.ms }
        end
      elseif r.variant == "cub" and (not cub or r.ms < cub) then
        cub = r.ms
      end
    end
  end
  for _, r in ipairs(g.rows) do
    if r.ms then
      if ceiling then r.pct_ceiling = 100 * r.gbps / ceiling end
      if base then r.speedup_vs_neighbored = base.ms / r.ms end
      if cub then r.ratio_to_cub = cub / r.ms end
    end
  end
end

local results = {}
for _, g in ipairs(groups) do
  local any_valid = false
  for _, r in ipairs(g.rows) do any_valid = any_valid or r.valid end
  local b, err
  if any_valid then b, err = new_buffer(g) end
  local bufs = b and rotation(b, g) or {}
  for i, c in ipairs(g.configs) do
    local row = g.rows[i]
    if row.valid and not b then
      row.error = "not timed: " .. tostring(err)
      note(label("time", c, g) .. ": " .. row.error)
    elseif row.valid then
      progress:start(kind("time", c), g.bytes * (s.reps + s.warmup), label("time", c, g))
      local opts = reduce_opts(c, g)
      opts.reps, opts.warmup = s.reps, s.warmup
      local ok, r
      if #bufs > 1 and not matrix.is_host(c.variant) then
        ok, r = pcall(bench_rotated, bufs, opts)
        row.buffers = #bufs
      else
        ok, r = pcall(gr.bench, b, opts)
        row.buffers = 1
      end
      progress:finish()
      if ok then
        row.ms, row.ms_min, row.ms_max, row.gbps, row.timer = r.ms, r.ms_min, r.ms_max, r.gbps, r.timer
        row.passes = #r.plan.passes
        local p1 = r.plan.passes[1]
        row.grid = p1 and p1.where == "device" and p1.blocks or nil
      else
        row.error = "timing failed: " .. tostring(r)
        note(string.format("%s: %s", label("time", c, g), row.error))
      end
    end
    results[#results + 1] = row
  end
  for _, x in ipairs(bufs) do x:free() end
  derive(g)
  progress:clear()
  print()
  print(report.table(g, g.rows, g.bytes))
end
progress:clear()
print()
print(report.LEGEND)

---------------------------------------------------------------------------------------------------------
-- 3. Files and plots.
h.configs, h.failed = counts.configs, failed
h.skipped_unsupported, h.skipped_host_max = counts.unsupported, counts.host_capped
local doc = { header = h, results = results }
output.save(doc, s.out, "sweep", nil, note)
if s.plot then
  local files, why = plot.draw(doc, s.out, "sweep")
  if files then
    print(string.format("plots: %s", table.concat(files, " ")))
  else
    note(why)
  end
end

if failed > 0 then
  note(string.format("FAILED: %d configuration(s) not within their error bound of the reference (marked ✗, not timed)",
    failed))
  os.exit(1, true)
end
os.exit(0, true)
