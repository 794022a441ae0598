--- What the benchmarks share (experiments/bench.lua, experiments/types_bench.lua): the GPU check, medians and wall
-- time per call from a Lua loop, on gpureduce's monotonic clock.
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

return M
