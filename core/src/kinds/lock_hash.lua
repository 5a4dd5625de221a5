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

-- Gives the free `lock` to the waiter `owner` under its grant entry `entry`
-- (`<request>:<look>:<lease ms>`, written by that waiter's look number <look>), and tells it
-- `g:<request>:<look>` on `channel`. The lock and the request's latch (`latch_prefix:request`)
-- get the waiter's whole lease from now, which is after that look ran, so the waiter counts
-- the lease from when it sent that look, by its own clock. The latch is set NX, so a request
-- undone or left meanwhile (latch `0`) is not granted. False, with nothing written, when it
-- was undone, when nobody received the message (the waiter is not listening), or when a
-- PUBLISH reply cannot tell that. Nothing sees the lock before the script ends, so the message
-- may go before the writes.
-- PUBLISH_COUNTS_EVERY_LISTENER (set by the script's form, `kinds/script.rs`) is false in a
-- cluster without sharded pub/sub: there a PUBLISH counts the subscribers of one node only,
-- while the message reaches the others through the cluster bus, so a zero proves nothing.
local function grant(lock, latch_prefix, channel, owner, entry)
  if not PUBLISH_COUNTS_EVERY_LISTENER then
    return false
  end
  local request, look, lease_ms = string.match(entry, '^([^:]+):(%d+):(%d+)$')
  if not request then
    return false
  end
  local latch = latch_prefix .. ':' .. request
  if not redis.call('set', latch, '1', 'px', lease_ms, 'nx') then
    return false
  end
  if publish(channel, 'g:' .. request .. ':' .. look) == 0 then
    redis.call('del', latch)
    return false
  end
  redis.call('hset', lock, owner, 1)
  redis.call('pexpire', lock, lease_ms)
  return true
end

-- Whether the grant entry `entry` (see `grant`) was written under `request`.
local function entry_of(entry, request)
  return entry and string.sub(entry, 1, #request + 1) == request .. ':'
end
