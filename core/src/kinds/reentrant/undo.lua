-- Reentrant lock: undo an acquire request whose reply was lost.
-- KEYS[1] lock hash, KEYS[2] channel, KEYS[3] acquire latch of that request.
-- ARGV[1] owner, ARGV[2] latch lifetime ms, ARGV[3] TTL to restore when the owner keeps other
-- levels (0: leave the TTL).
-- If the request acquired (its latch is set and not `0`: `1`, or the fenced lock's token),
-- its level is released; either way the latch becomes a tombstone, so the request, should it
-- still arrive, does nothing. Replies 1 when a level was undone. The fenced lock shares it: an
-- undone acquisition leaves its token unused, and the counter as it is.
local undone = 0
local latch = redis.call('get', KEYS[3])
if latch and latch ~= '0' and redis.call('hexists', KEYS[1], ARGV[1]) == 1 then
  undone = 1
  if redis.call('hincrby', KEYS[1], ARGV[1], -1) > 0 then
    if tonumber(ARGV[3]) > 0 then
      redis.call('pexpire', KEYS[1], ARGV[3])
    end
  else
    redis.call('del', KEYS[1])
    redis.call('publish', KEYS[2], 0)
  end
end
redis.call('set', KEYS[3], '0', 'px', ARGV[2])
return undone
