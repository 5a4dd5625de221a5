-- Reentrant lock: undo an acquire request whose reply was lost.
-- KEYS[1] lock hash, KEYS[2] channel, KEYS[3] tombstone of that request (the waiter list's
-- keys derive from KEYS[1]: `line_keys`).
-- ARGV[1] owner, ARGV[2] tombstone lifetime ms, ARGV[3] TTL to restore when the owner keeps
-- other levels (0: leave the TTL), ARGV[4] the request undone.
-- If the request acquired (its level field is in the hash: its own script or a release
-- granting it wrote it), that level is released; either way the request gets a tombstone, so
-- the request, should it still arrive or be granted the lock, does nothing. A reservation for
-- the owner (the request was a told waiter's) passes to the next waiter. Replies 1 when a
-- level was undone. The fenced lock shares it: an undone acquisition leaves its token unused,
-- and the counter as it is. (The owner's place in the waiter list stays: the same handle may
-- be waiting again; if not, its channel is gone and the next release drops it.)
local undone = 0
local freed = false
local line = line_keys(KEYS[1])
local field = level_field(ARGV[4])
unregister(line, ARGV[1], ARGV[4])
if redis.call('get', line.reservation) == ARGV[1] then
  redis.call('del', line.reservation)
  freed = redis.call('exists', KEYS[1]) == 0
end
if redis.call('hexists', KEYS[1], field) == 1 then
  undone = 1
  freed = take_level_off(KEYS[1], ARGV[1], field, ARGV[3])
end
if freed then
  redis.call('del', line.reservation)
  tell_next(line, KEYS[1], KEYS[2])
end
redis.call('set', KEYS[3], '0', 'px', ARGV[2])
return undone
