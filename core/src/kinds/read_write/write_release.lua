-- Write lock: release one level.
-- KEYS[1] lock hash, KEYS[2] channel, KEYS[3] unlock latch of this release request, KEYS[4]
-- acquire latch of the level released.
-- ARGV[1] lease ms (the TTL when levels remain), ARGV[2] the writer's field, ARGV[3] latch
-- lifetime ms (the caller's retry window: no copy of the request is sent after it).
-- The last level frees the lock, or leaves it to the writer's own read levels (mode `read`:
-- the downgrade); either way `1` tells every waiter to look (readers may all enter).
local replay = redis.call('get', KEYS[3])
if replay then
  return tonumber(replay)
end
if redis.call('hget', KEYS[1], 'mode') ~= 'write' or redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
  return nil
end
local result = 0
if redis.call('hincrby', KEYS[1], ARGV[2], '-1') > 0 then
  redis.call('pexpire', KEYS[1], ARGV[1])
else
  last_write_level_off(KEYS[1], ARGV[2], KEYS[2])
  result = 1
end
redis.call('del', KEYS[4])
redis.call('set', KEYS[3], result, 'px', ARGV[3])
return result
