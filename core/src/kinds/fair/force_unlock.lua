-- Fair lock: delete it whoever holds it and pass it on to the head. ARGV[1] wait allowance W ms.
-- Replies 1 when deleted.
if redis.call('del', KEYS[1]) == 1 then
  pass_on(tonumber(ARGV[1]))
  return 1
end
return 0
