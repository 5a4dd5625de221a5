-- Announces a leader's value: KEYS[1] the election's fenced lock, KEYS[2] its record (a HASH),
-- KEYS[3] its change channel; ARGV[1] the candidate's owner, ARGV[2] the value, ARGV[3] the
-- term (the lock's fencing token), ARGV[4] the client's name (may be empty).
-- Written only while ARGV[1] holds the lock, in the same script, so a candidate whose lease
-- ended can never announce over the next leader. 1 announced, 0 not the leader.
if redis.call('hexists', KEYS[1], ARGV[1]) == 0 then
  return 0
end
redis.call('hset', KEYS[2], 'owner', ARGV[1], 'value', ARGV[2], 'term', ARGV[3],
  'client', ARGV[4])
publish(KEYS[3], ARGV[3])
return 1
