--- Checks the layering of the C engine and the kernels (run from the repository root after `make`):
--   1. no circle among the includes of engine/ and lua/ files;
--   2. no circle among the calls between engine object files (from `nm`: which object defines a symbol
--      another one uses);
--   3. no file under cuda/ includes an engine header other than the narrow launch contract
--      (engine/launch.h, which includes only gr.h), the lists of dtypes and ops (engine/lists.h, which
--      includes nothing), the device interface that cuda/runtime.cu,
--      generate.cu, read_bandwidth.cu and jit.cu implement (engine/device.h), the generators shared with the
--      CPU backend (engine/gen_element.h) and the exact accumulator shared with it (engine/exact_acc.h), and
--      no kernel calls a function of the engine.
-- Prints each circle or stray include it finds and exits 1; prints "layers: ok" otherwise.
--   lua5.4 scripts/check_layers.lua [build dir, default build]
local build = arg[1] or "build"
local problems = 0

local function lines_of(cmd)
  local p = assert(io.popen(cmd))
  local out = {}
  for l in p:lines() do out[#out + 1] = l end
  p:close()
  return out
end

local function basename(path) return path:match("([^/]+)$") end

--- Every circle of the directed graph (node -> {node = true}), each reported once, by depth-first search.
local function circles(graph)
  local found, state, stack = {}, {}, {}
  local function visit(n)
    state[n] = "open"
    stack[#stack + 1] = n
    for m in pairs(graph[n] or {}) do
      if state[m] == "open" then
        local cycle = {}
        for i = #stack, 1, -1 do
          table.insert(cycle, 1, stack[i])
          if stack[i] == m then break end
        end
        found[#found + 1] = table.concat(cycle, " -> ") .. " -> " .. m
      elseif not state[m] then
        visit(m)
      end
    end
    stack[#stack] = nil
    state[n] = "done"
  end
  local nodes = {}
  for n in pairs(graph) do nodes[#nodes + 1] = n end
  table.sort(nodes)
  for _, n in ipairs(nodes) do if not state[n] then visit(n) end end
  return found
end

local function report(kind, list)
  for _, c in ipairs(list) do
    print(kind .. ": " .. c)
    problems = problems + 1
  end
end

-- 1. includes among engine/ and lua/ files (quoted includes only: system headers are leaves)
local includes = {}
for _, f in ipairs(lines_of("ls engine/*.c engine/*.h lua/*.c lua/*.h 2>/dev/null")) do
  local from = basename(f)
  includes[from] = includes[from] or {}
  for l in io.lines(f) do
    local h = l:match('^%s*#%s*include%s+"([^"]+)"')
    if h then includes[from][basename(h)] = true end
  end
end
report("include circle", circles(includes))

-- 2. calls among engine objects
local objects = lines_of("ls " .. build .. "/obj/engine/*.o 2>/dev/null")
if #objects == 0 then
  print("layers: no objects under " .. build .. "/obj/engine (run make first)")
  os.exit(1)
end
local defined_in, uses = {}, {}
for _, o in ipairs(objects) do
  local name = basename(o):gsub("%.o$", ".c")
  uses[name] = {}
  for _, l in ipairs(lines_of("nm " .. o)) do
    local kind, sym = l:match("%s(%u)%s+(%S+)$")
    if kind and kind ~= "U" and kind ~= "W" and kind ~= "V" then defined_in[sym] = name
    elseif kind == "U" then uses[name][sym] = true end
  end
end
local calls = {}
for name, syms in pairs(uses) do
  calls[name] = {}
  for sym in pairs(syms) do
    local to = defined_in[sym]
    if to and to ~= name then calls[name][to] = true end
  end
end
report("call circle", circles(calls))

-- 3. the kernels' view of the engine
local allowed = { ["launch.h"] = true, ["device.h"] = true, ["gen_element.h"] = true, ["gr.h"] = true,
  ["lists.h"] = true, ["exact_acc.h"] = true }
for _, f in ipairs(lines_of("ls cuda/*.cu cuda/*.cuh 2>/dev/null")) do
  for l in io.lines(f) do
    local h = l:match('^%s*#%s*include%s+"([^"]+)"')
    if h and h:find("engine/", 1, true) and not allowed[basename(h)] then
      print("stray include: " .. f .. " includes " .. h)
      problems = problems + 1
    end
  end
end
local engine_functions = {}
for sym, where in pairs(defined_in) do engine_functions[sym] = where end
for _, o in ipairs(lines_of("ls " .. build .. "/obj/cuda/*.o 2>/dev/null")) do
  for _, l in ipairs(lines_of("nm -u " .. o)) do
    local sym = l:match("U%s+(%S+)$")
    if sym and engine_functions[sym] and sym:match("^gr_") then
      print("call up: " .. basename(o) .. " calls " .. sym .. " (" .. engine_functions[sym] .. ")")
      problems = problems + 1
    end
  end
end

if problems > 0 then
  print(string.format("layers: %d problem(s)", problems))
  os.exit(1)
end
print("layers: ok")
