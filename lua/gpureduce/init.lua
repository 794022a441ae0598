--- gpureduce: reductions on the GPU from Lua.
--
-- The native part (gpureduce.core, lua/*.c) does the work; this facade adds what is better
-- written in Lua: printing plans and looking things up in the registry. Every name of the API (docs/api.md)
-- contract is a field of this table.
local core = require "gpureduce.core"

local gr = {}
for name, value in pairs(core) do
  if name:sub(1, 1) ~= "_" then gr[name] = value end     -- "_Sharded" and the like are the facade's
end

gr.sharded = require "gpureduce.sharded"

--- The registry entry of a variant by name, or nil.
function gr.variant(name)
  for _, v in ipairs(core.variants()) do
    if v.name == name then return v end
  end
  return nil
end

--- The names of the variants usable on this backend, in teaching order.
function gr.variant_names(opts)
  local all = opts and opts.all
  local list = core.variants()
  table.sort(list, function(a, b) return a.ordinal < b.ordinal end)
  local names = {}
  for _, v in ipairs(list) do
    if all or v.available then names[#names + 1] = v.name end
  end
  return names
end

--- count, sum, mean, std, min and max of b in one read of it (gr.reduce with opts.ops): a table keyed by
-- those names. count is the element count (#b); std's divisor is n - opts.ddof (default 0). The other
-- options are gr.reduce's (acc, determinism, stream, ...); each value is what its own call gives.
function gr.describe(b, opts)
  local o = {}
  for k, v in pairs(opts or {}) do
    if k == "op" or k == "ops" then
      error("bad argument #2 to 'describe' (opts." .. k .. ": describe reduces its own ops: count, sum, mean, " ..
            "std, min, max)", 2)
    end
    if k == "async" and v then
      error("bad argument #2 to 'describe' (opts.async: describe is synchronous (gr.reduce(b, {ops = ..., " ..
            "async = true}) returns a Pending))", 2)
    end
    o[k] = v
  end
  o.ops = { "sum", "mean", "std", "min", "max" }
  local r = core.reduce(b, o)
  r.count = #b
  return r
end

--- A plan (from gr.plan) as lines of text, like the multi-pass tutorial's output:
-- "Pass 1: 10000000 elements, 39063 blocks of 256 threads (device)".
function gr.format_plan(plan)
  local lines = {
    string.format("variant %s, finish %s, accumulator %s", plan.variant, plan.finish, plan.acc),
  }
  for i, p in ipairs(plan.passes) do
    if p.where == "host" then
      lines[#lines + 1] = string.format("Pass %d: %d %s %s on the CPU", i, p.elements,
        i == 1 and "elements" or p.dtype .. " partials", i == 1 and "reduced" or "finished")
    else
      lines[#lines + 1] = string.format("Pass %d: %d elements, %d blocks of %d threads (device)",
        i, p.elements, p.blocks, p.block)
    end
  end
  if plan.finish == "single" then
    lines[#lines + 1] = "The last block of pass 1 combines the partials in the same kernel."
  end
  return table.concat(lines, "\n")
end

return gr
