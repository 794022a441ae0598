--- The accuracy lab's command line (experiments/accuracy.lua): an argparse parser whose lists are checked
-- against the registry and the lab's data sets, and the settings it resolves for this backend.
local argparse = require "argparse"
local cli = require "lab.cli"
local datasets = require "lab.datasets"
local errors = require "lab.errors"
local sizes = require "lab.sizes"

local M = {}

M.GPU_SIZES = { 1 << 20, 1 << 24 }
M.CPU_SIZES = { 1 << 16, 1 << 20 }
M.QUICK_SIZES = { 1 << 14 }
M.LEVELS = { "not_guaranteed", "run_to_run", "gpu_to_gpu" }
M.DTYPES = { "float32", "float64" }

local dedupe = cli.dedupe

--- The parser; `gr` supplies the variant names.
function M.parser(gr)
  local p = argparse("accuracy.lua", "The gpureduce accuracy lab: the error of every variant, determinism "
    .. "level and accumulator against the exact result (computed in Lua, independently of the engine) on "
    .. "named data sets, and how many different bit patterns the variants give.")
  p:help_max_width(100)
  p:epilog("Lists are comma-separated. Sizes: 1048576, 2^20, 64K, 1M.\n"
    .. "Writes DIR/accuracy.json and DIR/accuracy.csv; experiments/README.md documents them and\n"
    .. "docs/performance.md (Accuracy) the columns. Exit status: 0, or 1 when a gpu_to_gpu result is not\n"
    .. "the exact one (correctly rounded; norm and std within 1 ulp), gpu_to_gpu variants disagree, a\n"
    .. "run_to_run configuration gives other bits when repeated, or a reduction fails.")
  p:flag("--quick", "A small run for CI: size 2^14 (options given explicitly win).")
  p:option("--variants", "Variants by name, 'auto' (the default choice), or 'all'. (default: auto and all "
    .. "available on this backend)")
    :argname("<list>"):convert(cli.names_of("--variants", gr.variant_names({ all = true }), { "auto", "all" }))
  p:option("--kernels", "A Lua file of user kernels (as the sweep's --kernels): measured beside the "
    .. "variants (GPU only).")
    :argname("<file>"):convert(function(path) return cli.load_kernels(gr, path) end)
  p:option("--levels", "Determinism levels: " .. table.concat(M.LEVELS, ",") .. ". Each variant runs at its "
    .. "own level (not_guaranteed for the atomic ones, run_to_run for the others) and at gpu_to_gpu. "
    .. "(default: all)")
    :argname("<list>"):convert(cli.names_of("--levels", M.LEVELS))
  p:option("--dtypes", "float32,float64. float32 data runs with its float32 accumulator and with "
    .. "acc = float64. (default: both)")
    :argname("<list>"):convert(cli.names_of("--dtypes", M.DTYPES))
  p:option("--ops", "Ops, or 'all': " .. table.concat(errors.OPS, ",") .. ". (default: sum)")
    :argname("<list>"):convert(cli.names_of("--ops", errors.OPS, { "all" }))
  p:option("--datasets", "Data sets: " .. table.concat(datasets.NAMES, ",") .. ". (default: all)")
    :argname("<list>"):convert(cli.names_of("--datasets", datasets.NAMES))
  p:option("--sizes", "Element counts. (default: 2^20,2^24 with a GPU, 2^16,2^20 on the CPU backend)")
    :argname("<list>"):convert(sizes.list_converter("--sizes"))
  p:option("--ddof", "Delta degrees of freedom of var and std. (default: 0)"):argname("<n>")
    :convert(cli.count_of("--ddof", 0))
  p:option("--seed", "Seed of the data. (default: 1)"):argname("<n>"):convert(cli.count_of("--seed", 0))
  p:option("--out", "Directory of the results. (default: results)"):argname("<dir>")
  return p
end

--- Parsed options -> settings for this backend, and notes for stderr.
function M.settings(gr, args)
  local notes, backend = {}, gr.backend()
  local s = {
    backend = backend, quick = args.quick or false, seed = args.seed or 1, ddof = args.ddof or 0,
    out = args.out or "results",
    levels = dedupe(args.levels or M.LEVELS),
    dtypes = dedupe(args.dtypes or M.DTYPES),
    datasets = dedupe(args.datasets or datasets.NAMES),
  }
  s.ops = dedupe((args.ops and args.ops[1] ~= "all") and args.ops or (args.ops and errors.OPS or { "sum" }))
  s.sizes = dedupe(args.sizes or (args.quick and M.QUICK_SIZES) or (backend == "cuda" and M.GPU_SIZES)
    or M.CPU_SIZES)

  local wanted = args.variants
  if not wanted or wanted[1] == "all" then
    wanted = { "auto" }
    for _, name in ipairs(gr.variant_names()) do
      if not gr.variant(name).user then wanted[#wanted + 1] = name end
    end
  end
  s.variants, s.unavailable, s.kernels = cli.resolve_variants(gr, wanted, args.kernels, notes, { auto = true })
  if backend ~= "cuda" then
    notes[#notes + 1] = "no CUDA device: the CPU backend (host variants only; default sizes "
      .. sizes.format(M.CPU_SIZES[1]) .. "," .. sizes.format(M.CPU_SIZES[2]) .. ")"
  end
  return s, notes
end

return M
