-- Fair lock: delete it whoever holds it and pass it on to the head. ARGV[1] wait allowance W ms.
-- Replies 1 when deleted; a key that is not a lock hash (`is_lock_hash`) is left as it is, with
-- an error.
if not is_lock_hash(KEYS[1]) then
  if redis.call('exists', KEYS[1]) == 1 then
    return not_a_lock(KEYS[1])
  end
  return 0
end
redis.call('del', KEYS[1])
pass_on(tonumber(ARGV[1]))
return 1
