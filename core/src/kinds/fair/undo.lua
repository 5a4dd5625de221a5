-- Fair lock: undo an acquire request whose reply was lost. KEYS[6] its acquire latch.
-- ARGV[1] owner, ARGV[2] latch lifetime ms, ARGV[3] TTL to restore when the owner keeps other
-- levels (0: leave it), ARGV[4] wait allowance W ms.
-- Releases the level if the request acquired, else leaves the queue; either way the latch
-- becomes a tombstone so the request, should it still arrive, does nothing.
local undone = 0
if redis.call('get', KEYS[6]) == '1' and redis.call('hexists', KEYS[1], ARGV[1]) == 1 then
  undone = 1
  if redis.call('hincrby', KEYS[1], ARGV[1], -1) > 0 then
    if tonumber(ARGV[3]) > 0 then
      redis.call('pexpire', KEYS[1], ARGV[3])
    end
  else
    redis.call('del', KEYS[1])
    tell(head)
  end
else
  leave_queue(ARGV[1], tonumber(ARGV[4]))
end
redis.call('set', KEYS[6], '0', 'px', ARGV[2])
return undone
