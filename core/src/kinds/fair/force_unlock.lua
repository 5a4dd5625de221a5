-- Fair lock: delete it whoever holds it and tell the head. Replies 1 when deleted.
if redis.call('del', KEYS[1]) == 1 then
  tell(head)
  return 1
end
return 0
