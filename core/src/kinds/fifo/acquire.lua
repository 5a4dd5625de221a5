-- FIFO lock: acquire, re-enter, or wait in line. KEYS[6] the tombstone of this request.
-- ARGV[1] lease ms, ARGV[2] owner, ARGV[3] queue timeout ms (the record's TTL; 0 for a single
-- try, which takes no place in line), ARGV[4] the grant entry `<request>:<look>` when the waiter
-- accepts the lock directly from a release ('' when not), ARGV[5] the request, ARGV[6] '1'
-- when the handle may re-enter (it holds a level, or has another call under way), else '0'.
-- Replies nil when acquired (or already acquired by this request), UNDONE when the request was
-- undone, else how long to wait at most before looking again (ms; negative: no bound from the
-- lock), or {that wait} for a waiter that accepts a grant.
local field = level_field(ARGV[5])
local pttl = redis.call('pttl', KEYS[1])
if pttl == -2 then
  -- Free, nobody in line, not undone: the level is written at once, with its TTL.
  if redis.call('exists', KEYS[2], KEYS[6]) == 0 then
    return write_first_level(KEYS[1], ARGV[1], ARGV[2], field)
  end
  if redis.call('exists', KEYS[6]) == 1 then
    return redis.status_reply('UNDONE')
  end
  -- Free with a line: only its head takes it.
  local head = live_head()
  if not head or head == ARGV[2] then
    if head then
      head_leaves(head)
    end
    return write_first_level(KEYS[1], ARGV[1], ARGV[2], field)
  end
  -- The head may not know the lock is free (it expired, nobody released it).
  publish(KEYS[4] .. ':' .. head, '0')
else
  local acquired, levels = acquired_before(KEYS[1], ARGV[2], field, ARGV[1])
  if acquired then
    return nil
  end
  -- Re-entry. Levels of an owner whose handle holds none are orphans (an acquisition whose
  -- reply was lost, not undone yet): the caller waits its turn, and the undo passes it on.
  if levels and ARGV[6] == '1' then
    if redis.call('exists', KEYS[6]) == 1 then
      return redis.status_reply('UNDONE')
    end
    return reenter(KEYS[1], ARGV[2], field, ARGV[1])
  end
end
if ARGV[3] == '0' then
  return pttl
end
-- Busy (or another is next): take a place at the tail, or keep ours and renew the record, which
-- names this request (the place is now its: see `leave_line`).
local entry = ARGV[5]
if ARGV[4] ~= '' then
  entry = ARGV[4] .. ':' .. ARGV[1]
end
if not redis.call('set', record_of(ARGV[2]), entry, 'px', ARGV[3], 'get') then
  -- A new place: a late copy of a look of a request undone meanwhile takes none.
  if redis.call('exists', KEYS[6]) == 1 then
    redis.call('del', record_of(ARGV[2]))
    return redis.status_reply('UNDONE')
  end
  -- A waiter whose record lapsed before it reached the head keeps its entry: a second one
  -- would come back to life whenever the owner waits again, after the first was served.
  if not redis.call('lpos', KEYS[2], ARGV[2]) then
    redis.call('rpush', KEYS[2], ARGV[2])
  end
end
-- The lock's lease bounds the wait (-2, free but another is next, and -1: only messages and
-- the record's upkeep do).
local wait = pttl
if wait < 0 then
  wait = -1
end
if ARGV[4] ~= '' then
  return {wait}
end
return wait
