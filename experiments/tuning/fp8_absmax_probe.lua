-- The kernel behind issue 22's FP8 absmax rows, for a profiler: three absmax calls on 2^28 elements of each FP8
-- format (ncu --kernel-name regex:warp_shuffle --launch-skip 2 --launch-count 1 lua experiments/tuning/fp8_absmax_probe.lua)
local gr = require "gpureduce"
for _, d in ipairs({ "float8_e4m3", "float8_e5m2" }) do
  local b = gr.buffer(1 << 28, d):random(7, -1, 1)
  for _ = 1, 3 do gr.reduce(b, { op = "absmax" }) end
  b:free()
end
