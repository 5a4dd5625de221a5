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
// Common KEYS: [1] lock, [2] queue (LIST of owners), [3] timeouts (ZSET owner -> deadline ms).
// Every script first drops queue heads whose deadline has passed (dead or vanished waiters).

const PRUNE_STALE_HEADS: &str = r#"
while true do
  local head = redis.call('lindex', KEYS[2], 0)
  if not head then break end
  local deadline = tonumber(redis.call('zscore', KEYS[3], head))
  if deadline ~= nil and deadline > tonumber(now) then break end
  redis.call('zrem', KEYS[3], head)
  redis.call('lpop', KEYS[2])
end
"#;

fn fair_script(now_arg: usize, body: &str) -> Script {
    Script::new(&format!(
        "local now = ARGV[{now_arg}]\n{PRUNE_STALE_HEADS}\n{body}"
    ))
}

/// ARGV[1] lease ms, ARGV[2] owner, ARGV[3] queue timeout ms, ARGV[4] now (epoch ms).
/// Replies nil when acquired, else how long to wait at most before looking again (ms).
///
/// A waiter's deadline is "last seen + queue timeout": each look refreshes it, so live waiters
/// keep their place however long the holder holds, and a dead one is skipped one timeout after
/// its last look. (Redisson instead stacks deadlines along the queue; both read the same ZSET.)
pub(crate) static FAIR_ACQUIRE: LazyLock<Script> = LazyLock::new(|| {
    fair_script(
        4,
        r#"
if redis.call('exists', KEYS[1]) == 0 then
  local head = redis.call('lindex', KEYS[2], 0)
  if (not head) or head == ARGV[2] then
    if head then
      redis.call('lpop', KEYS[2])
    end
    redis.call('zrem', KEYS[3], ARGV[2])
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
if redis.call('zadd', KEYS[3], tonumber(now) + tonumber(ARGV[3]), ARGV[2]) == 1 then
  redis.call('rpush', KEYS[2], ARGV[2])
end
local head = redis.call('lindex', KEYS[2], 0)
if head == ARGV[2] then
  -- Next in line: the release will tell us; meanwhile the holder's lease bounds the wait.
  return redis.call('pttl', KEYS[1])
end
-- Behind others: look again when the head's deadline passes (it may have died).
return tonumber(redis.call('zscore', KEYS[3], head)) - tonumber(now)
"#,
    )
});

/// KEYS[4] channel prefix, KEYS[5] unlock latch. ARGV[1] lease ms, ARGV[2] owner,
/// ARGV[3] latch lifetime ms, ARGV[4] now. Replies nil (not held), 0 (still held), 1 (released).
/// Only the head of the queue is told, on its own channel. When the key is already gone the
/// head is told all the same (the lock is free) and the caller learns it did not hold it.
pub(crate) static FAIR_RELEASE: LazyLock<Script> = LazyLock::new(|| {
    fair_script(
        4,
        r#"
local replay = redis.call('get', KEYS[5])
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
redis.call('set', KEYS[5], result, 'px', ARGV[3])
return result
"#,
    )
});

/// A waiter gives up: it leaves the queue, and if the lock is free the new head is told.
/// KEYS[4] channel prefix. ARGV[1] owner, ARGV[2] now.
pub(crate) static FAIR_CANCEL: LazyLock<Script> = LazyLock::new(|| {
    fair_script(
        2,
        r#"
redis.call('zrem', KEYS[3], ARGV[1])
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

/// KEYS[4] channel prefix. ARGV[1] now. Deletes the lock and tells the head. 1 when deleted.
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
