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
while true do
  local head = redis.call('lindex', KEYS[2], 0)
  if not head then break end
  local deadline = tonumber(redis.call('zscore', KEYS[3], head))
  local seen = tonumber(redis.call('zscore', seen_key, head))
  if deadline ~= nil and deadline > now and (seen == nil or seen > now) then break end
  redis.call('zrem', KEYS[3], head)
  redis.call('zrem', seen_key, head)
  redis.call('lpop', KEYS[2])
end

local function wake_head()
  local head = redis.call('lindex', KEYS[2], 0)
  if head then
    redis.call('publish', KEYS[4] .. ':' .. head, 0)
  end
end

-- As Redisson's acquireFailed: those behind `owner` lose one allowance, `owner` leaves, and
-- if the lock is free the new head is told.
local function leave_queue(owner, allowance)
  local behind = false
  for _, waiter in ipairs(redis.call('lrange', KEYS[2], 0, -1)) do
    if behind then
      redis.call('zincrby', KEYS[3], -allowance, waiter)
    elseif waiter == owner then
      behind = true
    end
  end
  redis.call('zrem', KEYS[3], owner)
  redis.call('zrem', seen_key, owner)
  redis.call('lrem', KEYS[2], 0, owner)
  if redis.call('exists', KEYS[1]) == 0 then
    wake_head()
  end
end
