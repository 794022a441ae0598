-- Compact busted 2.x output handler:   busted -o spec/support/summary_output.lua
--
-- Prints one character per test (. pass, F fail, E error, P pending; 80 a
-- line), then every failure and error with its location and message, then
-- pending tests counted per reason, and as the very last line
--     N passed, N failed, N skipped
-- which CI parses. failed = failures + errors (including errors outside any
-- test, e.g. a spec file that does not load); skipped = pending.
--
-- The exit status is left to busted's runner, which counts failures from the
-- same events. That only works if every subscriber here returns `nil, true`:
-- a handler returning anything else stops the event from reaching the runner
-- and a failing run would exit 0.

local pretty = require 'pl.pretty'

local WIDTH = 80
local MARK = { success = '.', failure = 'F', error = 'E', pending = 'P' }

return function(options)
  local busted = require 'busted'
  local handler = {}
  local out = io.stdout
  local s -- per-run state, replaced on 'suite reset' (busted --repeat)

  local function reset()
    s = {
      passed = 0, failed = 0, pending = 0,
      column = 0,
      problems = {},     -- { kind, name, where, message, traceback }
      reasons = {},      -- pending reason -> count
      reasonOrder = {},  -- reasons in order of first appearance
      pendingWhy = {},   -- test element -> message of its pending() call
    }
  end
  reset()

  local function mark(ch)
    if options.deferPrint then return end
    if s.column == WIDTH then
      out:write('\n')
      s.column = 0
    end
    out:write(ch)
    out:flush()
    s.column = s.column + 1
  end

  -- Messages may be strings, error objects with __tostring, or tables.
  local function text(msg)
    if msg == nil then return nil end
    if type(msg) == 'string' then return msg end
    local mt = getmetatable(msg)
    if mt and mt.__tostring then return tostring(msg) end
    return pretty.write(msg)
  end

  -- "describe ... it" names, outermost first, without the file.
  local function fullName(element)
    local names = {}
    local e = element
    while e and e.descriptor ~= 'file' and e.descriptor ~= 'suite' do
      table.insert(names, 1, e.name or e.descriptor)
      e = busted.parent(e)
    end
    if #names == 0 then
      return (element.descriptor or '?') .. ' ' .. (element.name or '')
    end
    return table.concat(names, ' ')
  end

  local function where(element, trace)
    local t = element.trace or trace
    if t and t.short_src then
      return t.short_src .. ':' .. tostring(t.currentline)
    end
    return element.name or '?'
  end

  local function skipPending(element, status)
    return options.suppressPending
      and (element.descriptor == 'pending' or status == 'pending')
  end

  -- Failures and errors, inside tests or not. Inside a test ('it', including
  -- its finally) the test's own 'end' event counts it; anywhere else
  -- (describe body, before_each, a file that fails to load) no test ends, so
  -- count and mark it here.
  local function problem(kind)
    return function(element, parent, message, trace)
      -- Only a test can fail; a failed assertion elsewhere is an error.
      table.insert(s.problems, {
        kind = element.descriptor == 'it' and kind or 'error',
        name = fullName(element),
        where = where(element, trace),
        message = text(message) or 'nil error',
        traceback = trace and trace.traceback,
      })
      if element.descriptor ~= 'it' then
        s.failed = s.failed + 1
        mark(MARK.error)
      end
      return nil, true
    end
  end

  handler.pending = function(element, parent, message)
    s.pendingWhy[element] = message
    return nil, true
  end

  handler.testEnd = function(element, parent, status)
    if skipPending(element, status) then return nil, true end
    if status == 'success' then
      s.passed = s.passed + 1
    elseif status == 'pending' then
      s.pending = s.pending + 1
      -- busted prefixes the pending() message with "file:line: "; drop it
      -- so that the same reason from many places groups together.
      local why = text(s.pendingWhy[element])
      why = why and why:gsub('^[^\n]-:%d+: ', '', 1)
      -- pending() without a message arrives as an empty table: "{\n}".
      if not why or why:match('^[%s{}]*$') or why == 'nil' then
        why = 'no reason given'
      end
      if not s.reasons[why] then
        s.reasons[why] = 0
        table.insert(s.reasonOrder, why)
      end
      s.reasons[why] = s.reasons[why] + 1
    else -- 'failure' or 'error'
      s.failed = s.failed + 1
    end
    mark(MARK[status] or MARK.error)
    return nil, true
  end

  local function indent(str, pad)
    return pad .. str:gsub('\n', '\n' .. pad)
  end

  handler.suiteEnd = function()
    if s.column > 0 then out:write('\n') end
    for i, p in ipairs(s.problems) do
      out:write(('\n%d) %s: %s\n   at %s\n'):format(
        i, p.kind == 'failure' and 'FAIL' or 'ERROR', p.name, p.where))
      out:write(indent(p.message, '   '), '\n')
      -- Assertion messages already say where they failed; errors need the
      -- stack to be useful.
      local tb = p.traceback and p.traceback:gsub('^%s+', ''):gsub('%s+$', '')
      if tb and tb ~= '' and (p.kind == 'error' or options.verbose) then
        out:write(indent(tb, '   '), '\n')
      end
    end
    if #s.reasonOrder > 0 then out:write('\n') end
    for _, why in ipairs(s.reasonOrder) do
      out:write(('pending: %d (%s)\n'):format(s.reasons[why], why))
    end
    out:write(('%d passed, %d failed, %d skipped\n'):format(s.passed, s.failed, s.pending))
    out:flush()
    return nil, true
  end

  handler.suiteReset = function()
    reset()
    return nil, true
  end

  -- Called by busted's output_handler_loader right after construction.
  function handler:subscribe()
    busted.subscribe({ 'suite', 'reset' }, handler.suiteReset)
    busted.subscribe({ 'suite', 'end' }, handler.suiteEnd)
    busted.subscribe({ 'test', 'end' }, handler.testEnd)
    busted.subscribe({ 'pending' }, handler.pending)
    busted.subscribe({ 'failure' }, problem('failure'))
    busted.subscribe({ 'error' }, problem('error'))
  end

  return handler
end
