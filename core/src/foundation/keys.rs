//! Key and channel names of the Redisson data layout (`shared/PROTOCOL.md`), public for tools
//! that inspect locks (the `polylock` CLI).

/// `prefix:{name}`, or `prefix:name` when the name already carries a hash tag.
pub fn tagged(prefix: &str, name: &str) -> String {
    tagged_with_room(prefix, name, 0)
}

/// [`tagged`], with room for `room` more bytes (so a key built on it takes one allocation).
fn tagged_with_room(prefix: &str, name: &str, room: usize) -> String {
    let has_tag = name.contains('{');
    let mut key = String::with_capacity(prefix.len() + 1 + name.len() + 2 + room);
    key.push_str(prefix);
    key.push(':');
    if has_tag {
        key.push_str(name);
    } else {
        key.push('{');
        key.push_str(name);
        key.push('}');
    }
    key
}

/// `tagged(prefix, name)` then `:tail`, in one allocation (the per-call keys: latches, a release
/// trace, a told channel).
fn tagged_then(prefix: &str, name: &str, tail: &str) -> String {
    let mut key = tagged_with_room(prefix, name, 1 + tail.len());
    key.push(':');
    key.push_str(tail);
    key
}

/// `{name}:suffix`, or `name:suffix` when the name already carries a hash tag (Redisson's
/// `suffixName`).
pub fn suffixed(name: &str, suffix: &str) -> String {
    if name.contains('{') {
        format!("{name}:{suffix}")
    } else {
        format!("{{{name}}}:{suffix}")
    }
}

/// The channel a reentrant lock's release publishes on.
pub fn lock_channel(name: &str) -> String {
    tagged("redisson_lock__channel", name)
}

/// polylock's list of a reentrant lock's waiters (a ZSET owner -> arrival): a release tells the
/// earliest one still listening, on its own channel.
pub fn lock_waiters(name: &str) -> String {
    tagged("polylock_lock_waiters", name)
}

/// The owner a free reentrant lock is kept for while the waiter told comes to take it.
pub fn lock_reservation(name: &str) -> String {
    tagged("polylock_lock_reserved", name)
}

/// The prefix of the channels on which a reentrant lock's waiters are told, one per owner.
pub fn lock_told_prefix(name: &str) -> String {
    tagged("polylock_lock_told", name)
}

/// The channel on which a release tells the reentrant lock's waiter `owner` to look.
pub fn lock_told_channel(name: &str, owner: &str) -> String {
    tagged_then("polylock_lock_told", name, owner)
}

/// polylock's HASH of the waiters of a reentrant lock that accept the lock directly (owner ->
/// the acquire request it waits under): a release grants the lock to such a waiter in the same
/// script, and tells it so, instead of keeping the lock for it to come and take.
pub fn lock_grants(name: &str) -> String {
    tagged("polylock_lock_grants", name)
}

/// The channel every polylock client subscribes to together with a reentrant lock's channel
/// (after it, and leaves before it): nothing is published on it, but its subscriber count,
/// taken from the lock's, tells a script how many clients other than polylock (Redisson's)
/// listen for the lock's releases.
pub fn lock_listening_channel(name: &str) -> String {
    tagged("polylock_lock_listening", name)
}

/// The latch key that makes one logical release idempotent across retries.
pub fn unlock_latch(name: &str, request_id: &str) -> String {
    tagged_then("redisson_unlock_latch", name, request_id)
}

/// The trace of an owner's last final release of a reentrant, fenced, fair or FIFO lock: the
/// released lock hash, renamed, whose level field a retry of that release finds. One per lock
/// and owner (the next final release replaces it; `engine/release_gate.rs` keeps the owner's
/// next acquire and release back until a release has its answer). It lives for the caller's
/// retry window only (`engine::release::trace_window`).
pub fn release_trace(name: &str, owner: &str) -> String {
    tagged_then("polylock_released", name, owner)
}

/// polylock's own latch of one acquire request: `0` once it was undone (a tombstone), and for
/// the semaphores and the read-write lock `1` once it acquired (the reentrant, fenced and fair
/// locks record an acquisition in the lock hash instead). It makes an acquire whose reply was
/// lost safe to retry and possible to undo.
pub fn acquire_latch(name: &str, request_id: &str) -> String {
    tagged_then("polylock_acquire_latch", name, request_id)
}

/// The prefix of a lock's acquire latches (`<prefix>:<request>`): a release that grants the lock
/// to a waiter writes that waiter's latch, whose request it learns only from the grants HASH.
pub fn acquire_latch_prefix(name: &str) -> String {
    tagged("polylock_acquire_latch", name)
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

/// The channel of a read-write lock: `0` after a read release, `1` after a write release.
pub fn rwlock_channel(name: &str) -> String {
    tagged("redisson_rwlock", name)
}

/// The prefix of the keys that give each read level of `owner` its own lease (`<prefix>:<n>`
/// for level n).
pub fn rwlock_timeout_prefix(name: &str, owner: &str) -> String {
    format!("{}:rwlock_timeout", suffixed(name, owner))
}

/// polylock's own ZSET of the writers waiting for a read-write lock (`<owner>:write` -> server
/// time ms until which the registration holds).
pub fn rwlock_writers(name: &str) -> String {
    tagged("polylock_rwlock_writers", name)
}

/// polylock's own ZSET of the readers waiting for a read-write lock (`<owner>` -> server time
/// ms until which the registration holds).
pub fn rwlock_readers(name: &str) -> String {
    tagged("polylock_rwlock_readers", name)
}

/// polylock's own ZSET of when each waiting reader and writer of a read-write lock began to
/// wait (member as in the two ZSETs above -> server time ms): a waiter defers only to live
/// waiters of the other side that began before it.
pub fn rwlock_since(name: &str) -> String {
    tagged("polylock_rwlock_since", name)
}

/// The channel of both semaphores: a release publishes the permits now available.
pub fn semaphore_channel(name: &str) -> String {
    tagged("redisson_sc", name)
}

/// The expirable semaphore's ZSET of acquired permits (16-byte id -> expiry, epoch ms).
pub fn permit_timeouts(name: &str) -> String {
    suffixed(name, "timeout")
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

/// polylock's HASH of a fair lock's queued waiters that accept the lock directly (owner -> the
/// acquire request it waits under): a release grants the lock to such a head in the same script.
pub fn fair_grants(name: &str) -> String {
    tagged("polylock_fair_grants", name)
}

/// The channel on which a fair lock's release tells the waiter `owner` it is next.
pub fn fair_waiter_channel(name: &str, owner: &str) -> String {
    format!("{}:{owner}", lock_channel(name))
}

/// polylock's FIFO lock: its line of waiting owners (a LIST, arrival order). Entries of waiters
/// whose record lapsed (see [`fifo_waiter_record`]) leave it at the next look or release.
pub fn fifo_line(name: &str) -> String {
    tagged("polylock_fifo_line", name)
}

/// The prefix of a FIFO lock's waiter records (`<prefix>:<owner>`).
pub fn fifo_waiter_prefix(name: &str) -> String {
    tagged("polylock_fifo_waiter", name)
}

/// A FIFO lock waiter's record: a STRING whose TTL (the fair queue timeout, renewed at every
/// look) is the waiter's liveness, holding its grant entry `<request>:<look>:<lease ms>`, or `-`
/// when it accepts no grant.
pub fn fifo_waiter_record(name: &str, owner: &str) -> String {
    format!("{}:{owner}", fifo_waiter_prefix(name))
}

/// The prefix of the channels on which a FIFO lock's release tells or grants its head.
pub fn fifo_channel_prefix(name: &str) -> String {
    tagged("polylock_fifo_channel", name)
}

/// The channel on which a FIFO lock's release tells (or grants) the waiter `owner`.
pub fn fifo_waiter_channel(name: &str, owner: &str) -> String {
    format!("{}:{owner}", fifo_channel_prefix(name))
}

/// polylock's record of an election's leader (a HASH: `owner`, `value`, `term`, `client`),
/// beside the election's fenced lock `name`; read only while `owner` holds that lock.
pub fn election_record(name: &str) -> String {
    tagged("polylock_election", name)
}

/// The channel on which an election's changes are published (a new leader's term, `0` on a
/// resign), for observers to look again.
pub fn election_channel(name: &str) -> String {
    tagged("polylock_election_channel", name)
}

/// polylock's mark beside a count-down latch (a STRING `1`, no expiry, kept while the latch's
/// count is): a latch's count and a semaphore's permits are stored alike (a string holding an
/// integer), and the mark is how tools (`Client::inspect`) tell a latch. Redisson writes none:
/// its latches read as semaphores.
pub fn latch_mark(name: &str) -> String {
    tagged("polylock_latch", name)
}

/// The prefix of the client records, `polylock:client:<client-id>`.
pub const CLIENT_RECORD_PREFIX: &str = "polylock:client:";

/// The record of the client `client_id` (the first half of its owner strings): a hash saying
/// which program that client is and what it holds (`docs/PROTOCOL.md`).
pub fn client_record(client_id: &str) -> String {
    format!("{CLIENT_RECORD_PREFIX}{client_id}")
}

/// The client id of an owner string `<client-id>:<holder-id>` (a read-write lock's writer
/// field, `<client-id>:<holder-id>:write`, too).
pub fn owner_client_id(owner: &str) -> &str {
    let owner = owner.strip_suffix(":write").unwrap_or(owner);
    owner.rsplit_once(':').map_or(owner, |(client, _)| client)
}

/// Whether `key` is one the kinds keep beside a name (Redisson's and polylock's latches,
/// counters, queues, fences, read levels, permit sets) or a client record, and so never a
/// name itself.
pub fn is_auxiliary(key: &str) -> bool {
    key.starts_with("redisson_")
        || key.starts_with("polylock_")
        || key.starts_with(CLIENT_RECORD_PREFIX)
        || key.contains(":rwlock_timeout:")
        || (key.ends_with("}:timeout") && key.starts_with('{'))
}

/// The channel of a count-down latch, as Redisson names it: `redisson_countdownlatch__channel__`
/// then the name in braces, always (even when the name carries a hash tag of its own). Messages:
/// `1` a count was set or the latch deleted, `0` a count down reached zero.
pub fn latch_channel(name: &str) -> String {
    format!("redisson_countdownlatch__channel__{{{name}}}")
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
        assert_eq!(lock_waiters("x"), "polylock_lock_waiters:{x}");
        assert_eq!(lock_reservation("x"), "polylock_lock_reserved:{x}");
        assert_eq!(lock_told_channel("x", "u:1"), "polylock_lock_told:{x}:u:1");
        assert_eq!(lock_listening_channel("x"), "polylock_lock_listening:{x}");
        assert_eq!(unlock_latch("x", "ab"), "redisson_unlock_latch:{x}:ab");
        assert_eq!(acquire_latch("x", "ab"), "polylock_acquire_latch:{x}:ab");
        assert_eq!(release_trace("x", "u:1"), "polylock_released:{x}:u:1");
        assert_eq!(release_trace("{t}x", "u:1"), "polylock_released:{t}x:u:1");
        assert_eq!(fenced_token("f"), "redisson_lock_token:{f}");
        assert_eq!(fenced_token("a{b}c"), "redisson_lock_token:a{b}c");
        assert_eq!(fence("stock:7"), "polylock_fence:{stock:7}");
        assert_eq!(fence("stock{eu}:7"), "polylock_fence:stock{eu}:7");
        assert_eq!(fair_queue("q"), "redisson_lock_queue:{q}");
        assert_eq!(rwlock_channel("rw"), "redisson_rwlock:{rw}");
        assert_eq!(
            rwlock_timeout_prefix("rw", "u:1"),
            "{rw}:u:1:rwlock_timeout"
        );
        assert_eq!(
            rwlock_timeout_prefix("a{b}", "u:1"),
            "a{b}:u:1:rwlock_timeout"
        );
        assert_eq!(rwlock_writers("rw"), "polylock_rwlock_writers:{rw}");
        assert_eq!(rwlock_readers("rw"), "polylock_rwlock_readers:{rw}");
        assert_eq!(rwlock_since("r{w}"), "polylock_rwlock_since:r{w}");
        assert_eq!(semaphore_channel("s"), "redisson_sc:{s}");
        assert_eq!(permit_timeouts("s"), "{s}:timeout");
        assert_eq!(permit_timeouts("s{t}"), "s{t}:timeout");
        assert_eq!(fair_timeouts("q"), "redisson_lock_timeout:{q}");
        assert_eq!(fair_seen("q"), "redisson_lock_timeout:{q}:polylock_seen");
        assert_eq!(fair_grants("q"), "polylock_fair_grants:{q}");
        assert_eq!(fifo_line("q"), "polylock_fifo_line:{q}");
        assert_eq!(
            fifo_waiter_record("q", "u:1"),
            "polylock_fifo_waiter:{q}:u:1"
        );
        assert_eq!(
            fifo_waiter_channel("q", "u:1"),
            "polylock_fifo_channel:{q}:u:1"
        );
        assert_eq!(
            fair_waiter_channel("q", "u:1"),
            "redisson_lock__channel:{q}:u:1"
        );
        assert_eq!(client_record("u"), "polylock:client:u");
        assert_eq!(latch_mark("ready"), "polylock_latch:{ready}");
        assert_eq!(election_record("e"), "polylock_election:{e}");
        let owner = "6e3814a1-e847-452b-a982-45baf93a1df2:7";
        assert_eq!(
            owner_client_id(owner),
            "6e3814a1-e847-452b-a982-45baf93a1df2"
        );
        assert_eq!(
            owner_client_id(&format!("{owner}:write")),
            "6e3814a1-e847-452b-a982-45baf93a1df2"
        );
        assert!(is_auxiliary("polylock:client:u"));
        assert_eq!(
            latch_channel("ready"),
            "redisson_countdownlatch__channel__{ready}"
        );
        assert_eq!(
            latch_channel("a{b}"),
            "redisson_countdownlatch__channel__{a{b}}"
        );
    }
}
