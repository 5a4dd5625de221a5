//! Redisson's `RLock` and `RFairLock`, emulated for tests: their scripts written from the
//! layout (docs/PROTOCOL.md, "Reentrant lock" and "Fair lock"), for the tests and the protocol
//! explorer that run Redisson's wait loops beside polylock's clients. A publish is given as a
//! Lua statement with `{channel}` where the channel goes ([`PUBLISH`] on a real server), so the
//! explorer can route the messages itself.

/// `tryLock`: take a free lock or re-enter (the owner's count, the lease as TTL), else reply the
/// PTTL. KEYS[1] the lock; ARGV[1] the lease (ms), ARGV[2] the owner.
pub const RLOCK_TRY: &str = "\
if redis.call('exists', KEYS[1]) == 0 or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
return redis.call('pttl', KEYS[1])";

/// Both unlocks' end: one level off (the lease again while levels are left); the last deletes
/// the hash and calls `freed()`. Replies nil (not held), 0 (still held), 1 (released).
const TAKE_LEVEL_OFF: &str = "\
if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
  return nil
end
if redis.call('hincrby', KEYS[1], ARGV[2], -1) > 0 then
  redis.call('pexpire', KEYS[1], ARGV[1])
  return 0
end
redis.call('del', KEYS[1])
freed()
return 1";

/// `unlock`, publishing `0` with `publish` (see the module) on the lock's channel once free.
/// KEYS[1] the lock, KEYS[2] its channel; ARGV[1] the lease (ms), ARGV[2] the owner.
pub fn rlock_unlock(publish: &str) -> String {
    let publish = publish.replace("{channel}", "KEYS[2]");
    format!("local function freed()\n  {publish}\nend\n{TAKE_LEVEL_OFF}")
}

/// The publish of `0` on a real server.
pub const PUBLISH: &str = "redis.call('publish', {channel}, '0')";

/// What every `RFairLock` script does first: drop the heads of the queue (KEYS[2], a LIST of
/// owners) whose deadline (in the timeouts ZSET, KEYS[3]) has passed, by the server's clock.
/// Defines `now` (ms).
const RFAIR_PRUNE: &str = "\
local time = redis.call('time')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
while true do
  local head = redis.call('lindex', KEYS[2], 0)
  if not head then break end
  local deadline = tonumber(redis.call('zscore', KEYS[3], head))
  if deadline and deadline > now then break end
  redis.call('zrem', KEYS[3], head)
  redis.call('lpop', KEYS[2])
end
";

/// `RFairLock.tryLock`: take the lock when it is free and the queue is empty or headed by
/// this owner (leaving the queue, and taking its wait off every deadline left), or re-enter;
/// else queue (once) with a deadline one wait after the one ahead's (or after the holder's
/// PTTL), and reply how long until its turn. KEYS[1] the lock, KEYS[2] the queue, KEYS[3] the
/// timeouts; ARGV[1] the lease (ms), ARGV[2] the owner, ARGV[3] the wait per queued waiter
/// (ms).
pub fn rfair_try() -> String {
    format!(
        "{RFAIR_PRUNE}\
if redis.call('exists', KEYS[1]) == 0 and (redis.call('exists', KEYS[2]) == 0
    or redis.call('lindex', KEYS[2], 0) == ARGV[2]) then
  redis.call('lpop', KEYS[2])
  redis.call('zrem', KEYS[3], ARGV[2])
  for _, waiter in ipairs(redis.call('zrange', KEYS[3], 0, -1)) do
    redis.call('zincrby', KEYS[3], -tonumber(ARGV[3]), waiter)
  end
  redis.call('hset', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
local deadline = redis.call('zscore', KEYS[3], ARGV[2])
if deadline then
  return tonumber(deadline) - tonumber(ARGV[3]) - now
end
local last = redis.call('lindex', KEYS[2], -1)
local ttl
if last and last ~= ARGV[2] then
  ttl = tonumber(redis.call('zscore', KEYS[3], last)) - now
else
  ttl = redis.call('pttl', KEYS[1])
end
if redis.call('zadd', KEYS[3], ttl + tonumber(ARGV[3]) + now, ARGV[2]) == 1 then
  redis.call('rpush', KEYS[2], ARGV[2])
end
return ttl"
    )
}

/// `RFairLock.unlock`, publishing `0` with `publish` to the head of the queue on its own
/// channel (KEYS[4] `:` its owner) once free, and when it finds the lock gone. KEYS as
/// [`rfair_try`]'s, and KEYS[4] the lock channel; ARGV[1] the lease (ms), ARGV[2] the owner.
pub fn rfair_unlock(publish: &str) -> String {
    let publish = publish.replace("{channel}", "KEYS[4] .. ':' .. head");
    format!(
        "{RFAIR_PRUNE}\
local function freed()
  local head = redis.call('lindex', KEYS[2], 0)
  if head then
    {publish}
  end
end
if redis.call('exists', KEYS[1]) == 0 then
  freed()
  return 1
end
{TAKE_LEVEL_OFF}"
    )
}

/// A `RFairLock` waiter that gives up leaves the queue, and every waiter behind it gets its
/// wait back off its deadline. KEYS as [`rfair_try`]'s; ARGV[1] the owner, ARGV[2] the wait per
/// queued waiter (ms).
pub fn rfair_leave() -> String {
    format!(
        "{RFAIR_PRUNE}\
local queue = redis.call('lrange', KEYS[2], 0, -1)
local behind = false
for _, waiter in ipairs(queue) do
  if behind then
    redis.call('zincrby', KEYS[3], -tonumber(ARGV[2]), waiter)
  elseif waiter == ARGV[1] then
    behind = true
  end
end
redis.call('lrem', KEYS[2], 0, ARGV[1])
redis.call('zrem', KEYS[3], ARGV[1])
return 0"
    )
}
