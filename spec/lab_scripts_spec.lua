-- The lab's other scripts: experiments/segments.lua (validated sizes, JSON/CSV like the sweep's).
-- Sub-processes use this interpreter and this checkout's module.
local gr = require "gpureduce"
local json = require "dkjson"

local L = require "support.lab_script"          -- puts experiments/ on the path

local q, tmpdir, read, decode, csv_split = L.q, L.tmpdir, L.read, L.decode, L.csv_split

describe("segments lab", function()
  teardown(function()
    L.cleanup()
  end)

  it("writes JSON and CSV like the sweep: the header, one record per size and layout, each validated", function()
    local dir = tmpdir()
    local code, out, stderr = L.run("segments.lua", "--quick --offsets --sizes 1,7,2^10 --op argmin --dtype int32 "
      .. "--reps 2 --warmup 0 --out " .. q(dir))
    assert.equal(0, code, out .. stderr)
    assert.matches("wrote .*segments%.json and .*segments%.csv", out)
    local doc = decode(dir .. "/segments.json")
    local h = doc.header
    for _, k in ipairs({ "tool", "version", "backend", "device", "git_revision", "date", "reps", "warmup", "seed",
      "configs", "failed", "options", "argv" }) do
      assert.is_not_nil(h[k], "header." .. k)
      assert.not_equal(json.null, h[k], "header." .. k)
    end
    assert.equal("gpureduce experiments/segments.lua", h.tool)
    assert.equal(gr.backend(), h.backend)
    assert.same({ 1, 7, 1024 }, h.options.sizes)
    assert.equal("--quick", h.argv[2])
    assert.equal(4, h.configs)                   -- 7 does not divide 2^20: skipped, and said so
    assert.equal(0, h.failed)
    assert.matches("segment size 7 does not divide", stderr)
    local layouts = {}
    for _, r in ipairs(doc.results) do
      layouts[#layouts + 1] = r.layout .. " " .. r.segment
      assert.is_true(r.valid)
      assert.equal(json.null, r.error)
      assert.is_true(r.checked >= 1 and r.checked <= 256)
      assert.is_true(r.ms > 0 and r.gbps > 0 and r.mem_gbps > 0)
      assert.equal(r.segments * (4 + 8), r.out_bytes)    -- argmin: int32 values and int64 indices
    end
    assert.same({ "segment 1", "offsets 1", "segment 1024", "offsets 1024" }, layouts)
    local lines = {}
    for line in read(dir .. "/segments.csv"):gmatch("[^\n]+") do lines[#lines + 1] = line end
    assert.matches("^# tool=gpureduce experiments/segments.lua", lines[1])
    local columns
    for i, line in ipairs(lines) do
      if not line:find("^#") then columns = csv_split(line); assert.equal(#lines - i, 4); break end
    end
    assert.equal("n", columns[1])
    assert.is_truthy(table.concat(columns, ","):find("layout,segment,segments", 1, true))
  end)

  it("refuses bad options naming them, and cannot-write results at once", function()
    local code, out, stderr = L.run("segments.lua", "--sizes 2^x")
    assert.equal(1, code)
    assert.equal("", out)
    assert.matches("Error: %-%-sizes: '2%^x' is not a size", stderr)
    code, out, stderr = L.run("segments.lua", "--op summ")
    assert.equal(1, code)
    assert.matches("%-%-op", stderr)
    code, out, stderr = L.run("segments.lua", "--quick --out /proc/nope")
    assert.equal(1, code)
    assert.matches("cannot write results to /proc/nope", stderr)
  end)
end)
