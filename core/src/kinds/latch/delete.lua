-- Count-down latch: delete it whatever its count, and tell waiters (`1`, as a new count) to
-- look again: they find it open.
-- KEYS[1] latch, KEYS[2] channel, KEYS[3] polylock's latch mark (deleted with it, and when no
-- latch is left: a Redisson count down leaves it behind). Replies 1 when there was a latch. A
-- key that is not a latch (a string holding a count) is left as it is, with an error: it is the
-- application's.
local kind = redis.call('type', KEYS[1])['ok']
if kind == 'none' then
  redis.call('del', KEYS[3])
  return 0
end
if kind ~= 'string' or not string.match(redis.call('get', KEYS[1]), '^%-?%d+$') then
  return redis.error_reply('WRONGTYPE ' .. KEYS[1] .. ' holds a ' .. kind .. ' that is not a latch')
end
redis.call('del', KEYS[1], KEYS[3])
publish(KEYS[2], '1')
return 1
