-- Fair lock: acquire, re-enter, or queue. KEYS[8] tombstone of this request.
-- ARGV[1] lease ms, ARGV[2] owner, ARGV[3] queue timeout ms, ARGV[4] wait allowance W ms
-- (Redisson's fairLockWaitTimeout), ARGV[5] the grant entry `<request>:<look>` when the waiter
-- accepts the lock directly from a release ('' when not), ARGV[6] the request, ARGV[7] '1'
-- when the handle may re-enter (it holds a level, or has another call under way), else '0'.
-- The level is recorded in the hash (`level_field`), so it lives as long as its lease.
-- Replies nil when acquired (or already acquired by this request), UNDONE when the request was
-- undone, else how long to wait at most before looking again (ms), or {that wait} for a waiter
-- that accepts a grant.
local field = level_field(ARGV[6])
local allowance = tonumber(ARGV[4])
-- Nobody queued, and neither the lock nor this request's tombstone exists (one call): the
-- level is written at once, with its TTL, as the reentrant lock's uncontended acquire writes it.
if not head and redis.call('exists', KEYS[1], KEYS[8]) == 0 then
  return write_first_level(KEYS[1], ARGV[1], ARGV[2], field)
end
if redis.call('exists', KEYS[8]) == 1 then
  return redis.status_reply('UNDONE')
end
local acquired, levels = acquired_before(KEYS[1], ARGV[2], field, ARGV[1])
if acquired then
  return nil
end
-- Re-entry. Levels of an owner whose handle holds none are orphans (an acquisition whose reply
-- was lost, not undone yet): the caller queues, and the undo passes the lock on.
if levels and ARGV[7] == '1' then
  return reenter(KEYS[1], ARGV[2], field, ARGV[1])
end
if ((not head) or head == ARGV[2]) and redis.call('exists', KEYS[1]) == 0 then
  if head then
    head_takes_lock(allowance)
  end
  return write_first_level(KEYS[1], ARGV[1], ARGV[2], field)
end
read_clock()
local deadline = tonumber(redis.call('zscore', KEYS[3], ARGV[2]))
local position = nil
if head == ARGV[2] then
  position = 0
elseif deadline ~= nil then
  position = redis.call('lpos', KEYS[2], ARGV[2])
end
local pttl = redis.call('pttl', KEYS[1])
if not position then
  -- Join the tail with Redisson's deadline: the lock's expiry plus one allowance for each place
  -- up to ours (what Redisson's chain "the last waiter's deadline + W" adds up to), read
  -- without walking the queue.
  position = redis.call('rpush', KEYS[2], ARGV[2]) - 1
  deadline = now + math.max(pttl, 0) + (position + 1) * allowance
  redis.call('zadd', KEYS[3], deadline, ARGV[2])
end
-- Alive: the deadline is raised to at least now + (position + 1) * W at every look, so no
-- number of acquisitions ahead can make a live waiter stale, even when nobody walks the queue
-- to lower the deadlines.
local floor = now + (position + 1) * allowance
if deadline < floor then
  redis.call('zadd', KEYS[3], floor, ARGV[2])
end
redis.call('zadd', seen_key, now + tonumber(ARGV[3]), ARGV[2])
-- A grant entry, or without one the bare request (an earlier request's entry must not stay), is
-- written at every look: the place is this request's now (see `leave_queue`). The HASH lives as
-- long as the liveness records, and its entries leave with their owners.
if ARGV[5] ~= '' then
  redis.call('hset', grants_key, ARGV[2], ARGV[5] .. ':' .. ARGV[1])
else
  redis.call('hset', grants_key, ARGV[2], ARGV[6])
end
if redis.call('pttl', seen_key) < 2 * tonumber(ARGV[3]) then
  redis.call('pexpire', seen_key, 2 * tonumber(ARGV[3]))
  redis.call('pexpire', grants_key, 2 * tonumber(ARGV[3]))
end
local wait
if position == 0 then
  -- Next in line: the release will tell us (or grant us the lock); meanwhile the holder's
  -- lease bounds the wait.
  wait = pttl
else
  -- Behind others: look again when the head's deadline or liveness record passes (it may have
  -- died).
  wait = head_deadline
  if head_seen ~= nil and head_seen < wait then
    wait = head_seen
  end
  wait = wait - now
end
if ARGV[5] ~= '' then
  return {wait}
end
return wait
