-- Count-down latch: take one from the count. The key goes once the count is not positive (a
-- latch never set, or already open, stays absent), with polylock's latch mark, and waiters are
-- told `0` when this count down opened it.
-- KEYS[1] latch, KEYS[2] channel, KEYS[3] latch mark. Replies the count after it (negative: it
-- was not set).
local left = redis.call('decr', KEYS[1])
if left <= 0 then
  redis.call('del', KEYS[1], KEYS[3])
end
if left == 0 then
  publish(KEYS[2], '0')
end
return left
