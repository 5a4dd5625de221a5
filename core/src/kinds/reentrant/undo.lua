-- Reentrant lock: undo an acquire request whose reply was lost.
-- KEYS[1] lock hash, KEYS[2] channel, KEYS[3] acquire latch of that request, KEYS[4..9] the
-- waiter list's keys (`line_keys`).
-- ARGV[1] owner, ARGV[2] latch lifetime ms, ARGV[3] TTL to restore when the owner keeps other
-- levels (0: leave the TTL), ARGV[4] how long the lock is reserved for the waiter told.
-- If the request acquired (its latch is set and not `0`: `1`, or the fenced lock's token),
-- its level is released (whether its own script or a release granting it took it); either
-- way the latch becomes a tombstone, so the request, should it still arrive or be granted the
-- lock, does nothing. A reservation for the owner (the request was a told waiter's)
-- passes to the next waiter. Replies 1 when a level was undone. The fenced lock shares it: an
-- undone acquisition leaves its token unused, and the counter as it is. (The owner's place in
-- the waiter list stays: the same handle may be waiting again; if not, its channel is gone
-- and the next release drops it.)
local undone = 0
local freed = false
local line = line_keys(4)
unregister(line, ARGV[1], ARGV[5])
if redis.call('get', line.reservation) == ARGV[1] then
  redis.call('del', line.reservation)
  freed = redis.call('exists', KEYS[1]) == 0
end
local latch = redis.call('get', KEYS[3])
if latch and latch ~= '0' and redis.call('hexists', KEYS[1], ARGV[1]) == 1 then
  undone = 1
  freed = take_level_off(KEYS[1], ARGV[1], ARGV[3])
end
if freed then
  redis.call('del', line.reservation)
  tell_next(line, KEYS[1], KEYS[2], ARGV[4])
end
redis.call('set', KEYS[3], '0', 'px', ARGV[2])
return undone
