--- Compares the PTX of every kernel of two source trees: a refactor that claims to leave the kernels
-- alone should leave every kernel's PTX the same (and so its machine code and speed).
--   lua5.4 scripts/compare_ptx.lua OLD_TREE NEW_TREE [file.cu ...]    (default: every cuda/*.cu of NEW)
-- Each file is compiled with nvcc -ptx for compute_90 in both trees; kernels are matched by name (the
-- anonymous-namespace hash, the label numbers and the local stacks' numbers are taken out, since they
-- differ with file order) and their bodies compared, the kernel's own name taken out. A kernel whose name
-- changed (a type among its template arguments was renamed) is matched by its body. Prints one line per
-- file and exits 1 if any kernel differs or is missing, or if a file's kernels could not all be read.
local old_tree, new_tree = arg[1], arg[2]
if not old_tree or not new_tree then
  io.stderr:write("usage: lua5.4 scripts/compare_ptx.lua OLD_TREE NEW_TREE [file.cu ...]\n")
  os.exit(2)
end
local nvcc = os.getenv("NVCC") or "nvcc"

local files = {}
for i = 3, #arg do files[#files + 1] = arg[i] end
if #files == 0 then
  local p = assert(io.popen("cd " .. new_tree .. " && ls cuda/*/*.cu"))
  for l in p:lines() do files[#files + 1] = l end
  p:close()
end

local function ptx_of(tree, file)
  local out = os.tmpname()
  local cmd = string.format("cd %s && %s -std=c++17 -O3 -arch=compute_90 -ptx -Iengine %s -o %s 2>&1", tree, nvcc,
    file, out)
  local p = assert(io.popen(cmd))
  local log = p:read("a")
  local ok = p:close()
  local f = io.open(out)
  local text = f and f:read("a") or ""
  if f then f:close() end
  os.remove(out)
  if not ok then return nil, log end
  return text
end

--- kernel name -> body, with what differs between two compilations of the same code taken out.
local function kernels(ptx)
  ptx = ptx:gsub("_GLOBAL__N__%x+_%d+_[%w_]-_cu_%x+", "ANON")
  ptx = ptx:gsub("_INTERNAL_%x+_%d+_[%w_]-_cu_%x+", "INTERNAL")
  ptx = ptx:gsub("%$L__BB%d+_", "LBB_")
  ptx = ptx:gsub("__local_depot%d+", "__local_depot")
  local t, n = {}, 0
  -- directives such as .maxntid (from __launch_bounds__) stand between the parameters and the body
  for name, body in ptx:gmatch("%.entry ([%w_]+)(%b()[^{]*%b{})") do
    t[name] = body:gsub(name:gsub("%p", "%%%0"), "SELF")
    n = n + 1
  end
  local _, entries = ptx:gsub("%.entry ", "")
  return t, n, entries
end

local bad = 0
for _, file in ipairs(files) do
  local a, err_a = ptx_of(old_tree, file)
  local b, err_b = ptx_of(new_tree, file)
  if not a or not b then
    print(string.format("%-34s cannot compile: %s", file, (err_a or err_b or ""):sub(1, 200)))
    bad = bad + 1
  else
    local ka, na, ea = kernels(a)
    local kb, nb, eb = kernels(b)
    local missing, differ, renamed = {}, 0, 0
    for name, body in pairs(ka) do
      if not kb[name] then missing[#missing + 1] = name elseif kb[name] ~= body then differ = differ + 1 end
    end
    local extra = {}             -- bodies of the kernels only the new tree names, to match renamed ones
    for name, body in pairs(kb) do if not ka[name] then extra[body] = (extra[body] or 0) + 1 end end
    local gone = 0
    for _, name in ipairs(missing) do
      local body = ka[name]
      if (extra[body] or 0) > 0 then extra[body], renamed = extra[body] - 1, renamed + 1 else gone = gone + 1 end
    end
    local added = 0
    for _, k in pairs(extra) do added = added + k end
    local unread = na ~= ea or nb ~= eb
    local same = gone == 0 and differ == 0 and added == 0 and not unread
    if not same then bad = bad + 1 end
    print(string.format("%-34s %4d kernels old, %4d new: %s%s", file, na, nb,
      same and "identical" or string.format("%d differ, %d only old, %d only new", differ, gone, added),
      (unread and string.format(" (%d and %d .entry lines: some kernels not read)", ea, eb) or "")
        .. (renamed > 0 and string.format(" (%d renamed, same body)", renamed) or "")))
  end
end
os.exit(bad == 0 and 0 or 1)
