-- Reentrant lock (Redisson RLock): acquire or re-enter.
-- KEYS[1] lock hash, KEYS[2] tombstone of this request, KEYS[3] waiter list, KEYS[4]
-- reservation (which the uncontended acquire reads; the grants HASH derives from KEYS[1]:
-- `line_keys`).
-- ARGV[1] lease ms, ARGV[2] owner, ARGV[3] how long a place in the waiter list lasts without a
-- look (0: the caller will not wait, so it does not register), ARGV[4] the grant entry
-- `<request>:<look>` when the waiter accepts the lock directly from a release ('' when not),
-- ARGV[5] the request.
-- The level is recorded in the hash (`level_field`), so it lives as long as its lease.
-- Replies nil when acquired (or when this request already acquired: a retry), how long to wait
-- at most when busy (the holder's PTTL, or the reservation's), or {wait} when it listed a
-- waiter that accepts the lock directly, UNDONE when the request was undone before it ran.
local field = level_field(ARGV[5])
-- A free lock was taken by `acquire_uncontended.lua`, which runs first.
local seen, take, levels, reserved, marked = look(KEYS[1], KEYS[2], KEYS[4], ARGV[2], field, ARGV[1])
if seen == 'undone' then
  return redis.status_reply('UNDONE')
end
if seen == 'retry' then
  return nil
end
if take then
  redis.call('hincrby', KEYS[1], ARGV[2], '1')
  if redis.call('zrem', KEYS[3], ARGV[2]) == 1 then
    redis.call('hdel', line_keys(KEYS[1]).grants, ARGV[2])
  end
  if not levels and redis.call('exists', KEYS[3]) == 1 then
    redis.call('hset', KEYS[1], field, '1', WAITERS_MARK, '1')
  else
    redis.call('hset', KEYS[1], field, '1')
  end
  redis.call('pexpire', KEYS[1], ARGV[1])
  if reserved then
    redis.call('del', KEYS[4])
  end
  return nil
end
local wait = longest_wait(KEYS[1], KEYS[4], reserved)
local listed = register(KEYS[3], ARGV[2], ARGV[3], wait, line_keys(KEYS[1]).grants, ARGV[4], ARGV[1])
-- The mark goes only into a lock hash (a marked hash was one): a key of the application's under
-- the name stays as it is.
if listed and not reserved and not marked and is_lock_hash(KEYS[1]) then
  redis.call('hset', KEYS[1], WAITERS_MARK, '1')
end
if listed and ARGV[4] ~= '' then
  return {wait}
end
return wait
