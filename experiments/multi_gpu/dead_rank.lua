--- A rank that dies: `lua experiments/multi_gpu/dead_rank.lua [timeout = 5] [first | later | reduce | both |
-- all = both]` starts two ranks (one GPU each). Both join; rank 1 then exits (os.exit, no goodbye to NCCL) --
-- before the first all-reduce (`first`: NCCL still has to connect the ranks), or after one all-reduce has
-- connected them (`later`: the survivor's kernel waits for data that never comes), or after one c:reduce
-- of one value (`reduce`: the ranks have taken their mailboxes, and the survivor's c:reduce waits in its
-- mailbox kernel; or in NCCL where they did not). `both` is first and later, `all` the three. Rank 0
-- calls c:allreduce (c:reduce for `reduce`) with `timeout` seconds and must get an error naming the
-- collective -- its own timeout
-- ("allreduce did not complete ... within 5 s", the communicator aborted with ncclCommAbort) or NCCL's
-- report of the lost peer -- within the timeout and a few seconds, then find the communicator aborted and
-- exit normally. Each rank runs under `timeout` (coreutils), so that a hang ends as a failure, not as a
-- hung job. Prints one line per case; exits 1 when a case fails. Needs two GPUs and the module on LUA_CPATH.
local here = (arg and arg[0] or ""):match("^(.*)/[^/]*$") or "."
package.path = here .. "/?.lua;" .. package.path

local gr = require "gpureduce"
local ranks = require "ranks"

local rank = tonumber(os.getenv("GPUREDUCE_RANK") or "")
local timeout = tonumber(os.getenv("GPUREDUCE_TIMEOUT") or arg[1] or "5")
local when = os.getenv("GPUREDUCE_WHEN") or arg[2] or "both"
-- how long a rank may run in all before `timeout` kills it: joining, the wait, the abort, the exit
local LIMIT = math.floor(3 * timeout + 60)

if not rank then
  if not timeout or timeout <= 0 or not ({ first = 1, later = 1, reduce = 1, both = 1, all = 1 })[when] then
    io.stderr:write("usage: lua experiments/multi_gpu/dead_rank.lua [timeout > 0] [first | later | reduce | both | all]\n")
    os.exit(2)
  end
  if #gr.devices() < 2 then
    io.stderr:write(string.format("dead_rank: 2 ranks need 2 GPUs; this machine has %d device(s)\n", #gr.devices()))
    os.exit(1)
  end
  local failed = 0
  local cases = { both = { "first", "later" }, all = { "first", "later", "reduce" } }
  for _, case in ipairs(cases[when] or { when }) do
    local id = os.tmpname()
    os.remove(id)
    local outs, statuses = {}, {}
    local bad = ranks.run(2, function(r)
      return "timeout -k 5 " .. LIMIT .. " env " .. ranks.command(r, 2, { GPUREDUCE_ID = id, GPUREDUCE_TIMEOUT = timeout,
        GPUREDUCE_WHEN = case }, arg[-1] or "lua5.4", arg[0])
    end, function(r, out) outs[r] = out end)
    os.remove(id)
    for _, why in ipairs(bad) do statuses[tonumber(why:match("^rank (%d+)"))] = why end
    -- rank 0 must have exited 0 after a timely, clear error; rank 1 must have died (any status but 0)
    local line = outs[0]:match("survivor:[^\n]*") or ""
    local seconds = tonumber(line:match("error after ([%d.]+) s"))
    local problems = {}
    if statuses[0] then problems[#problems + 1] = statuses[0] .. (outs[0]:find("%S") and "" or " (no output)") end
    if not statuses[1] then problems[#problems + 1] = "rank 1 did not die (exit status 0)" end
    if not seconds then problems[#problems + 1] = "rank 0 reported no error" end
    if seconds and seconds > timeout + 10 then
      problems[#problems + 1] = string.format("the error came after %.1f s (timeout %g s)", seconds, timeout)
    end
    if case == "reduce" and not line:find("reduce", 1, true) then
      problems[#problems + 1] = "the error does not name c:reduce"
    elseif case ~= "reduce" and not line:find("allreduce", 1, true) and not line:find("ncclAllReduce", 1, true) then
      problems[#problems + 1] = "the error does not name the collective"
    end
    if not outs[0]:find("aborted after an earlier failure", 1, true) then
      problems[#problems + 1] = "a later call did not say the communicator was aborted"
    end
    if not outs[0]:find("survivor exits normally", 1, true) then problems[#problems + 1] = "rank 0 did not finish" end
    print(string.format("dead_rank %s: %s -- %s", case, #problems == 0 and "ok" or "FAILED: " .. table.concat(problems,
      "; "), line ~= "" and line or outs[0]:gsub("\n", " | ")))
    if #problems > 0 then failed = failed + 1 end
  end
  os.exit(failed > 0 and 1 or 0)
end

-- a rank
local device = rank + 1
local c = gr.comm { rank = rank, size = 2, id = os.getenv("GPUREDUCE_ID"), timeout = timeout, device = device }
local b = gr.buffer(1 << 20, "float32", { device = device }):fill(1)
if when == "later" then c:allreduce(b, "sum") end      -- the ranks are connected now
if when == "reduce" then c:reduce(b) end                -- and have decided how one value crosses them
if rank == 1 then
  -- first: a moment for rank 0 to finish joining (its last steps may still read from this rank)
  if when == "first" then os.execute("sleep 1") end
  io.stdout:flush()
  os.exit(3)              -- dies: no destroy, no finalize, the Lua state not closed
end
local t0 = gr.clock()
local ok, err
if when == "reduce" then ok, err = pcall(c.reduce, c, b) else ok, err = pcall(c.allreduce, c, b, "sum") end
local seconds = gr.clock() - t0
if ok then
  print("survivor: no error: the " .. (when == "reduce" and "c:reduce" or "all-reduce") .. " completed without rank 1")
else
  print(string.format("survivor: error after %.2f s: %s", seconds, tostring(err)))
end
-- the communicator is unusable now, and says so
local _, later = pcall(c.reduce, c, b)
print("survivor: then " .. tostring(later))
c:destroy()
print("survivor exits normally")
os.exit(0)
