-- Count-down latch: delete it whatever its count, and tell waiters (`1`, as a new count) to
-- look again: they find it open.
-- KEYS[1] latch, KEYS[2] channel. Replies 1 when there was a latch.
if redis.call('del', KEYS[1]) == 1 then
  publish(KEYS[2], 1)
  return 1
end
return 0
