//! Redisson's `RLock`, emulated for tests: its scripts written from the layout
//! (docs/PROTOCOL.md, "Reentrant lock"), for the tests and the protocol explorer that run
//! Redisson's wait loop beside polylock's clients.

/// `tryLock`: take a free lock or re-enter (the owner's count, the lease as TTL), else reply the
/// PTTL. KEYS[1] the lock; ARGV[1] the lease (ms), ARGV[2] the owner.
pub const RLOCK_TRY: &str = "\
if redis.call('exists', KEYS[1]) == 0 or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
return redis.call('pttl', KEYS[1])";

/// `unlock`, publishing with `publish` (a Lua statement that publishes the message `0` on the
/// channel KEYS[2]): one level off (the lease again while levels are left); the last deletes
/// the hash and publishes. KEYS[1] the lock, KEYS[2] its channel; ARGV[1] the lease (ms),
/// ARGV[2] the owner. Replies nil (not held), 0 (still held), 1 (released).
pub fn rlock_unlock(publish: &str) -> String {
    format!(
        "\
if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
  return nil
end
if redis.call('hincrby', KEYS[1], ARGV[2], -1) > 0 then
  redis.call('pexpire', KEYS[1], ARGV[1])
  return 0
end
redis.call('del', KEYS[1])
{publish}
return 1"
    )
}

/// The publish of [`rlock_unlock`] on a real server.
pub const PUBLISH: &str = "redis.call('publish', KEYS[2], '0')";
