-- Fair lock: release one level. KEYS[8] unlock latch of this release request, KEYS[9] acquire
-- latch of the level released. ARGV[1] lease ms (the TTL when levels remain), ARGV[2] owner,
-- ARGV[3] latch lifetime ms, ARGV[4] latch lifetime ms after a final release, ARGV[5] wait
-- allowance W ms.
-- Replies nil (not held), 0 (still held), 1 (released).
-- Only the head of the queue is told (or granted the lock), on its own channel. When the key is
-- already gone the lock passes to the head all the same (it is free) and the caller learns it
-- did not hold it.
local replay = redis.call('get', KEYS[8])
if replay then
  return tonumber(replay)
end
local levels = redis.call('hget', KEYS[1], ARGV[2])
if not levels then
  if redis.call('exists', KEYS[1]) == 0 then
    pass_on(tonumber(ARGV[5]))
  end
  return nil
end
local result = 0
if release_level(KEYS[1], ARGV[2], levels, ARGV[1], KEYS[9]) then
  pass_on(tonumber(ARGV[5]))
  result = 1
end
-- A retry after a final release finds no key and learns nothing wrong, so its latch need only
-- cover the caller's own retries (ARGV[4]); a partial release's must cover every retry (ARGV[3]).
redis.call('set', KEYS[8], result, 'px', result == 1 and ARGV[4] or ARGV[3])
return result
