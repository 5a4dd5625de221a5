-- FIFO lock: delete it whoever holds it and pass it on to the head. Replies 1 when deleted.
if redis.call('del', KEYS[1]) == 1 then
  pass_on()
  return 1
end
return 0
