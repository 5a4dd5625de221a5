-- Fenced lock (Redisson RFencedLock): acquire or re-enter, taking the next fencing token.
-- KEYS[1] lock hash, KEYS[2] token counter, KEYS[3] tombstone of this request, KEYS[4]
-- waiter list, KEYS[5] reservation (the reentrant lock's, `reentrant/waiters.lua`).
-- ARGV[1] lease ms, ARGV[2] owner, ARGV[3] how long a place in the waiter list lasts without a
-- look (0: the caller will not wait), ARGV[4] the request. The level's field in the hash holds
-- its token.
-- Replies {-1, token} when acquired (Redisson's reply shape), {wait, -1} when busy (the
-- holder's PTTL, or the reservation's), UNDONE when
-- the request was undone before it ran. Every acquisition, reentrant ones too, increments the
-- counter; the level's field keeps the token, so a retry of a request that acquired replays it.
local field = level_field(ARGV[4])

-- The next token. A counter that is not a count (another type, text, negative) fails, with the
-- counter as it was: INCR refuses another type or text, and a negative count is put back.
local function next_token()
  local token = redis.pcall('incr', KEYS[2])
  if type(token) == 'number' and token >= 1 then
    return token
  end
  local kind = redis.call('type', KEYS[2])['ok']
  local held = 'a ' .. kind
  if kind == 'string' then
    if type(token) == 'number' then
      redis.call('decr', KEYS[2])
    end
    held = '"' .. redis.call('get', KEYS[2]) .. '"'
  end
  return nil, redis.error_reply('ERR the token counter ' .. KEYS[2] .. ' holds ' .. held .. ', not a count')
end

-- None of the lock's four keys exists (one call): free, kept for nobody, nobody waits, and this
-- request was not undone.
if redis.call('exists', KEYS[1], KEYS[3], KEYS[4], KEYS[5]) == 0 then
  local token, refused = next_token()
  if not token then
    return refused
  end
  redis.call('hset', KEYS[1], ARGV[2], '1', field, token)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return {-1, token}
end
local seen, take, levels, reserved, marked = look(KEYS[1], KEYS[3], KEYS[5], ARGV[2], field, ARGV[1])
if seen == 'undone' then
  return redis.status_reply('UNDONE')
end
if seen == 'retry' then
  -- `take` is then the level's field: its token.
  return {-1, tonumber(take)}
end
if take then
  local token, refused = next_token()
  if not token then
    return refused
  end
  redis.call('hincrby', KEYS[1], ARGV[2], '1')
  redis.call('zrem', KEYS[4], ARGV[2])
  if not levels and redis.call('exists', KEYS[4]) == 1 then
    redis.call('hset', KEYS[1], field, token, WAITERS_MARK, '1')
  else
    redis.call('hset', KEYS[1], field, token)
  end
  redis.call('pexpire', KEYS[1], ARGV[1])
  if reserved then
    redis.call('del', KEYS[5])
  end
  return {-1, token}
end
local wait = longest_wait(KEYS[1], KEYS[5], reserved)
-- The mark goes only into a lock hash (a marked hash was one): a key of the application's under
-- the name stays as it is.
local listed = register(KEYS[4], ARGV[2], ARGV[3], wait)
if listed and not reserved and not marked and is_lock_hash(KEYS[1]) then
  redis.call('hset', KEYS[1], WAITERS_MARK, '1')
end
return {wait, -1}
