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
  if redis.call('zcount', writers, '(' .. now, '+inf') > 0 then
    return 1
  end
  return 0
end

-- The lock's mode: `read`, `write`, false when free, or `foreign` for a hash without a mode
-- (another kind's lock hash, or the application's data): never written into, it is busy until
-- it goes.
local function lock_mode(lock)
  local mode = redis.call('hget', lock, 'mode')
  if mode == false and redis.call('exists', lock) == 1 then
    return 'foreign'
  end
  return mode
end

-- The writer's last level leaves: its field goes, and with it the lock unless the writer's own
-- read levels are left (mode `read`: the downgrade); either way `1` tells every waiter to look.
local function last_write_level_off(lock, field, channel)
  redis.call('hdel', lock, field)
  if redis.call('hlen', lock) == 1 then
    redis.call('del', lock)
  else
    redis.call('hset', lock, 'mode', 'read')
  end
  publish(channel, '1')
end

-- Phase fairness among polylock clients. A waiting writer is registered in the writers ZSET, a
-- waiting reader in the readers ZSET (member -> time until which the registration holds), and
-- both in the since ZSET (member -> when it began to wait). A waiter defers only to live
-- waiters of the other side that began to wait before it, so neither side starves the other.

-- Drops the registrations that ran out (their holders died or stopped looking).
local function prune_waiters(writers, readers, since)
  for _, alive in ipairs({writers, readers}) do
    for _, member in ipairs(redis.call('zrangebyscore', alive, '-inf', now)) do
      redis.call('zrem', since, member)
    end
    redis.call('zremrangebyscore', alive, '-inf', now)
  end
end

-- When `member` began to wait (now if it is not waiting).
local function waiting_since(since, member)
  local began = redis.call('zscore', since, member)
  if began then
    return tonumber(began)
  end
  return now
end

-- The latest expiry among the live registrations in `alive` that began to wait before
-- `began`, or nil when there is none.
local function older_waiters(alive, since, began)
  local latest = nil
  for _, member in ipairs(redis.call('zrangebyscore', since, '-inf', '(' .. began)) do
    local expiry = redis.call('zscore', alive, member)
    if expiry then
      latest = math.max(latest or 0, tonumber(expiry))
    end
  end
  return latest
end

-- How long a new waiter (`member`) defers to the live waiters of the other side (`others`, the
-- writers or the readers ZSET) that began to wait before it: ms, or nil when none. Drops the
-- registrations that ran out first.
local function deferral(writers, readers, since, others, member)
  prune_waiters(writers, readers, since)
  local until_ = older_waiters(others, since, waiting_since(since, member))
  if until_ then
    return math.max(until_ - now, 1)
  end
  return nil
end

-- Registers (or refreshes) `member` as waiting in `alive` for `ms`, keeping when it began.
local function register_waiter(alive, since, member, ms)
  ms = tonumber(ms)
  redis.call('zadd', alive, now + ms, member)
  redis.call('zadd', since, 'NX', now, member)
  for _, key in ipairs({alive, since}) do
    redis.call('pexpire', key, math.max(redis.call('pttl', key), ms))
  end
end

-- Drops `member`'s registration; 1 when it was registered.
local function unregister_waiter(alive, since, member)
  redis.call('zrem', since, member)
  return redis.call('zrem', alive, member)
end
