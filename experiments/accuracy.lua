--- The accuracy lab: the error of every variant x determinism level x accumulator against the exact
-- result, on named data sets, and the bits the variants share.
--
--   lua5.4 experiments/accuracy.lua [--quick] [--ops sum,mean] [--datasets uniform,cancelling] ...
--   (lua5.4 experiments/accuracy.lua --help lists every option)
--
-- 1. Data: each named data set (lab/datasets.lua) is generated in Lua from --seed, once per (size,
--    dtype), and copied to one device buffer that every configuration reduces.
-- 2. The exact value: lab/exact.lua sums the same bytes in Lua integers (no rounding, no engine call);
--    lab/errors.lua forms each op's exact value and a result's error against it.
-- 3. Every configuration reduces the buffer twice: the error of the first result, and whether the
--    second has the same bits. gpu_to_gpu must give the correctly rounded value (norm, std: within 1
--    ulp), the same for every variant: this cross-checks the engine's exact kernel against the Lua sums.
-- 4. Tables on stdout; DIR/accuracy.json and DIR/accuracy.csv (experiments/README.md).
local here = (arg and arg[0] or ""):match("^(.*)/[^/]*$") or "."
package.path = here .. "/?.lua;" .. package.path

local gr = require "gpureduce"
local acli = require "lab.accuracy_cli"
local datasets = require "lab.datasets"
local errors = require "lab.errors"
local header = require "lab.header"
local output = require "lab.output"
local Progress = require "lab.progress"
local report = require "lab.accuracy_report"
local sizes = require "lab.sizes"

local args = acli.parser(gr):parse(arg)        -- on a bad option: usage and the error on stderr, exit 1
local s, notes = acli.settings(gr, args)
local function note(msg)
  io.stdout:flush()
  io.stderr:write("accuracy: ", msg, "\n")
end
for _, msg in ipairs(notes) do note(msg) end

do
  local ok, why = output.check_writable(s.out)
  if not ok then
    note("cannot write results to " .. tostring(s.out) .. ": " .. tostring(why))
    os.exit(1)
  end
end

-- The JSON/CSV schema: the results (one per configuration and data set), the data sets, the bits.
local SCHEMA = {
  header = { "tool", "version", "backend", "device", "sms", "cc", "memory", "cuda_runtime", "cuda_driver",
    "git_revision", "date", "seed", "ddof", "configs", "failed", "options", "argv" },
  lists = {
    { "results", { "dataset", "dtype", "n", "op", "variant", "level", "acc", "value", "value2", "same_runs",
      "exact", "rel_err", "ulps", "steps", "correctly_rounded", "same_as_auto", "error" } },
    { "datasets", { "dataset", "dtype", "n", "seed", "about", "sum_abs", "exact_sum", "condition" } },
    { "bits", { "dataset", "dtype", "n", "op", "level", "acc", "variants", "distinct", "agree_with_auto",
      "differ_from_auto" } },
  },
  bits = { value = true, value2 = true, exact = true, exact_sum = true },
}

local h = header.build(gr, here, "gpureduce experiments/accuracy.lua")
h.seed, h.ddof = s.seed, s.ddof
h.options = {}
for k, v in pairs(s) do h.options[k] = v end
h.argv = { arg[0] }
for i = 1, #arg do h.argv[#h.argv + 1] = arg[i] end

local function contains(list, x)
  for _, v in ipairs(list or {}) do
    if v == x then return true end
  end
  return false
end

--- The configurations of (dtype, op): {variant, level, acc} ordered by accumulator, level, variant.
-- A variant runs at its own level (the registry's) when it takes the op, and at gpu_to_gpu always (the
-- exact kernel runs whatever the variant named).
local function configs_for(dtype, op)
  local list = {}
  for _, acc in ipairs(dtype == "float32" and { "float32", "float64" } or { "float64" }) do
    for _, level in ipairs(acli.LEVELS) do
      if contains(s.levels, level) then
        for _, name in ipairs(s.variants) do
          local v = name ~= "auto" and gr.variant(name)
          local own = v and v.determinism or "run_to_run"
          if level == "gpu_to_gpu" or (level == own and (not v or contains(v.ops, op))) then
            list[#list + 1] = { variant = name, level = level, acc = acc }
          end
        end
      end
    end
  end
  return list
end

local function opts_of(c, dtype, op)
  return { op = op, variant = c.variant ~= "auto" and c.variant or nil, determinism = c.level,
    acc = c.acc ~= dtype and c.acc or nil, ddof = (op == "var" or op == "std") and s.ddof or nil }
end

local function bits_of(v) return string.pack("<d", v) end

local need_squares = false
for _, op in ipairs(s.ops) do need_squares = need_squares or errors.SQUARES[op] or false end

local print_stderr = Progress.stderr_is_tty()    -- on a terminal: say which data set is running
local results, dataset_records, groups, order = {}, {}, {}, {}
local failures = {}
local function fail(msg)
  failures[#failures + 1] = msg
end

for _, n in ipairs(s.sizes) do
  for _, dtype in ipairs(s.dtypes) do
    for _, name in ipairs(s.datasets) do
      if print_stderr then note(string.format("%s %s n=%s", name, dtype, sizes.format(n))) end
      local bytes = datasets.bytes(name, n, dtype, s.seed)
      local f = errors.facts(bytes, dtype, n, need_squares)
      local b = gr.buffer(bytes, dtype)
      bytes = nil
      local cond = errors.condition(f)
      dataset_records[#dataset_records + 1] = { dataset = name, dtype = dtype, n = n, seed = s.seed,
        about = datasets.ABOUT[name], sum_abs = f.sum_abs, exact_sum = f.S:round("float64"), condition = cond }
      for _, op in ipairs(s.ops) do
        local key = dtype .. "|" .. op .. "|" .. n
        local g = groups[key]
        if not g then
          g = { dtype = dtype, op = op, n = n, datasets = s.datasets, configs = configs_for(dtype, op), cells = {},
            facts = {}, accs = dtype == "float32" and { "float32", "float64" } or { "float64" } }
          for i = 1, #g.configs do g.cells[i] = {} end
          groups[key] = g
          order[#order + 1] = g
        end
        g.facts[name] = { condition = cond, exact = {} }
        for _, acc in ipairs(g.accs) do g.facts[name].exact[acc] = errors.exact(f, op, acc, s.ddof) end
        for i, c in ipairs(g.configs) do
          local r = { dataset = name, dtype = dtype, n = n, op = op, variant = c.variant, level = c.level,
            acc = c.acc }
          local opts = opts_of(c, dtype, op)
          local ok1, v1 = pcall(gr.reduce, b, opts)
          local ok2, v2 = pcall(gr.reduce, b, opts)
          if not (ok1 and ok2) then
            r.error = tostring(ok1 and v2 or v1)
            fail(string.format("%s %s %s %s n=%s %s %s: %s", c.variant, c.level, c.acc, op, sizes.format(n),
              dtype, name, r.error))
          else
            r.value, r.value2 = v1, v2
            r.same_runs = bits_of(v1) == bits_of(v2)
            local m = errors.measure(f, op, c.acc, v1, s.ddof)
            r.exact, r.rel_err, r.ulps, r.steps, r.correctly_rounded = m.exact, m.rel_err, m.ulps, m.steps,
              m.correctly_rounded
            local what = string.format("%s %s acc %s %s n=%s %s on %s", c.variant, c.level, c.acc, op,
              sizes.format(n), dtype, name)
            if not r.same_runs and c.level ~= "not_guaranteed" then
              fail(what .. string.format(": two runs gave %.17g and %.17g", v1, v2))
            end
            if c.level == "gpu_to_gpu" then
              local bad = errors.ROOT[op] and not (m.ulps < 1) or not errors.ROOT[op] and not m.correctly_rounded
              if bad then
                fail(what .. string.format(": %.17g is not the exact result %.17g (%.3g ulps)", v1, m.exact, m.ulps))
              end
            end
          end
          g.cells[i][name] = r
          results[#results + 1] = r
        end
      end
      b:free()
    end
  end
end

--- The bits records of a group: per (level, acc) and data set, the distinct results of the variants.
local bit_records = {}
for _, g in ipairs(order) do
  g.bit_keys, g.bits = {}, {}     -- g.bits: the group's own records, by level|acc|data set
  local seen = {}
  for _, c in ipairs(g.configs) do
    local id = c.level .. "|" .. c.acc
    if not seen[id] then
      seen[id] = true
      g.bit_keys[#g.bit_keys + 1] = { id = id, level = c.level, acc = c.acc }
    end
  end
  for _, key in ipairs(g.bit_keys) do
    for _, name in ipairs(g.datasets) do
      local auto                           -- auto's result: its gpu_to_gpu one, else its run_to_run one
      for i, c in ipairs(g.configs) do
        local want = key.level == "gpu_to_gpu" and "gpu_to_gpu" or "run_to_run"
        local r = g.cells[i][name]
        if c.variant == "auto" and c.acc == key.acc and c.level == want and r and r.value then auto = bits_of(r.value) end
      end
      local rec = { dataset = name, dtype = g.dtype, n = g.n, op = g.op, level = key.level, acc = key.acc,
        variants = 0, distinct = 0, agree_with_auto = auto and {} or nil, differ_from_auto = auto and {} or nil }
      local patterns = {}
      for i, c in ipairs(g.configs) do
        local r = g.cells[i][name]
        if c.level == key.level and c.acc == key.acc and r and r.value then
          rec.variants = rec.variants + 1
          local p = bits_of(r.value)
          if not patterns[p] then patterns[p], rec.distinct = true, rec.distinct + 1 end
          if auto then
            r.same_as_auto = p == auto
            local list = p == auto and rec.agree_with_auto or rec.differ_from_auto
            list[#list + 1] = c.variant
          end
        end
      end
      if key.level == "gpu_to_gpu" and rec.distinct > 1 then
        fail(string.format("gpu_to_gpu %s %s n=%s %s acc %s: the variants gave %d different results", g.op,
          g.dtype, sizes.format(g.n), name, key.acc, rec.distinct))
      end
      bit_records[#bit_records + 1] = rec
      g.bits[key.id .. "|" .. name] = rec
    end
  end
end

print("# accuracy lab: " .. header.describe(h))
print(string.format("# seed %d; data sets: %s", s.seed, table.concat(s.datasets, ", ")))
for _, name in ipairs(s.datasets) do print(string.format("#   %-11s %s", name, datasets.ABOUT[name])) end
for _, g in ipairs(order) do
  print()
  print(report.table(g, g.facts))
  print(report.bits(g, g.bits))
end
print()
print(report.LEGEND)

-- JSON has no infinities or NaN: those numbers are written as the strings "inf", "-inf", "nan"
local function portable(rec)
  local out = {}
  for k, v in pairs(rec) do
    if math.type(v) == "float" and (v ~= v or math.abs(v) == math.huge) then
      v = v ~= v and "nan" or v > 0 and "inf" or "-inf"
    end
    out[k] = v
  end
  return out
end
local doc = { header = h, results = {}, datasets = {}, bits = bit_records }
for i, r in ipairs(results) do doc.results[i] = portable(r) end
for i, r in ipairs(dataset_records) do doc.datasets[i] = portable(r) end
h.configs, h.failed = #results, #failures
output.save(doc, s.out, "accuracy", SCHEMA, note)

if #failures > 0 then
  for _, msg in ipairs(failures) do note("✗ " .. msg) end
  note(string.format("FAILED: %d check(s)", #failures))
  os.exit(1, true)
end
os.exit(0, true)
