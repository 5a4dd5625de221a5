-- Fair lock: a waiter gives up. KEYS[8] the tombstone of the request that gives up.
-- ARGV[1] owner, ARGV[2] wait allowance W ms, ARGV[3] how long the tombstone lasts, ARGV[4]
-- the request that gives up.
-- The request gets a tombstone, so no later release grants the lock to it. If a release
-- granted it the lock meanwhile (its level field is in the hash), the level is released and
-- the lock passes on; else it leaves the queue.
local field = level_field(ARGV[4])
local granted = redis.call('hexists', KEYS[1], field) == 1
redis.call('set', KEYS[8], '0', 'px', ARGV[3])
if granted then
  if take_level_off(KEYS[1], ARGV[1], field, '0') then
    pass_on(tonumber(ARGV[2]))
  end
  return 0
end
leave_queue(ARGV[1], tonumber(ARGV[2]), ARGV[4])
return 0
