--- Running the lab's scripts (experiments/*.lua) from a spec: in a sub-process of this interpreter, with
-- this checkout's facade and module (busted's cpath, else build/); temporary folders for their results,
-- and readers of what they write (JSON, CSV).
local json = require "dkjson"

local M = {}

--- The checkout's root (the folder above spec/), and the lab's modules on the path.
M.root = (debug.getinfo(1, "S").source:match("^@(.*)/spec/support/[^/]*$")) or "."
package.path = M.root .. "/experiments/?.lua;" .. package.path

function M.q(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end
local q = M.q

-- the interpreter running busted is the most negative index of arg
local lua = "lua5.4"
if type(arg) == "table" then
  local i = -1
  while arg[i - 1] do i = i - 1 end
  lua = arg[i] or lua
end

-- busted's cpath first: it names the build folder under test (make test BUILD=..., make check-asan)
local env = "LUA_PATH=" .. q(M.root .. "/lua/?.lua;" .. M.root .. "/lua/?/init.lua;" .. package.path)
  .. " LUA_CPATH=" .. q(package.cpath .. ";" .. M.root .. "/build/?.so")

--- Runs experiments/SCRIPT with the argument text `args`; returns the exit code, stdout and stderr.
function M.run(script, args, extra_env)
  local err = os.tmpname()
  local cmd = string.format("%s %s %s %s %s 2>%s", env, extra_env or "", q(lua),
    q(M.root .. "/experiments/" .. script), args, q(err))
  local f = assert(io.popen(cmd))
  local out = f:read("a")
  local _, _, code = f:close()
  local ef = assert(io.open(err))
  local stderr = ef:read("a")
  ef:close()
  os.remove(err)
  return code, out, stderr
end

local tmpdirs = {}

--- A new empty folder, removed by M.cleanup().
function M.tmpdir()
  local d = os.tmpname()
  os.remove(d)
  assert(os.execute("mkdir -p " .. q(d)))
  tmpdirs[#tmpdirs + 1] = d
  return d
end

function M.cleanup()
  for _, d in ipairs(tmpdirs) do os.execute("rm -rf " .. q(d)) end
  tmpdirs = {}
end

function M.write_file(path, text)
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
end

function M.read(path)
  local f = assert(io.open(path))
  local s = f:read("a")
  f:close()
  return s
end

--- A JSON file, decoded with null kept as json.null.
function M.decode(path)
  local doc, _, err = json.decode(M.read(path), 1, json.null)
  assert(doc, err)
  return doc
end

--- Splits one CSV line (fields may be double-quoted with "" inside).
function M.csv_split(line)
  local fields, i = {}, 1
  while i <= #line + 1 do
    if line:sub(i, i) == '"' then
      local j, buf = i + 1, {}
      while true do
        local c = line:sub(j, j)
        if c == '"' and line:sub(j + 1, j + 1) == '"' then buf[#buf + 1], j = '"', j + 2
        elseif c == '"' or c == "" then break
        else buf[#buf + 1], j = c, j + 1 end
      end
      fields[#fields + 1] = table.concat(buf)
      i = j + 2
    else
      local j = line:find(",", i, true) or #line + 1
      fields[#fields + 1] = line:sub(i, j - 1)
      i = j + 1
    end
  end
  return fields
end

return M
