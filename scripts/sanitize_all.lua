--- Drives every kernel variant through compute-sanitizer (scripts/sanitize.sh runs this under memcheck,
-- racecheck and synccheck): each device variant, each finishing mode it supports (or only its default
-- with --default-finish), every op, the dtypes given, at one moderate size, each result checked
-- against the host backend.
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
for _, dtype in ipairs(dtypes) do
  local b = gr.buffer(n, dtype)
  if dtype:find("float") then b:random(1, -1, 1) else b:random(1, 0, 3) end
  for _, op in ipairs(gr.ops()) do
    local want = gr.reduce(b, { op = op, variant = "cpu" })
    for _, v in ipairs(gr.variants()) do
      if v.available and v.needs[1] == "cuda" then
        local finishes = default_only and { v.default_finish } or v.finishes
        for _, finish in ipairs(finishes) do
          local got = gr.reduce(b, { op = op, variant = v.name, finish = finish, threshold = 64 })
          local ok = got == want or math.type(want) == "float" and
            math.abs(got - want) <= 1e-3 * math.max(1, math.abs(want))
          if not ok then
            wrong = wrong + 1
            print(string.format("WRONG %s %s %s finish=%s: %s vs %s", v.name, op, dtype, finish, got, want))
          end
          checked = checked + 1
        end
      end
    end
  end
  b:free()
end
print(string.format("sanitize_all: %d configurations at n=%d, %d wrong", checked, n, wrong))
os.exit(wrong == 0 and 0 or 1)
