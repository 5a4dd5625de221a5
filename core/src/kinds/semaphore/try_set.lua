-- Semaphore: set the number of permits when none was set yet (no key).
-- KEYS[1] permit counter, KEYS[2] channel; ARGV[1] permits. Replies 1 when set.
if redis.call('exists', KEYS[1]) == 0 then
  redis.call('set', KEYS[1], ARGV[1])
  publish(KEYS[2], ARGV[1])
  return 1
end
return 0
