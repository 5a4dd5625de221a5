//! Key and channel names of the Redisson data layout (`shared/PROTOCOL.md`), public for tools
//! that inspect locks (the `polylock` CLI).

/// `prefix:{name}`, or `prefix:name` when the name already carries a hash tag.
pub fn tagged(prefix: &str, name: &str) -> String {
    if name.contains('{') {
        format!("{prefix}:{name}")
    } else {
        format!("{prefix}:{{{name}}}")
    }
}

/// The channel a reentrant lock's release publishes on.
pub fn lock_channel(name: &str) -> String {
    tagged("redisson_lock__channel", name)
}

/// The latch key that makes one logical release idempotent across retries.
pub fn unlock_latch(name: &str, request_id: &str) -> String {
    format!("{}:{request_id}", tagged("redisson_unlock_latch", name))
}

/// polylock's own latch of one acquire request: `1` once it acquired, `0` once it was undone.
/// It makes an acquire whose reply was lost safe to retry and possible to undo.
pub fn acquire_latch(name: &str, request_id: &str) -> String {
    format!("{}:{request_id}", tagged("polylock_acquire_latch", name))
}

/// The fenced lock's token counter (a STRING, never expiring): every acquisition increments it.
pub fn fenced_token(name: &str) -> String {
    tagged("redisson_lock_token", name)
}

/// polylock's fence of a key written with `Client::fenced_set` / `fenced_delete`: a STRING, never
/// expiring, holding the highest token applied to that key. In the key's hash slot.
pub fn fence(key: &str) -> String {
    tagged("polylock_fence", key)
}

/// The fair lock's queue of waiting owners.
pub fn fair_queue(name: &str) -> String {
    tagged("redisson_lock_queue", name)
}

/// The fair lock's waiter deadlines.
pub fn fair_timeouts(name: &str) -> String {
    tagged("redisson_lock_timeout", name)
}

/// polylock's own record of when each fair-lock waiter last looked (Redisson ignores it).
pub fn fair_seen(name: &str) -> String {
    format!("{}:polylock_seen", fair_timeouts(name))
}

/// The channel on which a fair lock's release tells the waiter `owner` it is next.
pub fn fair_waiter_channel(name: &str, owner: &str) -> String {
    format!("{}:{owner}", lock_channel(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_protocol() {
        assert_eq!(
            lock_channel("orders:42"),
            "redisson_lock__channel:{orders:42}"
        );
        assert_eq!(lock_channel("a{b}c"), "redisson_lock__channel:a{b}c");
        assert_eq!(unlock_latch("x", "ab"), "redisson_unlock_latch:{x}:ab");
        assert_eq!(acquire_latch("x", "ab"), "polylock_acquire_latch:{x}:ab");
        assert_eq!(fenced_token("f"), "redisson_lock_token:{f}");
        assert_eq!(fenced_token("a{b}c"), "redisson_lock_token:a{b}c");
        assert_eq!(fence("stock:7"), "polylock_fence:{stock:7}");
        assert_eq!(fence("stock{eu}:7"), "polylock_fence:stock{eu}:7");
        assert_eq!(fair_queue("q"), "redisson_lock_queue:{q}");
        assert_eq!(fair_timeouts("q"), "redisson_lock_timeout:{q}");
        assert_eq!(fair_seen("q"), "redisson_lock_timeout:{q}:polylock_seen");
        assert_eq!(
            fair_waiter_channel("q", "u:1"),
            "redisson_lock__channel:{q}:u:1"
        );
    }
}
