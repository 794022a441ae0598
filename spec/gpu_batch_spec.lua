-- scripts/gpu-batch.sh's guard: without PREBUILT, a tree that holds a carried module (results/carry or
-- results/mod) stops before building on the device, which would spend minutes of GPU time. The script
-- runs in a scratch tree of its own (a copy of it and the folders of each case, nothing else): past the
-- guard its next step fails there at once (no scripts/offline-env.sh), which shows the guard let it by.
-- No GPU needed.
local H = require("support.helpers").bind(it, function(reason) pending(reason) end)

--- Runs the script in a scratch tree holding `folders`, with `vars` (Lua source of NAME=value words)
-- before it; its exit code and output.
local function batch(folders, vars)
  local tree = os.tmpname()
  os.remove(tree)
  assert(os.execute("mkdir -p " .. H.quote(tree .. "/scripts") .. " && cp scripts/gpu-batch.sh " ..
    H.quote(tree .. "/scripts/")))
  for _, f in ipairs(folders) do assert(os.execute("mkdir -p " .. H.quote(tree .. "/" .. f))) end
  local p = assert(io.popen(string.format("cd %s && env -u PREBUILT -u BUILD_ON_DEVICE %s OUT=%s bash " ..
    "scripts/gpu-batch.sh test 2>&1", H.quote(tree), vars or "", H.quote(tree .. "/out"))))
  local out = p:read("a")
  local _, _, code = p:close()
  os.execute("rm -rf " .. H.quote(tree))
  return code, out
end

describe("scripts/gpu-batch.sh without PREBUILT", function()
  it("refuses to build where a carried module lies in the tree, naming it and the ways on", function()
    for _, carried in ipairs({ "results/carry", "results/mod" }) do
      local code, out = batch({ carried })
      assert.are.equal(2, code, out)
      assert.truthy(out:find("gpu-batch: PREBUILT is not set, but " .. carried .. " is here (a prebuilt module, " ..
        "carried): building on the device costs minutes of GPU time. Run with PREBUILT=" .. carried ..
        " to use it, or BUILD_ON_DEVICE=1 to build anyway.", 1, true), out)
    end
  end)

  it("goes on with BUILD_ON_DEVICE=1, with PREBUILT, and where nothing was carried", function()
    for _, case in ipairs({ { { "results/carry" }, "BUILD_ON_DEVICE=1" }, { { "results/mod" }, "PREBUILT=results/mod" },
      { { "results/gpu" } } }) do
      local code, out = batch(case[1], case[2])
      assert.are_not.equal(2, code, out)
      assert.falsy(out:find("gpu-batch: PREBUILT is not set", 1, true), out)
      assert.truthy(out:find("offline-env.sh", 1, true), out)      -- the step after the guard was reached
    end
  end)
end)
