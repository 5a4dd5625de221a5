-- Write lock: undo an acquire request whose reply was lost.
-- KEYS[1] lock hash, KEYS[2] channel, KEYS[3] acquire latch of that request, KEYS[4]
-- polylock's waiting writers, KEYS[5] when each waiter began to wait.
-- ARGV[1] the writer's field, ARGV[2] latch lifetime ms, ARGV[3] TTL to restore when levels
-- remain (0: leave it).
-- Takes off the level the request acquired, if it did; leaves polylock's waiters; the latch
-- becomes a tombstone. Replies 1 when a level was undone.
local undone = 0
local latch = redis.call('get', KEYS[3])
if latch and latch ~= '0' and redis.call('hget', KEYS[1], 'mode') == 'write'
    and redis.call('hexists', KEYS[1], ARGV[1]) == 1 then
  undone = 1
  if redis.call('hincrby', KEYS[1], ARGV[1], '-1') > 0 then
    if tonumber(ARGV[3]) > 0 then
      redis.call('pexpire', KEYS[1], ARGV[3])
    end
  else
    last_write_level_off(KEYS[1], ARGV[1], KEYS[2])
  end
end
unregister_waiter(KEYS[4], KEYS[5], ARGV[1])
redis.call('set', KEYS[3], '0', 'px', ARGV[2])
return undone
