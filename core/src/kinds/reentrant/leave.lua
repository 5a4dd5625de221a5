-- Reentrant lock: a waiter gives up. It leaves the waiter list and the grants, and its request
-- gets a tombstone, so no later release grants the lock to it. If a release granted it the
-- lock meanwhile (the request's level field is in the hash), that level is released; else if
-- the lock is free and was reserved for it (it was told, and will not come) or for nobody, the
-- next waiter is told all the same.
-- KEYS[1] lock hash, KEYS[2] channel, KEYS[3] the tombstone of the request that gives up (the
-- waiter list's keys derive from KEYS[1]: `line_keys`).
-- ARGV[1] owner, ARGV[2] how long the tombstone lasts, ARGV[3] the request that gives up.
-- Replies 1 when it told the next waiter.
local line = line_keys(KEYS[1])
local field = level_field(ARGV[3])
redis.call('zrem', line.waiters, ARGV[1])
redis.call('hdel', line.grants, ARGV[1])
local granted = redis.call('hexists', KEYS[1], field) == 1
redis.call('set', KEYS[3], '0', 'px', ARGV[2])
if granted then
  if not take_level_off(KEYS[1], ARGV[1], field, '0') then
    return 0
  end
else
  if redis.call('exists', KEYS[1]) == 1 then
    return 0
  end
  local reserved = redis.call('get', line.reservation)
  if reserved and reserved ~= ARGV[1] then
    return 0
  end
end
redis.call('del', line.reservation)
tell_next(line, KEYS[1], KEYS[2])
return 1
