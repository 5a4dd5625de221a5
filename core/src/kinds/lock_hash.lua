-- The lock hash (owner -> levels) of the reentrant and fair locks: what their scripts share,
-- prepended (after `lock_fields.lua`) before the kind's own prelude.

-- The field of the lock hash that records one polylock acquisition (a level) of `request`:
-- `1`, or the fenced lock's token. It lives exactly as long as that level: a retry of the
-- acquire finds it (and does not count the level twice), an undo learns from it whether the
-- request acquired, and a release of the level takes it off, so a retry or a late copy of that
-- release finds it gone and takes nothing off twice. Redisson's scripts read the hash only by
-- their own owner's field (HEXISTS, HINCRBY) or as a whole (EXISTS, DEL), so they never see it.
local function level_field(request)
  return LEVEL_FIELD_PREFIX .. request
end

-- An owner's field as Redisson and polylock write it: `<client uuid>:<holder id>`.
local OWNER_FIELD = '^%x%x%x%x%x%x%x%x%-%x%x%x%x%-%x%x%x%x%-%x%x%x%x%-%x%x%x%x%x%x%x%x%x%x%x%x:%d+$'

-- Whether `lock` is recognisably a lock hash of the kinds that share it (Redisson's RLock,
-- RFairLock and RFencedLock layout, polylock's FIFO lock): a HASH with an owner field holding
-- a count (a positive integer), every other field an owner's too or polylock's own
-- (`polylock:...`). Anything else (a missing key, another type, a hash with a field of its
-- own: the application's data, a read-write lock's `mode`) is not, and no script writes into
-- it or deletes it. Read whole: a lock hash holds one owner, its levels and the waiters mark.
local function is_lock_hash(lock)
  local fields = redis.pcall('hgetall', lock)
  if fields.err or #fields == 0 then
    return false
  end
  local owners = 0
  for i = 1, #fields, 2 do
    if string.match(fields[i], OWNER_FIELD) then
      if not string.match(fields[i + 1], '^[1-9]%d*$') then
        return false
      end
      owners = owners + 1
    elseif string.sub(fields[i], 1, 9) ~= 'polylock:' then
      return false
    end
  end
  return owners > 0
end

-- The error a script replies instead of deleting `key`, which exists but is no lock hash.
local function not_a_lock(key)
  local kind = redis.call('type', key)['ok']
  return redis.error_reply('WRONGTYPE ' .. key .. ' holds a ' .. kind .. ' that is not a lock')
end

-- What a force-unlock replies instead of deleting `lock` when it is no lock hash: 0 for a
-- missing key, `not_a_lock`'s error for anything else (left as it is). Nil for a lock hash.
local function refused_force_unlock(lock)
  if is_lock_hash(lock) then
    return nil
  end
  if redis.call('exists', lock) == 1 then
    return not_a_lock(lock)
  end
  return 0
end

-- Writes the first level of `owner` (its count 1 and the level's field `field`) into the free
-- `lock`, with the TTL `lease_ms`, and replies what an acquire script replies then (nil).
-- (The reentrant lock's uncontended acquire writes the same inline: it runs before these
-- helpers are defined.)
local function write_first_level(lock, lease_ms, owner, field)
  redis.call('hset', lock, owner, '1', field, '1')
  redis.call('pexpire', lock, lease_ms)
  return nil
end

-- Whether the request whose level is `field` acquired `lock` before (a retry: its lease starts
-- again now, as the client counts it), and the levels `owner` holds.
local function acquired_before(lock, owner, field, lease_ms)
  local levels, mine = unpack(redis.call('hmget', lock, owner, field))
  if mine then
    redis.call('pexpire', lock, lease_ms)
  end
  return mine ~= false, levels
end

-- One more level of `owner`, recorded under `field`; its lease starts again. Replies what an
-- acquire script replies then (nil).
local function reenter(lock, owner, field, lease_ms)
  redis.call('hincrby', lock, owner, '1')
  redis.call('hset', lock, field, '1')
  redis.call('pexpire', lock, lease_ms)
  return nil
end

-- Takes the level of `owner` recorded under `field` off `lock`: the last deletes it, else the
-- levels left get the TTL `ttl_ms` again (unless '0'). True when the lock is now free.
local function take_level_off(lock, owner, field, ttl_ms)
  if redis.call('hincrby', lock, owner, '-1') > 0 then
    redis.call('hdel', lock, field)
    if tonumber(ttl_ms) > 0 then
      redis.call('pexpire', lock, ttl_ms)
    end
    return false
  end
  redis.call('del', lock)
  return true
end

-- Releases the level of `owner` recorded under `field`, given `levels`, the owner's count the
-- caller read: above 1, one level comes off and the TTL is `ttl_ms` again; the last level
-- renames the hash to `trace` (one command for the delete and the trace a retry of this
-- release reads), which lives `trace_ms`: as long as the caller may still read a retry's
-- answer, and no longer, so an owner used for one call leaves nothing behind for the rest of
-- the lease. True when the lock is now free.
local function release_level(lock, owner, levels, ttl_ms, field, trace, trace_ms)
  if tonumber(levels) > 1 then
    take_level_off(lock, owner, field, ttl_ms)
    return false
  end
  redis.call('rename', lock, trace)
  redis.call('pexpire', trace, trace_ms)
  return true
end

-- The answer to a release whose level's field is gone (`levels`: the owner's count, or false):
-- a retry or a late copy of a release that went through replays its answer, 0 while the owner
-- keeps other levels, 1 when the owner's trace (its last final release of this lock) holds the
-- level's field `field`; else the level was not held (nil).
local function released_before(levels, trace, field)
  if levels then
    return 0
  end
  if redis.call('hexists', trace, field) == 1 then
    return 1
  end
  return nil
end

-- Gives the free `lock` to the waiter `owner` under its grant entry `entry`
-- (`<request>:<look>:<lease ms>`, written by that waiter's look number <look>), and tells it
-- `g:<request>:<look>` on `channel`. The lock gets the waiter's level field and its whole lease
-- from now, which is after that look ran, so the waiter counts the lease from when it sent that
-- look, by its own clock; `mark` adds a field to the hash (the reentrant lock's waiters mark,
-- or nil). A request undone or left meanwhile (its tombstone `latch_prefix:request` exists) is
-- not granted. False, with nothing written, when it was undone, when nobody received the
-- message (the waiter is not listening), or when a PUBLISH reply cannot tell that. Nothing sees
-- the lock before the script ends, so the message may go before the writes.
-- PUBLISH_COUNTS_EVERY_LISTENER (set by the script's form, `kinds/script.rs`) is false in a
-- cluster without sharded pub/sub: there a PUBLISH counts the subscribers of one node only,
-- while the message reaches the others through the cluster bus, so a zero proves nothing.
local function grant(lock, latch_prefix, channel, owner, entry, mark)
  if not PUBLISH_COUNTS_EVERY_LISTENER then
    return false
  end
  local request, look, lease_ms = string.match(entry, '^([^:]+):(%d+):(%d+)$')
  if not request then
    return false
  end
  if redis.call('exists', latch_prefix .. ':' .. request) == 1 then
    return false
  end
  if publish(channel, 'g:' .. request .. ':' .. look) == 0 then
    return false
  end
  if mark then
    redis.call('hset', lock, owner, '1', level_field(request), '1', mark, '1')
  else
    redis.call('hset', lock, owner, '1', level_field(request), '1')
  end
  redis.call('pexpire', lock, lease_ms)
  return true
end

-- Whether the grant entry `entry` (see `grant`) was written under `request`.
local function entry_of(entry, request)
  return entry and string.sub(entry, 1, #request + 1) == request .. ':'
end
