--- The cpu backend's speed: every op on every dtype at one size, as a ratio to sum's time (make bench-cpu).
--   lua5.4 experiments/cpu_bench.lua [--n N] [--reps R] [--variants auto,cpu] [--ops a,b] [--dtypes a,b]
--                                    [--stat median|min] [--clock wall|cpu] [--limit X]
-- For each dtype one buffer of random data (floats in [-1, 1), integers in [0, 100)); for each variant
-- (default: auto, which picks the cpu variants on this backend, and cpu) every op is called once per
-- round, round after round, so that the load of other processes falls on every op alike; after 2
-- warm-up rounds R rounds (default 9) are timed around each whole call from Lua, with the monotonic
-- clock (wall, the default) or the process's CPU time (cpu: the work of all its threads, which other
-- processes on a shared machine disturb less). The table gives each op's median (or minimum) in ms and
-- its ratio to sum's on the same buffer and variant.
-- --limit X: exit 1 when a ratio exceeds X (the target of issue 20 is 4).
-- Meant for the cpu backend (make bench-cpu sets GPUREDUCE_BACKEND=cpu); on a GPU, auto would run there
-- and only the cpu variants on the host.
local gr = require "gpureduce"

local function list(s) local t = {} for w in s:gmatch("[^,%s]+") do t[#t + 1] = w end return t end
local opt = { n = 1 << 22, reps = 9, variants = { "auto", "cpu" }, ops = gr.ops(), dtypes = gr.dtypes(),
              stat = "median", clock = "wall" }
local i = 1
while arg and arg[i] do
  local k, v = arg[i], arg[i + 1]
  if k == "--help" then
    -- the opening comment is the usage
    for line in io.lines(debug.getinfo(1, "S").source:sub(2)) do
      if not line:match("^%-%-") then break end
      print((line:gsub("^%-%-%-? ?", "")))
    end
    os.exit(0)
  elseif k == "--n" then opt.n = math.tointeger(load("return " .. v)())
  elseif k == "--reps" then opt.reps = math.tointeger(tonumber(v))
  elseif k == "--variants" then opt.variants = list(v)
  elseif k == "--ops" then opt.ops = list(v)
  elseif k == "--dtypes" then opt.dtypes = list(v)
  elseif k == "--limit" then opt.limit = tonumber(v)
  elseif k == "--stat" and (v == "median" or v == "min") then opt.stat = v
  elseif k == "--clock" and (v == "wall" or v == "cpu") then opt.clock = v
  else
    io.stderr:write(string.format("cpu_bench: bad argument %s %s (accepted: --n N, --reps R, --variants, --ops, " ..
      "--dtypes (comma-separated lists), --stat median|min, --clock wall|cpu, --limit X)\n", tostring(k), tostring(v)))
    os.exit(2)
  end
  i = i + 2
end
assert(opt.n and opt.n > 0 and opt.reps and opt.reps > 0, "cpu_bench: --n and --reps take positive integers")

local function median(t)
  local s = {}
  for k, v in ipairs(t) do s[k] = v end
  table.sort(s)
  local k = #s
  return k % 2 == 1 and s[(k + 1) // 2] or 0.5 * (s[k // 2] + s[k // 2 + 1])
end
local function minimum(t) return math.min(table.unpack(t)) end
local stat = opt.stat == "min" and minimum or median
local clock = opt.clock == "cpu" and os.clock or gr.clock

-- sum first: every ratio is to it
local ops = { "sum" }
for _, op in ipairs(opt.ops) do if op ~= "sum" then ops[#ops + 1] = op end end

print(string.format("# gpureduce %s, backend %s, %s threads, n = %d, %s %s time of %d rounds after 2 warm-ups",
  gr.version, gr.backend(), os.getenv("GPUREDUCE_CPU_THREADS") or "default", opt.n, opt.stat, opt.clock, opt.reps))

local worst, worst_at = 0, "-"
for _, variant in ipairs(opt.variants) do
  local ms, ratio = {}, {}
  for _, dtype in ipairs(opt.dtypes) do
    local b = gr.buffer(opt.n, dtype)
    if dtype:find("float") then b:random(7, -1, 1) else b:random(7, 0, 100) end
    local times = {}
    for _, op in ipairs(ops) do times[op] = {} end
    for round = 1, opt.reps + 2 do
      for _, op in ipairs(ops) do
        local t0 = clock()
        gr.reduce(b, { op = op, variant = variant })
        local dt = (clock() - t0) * 1e3
        if round > 2 then times[op][#times[op] + 1] = dt end
      end
    end
    b:free()
    ms[dtype], ratio[dtype] = {}, {}
    for _, op in ipairs(ops) do
      ms[dtype][op] = stat(times[op])
      ratio[dtype][op] = ms[dtype][op] / ms[dtype].sum
      if op ~= "sum" and ratio[dtype][op] > worst then
        worst, worst_at = ratio[dtype][op], string.format("%s %s %s", variant, op, dtype)
      end
    end
  end
  print()
  print(string.format("== variant %s: %s ms (ratio to sum)", variant, opt.stat))
  local head = string.format("%-8s", "op")
  for _, dtype in ipairs(opt.dtypes) do head = head .. string.format(" %16s", dtype) end
  print(head)
  for _, op in ipairs(ops) do
    local line = string.format("%-8s", op)
    for _, dtype in ipairs(opt.dtypes) do
      local cell = op == "sum" and string.format("%.3f", ms[dtype][op])
        or string.format("%.3f (%.1fx)", ms[dtype][op], ratio[dtype][op])
      line = line .. string.format(" %16s", cell)
    end
    print(line)
  end
end
print()
print(string.format("worst ratio to sum: %.1fx (%s)", worst, worst_at))
if opt.limit and worst > opt.limit then
  io.stderr:write(string.format("cpu_bench: %s is %.1fx sum's time, over the limit %.1fx\n", worst_at, worst, opt.limit))
  os.exit(1)
end
