-- Read-write lock (Redisson RReadWriteLock): the start of every read-write script.
-- The hash at the name has a field `mode` (read | write), a field per reader (owner -> count)
-- and the writer's field (owner:write -> count). Each read level n of an owner has a key
-- `<timeout prefix>:<n>` carrying that level's lease.
local clock = redis.call('time')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)

-- Redisson's suffixName(name, owner) .. ':rwlock_timeout'.
local function timeout_prefix(name, owner)
  if string.find(name, '{', 1, true) then
    return name .. ':' .. owner .. ':rwlock_timeout'
  end
  return '{' .. name .. '}:' .. owner .. ':rwlock_timeout'
end

-- The message of a release that frees the lock: `1` (every waiter looks) when polylock writers
-- wait, so that a writer in a process whose one wake-up went to a reader still looks.
local function freed_message(writers)
  redis.call('zremrangebyscore', writers, '-inf', now)
  if redis.call('zcard', writers) > 0 then
    return 1
  end
  return 0
end
