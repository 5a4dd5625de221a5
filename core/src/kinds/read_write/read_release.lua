-- Read lock: release one level.
-- KEYS[1] lock hash, KEYS[2] channel, KEYS[3] this owner's timeout prefix, KEYS[4] unlock
-- latch of this release request, KEYS[5] acquire latch of the level released, KEYS[6]
-- polylock's waiting writers.
-- ARGV[1] lease ms (of the levels left), ARGV[2] owner, ARGV[3] latch lifetime ms (the
-- caller's retry window: no copy of the request is sent after it).
-- Replies nil (not held by the owner), 0 (the lock is still held), 1 (released: the lock is
-- free); a retry of the same request replays its first answer.
local replay = redis.call('get', KEYS[4])
if replay then
  return tonumber(replay)
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
  return nil
end
local left = redis.call('hincrby', KEYS[1], ARGV[2], '-1')
redis.call('del', KEYS[3] .. ':' .. (left + 1))
if left == 0 then
  redis.call('hdel', KEYS[1], ARGV[2])
else
  for level = left, 1, -1 do
    redis.call('pexpire', KEYS[3] .. ':' .. level, ARGV[1])
  end
end
redis.call('del', KEYS[5])
local result = 1
if redis.call('hlen', KEYS[1]) > 1 then
  if redis.call('hget', KEYS[1], 'mode') == 'write' then
    -- The writer still holds it (this was one of its own read levels): its lease stays.
    result = 0
  else
    -- The hash lives as long as the longest read level left.
    local longest = -3
    for _, field in ipairs(redis.call('hkeys', KEYS[1])) do
      local count = tonumber(redis.call('hget', KEYS[1], field))
      if count then
        local prefix = timeout_prefix(KEYS[1], field)
        for level = count, 1, -1 do
          longest = math.max(longest, redis.call('pttl', prefix .. ':' .. level))
        end
      end
    end
    if longest > 0 then
      redis.call('pexpire', KEYS[1], longest)
      result = 0
    end
  end
end
if result == 1 then
  -- No reader left (or only readers whose levels all expired).
  redis.call('del', KEYS[1])
  publish(KEYS[2], freed_message(KEYS[6]))
end
redis.call('set', KEYS[4], result, 'px', ARGV[3])
return result
