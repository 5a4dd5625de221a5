-- Semaphore: undo an acquire request whose reply was lost: the permits it took come back.
-- KEYS[1] permit counter, KEYS[2] channel, KEYS[3] acquire latch of that request.
-- ARGV[1] latch lifetime ms, ARGV[2] permits.
-- The latch becomes a tombstone either way. Replies 1 when permits came back.
local undone = 0
if redis.call('get', KEYS[3]) == '1' then
  publish(KEYS[2], redis.call('incrby', KEYS[1], ARGV[2]))
  undone = 1
end
redis.call('set', KEYS[3], '0', 'px', ARGV[1])
return undone
