-- Watchdog renewal of read locks, batched (`renew_each`): a hold is the owner's count in the
-- hash. Renews each read level of the owner and the hash (never shortening it: other readers
-- may hold longer leases). pcall, so that one key of the wrong type does not fail the batch.
return renew_each(function(key, owner)
  local count = redis.pcall('hget', key, owner)
  count = type(count) == 'string' and tonumber(count) or nil
  if not count then
    return false
  end
  if ARGV[1] ~= '0' then
    local prefix = timeout_prefix(key, owner)
    for level = count, 1, -1 do
      redis.call('pexpire', prefix .. ':' .. level, ARGV[1])
    end
    redis.call('pexpire', key, math.max(redis.call('pttl', key), tonumber(ARGV[1])))
  end
  return true
end)
