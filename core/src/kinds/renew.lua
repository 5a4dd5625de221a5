-- Watchdog renewal of hash-based locks, batched (`renew_each`): a hold is its owner's field in
-- the lock hash. Gone: expired, deleted, taken, or not a lock (pcall, so that one key of the
-- wrong type does not fail the whole batch).
return renew_each(function(key, owner)
  if redis.pcall('hexists', key, owner) ~= 1 then
    return false
  end
  if ARGV[1] ~= '0' then
    redis.call('pexpire', key, ARGV[1])
  end
  return true
end)
