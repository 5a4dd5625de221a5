-- The current leader: KEYS[1] the election's fenced lock, KEYS[2] its record. The record is
-- reported only while its owner holds the lock (a dead leader's record is stale, a new holder
-- that has not announced yet has none): {owner, value, term, client} or nil.
local owner = redis.call('hget', KEYS[2], 'owner')
if not owner or redis.call('hexists', KEYS[1], owner) == 0 then
  return false
end
return redis.call('hmget', KEYS[2], 'owner', 'value', 'term', 'client')
