--- gr.sharded: one logical buffer split across devices.
--
-- A sharded buffer is a table whose `parts` field lists plain Buffers, one per entry of
-- opts.devices, holding consecutive, balanced pieces of the array (the first n % k shards have one
-- element more). With a shape {rows, ...} the array is split along its first axis: whole rows per
-- shard, balanced the same way, each shard a view {rows_i, ...}. Its methods loop over the shards:
-- generators give each shard the indices it has in the whole array (b:random's and b:iota's `at`), so
-- the contents equal one buffer's for the same seed; element indices are flat, in row-major order.
-- Reductions are C (lua/lsharded.c): gr.reduce and the shortcuts see the metatable.
local core = require "gpureduce.core"

local Sharded = core._Sharded          -- the metatable, registered by the core as "gpureduce.Sharded"
local methods = {}

-- Lua 5.1 and LuaJIT (docs/api.md, "Lua versions"): numbers are doubles there, and an integer is a number
-- with an integral value, as the core reads one; table.move is 5.3's. (No 5.3 syntax in this file:
-- every Lua loads it.)
local math_type = math.type or function(x)
  if type(x) ~= "number" then return nil end
  return (x == math.floor(x) and x >= -2^63 and x < 2^63) and "integer" or "float"
end
local table_move = table.move or function(a1, f, e, t, a2)
  a2 = a2 or a1
  for i = 0, e - f do a2[t + i] = a1[f + i] end
  return a2
end
-- a // b of non-negative integers (sizes and indices, far below 2^53); an integer on 5.3 and 5.4
local function idiv(a, b) return math.floor(a / b) end

local function shards_of(s)
  local list = rawget(s, "parts")
  if not list then error("gpureduce.Sharded: the sharded buffer has been freed", 3) end
  return list
end

--- The shard that holds element i (1-based) and i's index in it, by bisection over the offsets.
local function locate(s, i)
  local list, first = shards_of(s), rawget(s, "first")
  local lo, hi = 1, #list
  while lo < hi do
    local mid = idiv(lo + hi + 1, 2)
    if first[mid] <= i then lo = mid else hi = mid - 1 end
  end
  -- an empty shard starts where the next one does: step to the one that holds i
  while #list[lo] == 0 or i >= first[lo] + #list[lo] do lo = lo + 1 end
  return list[lo], i - first[lo] + 1
end

local function check_index(s, i, level)
  if math_type(i) ~= "integer" then
    error(string.format("bad argument #1 to 'get' (index: expected an integer, got %s)",
      math_type(i) or type(i)), level)
  end
  if i < 1 or i > s.n then
    error(string.format("bad argument #1 to 'get' (index %d out of range (1..%d))", i, s.n), level)
  end
end

--- A sharded buffer over the given shards (Buffers in order), which it owns; dims, its shape (default
-- {n}), splits along its first axis: each shard holds whole rows of it.
local function wrap(list, dtype, dims)
  local first, n = {}, 0
  for k, b in ipairs(list) do
    first[k] = n + 1
    n = n + #b
  end
  return setmetatable({parts = list, first = first, n = n, dtype_name = dtype, dims = dims or {n}}, Sharded)
end

--- The elements of one row of dims (every axis but the first).
local function row_length(dims)
  local len = 1
  for d = 2, #dims do len = len * dims[d] end
  return len
end

--- dims with its first axis `rows` long (a new table).
local function with_rows(dims, rows)
  local out = {rows}
  for d = 2, #dims do out[d] = dims[d] end
  return out
end

--- A shape table checked: 1 to 8 lengths, integers >= 0 (a copy). `what` and `arg` name it in errors.
local function check_dims(dims, fname, arg, level)
  local nd = #dims
  if nd < 1 or nd > 8 then
    error(string.format("bad argument #%d to '%s' (shape: %d axes (accepted: 1 to 8))", arg, fname, nd), level)
  end
  local out = {}
  for d = 1, nd do
    local len = dims[d]
    if math_type(len) ~= "integer" or len < 0 then
      error(string.format("bad argument #%d to '%s' (shape: length %d is %s (accepted: integers >= 0))", arg, fname,
        d, tostring(len)), level)
    end
    out[d] = len
  end
  return out
end

--- A plain copy of the list t: its length and elements read as # and t[k] read them (a proxy's __len and
-- __index too); a hole -- an element missing below # or a key past it -- raises, naming `what`.
local function list_of(t, what)
  local last = #t
  for k in pairs(t) do
    if math_type(k) == "integer" and k > last then last = k end
  end
  local out = {}
  for k = 1, last do
    out[k] = t[k]
    if out[k] == nil then
      error(string.format("bad argument #3 to 'sharded' (%s: a list with holes (no element %d of %d))", what, k,
        last), 3)
    end
  end
  return out
end

--- The bytes of one element of dtype, read once from a probe buffer; nil for a name that is no dtype
-- (gr.sharded's buffer call then says so).
local sizes = {}
local function dtype_bytes(dtype)
  if sizes[dtype] == nil then
    local ok, probe = pcall(core.buffer, 1, dtype, {where = "host"})
    sizes[dtype] = ok and #probe:tobytes() or false
    if ok then probe:free() end
  end
  return sizes[dtype] or nil
end

--- gr.sharded(n | {rows, ...}, dtype = "float32", {devices = {1, 2, ...}}) -- devices default to every
-- device; a shape splits its rows (whole rows per shard).
local function sharded(n, dtype, opts)
  local dims
  if type(n) == "table" then
    dims = check_dims(n, "sharded", 1, 3)
    n = dims[1] * row_length(dims)
  elseif math_type(n) ~= "integer" or n < 0 then
    error(string.format("bad argument #1 to 'sharded' (size: expected an integer >= 0 or a shape {rows, ...}, got %s)",
      tostring(n)), 2)
  end
  dims = dims or {n}
  dtype = dtype or "float32"
  if opts ~= nil and type(opts) ~= "table" then
    error("bad argument #3 to 'sharded' (opts: expected a table, got " .. type(opts) .. ")", 2)
  end
  for key in pairs(opts or {}) do
    if key ~= "devices" then
      error(string.format("bad argument #3 to 'sharded' (opts.%s: unknown option (accepted: devices))",
        tostring(key)), 2)
    end
  end
  local count = #core.devices()
  local devices = opts and opts.devices
  if devices == nil then
    devices = {}
    for k = 1, count do devices[k] = k end
  end
  if type(devices) ~= "table" or #devices == 0 then
    error("bad argument #3 to 'sharded' (opts.devices: expected a non-empty list of device indices)", 2)
  end
  devices = list_of(devices, "opts.devices")
  for k, d in ipairs(devices) do
    if math_type(d) ~= "integer" or d < 1 or d > count then
      error(string.format("bad argument #3 to 'sharded' (opts.devices[%d]: %s is not a device (devices: 1 to %d))",
        k, tostring(d), count), 2)
    end
  end
  local k, rows, len = #devices, dims[1], row_length(dims)
  -- Each shard starts at the address its first element would have, modulo 256 bytes, in one buffer of
  -- the whole array: the kernels' loads follow the data's alignment, so a row (or segment) whose bytes
  -- are not a multiple of 16 would otherwise be folded in another order than in one buffer, and its
  -- bits would differ. A shard is a slice of an allocation a few elements longer.
  local es = dtype_bytes(dtype) or 1
  local list, first = {}, 0
  for i, d in ipairs(devices) do
    local count = idiv(rows, k) + (i <= rows % k and 1 or 0)
    local pad = idiv((first * len * es) % 256, es)
    first = first + count
    local ok, b = pcall(core.buffer, pad + count * len, dtype, {device = d})
    if ok and pad > 0 then
      local base = b
      ok, b = pcall(base.slice, base, pad + 1, count * len)
      base:free()                       -- the slice holds the memory
    end
    if ok and #dims > 1 then
      local base = b
      ok, b = pcall(base.view, base, with_rows(dims, count))
      base:free()                       -- the view holds the memory
    end
    if not ok then
      for _, made in ipairs(list) do made:free() end
      error((tostring(b):gsub("'buffer'", "'sharded'")), 2)
    end
    list[i] = b
  end
  return wrap(list, dtype, dims)
end

function methods:size() return self.n end
function methods:dtype() return self.dtype_name end
function methods:where() return "device" end

--- The devices of the shards, in order.
function methods:devices()
  local out = {}
  for k, b in ipairs(shards_of(self)) do out[k] = b:device() end
  return out
end

--- The shape, row-major: {n} for a 1-D sharded buffer, else {rows, ...} (a new table).
function methods:shape()
  shards_of(self)
  return with_rows(self.dims, self.dims[1])
end

function methods:ndim() return #self.dims end

--- The strides of the logical array, in elements (row-major, compact).
function methods:strides()
  local out, step = {}, 1
  for d = #self.dims, 1, -1 do
    out[d] = step
    step = step * math.max(self.dims[d], 1)
  end
  return out
end

--- {device =, offset = (1-based index of the shard's first element), size =, row = (1-based index of its
-- first row), rows =, buffer =} per shard.
function methods:shards()
  local out, row, len = {}, 1, row_length(self.dims)
  for k, b in ipairs(shards_of(self)) do
    local rows = #self.dims > 1 and b:shape()[1] or #b
    out[k] = {device = b:device(), offset = self.first[k], size = #b, row = row, rows = rows, buffer = b}
    row = row + (len > 0 and rows or 0)
  end
  return out
end

function methods:fill(v)
  for _, b in ipairs(shards_of(self)) do b:fill(v) end
  return self
end

function methods:iota(start, step)
  for k, b in ipairs(shards_of(self)) do b:iota(start, step, self.first[k]) end
  return self
end

function methods:random(seed, lo, hi)
  for k, b in ipairs(shards_of(self)) do b:random(seed, lo, hi, self.first[k]) end
  return self
end

function methods:get(i)
  check_index(self, i, 3)
  local b, j = locate(self, i)
  return b:get(j)
end

--- The element size of a sharded buffer's dtype, in bytes (for byte strings).
local function element_bytes(s) return dtype_bytes(s.dtype_name) end

--- s:set(table | bytes, offset = 1): each shard takes its part.
function methods:set(values, offset)
  offset = offset or 1
  local bytes = type(values) == "string"
  if not bytes and type(values) ~= "table" then
    error("bad argument #1 to 'set' (expected a table or a byte string, got " .. type(values) .. ")", 2)
  end
  if math_type(offset) ~= "integer" or offset < 1 or offset > self.n + 1 then
    error(string.format("bad argument #2 to 'set' (offset %s is outside 1..%d)", tostring(offset), self.n + 1), 2)
  end
  local es = bytes and element_bytes(self) or 1
  if bytes and #values % es ~= 0 then
    error(string.format("bad argument #1 to 'set' (byte string of length %d is not a whole number of %s elements)",
      #values, self.dtype_name), 2)
  end
  local count = bytes and idiv(#values, es) or #values
  if count > self.n - offset + 1 then
    error(string.format("bad argument #1 to 'set' (%d values from offset %d do not fit in a buffer of %d)",
      count, offset, self.n), 2)
  end
  local last = offset + count - 1
  for k, b in ipairs(shards_of(self)) do
    local lo, hi = self.first[k], self.first[k] + #b - 1
    local from, to = math.max(lo, offset), math.min(hi, last)
    if from <= to then
      local a, z = from - offset + 1, to - offset + 1
      local part = bytes and values:sub((a - 1) * es + 1, z * es) or table_move(values, a, z, 1, {})
      b:set(part, from - lo + 1)
    end
  end
  return self
end

--- The pieces of [first, first + count - 1] as (shard, offset in it, count) calls of f, in order.
local function each_piece(s, first, count, f)
  local last = first + count - 1
  for k, b in ipairs(shards_of(s)) do
    local lo, hi = s.first[k], s.first[k] + #b - 1
    local from, to = math.max(lo, first), math.min(hi, last)
    if from <= to then f(b, from - lo + 1, to - from + 1) end
  end
end

local function check_span(s, first, count, name)
  first = first or 1
  if math_type(first) ~= "integer" or first < 1 or first > s.n + 1 then
    error(string.format("bad argument #1 to '%s' (offset %s is outside 1..%d)", name, tostring(first), s.n + 1), 3)
  end
  count = count or s.n - first + 1
  if math_type(count) ~= "integer" or count < 0 or count > s.n - first + 1 then
    error(string.format("bad argument #2 to '%s' (count %s from offset %d is outside the buffer (size %d))",
      name, tostring(count), first, s.n), 3)
  end
  return first, count
end

function methods:totable(first, count)
  if #self.dims > 1 and first == nil and count == nil then       -- nested: each shard's rows in order
    local out = {}
    for _, b in ipairs(shards_of(self)) do
      local rows = b:totable()
      table_move(rows, 1, #rows, #out + 1, out)
    end
    return out
  end
  first, count = check_span(self, first, count, "totable")
  local out = {}
  each_piece(self, first, count, function(b, at, c)
    table_move(b:totable(at, c), 1, c, #out + 1, out)
  end)
  return out
end

function methods:tobytes(first, count)
  first, count = check_span(self, first, count, "tobytes")
  local parts = {}
  each_piece(self, first, count, function(b, at, c) parts[#parts + 1] = b:tobytes(at, c) end)
  return table.concat(parts)
end

--- s:slice(offset, count = rest): a plain buffer (a view of one shard) when the range lies in one
-- shard, else a sharded view over the pieces of the shards it covers.
function methods:slice(offset, count)
  offset, count = check_span(self, offset, count, "slice")
  local pieces = {}
  each_piece(self, offset, count, function(b, at, c) pieces[#pieces + 1] = b:slice(at, c) end)
  if #pieces == 1 then return pieces[1] end
  if #pieces == 0 then return shards_of(self)[1]:slice(1, 0) end
  return wrap(pieces, self.dtype_name)
end

--- s:view{rows, ...}: the same shards seen with another shape, split along its first axis -- each shard
-- must hold whole rows of it (a view of each shard; the memory is shared).
function methods:view(shape)
  if type(shape) ~= "table" then
    error("bad argument #1 to 'view' (shape: expected a table of lengths, got " .. type(shape) .. ")", 2)
  end
  local dims = check_dims(shape, "view", 1, 3)
  local len, list = row_length(dims), shards_of(self)
  if dims[1] * len ~= self.n then
    error(string.format("bad argument #1 to 'view' (shape: %d elements, the buffer has %d)", dims[1] * len, self.n), 2)
  end
  if len == 0 and self.n == 0 and dims[1] > 0 and #list > 1 then
    error("bad argument #1 to 'view' (shape: rows of no element cannot be told apart between the shards)", 2)
  end
  local views = {}
  for k, b in ipairs(list) do
    local rows = len > 0 and idiv(#b, len) or (k == 1 and dims[1] or 0)
    if rows * len ~= #b then
      for _, v in ipairs(views) do v:free() end
      error(string.format("bad argument #1 to 'view' (shape: shard %d holds %d elements, not whole rows of %d "
        .. "(a sharded buffer is split along the first axis))", k, #b, len), 2)
    end
    views[k] = b:view(with_rows(dims, rows))
  end
  return wrap(views, self.dtype_name, dims)
end

--- Frees every shard (views of them stay valid: a shard's memory goes with its last view).
function methods:free()
  local list = rawget(self, "parts")
  if list then
    for _, b in ipairs(list) do b:free() end
    rawset(self, "parts", nil)
  end
end

Sharded.__name = "gpureduce.Sharded"
Sharded.__len = function(s) return s.n end
Sharded.__close = methods.free
Sharded.__tostring = function(s)
  if not rawget(s, "parts") then return "gpureduce.Sharded(freed)" end
  local size = #s.dims > 1 and "{" .. table.concat(s.dims, ", ") .. "}" or tostring(s.n)
  return string.format("gpureduce.Sharded(%s, %s, devices {%s})", s.dtype_name, size,
    table.concat(s:devices(), ", "))
end
Sharded.__index = function(s, key)
  if math_type(key) == "integer" then
    if key < 1 or key > s.n then return nil end      -- as a table: ipairs(s) stops at the end
    return methods.get(s, key)
  end
  return methods[key]
end
Sharded.__newindex = function(s, key, v)
  if math_type(key) ~= "integer" then
    error("gpureduce.Sharded: cannot set field '" .. tostring(key) .. "' (only elements s[1] to s[#s])", 2)
  end
  check_index(s, key, 3)
  local b, j = locate(s, key)
  b[j] = v
end

return sharded
