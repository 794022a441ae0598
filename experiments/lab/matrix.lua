--- The sweep's configurations: variants x block sizes x finishing modes, crossed with dtypes x ops x
-- sizes. What a variant cannot run (an op or a dtype it does not take, a finish it lacks, a block outside
-- its range or not a power of two where it needs one) is skipped and counted, as are host variants above
-- --host-max.
local M = {}

local function has(list, x)
  for _, v in ipairs(list) do
    if v == x then return true end
  end
  return false
end

--- Host variants run on the CPU whatever the backend (they need no CUDA device).
function M.is_host(v) return not has(v.needs, "cuda") end

local function is_pow2(n) return n > 0 and n & (n - 1) == 0 end

--- The (block, finish) pairs a variant runs, and how many requested pairs it cannot.
function M.variant_configs(v, blocks, finishes)
  local out, skipped, seen = {}, 0, {}
  local fixed = v.block.min == v.block.max
  for _, b in ipairs(fixed and { v.block.default } or blocks) do
    if b == "default" then b = v.block.default end
    for _, f in ipairs(finishes) do
      if f == "default" or f == "auto" then f = v.default_finish end
      local key = b .. "/" .. f
      if seen[key] then
        -- "default" named the same pair as an explicit value: one run, nothing skipped
      elseif not has(v.finishes, f) or b < v.block.min or b > v.block.max
          or (has(v.needs, "power-of-two block") and not is_pow2(b)) then
        skipped = skipped + 1
      else
        out[#out + 1] = { variant = v, block = b, finish = f, fixed_block = fixed }
      end
      seen[key] = true
    end
  end
  return out, skipped
end

--- Whether variant v takes op over dtype (its registry row lists the ops and the dtypes it takes; a row
-- without a list, such as the operators' pseudo-variant, takes what it is given; dtype nil: any dtype).
function M.takes(v, op, dtype)
  return (v.ops == nil or has(v.ops, op)) and (dtype == nil or v.dtypes == nil or has(v.dtypes, dtype))
end

--- Groups of configurations sharing one buffer: {dtype=, op=, n=, configs={...}} in the order tables
-- are printed (dtype, op, n), and counts {configs=, unsupported=, host_capped=}.
-- `registry` is gr.variants(); `s` the settings from lab.cli.
function M.build(registry, s)
  local by_name = {}
  for _, v in ipairs(registry) do by_name[v.name] = v end
  local chosen = {}
  for _, name in ipairs(s.variants) do chosen[#chosen + 1] = by_name[name] end
  table.sort(chosen, function(a, b) return a.ordinal < b.ordinal end)

  local per_variant, unsupported = {}, 0
  for _, v in ipairs(chosen) do
    local list, skipped = M.variant_configs(v, s.blocks, s.finishes)
    per_variant[#per_variant + 1] = list
    unsupported = unsupported + skipped
  end

  local groups = {}
  local counts = { configs = 0, unsupported = 0, host_capped = 0 }
  for _, dtype in ipairs(s.dtypes) do
    for _, op in ipairs(s.ops) do
      for _, n in ipairs(s.sizes) do
        local g = { dtype = dtype, op = op, n = n, configs = {} }
        for i, list in ipairs(per_variant) do
          if not M.takes(chosen[i], op, dtype) then
            counts.unsupported = counts.unsupported + #list
          else
            for _, c in ipairs(list) do
              if M.is_host(c.variant) and n > s.host_max then
                counts.host_capped = counts.host_capped + 1
              else
                g.configs[#g.configs + 1] = c
              end
            end
          end
        end
        counts.configs = counts.configs + #g.configs
        counts.unsupported = counts.unsupported + unsupported
        if #g.configs > 0 then groups[#groups + 1] = g end
      end
    end
    -- user operators (--operators): one configuration each, the plan auto gives them, checked against
    -- the built-in op they stand for (`like`) on that op's data
    for _, u in ipairs(s.operators or {}) do
      for _, n in ipairs(s.sizes) do
        local g = { dtype = dtype, op = u.name, like = u.like, operator = u.operator, n = n,
                    configs = { { variant = M.OPERATOR, block = "default", finish = "auto", fixed_block = true } } }
        counts.configs = counts.configs + 1
        groups[#groups + 1] = g
      end
    end
  end
  return groups, counts
end

--- The pseudo-variant of a user operator's configurations: shown as "operator", run as auto.
M.OPERATOR = { name = "operator", option = "auto", ordinal = 0, needs = { "cuda" }, finishes = { "auto" },
               block = { min = 1, max = 1024, default = 0 } }

return M
