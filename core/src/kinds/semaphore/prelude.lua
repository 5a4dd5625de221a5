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
