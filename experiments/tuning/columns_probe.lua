-- The column kernel's first passes for a profiler (issue 23): float32 rows and columns of a (2^14, 2^14) matrix, the
-- same for bfloat16, and float32 rows of 2 elements; one call each.
--   ncu --kernel-name regex:columns_kernel --section SpeedOfLight --section Occupancy --section LaunchStats \
--       lua experiments/tuning/columns_probe.lua
local gr = require "gpureduce"
for _, case in ipairs({ { "float32", 14, 2 }, { "float32", 14, 1 }, { "bfloat16", 14, 2 }, { "bfloat16", 14, 1 },
  { "float32", 27, 2 } }) do
  local dtype, lg, axis = case[1], case[2], case[3]
  local rows = 1 << lg
  local b = gr.buffer(1 << 28, dtype):random(1, -1, 1):view{ rows, (1 << 28) // rows }
  local r = gr.sum(b, { axis = axis })
  print(dtype, rows, axis, r[1])
  r:free()
  b:free()
end
