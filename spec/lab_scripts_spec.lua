-- The lab's other scripts: experiments/segments.lua (validated sizes, JSON/CSV like the sweep's) and
-- experiments/multi_gpu/ (sized to the machine; the launcher fails when a rank fails). Sub-processes use
-- this interpreter and this checkout's module.
local gr = require "gpureduce"
local json = require "dkjson"

local L = require "support.lab_script"          -- puts experiments/ on the path
local H = require("support.helpers").bind(it, function(reason) pending(reason) end)
local ranks = require "multi_gpu.ranks"

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

describe("multi-GPU scripts", function()
  it("the launcher collects every rank's output and names the ranks that failed", function()
    local seen = {}
    local failed = ranks.run(3, function(r)
      return r == 1 and "echo one; exit 3" or ("echo rank " .. r)
    end, function(r, out) seen[#seen + 1] = r .. ":" .. out end)
    assert.same({ "0:rank 0\n", "1:one\n", "2:rank 2\n" }, seen)
    assert.same({ "rank 1 of 3 exited with status 3" }, failed)
    assert.same({}, ranks.run(2, function() return "true" end, function() end))
    local cmd = ranks.command(1, 2, { GPUREDUCE_ID = "/tmp/a b'c" }, "lua5.4", "x.lua")
    assert.equal("GPUREDUCE_RANK=1 GPUREDUCE_RANKS=2 GPUREDUCE_ID='/tmp/a b'\\''c' 'lua5.4' 'x.lua' 2>&1", cmd)
  end)

  it("bench.lua exits 1 with the reason where it cannot run", function()
    local code, _, stderr = L.run("multi_gpu/bench.lua", "", gr.backend() == "cuda" and "GPUREDUCE_SHARD_N=2^x" or "")
    assert.equal(1, code)
    if gr.backend() == "cuda" then
      assert.matches("GPUREDUCE_SHARD_N: '2%^x' is not an element count", stderr)
    else
      assert.matches("needs at least one CUDA device %(backend is cpu%)", stderr)
    end
  end)

  H.gpu_it("bench.lua sizes itself to the smallest GPU and exits 0 when every rank does #slow", function()
    local code, out, stderr = L.run("multi_gpu/bench.lua", "", "GPUREDUCE_RANKS=1")
    assert.equal(0, code, out .. stderr)
    local n = tonumber(out:match("# n = (%d+) float32 elements"))
    local smallest = math.huge
    for _, d in ipairs(gr.devices()) do smallest = math.min(smallest, d.memory) end
    assert.is_true(n * 4 <= smallest / 4 and n * 8 > smallest / 4 or n == 1 << 32, tostring(n))
    assert.matches("c:allreduce against ncclAllReduce", out)
  end)
end)
