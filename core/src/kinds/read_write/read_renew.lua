-- Watchdog renewal of read locks, batched.
-- KEYS = lock hashes; ARGV[1] lease ms (0: only check), ARGV[i + 1] the owner of KEYS[i].
-- Renews each read level of the owner and the hash (never shortening it: other readers may
-- hold longer leases). Replies 1 (held, renewed) or 0 (gone) per key; pcall, so that one key of
-- the wrong type does not fail the batch.
local held = {}
for i, key in ipairs(KEYS) do
  local owner = ARGV[i + 1]
  local count = redis.pcall('hget', key, owner)
  count = type(count) == 'string' and tonumber(count) or nil
  if count then
    if ARGV[1] ~= '0' then
      local prefix = timeout_prefix(key, owner)
      for level = count, 1, -1 do
        redis.call('pexpire', prefix .. ':' .. level, ARGV[1])
      end
      redis.call('pexpire', key, math.max(redis.call('pttl', key), tonumber(ARGV[1])))
    end
    held[i] = 1
  else
    held[i] = 0
  end
end
return held
