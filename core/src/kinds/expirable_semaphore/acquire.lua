-- Expirable semaphore: take one permit, id ARGV[2], for ARGV[1] ms.
-- KEYS[1] permit counter, KEYS[2] permits' expiries (ZSET), KEYS[3] channel, KEYS[4] acquire
-- latch of this request.
-- Replies nil when taken (a retry of the request that took it renews it), the time until the
-- next permit expires when none is available (-1: only a release message will tell), UNDONE
-- when the request was undone.
reclaim(KEYS[1], KEYS[2], KEYS[3])
local id = permit_bytes(ARGV[2])
local latch = redis.call('get', KEYS[4])
if latch == '0' then
  return redis.status_reply('UNDONE')
end
if latch == '1' and redis.call('zscore', KEYS[2], id) then
  redis.call('zadd', KEYS[2], now + tonumber(ARGV[1]), id)
  redis.call('pexpire', KEYS[4], ARGV[1])
  return nil
end
local taken = take(KEYS[1], 1)
if type(taken) == 'table' then
  return taken
end
if taken then
  redis.call('zadd', KEYS[2], now + tonumber(ARGV[1]), id)
  local ttl = redis.call('pttl', KEYS[1])
  if ttl > 0 then
    redis.call('pexpire', KEYS[2], ttl)
  end
  redis.call('set', KEYS[4], '1', 'px', ARGV[1])
  return nil
end
local first = redis.call('zrange', KEYS[2], '0', '0', 'withscores')
if first[2] and tonumber(first[2]) < NEVER then
  return math.max(tonumber(first[2]) - now, 1)
end
return -1
