--- Ill-conditioned float data for the gpu_to_gpu specs (determinism_spec, exact_gpu_spec):
--   data(kind, n, seed, f32) -> a list of n doubles (rounded to float32 when f32), of kind
--   "cancelling" (pairs that cancel exactly, and a small remainder), "offset" (a large mean, a small
--   spread: the variance cancels), "mixed" (1e-30 .. 1e30, both signs), "subnormal" (the format's
--   smallest values and a few normal ones) or "heavy" (heavy-tailed).
local R = require "support.fuzz_reference"

return function(kind, n, seed, f32)
  local rng, xs = R.rng(seed), {}
  local function round(x) return f32 and R.to_f32(x) or x end
  for i = 1, n do
    local u = rng:float()
    if kind == "cancelling" then
      xs[i] = i % 2 == 1 and round((u - 0.5) * 1e20) or -xs[i - 1]
      if i % 97 == 0 then xs[i] = round(u * 1e-3) end
    elseif kind == "offset" then
      xs[i] = round(1e8 + u)
    elseif kind == "mixed" then
      xs[i] = round((u < 0.5 and -1 or 1) * 10.0 ^ (60 * rng:float() - 30))
    elseif kind == "subnormal" then
      xs[i] = round((u - 0.5) * (f32 and 2.0 ^ -130 or 2.0 ^ -1060))
      if i % 50 == 0 then xs[i] = round(u * (f32 and 2.0 ^ -120 or 2.0 ^ -1000)) end
    else
      xs[i] = round((u - 0.5) / (rng:float() ^ 3 + 1e-12))
    end
  end
  return xs
end
