//! The Lua scripts of the reentrant lock, written from `shared/PROTOCOL.md`.
//! `redis::Script` sends them with EVALSHA and falls back to EVAL on NOSCRIPT.

use std::sync::LazyLock;

use redis::Script;

/// KEYS[1] lock. ARGV[1] lease ms, ARGV[2] owner.
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
