-- Reentrant lock: polylock's waiter list, prepended to the scripts that use it.
-- A waiter that will wait registers (`register`) in a ZSET owner -> arrival (server time, us).
-- Whatever frees the lock calls `tell_next`: it tells the earliest registered waiter still
-- listening, on that waiter's own channel, so one waiter wakes instead of every process, and a
-- polylock client cannot barge in ahead of it. A waiter registered with a grant entry in the
-- grants HASH is given the lock in the same script (`g:<request>:<look>`), for its whole lease
-- (see `grant`); any other is told the lock is free (`0`) and finds it kept for it for a moment
-- (the reservation).
-- The shared channel then gets `00` only if a client other than polylock listens there: Redisson
-- reads it as 0 (wake one of its waiters), polylock ignores it. A release among polylock clients
-- only thus wakes one process, not every one. With no polylock waiter listening the shared
-- channel gets `0`, as Redisson sends it.
-- While the list may hold anyone, the lock hash carries the field WAITERS_MARK (set by a
-- waiter that registers beside a holder, by a grant, and by an acquisition that finds the list
-- there), so a release without it skips the list: an uncontended release reads one hash.
-- The list outlives the waiter's sleep (at most `wait_ms`, the wait replied; -1: no expiry, at
-- most an hour) by `place_ms`: a waiter that looks no more (gone) is dropped with it.

-- A key or channel of the lock `lock` as `foundation/keys.rs` (`tagged`) names it: `prefix:{lock}`,
-- or `prefix:lock` when the lock's name carries a hash tag; in the lock's slot either way.
local function tagged(prefix, lock)
  if string.find(lock, '{', 1, true) then
    return prefix .. ':' .. lock
  end
  return prefix .. ':{' .. lock .. '}'
end

-- The waiter list's keys and channels, derived from the lock's key rather than passed in KEYS:
-- every key an EVALSHA carries costs the server on every call, and the uncontended scripts,
-- which run most, never read these. A test in `reentrant/mod.rs` checks that these names are
-- `foundation/keys.rs`'s.
local function line_keys(lock)
  return {
    waiters = tagged('polylock_lock_waiters', lock),
    reservation = tagged('polylock_lock_reserved', lock),
    told_prefix = tagged('polylock_lock_told', lock),
    listening = tagged('polylock_lock_listening', lock),
    grants = tagged('polylock_lock_grants', lock),
    latch_prefix = tagged('polylock_acquire_latch', lock),
  }
end

-- Lists `owner`. With a grant entry `accepts` (`<request>:<look>`, not '') it accepts the lock
-- directly, for `lease_ms` (see `grant`); without, an entry an earlier request of `owner` left
-- is removed, so that no release grants the lock to a request nobody waits under. A kind that
-- grants nothing (the fenced lock) gives no `grants`. True when listed.
local function register(waiters, owner, place_ms, wait_ms, grants, accepts, lease_ms)
  if place_ms == '0' then
    return false
  end
  local now = redis.call('time')
  redis.call('zadd', waiters, 'nx', now[1] * 1000000 + now[2], owner)
  local ttl = (wait_ms >= 0 and wait_ms or 3600000) + tonumber(place_ms)
  if redis.call('pttl', waiters) < ttl then
    redis.call('pexpire', waiters, ttl)
  end
  if not grants then
    return true
  end
  if accepts ~= '' then
    redis.call('hset', grants, owner, accepts .. ':' .. lease_ms)
    if redis.call('pttl', grants) < ttl then
      redis.call('pexpire', grants, ttl)
    end
  else
    redis.call('hdel', grants, owner)
  end
  return true
end

-- Removes `owner`'s place and grant entry when the entry is `request`'s (a newer request of
-- the same owner keeps its own).
local function unregister(line, owner, request)
  if entry_of(redis.call('hget', line.grants, owner), request) then
    redis.call('hdel', line.grants, owner)
    redis.call('zrem', line.waiters, owner)
  end
end

-- Whether a client other than polylock listens on the shared channel: polylock's subscribe to
-- `listening` right after it and leave it right before it, so the difference counts the others.
local function others_listen(shared, listening)
  local counts = count_listeners(shared, listening)
  return counts[2] > counts[4]
end

-- How long a release keeps the free lock for the waiter it told (the reservation): ample for
-- that waiter's look to arrive; if it never does (its process paused or died just then),
-- others may take the lock after this. A constant of the scripts, not an argument: every
-- argument an EVALSHA carries costs the server on every call.
local RESERVATION_MS = 1000

-- The caller has deleted the reservation (a release, with the lock, in one call): it is set
-- again only for the waiter told now, for RESERVATION_MS.
local function tell_next(line, lock, shared)
  while true do
    -- Each entry is popped once: one whose waiter stopped listening (gone) is dropped here.
    local next_owner = redis.call('zpopmin', line.waiters)[1]
    if not next_owner then
      break
    end
    local entry = redis.call('hget', line.grants, next_owner)
    local told
    if entry then
      redis.call('hdel', line.grants, next_owner)
      local mark = redis.call('exists', line.waiters) == 1 and WAITERS_MARK or nil
      told = grant(lock, line.latch_prefix, line.told_prefix .. ':' .. next_owner, next_owner, entry, mark)
    end
    if not told and publish(line.told_prefix .. ':' .. next_owner, '0') > 0 then
      redis.call('set', line.reservation, next_owner, 'px', RESERVATION_MS)
      told = true
    end
    if told then
      if others_listen(shared, line.listening) then
        publish(shared, '00')
      end
      return
    end
  end
  publish(shared, '0')
end

-- Whether `owner`, which holds no level (the caller read its count), may take the lock now:
-- nobody holds it and it is not kept for another waiter (`reserved`, the reservation the
-- caller read: false when none). Also returns the reservation when it counts (false when the
-- lock is held). A free lock is seen with one call.
local function may_take(lock, reserved, owner)
  if redis.call('exists', lock) == 1 then
    return false, false
  end
  return not reserved or reserved == owner, reserved
end

-- An acquire's look at the lock it did not take on its free-lock path. `undone` when the
-- request was undone (its tombstone is there); `retry` and the value of the request's level
-- field when the request acquired already (the lease starts again now, as the client counts
-- it); else `look`, whether the owner takes the lock now, its levels, the reservation that
-- counts (`may_take`) and the waiters mark.
local function look(lock, tombstone, reservation, owner, field, lease_ms)
  local undone, reserved = unpack(redis.call('mget', tombstone, reservation))
  if undone then
    return 'undone'
  end
  local levels, mine, marked = unpack(redis.call('hmget', lock, owner, field, WAITERS_MARK))
  if mine then
    redis.call('pexpire', lock, lease_ms)
    return 'retry', mine
  end
  local take
  if levels then
    take, reserved = true, false
  else
    take, reserved = may_take(lock, reserved, owner)
  end
  return 'look', take, levels, reserved, marked
end

-- How long a waiter that may not take the lock waits at most: until the holder's lease ends,
-- or, when the lock is free but kept for the waiter told last, until the reservation ends.
local function longest_wait(lock, reservation, reserved)
  if reserved then
    return math.max(redis.call('pttl', reservation), 1)
  end
  return redis.call('pttl', lock)
end
