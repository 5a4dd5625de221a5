-- Fenced lock (Redisson RFencedLock): acquire or re-enter, taking the next fencing token.
-- KEYS[1] lock hash, KEYS[2] token counter, KEYS[3] acquire latch of this request, KEYS[4]
-- waiter list, KEYS[5] reservation (the reentrant lock's, `reentrant/waiters.lua`).
-- ARGV[1] lease ms, ARGV[2] owner, ARGV[3] how long a place in the waiter list lasts without a
-- look (0: the caller will not wait). The latch lives as long as the acquisition's lease.
-- Replies {-1, token} when acquired (Redisson's reply shape), {wait, -1} when busy (the
-- holder's PTTL, or the reservation's), UNDONE when
-- the request was undone before it ran. Every acquisition, reentrant ones too, increments the
-- counter; the latch keeps the token, so a retry of a request that acquired replays it.
local latch, reserved = unpack(redis.call('mget', KEYS[3], KEYS[5]))
if latch == '0' then
  return redis.status_reply('UNDONE')
end
if latch and redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  -- A retry of a request that acquired: the lease starts again now, as the client counts it.
  redis.call('pexpire', KEYS[1], ARGV[1])
  redis.call('pexpire', KEYS[3], ARGV[1])
  return {-1, tonumber(latch)}
end
local take
take, reserved = may_take(KEYS[1], reserved, ARGV[2])
if take then
  -- A counter that is not a count (another type, text, negative) fails before any write.
  local kind = redis.call('type', KEYS[2])['ok']
  local count = kind == 'string' and redis.call('get', KEYS[2])
  if (kind ~= 'none' and kind ~= 'string') or (count and not string.match(count, '^%d+$')) then
    local held = count and ('"' .. count .. '"') or ('a ' .. kind)
    return redis.error_reply('ERR the token counter ' .. KEYS[2] .. ' holds ' .. held .. ', not a count')
  end
  local token = redis.call('incr', KEYS[2])
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  redis.call('set', KEYS[3], token, 'px', ARGV[1])
  redis.call('zrem', KEYS[4], ARGV[2])
  if reserved then
    redis.call('del', KEYS[5])
  end
  return {-1, token}
end
local wait = longest_wait(KEYS[1], KEYS[5], reserved)
register(KEYS[4], ARGV[2], ARGV[3], wait)
return {wait, -1}
