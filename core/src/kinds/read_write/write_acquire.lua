-- Write lock: acquire or re-enter.
-- KEYS[1] lock hash, KEYS[2] acquire latch of this request, KEYS[3] polylock's waiting
-- writers, KEYS[4] its waiting readers, KEYS[5] when each began to wait.
-- ARGV[1] lease ms, ARGV[2] the writer's field (owner .. ':write'), ARGV[3] how long a waiting
-- writer's registration holds, ms (it looks again before then, while it waits).
-- A free lock goes to the writer unless a polylock reader that began to wait before it is
-- still waiting: readers do not starve among polylock clients either.
-- Replies nil when acquired, the time to look again when busy (the holder's PTTL, negative
-- when it has no expiry), UNDONE when the request was undone.
local latch = redis.call('get', KEYS[2])
if latch == '0' then
  return redis.status_reply('UNDONE')
end
if latch == '1' and redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('pexpire', KEYS[1], ARGV[1])
  redis.call('pexpire', KEYS[2], ARGV[1])
  return nil
end
local mode = lock_mode(KEYS[1])
local readers_for = nil
if mode == false then
  readers_for = deferral(KEYS[3], KEYS[4], KEYS[5], KEYS[4], ARGV[2])
end
if readers_for == nil and (mode == false
    or (mode == 'write' and redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then
  if mode == false then
    redis.call('hset', KEYS[1], 'mode', 'write')
  end
  redis.call('hincrby', KEYS[1], ARGV[2], '1')
  redis.call('pexpire', KEYS[1], ARGV[1])
  redis.call('set', KEYS[2], '1', 'px', ARGV[1])
  unregister_waiter(KEYS[3], KEYS[5], ARGV[2])
  return nil
end
-- Busy: register as a waiting writer, so that later polylock readers let it go first.
register_waiter(KEYS[3], KEYS[5], ARGV[2], ARGV[3])
if readers_for ~= nil then
  return readers_for
end
return redis.call('pttl', KEYS[1])
