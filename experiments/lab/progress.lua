--- The progress line on stderr: "[ 37/120] time  warp_shuffle float32 sum n=2^24  ETA 0:42".
--
-- The ETA weighs the work left by cost units (bytes for a check, bytes x reps for a timing) and by
-- kind (host or device variant, check or timing), each at the rate measured so far for that kind:
-- a host variant is orders of magnitude slower per byte than a kernel, so one global rate would lie.
local M = {}
M.__index = M

--- Whether stderr is a terminal (the shell inherits our stderr; Lua has no isatty).
function M.stderr_is_tty()
  return os.execute("test -t 2") == true
end

--- totals: {kind = units} planned; enabled: false for a silent progress; clock: seconds.
function M.new(totals, steps, enabled, clock)
  return setmetatable({
    totals = totals, steps = steps, enabled = enabled, clock = clock,
    done_units = {}, spent = {}, step = 0, shown = false,
  }, M)
end

function M:start(kind, units, label)
  self.step = self.step + 1
  self.current = { kind = kind, units = units, t0 = self.clock() }
  if not self.enabled then return end
  local eta = self:eta()
  local width = #tostring(self.steps)
  io.stderr:write(string.format("\r[%" .. width .. "d/%d] %s%s\27[K", self.step, self.steps, label,
    eta and "  ETA " .. eta or ""))
  io.stderr:flush()
  self.shown = true
end

function M:finish()
  local c = self.current
  if not c then return end
  self.done_units[c.kind] = (self.done_units[c.kind] or 0) + c.units
  self.spent[c.kind] = (self.spent[c.kind] or 0) + (self.clock() - c.t0)
  self.current = nil
end

--- Changes the planned work of a kind (timings of configurations that failed validation drop out).
function M:replan(kind, units, steps)
  self.totals[kind] = units
  if steps then self.steps = steps end
end

function M:eta()
  local all_units, all_time = 0, 0
  for kind, u in pairs(self.done_units) do
    all_units, all_time = all_units + u, all_time + self.spent[kind]
  end
  if all_units == 0 or all_time < 0.5 then return nil end    -- too early to say anything useful
  local left = 0
  for kind, total in pairs(self.totals) do
    local done = self.done_units[kind] or 0
    local rate = done > 0 and self.spent[kind] / done or all_time / all_units
    left = left + math.max(0, total - done) * rate
  end
  local secs = math.floor(left + 0.5)
  if secs >= 3600 then
    return string.format("%d:%02d:%02d", secs // 3600, secs // 60 % 60, secs % 60)
  end
  return string.format("%d:%02d", secs // 60, secs % 60)
end

--- Erases the line, so that a table printed on stdout starts clean on a terminal.
function M:clear()
  if self.enabled and self.shown then
    io.stderr:write("\r\27[K")
    io.stderr:flush()
    self.shown = false
  end
end

return M
