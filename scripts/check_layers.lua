--- Checks that the folders of engine/, cuda/ and lua/ are layers (run from the repository root after
-- `make`; spec/host_spec.lua runs it):
--   1. every quoted include goes to a folder the including file's folder may use (RULES below), and,
--      from cuda/, only to the engine headers that make the kernels' contract (CUDA_SEES);
--   2. every call between objects (from `nm`: which object defines a symbol another one uses) goes to a
--      folder the caller's folder may use; the binding (lua/) calls the engine only through gr.h, and
--      no kernel object calls a function of the engine;
--   3. no circle: among the includes of all three trees' files, among the calls between engine objects,
--      and among the calls between the binding's objects.
-- Prints each problem it finds and exits 1; prints "layers: ok" and a line per folder otherwise.
--   lua5.4 scripts/check_layers.lua [build dir, default build]
local build = arg[1] or "build"
local problems = 0

-- What each folder may include and call, besides itself. A folder's README.md says why (engine/README.md
-- for the engine's, cuda/README.md for the kernels'); docs/architecture.md draws the tree.
local ENGINE_API = "engine"         -- gr.h and lists.h: the public API, what every layer may see
local RULES = {
  ["engine"] = {},
  ["engine/base"] = { ENGINE_API },
  ["engine/ops"] = { ENGINE_API, "engine/base" },
  ["engine/jit"] = { ENGINE_API, "engine/base" },
  ["engine/core"] = { ENGINE_API, "engine/base", "engine/ops", "engine/jit" },
  ["engine/user"] = { ENGINE_API, "engine/base", "engine/ops", "engine/jit", "engine/core" },
  ["engine/multi"] = { ENGINE_API, "engine/base", "engine/ops", "engine/jit", "engine/core", "engine/user" },
  ["lua"] = { ENGINE_API },
  ["cuda/device"] = { ENGINE_API, "engine/base", "engine/ops" },
  ["cuda/host"] = { ENGINE_API, "engine/base", "cuda/device" },
  ["cuda/runtime"] = { ENGINE_API, "engine/base", "engine/ops", "cuda/host" },
  ["cuda/kernels"] = { ENGINE_API, "engine/base", "engine/ops", "cuda/device", "cuda/host" },
  ["cuda/variants"] = { ENGINE_API, "engine/base", "cuda/device", "cuda/host" },
}
-- The engine headers a file under cuda/ may include: the launch and device contracts, the public lists,
-- and the headers whose code the host and the device share (GR_HD's, the small floats' conversions, the
-- generators, the conversions between dtypes, the exact sums, the ops' arithmetic).
local CUDA_SEES = { ["engine/gr.h"] = true, ["engine/lists.h"] = true, ["engine/base/launch.h"] = true,
  ["engine/base/device.h"] = true, ["engine/base/hostdev.h"] = true, ["engine/base/small_floats.h"] = true,
  ["engine/ops/gen_element.h"] = true, ["engine/ops/convert_element.h"] = true,
  ["engine/ops/exact_acc.h"] = true, ["engine/ops/op_math.h"] = true }
-- Of those, what cuda/device (NVRTC-clean, embedded for operators: the Makefile's NVRTC_HEADERS) may
-- include: the lists, GR_HD, the small floats' conversions and the ops' arithmetic, which include no
-- standard header under CUDA, and of the engine only each other, by the names they are embedded under.
local DEVICE_SEES = { ["engine/lists.h"] = true, ["engine/base/hostdev.h"] = true,
  ["engine/base/small_floats.h"] = true, ["engine/ops/op_math.h"] = true }
-- References that are not calls: runtime.cu's gr_kernels_linked names every kernel's table so that a
-- static link keeps the kernels (GR_CATALOGUE_KERNELS in base/launch.h); it calls none of them.
local ANCHORS = { ["cuda/runtime/runtime.cu"] = { ["cuda/variants"] = true, ["cuda/kernels"] = true } }

local function lines_of(cmd)
  local p = assert(io.popen(cmd))
  local out = {}
  for l in p:lines() do out[#out + 1] = l end
  p:close()
  return out
end

local function dirname(path) return path:match("^(.*)/[^/]+$") or "." end

local function problem(msg)
  print(msg)
  problems = problems + 1
end

local function may_use(from, to)
  if from == to then return true end
  for _, f in ipairs(RULES[from] or {}) do
    if f == to then return true end
  end
  return false
end

--- "a/b/../c/d" -> "a/c/d"
local function normalize(path)
  local parts = {}
  for p in path:gmatch("[^/]+") do
    if p == ".." and #parts > 0 and parts[#parts] ~= ".." then parts[#parts] = nil
    elseif p ~= "." then parts[#parts + 1] = p end
  end
  return table.concat(parts, "/")
end

local function exists(path)
  local f = io.open(path)
  if f then f:close() end
  return f ~= nil
end

--- Where `#include "name"` in file resolves: beside the file, else under engine/ (-Iengine).
local function resolve(file, name)
  local here = normalize(dirname(file) .. "/" .. name)
  if exists(here) then return here end
  local from_engine = normalize("engine/" .. name)
  if exists(from_engine) then return from_engine end
  return nil
end

--- Every circle of the directed graph (node -> {node = true}), each reported once, by depth-first search.
local function circles(graph)
  local found, state, stack = {}, {}, {}
  local function visit(n)
    state[n] = "open"
    stack[#stack + 1] = n
    local next = {}
    for m in pairs(graph[n] or {}) do next[#next + 1] = m end
    table.sort(next)
    for _, m in ipairs(next) do
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

-- 1. includes
local sources = lines_of("find engine cuda lua -type f \\( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \\) "
  .. "| sort")
local includes, counted = {}, {}
for _, f in ipairs(sources) do
  local from = dirname(f)
  if not RULES[from] then problem("folder: " .. f .. " is in " .. from .. ", which is not a layer (scripts/check_layers.lua)") end
  counted[from] = (counted[from] or 0) + 1
  includes[f] = includes[f] or {}
  for l in io.lines(f) do
    local name = l:match('^%s*#%s*include%s+"([^"]+)"')
    local h = name and resolve(f, name)
    if name and not h then
      problem("include: " .. f .. " includes \"" .. name .. "\", which is not in the tree")
    elseif h then
      includes[f][h] = true
      local to = dirname(h)
      if not may_use(from, to) then
        problem(string.format("include: %s includes %s (%s may use: %s)", f, h, from,
          table.concat(RULES[from] or {}, ", ")))
      elseif from:match("^cuda/") and to:match("^engine") and not CUDA_SEES[h] then
        problem("include: " .. f .. " includes " .. h .. ", which is not part of the kernels' contract")
      elseif from == "cuda/device" and to:match("^engine") and not DEVICE_SEES[h] then
        problem("include: " .. f .. " includes " .. h .. ", which NVRTC cannot compile (cuda/device sees "
          .. "engine/lists.h, engine/base/hostdev.h, engine/base/small_floats.h and engine/ops/op_math.h)")
      elseif DEVICE_SEES[f] and not (DEVICE_SEES[h] and name == "../../" .. h) then
        -- NVRTC finds an embedded header by the exact name an include gives (engine/base/hostdev.h)
        problem("include: " .. f .. ", which NVRTC compiles, includes \"" .. name .. "\": it may include only "
          .. "the other embedded engine headers, each as \"../../engine/...\"")
      end
    end
  end
end
for _, c in ipairs(circles(includes)) do problem("include circle: " .. c) end

-- 2. calls
local function objects_under(dir)
  return lines_of("find " .. build .. "/obj/" .. dir .. " -name '*.o' 2>/dev/null | sort")
end
local engine_objects = objects_under("engine")
if #engine_objects == 0 then
  print("layers: no objects under " .. build .. "/obj/engine (run make first)")
  os.exit(1)
end
--- The source an object was built from ("build/obj/engine/core/plan.o" -> "engine/core/plan.c").
local function source_of(o, ext) return o:sub(#build + 6):gsub("%.o$", ext) end

local defined_in, uses = {}, {}
local function read_symbols(objects, ext)
  for _, o in ipairs(objects) do
    local name = source_of(o, ext)
    if not exists(name) then goto stale end     -- the object of a file since removed
    uses[name] = {}
    for _, l in ipairs(lines_of("nm " .. o)) do
      local kind, sym = l:match("%s(%u)%s+(%S+)$")
      if kind and kind ~= "U" and kind ~= "W" and kind ~= "V" then defined_in[sym] = name
      elseif kind == "U" or kind == "w" then uses[name][sym] = true end
    end
    ::stale::
  end
end
read_symbols(engine_objects, ".c")
read_symbols(objects_under("lua"), ".c")
read_symbols(objects_under("cuda"), ".cu")

local gr_h = {}             -- the functions the public header declares: the binding's whole view
for l in io.lines("engine/gr.h") do
  local name = l:match("[%w_%*]+%s+%**(gr_[%w_]+)%s*[%(%[]")      -- functions, and tables (names[])
  if name then gr_h[name] = true end
end

local calls = {}
for name, syms in pairs(uses) do
  calls[name] = {}
  local from = dirname(name)
  for sym in pairs(syms) do
    local to_file = defined_in[sym]
    if to_file and to_file ~= name then
      calls[name][to_file] = true
      local to = dirname(to_file)
      if from:match("^cuda/") and to:match("^engine") then
        problem("call up: " .. name .. " calls " .. sym .. " (" .. to_file .. ")")
      elseif from == "lua" and to ~= "lua" and not gr_h[sym] then
        problem("call: " .. name .. " calls " .. sym .. " (" .. to_file .. "), which gr.h does not declare")
      elseif from ~= "lua" and not may_use(from, to) and not (from:match("^engine") and to:match("^cuda"))
          and not (ANCHORS[name] and ANCHORS[name][to]) then
        problem(string.format("call: %s calls %s (%s; %s may use: %s)", name, sym, to_file, from,
          table.concat(RULES[from] or {}, ", ")))
      end
    end
  end
end
-- circles among the engine's objects and among the binding's (the kernels call nothing back)
local engine_calls, binding_calls = {}, {}
for name, to in pairs(calls) do
  local g = name:match("^engine/") and engine_calls or name:match("^lua/") and binding_calls
  if g then
    g[name] = {}
    for t in pairs(to) do
      if t:sub(1, 4) == name:sub(1, 4) then g[name][t] = true end
    end
  end
end
for _, c in ipairs(circles(engine_calls)) do problem("call circle: " .. c) end
for _, c in ipairs(circles(binding_calls)) do problem("call circle: " .. c) end

if problems > 0 then
  print(string.format("layers: %d problem(s)", problems))
  os.exit(1)
end
local folders = {}
for f in pairs(counted) do folders[#folders + 1] = f end
table.sort(folders)
for _, f in ipairs(folders) do
  print(string.format("  %-14s %3d files; may use: %s", f, counted[f], table.concat(RULES[f], ", ")))
end
print("layers: ok")
