-- Fair lock (Redisson RFairLock): the start of every fair script.
-- KEYS[1] lock hash, KEYS[2] queue (LIST of owners), KEYS[3] timeouts (ZSET owner -> deadline
-- ms, Redisson's), KEYS[4] channel prefix (each waiter listens on prefix:owner), KEYS[5] the
-- polylock-only "seen" ZSET (owner -> last look + queue timeout).
-- Times are the server's clock, so clients with skewed clocks agree on polylock's records;
-- Redisson's deadlines carry a 5-minute allowance, which absorbs their clients' skew.
local clock = redis.call('time')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local seen_key = KEYS[5]

-- Stale heads (deadline passed, or a polylock waiter that stopped looking) leave the queue.
-- The live head that remains (false: the queue is empty), its deadline and its liveness record
-- are what the script knows of the queue from here on, so no script reads it twice.
local head, head_deadline, head_seen
while true do
  head = redis.call('lindex', KEYS[2], 0)
  if not head then break end
  head_deadline = tonumber(redis.call('zscore', KEYS[3], head))
  head_seen = tonumber(redis.call('zscore', seen_key, head))
  if head_deadline ~= nil and head_deadline > now and (head_seen == nil or head_seen > now) then
    break
  end
  redis.call('zrem', KEYS[3], head)
  redis.call('zrem', seen_key, head)
  redis.call('lpop', KEYS[2])
end

-- Wakes `waiter` (if any) on its own channel: the lock is free and it is next.
local function tell(waiter)
  if waiter then
    redis.call('publish', KEYS[4] .. ':' .. waiter, 0)
  end
end

-- Whether someone queued has no liveness record: a Redisson waiter, whose deadline must follow
-- Redisson's arithmetic. A polylock waiter keeps its own deadline ahead of now while it lives,
-- so a queue of polylock waiters only is never walked: O(1) per acquisition, not O(queue).
local function redisson_queued()
  local deadlines = redis.call('zcard', KEYS[3])
  return deadlines > 0 and deadlines > redis.call('zcard', seen_key)
end

-- As Redisson's acquireFailed: those behind `owner` lose one allowance, `owner` leaves, and
-- if the lock is free the new head is told.
local function leave_queue(owner, allowance)
  if redisson_queued() then
    local behind = false
    for _, waiter in ipairs(redis.call('lrange', KEYS[2], 0, -1)) do
      if behind then
        redis.call('zincrby', KEYS[3], -allowance, waiter)
      elseif waiter == owner then
        behind = true
      end
    end
  end
  redis.call('zrem', KEYS[3], owner)
  redis.call('zrem', seen_key, owner)
  redis.call('lrem', KEYS[2], 0, owner)
  if redis.call('exists', KEYS[1]) == 0 then
    if head == owner then
      head = redis.call('lindex', KEYS[2], 0)
    end
    tell(head)
  end
end
