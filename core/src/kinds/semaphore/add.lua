-- Semaphore: add ARGV[1] permits (a release, or `add_permits`, which may remove some with a
-- negative number) and tell waiters how many are available now.
-- KEYS[1] permit counter, KEYS[2] channel, KEYS[3] latch of this request (a retry adds nothing).
-- ARGV[1] permits, ARGV[2] latch lifetime ms. Replies the permits available after it.
if redis.call('exists', KEYS[3]) == 1 then
  return available(KEYS[1])
end
local before = available(KEYS[1])
if type(before) == 'table' then
  return before
end
local value = redis.call('incrby', KEYS[1], ARGV[1])
if value > 0 and tonumber(ARGV[1]) > 0 then
  publish(KEYS[2], value)
end
redis.call('set', KEYS[3], '1', 'px', ARGV[2])
return value
