-- Fair lock (Redisson RFairLock): the start of every fair script.
-- KEYS[1] lock hash, KEYS[2] queue (LIST of owners), KEYS[3] timeouts (ZSET owner -> deadline
-- ms, Redisson's), KEYS[4] channel prefix (each waiter listens on prefix:owner), KEYS[5] the
-- polylock-only "seen" ZSET (owner -> last look + queue timeout), KEYS[6] the polylock-only
-- grants HASH (owner -> `<request>:<look>:<lease ms>` for waiters that accept the lock
-- directly, see `grant`, else `<request>`: either way the request whose look wrote it, which
-- holds the place),
-- KEYS[7] the prefix of the tombstones (a grant is refused to a request undone or left).
-- Times are the server's clock, so clients with skewed clocks agree on polylock's records;
-- Redisson's deadlines carry a 5-minute allowance, which absorbs their clients' skew.
local seen_key = KEYS[5]
local grants_key = KEYS[6]

-- The server's clock in ms, read only when a queue is there to judge (an empty queue needs no
-- clock: the uncontended cycle does without the call).
local now
local function read_clock()
  if not now then
    local clock = redis.call('time')
    now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
  end
  return now
end

-- Stale heads (deadline passed, or a polylock waiter that stopped looking) leave the queue.
-- The live head that remains (false: the queue is empty), its deadline and its liveness record
-- are what the script knows of the queue from here on, so no script reads it twice.
local head, head_deadline, head_seen
while true do
  head = redis.call('lindex', KEYS[2], '0')
  if not head then break end
  read_clock()
  head_deadline = tonumber(redis.call('zscore', KEYS[3], head))
  head_seen = tonumber(redis.call('zscore', seen_key, head))
  if head_deadline ~= nil and head_deadline > now and (head_seen == nil or head_seen > now) then
    break
  end
  redis.call('zrem', KEYS[3], head)
  redis.call('zrem', seen_key, head)
  redis.call('hdel', grants_key, head)
  redis.call('lpop', KEYS[2])
end

-- Wakes `waiter` (if any) on its own channel: the lock is free and it is next.
local function tell(waiter)
  if waiter then
    publish(KEYS[4] .. ':' .. waiter, '0')
  end
end

-- Whether someone queued has no liveness record: a Redisson waiter, whose deadline must follow
-- Redisson's arithmetic. A polylock waiter keeps its own deadline ahead of now while it lives,
-- so a queue of polylock waiters only is never walked: O(1) per acquisition, not O(queue).
local function redisson_queued()
  local deadlines = redis.call('zcard', KEYS[3])
  return deadlines > 0 and deadlines > redis.call('zcard', seen_key)
end

-- The head leaves the queue to take the lock. As Redisson: everyone behind moves up one place
-- and loses one allowance. (`head` still names it.)
local function head_takes_lock(allowance)
  redis.call('lpop', KEYS[2])
  redis.call('zrem', KEYS[3], head)
  redis.call('zrem', seen_key, head)
  redis.call('hdel', grants_key, head)
  if redisson_queued() then
    for _, waiter in ipairs(redis.call('zrange', KEYS[3], '0', '-1')) do
      redis.call('zincrby', KEYS[3], -allowance, waiter)
    end
  end
end

-- Passes the free lock on to the head. A head that accepts a grant (it has an entry in the
-- grants HASH) is granted it in this script (`grant`) and leaves the queue as if it had taken
-- it; a head not listening yet is not, and keeps its place: its next look, once subscribed,
-- takes the free lock. Any other head is told `0`, and comes to take the lock itself.
-- With nobody queued, `0` goes to the shared channel (KEYS[4], the channel prefix itself), as a
-- plain release sends it: the plain lock's waiters (polylock's and Redisson's RLock's) and the
-- FIFO lock's wait there for a lock of another kind on the name.
local function pass_on(allowance)
  if not head then
    publish(KEYS[4], '0')
    return
  end
  local entry = redis.call('hget', grants_key, head)
  if entry and grant(KEYS[1], KEYS[7], KEYS[4] .. ':' .. head, head, entry) then
    head_takes_lock(allowance)
    return
  end
  tell(head)
end

-- As Redisson's acquireFailed: those behind `owner` lose one allowance, `owner` leaves, and
-- if the lock is free it passes to the head. Not when `owner`'s grants entry names a request
-- other than `request`: a later call of the same owner has looked since and holds the place
-- now (a late undo or cancel must not take it away).
local function leave_queue(owner, allowance, request)
  local entry = redis.call('hget', grants_key, owner)
  if entry and entry ~= request and not entry_of(entry, request) then
    return
  end
  if redisson_queued() then
    local behind = false
    for _, waiter in ipairs(redis.call('lrange', KEYS[2], '0', '-1')) do
      if behind then
        redis.call('zincrby', KEYS[3], -allowance, waiter)
      elseif waiter == owner then
        behind = true
      end
    end
  end
  redis.call('zrem', KEYS[3], owner)
  redis.call('zrem', seen_key, owner)
  redis.call('hdel', grants_key, owner)
  redis.call('lrem', KEYS[2], '0', owner)
  if redis.call('exists', KEYS[1]) == 0 then
    if head == owner then
      head = redis.call('lindex', KEYS[2], '0')
    end
    pass_on(allowance)
  end
end

-- `owner`, whose acquisition from the head was just undone and who tries again at once (the
-- replicas did not confirm it) under `request`, takes the head of the queue back, with the
-- deadline of a head: the reverse of `head_takes_lock`, so it keeps its place in line. The place
-- is `request`'s, so an undo of that one removes it.
local function rejoin_at_head(owner, allowance, queue_timeout_ms, request)
  read_clock()
  if redisson_queued() then
    for _, waiter in ipairs(redis.call('zrange', KEYS[3], '0', '-1')) do
      redis.call('zincrby', KEYS[3], allowance, waiter)
    end
  end
  redis.call('lrem', KEYS[2], '0', owner)
  redis.call('lpush', KEYS[2], owner)
  redis.call('zadd', KEYS[3], now + allowance, owner)
  redis.call('zadd', seen_key, now + queue_timeout_ms, owner)
  redis.call('hset', grants_key, owner, request)
  if redis.call('pttl', seen_key) < 2 * queue_timeout_ms then
    redis.call('pexpire', seen_key, 2 * queue_timeout_ms)
    redis.call('pexpire', grants_key, 2 * queue_timeout_ms)
  end
  head = owner
end
