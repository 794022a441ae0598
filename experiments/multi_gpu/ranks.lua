--- The launcher side of a multi-process run (allreduce_demo.lua, bench.lua): one child process per rank,
-- all started before any is waited for (a communicator forms only when every rank has joined), then
-- each one's output and exit status collected in rank order.
local M = {}

--- The shell command of rank r of `size`: `interp script` with GPUREDUCE_RANK, GPUREDUCE_RANKS and the
-- variables of `env` (a table of name = value) set, stderr joined to stdout.
function M.command(r, size, env, interp, script)
  local vars = { string.format("GPUREDUCE_RANK=%d GPUREDUCE_RANKS=%d", r, size) }
  local names = {}
  for k in pairs(env or {}) do names[#names + 1] = k end
  table.sort(names)
  for _, k in ipairs(names) do vars[#vars + 1] = k .. "='" .. tostring(env[k]):gsub("'", "'\\''") .. "'" end
  return string.format("%s '%s' '%s' 2>&1", table.concat(vars, " "), interp, script)
end

--- Runs ranks 0 .. size - 1, command(r) being rank r's shell command; show(r, output) is called with each
-- one's output in rank order. Returns the failures: a list of "rank r of size exited with status c"
-- (empty when every rank exited 0).
function M.run(size, command, show)
  local children, failed = {}, {}
  for r = 0, size - 1 do children[r] = assert(io.popen(command(r))) end
  for r = 0, size - 1 do
    show(r, children[r]:read("a"))
    local ok, how, code = children[r]:close()
    if not ok then
      failed[#failed + 1] = string.format("rank %d of %d %s %s", r, size,
        how == "signal" and "was killed by signal" or "exited with status", tostring(code))
    end
  end
  return failed
end

return M
