//! What the queued kinds share: the fair lock (`fair/`, Redisson's layout) and the FIFO lock
//! (`fifo/`, polylock's own). Each is the reentrant lock's hash plus a line of waiting owners
//! in keys of the kind's own; a release passes the lock to the head of the line, granting it (a
//! watchdog hold) or telling it to come, on that waiter's own channel.
//!
//! [`Queued`] is the lock kind of both, written once. Their scripts differ, but are called
//! alike: each kind has the same five (`prelude.lua` first, see [`queued_scripts`]), they take
//! the same keys around the kind's own (its [`Layout`]), and the same arguments in the same
//! order, with the fair lock's wait allowance W among them.

use std::marker::PhantomData;
use std::sync::LazyLock;
use std::time::Duration;

use redis::Value;

use crate::connection::Publish;
use crate::foundation::keys;
use crate::kinds::script::LockScript;
use crate::kinds::{
    read_queued_acquire, AcquireArgs, Attempt, LeaveArgs, LockKind, LockNames, ReleaseArgs,
    ScriptCall, UndoArgs, WaitPolicy,
};
use crate::settings::options::ClientOptions;

/// A queued kind's scripts, each its `.lua` file after the hash lock's Lua and the kind's
/// `prelude.lua`.
pub(crate) struct Scripts {
    pub acquire: LazyLock<LockScript>,
    pub release: LazyLock<LockScript>,
    pub undo: LazyLock<LockScript>,
    pub cancel: LazyLock<LockScript>,
    pub force_unlock: LazyLock<LockScript>,
}

/// The [`Scripts`] of the queued kind whose `mod.rs` invokes it, from the `.lua` files beside
/// that file: `prelude.lua`, then one file per script, named as the script.
macro_rules! queued_scripts {
    () => {
        $crate::kinds::queued::Scripts {
            acquire: $crate::kinds::queued::queued_scripts!("acquire.lua"),
            release: $crate::kinds::queued::queued_scripts!("release.lua"),
            undo: $crate::kinds::queued::queued_scripts!("undo.lua"),
            cancel: $crate::kinds::queued::queued_scripts!("cancel.lua"),
            force_unlock: $crate::kinds::queued::queued_scripts!("force_unlock.lua"),
        }
    };
    ($script:literal) => {
        lock_script!(
            "../lock_fields.lua",
            "../lock_hash.lua",
            "prelude.lua",
            $script
        )
    };
}
pub(crate) use queued_scripts;

/// What a queued kind brings of its own: its scripts, its line's keys and its waiters' channels.
pub(crate) trait Layout: Send + Sync + 'static {
    /// The kind's name in metrics and the client record.
    const KIND_NAME: &'static str;

    /// Whether a busy single try takes a place in line (a waiter's look always does).
    const TRY_TAKES_A_PLACE: bool;

    /// The wait allowance W the kind's scripts take (the fair lock's: Redisson's), if any.
    const ALLOWANCE: Option<Duration>;

    /// Whether every script takes the shared channel as its last key, after its own.
    const SHARED_CHANNEL_LAST: bool;

    fn scripts() -> &'static Scripts;

    /// The keys of the line of the lock `key`, which every script takes after the lock's own,
    /// in its prelude's order: the line itself (a LIST of waiting owners) first.
    fn line_keys(key: &str) -> Vec<String>;

    /// `owner`'s own channel, on which a release of this kind tells or grants it the lock.
    fn told_channel(key: &str, owner: &str) -> String;

    /// Adds to `pipe` a command whose reply is non-nil and non-zero while `owner` is in line.
    fn still_in_line(pipe: &mut redis::Pipeline, key: &str, owner: &str);
}

/// A queued lock in the layout `L`.
pub(crate) struct Queued<L> {
    /// Its wait channel is the plain lock's (`redisson_lock__channel:{name}`), shared by every
    /// kind whose lock is this hash.
    names: LockNames,
    line_keys: Vec<String>,
    layout: PhantomData<L>,
}

impl<L: Layout> Queued<L> {
    pub(crate) fn new(name: &str, key: &str, publish: Publish) -> Queued<L> {
        Queued {
            names: LockNames::new(L::KIND_NAME, name, key, keys::lock_channel(key), publish)
                .telling(L::told_channel),
            line_keys: L::line_keys(key),
            layout: PhantomData,
        }
    }

    /// A call of `script` with its keys: the lock's, the line's, the script's own key (`own`:
    /// the request's acquire latch, the owner's release trace) if it has one, then the shared
    /// channel where the layout's scripts take it.
    fn call(&self, script: &'static LockScript, own: Option<String>) -> ScriptCall {
        let mut call = script.prepare_invoke(self.names.publish);
        call.key(&self.names.key);
        for key in &self.line_keys {
            call.key(key);
        }
        if let Some(own) = own {
            call.key(own);
        }
        if L::SHARED_CHANNEL_LAST {
            call.key(&self.names.channel);
        }
        call
    }

    /// The allowance argument of the layout's scripts, in ms: `None` where they take none (an
    /// `Option` argument writes nothing when `None`).
    fn allowance_ms() -> Option<u64> {
        L::ALLOWANCE.map(|allowance| allowance.as_millis() as u64)
    }
}

impl<L: Layout> LockKind for Queued<L> {
    fn names(&self) -> &LockNames {
        &self.names
    }

    /// Told directly and kept subscribed, served in order; a waiter looks again before its
    /// place lapses (one fair queue timeout after its last look), or it would lose it.
    fn wait_policy(&self, options: &ClientOptions) -> WaitPolicy {
        WaitPolicy {
            serves_in_order: true,
            busy_try_takes_a_place: L::TRY_TAKES_A_PLACE,
            longest_wait: Some(options.fair_queue_timeout / 2),
            ..WaitPolicy::told_directly()
        }
    }

    /// Still held (a release in between found this waiter not yet listening and told it, or
    /// left the lock free for it to take), and still in line.
    fn nothing_missed(&self, owner: &str) -> Option<redis::Pipeline> {
        let mut pipe = redis::pipe();
        pipe.exists(&self.names.key);
        L::still_in_line(&mut pipe, &self.names.key, owner);
        Some(pipe)
    }

    fn acquire(&self, args: &AcquireArgs<'_>, options: &ClientOptions) -> ScriptCall {
        let place_ms = self.wait_policy(options).place_ms(args.will_wait, options);
        let latch = keys::acquire_latch(&self.names.key, args.request);
        let mut call = self.call(&L::scripts().acquire, Some(latch));
        call.arg(args.lease_ms)
            .arg(args.owner)
            .arg(place_ms)
            .arg(Self::allowance_ms())
            .arg(args.grant_entry())
            .arg(args.request)
            .arg(if args.reenters { "1" } else { "0" });
        call
    }

    fn read_acquire(&self, reply: Value) -> Result<Attempt, Value> {
        read_queued_acquire(reply)
    }

    fn undo_acquire(&self, args: &UndoArgs<'_>, options: &ClientOptions) -> ScriptCall {
        let latch = keys::acquire_latch(&self.names.key, args.request);
        let mut call = self.call(&L::scripts().undo, Some(latch));
        call.arg(args.owner)
            .arg(args.latch_ms)
            .arg(args.lease_ms)
            .arg(Self::allowance_ms())
            .arg(args.keeps_place.unwrap_or(""))
            .arg(options.fair_queue_timeout.as_millis() as u64)
            .arg(args.request);
        call
    }

    fn release(&self, args: &ReleaseArgs<'_>) -> ScriptCall {
        let trace = keys::release_trace(&self.names.key, args.owner);
        let mut call = self.call(&L::scripts().release, Some(trace));
        args.hash_release(&mut call, Self::allowance_ms());
        call
    }

    fn leave_queue(&self, args: &LeaveArgs<'_>) -> Option<ScriptCall> {
        let latch = keys::acquire_latch(&self.names.key, args.request);
        let mut call = self.call(&L::scripts().cancel, Some(latch));
        call.arg(args.owner)
            .arg(Self::allowance_ms())
            .arg(args.latch_ms)
            .arg(args.request);
        Some(call)
    }

    fn force_unlock(&self) -> Option<ScriptCall> {
        let mut call = self.call(&L::scripts().force_unlock, None);
        call.arg(Self::allowance_ms());
        Some(call)
    }
}

/// The queued kinds' script-level tests, and their helpers.
#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::kinds::fair::RedissonQueue;
    use crate::kinds::fifo::PolylockLine;
    use crate::kinds::look_as;
    use polylock_testkit::RedisServer;

    pub(crate) const OWNER: &str = "6b1f1f5e-0000-4000-8000-000000000001:1";
    /// Another owner, in line with [`OWNER`].
    pub(crate) const OTHER: &str = "6b1f1f5e-0000-4000-8000-000000000002:1";
    pub(crate) const ACQUIRED: Attempt = Attempt::Acquired { token: None };

    /// A server of its own, and a raw connection to it.
    pub(crate) fn server() -> (RedisServer, redis::Connection) {
        let server = RedisServer::start();
        let con = redis::Client::open(server.url())
            .unwrap()
            .get_connection()
            .unwrap();
        (server, con)
    }

    /// The queued lock `name` in the layout `L`, held by someone else.
    pub(crate) fn held<L: Layout>(con: &mut redis::Connection, name: &str) -> Queued<L> {
        let _: () = redis::cmd("HSET")
            .arg(name)
            .arg("6b1f1f5e-0000-4000-8000-0000000000ee:1") // a real owner field, or force_unlock refuses the hash
            .arg(1)
            .query(con)
            .unwrap();
        Queued::new(name, name, Publish::Plain)
    }

    /// The owners in `lock`'s line, head first.
    pub(crate) fn line<L: Layout>(lock: &Queued<L>, con: &mut redis::Connection) -> Vec<String> {
        redis::cmd("LRANGE")
            .arg(&lock.line_keys[0])
            .arg(0)
            .arg(-1)
            .query(con)
            .unwrap()
    }

    /// Whether `owner` is in `lock`'s line by the layout's record of its place (the fair lock's
    /// deadline, the FIFO lock's waiter record).
    pub(crate) fn has_a_place<L: Layout>(
        lock: &Queued<L>,
        con: &mut redis::Connection,
        owner: &str,
    ) -> bool {
        let mut pipe = redis::pipe();
        L::still_in_line(&mut pipe, lock.key(), owner);
        let (reply,): (Value,) = pipe.query(con).unwrap();
        !matches!(reply, Value::Nil | Value::Int(0))
    }

    /// Undoes `owner`'s acquire `request`: 1 when it took a level off.
    pub(crate) fn undo<L: Layout>(
        lock: &Queued<L>,
        con: &mut redis::Connection,
        owner: &str,
        request: &str,
    ) -> i64 {
        let undo = UndoArgs {
            owner,
            request,
            latch_ms: 60_000,
            lease_ms: 0,
            keeps_place: None,
        };
        lock.undo_acquire(&undo, &ClientOptions::default())
            .invoke(con)
            .unwrap()
    }

    /// The lock is free: a force unlock passes it to the head of the line (it is told).
    pub(crate) fn free<L: Layout>(lock: &Queued<L>, con: &mut redis::Connection) {
        let deleted: i64 = lock.force_unlock().unwrap().invoke(con).unwrap();
        assert_eq!(deleted, 1);
    }

    /// `owner` releases the level its request `acquired_by` took, the last one it held.
    pub(crate) fn release_as<L: Layout>(
        lock: &Queued<L>,
        con: &mut redis::Connection,
        owner: &str,
        acquired_by: &str,
    ) {
        let args = ReleaseArgs {
            owner,
            lease_ms: 30_000,
            request: "release",
            acquired_by,
            final_latch_ms: 60_000,
            trace_ms: 60_000,
        };
        let released: Option<i64> = lock.release(&args).invoke(con).unwrap();
        assert_eq!(released, Some(1));
    }

    /// Whether `attempt` found the lock busy.
    pub(crate) fn busy(attempt: Attempt) -> bool {
        matches!(attempt, Attempt::Busy(_))
    }

    /// The undo of a request whose reply was lost runs after the same handle's next call has
    /// looked, and so holds the owner's place: that place stays (the fair lock's Redisson
    /// entries with it), and the owner is served before a waiter that queued after it.
    fn a_late_undo_leaves_the_place<L: Layout>() {
        let (_server, mut con) = server();
        let lock = held::<L>(&mut con, "late-undo");
        let kind = L::KIND_NAME;
        let (first, later) = (
            "11111111111111111111111111111111",
            "22222222222222222222222222222222",
        );
        assert!(busy(look_as(&lock, &mut con, OWNER, first)), "{kind}");
        assert!(busy(look_as(&lock, &mut con, OTHER, "b")), "{kind}");
        assert!(busy(look_as(&lock, &mut con, OWNER, later)), "{kind}");
        assert_eq!(undo(&lock, &mut con, OWNER, first), 0, "{kind}");
        assert_eq!(line(&lock, &mut con), [OWNER, OTHER], "{kind}");
        assert!(has_a_place(&lock, &mut con, OWNER), "{kind}");
        free(&lock, &mut con);
        assert!(
            busy(look_as(&lock, &mut con, OTHER, "b")),
            "{kind}: the waiter behind took the lock ahead of the owner's later request"
        );
        assert_eq!(look_as(&lock, &mut con, OWNER, later), ACQUIRED, "{kind}");
    }

    #[test]
    fn a_late_undo_leaves_the_place_a_later_request_of_the_owner_took() {
        a_late_undo_leaves_the_place::<RedissonQueue>();
        a_late_undo_leaves_the_place::<PolylockLine>();
    }

    /// An acquisition whose reply was lost leaves an orphaned level until its undo runs. The
    /// same handle's next call, holding nothing, does not re-enter on it ahead of a waiter that
    /// was in line first: it waits its turn, and the undo passes the lock on.
    fn no_reentry_on_an_orphaned_level<L: Layout>() {
        let (_server, mut con) = server();
        let lock = Queued::<L>::new("orphan", "orphan", Publish::Plain);
        let kind = L::KIND_NAME;
        let (lost, next) = (
            "11111111111111111111111111111111",
            "22222222222222222222222222222222",
        );
        // Acquired, but its reply never reached the handle.
        assert_eq!(look_as(&lock, &mut con, OWNER, lost), ACQUIRED, "{kind}");
        assert!(busy(look_as(&lock, &mut con, OTHER, "e")), "{kind}");
        assert!(
            busy(look_as(&lock, &mut con, OWNER, next)),
            "{kind}: the handle's next call re-entered on the orphaned level, ahead of a waiter \
             in line"
        );
        assert_eq!(undo(&lock, &mut con, OWNER, lost), 1, "{kind}");
        assert!(busy(look_as(&lock, &mut con, OWNER, next)), "{kind}");
        assert_eq!(look_as(&lock, &mut con, OTHER, "e"), ACQUIRED, "{kind}");
        release_as(&lock, &mut con, OTHER, "e");
        assert_eq!(look_as(&lock, &mut con, OWNER, next), ACQUIRED, "{kind}");
    }

    #[test]
    fn a_call_of_a_handle_that_holds_nothing_does_not_reenter_on_an_orphaned_level() {
        no_reentry_on_an_orphaned_level::<RedissonQueue>();
        no_reentry_on_an_orphaned_level::<PolylockLine>();
    }
}
