-- polylock's own fields in a lock hash (reentrant, fenced, fair), beside the owners': the first
-- part of every script that reads or writes them, so that the uncontended sections, which run
-- ahead of the helpers, name them too (constants cost a script nothing; functions do).
-- A level of an acquire request: `LEVEL_FIELD_PREFIX .. request` (see `level_field`).
local LEVEL_FIELD_PREFIX = 'polylock:level:'
-- The reentrant lock's waiters mark (see `reentrant/waiters.lua`).
local WAITERS_MARK = 'polylock:waiters'
