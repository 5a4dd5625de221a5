-- Write lock: acquire or re-enter.
-- KEYS[1] lock hash, KEYS[2] acquire latch of this request, KEYS[3] polylock's waiting writers.
-- ARGV[1] lease ms, ARGV[2] the writer's field (owner .. ':write'), ARGV[3] how long a waiting
-- writer's registration holds, ms (it looks again before then, while it waits).
-- Replies nil when acquired, the holder's PTTL when busy (negative: no expiry), UNDONE when the
-- request was undone.
local latch = redis.call('get', KEYS[2])
if latch == '0' then
  return redis.status_reply('UNDONE')
end
if latch == '1' and redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('pexpire', KEYS[1], ARGV[1])
  redis.call('pexpire', KEYS[2], ARGV[1])
  return nil
end
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false or (mode == 'write' and redis.call('hexists', KEYS[1], ARGV[2]) == 1) then
  if mode == false then
    redis.call('hset', KEYS[1], 'mode', 'write')
  end
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  redis.call('set', KEYS[2], '1', 'px', ARGV[1])
  redis.call('zrem', KEYS[3], ARGV[2])
  return nil
end
-- Busy: register as a waiting writer, so that new polylock readers let it go first.
redis.call('zadd', KEYS[3], now + tonumber(ARGV[3]), ARGV[2])
redis.call('pexpire', KEYS[3], ARGV[3])
return redis.call('pttl', KEYS[1])
