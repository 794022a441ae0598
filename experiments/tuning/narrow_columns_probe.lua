-- Every pass of a narrow column reduction, for a profiler (issue 23): a (2^28 / c, c) matrix of `dtype`
-- reduced along axis 1 (c columns of 2^28 / c rows: three passes of the column kernel for c <= 4), three
-- calls, so that --launch-skip 3 --launch-count 3 takes the second call's passes.
--   ncu --clock-control none -k regex:column --launch-skip 3 --launch-count 3 --section SpeedOfLight \
--       --section Occupancy --section LaunchStats lua experiments/tuning/narrow_columns_probe.lua [dtype] [c] [op]
local gr = require "gpureduce"
local dtype = arg[1] or "float32"
local cols = math.tointeger(tonumber(arg[2] or "2"))
local op = arg[3] or "sum"
local b = gr.buffer(1 << 28, dtype, { where = "device" }):random(1, -1, 1)
local v = b:view { (1 << 28) // cols, cols }
for _ = 1, 3 do gr.reduce(v, { op = op, axis = 1 }) end
print(dtype, cols, op, "done")
