-- A leader resigned (its lock released just before): KEYS[2] the election's record, KEYS[3]
-- its change channel; ARGV[1] the former leader's owner. Deletes the record if it is still
-- this leader's (a newer leader's stays) and tells the observers. KEYS[1] (the lock) is
-- passed so that every election script names its keys alike.
if redis.call('hget', KEYS[2], 'owner') == ARGV[1] then
  redis.call('del', KEYS[2])
end
publish(KEYS[3], '0')
return 1
