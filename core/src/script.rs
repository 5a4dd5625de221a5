//! The Lua scripts of the reentrant lock, written from `shared/PROTOCOL.md`.
//! `redis::Script` sends them with EVALSHA and falls back to EVAL on NOSCRIPT.

use std::sync::LazyLock;

use redis::Script;

/// KEYS[1] lock (KEYS[2], the channel, is passed but unused). ARGV[1] lease ms, ARGV[2] owner.
/// Replies nil when acquired (or re-entered), else the holder's PTTL.
pub(crate) static ACQUIRE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
if redis.call('exists', KEYS[1]) == 0 or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
return redis.call('pttl', KEYS[1])
"#,
    )
});

/// KEYS[1] lock, KEYS[2] channel, KEYS[3] unlock latch. ARGV[1] lease ms, ARGV[2] owner,
/// ARGV[3] latch lifetime ms. Replies nil (not held), 0 (still held) or 1 (released).
/// A retried request finds its first answer in the latch and replays it.
pub(crate) static RELEASE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
local replay = redis.call('get', KEYS[3])
if replay then
  return tonumber(replay)
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
  return nil
end
local result = 0
if redis.call('hincrby', KEYS[1], ARGV[2], -1) > 0 then
  redis.call('pexpire', KEYS[1], ARGV[1])
else
  redis.call('del', KEYS[1])
  redis.call('publish', KEYS[2], 0)
  result = 1
end
redis.call('set', KEYS[3], result, 'px', ARGV[3])
return result
"#,
    )
});

/// KEYS[1] lock, KEYS[2] channel. Replies 1 when a lock was deleted.
pub(crate) static FORCE_UNLOCK: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
if redis.call('del', KEYS[1]) == 1 then
  redis.call('publish', KEYS[2], 0)
  return 1
end
return 0
"#,
    )
});

/// KEYS = locks; ARGV[1] lease ms, ARGV[i+1] the owner of KEYS[i].
/// Replies one 1 (renewed) or 0 (gone: expired, deleted, taken, or not a lock) per key.
/// `pcall` so that one key of the wrong type does not fail the whole batch.
pub(crate) static RENEW: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
local renewed = {}
for i, key in ipairs(KEYS) do
  local held = redis.pcall('hexists', key, ARGV[i + 1])
  if held == 1 then
    redis.call('pexpire', key, ARGV[1])
    renewed[i] = 1
  else
    renewed[i] = 0
  end
end
return renewed
"#,
    )
});

/// KEYS[1] lock. Replies the PTTL when the key is a lock (a hash), -2 when there is none.
pub(crate) static INSPECT: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
local kind = redis.call('type', KEYS[1])['ok']
if kind == 'none' then
  return -2
end
if kind ~= 'hash' then
  return redis.error_reply('WRONGTYPE the key holds a ' .. kind)
end
return redis.call('pttl', KEYS[1])
"#,
    )
});

// ---- Fair lock (Redisson RFairLock layout) ----
//
// Common KEYS: [1] lock, [2] queue (LIST of owners), [3] timeouts (ZSET owner -> deadline ms),
// [4] channel prefix, [5] a polylock-only "seen" ZSET (owner -> last look + queue timeout).
//
// The timeouts ZSET follows Redisson's arithmetic exactly, because Redisson clients rewrite it:
// a new waiter's deadline is the last waiter's deadline (or the lock's expiry) plus one wait
// allowance W, and each acquisition from the head (or cancellation) subtracts W from those behind.
// A live polylock waiter also raises its own deadline to at least now + (position + 1) * W, so no
// number of acquisitions ahead of it can make it stale. Dead polylock waiters are still skipped one
// queue timeout after their last look, through the "seen" ZSET that only polylock reads.

const PRUNE_STALE_HEADS: &str = r#"
while true do
  local head = redis.call('lindex', KEYS[2], 0)
  if not head then break end
  local deadline = tonumber(redis.call('zscore', KEYS[3], head))
  local seen = tonumber(redis.call('zscore', seen_key, head))
  if deadline ~= nil and deadline > tonumber(now) and (seen == nil or seen > tonumber(now)) then break end
  redis.call('zrem', KEYS[3], head)
  redis.call('zrem', seen_key, head)
  redis.call('lpop', KEYS[2])
end
"#;

fn fair_script(now_arg: usize, body: &str) -> Script {
    Script::new(&format!(
        "local now = ARGV[{now_arg}]\nlocal seen_key = KEYS[5]\n{PRUNE_STALE_HEADS}\n{body}"
    ))
}

/// ARGV[1] lease ms, ARGV[2] owner, ARGV[3] queue timeout ms, ARGV[4] now (epoch
/// ms), ARGV[5] wait allowance W ms (Redisson's fairLockWaitTimeout, 5 min by default).
/// Replies nil when acquired, else how long to wait at most before looking again (ms).
pub(crate) static FAIR_ACQUIRE: LazyLock<Script> = LazyLock::new(|| {
    fair_script(
        4,
        r#"
local allowance = tonumber(ARGV[5])
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
    return nil
  end
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
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
  local base = last_deadline or (tonumber(now) + redis.call('pttl', KEYS[1]))
  position = #queued
  redis.call('zadd', KEYS[3], base + allowance, ARGV[2])
  redis.call('rpush', KEYS[2], ARGV[2])
end
-- Alive: never let the shared deadline pass, whatever the acquisitions ahead subtract.
local floor = tonumber(now) + (position + 1) * allowance
if (tonumber(redis.call('zscore', KEYS[3], ARGV[2])) or 0) < floor then
  redis.call('zadd', KEYS[3], floor, ARGV[2])
end
redis.call('zadd', seen_key, tonumber(now) + tonumber(ARGV[3]), ARGV[2])
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
return wake - tonumber(now)
"#,
    )
});

/// KEYS[6] unlock latch. ARGV[1] lease ms, ARGV[2] owner,
/// ARGV[3] latch lifetime ms, ARGV[4] now. Replies nil (not held), 0 (still held), 1 (released).
/// Only the head of the queue is told, on its own channel. When the key is already gone the
/// head is told all the same (the lock is free) and the caller learns it did not hold it.
pub(crate) static FAIR_RELEASE: LazyLock<Script> = LazyLock::new(|| {
    fair_script(
        4,
        r#"
local replay = redis.call('get', KEYS[6])
if replay then
  return tonumber(replay)
end
local function wake_head()
  local head = redis.call('lindex', KEYS[2], 0)
  if head then
    redis.call('publish', KEYS[4] .. ':' .. head, 0)
  end
end
if redis.call('exists', KEYS[1]) == 0 then
  wake_head()
  return nil
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
  return nil
end
local result = 0
if redis.call('hincrby', KEYS[1], ARGV[2], -1) > 0 then
  redis.call('pexpire', KEYS[1], ARGV[1])
else
  redis.call('del', KEYS[1])
  wake_head()
  result = 1
end
redis.call('set', KEYS[6], result, 'px', ARGV[3])
return result
"#,
    )
});

/// A waiter gives up: it leaves the queue (those behind lose one allowance, as in Redisson's
/// acquireFailed), and if the lock is free the new head is told.
/// ARGV[1] owner, ARGV[2] now, ARGV[3] allowance W ms.
pub(crate) static FAIR_CANCEL: LazyLock<Script> = LazyLock::new(|| {
    fair_script(
        2,
        r#"
local behind = false
for _, waiter in ipairs(redis.call('lrange', KEYS[2], 0, -1)) do
  if behind then
    redis.call('zincrby', KEYS[3], -tonumber(ARGV[3]), waiter)
  elseif waiter == ARGV[1] then
    behind = true
  end
end
redis.call('zrem', KEYS[3], ARGV[1])
redis.call('zrem', seen_key, ARGV[1])
redis.call('lrem', KEYS[2], 0, ARGV[1])
if redis.call('exists', KEYS[1]) == 0 then
  local head = redis.call('lindex', KEYS[2], 0)
  if head then
    redis.call('publish', KEYS[4] .. ':' .. head, 0)
  end
end
return 0
"#,
    )
});

/// ARGV[1] now. Deletes the lock and tells the head.
/// 1 when deleted.
pub(crate) static FAIR_FORCE_UNLOCK: LazyLock<Script> = LazyLock::new(|| {
    fair_script(
        1,
        r#"
if redis.call('del', KEYS[1]) == 1 then
  local head = redis.call('lindex', KEYS[2], 0)
  if head then
    redis.call('publish', KEYS[4] .. ':' .. head, 0)
  end
  return 1
end
return 0
"#,
    )
});
