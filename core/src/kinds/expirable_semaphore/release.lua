-- Expirable semaphore: release permit ARGV[1].
-- KEYS[1] permit counter, KEYS[2] permits' expiries, KEYS[3] channel, KEYS[4] unlock latch of
-- this request, KEYS[5] acquire latch of the permit (empty: a permit this client did not take).
-- ARGV[1] permit id (hex), ARGV[2] unused, ARGV[3] latch lifetime ms.
-- Replies 1 when released, nil when the permit was not held: released already, unknown, or its
-- lease had run out (then it comes back all the same, as Redisson's release does).
local replay = redis.call('get', KEYS[4])
if replay then
  return tonumber(replay)
end
local id = permit_bytes(ARGV[1])
local expiry = redis.call('zscore', KEYS[2], id)
if not expiry then
  return nil
end
redis.call('zrem', KEYS[2], id)
publish(KEYS[3], redis.call('incrby', KEYS[1], '1'))
redis.call('del', KEYS[5])
if tonumber(expiry) <= now then
  return nil
end
redis.call('set', KEYS[4], '1', 'px', ARGV[3])
return 1
