--- Replaces the text between <!-- variants:begin --> and <!-- variants:end --> in README.md with the
-- table that scripts/variant_table.lua prints.
local path = arg[1] or "README.md"
local f = assert(io.open(path))
local text = f:read("a")
f:close()
local pipe = assert(io.popen((arg[-1] or "lua5.4") .. " scripts/variant_table.lua"))
local table_md = pipe:read("a")
assert(pipe:close(), "variant_table.lua failed")
local begin_mark, end_mark = "<!-- variants:begin -->", "<!-- variants:end -->"
local s = assert(text:find(begin_mark, 1, true), "no begin marker in " .. path)
local e = assert(text:find(end_mark, 1, true), "no end marker in " .. path)
text = text:sub(1, s + #begin_mark - 1) .. "\n" .. table_md .. text:sub(e)
f = assert(io.open(path, "w"))
f:write(text)
f:close()
