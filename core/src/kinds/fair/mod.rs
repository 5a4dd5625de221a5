//! The fair lock (Redisson RFairLock): the reentrant lock's hash, plus a queue of waiting owners
//! and their deadlines; a release wakes only the head, on its own channel.
//!
//! The deadline ZSET follows Redisson's arithmetic, because Redisson clients rewrite it: a new
//! waiter's deadline is the lock's expiry plus one allowance W per place up to its own, and each
//! acquisition from the head (or cancellation) subtracts W from those behind. A live polylock
//! waiter also raises its own deadline to at least now + (position + 1) * W at every look, so no
//! number of acquisitions ahead of it can make it stale; that is why the subtraction, which
//! walks the whole queue, is only done while a Redisson waiter (one without polylock's liveness
//! record) is queued, and a queue of polylock waiters costs O(1) per acquisition. A dead polylock
//! waiter is skipped one queue timeout after its last look, through a "seen" ZSET that only
//! polylock reads.
//!
//! A release passes the lock to the head of the queue: it grants it in the same script to a
//! polylock head held by the watchdog (which registered a grant entry for it, in a grants
//! HASH), for that waiter's whole lease, and tells that waiter so on its channel; the head then
//! holds it without an acquire of its own. Any other head (Redisson's,
//! or a fixed lease) is told the lock is free and comes to take it, as in Redisson.

use std::sync::LazyLock;
use std::time::Duration;

use redis::{ScriptInvocation, Value};

use crate::connection::Publish;
use crate::foundation::keys;
use crate::kinds::script::LockScript;
use crate::kinds::{
    read_queued_acquire, AcquireArgs, Attempt, LockKind, ReleaseArgs, Renewal, UndoArgs, WaitPolicy,
};
use crate::settings::options::ClientOptions;

/// Redisson's default `fairLockWaitTimeout` (5 min): the allowance each queued waiter adds to
/// the deadlines behind it, and which each acquisition from the head subtracts again.
const WAIT_ALLOWANCE: Duration = Duration::from_secs(300);

static ACQUIRE: LazyLock<LockScript> = lock_script!(
    "../lock_fields.lua",
    "../lock_hash.lua",
    "prelude.lua",
    "acquire.lua"
);
static RELEASE: LazyLock<LockScript> = lock_script!(
    "../lock_fields.lua",
    "../lock_hash.lua",
    "prelude.lua",
    "release.lua"
);
static UNDO: LazyLock<LockScript> = lock_script!(
    "../lock_fields.lua",
    "../lock_hash.lua",
    "prelude.lua",
    "undo.lua"
);
static CANCEL: LazyLock<LockScript> = lock_script!(
    "../lock_fields.lua",
    "../lock_hash.lua",
    "prelude.lua",
    "cancel.lua"
);
static FORCE_UNLOCK: LazyLock<LockScript> = lock_script!(
    "../lock_fields.lua",
    "../lock_hash.lua",
    "prelude.lua",
    "force_unlock.lua"
);

pub(crate) struct Fair {
    /// The name as the user gave it (errors, metrics).
    name: String,
    /// The name under the client's key prefix, from which every key and channel derives.
    key: String,
    queue: String,
    timeouts: String,
    seen: String,
    grants: String,
    latch_prefix: String,
    /// `redisson_lock__channel:{name}`; each waiter listens on `<prefix>:<owner>`.
    channel_prefix: String,
    publish: Publish,
}

impl Fair {
    pub(crate) fn new(name: &str, key: &str, publish: Publish) -> Fair {
        Fair {
            name: name.to_owned(),
            key: key.to_owned(),
            queue: keys::fair_queue(key),
            timeouts: keys::fair_timeouts(key),
            seen: keys::fair_seen(key),
            grants: keys::fair_grants(key),
            latch_prefix: keys::acquire_latch_prefix(key),
            channel_prefix: keys::lock_channel(key),
            publish,
        }
    }

    /// A call of `script` with the keys every fair script starts with.
    fn call(&self, script: &'static LockScript) -> ScriptInvocation<'static> {
        let mut call = script.prepare_invoke(self.publish);
        call.key(&self.key)
            .key(&self.queue)
            .key(&self.timeouts)
            .key(&self.channel_prefix)
            .key(&self.seen)
            .key(&self.grants)
            .key(&self.latch_prefix);
        call
    }
}

fn allowance_ms() -> u64 {
    WAIT_ALLOWANCE.as_millis() as u64
}

impl LockKind for Fair {
    fn kind_name(&self) -> &'static str {
        crate::metrics::kind::FAIR_LOCK
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn key(&self) -> &str {
        &self.key
    }

    /// The shared channel (the channel prefix itself): a release of another kind of lock on
    /// the name (the plain lock, Redisson's RLock, the FIFO lock) tells it there that the lock
    /// is free.
    fn wait_channel(&self, _owner: &str) -> String {
        self.channel_prefix.clone()
    }

    /// Its own channel (Redisson's), on which a fair release tells or grants it the lock.
    fn told_channel(&self, owner: &str) -> Option<String> {
        Some(keys::fair_waiter_channel(&self.key, owner))
    }

    /// The plain lock's listening channel, subscribed with the shared channel (so polylock's
    /// waiters are not counted as Redisson's there).
    fn listening_channel(&self) -> Option<String> {
        Some(keys::lock_listening_channel(&self.key))
    }

    /// Told directly and kept subscribed; a waiter looks again before the queue timeout
    /// passes, or it would lose its place.
    fn wait_policy(&self, options: &ClientOptions) -> WaitPolicy {
        WaitPolicy {
            grants_directly: true,
            keeps_subscription: true,
            serves_in_order: true,
            longest_wait: Some(options.fair_queue_timeout / 2),
            ..WaitPolicy::default()
        }
    }

    /// Still held (a release in between found this waiter not yet listening, and left the lock
    /// free for it to take), and still queued.
    fn nothing_missed(&self, owner: &str) -> Option<redis::Pipeline> {
        let mut pipe = redis::pipe();
        pipe.exists(&self.key).zscore(&self.timeouts, owner);
        Some(pipe)
    }

    fn acquire(
        &self,
        args: &AcquireArgs<'_>,
        options: &ClientOptions,
    ) -> ScriptInvocation<'static> {
        let mut call = self.call(&ACQUIRE);
        call.key(keys::acquire_latch(&self.key, args.request))
            .arg(args.lease_ms)
            .arg(args.owner)
            .arg(options.fair_queue_timeout.as_millis() as u64)
            .arg(allowance_ms())
            .arg(args.grant_entry())
            .arg(args.request)
            .arg(if args.reenters { "1" } else { "0" });
        call
    }

    fn read_acquire(&self, reply: Value) -> Result<Attempt, Value> {
        read_queued_acquire(reply)
    }

    fn undo_acquire(
        &self,
        args: &UndoArgs<'_>,
        options: &ClientOptions,
    ) -> ScriptInvocation<'static> {
        let mut call = self.call(&UNDO);
        call.key(keys::acquire_latch(&self.key, args.request))
            .arg(args.owner)
            .arg(args.latch_ms)
            .arg(args.lease_ms)
            .arg(allowance_ms())
            .arg(args.keeps_place.unwrap_or(""))
            .arg(options.fair_queue_timeout.as_millis() as u64)
            .arg(args.request);
        call
    }

    fn release(&self, args: &ReleaseArgs<'_>) -> ScriptInvocation<'static> {
        let mut call = self.call(&RELEASE);
        call.key(keys::release_trace(&self.key, args.owner))
            .arg(args.lease_ms)
            .arg(args.owner)
            .arg(args.acquired_by)
            .arg(allowance_ms())
            .arg(args.trace_ms);
        call
    }

    fn leave_queue(
        &self,
        owner: &str,
        request: &str,
        latch_ms: u64,
        _: &ClientOptions,
    ) -> Option<ScriptInvocation<'static>> {
        let mut call = self.call(&CANCEL);
        call.key(keys::acquire_latch(&self.key, request))
            .arg(owner)
            .arg(allowance_ms())
            .arg(latch_ms)
            .arg(request);
        Some(call)
    }

    fn force_unlock(&self) -> Option<ScriptInvocation<'static>> {
        let mut call = self.call(&FORCE_UNLOCK);
        call.arg(allowance_ms());
        Some(call)
    }

    fn renewal(&self, owner: &str) -> Renewal {
        Renewal::of_hash(&self.key, owner.to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OWNER: &str = "6b1f1f5e-0000-4000-8000-000000000001:1";
    const BEHIND: &str = "6b1f1f5e-0000-4000-8000-000000000002:1";

    use crate::kinds::look_as;

    /// The undo of a request whose reply was lost runs after the same handle's next call has
    /// looked, and so holds the owner's place: that place stays (Redisson's entries with it),
    /// and the owner is served before a waiter that queued after it.
    #[test]
    fn a_late_undo_leaves_the_place_a_later_request_of_the_owner_took() {
        let server = polylock_testkit::RedisServer::start();
        let mut con = redis::Client::open(server.url())
            .unwrap()
            .get_connection()
            .unwrap();
        let fair = Fair::new("late-undo", "late-undo", Publish::Plain);
        let _: () = redis::cmd("HSET")
            .arg("late-undo")
            .arg("6b1f1f5e-0000-4000-8000-0000000000ee:1") // someone else: a real owner field, or force_unlock refuses the hash
            .arg(1)
            .query(&mut con)
            .unwrap();
        let (first, later) = (
            "11111111111111111111111111111111",
            "22222222222222222222222222222222",
        );
        assert!(matches!(
            look_as(&fair, &mut con, OWNER, first),
            Attempt::Busy(_)
        ));
        assert!(matches!(
            look_as(&fair, &mut con, BEHIND, "b"),
            Attempt::Busy(_)
        ));
        assert!(matches!(
            look_as(&fair, &mut con, OWNER, later),
            Attempt::Busy(_)
        ));
        let undo = UndoArgs {
            owner: OWNER,
            request: first,
            latch_ms: 60_000,
            lease_ms: 0,
            keeps_place: None,
        };
        let undone: i64 = fair
            .undo_acquire(&undo, &ClientOptions::default())
            .invoke(&mut con)
            .unwrap();
        assert_eq!(undone, 0);
        // Redisson's view is unchanged: the owner first, with its deadline.
        let queue: Vec<String> = redis::cmd("LRANGE")
            .arg(keys::fair_queue("late-undo"))
            .arg(0)
            .arg(-1)
            .query(&mut con)
            .unwrap();
        assert_eq!(queue, vec![OWNER.to_owned(), BEHIND.to_owned()]);
        let deadline: Option<f64> = redis::cmd("ZSCORE")
            .arg(keys::fair_timeouts("late-undo"))
            .arg(OWNER)
            .query(&mut con)
            .unwrap();
        assert!(deadline.is_some());
        let deleted: i64 = fair.force_unlock().unwrap().invoke(&mut con).unwrap();
        assert_eq!(deleted, 1);
        assert!(
            matches!(look_as(&fair, &mut con, BEHIND, "b"), Attempt::Busy(_)),
            "the waiter behind took the lock ahead of the owner's later request"
        );
        assert_eq!(
            look_as(&fair, &mut con, OWNER, later),
            Attempt::Acquired { token: None }
        );
    }

    /// An acquisition whose reply was lost leaves an orphaned level until its undo runs. The
    /// same handle's next call, holding nothing, does not re-enter on it ahead of a waiter that
    /// was queued first: it queues, and the undo passes the lock on.
    #[test]
    fn a_call_of_a_handle_that_holds_nothing_does_not_reenter_on_an_orphaned_level() {
        let server = polylock_testkit::RedisServer::start();
        let mut con = redis::Client::open(server.url())
            .unwrap()
            .get_connection()
            .unwrap();
        let fair = Fair::new("orphan", "orphan", Publish::Plain);
        let (lost, next) = (
            "11111111111111111111111111111111",
            "22222222222222222222222222222222",
        );
        let acquired = Attempt::Acquired { token: None };
        // Acquired, but its reply never reached the handle.
        assert_eq!(look_as(&fair, &mut con, OWNER, lost), acquired);
        assert!(matches!(
            look_as(&fair, &mut con, BEHIND, "e"),
            Attempt::Busy(_)
        ));
        assert!(
            matches!(look_as(&fair, &mut con, OWNER, next), Attempt::Busy(_)),
            "the handle's next call re-entered on the orphaned level, ahead of a waiter queued"
        );
        let undo = UndoArgs {
            owner: OWNER,
            request: lost,
            latch_ms: 60_000,
            lease_ms: 0,
            keeps_place: None,
        };
        let undone: i64 = fair
            .undo_acquire(&undo, &ClientOptions::default())
            .invoke(&mut con)
            .unwrap();
        assert_eq!(undone, 1);
        assert!(matches!(
            look_as(&fair, &mut con, OWNER, next),
            Attempt::Busy(_)
        ));
        assert_eq!(look_as(&fair, &mut con, BEHIND, "e"), acquired);
    }
}
