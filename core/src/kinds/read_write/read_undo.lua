-- Read lock: undo an acquire request whose reply was lost.
-- KEYS[1] lock hash, KEYS[2] channel, KEYS[3] this owner's timeout prefix, KEYS[4] acquire
-- latch of that request, KEYS[5] polylock's waiting writers, KEYS[6] its waiting readers,
-- KEYS[7] when each waiter began to wait.
-- ARGV[1] owner, ARGV[2] latch lifetime ms.
-- If the request took a level (its latch holds the level), one level comes off; either way the
-- latch becomes a tombstone, and the reader leaves polylock's waiters. Replies 1 when a level
-- was undone.
local undone = 0
local latch = redis.call('get', KEYS[4])
if latch and latch ~= '0' and redis.call('hexists', KEYS[1], ARGV[1]) == 1 then
  undone = 1
  local left = redis.call('hincrby', KEYS[1], ARGV[1], '-1')
  redis.call('del', KEYS[3] .. ':' .. (left + 1))
  if left == 0 then
    redis.call('hdel', KEYS[1], ARGV[1])
  end
  if redis.call('hlen', KEYS[1]) <= 1 then
    redis.call('del', KEYS[1])
    publish(KEYS[2], freed_message(KEYS[5]))
  end
end
unregister_waiter(KEYS[6], KEYS[7], ARGV[1])
redis.call('set', KEYS[4], '0', 'px', ARGV[2])
return undone
