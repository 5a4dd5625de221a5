-- Reentrant lock: a waiter gives up. It leaves the waiter list; if the lock is free and was
-- reserved for it (it was told, and will not come) or for nobody, the next waiter is told.
-- KEYS[1] lock hash, KEYS[2] channel, KEYS[3] waiter list, KEYS[4] reservation, KEYS[5] prefix
-- of the waiters' own channels, KEYS[6] the channel polylock's listeners join.
-- ARGV[1] owner, ARGV[2] how long the lock is reserved for the waiter told.
-- Replies 1 when it told the next waiter.
redis.call('zrem', KEYS[3], ARGV[1])
if redis.call('exists', KEYS[1]) == 1 then
  return 0
end
local reserved = redis.call('get', KEYS[4])
if reserved and reserved ~= ARGV[1] then
  return 0
end
tell_next(KEYS[3], KEYS[4], KEYS[5], KEYS[2], KEYS[6], ARGV[2])
return 1
