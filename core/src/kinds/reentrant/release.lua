-- Reentrant lock: release one level.
-- KEYS[1] lock hash, KEYS[2] channel, KEYS[3] unlock latch of this release request,
-- KEYS[4] acquire latch of the level released, KEYS[5..10] the waiter list's keys
-- (`line_keys`).
-- ARGV[1] lease ms (the TTL when levels remain), ARGV[2] owner, ARGV[3] latch lifetime ms,
-- ARGV[4] latch lifetime ms after a final release, ARGV[5] how long the lock is reserved for
-- the waiter told.
-- Replies nil (not held by the owner), 0 (still held), 1 (released); a retry of the same
-- request replays its first answer from the unlock latch.
local replay = redis.call('get', KEYS[3])
if replay then
  return tonumber(replay)
end
local levels = redis.call('hget', KEYS[1], ARGV[2])
if not levels then
  return nil
end
local result = 0
local line = line_keys(5)
-- The last level deletes the reservation with the lock: it is set again only for the waiter
-- told now.
if release_level(KEYS[1], ARGV[2], levels, ARGV[1], KEYS[4], line.reservation) then
  tell_next(line, KEYS[1], KEYS[2], ARGV[5])
  result = 1
end
-- A retry after a final release finds no key and learns nothing wrong, so its latch need only
-- cover the caller's own retries (ARGV[4]); a partial release's must cover every retry (ARGV[3]).
redis.call('set', KEYS[3], result, 'px', result == 1 and ARGV[4] or ARGV[3])
return result
