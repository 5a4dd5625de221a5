-- FIFO lock: a waiter gives up. KEYS[6] the tombstone of the request that gives up.
-- ARGV[1] owner, ARGV[2] how long the tombstone lasts, ARGV[3] the request that gives up.
-- The request gets a tombstone, so no later release grants the lock to it. If a release
-- granted it the lock meanwhile (its level field is in the hash), the level is released and
-- the lock passes on; else it leaves the line.
local field = level_field(ARGV[3])
local granted = redis.call('hexists', KEYS[1], field) == 1
redis.call('set', KEYS[6], '0', 'px', ARGV[2])
if granted then
  if take_level_off(KEYS[1], ARGV[1], field, '0') then
    pass_on()
  end
  return 0
end
leave_line(ARGV[1], ARGV[3])
return 0
