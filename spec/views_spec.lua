--[[
views_spec.lua -- N-d views (issue 23, first part): b:view, shape/ndim/strides, transpose, permute,
narrow, contiguous, and every buffer method on views, strided ones included.

Generated over dtypes x shapes (1-D to 4-D, with axes of length 1 and empty axes) x view ops x sides
(device and host buffers of the current backend), against a reference written here on plain Lua tables:
a view is {data, offset, shape, strides} and element (i1, ..., ik) is data[offset + sum (ij - 1) *
strides[j] + 1]. Checked on each view: the layout, nested totable, tobytes, get, fill, set, iota, random,
gr.copy both ways (also converting), astype, contiguous, and whole-buffer sums. Then whole-view
reductions of strided views that fill their memory (read as it lies, no copy) beside their compact
copies, and of views that do not (their compact copy). Then refusals with their messages, and a view that outlives its dropped
parent. The #gpu cases compare a device view's results with the same view of a host buffer.
]]
local gr = require "gpureduce"
local H = require("support.helpers").bind(it, function(reason) pending(reason) end)

-- ---- the reference ----------------------------------------------------------------------------------

local function product(shape)
  local n = 1
  for _, len in ipairs(shape) do n = n * len end
  return n
end

local function ref_compact(data, shape)
  local strides, s = {}, 1
  for d = #shape, 1, -1 do
    strides[d] = s
    s = s * math.max(shape[d], 1)
  end
  return {data = data, offset = 0, shape = shape, strides = strides}
end

-- the position in data (1-based) of the view's row-major element i (1-based)
local function ref_pos(v, i)
  local rest, pos = i - 1, v.offset
  for d = #v.shape, 1, -1 do
    pos = pos + (rest % v.shape[d]) * v.strides[d]
    rest = rest // v.shape[d]
  end
  return pos + 1
end

local function ref_flat(v)
  local out = {}
  for i = 1, product(v.shape) do out[i] = v.data[ref_pos(v, i)] end
  return out
end

local function ref_nested(v)
  local flat, k = ref_flat(v), 0
  local function build(d)
    local t = {}
    for i = 1, v.shape[d] do
      if d == #v.shape then
        k = k + 1
        t[i] = flat[k]
      else
        t[i] = build(d + 1)
      end
    end
    return t
  end
  return build(1)
end

local function ref_permute(v, p)
  local shape, strides = {}, {}
  for k, a in ipairs(p) do
    shape[k], strides[k] = v.shape[a], v.strides[a]
  end
  return {data = v.data, offset = v.offset, shape = shape, strides = strides}
end

local function ref_narrow(v, axis, start, count)
  if axis < 0 then axis = #v.shape + axis + 1 end
  local shape = table.move(v.shape, 1, #v.shape, 1, {})
  shape[axis] = count
  local offset = v.offset
  if product(shape) > 0 then offset = offset + (start - 1) * v.strides[axis] end
  return {data = v.data, offset = offset, shape = shape, strides = v.strides}
end

local function ref_transpose(v)
  local p = {}
  for k = 1, #v.shape do p[k] = #v.shape - k + 1 end
  return ref_permute(v, p)
end

-- ---- the cases --------------------------------------------------------------------------------------

local DTYPES = gr.dtypes()
local SHAPES = {
  {7}, {0}, {1}, {3, 4}, {1, 5}, {4, 0}, {2, 3, 4}, {2, 1, 3}, {3, 0, 2}, {2, 3, 1, 2}, {2, 2, 3, 2},
}

-- (name, engine op, reference op); nil where the op does not apply to the shape
local function rotation(nd)
  local p = {}
  for k = 1, nd do p[k] = k % nd + 1 end
  return p
end
local OPS = {
  {"view", function(m) return m end, function(r) return r end},
  {"transpose", function(m) return m:transpose() end, ref_transpose},
  {"permute", function(m) return m:permute(rotation(m:ndim())) end,
   function(r) return ref_permute(r, rotation(#r.shape)) end},
  {"narrow(-1, 2, rest)", function(m)
     local len = m:shape()[m:ndim()]
     return len >= 2 and m:narrow(-1, 2, len - 1) or nil
   end, function(r) return ref_narrow(r, -1, 2, r.shape[#r.shape] - 1) end},
  {"narrow(1, 1, 0)", function(m) return m:narrow(1, 1, 0) end, function(r) return ref_narrow(r, 1, 1, 0) end},
  {"transpose():narrow(1, 1, 1)", function(m)
     return m:shape()[m:ndim()] >= 1 and m:transpose():narrow(1, 1, 1) or nil
   end, function(r) return ref_narrow(ref_transpose(r), 1, 1, 1) end},
  {"narrow(1, 2, rest):permute", function(m)
     local len = m:shape()[1]
     return len >= 2 and m:narrow(1, 2, len - 1):permute(rotation(m:ndim())) or nil
   end, function(r) return ref_permute(ref_narrow(r, 1, 2, r.shape[1] - 1), rotation(#r.shape)) end},
}

-- values every dtype holds exactly, and not all alike
local function value_of(dtype, i)
  if dtype == "bool" then return i % 3 == 1 end
  if dtype:match("^u") then return (i * 5) % 7 end
  return (i * 5) % 7 - 3
end

local function values(dtype, n, salt)
  local t = {}
  for i = 1, n do t[i] = value_of(dtype, i + (salt or 0)) end
  return t
end

local function shape_text(shape) return "{" .. table.concat(shape, ", ") .. "}" end

local function as_number(x)
  if type(x) == "boolean" then return x and 1 or 0 end
  return x
end

-- the view op's result on a fresh parent, with its reference, or nil where the op does not apply
local function make(dtype, shape, op, where, data)
  local n = product(shape)
  local b = gr.buffer(n, dtype, {where = where})
  if n > 0 then b:set(data) end
  local v = op[2](b:view(shape))
  if not v then return nil end
  return b, v, op[3](ref_compact(data, shape))
end

local function check_view(dtype, shape, op, where)
  local n = product(shape)
  local data = values(dtype, n)
  local b, v, r = make(dtype, shape, op, where, data)
  if not b then return end
  local m = product(r.shape)
  -- the layout
  assert.same(r.shape, v:shape())
  assert.same(r.strides, v:strides())
  assert.equal(#r.shape, v:ndim())
  assert.equal(m, #v)
  -- reading
  local flat = ref_flat(r)
  if #r.shape > 1 then assert.same(ref_nested(r), v:totable()) else assert.same(flat, v:totable()) end
  assert.same(flat, v:totable(1))
  local bytes = m > 0 and gr.buffer(flat, dtype):tobytes() or ""
  assert.equal(bytes, v:tobytes())
  assert.equal(bytes, v:contiguous():tobytes())
  assert.same(r.shape, v:contiguous():shape())
  for _, i in ipairs({1, m // 2 + 1, m}) do
    if i >= 1 and i <= m then assert.equal(flat[i], v:get(i)) end
  end
  -- astype: compact, of the view's shape
  local a = v:astype("float64")
  assert.same(r.shape, a:shape())
  local want = {}
  for i, x in ipairs(flat) do want[i] = as_number(x) + 0.0 end
  assert.same(want, a:totable(1))
  -- a whole-buffer sum of the view (strided: its compact copy)
  local sum = 0
  for _, x in ipairs(flat) do sum = sum + as_number(x) end
  assert.equal(sum, gr.sum(v))
  -- writing: fill, set, copies into the view; the parent holds the reference's data after each
  local fillv = value_of(dtype, 2)
  v:fill(fillv)
  for i = 1, m do r.data[ref_pos(r, i)] = fillv end
  assert.same(r.data, b:totable(1))
  local new = values(dtype, m, 11)
  v:set(new)
  for i = 1, m do r.data[ref_pos(r, i)] = new[i] end
  assert.same(r.data, b:totable(1))
  if m > 1 then                                 -- set from an offset, and b[i] = x
    v:set({new[1]}, m)
    r.data[ref_pos(r, m)] = new[1]
    v[1] = new[2]
    r.data[ref_pos(r, 1)] = new[2]
    assert.same(r.data, b:totable(1))
  end
  local src = gr.buffer(m, dtype, {where = where})
  local src_vals = values(dtype, m, 3)
  if m > 0 then src:set(src_vals) end
  gr.copy(v, src)
  for i = 1, m do r.data[ref_pos(r, i)] = src_vals[i] end
  assert.same(r.data, b:totable(1))
  -- converting copies both ways
  local f = gr.buffer(m, "float64")
  gr.copy(f, v)
  local got = {}
  for i = 1, m do got[i] = as_number(src_vals[i]) + 0.0 end
  assert.same(got, f:totable())
  gr.copy(v, f)
  assert.same(r.data, b:totable(1))
  -- generators in row-major order of the view
  if dtype ~= "bool" then
    v:iota(1)
    local compact = gr.buffer(m, dtype):iota(1)
    for i = 1, m do r.data[ref_pos(r, i)] = compact:get(i) end
    assert.same(r.data, b:totable(1))
  end
  v:random(42)
  local compact = gr.buffer(m, dtype):random(42)
  for i = 1, m do r.data[ref_pos(r, i)] = compact:get(i) end
  assert.same(r.data, b:totable(1))
end

for _, dtype in ipairs(DTYPES) do
  for _, shape in ipairs(SHAPES) do
    for _, op in ipairs(OPS) do
      for _, where in ipairs({"device", "host"}) do
        local title = ("%s %s %s of a %s buffer"):format(dtype, shape_text(shape), op[1], where)
        it(title, function() check_view(dtype, shape, op, where) end)
      end
      H.gpu_it(("%s %s %s: the device view reads and writes as the host's"):format(dtype, shape_text(shape), op[1]),
               function()
        local n = product(shape)
        local data = values(dtype, n)
        local bd, vd = make(dtype, shape, op, "device", data)
        local bh, vh = make(dtype, shape, op, "host", data)
        if not bd then return end
        assert.same(vh:totable(), vd:totable())
        assert.equal(vh:tobytes(), vd:tobytes())
        vd:random(7); vh:random(7)
        assert.equal(bh:tobytes(), bd:tobytes())
        if dtype ~= "bool" then vd:iota(3); vh:iota(3) end
        assert.equal(bh:tobytes(), bd:tobytes())
        gr.copy(vd, vh:astype("float64"))
        assert.equal(bh:tobytes(), bd:tobytes())
        assert.equal(vh:contiguous():tobytes(), vd:contiguous():tobytes())
        assert.equal(gr.sum(vh), gr.sum(vd))
      end)
    end
  end
end

-- ---- refusals ---------------------------------------------------------------------------------------

describe("views: refusals", function()
  local function fails(pattern, fn, ...)
    local ok, err = pcall(fn, ...)
    assert.is_false(ok)
    assert.matches(pattern, err, 1, true)
  end

  it("a shape whose product is not the size names the shape and both counts", function()
    local b = gr.buffer(12, "int32"):iota(1)
    fails("shape: {5, 3} has 15 elements, the buffer 12 (the lengths' product must be its size)", b.view, b, {5, 3})
    fails("shape: 0 axes (accepted: 1 to 8)", b.view, b, {})
    fails("shape: 9 axes (accepted: 1 to 8)", b.view, b, {1, 1, 1, 1, 1, 1, 1, 1, 12})
    fails("shape: length 2 is -4 (accepted: integers >= 0)", b.view, b, {3, -4})
    fails("shape: expected a table of lengths, got number", b.view, b, 12)
    assert.same({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, b:totable())
    assert.same({12}, b:shape())
  end)

  it("axes: 0 raises, out of range raises, negative counts from the end", function()
    local m = gr.buffer(12, "float32"):view{3, 4}
    fails("axis 0 is not an axis: axes are 1-based (accepted: 1 to 2, or -2 to -1 from the end)", m.narrow, m, 0, 1, 1)
    fails("axis 3 is out of range (accepted: 1 to 2, or -2 to -1 from the end)", m.narrow, m, 3, 1, 1)
    fails("axis -3 is out of range", m.narrow, m, -3, 1, 1)
    assert.same({3, 2}, m:narrow(-1, 3, 2):shape())
  end)

  it("narrow out of range names start or count", function()
    local m = gr.buffer(12, "float32"):view{3, 4}
    fails("start 6 is past the end of axis 2 (length 4; accepted: 1 to 5)", m.narrow, m, 2, 6, 0)
    fails("count 3 from 3 does not fit axis 2 (length 4; accepted: 0 to 2)", m.narrow, m, 2, 3, 3)
    fails("start must be >= 1 (got 0)", m.narrow, m, 1, 0, 1)
    assert.same({3, 0}, m:narrow(2, 5, 0):shape())
  end)

  it("permute takes a permutation of the axes, nothing else", function()
    local m = gr.buffer(24, "int8"):view{2, 3, 4}
    fails("perm: axis 1 appears twice (accepted: a permutation of 1..3)", m.permute, m, {1, 1, 2})
    fails("perm: 2 axes for a buffer of 3 (accepted: a permutation of 1..3)", m.permute, m, {2, 1})
    fails("perm: entry 2 is not an axis of a buffer of 3", m.permute, m, {1, 4, 2})
    fails("perm: entry 1 is not an axis of a buffer of 3", m.permute, m, {0, 1, 2})
    assert.same({4, 2, 3}, m:permute{3, 1, 2}:shape())
    assert.same({4, 3, 2}, m:permute{-1, -2, -3}:shape())
  end)

  it("a strided view takes no other shape and no partial slice; its whole slice keeps its layout", function()
    local t = gr.buffer(12, "int32"):iota(1):view{3, 4}:transpose()
    fails("a strided view cannot take another shape (make it contiguous first)", t.view, t, {12})
    fails("a strided view has no 1-D slices", t.slice, t, 2, 3)
    assert.same({4, 3}, t:slice(1):shape())
    assert.same(t:totable(), t:slice(1):totable())
    assert.same({1, 5, 9, 2, 6, 10, 3, 7, 11, 4, 8, 12}, t:contiguous():view{12}:totable())
  end)

  it("reductions of several strided buffers at once are refused, naming the buffer", function()
    local t = gr.buffer(12, "int32"):iota(1):view{3, 4}:transpose()
    fails("buffer 2 is a strided view", gr.reduce_many, {gr.buffer(3, "int32"), t}, {op = "sum"})
  end)

  it("contiguous is the buffer itself when compact", function()
    local m = gr.buffer(6, "float32"):view{2, 3}
    assert.equal(m, m:contiguous())
    local t = m:transpose()
    assert.are_not.equal(t, t:contiguous())
    assert.same({2, 1}, t:contiguous():strides())
  end)
end)

-- ---- lifetimes --------------------------------------------------------------------------------------

describe("views: lifetimes", function()
  it("a view keeps its parent alive after the parent is dropped and collected", function()
    local v
    do
      local b = gr.buffer(24, "float64"):iota(1)
      v = b:view{2, 3, 4}:permute{3, 1, 2}:narrow(1, 2, 2)
    end
    collectgarbage()
    collectgarbage()
    local r = ref_narrow(ref_permute(ref_compact((function()
      local t = {}
      for i = 1, 24 do t[i] = i + 0.0 end
      return t
    end)(), {2, 3, 4}), {3, 1, 2}), 1, 2, 2)
    assert.same(ref_nested(r), v:totable())
    v:fill(5)
    collectgarbage()
    assert.equal(5 * 12, gr.sum(v))
    assert.same({2, 2, 3}, v:contiguous():shape())
  end)
end)

-- ---- whole-view reductions ------------------------------------------------------------------------

describe("views: whole-view reductions", function()
  -- a transposed or permuted compact buffer fills its memory: reduced over it as it lies (no copy), the
  -- same values as its compact copy but for the rounding of the order; a narrowed one through its copy
  local function views(dtype, where)
    local m = gr.buffer(13 * 17, dtype, {where = where}):random(3, -50, 50):view{13, 17}
    local c = gr.buffer(3 * 4 * 5, dtype, {where = where}):random(4, -50, 50):view{3, 4, 5}
    local lone = gr.buffer(9, dtype, {where = where}):random(5, -50, 50):view{9, 1}
    return {
      {"transpose", m:transpose()}, {"permute{3, 1, 2}", c:permute{3, 1, 2}}, {"permute{2, 3, 1}", c:permute{2, 3, 1}},
      {"an (9, 1) transposed", lone:transpose()}, {"a narrow", m:narrow(2, 3, 9)}, {"a transposed narrow", m:narrow(1, 2, 5):transpose()},
    }
  end
  local EXACT = {min = true, max = true, count = true, ["and"] = true, ["or"] = true, absmax = true, minmax = true}
  for _, where in ipairs({"host", "device"}) do
    for _, dtype in ipairs({"float32", "float64", "int32", "int8", "bfloat16"}) do
      local title = ("%s %s: a strided view reduces to its compact copy's value"):format(where, dtype)
      local body = function()
        local is_int = dtype:match("int") ~= nil
        for _, v in ipairs(views(dtype, where)) do
          local compact = v[2]:contiguous()
          for _, op in ipairs({"sum", "min", "max", "mean", "var", "count", "absmax", "asum", "minmax", "norm", "and", "or"}) do
            local got = {gr.reduce(v[2], {op = op})}
            local want = {gr.reduce(compact, {op = op})}
            for k = 1, #want do
              local what = ("%s of %s (result %d)"):format(op, v[1], k)
              if is_int or EXACT[op] or type(want[k]) ~= "number" then
                assert.equal(want[k], got[k], what)
              else
                assert.near(want[k], got[k], 1e-4 * math.max(1, math.abs(want[k])), what)
              end
            end
          end
          -- argmin/argmax count the view's row-major order, the first of equals
          local a1, i1 = gr.argmax(v[2])
          local a2, i2 = gr.argmax(compact)
          assert.equal(a2, a1, "argmax of " .. v[1])
          assert.equal(i2, i1, "argmax index of " .. v[1])
          if not is_int and dtype ~= "bfloat16" then
            -- exactly rounded sums do not depend on the order: the same bits
            assert.equal(gr.sum(compact, {determinism = "gpu_to_gpu"}), gr.sum(v[2], {determinism = "gpu_to_gpu"}))
          end
        end
      end
      if where == "device" and gr.backend() == "cuda" then H.gpu_it(title, body) else it(title, body) end
    end
  end

  it("argmax of a transposed view with ties gives the first in the view's order", function()
    local m = gr.buffer({0, 9, 9, 9, 0, 0}, "float32"):view{2, 3}   -- transposed: 0 9 / 9 0 / 9 0
    local v, i = gr.argmax(m:transpose())
    assert.equal(9, v)
    assert.equal(2, i)
    v, i = gr.argmin(m:transpose())
    assert.equal(0, v)
    assert.equal(1, i)
  end)

  it("the view's memory stays the view's: nothing written", function()
    local b = gr.buffer(12, "float32"):iota(1)
    local before = b:tobytes()
    assert.equal(78, gr.sum(b:view{3, 4}:transpose()))
    assert.equal(before, b:tobytes())
  end)
end)
