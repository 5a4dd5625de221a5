-- Reentrant lock: delete it whoever holds it and wake a waiter.
-- KEYS[1] lock hash, KEYS[2] channel, KEYS[3] waiter list, KEYS[4] reservation, KEYS[5] prefix
-- of the waiters' own channels, KEYS[6] the channel polylock's listeners join.
-- ARGV[1] how long the lock is reserved for the waiter told.
-- Replies 1 when a lock was deleted.
if redis.call('del', KEYS[1]) == 1 then
  tell_next(KEYS[3], KEYS[4], KEYS[5], KEYS[2], KEYS[6], ARGV[1])
  return 1
end
return 0
