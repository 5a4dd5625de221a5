-- Reentrant lock: delete it whoever holds it and wake a waiter.
-- KEYS[1] lock hash, KEYS[2] channel (the waiter list's keys derive from KEYS[1]: `line_keys`).
-- Replies 1 when a lock was deleted; a key that is not a lock hash (`is_lock_hash`) is left as
-- it is, with an error.
local refused = refused_force_unlock(KEYS[1])
if refused then
  return refused
end
redis.call('del', KEYS[1])
local line = line_keys(KEYS[1])
redis.call('del', line.reservation)
tell_next(line, KEYS[1], KEYS[2])
return 1
