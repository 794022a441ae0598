--[[
segments_spec.lua -- segmented reductions (opts.segment = m, opts.offsets = CSR boundaries), opts.out, and
gr.reduce_many, against the independent Lua reference of spec/support/fuzz_reference.lua (and
ops_reference.lua, which joins it): every segment's result is checked as a reduction of its own.

What runs
  Every op x every dtype x segment shapes chosen to reach each way the policy shares segments out on the
  GPU (one thread, a few lanes, a warp, a block, several blocks per segment) and the awkward cases: segments
  of 1 element, odd sizes whose starts are not 16-byte aligned, empty segments (first, middle, last,
  several in a row), one segment as the whole buffer, a slice of a larger buffer, very uneven offsets (one
  long segment among many tiny and empty ones: the uneven shape, whole blocks per segment). Two data sets per shape:
  values over the dtype's range, and small values with ties, NaN, +-inf and -0.0 placed in chosen segments.
  On the GPU the same cases run on device buffers (the segmented kernel) and on host buffers (the host
  path); a few huge segments (several blocks each) run on the GPU only, for a subset of ops (the Lua
  reference is slow over 2^18 elements).
  Empty segments: the op's identity (sum 0, prod 1, min the largest value, nanmin of floats NaN, ...);
  mean, var, std, nanmean give NaN; argmin/argmax give index 0; minmax gives (largest, smallest).
  Then: opts.out (results land in the given buffers, which are returned), the checks on segment, offsets
  and out (clear errors naming the option, nothing written), reduce_many against the reference (mixed
  dtypes and sizes, empty buffers, a buffer large enough to be reduced on its own), and the graph cache of
  repeated small reductions (refilled, freed and reallocated, sliced buffers give fresh results).
]]
local gr = require "gpureduce"
local H = require("support.helpers").bind(it, function(reason) pending(reason) end)
local R = require "support.fuzz_reference"

local nan, inf = 0 / 0, math.huge
local TWO = { argmin = true, argmax = true, minmax = true }
local NAN_WHEN_EMPTY = { mean = true, var = true, std = true, nanmean = true }

local function fnv(s)
  local h = 0xcbf29ce484222325
  for i = 1, #s do h = (h ~ s:byte(i)) * 0x100000001b3 end
  return h
end

---------------------------------------------------------------------------------------------------
-- data

local function int_range(dtype)
  local d = R.DTYPES[dtype]
  return d.min, d.max
end

--- A value of the dtype from the full range (floats: a spread of magnitudes that sums without overflow).
local function wide_value(rng, dtype)
  if R.is_float(dtype) then
    local x = (rng:float() * 2 - 1) * 2.0 ^ rng:range(-20, 20)
    if R.DTYPES[dtype].small then x = x * 2.0 ^ -8 end     -- within float16's range
    if R.DTYPES[dtype].small and R.DTYPES[dtype].fmt.p <= 4 then x = x * 2.0 ^ -4 end   -- and FP8's
    return R.to_dtype(dtype, x)
  end
  return rng:int(dtype)
end

--- Small values (ties for argmin/argmax), with the specials of the dtype at chosen places.
local function tricky_values(rng, dtype, n, v)
  local lo, hi = int_range(dtype)
  for i = 1, n do
    local x = rng:range(0, 6)
    if R.is_float(dtype) then
      v[i] = (x - 3) * 0.5
    elseif R.DTYPES[dtype].kind == "uint" then
      v[i] = x
    else
      v[i] = x - 3
    end
  end
  if n == 0 then return end
  local spots = { 1, math.max(1, n // 3), math.max(1, n // 2), n }
  if R.is_float(dtype) then
    v[spots[1]] = -0.0
    v[spots[2]] = nan
    -- (float8_e4m3 has no infinity: its largest values instead)
    local big = R.DTYPES[dtype].small and R.DTYPES[dtype].fmt.no_inf and R.DTYPES[dtype].fmt.max or inf
    v[spots[3]] = big
    v[spots[4]] = -big
    if n > 8 then v[n - 3] = nan end
  else
    v[spots[2]] = lo
    v[spots[3]] = hi
    v[spots[4]] = lo
  end
end

local function make_values(dtype, n, set, seed)
  local rng = R.rng(fnv(table.concat({ dtype, n, set, seed or "" }, ":")))
  local v = {}
  if set == "wide" then
    for i = 1, n do v[i] = wide_value(rng, dtype) end
  else
    tricky_values(rng, dtype, n, v)
  end
  return R.boolify(dtype, v)          -- bool: the values that are not 0 as 1
end

---------------------------------------------------------------------------------------------------
-- shapes: a buffer size and either a segment size or the CSR boundaries

local function ragged(seed, k, lengths)
  local rng = R.rng(seed)
  local off = { 0 }
  for s = 1, k do off[s + 1] = off[s] + rng:pick(lengths) end
  return off
end

-- Very uneven offsets: one long segment (after the first third) among many of 0 to 3 elements, a fifth of
-- them empty, an empty one first and last. The longest is far over 16 times the mean and over 8 KiB in every
-- dtype, so on the GPU the check of the offsets, which measures the longest segment, gives the launch the
-- uneven shape (engine/core/policy.c, gr_policy_uneven_segments: 1024-thread blocks per segment rather than
-- lanes sized by the mean; in 8-byte types the huge one's 2 MiB and more split over two blocks).
local function uneven_offsets(seed, long, tiny)
  local rng = R.rng(seed)
  local off = { 0, 0 }
  for s = 1, tiny do
    if s == tiny // 3 then off[#off + 1] = off[#off] + long end
    off[#off + 1] = off[#off] + rng:pick({ 0, 1, 1, 2, 3 })
  end
  off[#off + 1] = off[#off]
  return off
end
local UNEVEN = { name = "very uneven offsets (one segment of 9000 among 1500 of 0 to 3)",
  offsets = uneven_offsets(11, 9000, 1500) }
local UNEVEN_HUGE = { name = "very uneven offsets (one segment of 2^18 + 3 among 600 of 0 to 3)",
  offsets = uneven_offsets(12, (1 << 18) + 3, 600) }

local SHAPES = {
  { name = "segments of 1", n = 37, segment = 1 },
  { name = "segments of 3 (unaligned starts)", n = 3 * 41, segment = 3 },
  { name = "segments of 8", n = 8 * 50, segment = 8 },
  { name = "segments of 33", n = 33 * 20, segment = 33 },
  { name = "segments of 256", n = 256 * 9, segment = 256 },
  { name = "segments of 1000", n = 4000, segment = 1000 },
  { name = "segments of 5001 (a block each)", n = 5001 * 3, segment = 5001 },
  { name = "2 segments of 4099 (parts of a segment not a multiple of 16 bytes)", n = 4099 * 2, segment = 4099 },
  { name = "one segment, the whole buffer", n = 777, segment = 777 },
  { name = "offsets with empty segments first, between and last", offsets = { 0, 0, 1, 1, 1, 5, 38, 38, 300, 1333, 1333 } },
  { name = "ragged offsets", offsets = ragged(7, 60, { 0, 1, 2, 3, 7, 16, 31, 64, 100, 513, 2000 }) },
  { name = "offsets: one segment", offsets = { 0, 100 } },
  { name = "offsets: no segment", offsets = { 0 } },
  UNEVEN,
}
for _, s in ipairs(SHAPES) do
  if s.offsets then s.n = s.offsets[#s.offsets] end
end

-- GPU only: several blocks per segment, blocks of 512 and 1024 threads (the policy sizes them to fill an
-- H100 or H200 in one wave), and a skewed mix, on a few ops whose reference is quick enough
local HUGE_SHAPES = {
  { name = "4 segments of 65536 (several 1024-thread blocks each)", n = 4 * 65536, segment = 65536 },
  { name = "200 segments of 2100 (a 512-thread block each where 4 or 8 bytes)", n = 200 * 2100, segment = 2100 },
  { name = "huge and tiny segments", offsets = { 0, 3, 3, 70001, 70002, 200000, 262147 } },
  UNEVEN_HUGE,
}
for _, s in ipairs(HUGE_SHAPES) do
  if s.offsets then s.n = s.offsets[#s.offsets] end
end
local HUGE_OPS = { "sum", "min", "and", "count", "mean", "var", "argmin", "argmax", "minmax", "norm", "nanmax",
  "absmax", "asum" }
local HUGE_DTYPES = { "float32", "float64", "int8", "int64" }

local function segment_bounds(shape)
  local b = {}
  if shape.segment then
    for s = 0, shape.n // shape.segment - 1 do b[#b + 1] = { s * shape.segment, (s + 1) * shape.segment } end
  else
    for s = 1, #shape.offsets - 1 do b[#b + 1] = { shape.offsets[s], shape.offsets[s + 1] } end
  end
  return b
end

local function offsets_buffer(list, where)
  local o = gr.buffer(#list, "int64", where and { where = where } or nil)
  o:set(list)
  return o
end

---------------------------------------------------------------------------------------------------
-- checking one segment

local function largest(dtype) local _, hi = int_range(dtype) return hi end
local function smallest(dtype) local lo = int_range(dtype) return lo end

--- The check of an empty segment's result(s): true, or false and why.
local function check_empty(op, dtype, got, got2)
  local isf = R.is_float(dtype)
  -- the largest value of a float format: its infinity, or float8_e4m3's 448 (it has none)
  local inf = isf and R.DTYPES[dtype].fmt.no_inf and R.DTYPES[dtype].fmt.max or inf
  if R.DTYPES[dtype].bool and op ~= "and" and op ~= "or" then     -- bool results as the numbers 0 and 1
    if type(got) == "boolean" then got = got and 1 or 0 end
    if type(got2) == "boolean" then got2 = got2 and 1 or 0 end
  end
  if NAN_WHEN_EMPTY[op] then
    return got ~= got, "expected NaN"
  elseif op == "argmin" or op == "argmax" then
    return got2 == 0, "expected index 0"
  elseif op == "minmax" then
    local want1, want2 = isf and inf or largest(dtype), isf and -inf or smallest(dtype)
    return got == want1 and got2 == want2, "expected the largest and the smallest value"
  elseif op == "min" or op == "max" or op == "nanmin" or op == "nanmax" then
    if isf and (op == "nanmin" or op == "nanmax") then return got ~= got, "expected NaN (no value that is not NaN)" end
    local low = op == "min" or op == "nanmin"
    local want = isf and (low and inf or -inf) or (low and largest(dtype) or smallest(dtype))
    return got == want, "expected " .. tostring(want)
  elseif op == "prod" then
    return got == 1, "expected 1"
  elseif op == "and" then
    return got == true, "expected true"
  elseif op == "or" then
    return got == false, "expected false"
  elseif (op == "absmax" or op == "asum") and got == 0 and math.type(got) == "float" then
    return 1 / got > 0, "expected +0.0 (an absolute value), got -0.0"
  end
  return got == 0, "expected 0"
end

local function element(buf, s, op)
  local v = buf[s]
  if op == "and" or op == "or" then return v ~= 0 end
  return v
end

--- Runs one segmented reduction and checks every segment; returns a list of failure texts.
local function run_case(b, values, shape, op, dtype, opts_extra, label)
  local opts = { op = op }
  for k, v in pairs(opts_extra or {}) do opts[k] = v end
  local offsets
  if shape.segment then
    opts.segment = shape.segment
  else
    offsets = offsets_buffer(shape.offsets, opts.where)
    opts.offsets = offsets
  end
  opts.where = nil
  local info = { dtype = dtype, acc = opts.acc, ddof = opts.ddof }
  local before = b:tobytes()
  local ok, r1, r2 = pcall(gr.reduce, b, opts)
  local failures = {}
  if not ok then return { label .. ": raised " .. tostring(r1) } end
  local bounds = segment_bounds(shape)
  if #r1 ~= #bounds then return { label .. string.format(": %d results for %d segments", #r1, #bounds) } end
  if TWO[op] and (not r2 or #r2 ~= #bounds) then return { label .. ": the second result buffer is missing" } end
  if b:tobytes() ~= before then failures[#failures + 1] = label .. ": the input changed" end
  for s, lh in ipairs(bounds) do
    local seg = table.move(values, lh[1] + 1, lh[2], 1, {})
    local got, got2 = element(r1, s, op), r2 and r2[s]
    local good, why
    if #seg == 0 then
      good, why = check_empty(op, dtype, got, got2)
    else
      good, why = R.check(op, true, got, R.expect(op, seg, info), got2)
    end
    if not good then
      failures[#failures + 1] = string.format("%s: segment %d of %d ([%d, %d)): %s; got %s%s (first values: %s)",
        label, s, #bounds, lh[1], lh[2], why or "wrong", tostring(got), got2 ~= nil and (", " .. tostring(got2)) or "",
        table.concat({ table.unpack(seg, 1, math.min(6, #seg)) }, " ", 1, math.min(6, #seg)))
      if #failures > 6 then break end
    end
  end
  r1:free()
  if r2 then r2:free() end
  if offsets then offsets:free() end
  return failures
end

local function report(failures)
  if #failures > 0 then
    error(string.format("%d failure(s):\n  %s", #failures, table.concat(failures, "\n  ", 1, math.min(#failures, 12))), 0)
  end
end

--- Where the cases run: device and host buffers with a GPU, the CPU backend's buffers without.
local PLACES = H.has_gpu and { "device", "host" } or { "default" }

local function new_buffer(n, dtype, where)
  if where == "default" then return gr.buffer(n, dtype) end
  return gr.buffer(n, dtype, { where = where })
end

local function extra_options(op, dtype, shape_index)
  local list = { {} }
  if (op == "var" or op == "std") and shape_index % 2 == 0 then list[#list + 1] = { ddof = 1 } end
  if dtype == "float32" and (op == "sum" or op == "mean" or op == "var" or op == "norm" or op == "asum")
      and shape_index % 3 == 0 then
    list[#list + 1] = { acc = "float64" }
  end
  return list
end

local function format_opts(o)
  local parts = {}
  for k, v in pairs(o) do parts[#parts + 1] = k .. "=" .. tostring(v) end
  table.sort(parts)
  return #parts > 0 and (" {" .. table.concat(parts, ", ") .. "}") or ""
end

describe("segmented reductions", function()
  for _, where in ipairs(PLACES) do
    for _, dtype in ipairs(gr.dtypes()) do
      it(string.format("every op on %s %s buffers, every shape", dtype, where), function()
        local failures = {}
        for si, shape in ipairs(SHAPES) do
          for _, set in ipairs({ "wide", "tricky" }) do
            local values = make_values(dtype, shape.n, set, shape.name)
            local b = new_buffer(shape.n, dtype, where)
            if shape.n > 0 then b:set(values) end
            for _, op in ipairs(gr.ops()) do
              for _, extra in ipairs(extra_options(op, dtype, si)) do
                local label = string.format("%s %s %s, %s%s", op, dtype, set, shape.name, format_opts(extra))
                for _, f in ipairs(run_case(b, values, shape, op, dtype, extra, label)) do failures[#failures + 1] = f end
              end
            end
            b:free()
          end
        end
        report(failures)
      end)
    end
  end

  H.gpu_it("a slice of a larger device buffer, segments that start off its 16-byte grid", function()
    local failures = {}
    for _, dtype in ipairs(gr.dtypes()) do
      local values = make_values(dtype, 1000, "tricky", "slice")
      -- the parent's elements outside the view hold a value the data does not (7: the tricky values are
      -- small, -3 to 6, besides the dtype's limits and specials), so a read past either end shows in the
      -- results. bool holds only 0 and 1: true, which the sums and counts see as an extra 1, and which
      -- differs from the view's last element (false), so a load shifted by an element shows too
      local parent = gr.buffer(1003, dtype):fill(R.DTYPES[dtype].bool and true or 7)
      parent:set(values, 2)
      local view = parent:slice(2, 1000)
      for _, op in ipairs(gr.ops()) do
        for _, shape in ipairs({ { name = "segments of 10", n = 1000, segment = 10 },
                                 { name = "one segment", n = 1000, segment = 1000 } }) do
          local label = string.format("%s %s slice, %s", op, dtype, shape.name)
          for _, f in ipairs(run_case(view, values, shape, op, dtype, {}, label)) do failures[#failures + 1] = f end
        end
      end
      view:free()
      parent:free()
    end
    report(failures)
  end)

  -- docs/api.md: var, std, norm and mean of integers of up to 32 bits are formed once from exact integer
  -- sums, so the device's results (the segmented kernel) must equal the host's (a host buffer, and the
  -- spanning segments of sharded buffers) bit for bit. Small values and short segments are where two
  -- roundings of the last step differ from one fused one.
  H.gpu_it("integer var, std, norm and mean: the device's bits equal the host's", function()
    local bounds = { 0 }
    for s = 1, 299 do bounds[#bounds + 1] = bounds[#bounds] + (s * 7) % 5 end
    for _, dtype in ipairs({ "int8", "uint8", "int32", "uint32" }) do
      for _, hi in ipairs({ 1, 3, 100 }) do
        local d = gr.buffer(bounds[#bounds], dtype):random(hi, 0, hi)
        local h = gr.buffer(d:totable(), dtype, { where = "host" })
        local od = gr.buffer(bounds, "int64")
        local oh = gr.buffer(bounds, "int64", { where = "host" })
        for _, op in ipairs({ "var", "std", "norm", "mean" }) do
          for _, ddof in ipairs({ 0, 1 }) do
            local got = gr.reduce(d, { op = op, offsets = od, ddof = ddof }):totable()
            local want = gr.reduce(h, { op = op, offsets = oh, ddof = ddof }):totable()
            for s = 1, #want do
              local g, w = got[s], want[s]
              assert(g == w or (g ~= g and w ~= w), string.format("%s [0,%d] %s ddof %d segment %d: device %a, host %a",
                dtype, hi, op, ddof, s, g, w))
            end
          end
        end
      end
    end
  end)

  for _, shape in ipairs(HUGE_SHAPES) do
    H.gpu_it("huge segments on the device: " .. shape.name, function()
      local failures = {}
      for _, dtype in ipairs(HUGE_DTYPES) do
        local values = make_values(dtype, shape.n, "tricky", shape.name)
        local b = gr.buffer(shape.n, dtype)
        b:set(values)
        for _, op in ipairs(HUGE_OPS) do
          local label = string.format("%s %s, %s", op, dtype, shape.name)
          for _, f in ipairs(run_case(b, values, shape, op, dtype, {}, label)) do failures[#failures + 1] = f end
        end
        b:free()
      end
      report(failures)
    end)
  end

  it("segments of 2^18 int8 elements, argmin and sum (several blocks per segment for 1-byte data)", function()
    local n, m = 4 * 262144, 262144
    local values = make_values("int8", n, "wide", "int8 huge")
    values[m + 5] = -128
    values[m + 70000] = -128
    local b = gr.buffer(n, "int8")
    b:set(values)
    local shape = { name = "4 x 2^18", n = n, segment = m }
    local failures = {}
    for _, op in ipairs({ "sum", "argmin", "argmax", "count" }) do
      for _, f in ipairs(run_case(b, values, shape, op, "int8", {}, op .. " int8 4 x 2^18")) do failures[#failures + 1] = f end
    end
    b:free()
    report(failures)
  end)
end)

---------------------------------------------------------------------------------------------------

describe("segmented reductions: opts.out", function()
  it("writes into the given buffer and returns it", function()
    local b = gr.buffer(12, "int32"):set({ 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12 })
    local out = gr.buffer(3, "int64"):fill(-5)
    local r = gr.reduce(b, { op = "sum", segment = 4, out = out })
    assert.are.equal(out, r)
    assert.are.same({ 10, 26, 42 }, out:totable())
  end)

  it("two buffers for argmin, argmax and minmax, returned in order", function()
    local b = gr.buffer(6, "float64"):set({ 3, 1, 1, -2, 5, -2 })
    local v, i = gr.buffer(2, "float64"), gr.buffer(2, "int64")
    local rv, ri = gr.reduce(b, { op = "argmin", segment = 3, out = { v, i } })
    assert.are.equal(v, rv)
    assert.are.equal(i, ri)
    assert.are.same({ 1, -2 }, v:totable())
    assert.are.same({ 2, 1 }, i:totable())
    local lo, hi = gr.buffer(2, "float64"), gr.buffer(2, "float64")
    gr.reduce(b, { op = "minmax", segment = 3, out = { lo, hi } })
    assert.are.same({ 1, -2 }, lo:totable())
    assert.are.same({ 3, 5 }, hi:totable())
  end)

  it("refuses a buffer of the wrong size, dtype or count, or one that shares memory with the input", function()
    local b = gr.buffer(8, "float32"):fill(1)
    local cases = {
      { { op = "sum", segment = 2, out = gr.buffer(3, "float32") }, "out.*4 elements of float32" },
      { { op = "sum", segment = 2, out = gr.buffer(4, "float64") }, "out.*4 elements of float32" },
      { { op = "count", segment = 2, out = gr.buffer(4, "float32") }, "out.*int64" },
      { { op = "argmin", segment = 2, out = gr.buffer(4, "float32") }, "two results" },
      { { op = "argmin", segment = 2, out = { gr.buffer(4, "float32") } }, "out" },
      { { op = "sum", segment = 2, out = b:slice(1, 4) }, "out.*shares memory with the input" },
      { { op = "sum", segment = 2, out = 5 }, "opts.out: expected" },
      { { op = "sum", segment = 2, out = { gr.buffer(4, "float32"), gr.buffer(4, "float32") } }, "sum has 1 result" },
      { { op = "sum", out = gr.buffer(1, "float32") }, "opts.out goes with opts.segment, opts.offsets or opts.axis" },
    }
    local before = b:tobytes()
    for _, c in ipairs(cases) do
      local ok, err = pcall(gr.reduce, b, c[1])
      assert.is_false(ok)
      assert.matches(c[2], tostring(err))
    end
    local v = gr.buffer(4, "float32")
    local ok, err = pcall(gr.reduce, b, { op = "minmax", segment = 2, out = { v, v } })
    assert.is_false(ok)
    assert.matches("out2.*shares memory with the first result", err)
    assert.are.equal(before, b:tobytes())
  end)
end)

describe("segmented reductions: bad segments and offsets", function()
  local function refuses(b, opts, pattern)
    opts.op = opts.op or "sum"
    local ok, err = pcall(gr.reduce, b, opts)
    assert.is_false(ok, "accepted " .. format_opts(opts))
    assert.matches(pattern, tostring(err))
  end

  it("refuses a segment size that does not divide the buffer, zero, negative or not an integer", function()
    local b = gr.buffer(10, "int8"):fill(1)
    refuses(b, { segment = 3 }, "segment.*3 does not divide the buffer's size 10")
    refuses(b, { segment = 0 }, "opts.segment")
    refuses(b, { segment = -2 }, "opts.segment")
    refuses(b, { segment = 2.5 }, "opts.segment")
    refuses(b, { segment = "2" }, "opts.segment")
  end)

  it("refuses segment and offsets together, and with async, streamed, variant, block or finish", function()
    local b = gr.buffer(10, "int8"):fill(1)
    local o = offsets_buffer({ 0, 10 })
    refuses(b, { segment = 5, offsets = o }, "give one")
    refuses(b, { segment = 5, async = true }, "opts.async")
    refuses(b, { segment = 5, streamed = true }, "opts.streamed")
    refuses(b, { segment = 5, variant = "cpu" }, "variant")
    refuses(b, { segment = 5, block = 128 }, "block")
    refuses(b, { segment = 5, finish = "single" }, "finish")
    refuses(b, { segment = 5, stream = gr.stream() }, "opts.stream: segmented reductions")
    local ok, err = pcall(gr.plan, b, { segment = 5 })
    assert.is_false(ok)
    assert.matches("gr.plan shows the passes of a whole%-buffer reduction", err)
  end)

  for _, where in ipairs(PLACES) do
    it("refuses offsets that are not int64, empty, negative, decreasing or past the end (" .. where .. " data)", function()
      local b = new_buffer(10, "float32", where):fill(1)
      local o32 = gr.buffer(2, "int32"):set({ 0, 10 })
      refuses(b, { offsets = o32 }, "offsets.*int64 buffer %(got int32%)")
      refuses(b, { offsets = gr.buffer(0, "int64") }, "offsets.*at least one")
      refuses(b, { offsets = offsets_buffer({ -1, 10 }) }, "offsets.*boundary 1 %(%-1%) is negative")
      refuses(b, { offsets = offsets_buffer({ 0, 6, 5, 10 }) }, "offsets.*boundary 3 %(5%) is below the one before it")
      refuses(b, { offsets = offsets_buffer({ 0, 11 }) }, "offsets.*boundary 2 %(11%) is past the end")
      refuses(b, { offsets = offsets_buffer({ 0, 2, 1, 12 }) }, "boundary 3")     -- the first fault is named
      refuses(b, { offsets = "x" }, "opts.offsets: expected a gpureduce.Buffer")
      local out = new_buffer(2, "float32", where):fill(9)
      refuses(b, { offsets = offsets_buffer({ 0, 11, 10 }), out = out }, "offsets")
      assert.are.same({ 9, 9 }, out:totable())               -- nothing written
    end)
  end

  H.gpu_it("offsets in device memory or pinned host memory, for device data", function()
    local b = gr.buffer(6, "int32"):set({ 1, 2, 3, 4, 5, 6 })
    for _, where in ipairs({ "device", "host" }) do
      local r = gr.reduce(b, { op = "sum", offsets = offsets_buffer({ 0, 1, 1, 6 }, where) })
      assert.are.same({ 1, 0, 20 }, r:totable())
    end
  end)

  it("leaves the result on the input's side and names the result dtypes", function()
    local b = gr.buffer(6, "uint8"):set({ 1, 2, 3, 4, 5, 255 })
    local r = gr.reduce(b, { op = "sum", segment = 3 })
    assert.are.equal("uint64", r:dtype())
    assert.are.equal(b:where(), r:where())
    assert.are.same({ 6, 264 }, r:totable())
    local m = gr.reduce(b, { op = "mean", segment = 3 })
    assert.are.equal("float64", m:dtype())
    local v, i = gr.reduce(b, { op = "argmax", segment = 2 })
    assert.are.equal("uint8", v:dtype())
    assert.are.equal("int64", i:dtype())
    assert.are.same({ 2, 4, 255 }, v:totable())
    assert.are.same({ 2, 2, 2 }, i:totable())
  end)
end)

---------------------------------------------------------------------------------------------------

describe("gr.reduce_many", function()
  local function many_case(where, op, extra)
    local sizes = { 0, 1, 5, 33, 1000, 4097, 0, 70000 }
    local bufs, vals, dts = {}, {}, {}
    local k = 0
    for _, dtype in ipairs(gr.dtypes()) do
      for j, n in ipairs(sizes) do
        if (j + #dtype) % 3 ~= 0 or n == 0 then
          k = k + 1
          local v = make_values(dtype, n, j % 2 == 0 and "tricky" or "wide", "many" .. k)
          local b = new_buffer(n, dtype, where)
          if n > 0 then b:set(v) end
          bufs[k], vals[k], dts[k] = b, v, dtype
        end
      end
    end
    return bufs, vals, dts
  end

  for _, where in ipairs(PLACES) do
    it("matches the reference for every op over mixed dtypes and sizes (" .. where .. ")", function()
      local failures = {}
      local bufs, vals, dts = many_case(where)
      for _, op in ipairs(gr.ops()) do
        local has_empty_error = R.expect(op, {}, { dtype = "float64" }).empty_error
        local use, uvals, udts = {}, {}, {}
        for i, b in ipairs(bufs) do
          if not (has_empty_error and #b == 0) then
            use[#use + 1], uvals[#use + 1], udts[#use + 1] = b, vals[i], dts[i]
          end
        end
        local ok, res = pcall(gr.reduce_many, use, { op = op })
        if not ok then
          failures[#failures + 1] = op .. ": raised " .. tostring(res)
        else
          for i = 1, #use do
            local got, got2 = res[i], nil
            if TWO[op] then got, got2 = res[i][1], res[i][2] end
            local good, why = R.check(op, true, got, R.expect(op, uvals[i], { dtype = udts[i] }), got2)
            if not good then
              failures[#failures + 1] = string.format("%s: buffer %d (%d %s): %s; got %s %s", op, i, #use[i], udts[i],
                why, tostring(got), tostring(got2))
            end
          end
        end
      end
      report(failures)
    end)
  end

  it("raises for an empty buffer where the op has no identity, naming the buffer", function()
    local ok, err = pcall(gr.reduce_many, { gr.buffer(3, "int8"):fill(1), gr.buffer(0, "int8") }, { op = "mean" })
    assert.is_false(ok)
    assert.matches("mean of an empty buffer.*buffer 2", err)
  end)

  it("refuses what is not a list of buffers and options that do not apply", function()
    local b = gr.buffer(3, "int8"):fill(1)
    assert.has_error(function() gr.reduce_many(b) end)
    local ok, err = pcall(gr.reduce_many, { b, 5 })
    assert.is_false(ok)
    assert.matches("element 2: expected a gpureduce.Buffer", err)
    ok, err = pcall(gr.reduce_many, { b }, { segment = 1 })
    assert.is_false(ok)
    assert.matches("reduce_many takes", err)
    assert.are.same({}, gr.reduce_many({}, { op = "sum" }))
    assert.are.same({ 3, 3 }, gr.reduce_many({ b, b }, { op = "sum", threshold = 2 }))
  end)

  H.gpu_it("a buffer of more than a few MiB is reduced on its own, beside small ones", function()
    local big = gr.buffer(3000000, "float32"):fill(0.5)
    local small = gr.buffer(10, "float32"):fill(2)
    local res = gr.reduce_many({ small, big, small }, { op = "sum" })
    assert.are.same({ 20, 1500000, 20 }, res)
    local arg = gr.reduce_many({ big, small }, { op = "argmax" })
    assert.are.same({ { 0.5, 1 }, { 2, 1 } }, arg)
  end)
end)

---------------------------------------------------------------------------------------------------

describe("repeated small reductions (the graph cache)", function()
  H.gpu_it("a refilled buffer gives the new values", function()
    local b = gr.buffer(4096, "float32"):fill(1)
    for round = 1, 6 do
      for _ = 1, 3 do assert.are.equal(4096 * round, gr.sum(b)) end
      b:fill(round + 1)
    end
    b:set({ 5 }, 17)
    assert.are.equal(4096 * 7 - 7 + 5, gr.sum(b))
    assert.are.equal(5, gr.min(b))
  end)

  H.gpu_it("a freed buffer's memory reused by a new buffer, and slices, give their own values", function()
    for round = 1, 5 do
      local b = gr.buffer(8192, "int32"):fill(round)
      for _ = 1, 3 do assert.are.equal(8192 * round, gr.sum(b)) end
      local s = b:slice(2, 8190)
      for _ = 1, 3 do assert.are.equal(8190 * round, gr.sum(s)) end
      s:free()
      b:free()
      collectgarbage()
    end
    gr.pool_trim()
    local b = gr.buffer(8192, "int32"):fill(9)
    for _ = 1, 3 do assert.are.equal(8192 * 9, gr.sum(b)) end
  end)

  H.gpu_it("ops, accumulators and variants on one buffer do not share a cached launch", function()
    local b = gr.buffer(1000, "float32")
    local v = {}
    for i = 1, 1000 do v[i] = (i % 7) - 3.25 end
    b:set(v)
    for _ = 1, 3 do
      assert.are.equal(-3.25, gr.min(b))
      assert.are.equal(2.75, gr.max(b))
      local s32, s64 = gr.sum(b), gr.sum(b, { acc = "float64" })
      assert.is_true(math.abs(s32 - s64) < 1e-3)
      local lo, hi = gr.minmax(b)
      assert.are.same({ -3.25, 2.75 }, { lo, hi })
      assert.are.equal(1000, gr.count(b))
      local p = gr.sum(b, { async = true })
      assert.are.equal(s32, p:wait())
    end
  end)
end)
