--- One rank of a job a launcher started: `gr.comm()` takes the rank, the size, the GPU (the local rank's)
-- and the rendezvous from the launcher's variables, then an all-reduce whose result is known is checked.
-- Prints one line; exits 1 when the result is wrong. launch.lua starts it as torchrun and mpirun would;
-- under the real launchers (the module on LUA_CPATH):
--
--   torchrun --nproc-per-node=2 --no-python lua5.4 experiments/multi_gpu/env_rank.lua
--   GPUREDUCE_COMM_ID=$PWD/job.id mpirun -np 2 -x GPUREDUCE_COMM_ID lua5.4 experiments/multi_gpu/env_rank.lua
--   GPUREDUCE_COMM_ID=$PWD/job.id srun --ntasks-per-node=2 --gpus-per-node=2 lua5.4 experiments/multi_gpu/env_rank.lua
--
-- GPUREDUCE_N: elements per rank (default 2^20).
local gr = require "gpureduce"

local n = math.tointeger(tonumber(os.getenv("GPUREDUCE_N") or "")) or 1 << 20
local launcher = os.getenv("RANK") and "torchrun" or os.getenv("OMPI_COMM_WORLD_RANK") and "mpirun"
  or os.getenv("SLURM_PROCID") and "Slurm" or "no launcher"

local c = gr.comm { timeout = 60 }
local rank, size, device = c:rank(), c:size(), c:device()

-- rank r holds r*n + 1 .. (r+1)*n; after the sum element i is size*i + n*size*(size-1)/2 on every rank
local b = gr.buffer(n, "int64", { device = device }):iota(rank * n + 1)
c:allreduce(b, "sum")
local shift = n * size * (size - 1) // 2
local first, last = b[1], b[n]
local ok = first == size + shift and last == size * n + shift
-- c:reduce: each rank's sum of the reduced buffer (the same everywhere), summed over the ranks
local whole = c:reduce(b)
ok = ok and whole == size * (size * (n * (n + 1) // 2) + n * shift)
c:destroy()

print(string.format("%s: rank %d of %d on device %d: %s (allreduce b[1] = %d, b[%d] = %d; reduce %d)", launcher, rank,
  size, device, ok and "ok" or "WRONG", first, n, last, whole))
os.exit(ok and 0 or 1)
