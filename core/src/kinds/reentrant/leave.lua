-- Reentrant lock: a waiter gives up. It leaves the waiter list and the grants, and its request
-- becomes a tombstone (latch `0`), so no later release grants the lock to it. If a release
-- granted it the lock meanwhile (the latch of the request that gives up is `1`, and it holds a
-- level), that level is released; else if the lock is free and was reserved for it (it was
-- told, and will not come) or for nobody, the next waiter is told all the same.
-- KEYS[1] lock hash, KEYS[2] channel, KEYS[3..8] the waiter list's keys (`line_keys`),
-- KEYS[9] the acquire latch of the request that gives up.
-- ARGV[1] owner, ARGV[2] how long the lock is reserved for the waiter told, ARGV[3] how long
-- the tombstone lasts.
-- Replies 1 when it told the next waiter.
local line = line_keys(3)
redis.call('zrem', line.waiters, ARGV[1])
redis.call('hdel', line.grants, ARGV[1])
local granted = redis.call('get', KEYS[9]) == '1' and redis.call('hexists', KEYS[1], ARGV[1]) == 1
redis.call('set', KEYS[9], '0', 'px', ARGV[3])
if granted then
  if not take_level_off(KEYS[1], ARGV[1], '0') then
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
tell_next(line, KEYS[1], KEYS[2], ARGV[2])
return 1
