--- The header of every report: what ran where (device, CUDA versions, code revision, date, options).
local sizes = require "lab.sizes"

local M = {}

local function shell_quote(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end
M.shell_quote = shell_quote

local function read_command(cmd)
  local f = io.popen(cmd .. " 2>/dev/null")
  if not f then return nil end
  local out = f:read("a")
  f:close()
  return out
end

--- `git rev-parse --short HEAD` of the checkout holding `dir`, "+dirty" when tracked files differ;
-- outside a checkout (a copy of the tree sent to a GPU host) the environment's GPUREDUCE_REV, else
-- "unknown".
function M.git_revision(dir)
  local q = shell_quote(dir or ".")
  local rev = (read_command("git -C " .. q .. " rev-parse --short HEAD 2>/dev/null") or ""):match("^%s*(%x+)")
  if not rev then return os.getenv("GPUREDUCE_REV") or "unknown" end
  local status = read_command("git -C " .. q .. " status --porcelain --untracked-files=no") or ""
  return rev .. (status:match("%S") and "+dirty" or "")
end

--- The header fields for this process: device facts (nil on the CPU backend), versions, date. `tool`
-- names the script (default the sweep).
function M.build(gr, dir, tool)
  local dev = gr.device()
  local h = {
    tool = tool or "gpureduce experiments/sweep.lua",
    version = gr.version,
    backend = gr.backend(),
    device = dev and dev.name or "none (CPU backend, no CUDA device)",
    git_revision = M.git_revision(dir),
    date = os.date("!%Y-%m-%dT%H:%M:%SZ"),
  }
  if dev then
    h.sms, h.l2, h.cc, h.memory = dev.sms, dev.l2, dev.cc, dev.memory
    h.cuda_runtime, h.cuda_driver = dev.cuda_runtime, dev.cuda_driver
  end
  return h
end

--- One line for the top of printed output.
function M.describe(h)
  local where
  if h.backend == "cuda" then
    where = string.format("%s (%d SMs, L2 %s, cc %s), CUDA runtime %s, driver %s", h.device, h.sms,
      sizes.bytes(h.l2), h.cc, h.cuda_runtime, h.cuda_driver)
  else
    where = "the CPU backend (no CUDA device)"
  end
  return string.format("gpureduce %s on %s, rev %s, %s", h.version, where, h.git_revision, h.date)
end

return M
