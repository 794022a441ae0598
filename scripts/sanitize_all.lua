--- Drives every kernel variant through compute-sanitizer (scripts/sanitize.sh runs this under memcheck,
-- racecheck and synccheck): each device variant at its default and its largest block size, each
-- finishing mode it supports (or only its default with --default-finish), every op, the dtypes given,
-- at one moderate size, each result checked against the host backend; and auto.
--   lua5.4 scripts/sanitize_all.lua N [--default-finish] [--dtypes float32,int8,...]
local gr = require "gpureduce"

local n = math.tointeger(tonumber(arg[1] or "")) or 100003
local default_only, dtypes = false, gr.dtypes()
for i = 2, #arg do
  if arg[i] == "--default-finish" then default_only = true
  elseif arg[i] == "--dtypes" then
    dtypes = {}
    for d in arg[i + 1]:gmatch("[^,]+") do dtypes[#dtypes + 1] = d end
  end
end

if gr.backend() ~= "cuda" then
  io.stderr:write("sanitize_all: needs a CUDA device\n")
  os.exit(1)
end

local checked, wrong = 0, 0

local function check(b, opts, want, label)
  local got = gr.reduce(b, opts)
  local ok = got == want or
    math.type(want) == "float" and math.abs(got - want) <= 1e-3 * math.max(1, math.abs(want))
  if not ok then
    wrong = wrong + 1
    print(string.format("WRONG %s: %s vs %s", label, got, want))
  end
  checked = checked + 1
end

for _, dtype in ipairs(dtypes) do
  local b = gr.buffer(n, dtype)
  if dtype:find("float") then b:random(1, -1, 1) else b:random(1, 0, 3) end
  for _, op in ipairs(gr.ops()) do
    local want = gr.reduce(b, { op = op, variant = "cpu" })
    check(b, { op = op }, want, string.format("auto %s %s", op, dtype))
    for _, v in ipairs(gr.variants()) do
      if v.available and v.needs[1] == "cuda" then
        local finishes = default_only and { v.default_finish } or v.finishes
        local blocks = v.block.max > v.block.default and { v.block.default, v.block.max } or { v.block.default }
        for _, finish in ipairs(finishes) do
          for _, block in ipairs(blocks) do
            local opts = { op = op, variant = v.name, finish = finish, threshold = 64 }
            if v.block.max > v.block.min then opts.block = block end
            check(b, opts, want, string.format("%s %s %s finish=%s block=%d", v.name, op, dtype, finish, block))
          end
        end
      end
    end
  end
  b:free()
end
print(string.format("sanitize_all: %d configurations at n=%d, %d wrong", checked, n, wrong))
os.exit(wrong == 0 and 0 or 1)
