-- Expirable semaphore: undo an acquire request whose reply was lost.
-- KEYS[1] permit counter, KEYS[2] permits' expiries, KEYS[3] channel, KEYS[4] acquire latch of
-- that request. ARGV[1] permit id (hex), ARGV[2] latch lifetime ms.
-- The permit comes back if the request took it; the latch becomes a tombstone either way.
-- Replies 1 when a permit came back.
local undone = 0
if redis.call('get', KEYS[4]) == '1' and redis.call('zrem', KEYS[2], permit_bytes(ARGV[1])) == 1 then
  publish(KEYS[3], redis.call('incrby', KEYS[1], '1'))
  undone = 1
end
redis.call('set', KEYS[4], '0', 'px', ARGV[2])
return undone
