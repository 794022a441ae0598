--- What the benchmarks share (experiments/bench.lua, types_bench.lua, dot_bench.lua): the GPU check, medians,
-- wall time per call from a Lua loop on gpureduce's monotonic clock, and the peers' times read back.
local M = {}

--- Exits with a message naming the script unless gr runs on a GPU (the benchmarks time device work).
function M.need_gpu(gr, script)
  if gr.backend() ~= "cuda" then
    io.stderr:write(script .. ": no CUDA device (backend is cpu): these benchmarks need a GPU\n")
    os.exit(1)
  end
end

--- The median of the numbers in t (sorts t: t[1] is then the minimum).
function M.median(t)
  table.sort(t)
  local k = #t
  return k % 2 == 1 and t[(k + 1) // 2] or 0.5 * (t[k // 2] + t[k // 2 + 1])
end

--- Wall time per call of f from a Lua loop, in us: 500 calls to warm up, then `batches` batches of 200
-- calls; the median and the minimum of the batches' means.
function M.per_call_us(gr, f, batches)
  for _ = 1, 500 do f() end
  local t = {}
  for i = 1, batches do
    local t0 = gr.clock()
    for _ = 1, 200 do f() end
    t[i] = (gr.clock() - t0) / 200 * 1e6
  end
  local med = M.median(t)
  return med, t[1]
end

--- The median wall time of whole calls of f, in ms: 5 untimed, then `reps` timed one by one.
function M.wall_ms(gr, f, reps)
  for _ = 1, 5 do f() end
  local t = {}
  for i = 1, reps do
    local t0 = gr.clock()
    f()
    t[i] = (gr.clock() - t0) * 1e3
  end
  return M.median(t)
end

--- The start of a GPU table script: exits unless gr runs on a GPU, prints the "# gpureduce ... on <GPU>"
-- header line, and returns the repetitions (BENCH_REPS, default 30) and n (2 to the power log2_var's value,
-- default 28).
function M.start(gr, script, log2_var)
  M.need_gpu(gr, script)
  local reps = tonumber(os.getenv("BENCH_REPS") or "") or 30
  local log2n = tonumber(os.getenv(log2_var) or "") or 28
  local dev = gr.device()
  print(string.format("# gpureduce %s on %s (%d SMs), CUDA runtime %s, driver %s; medians of %d reps after 5 warm-ups",
    gr.version, dev.name, dev.sms, dev.cuda_runtime, dev.cuda_driver, reps))
  return reps, 1 << log2n, log2n
end

--- A peer's times from the file `path` names (nil: none): lines "dtype op ms", or "dtype op - why" where the
-- peer has no such op; "#" lines are comments. Returns t[dtype][op] = ms (a number) or the reason (a string).
function M.peer_times(path)
  local t = {}
  local f = path and io.open(path)
  if not f then return t end
  for line in f:lines() do
    local d, o, rest = line:match("^(%S+) (%S+) (.*)$")
    if d and not line:find("^#") then
      t[d] = t[d] or {}
      t[d][o] = tonumber(rest) or rest:gsub("^%- ", "")
    end
  end
  f:close()
  return t
end

return M
