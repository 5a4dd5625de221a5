-- Fair lock: undo an acquire request whose reply was lost. KEYS[8] its acquire latch.
-- ARGV[1] owner, ARGV[2] latch lifetime ms, ARGV[3] TTL to restore when the owner keeps other
-- levels (0: leave it), ARGV[4] wait allowance W ms, ARGV[5] how long a grant lasts.
-- Releases the level if the request acquired (by its own script or a release's grant), else
-- leaves the queue; either way the latch becomes a tombstone so the request, should it still
-- arrive or be granted the lock, does nothing.
local undone = 0
if redis.call('get', KEYS[8]) == '1' and redis.call('hexists', KEYS[1], ARGV[1]) == 1 then
  undone = 1
  if take_level_off(KEYS[1], ARGV[1], ARGV[3]) then
    pass_on(tonumber(ARGV[4]), ARGV[5])
  end
else
  leave_queue(ARGV[1], tonumber(ARGV[4]), ARGV[5])
end
redis.call('set', KEYS[8], '0', 'px', ARGV[2])
return undone
