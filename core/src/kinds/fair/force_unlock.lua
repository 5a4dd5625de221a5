-- Fair lock: delete it whoever holds it and pass it on to the head. ARGV[1] wait allowance W ms.
-- Replies 1 when deleted; a key that is not a lock hash (`is_lock_hash`) is left as it is, with
-- an error.
local refused = refused_force_unlock(KEYS[1])
if refused then
  return refused
end
redis.call('del', KEYS[1])
pass_on(tonumber(ARGV[1]))
return 1
