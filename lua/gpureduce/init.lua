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

--- A plain buffer on the first shard's device holding the sharded buffer s's elements (copies between
-- devices where the shards lie on others).
local function gathered(s)
  local parts = s:shards()
  local b = core.buffer(s.n, s:dtype(), { device = parts[1].device, where = parts[1].buffer:where() })
  for _, p in ipairs(parts) do
    if p.size > 0 then core.copy(b:slice(p.offset, p.size), p.buffer) end
  end
  return b
end

local pack = table.pack or function(...) return {n = select("#", ...), ...} end    -- 5.1: no table.pack

--- gr.reduce_by_key(keys, values, opts): sharded keys and values (of one length) are gathered onto the
-- first shard's device and reduced there, so the results are one GPU's, bit for bit, at every
-- determinism level; the group-by itself runs on that device.
function gr.reduce_by_key(keys, values, opts)
  local sk, sv = getmetatable(keys) == core._Sharded, getmetatable(values) == core._Sharded
  if not (sk or sv) then return core.reduce_by_key(keys, values, opts) end
  if not (sk and sv) then
    error(string.format("bad argument #%d to 'reduce_by_key' (sharded keys take sharded values and the other way "
      .. "round: gather the plain one's partner, or shard both)", sk and 2 or 1), 2)
  end
  if keys.n ~= values.n then     -- (s.n, not #s: Lua 5.1 has no __len for tables)
    error(string.format("bad argument #2 to 'reduce_by_key' (values: %d elements, keys %d (one length))", values.n,
      keys.n), 2)
  end
  local k, v = gathered(keys), gathered(values)
  local out = pack(pcall(core.reduce_by_key, k, v, opts))
  k:free()
  v:free()
  if not out[1] then error(out[2], 2) end
  return (table.unpack or unpack)(out, 2, out.n)
end

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
  r.count = b:size()      -- (not #b: a sharded buffer is a table, whose __len Lua 5.1 does not call)
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
