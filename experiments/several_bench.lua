--- Issue 24's several-results table: gr.reduce(b, {ops = {"sum", "min", "max", "count", "mean", "std"}}) and
-- gr.describe(b) of 2^28 float32 on the GPU, against one read of the buffer (gr.bench_read), the six single
-- calls one after the other, and PyTorch's six calls and var_mean + aminmax (TORCH_TIMES: the output of
-- experiments/peers/torch_several.py from the same run). Each result is checked first: bit for bit the
-- single call's. Times: wall time of whole synchronous calls (gr.clock; the value back in Lua), medians
-- of BENCH_REPS (default 30) after 5 warm-ups; the read ceiling and single sums also with device events.
local gr = require "gpureduce"
local here = (arg and arg[0] or ""):match("^(.*)/[^/]*$") or "."
package.path = here .. "/?.lua;" .. package.path
local timing = require "lab.timing"

local reps, n, log2n = timing.start(gr, "several_bench", "SEVERAL_LOG2N")
local torch = timing.peer_times(os.getenv("TORCH_TIMES"))

local function wall_ms(f) return timing.wall_ms(gr, f, reps) end

local b = gr.buffer(n, "float32"):random(7, -1, 1)
local six = { "sum", "min", "max", "count", "mean", "std" }
local fused = gr.reduce(b, { ops = six })
local failures = 0
for _, op in ipairs(six) do
  local alone = gr.reduce(b, { op = op })
  if not (alone == fused[op] or (alone ~= alone and fused[op] ~= fused[op])) then
    failures = failures + 1
    print(string.format("WRONG: %s fused %.17g, alone %.17g", op, fused[op], alone))
  end
end

local read = gr.bench_read(b, { reps = reps, warmup = 5 })
local one_read_ms = read.ms
local rows = {
  { "ops = {six} (one call)", wall_ms(function() return gr.reduce(b, { ops = six }) end) },
  { "gr.describe(b)", wall_ms(function() return gr.describe(b) end) },
  { "six single calls", wall_ms(function()
      for _, op in ipairs(six) do gr.reduce(b, { op = op }) end
    end) },
  { "gr.sum(b) alone", wall_ms(function() return gr.sum(b) end) },
}
print(string.format("\n## n = 2^%d float32: six statistics (wall ms of whole calls; read ceiling %.4f ms by events)",
  log2n, one_read_ms))
print(string.format("%-26s %9s %12s %14s", "case", "ms", "% of 1 read", "/ six calls"))
local six_ms = rows[3][2]
for _, r in ipairs(rows) do
  print(string.format("%-26s %9.4f %11.1f%% %14.3f", r[1], r[2], 100 * one_read_ms / r[2], r[2] / six_ms))
end
for _, c in ipairs({ "six_calls", "var_mean_aminmax_sum", "sum" }) do
  local tm = torch.float32 and torch.float32[c]
  if type(tm) == "number" then
    print(string.format("torch %-20s %9.4f ms   ops={six} / torch: %.3f", c, tm, rows[1][2] / tm))
  end
end
if failures > 0 then
  print(string.format("\n%d WRONG", failures))
  os.exit(1)
end
print("valid: every fused result is its single call's, bit for bit")
