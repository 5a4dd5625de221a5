-- KEYS[1] lock. Replies the PTTL when the key is a lock (a hash), -2 when there is none.
local kind = redis.call('type', KEYS[1])['ok']
if kind == 'none' then
  return -2
end
if kind ~= 'hash' then
  return redis.error_reply('WRONGTYPE the key holds a ' .. kind)
end
return redis.call('pttl', KEYS[1])
