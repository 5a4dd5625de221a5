-- Count-down latch (Redisson RCountDownLatch): set the count when none is set (no key) and tell
-- waiters that a new count began.
-- KEYS[1] latch (a STRING holding the count), KEYS[2] channel, KEYS[3] polylock's latch mark (a
-- STRING `1` kept while the count is, so that tools tell a latch from a semaphore); ARGV[1]
-- count. Replies 1 when set.
if redis.call('exists', KEYS[1]) == 0 then
  redis.call('set', KEYS[1], ARGV[1])
  redis.call('set', KEYS[3], '1')
  publish(KEYS[2], '1')
  return 1
end
return 0
