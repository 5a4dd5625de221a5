-- Semaphore: give back the permits of an acquisition whose caller went away before it
-- received them (the engine's release of that acquisition).
-- KEYS[1] permit counter, KEYS[2] channel, KEYS[3] unlock latch of this request, KEYS[4]
-- acquire latch of the acquisition. ARGV[1] permits, ARGV[2] latch lifetime ms.
-- Replies 1 when they came back, nil when that acquisition's permits were already given back.
local replay = redis.call('get', KEYS[3])
if replay then
  return tonumber(replay)
end
if redis.call('get', KEYS[4]) ~= '1' then
  return nil
end
publish(KEYS[2], redis.call('incrby', KEYS[1], ARGV[1]))
redis.call('del', KEYS[4])
redis.call('set', KEYS[3], '1', 'px', ARGV[2])
return 1
