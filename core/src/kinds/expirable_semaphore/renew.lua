-- Watchdog renewal of permits, batched (`renew_each`): KEYS are the permits' expiry ZSETs, a
-- hold is its permit id (hex). A permit whose expiry has passed is lost, even before anyone
-- reclaimed it.
return renew_each(function(key, hex)
  local id = permit_bytes(hex)
  local expiry = redis.pcall('zscore', key, id)
  if not (type(expiry) == 'string' and tonumber(expiry) > now) then
    return false
  end
  if ARGV[1] ~= '0' then
    redis.call('zadd', key, 'xx', now + tonumber(ARGV[1]), id)
  end
  return true
end)
