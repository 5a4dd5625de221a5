-- Reentrant lock (Redisson RLock): acquire or re-enter.
-- KEYS[1] lock hash, KEYS[2] acquire latch of this request.
-- ARGV[1] lease ms, ARGV[2] owner. The latch of an acquisition lives as long as its lease: once
-- that level has expired, nothing may undo it in the name of this request.
-- Replies nil when acquired (or when this request already acquired: a retry), the holder's
-- PTTL when busy, UNDONE when the request was undone before it ran.
local latch = redis.call('get', KEYS[2])
if latch == '0' then
  return redis.status_reply('UNDONE')
end
if latch == '1' and redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  -- A retry of a request that acquired: the lease starts again now, as the client counts it.
  redis.call('pexpire', KEYS[1], ARGV[1])
  redis.call('pexpire', KEYS[2], ARGV[1])
  return nil
end
if redis.call('exists', KEYS[1]) == 0 or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  redis.call('set', KEYS[2], '1', 'px', ARGV[1])
  return nil
end
return redis.call('pttl', KEYS[1])
