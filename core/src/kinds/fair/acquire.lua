-- Fair lock: acquire, re-enter, or queue. KEYS[6] acquire latch of this request.
-- ARGV[1] lease ms, ARGV[2] owner, ARGV[3] queue timeout ms, ARGV[4] wait allowance W ms
-- (Redisson's fairLockWaitTimeout). The latch of an acquisition lives as long as its lease.
-- Replies nil when acquired (or already acquired by this request), UNDONE when the request was
-- undone, else how long to wait at most before looking again (ms).
local latch = redis.call('get', KEYS[6])
if latch == '0' then
  return redis.status_reply('UNDONE')
end
if latch == '1' and redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  -- A retry of a request that acquired: the lease starts again now, as the client counts it.
  redis.call('pexpire', KEYS[1], ARGV[1])
  redis.call('pexpire', KEYS[6], ARGV[1])
  return nil
end
local allowance = tonumber(ARGV[4])
if redis.call('exists', KEYS[1]) == 0 then
  local head = redis.call('lindex', KEYS[2], 0)
  if (not head) or head == ARGV[2] then
    if head then
      redis.call('lpop', KEYS[2])
    end
    redis.call('zrem', KEYS[3], ARGV[2])
    redis.call('zrem', seen_key, ARGV[2])
    -- As Redisson: everyone behind moves up one place and loses one allowance.
    for _, waiter in ipairs(redis.call('zrange', KEYS[3], 0, -1)) do
      redis.call('zincrby', KEYS[3], -allowance, waiter)
    end
    redis.call('hset', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    redis.call('set', KEYS[6], '1', 'px', ARGV[1])
    return nil
  end
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  redis.call('set', KEYS[6], '1', 'px', ARGV[1])
  return nil
end
local queued = redis.call('lrange', KEYS[2], 0, -1)
local position = nil
for i, waiter in ipairs(queued) do
  if waiter == ARGV[2] then
    position = i - 1
    break
  end
end
if position == nil then
  -- Join the tail as Redisson does: the last waiter's deadline (or the lock's expiry) + W.
  local last = queued[#queued]
  local last_deadline = last and tonumber(redis.call('zscore', KEYS[3], last))
  local base = last_deadline or (now + redis.call('pttl', KEYS[1]))
  position = #queued
  redis.call('zadd', KEYS[3], base + allowance, ARGV[2])
  redis.call('rpush', KEYS[2], ARGV[2])
end
-- Alive: never let the shared deadline pass, whatever the acquisitions ahead subtract.
local floor = now + (position + 1) * allowance
if (tonumber(redis.call('zscore', KEYS[3], ARGV[2])) or 0) < floor then
  redis.call('zadd', KEYS[3], floor, ARGV[2])
end
redis.call('zadd', seen_key, now + tonumber(ARGV[3]), ARGV[2])
if redis.call('pttl', seen_key) < 2 * tonumber(ARGV[3]) then
  redis.call('pexpire', seen_key, 2 * tonumber(ARGV[3]))
end
local head = redis.call('lindex', KEYS[2], 0)
if head == ARGV[2] then
  -- Next in line: the release will tell us; meanwhile the holder's lease bounds the wait.
  return redis.call('pttl', KEYS[1])
end
-- Behind others: look again when the head's deadline passes (it may have died).
local wake = tonumber(redis.call('zscore', KEYS[3], head))
local seen = tonumber(redis.call('zscore', seen_key, head))
if seen ~= nil and seen < wake then
  wake = seen
end
return wake - now
