-- The lock hash (owner -> levels) of the reentrant and fair locks: what their scripts share,
-- prepended before the kind's own prelude.

-- Takes one level of `owner` off `lock`: the last deletes it, else the levels left get the TTL
-- `ttl_ms` again (unless '0'). True when the lock is now free.
local function take_level_off(lock, owner, ttl_ms)
  if redis.call('hincrby', lock, owner, -1) > 0 then
    if tonumber(ttl_ms) > 0 then
      redis.call('pexpire', lock, ttl_ms)
    end
    return false
  end
  redis.call('del', lock)
  return true
end

-- Releases the level of `owner` that the acquire latch `latch` records, given `levels`, the
-- owner's count the caller read: above 1, one level comes off and the TTL is `ttl_ms` again;
-- the last level deletes the lock, the latch and the other keys given (`...`) in one call.
-- True when the lock is now free.
local function release_level(lock, owner, levels, ttl_ms, latch, ...)
  if tonumber(levels) > 1 then
    take_level_off(lock, owner, ttl_ms)
    redis.call('del', latch)
    return false
  end
  redis.call('del', lock, latch, ...)
  return true
end

-- Gives the free `lock` to the waiter `owner` under its `request` for `grant_ms`, and tells it
-- `g:<request>:<server_ms>` on `channel`. The request's latch (`latch_prefix:request`) is set
-- NX, so a request undone meanwhile (latch `0`) is not granted. False, with nothing written,
-- when it was undone or nobody received the message (the waiter is not listening). Nothing
-- sees the lock before the script ends, so the message may go before the writes.
local function grant(lock, latch_prefix, channel, owner, request, grant_ms, server_ms)
  local latch = latch_prefix .. ':' .. request
  if not redis.call('set', latch, '1', 'px', grant_ms, 'nx') then
    return false
  end
  if redis.call('publish', channel, 'g:' .. request .. ':' .. server_ms) == 0 then
    redis.call('del', latch)
    return false
  end
  redis.call('hset', lock, owner, 1)
  redis.call('pexpire', lock, grant_ms)
  return true
end
