-- Semaphore (Redisson RSemaphore): the start of every semaphore script. The name is a STRING
-- holding the number of available permits (no key: none).
local function available(counter)
  local value = redis.call('get', counter)
  if value == false then
    return 0
  end
  local permits = tonumber(value)
  if permits == nil then
    return redis.error_reply('WRONGTYPE the key holds a string that is not a number of permits')
  end
  return permits
end

-- Takes `n` permits from `counter` when that many are available: true when taken, false when
-- too few are, or the error reply of a counter that holds no number of permits.
local function take(counter, n)
  local permits = available(counter)
  if type(permits) == 'table' then
    return permits
  end
  if permits < n then
    return false
  end
  redis.call('decrby', counter, n)
  return true
end
