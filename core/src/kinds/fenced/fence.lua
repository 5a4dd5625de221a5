-- Fenced write: set or delete a key only with a token at least the highest applied to it.
-- KEYS[1] the guarded key (a STRING), KEYS[2] its fence (a STRING: the highest token applied,
-- never expiring). ARGV[1] token (decimal, >= 1, no leading zeros), ARGV[2] `set` or `delete`,
-- ARGV[3] the value (`set`).
-- Replies {1, n} when applied (n: 1 for `set`, the keys deleted for `delete`) and the fence
-- then holds the token; {0, highest} when the token is lower than the highest applied, and
-- nothing was written. A key or fence of another type is refused before anything is written.
local roles = {'the key', 'its fence ' .. KEYS[2]}
for i, role in ipairs(roles) do
  local kind = redis.call('type', KEYS[i])['ok']
  if kind ~= 'none' and kind ~= 'string' then
    return redis.error_reply('WRONGTYPE ' .. role .. ' holds a ' .. kind .. ', not a string')
  end
end
local highest = redis.call('get', KEYS[2])
if highest then
  if not string.match(highest, '^[1-9]%d*$') then
    return redis.error_reply('ERR ' .. roles[2] .. ' holds ' .. highest .. ', not a token')
  end
  -- Compared as decimal strings, exact for any 64-bit token: the shorter is the lower.
  if #ARGV[1] < #highest or (#ARGV[1] == #highest and ARGV[1] < highest) then
    return {0, highest}
  end
end
redis.call('set', KEYS[2], ARGV[1])
if ARGV[2] == 'set' then
  redis.call('set', KEYS[1], ARGV[3])
  return {1, 1}
end
return {1, redis.call('del', KEYS[1])}
