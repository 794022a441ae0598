--- Results on disk: JSON (dkjson) and CSV with the same header and fields. experiments/README.md
-- documents the schema; the key lists below are its single source. A schema names the header's keys and
-- the document's lists of records with theirs (M.SWEEP is the sweep's; the accuracy lab has its own):
-- JSON holds them all, CSV the header and the first list.
local json = require "dkjson"
local header = require "lab.header"

local M = {}

M.HEADER_KEYS = {
  "tool", "version", "backend", "device", "sms", "l2", "cc", "memory", "cuda_runtime", "cuda_driver",
  "git_revision", "date", "read_ceiling_gbps", "reps", "warmup", "rotate", "seed", "configs", "failed",
  "skipped_unsupported", "skipped_host_max", "options", "argv",
}

M.RESULT_KEYS = {
  "variant", "ordinal", "n", "dtype", "op", "block", "finish", "grid", "passes", "ms", "ms_min", "ms_max",
  "gbps", "pct_ceiling", "speedup_vs_neighbored", "ratio_to_cub", "valid", "value", "reference", "bound",
  "depth", "bytes", "timer", "buffers", "seed", "error",
}

M.SWEEP = { header = M.HEADER_KEYS, lists = { { "results", M.RESULT_KEYS } } }

-- dkjson writes numbers with tostring (14 digits): a float that would not read back the same is
-- written with 17, so values and references keep every bit; an integral one keeps a ".0" (%.17g drops
-- it: 4612345678901234.0 would read back as an integer)
local EXACT = {
  __tojson = function(self)
    local text = string.format("%.17g", self[1])
    if not text:find("[.eE]") then text = text .. ".0" end
    return text
  end,
}

local function exact(v)
  if math.type(v) == "float" and v == v and math.abs(v) ~= math.huge and tonumber(tostring(v)) ~= v then
    return setmetatable({ v }, EXACT)
  end
  return v
end

--- A copy of t with every key of `keys` present: absent values become JSON null.
local function complete(t, keys)
  local out = {}
  for _, k in ipairs(keys) do
    local v = t[k]
    if v == nil then v = json.null end
    out[k] = exact(v)
  end
  return out
end

function M.mkdir(dir)
  local ok = os.execute("mkdir -p " .. header.shell_quote(dir))
  if not ok then return nil, "cannot create directory " .. dir end
  return true
end

--- Whether results can be written under dir: makes it, then creates and removes a probe file there.
function M.check_writable(dir)
  local ok, why = M.mkdir(dir)
  if not ok then return nil, why end
  local probe = dir .. "/.write-probe"
  local f, err = io.open(probe, "w")
  if not f then return nil, err end
  f:close()
  os.remove(probe)
  return true
end

local function write_file(path, text)
  local f, err = io.open(path, "w")
  if not f then return nil, err end
  f:write(text)
  f:close()
  return path
end

--- {header=, results=, ...} as JSON text: keys in schema order (default M.SWEEP), absent values as
-- null; the header indented, one record per line (easy to grep and diff).
function M.encode_json(doc, schema)
  schema = schema or M.SWEEP
  local lines = {
    '{"header": ' .. json.encode(complete(doc.header, schema.header),
      { indent = true, keyorder = schema.header }) .. ",",
  }
  for li, list in ipairs(schema.lists) do
    local name, keys = list[1], list[2]
    local records = doc[name] or {}
    lines[#lines + 1] = '"' .. name .. '": ['
    for i, r in ipairs(records) do
      lines[#lines + 1] = json.encode(complete(r, keys), { keyorder = keys }) .. (i < #records and "," or "")
    end
    lines[#lines + 1] = li < #schema.lists and "]," or "]}"
  end
  return table.concat(lines, "\n") .. "\n"
end

-- results keep every bit (%.17g: a schema's `bits` keys, the sweep's value and reference); timings and
-- ratios 7 significant digits, far below their noise
local BITS = { value = true, reference = true }

local function csv_field(v, key, bits)
  if v == nil or v == json.null then return "" end
  if type(v) == "table" then v = json.encode(v) end
  if math.type(v) == "float" then
    v = v ~= v and "nan" or string.format(bits[key] and "%.17g" or "%.7g", v)
  end
  v = tostring(v)
  if v:find('[,"\n]') then v = '"' .. v:gsub('"', '""') .. '"' end
  return v
end

--- The CSV text: "# key=value" per header field (tables as JSON), the column row, one row per record of
-- the schema's first list (default M.SWEEP: the results).
function M.encode_csv(doc, schema)
  schema = schema or M.SWEEP
  local name, keys = schema.lists[1][1], schema.lists[1][2]
  local lines = {}
  for _, k in ipairs(schema.header) do
    local v = doc.header[k]
    if type(v) == "table" then v = json.encode(v) end
    lines[#lines + 1] = "# " .. k .. "=" .. (v == nil and "" or tostring(v)):gsub("\n", " ")
  end
  lines[#lines + 1] = table.concat(keys, ",")
  for _, r in ipairs(doc[name] or {}) do
    local row = {}
    for i, k in ipairs(keys) do row[i] = csv_field(r[k], k, schema.bits or BITS) end
    lines[#lines + 1] = table.concat(row, ",")
  end
  return table.concat(lines, "\n") .. "\n"
end

--- Writes DIR/BASE.json and DIR/BASE.csv (schema: default M.SWEEP); returns the two paths, or nil and a
-- message.
function M.write(doc, dir, base, schema)
  local ok, err = M.mkdir(dir)
  if not ok then return nil, err end
  local jpath, jerr = write_file(dir .. "/" .. base .. ".json", M.encode_json(doc, schema))
  if not jpath then return nil, jerr end
  local cpath, cerr = write_file(dir .. "/" .. base .. ".csv", M.encode_csv(doc, schema))
  if not cpath then return nil, cerr end
  return jpath, cpath
end

--- The end of a lab script's run: writes the files (M.write), says where on stdout, and on failure says
-- why through note(msg) and exits 1.
function M.save(doc, dir, base, schema, note)
  local jpath, cpath = M.write(doc, dir, base, schema)
  if not jpath then
    note("could not write results: " .. tostring(cpath))
    os.exit(1, true)
  end
  print(string.format("\nwrote %s and %s", jpath, cpath))
  return jpath, cpath
end

--- Reads a saved JSON document (null values decode as nil).
function M.read_json(path)
  local f, err = io.open(path, "r")
  if not f then return nil, err end
  local text = f:read("a")
  f:close()
  local doc, _, derr = json.decode(text)
  if not doc then return nil, path .. ": " .. tostring(derr) end
  if type(doc.header) ~= "table" or type(doc.results) ~= "table" then
    return nil, path .. ": not a sweep result (no header/results)"
  end
  return doc
end

return M
