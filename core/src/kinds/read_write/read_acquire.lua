-- Read lock: acquire or re-enter.
-- KEYS[1] lock hash, KEYS[2] this owner's timeout prefix, KEYS[3] acquire latch of this
-- request, KEYS[4] polylock's waiting writers, KEYS[5] its waiting readers, KEYS[6] when each
-- began to wait.
-- ARGV[1] lease ms, ARGV[2] owner, ARGV[3] owner .. ':write', ARGV[4] how long a waiting
-- reader's registration holds, ms (it looks again before then, while it waits).
-- Readers share; the writer may take read locks too (downgrade). A new reader (not the writer,
-- not re-entering) also waits while a polylock writer that began to wait before it is still
-- waiting, so writers do not starve among polylock clients (Redisson readers do not look).
-- Replies nil when acquired (the latch keeps the level taken), the time to look again when
-- busy (negative: only a message will tell), UNDONE when the request was undone.
local latch = redis.call('get', KEYS[3])
if latch == '0' then
  return redis.status_reply('UNDONE')
end
if latch and redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  -- A retry of a request that took level `latch`: its lease starts again now.
  redis.call('pexpire', KEYS[2] .. ':' .. latch, ARGV[1])
  redis.call('pexpire', KEYS[1], math.max(redis.call('pttl', KEYS[1]), tonumber(ARGV[1])))
  redis.call('pexpire', KEYS[3], ARGV[1])
  return nil
end
local mode = lock_mode(KEYS[1])
local writer = mode == 'write' and redis.call('hexists', KEYS[1], ARGV[3]) == 1
local writers_for = nil
if not writer and redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
  writers_for = deferral(KEYS[4], KEYS[5], KEYS[6], KEYS[4], ARGV[2])
end
if writers_for == nil and (mode == false or mode == 'read' or writer) then
  if mode == false then
    redis.call('hset', KEYS[1], 'mode', 'read')
  end
  local level = redis.call('hincrby', KEYS[1], ARGV[2], '1')
  redis.call('set', KEYS[2] .. ':' .. level, '1', 'px', ARGV[1])
  redis.call('pexpire', KEYS[1], math.max(redis.call('pttl', KEYS[1]), tonumber(ARGV[1])))
  redis.call('set', KEYS[3], level, 'px', ARGV[1])
  unregister_waiter(KEYS[5], KEYS[6], ARGV[2])
  return nil
end
-- Busy: register as a waiting reader, so that later polylock writers let it go first.
register_waiter(KEYS[5], KEYS[6], ARGV[2], ARGV[4])
local pttl = redis.call('pttl', KEYS[1])
if writers_for ~= nil and (pttl < 0 or writers_for < pttl) then
  return writers_for
end
return pttl
