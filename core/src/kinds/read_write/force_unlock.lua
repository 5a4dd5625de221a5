-- Read-write lock: delete it whoever holds it, when it is in mode ARGV[1], and wake waiters.
-- KEYS[1] lock hash, KEYS[2] channel; ARGV[1] mode (read | write), ARGV[2] message.
-- Replies 1 when a lock was deleted.
if redis.call('hget', KEYS[1], 'mode') == ARGV[1] then
  redis.call('del', KEYS[1])
  publish(KEYS[2], ARGV[2])
  return 1
end
return 0
