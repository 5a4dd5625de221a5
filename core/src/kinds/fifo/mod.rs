//! The FIFO lock: polylock's own layout of a fair lock, for users who need no Redisson interop.
//! The lock itself is the reentrant lock's hash (so it excludes every other hash lock of the
//! same name, Redisson's included); the line is a LIST of owners, and each waiter's liveness is
//! a record of its own whose TTL its looks renew, so no script reads a clock, walks the line or
//! keeps deadlines: a release reads the head and its record, and grants the lock to it (a
//! watchdog hold) or tells it to come. A waiter whose record lapsed (its process died) leaves
//! the line when it reaches the head. About half the server calls of the Redisson-layout fair
//! lock per contended hand-over (`bench/NOTES.md`).

use std::sync::LazyLock;

use redis::{ScriptInvocation, Value};

use crate::connection::Publish;
use crate::foundation::keys;
use crate::kinds::script::LockScript;
use crate::kinds::{
    read_queued_acquire, AcquireArgs, Attempt, LockKind, ReleaseArgs, Renewal, UndoArgs, WaitPolicy,
};
use crate::settings::options::ClientOptions;

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

pub(crate) struct Fifo {
    /// The name as the user gave it (errors, metrics).
    name: String,
    /// The name under the client's key prefix, from which every key and channel derives.
    key: String,
    line: String,
    record_prefix: String,
    channel_prefix: String,
    latch_prefix: String,
    /// The plain lock's channel (`redisson_lock__channel:{name}`), shared by every kind whose
    /// lock is this hash: the last key of every FIFO script, which publishes `0` there when it
    /// frees the lock with nobody in line; FIFO waiters listen there too.
    shared_channel: String,
    /// The plain lock's listening channel, subscribed with the shared channel (so polylock's
    /// waiters are not counted as Redisson's there).
    listening: String,
    publish: Publish,
}

impl Fifo {
    pub(crate) fn new(name: &str, key: &str, publish: Publish) -> Fifo {
        Fifo {
            name: name.to_owned(),
            key: key.to_owned(),
            line: keys::fifo_line(key),
            record_prefix: keys::fifo_waiter_prefix(key),
            channel_prefix: keys::fifo_channel_prefix(key),
            latch_prefix: keys::acquire_latch_prefix(key),
            shared_channel: keys::lock_channel(key),
            listening: keys::lock_listening_channel(key),
            publish,
        }
    }

    /// A call of `script` with the keys every FIFO script starts with (`prelude.lua`).
    fn call(&self, script: &'static LockScript) -> ScriptInvocation<'static> {
        let mut call = script.prepare_invoke(self.publish);
        call.key(&self.key)
            .key(&self.line)
            .key(&self.record_prefix)
            .key(&self.channel_prefix)
            .key(&self.latch_prefix);
        call
    }
}

impl LockKind for Fifo {
    fn kind_name(&self) -> &'static str {
        crate::metrics::kind::FIFO_LOCK
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn key(&self) -> &str {
        &self.key
    }

    /// The shared channel: a release of another kind of lock on the name (the plain lock,
    /// Redisson's RLock, the fair lock) tells it there that the lock is free.
    fn wait_channel(&self, _owner: &str) -> String {
        self.shared_channel.clone()
    }

    /// Its own channel, on which a FIFO release tells or grants it the lock.
    fn told_channel(&self, owner: &str) -> Option<String> {
        Some(keys::fifo_waiter_channel(&self.key, owner))
    }

    fn listening_channel(&self) -> Option<String> {
        Some(self.listening.clone())
    }

    /// Told directly and kept subscribed; a waiter looks again before its record lapses, or it
    /// would lose its place. A single try takes no place in line.
    fn wait_policy(&self, options: &ClientOptions) -> WaitPolicy {
        WaitPolicy {
            grants_directly: true,
            keeps_subscription: true,
            serves_in_order: true,
            busy_try_takes_a_place: false,
            longest_wait: Some(options.fair_queue_timeout / 2),
            ..WaitPolicy::default()
        }
    }

    /// Still held (a release in between found this waiter not yet listening and told it, or
    /// left the lock free for it to take), and still in line (its record lives).
    fn nothing_missed(&self, owner: &str) -> Option<redis::Pipeline> {
        let mut pipe = redis::pipe();
        pipe.exists(&self.key)
            .exists(keys::fifo_waiter_record(&self.key, owner));
        Some(pipe)
    }

    fn acquire(
        &self,
        args: &AcquireArgs<'_>,
        options: &ClientOptions,
    ) -> ScriptInvocation<'static> {
        let place_ms = if args.will_wait {
            options.fair_queue_timeout.as_millis() as u64
        } else {
            0
        };
        let mut call = self.call(&ACQUIRE);
        call.key(keys::acquire_latch(&self.key, args.request))
            .arg(args.lease_ms)
            .arg(args.owner)
            .arg(place_ms)
            .arg(args.grant_entry())
            .arg(args.request)
            .arg(if args.reenters { "1" } else { "0" });
        call.key(&self.shared_channel);
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
            .arg(args.keeps_place.unwrap_or(""))
            .arg(options.fair_queue_timeout.as_millis() as u64)
            .arg(args.request);
        call.key(&self.shared_channel);
        call
    }

    fn release(&self, args: &ReleaseArgs<'_>) -> ScriptInvocation<'static> {
        let mut call = self.call(&RELEASE);
        call.key(keys::release_trace(&self.key, args.owner))
            .arg(args.lease_ms)
            .arg(args.owner)
            .arg(args.acquired_by)
            .arg(args.trace_ms);
        call.key(&self.shared_channel);
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
            .arg(latch_ms)
            .arg(request);
        call.key(&self.shared_channel);
        Some(call)
    }

    fn force_unlock(&self) -> Option<ScriptInvocation<'static>> {
        let mut call = self.call(&FORCE_UNLOCK);
        call.key(&self.shared_channel);
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
    const REQUEST: &str = "0123456789abcdef0123456789abcdef";

    fn look(request: &str) -> AcquireArgs<'_> {
        AcquireArgs {
            owner: OWNER,
            lease_ms: 30_000,
            request,
            will_wait: true,
            grant_look: Some(1),
            reenters: false,
        }
    }

    /// A look that reaches the server after its request was undone (a copy held back in a
    /// broken connection) takes no place in line: a release would otherwise tell or grant the
    /// lock to a waiter that is gone, and nobody else would get it until the record lapsed.
    #[test]
    fn a_look_that_arrives_after_its_undo_takes_no_place() {
        let server = polylock_testkit::RedisServer::start();
        let mut con = redis::Client::open(server.url())
            .unwrap()
            .get_connection()
            .unwrap();
        let fifo = Fifo::new("late", "late", Publish::Plain);
        let options = ClientOptions::default();
        let _: () = redis::cmd("HSET")
            .arg("late")
            .arg("6b1f1f5e-0000-4000-8000-0000000000ee:1") // someone else: a real owner field, or force_unlock refuses the hash
            .arg(1)
            .query(&mut con)
            .unwrap();
        let undo = UndoArgs {
            owner: OWNER,
            request: REQUEST,
            latch_ms: 60_000,
            lease_ms: 0,
            keeps_place: None,
        };
        let undone: i64 = fifo.undo_acquire(&undo, &options).invoke(&mut con).unwrap();
        assert_eq!(undone, 0);
        let reply: Value = fifo
            .acquire(&look(REQUEST), &options)
            .invoke(&mut con)
            .unwrap();
        assert_eq!(fifo.read_acquire(reply), Ok(Attempt::Undone));
        let line: Vec<String> = redis::cmd("LRANGE")
            .arg(keys::fifo_line("late"))
            .arg(0)
            .arg(-1)
            .query(&mut con)
            .unwrap();
        assert!(line.is_empty(), "{line:?}");
        let record: bool = redis::cmd("EXISTS")
            .arg(keys::fifo_waiter_record("late", OWNER))
            .query(&mut con)
            .unwrap();
        assert!(!record);
        // Another request of the owner does take its place.
        let reply: Value = fifo
            .acquire(&look("fedcba9876543210fedcba9876543210"), &options)
            .invoke(&mut con)
            .unwrap();
        assert!(matches!(
            fifo.read_acquire(reply),
            Ok(Attempt::Queued { .. })
        ));
        let line: Vec<String> = redis::cmd("LRANGE")
            .arg(keys::fifo_line("late"))
            .arg(0)
            .arg(-1)
            .query(&mut con)
            .unwrap();
        assert_eq!(line, vec![OWNER.to_owned()]);
    }

    /// A server, a raw connection to it, and a FIFO lock `name` held by someone else.
    fn held(name: &str) -> (polylock_testkit::RedisServer, redis::Connection, Fifo) {
        let server = polylock_testkit::RedisServer::start();
        let mut con = redis::Client::open(server.url())
            .unwrap()
            .get_connection()
            .unwrap();
        let _: () = redis::cmd("HSET")
            .arg(name)
            .arg("6b1f1f5e-0000-4000-8000-0000000000ee:1") // someone else: a real owner field, or force_unlock refuses the hash
            .arg(1)
            .query(&mut con)
            .unwrap();
        (server, con, Fifo::new(name, name, Publish::Plain))
    }

    use crate::kinds::look_as;

    /// The lock is free: a force unlock passes it to the head of the line (it is told).
    fn free(fifo: &Fifo, con: &mut redis::Connection) {
        let deleted: i64 = fifo.force_unlock().unwrap().invoke(con).unwrap();
        assert_eq!(deleted, 1);
    }

    fn release_as(fifo: &Fifo, con: &mut redis::Connection, owner: &str, acquired_by: &str) {
        let args = ReleaseArgs {
            owner,
            lease_ms: 30_000,
            request: "release",
            acquired_by,
            final_latch_ms: 60_000,
            trace_ms: 60_000,
        };
        let released: Option<i64> = fifo.release(&args).invoke(con).unwrap();
        assert_eq!(released, Some(1));
    }

    const ACQUIRED: Attempt = Attempt::Acquired { token: None };

    /// The undo of a request whose reply was lost runs after the same handle's next call has
    /// looked, and so holds the owner's place: that place stays, and the owner is served before
    /// a waiter that queued after it.
    #[test]
    fn a_late_undo_leaves_the_place_a_later_request_of_the_owner_took() {
        let (_server, mut con, fifo) = held("late-undo");
        let (first, later) = (
            "11111111111111111111111111111111",
            "22222222222222222222222222222222",
        );
        let behind = "6b1f1f5e-0000-4000-8000-000000000002:1";
        assert!(matches!(
            look_as(&fifo, &mut con, OWNER, first),
            Attempt::Busy(_)
        ));
        assert!(matches!(
            look_as(&fifo, &mut con, behind, "b"),
            Attempt::Busy(_)
        ));
        assert!(matches!(
            look_as(&fifo, &mut con, OWNER, later),
            Attempt::Busy(_)
        ));
        let undo = UndoArgs {
            owner: OWNER,
            request: first,
            latch_ms: 60_000,
            lease_ms: 0,
            keeps_place: None,
        };
        let undone: i64 = fifo
            .undo_acquire(&undo, &ClientOptions::default())
            .invoke(&mut con)
            .unwrap();
        assert_eq!(undone, 0);
        free(&fifo, &mut con);
        assert!(
            matches!(look_as(&fifo, &mut con, behind, "b"), Attempt::Busy(_)),
            "the waiter behind took the lock ahead of the owner's later request"
        );
        assert_eq!(look_as(&fifo, &mut con, OWNER, later), ACQUIRED);
    }

    /// A waiter whose record lapsed comes back before it reached the head: it keeps its one
    /// entry. Served once, it has no entry left that would put it ahead of a waiter who waited
    /// all along when it waits again.
    #[test]
    fn a_waiter_whose_record_lapsed_does_not_jump_the_line_after_it_was_served() {
        let (_server, mut con, fifo) = held("lapsed");
        let (a, b, c) = (
            OWNER,
            "6b1f1f5e-0000-4000-8000-000000000002:1",
            "6b1f1f5e-0000-4000-8000-000000000003:1",
        );
        assert!(matches!(
            look_as(&fifo, &mut con, a, "a1"),
            Attempt::Busy(_)
        ));
        assert!(matches!(look_as(&fifo, &mut con, b, "b"), Attempt::Busy(_)));
        // A stalls past the queue timeout: its record lapses (deleted here, as its TTL would).
        let _: () = redis::cmd("DEL")
            .arg(keys::fifo_waiter_record("lapsed", a))
            .query(&mut con)
            .unwrap();
        assert!(matches!(
            look_as(&fifo, &mut con, a, "a1"),
            Attempt::Busy(_)
        ));
        assert!(matches!(look_as(&fifo, &mut con, c, "c"), Attempt::Busy(_)));
        free(&fifo, &mut con);
        assert_eq!(look_as(&fifo, &mut con, a, "a1"), ACQUIRED);
        release_as(&fifo, &mut con, a, "a1");
        assert_eq!(look_as(&fifo, &mut con, b, "b"), ACQUIRED);
        // A waits again while B holds; C has waited all along and is served first.
        assert!(matches!(
            look_as(&fifo, &mut con, a, "a2"),
            Attempt::Busy(_)
        ));
        release_as(&fifo, &mut con, b, "b");
        assert!(
            matches!(look_as(&fifo, &mut con, a, "a2"), Attempt::Busy(_)),
            "A came back ahead of C on a stale entry"
        );
        assert_eq!(look_as(&fifo, &mut con, c, "c"), ACQUIRED);
    }

    /// An acquisition whose reply was lost leaves an orphaned level until its undo runs. The
    /// same handle's next call, holding nothing, does not re-enter on it ahead of a waiter that
    /// was in line first: it waits its turn, and the undo passes the lock on.
    #[test]
    fn a_call_of_a_handle_that_holds_nothing_does_not_reenter_on_an_orphaned_level() {
        let server = polylock_testkit::RedisServer::start();
        let mut con = redis::Client::open(server.url())
            .unwrap()
            .get_connection()
            .unwrap();
        let fifo = Fifo::new("orphan", "orphan", Publish::Plain);
        let (lost, next) = (
            "11111111111111111111111111111111",
            "22222222222222222222222222222222",
        );
        let earlier = "6b1f1f5e-0000-4000-8000-000000000002:1";
        // Acquired, but its reply never reached the handle.
        assert_eq!(look_as(&fifo, &mut con, OWNER, lost), ACQUIRED);
        assert!(matches!(
            look_as(&fifo, &mut con, earlier, "e"),
            Attempt::Busy(_)
        ));
        assert!(
            matches!(look_as(&fifo, &mut con, OWNER, next), Attempt::Busy(_)),
            "the handle's next call re-entered on the orphaned level, ahead of a waiter in line"
        );
        let undo = UndoArgs {
            owner: OWNER,
            request: lost,
            latch_ms: 60_000,
            lease_ms: 0,
            keeps_place: None,
        };
        let undone: i64 = fifo
            .undo_acquire(&undo, &ClientOptions::default())
            .invoke(&mut con)
            .unwrap();
        assert_eq!(undone, 1);
        assert!(matches!(
            look_as(&fifo, &mut con, OWNER, next),
            Attempt::Busy(_)
        ));
        assert_eq!(look_as(&fifo, &mut con, earlier, "e"), ACQUIRED);
        release_as(&fifo, &mut con, earlier, "e");
        assert_eq!(look_as(&fifo, &mut con, OWNER, next), ACQUIRED);
    }
}
