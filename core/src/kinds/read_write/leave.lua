-- Read or write lock: a waiter that gives up leaves polylock's waiters, and waiters of the
-- other side that deferred to it look again at once.
-- KEYS[1] polylock's waiting writers or readers (the waiter's side), KEYS[2] when each began
-- to wait, KEYS[3] channel; ARGV[1] the waiter's member (`owner:write` or `owner`).
if unregister_waiter(KEYS[1], KEYS[2], ARGV[1]) == 1 then
  publish(KEYS[3], '1')
  return 1
end
return 0
