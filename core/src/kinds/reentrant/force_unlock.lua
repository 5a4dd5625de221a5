-- Reentrant lock: delete it whoever holds it and wake a waiter.
-- KEYS[1] lock hash, KEYS[2] channel. Replies 1 when a lock was deleted.
if redis.call('del', KEYS[1]) == 1 then
  redis.call('publish', KEYS[2], 0)
  return 1
end
return 0
