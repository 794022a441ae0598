--- Prints the README's variant table from the registry (gr.variants()), so the table is never written
-- by hand: `make readme` puts it between the markers in README.md.
local gr = require "gpureduce"

local rows = {
  "| # | variant | reproduces | what it does | finishing modes | block (default) |",
  "| --- | --- | --- | --- | --- | --- |",
}
local list = gr.variants()
table.sort(list, function(a, b) return a.ordinal < b.ordinal end)
for _, v in ipairs(list) do
  local block = v.block.min == v.block.max and "-" or
    string.format("%d..%d (%d)", v.block.min, v.block.max, v.block.default)
  rows[#rows + 1] = string.format("| %d | `%s` | %s | %s | %s | %s |", v.ordinal, v.name, v.origin, v.summary,
    table.concat(v.finishes, ", "), block)
end
print(table.concat(rows, "\n"))
