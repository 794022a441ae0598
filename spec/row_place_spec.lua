--[[
A row's bits do not depend on where it lies (issue 23's batch invariance, "where the row sits").

The same values, reduced as one row of a matrix, one segment of a buffer, one of reduce_many's buffers
or one row of gr.dot's pair, give the same bits whatever the row's address modulo 16 bytes: the rows of
a matrix whose row bytes are not a multiple of 16, and the same matrix moved by one element at a time,
against each row alone in a buffer of its own. The lengths cover each way of sharing a row (one thread,
a few lanes, a warp, a block, several blocks) and each shift of a 16-byte run. Values of many
magnitudes, so that another order of additions shows in the last bits.

On the cpu backend the fold is fixed by the length alone; on a GPU this is what the segmented kernel's
runs counted from the row's start (cuda/device/segmented.cuh's span_run) are for.
]]
local gr = require "gpureduce"
local H = require("support.helpers").bind(it, function(reason) pending(reason) end)

local DTYPES = { "float32", "float64", "float16", "bfloat16", "float8_e4m3" }
local OPS = { "sum", "mean", "var", "norm", "sumsq", "nansum", "asum", "min", "argmax" }
-- one thread, lanes, a warp, a block of 256, a block of 1024 (over 256 KiB), several blocks (over 2 MiB)
local LENGTHS = { 3, 5, 7, 13, 37, 100, 1001, 5003, 70001, 600007 }
-- the cpu backend folds by length alone, whatever the address: its short run checks the spec itself
-- (GPUREDUCE_ROW_PLACE_QUICK=1 takes the short list on a GPU too: under compute-sanitizer)
if gr.backend() ~= "cuda" or os.getenv("GPUREDUCE_ROW_PLACE_QUICK") == "1" then LENGTHS = { 3, 5, 13, 37, 1001 } end
local ROWS = 3

local function bytes_of(dtype) return #gr.buffer(1, dtype, { where = "host" }):tobytes() end

-- element i of row j: mixed magnitudes within the dtype's range (hash-made, the same on every run)
local function value(dtype, j, i)
  local h = (j * 0x9E3779B1 + i * 0x85EBCA77) % 0x100000000
  h = (h ~ (h >> 15)) * 0x2C1B3C6D % 0x100000000
  h = h ~ (h >> 12)
  local mag = dtype:find("float8") and (h % 9) - 4 or (dtype == "float16" or dtype == "bfloat16") and (h % 17) - 8
    or (h % 41) - 20
  local x = ((h >> 8) % 251 + 1) / 128 * 2.0 ^ mag
  return (h & 1) == 1 and -x or x
end

local function row_values(dtype, j, len)
  local v = {}
  for i = 1, len do v[i] = value(dtype, j, i) end
  return v
end

-- every row first..first + ROWS - 1 of length len, laid end to end after `shift` leading elements
local function placed(dtype, len, shift, rows)
  local flat = {}
  for i = 1, shift do flat[i] = 0 end
  for j = 1, ROWS do table.move(rows[j], 1, len, shift + (j - 1) * len + 1, flat) end
  local b = gr.buffer(#flat, dtype, { where = "device" }):set(flat)
  return b:narrow(1, shift + 1, ROWS * len)
end

local function alone(dtype, row) return gr.buffer(#row, dtype, { where = "device" }):set(row) end

local function out_bytes(r, p)
  if type(r) == "number" then return string.pack("<d", r) end
  return r:tobytes(p, 1)
end

local function check(failures, what, got, want)
  if got ~= want then failures[#failures + 1] = what end
end

local function place_it(title, fn)
  if gr.backend() == "cuda" then return H.gpu_it(title, fn) end
  return it(title, fn)
end

describe("a row's bits do not depend on its address", function()
  for _, dtype in ipairs(DTYPES) do
    local per_run = 16 // bytes_of(dtype)
    place_it(string.format("%s: rows of a matrix, segments, offsets, reduce_many items and dot rows at every shift",
        dtype), function()
      local failures = {}
      for _, len in ipairs(LENGTHS) do
        local rows, singles = {}, {}
        for j = 1, ROWS do
          rows[j] = row_values(dtype, j, len)
          singles[j] = alone(dtype, rows[j])
        end
        local offsets = gr.buffer({ 0, len, 2 * len, 3 * len }, "int64")
        for _, op in ipairs(OPS) do
          local want, first = {}, {}
          for j = 1, ROWS do want[j] = out_bytes(gr.reduce(singles[j]:view { 1, len }, { op = op, axis = 2 }), 1) end
          for shift = 0, per_run - 1 do
            local flat = placed(dtype, len, shift, rows)
            local m = gr.reduce(flat:view { ROWS, len }, { op = op, axis = 2 })
            for j = 1, ROWS do
              check(failures, string.format("%s len %d shift %d axis 2 row %d", op, len, shift, j), out_bytes(m, j),
                want[j])
            end
            -- segments, offsets and reduce_many items: the way of sharing may follow their number, so each
            -- against the same call at shift 0, where the row lay at another address
            local forms = {
              segment = gr.reduce(flat, { op = op, segment = len }),
              offsets = gr.reduce(flat, { op = op, offsets = offsets }),
            }
            -- reduce_many's items up to 4 MiB are segments of one launch; a larger one is a whole-buffer
            -- reduction of its own, whose kernels peel a head off a 16-byte boundary (its bits follow its
            -- address, as gr.sum of a slice's do)
            if op == "sum" and len * bytes_of(dtype) <= 4 << 20 then
              local items = {}
              for j = 1, ROWS do items[j] = flat:narrow(1, (j - 1) * len + 1, len) end
              forms.reduce_many = gr.reduce_many(items, { op = op })
            end
            for name, r in pairs(forms) do
              for j = 1, ROWS do
                local got = type(r[1]) == "number" and out_bytes(r[j]) or out_bytes(r, j)
                local key = name .. j
                first[key] = first[key] or got
                check(failures, string.format("%s len %d shift %d %s row %d", op, len, shift, name, j), got,
                  first[key])
              end
            end
          end
        end
        -- gr.dot along rows: x and y each at every shift, against each pair of rows alone
        if gr.dot then
          local dwant = {}
          for j = 1, ROWS do
            local y = alone(dtype, rows[ROWS + 1 - j])
            dwant[j] = out_bytes(gr.dot(singles[j]:view { 1, len }, y:view { 1, len }, { axis = 2 }), 1)
          end
          local reversed = {}
          for j = 1, ROWS do reversed[j] = rows[ROWS + 1 - j] end
          for sx = 0, per_run - 1, math.max(1, per_run // 4) do
            for sy = 0, per_run - 1, math.max(1, per_run // 2) do
              local x = placed(dtype, len, sx, rows):view { ROWS, len }
              local y = placed(dtype, len, sy, reversed):view { ROWS, len }
              local d = gr.dot(x, y, { axis = 2 })
              for j = 1, ROWS do
                check(failures, string.format("dot len %d x shift %d y shift %d row %d", len, sx, sy, j),
                  out_bytes(d, j), dwant[j])
              end
            end
          end
        end
      end
      assert(#failures == 0, #failures .. " rows differ from the row alone:\n  " ..
        table.concat(failures, "\n  ", 1, math.min(#failures, 30)))
    end)
  end
end)
