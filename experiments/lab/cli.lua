--- The sweep's command line: an argparse parser whose list options check every item against the
-- engine's registry, and the step that turns parsed options into settings (defaults depend on --quick
-- and on the backend, so they are resolved after parsing, not given to argparse).
local argparse = require "argparse"
local sizes = require "lab.sizes"

local M = {}

M.DEFAULT_SIZES = { 1 << 20, 1 << 24, 1 << 28 }
M.QUICK_SIZES = { 1 << 16, 1 << 20 }
M.QUICK_VARIANTS = { "cpu", "cpu_pairwise", "neighbored", "interleaved", "unroll8", "warp_shuffle", "cub" }
M.CPU_SIZE_CAP = 1 << 22      -- the CPU backend's default sizes stop here: `make run` stays short anywhere
M.HOST_MAX = 1 << 24          -- host variants (cpu, cpu_pairwise) on a GPU machine stop here by default

local function set_of(list)
  local s = {}
  for _, v in ipairs(list) do s[v] = true end
  return s
end

local function split(text)
  local items = {}
  for item in tostring(text):gmatch("[^,%s]+") do items[#items + 1] = item end
  return items
end

--- A converter for a comma-separated list: each item through `one` (value or nil, reason). argparse
-- prints converter errors as they are, so the message names the option itself.
local function list_of(option, one)
  return function(text)
    local items, out = split(text), {}
    if #items == 0 then return nil, option .. ": empty list" end
    for _, item in ipairs(items) do
      local v, why = one(item)
      if v == nil then return nil, string.format("%s: '%s' %s", option, item, why) end
      out[#out + 1] = v
    end
    return out
  end
end

--- A converter accepting the names in `names` or "all" (which must stand alone).
local function names_of(option, names, extra)
  local known = set_of(names)
  for _, e in ipairs(extra or {}) do known[e] = true end
  local accepted = table.concat(names, ", ")
  if extra and #extra > 0 then accepted = accepted .. ", " .. table.concat(extra, ", ") end
  local conv = list_of(option, function(item)
    if known[item] then return item end
    return nil, "is not one of: " .. accepted
  end)
  return function(text)
    local list, err = conv(text)
    if list and #list > 1 then
      for _, item in ipairs(list) do
        if item == "all" then return nil, option .. ": 'all' cannot be combined with other names" end
      end
    end
    return list, err
  end
end

local function size_item(item)
  local n, why = sizes.parse(item)
  if not n then return nil, "is not a size (" .. why .. ")" end
  return n
end

local function count_of(option, min)
  return function(text)
    local n = sizes.parse(text)
    if text == "0" and min == 0 then return 0 end
    if not n or n < min then
      return nil, string.format("%s: '%s' is not an integer >= %d", option, text, min)
    end
    return n
  end
end

-- for the other scripts' parsers (lab/accuracy_cli.lua)
M.set_of, M.list_of, M.names_of, M.count_of = set_of, list_of, names_of, count_of

local function block_item(item)
  if item == "default" then return item end
  local n = math.tointeger(tonumber(item))
  if not n or n < 1 or n > 1024 then return nil, "is not 'default' or a block size in 1..1024" end
  return n
end

--- The parser. `gr` supplies the registry (variant names, ops, dtypes, finishing modes).
function M.parser(gr)
  local p = argparse("sweep.lua", "The gpureduce experiment lab: every variant over sizes, dtypes, ops, "
    .. "block sizes and finishing modes. Each configuration is validated first: its result must lie "
    .. "within an error bound (from the launch shape gr.plan reports) of the exact value, computed in Lua "
    .. "from the data read back; only the valid ones are timed (device events, warm-up, median and minimum of --reps).")
  p:help_max_width(100)
  p:epilog("Lists are comma-separated. Sizes: 1048576, 2^20, 2^20+1, 64K, 1M.\n"
    .. "Writes DIR/sweep.json, DIR/sweep.csv and (with gnuplot) DIR/sweep-{gbps,time}-DTYPE-OP.png;\n"
    .. "experiments/README.md documents the schema. Exit status: 0, or 1 when any configuration failed\n"
    .. "validation (or the options were wrong). Without a CUDA device it runs on the CPU backend.")
  p:flag("--quick", "A small sweep in seconds: sizes 2^16,2^20, --reps 5, --warmup 1, variants "
    .. table.concat(M.QUICK_VARIANTS, ",") .. " (those available). Options given explicitly win.")
  p:option("--variants", "Variants by name, or 'all'. (default: all available on this backend)")
    :argname("<list>"):convert(names_of("--variants", gr.variant_names({ all = true }), { "all" }))
  p:option("--sizes", "Element counts. (default: 2^20,2^24,2^28; on the CPU backend capped at 2^22)")
    :argname("<list>"):convert(list_of("--sizes", size_item))
  p:option("--ops", "Operators, or 'all': " .. table.concat(gr.ops(), ",") .. ". (default: sum)")
    :argname("<list>"):convert(names_of("--ops", gr.ops(), { "all" }))
  p:option("--operators", "A Lua file that returns a list of user operators to sweep beside the ops: "
    .. "{ {operator = gr.operator{...}, like = 'sum'}, ... }, each checked against the built-in op it "
    .. "stands for (like) on that op's data, and run with the plan auto gives it (GPU only). "
    .. "experiments/operators/ has examples.")
    :argname("<file>"):convert(function(path) return M.load_operators(gr, path) end)
  p:option("--kernels", "A Lua file of user kernels to sweep beside the variants: it returns a list of "
    .. "gr.kernel specs ({name =, source =, ...}), or registers them itself and returns them (or their names). "
    .. "Each is validated and timed like a catalogue variant, over its block sizes and finishing modes "
    .. "(GPU only). experiments/kernels/ has examples.")
    :argname("<file>"):convert(function(path) return M.load_kernels(gr, path) end)
  p:option("--dtypes", "Element types, or 'all': " .. table.concat(gr.dtypes(), ",")
    .. ". (default: float32)")
    :argname("<list>"):convert(names_of("--dtypes", gr.dtypes(), { "all" }))
  p:option("--blocks", "Threads per block, or 'default' (each variant's own). Variants with a fixed block "
    .. "(cpu, cub, thrust) ignore it. (default: default)")
    :argname("<list>"):convert(list_of("--blocks", block_item))
  local finishes = {}
  for _, f in ipairs(gr.finishes()) do
    if f ~= "auto" then finishes[#finishes + 1] = f end
  end
  p:option("--finishes", "Finishing modes: " .. table.concat(finishes, ",") .. ", or 'default' (each "
    .. "variant's own). (default: default)")
    :argname("<list>"):convert(names_of("--finishes", finishes, { "default" }))
  p:option("--threshold", "Element count below which finish=hybrid hands over to the CPU. "
    .. "(default: the engine's)"):argname("<n>"):convert(count_of("--threshold", 1))
  p:option("--reps", "Timed repetitions; the median and minimum are reported. (default: 20)")
    :argname("<n>"):convert(count_of("--reps", 1))
  p:option("--warmup", "Untimed repetitions first. (default: 3)"):argname("<n>")
    :convert(count_of("--warmup", 0))
  p:option("--seed", "Seed of the random data. (default: 1)"):argname("<n>"):convert(count_of("--seed", 0))
  p:option("--host-max", "Largest size run by host variants (cpu, cpu_pairwise), which are slow. "
    .. "(default: 2^24)"):argname("<n>"):convert(count_of("--host-max", 1))
  p:flag("--rotate", "When a buffer fits in L2, time round-robin over several copies of it (one rep per "
    .. "call) so that each rep reads from DRAM.")
  p:option("--out", "Directory of the results. (default: results)"):argname("<dir>")
  p:flag("--no-plot", "Do not draw PNG plots (they need gnuplot).")
  p:flag("--progress", "Show the progress line even when stderr is not a terminal.")
  p:flag("--no-progress", "Never show the progress line.")
  p:option("--inject-wrong-reference", "Self-test: perturb the reference (for every variant, or for the "
    .. "one named) so that validation must fail and the lab must exit non-zero.")
    :argname("<variant>"):args("?")
    :convert(function(name)
      local list, err = names_of("--inject-wrong-reference", gr.variant_names({ all = true }))(name)
      return list and list[1], err
    end)
  return p
end

--- The list a Lua file returns (--operators, --kernels), or nil and why, said for `option`.
local function load_list(option, path)
  local chunk, err = loadfile(path)
  if not chunk then return nil, option .. ": " .. err end
  local ok, list = pcall(chunk)
  if not ok then return nil, option .. ": " .. path .. " raised: " .. tostring(list) end
  if type(list) ~= "table" then return nil, option .. ": " .. path .. " must return a list, got " .. type(list) end
  return list
end

--- The user operators of a --operators file: a list of {name=, operator=, like=}, or nil and why.
function M.load_operators(gr, path)
  local list, err = load_list("--operators", path)
  if not list then return nil, err end
  local ops, out = set_of(gr.ops()), {}
  for i, e in ipairs(list) do
    if type(e) ~= "table" or type(e.operator) ~= "userdata" or not pcall(function() return e.operator:info() end) then
      return nil, string.format("--operators: %s, entry %d: expected {operator = gr.operator{...}, like = <op>}", path, i)
    end
    if not ops[e.like] then
      return nil, string.format("--operators: %s, entry %d: like = %s is not an op (accepted: %s)", path, i,
        tostring(e.like), table.concat(gr.ops(), ", "))
    end
    out[#out + 1] = { name = e.operator.name, operator = e.operator, like = e.like }
  end
  if #out == 0 then return nil, "--operators: " .. path .. " returned no operator" end
  return out
end

--- The user kernels of a --kernels file, registered (gr.kernel): a list of their names, or nil and why.
function M.load_kernels(gr, path)
  local list, err = load_list("--kernels", path)
  if not list then return nil, err end
  local names = {}
  for i, e in ipairs(list) do
    local name
    if type(e) == "string" then
      name = e                                  -- a name gr.kernel registered in the file
    elseif type(e) == "table" and e.source ~= nil then
      local rok, v = pcall(gr.kernel, e)        -- a spec: registered here (compiled where NVRTC is)
      if not rok then return nil, string.format("--kernels: %s, entry %d: %s", path, i, tostring(v)) end
      name = v.name
    elseif type(e) == "table" then
      name = e.name                             -- an entry gr.kernel returned
    end
    local v = type(name) == "string" and gr.variant(name)
    if not (v and v.user) then
      return nil, string.format("--kernels: %s, entry %d: expected a gr.kernel spec {name =, source =, ...}, "
        .. "the entry gr.kernel returned, or its name", path, i)
    end
    names[#names + 1] = name
  end
  if #names == 0 then return nil, "--kernels: " .. path .. " returned no kernel" end
  return names
end

--- Parses a list of arguments without exiting: options, or nil and argparse's message.
function M.parse(gr, argv)
  local ok, result = M.parser(gr):pparse(argv)
  if not ok then return nil, result end
  return result
end

local function expand_all(list, all)
  if list and list[1] == "all" then return all end
  return list
end

local function dedupe(list)
  local seen, out = {}, {}
  for _, v in ipairs(list) do
    if not seen[v] then seen[v], out[#out + 1] = true, v end
  end
  return out
end
M.dedupe = dedupe

--- The variants to run of the names `wanted`: the available ones (and the names in `keep`, e.g. auto) in
-- order, the unavailable ones apart, and on the GPU the user kernels of --kernels added (swept beside the
-- others). Appends to `notes` what was skipped. Returns variants, unavailable, kernels (nil: none used).
function M.resolve_variants(gr, wanted, kernels, notes, keep)
  local backend, is_available = gr.backend(), set_of(gr.variant_names())
  local variants, unavailable = {}, {}
  for _, name in ipairs(dedupe(wanted)) do
    local list = (is_available[name] or (keep and keep[name])) and variants or unavailable
    list[#list + 1] = name
  end
  if kernels and backend == "cuda" then
    local chosen = set_of(variants)
    for _, name in ipairs(kernels) do
      if not chosen[name] then variants[#variants + 1] = name end
    end
  elseif kernels then
    notes[#notes + 1] = "skipping --kernels: user kernels run on the GPU only (registered: "
      .. table.concat(kernels, ", ") .. ")"
    kernels = nil
  end
  if #unavailable > 0 then
    notes[#notes + 1] = string.format("skipping %s: not available on the %s backend",
      table.concat(unavailable, ", "), backend)
  end
  return variants, unavailable, kernels
end

--- Parsed options -> settings: defaults filled in for this backend, unavailable variants dropped.
-- Returns the settings and a list of notes for stderr.
function M.settings(gr, args)
  local notes = {}
  local backend = gr.backend()
  local available = gr.variant_names()
  local is_available = set_of(available)
  local s = {
    backend = backend, quick = args.quick or false,
    reps = args.reps or (args.quick and 5 or 20),
    warmup = args.warmup or (args.quick and 1 or 3),
    seed = args.seed or 1,
    host_max = args.host_max or M.HOST_MAX,
    threshold = args.threshold,
    rotate = args.rotate or false,
    out = args.out or "results",
    plot = not args.no_plot,
    progress = args.no_progress and false or args.progress and true or nil,   -- nil: only on a terminal
    ops = dedupe(expand_all(args.ops, gr.ops()) or { "sum" }),
    operators = backend == "cuda" and args.operators or nil,
    dtypes = dedupe(expand_all(args.dtypes, gr.dtypes()) or { "float32" }),
    blocks = dedupe(args.blocks or { "default" }),
    finishes = dedupe(args.finishes or { "default" }),
  }
  if args.inject_wrong_reference then
    s.inject = args.inject_wrong_reference[1] or "all"
  end

  local wanted = expand_all(args.variants, available)
  if not wanted then
    -- the catalogue by default: user kernels registered earlier in the process come with --kernels or
    -- --variants only
    wanted = {}
    for _, name in ipairs(available) do
      if not gr.variant(name).user then wanted[#wanted + 1] = name end
    end
    if args.quick then
      wanted = {}
      for _, name in ipairs(M.QUICK_VARIANTS) do
        if is_available[name] then wanted[#wanted + 1] = name end
      end
    end
  end
  s.variants, s.unavailable, s.kernels = M.resolve_variants(gr, wanted, args.kernels, notes)
  if args.operators and backend ~= "cuda" then
    notes[#notes + 1] = "skipping --operators: user operators are timed on the GPU only (their cpu functions "
      .. "are Lua, for correctness)"
  end

  if args.sizes then
    s.sizes = dedupe(args.sizes)
  elseif args.quick then
    s.sizes = M.QUICK_SIZES
  elseif backend ~= "cuda" then
    local capped = {}
    for i, n in ipairs(M.DEFAULT_SIZES) do capped[i] = math.min(n, M.CPU_SIZE_CAP) end
    s.sizes = dedupe(capped)
  else
    s.sizes = M.DEFAULT_SIZES
  end
  if backend ~= "cuda" then
    notes[#notes + 1] = "no CUDA device: running on the CPU backend (host variants only"
      .. ((args.sizes or args.quick) and "" or "; default sizes capped at " .. sizes.format(M.CPU_SIZE_CAP))
      .. ")"
  end
  return s, notes
end

return M
