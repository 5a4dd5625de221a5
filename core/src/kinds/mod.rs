//! Lock kinds. The engine (`crate::engine`) owns what every kind shares: the acquire task and
//! its hand-off, the wait loop, hold state and lost signal, release with retries, renewal. A
//! kind brings only its keys, its scripts (next to it, one `.lua` file each) and how to read
//! their replies, behind [`LockKind`].

/// A lock script made of the Lua files given, in order (a kind's prelude first), each path
/// relative to the file that invokes it. Defined before the kinds' modules, which see it by
/// textual scope.
macro_rules! lock_script {
    ($($file:literal),+ $(,)?) => {
        std::sync::LazyLock::new(|| {
            $crate::kinds::script::LockScript::new(concat!($(include_str!($file)),+))
        })
    };
}

pub(crate) mod election;
pub(crate) mod expirable_semaphore;
pub(crate) mod fair;
pub(crate) mod fenced;
pub(crate) mod fifo;
pub(crate) mod latch;
pub(crate) mod messages;
pub(crate) mod queued;
pub(crate) mod read_write;
pub(crate) mod reentrant;
pub(crate) mod script;
pub(crate) mod semaphore;

use std::time::Duration;

use redis::{ToRedisArgs, Value};

use crate::connection::Publish;
use crate::foundation::keys;
use crate::settings::options::ClientOptions;
use script::LockScript;

/// Renews the hash-based kinds (reentrant, fair, FIFO, read-write): see `renew.lua`.
static HASH_RENEWAL: std::sync::LazyLock<LockScript> = lock_script!("renew_each.lua", "renew.lua");

/// One acquire attempt. The request id makes it idempotent: a retry with the same id replays
/// the first outcome (through the acquire latch), and [`LockKind::undo_acquire`] with the same
/// id undoes it, or stops it from ever taking effect.
pub(crate) struct AcquireArgs<'a> {
    pub owner: &'a str,
    pub lease_ms: u64,
    pub request: &'a str,
    /// Whether the caller waits when it finds the lock busy (kinds with a waiter list register
    /// it there; an attempt that will not wait leaves no trace).
    pub will_wait: bool,
    /// When a release may grant the lock to this waiter directly (see
    /// [`WaitPolicy::grants_directly`]): the number of this look among the call's looks, which the
    /// grant message names, so the waiter counts the lease from when it sent that look.
    pub grant_look: Option<u64>,
    /// Whether the handle may re-enter: it holds a level, or another of its acquire calls is
    /// under way (whose level the owner's may be). When neither, levels the lock has for the
    /// owner are orphans, acquisitions whose reply was lost and whose undo has not run yet: a
    /// kind with a line does not re-enter on them (that would serve the handle ahead of those
    /// waiting), and the caller waits its turn.
    pub reenters: bool,
}

impl AcquireArgs<'_> {
    /// The grant entry this look writes (`<request>:<look>`, to which the script adds the
    /// lease), or '' when it accepts no grant: an argument written straight into the call.
    pub(crate) fn grant_entry(&self) -> GrantEntry<'_> {
        GrantEntry {
            request: self.request,
            look: self.grant_look,
        }
    }
}

/// See [`AcquireArgs::grant_entry`].
pub(crate) struct GrantEntry<'a> {
    request: &'a str,
    look: Option<u64>,
}

impl std::fmt::Display for GrantEntry<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.look {
            Some(look) => write!(f, "{}:{look}", self.request),
            None => Ok(()),
        }
    }
}

impl ToRedisArgs for GrantEntry<'_> {
    fn write_redis_args<W: ?Sized + redis::RedisWrite>(&self, out: &mut W) {
        out.write_arg_fmt(self);
    }
}

/// Undoes an acquire request whose outcome is unknown (its reply was lost).
pub(crate) struct UndoArgs<'a> {
    pub owner: &'a str,
    pub request: &'a str,
    pub latch_ms: u64,
    /// The TTL to restore when the owner still holds other levels (0: leave it).
    pub lease_ms: u64,
    /// The request under which the caller tries again at once (an acquisition the replicas did
    /// not confirm): a kind with a queue keeps the caller's place at its head, for that request.
    pub keeps_place: Option<&'a str>,
}

/// A waiter that gives up leaves its queue (`LockKind::leave_queue`).
pub(crate) struct LeaveArgs<'a> {
    pub owner: &'a str,
    /// Its acquire request, made a tombstone so that no later release grants it.
    pub request: &'a str,
    /// How long the tombstone lives.
    pub latch_ms: u64,
}

/// Releases one level, idempotent per request id (the unlock latch replays the first answer).
pub(crate) struct ReleaseArgs<'a> {
    pub owner: &'a str,
    /// The TTL to set when levels remain.
    pub lease_ms: u64,
    pub request: &'a str,
    /// The acquire request of the level released: its latch is deleted with it.
    pub acquired_by: &'a str,
    /// How long the kinds that remember a release's answer under its request for every retry
    /// (a semaphore's give-back, an expirable semaphore's release) remember it.
    pub final_latch_ms: u64,
    /// How long the owner's release trace lives after a final release: the window in which the
    /// caller may still read a retry's answer (`engine::release::trace_window`), and no longer,
    /// so a lock keeps no trace of a call once that call has its answer.
    pub trace_ms: u64,
}

impl ReleaseArgs<'_> {
    /// Adds the arguments the hash locks' releases (reentrant, fair, FIFO) take, in their order:
    /// the lease, the owner, the level's request, the kind's own (`kind_arg`: its reservation or
    /// wait allowance; an `Option` writes nothing when `None`), the trace's lifetime.
    pub(crate) fn hash_release(&self, call: &mut ScriptCall, kind_arg: impl ToRedisArgs) {
        call.arg(self.lease_ms)
            .arg(self.owner)
            .arg(self.acquired_by)
            .arg(kind_arg)
            .arg(self.trace_ms);
    }
}

/// What an acquire attempt found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Attempt {
    /// Acquired (or re-entered), with the token this acquisition took, for kinds that issue
    /// one (a retry of the same request replays the same token).
    Acquired { token: Option<i64> },
    /// Someone else holds it; look again within this long at the latest (`None`: no expiry,
    /// only a message will tell).
    Busy(Option<Duration>),
    /// Busy, and listed as a waiter that a release may grant the lock to directly.
    Queued { wait: Option<Duration> },
    /// The request was undone before it ran (a tombstone in its latch).
    Undone,
    /// Acquired, but not confirmed on the replicas (`sync_replicas`; set by the engine, never by
    /// a kind's reply).
    NotSynced(Unconfirmed),
}

/// Why an acquisition was not confirmed on the replicas (`sync_replicas`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Unconfirmed {
    /// Not every one of the primary's `replicas` connected replicas acknowledged it in time.
    NotAcked { replicas: usize },
    /// The server answering the confirmation (another one, after a failover) did not hold it.
    NotHeldThere,
}

impl Attempt {
    /// Busy, from the holder's PTTL as a script replies it (negative: no expiry).
    pub(crate) fn busy(pttl_ms: i64) -> Attempt {
        Attempt::Busy(wait_of(pttl_ms))
    }
}

/// Reads the usual acquire reply: nil acquired, an integer the holder's PTTL (or how long to
/// wait at most; negative: no expiry), `UNDONE` a tombstone.
pub(crate) fn read_plain_acquire(reply: Value) -> Result<Attempt, Value> {
    match reply {
        Value::Nil => Ok(Attempt::Acquired { token: None }),
        Value::Int(ms) => Ok(Attempt::busy(ms)),
        Value::SimpleString(ref status) if status == "UNDONE" => Ok(Attempt::Undone),
        other => Err(other),
    }
}

/// Reads an acquire reply that may also be `{wait}`: busy, listed as a waiter that accepts a
/// grant.
pub(crate) fn read_queued_acquire(reply: Value) -> Result<Attempt, Value> {
    match reply {
        Value::Array(ref items) => match items.as_slice() {
            [Value::Int(wait)] => Ok(Attempt::Queued {
                wait: wait_of(*wait),
            }),
            _ => Err(reply),
        },
        other => read_plain_acquire(other),
    }
}

/// How long to wait at most, from a PTTL as a script replies it (negative: no expiry).
pub(crate) fn wait_of(pttl_ms: i64) -> Option<Duration> {
    (pttl_ms >= 0).then(|| Duration::from_millis(pttl_ms.max(1) as u64))
}

/// What the watchdog sends to keep a hold alive: `script` renews `key` for `owner` and answers
/// 1 (renewed) or 0 (gone). Renewals with the same script are batched.
#[derive(Clone)]
pub(crate) struct Renewal {
    pub script: &'static LockScript,
    pub key: String,
    pub owner: String,
}

impl Renewal {
    /// The renewal of `owner`'s hold under `key` by `script` (one of the batched renewal
    /// scripts, `renew_each.lua`).
    pub(crate) fn by(script: &'static LockScript, key: &str, owner: &str) -> Renewal {
        Renewal {
            script,
            key: key.to_owned(),
            owner: owner.to_owned(),
        }
    }

    /// The renewal of a hash-based hold: `field` in the lock hash `key` (the owner, or the
    /// read-write lock's writer field).
    pub(crate) fn of_hash(key: &str, field: String) -> Renewal {
        Renewal {
            script: &HASH_RENEWAL,
            key: key.to_owned(),
            owner: field,
        }
    }
}

/// How a waiter of a kind waits, read by the engine: one value per kind (see
/// [`LockKind::wait_policy`]), the plain lock's by default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WaitPolicy {
    /// Whether a release may hand the lock to the next waiter in the same script, for that
    /// waiter's whole lease: the waiter learns it from a message on its told channel (`g:<its
    /// request>:<the look that asked for it>`), sparing it a round trip.
    pub grants_directly: bool,
    /// Whether a handle keeps its channels subscribed between waits once it has acquired (its
    /// own channel: the next wait then needs no subscribe and no second look).
    pub keeps_subscription: bool,
    /// Whether a busy attempt of a caller that waits takes a place that a waiter giving up
    /// must leave ([`LockKind::leave_queue`]) ...
    pub busy_waiter_takes_a_place: bool,
    /// ... and whether a busy single try does.
    pub busy_try_takes_a_place: bool,
    /// Whether a poll waiter (one that never listens) is listed like the others. A kind that
    /// keeps the free lock for the waiter it told, however briefly, lists none: the one told
    /// would never hear it.
    pub lists_poll_waiters: bool,
    /// Whether waiters are served in the order they queued, one place per owner: the owner's
    /// next look then waits for its undos in flight (`engine/release_gate.rs`), or it would take
    /// over the place an undo is for.
    pub serves_in_order: bool,
    /// The longest a waiter may sleep before looking again, whatever it was told.
    pub longest_wait: Option<Duration>,
    /// For kinds that tell one waiter at a time: the longest a waiter sleeps while no release
    /// tells anyone (the waiter told may never come: its process paused or died just then).
    pub longest_silence: Option<Duration>,
}

impl Default for WaitPolicy {
    /// The plain lock's: woken on its channel, nothing granted or kept, no longest sleep.
    fn default() -> Self {
        WaitPolicy {
            grants_directly: false,
            keeps_subscription: false,
            busy_waiter_takes_a_place: true,
            busy_try_takes_a_place: true,
            lists_poll_waiters: true,
            serves_in_order: false,
            longest_wait: None,
            longest_silence: None,
        }
    }
}

impl WaitPolicy {
    /// The kinds whose releases tell the next waiter on its own channel: that release may grant
    /// it the lock directly, and a waiter stays subscribed from one look to the next.
    pub(crate) fn told_directly() -> WaitPolicy {
        WaitPolicy {
            grants_directly: true,
            keeps_subscription: true,
            ..WaitPolicy::default()
        }
    }

    /// Whether a busy attempt that `will_wait` (or not) takes a place that a waiter giving up
    /// must leave.
    pub(crate) fn busy_attempt_takes_a_place(&self, will_wait: bool) -> bool {
        if will_wait {
            self.busy_waiter_takes_a_place
        } else {
            self.busy_try_takes_a_place
        }
    }

    /// How long the place a busy attempt that `will_wait` (or not) takes lasts beyond its sleep
    /// (which ends when the wait the script replied runs out, at the latest), as the acquire
    /// scripts of the kinds with a line take it: 0 for an attempt that takes no place.
    pub(crate) fn place_ms(&self, will_wait: bool, options: &ClientOptions) -> u64 {
        if self.busy_attempt_takes_a_place(will_wait) {
            options.fair_queue_timeout.as_millis() as u64
        } else {
            0
        }
    }
}

/// What every kind knows of its lock: its kind, the user's name, the key under the client's prefix, the
/// channel its waiters listen on, and how its scripts publish. A kind keeps one and hands it to
/// the engine through [`LockKind::names`].
pub(crate) struct LockNames {
    /// The kind's name in metrics and the client record (`LockKind::kind_name`).
    pub kind: &'static str,
    /// The name as the user gave it (errors, metrics).
    pub name: String,
    /// The name under the client's key prefix: the lock's key, from which every other key and
    /// channel of the kind derives.
    pub key: String,
    /// The channel its waiters are woken on (`LockKind::wait_channel`).
    pub channel: String,
    pub publish: Publish,
    /// For kinds whose releases tell the next waiter on a channel of its own: those channels.
    pub told: Option<ToldChannels>,
}

/// The channels of a kind whose releases tell the next waiter directly (the plain, fair and FIFO
/// locks): `LockKind::told_channel` and `LockKind::listening_channel` read them.
pub(crate) struct ToldChannels {
    /// `owner`'s own channel under the lock's key.
    pub told: fn(key: &str, owner: &str) -> String,
    /// The plain lock's listening channel, subscribed with the shared channel (so polylock's
    /// waiters are not counted as Redisson's there).
    pub listening: String,
}

impl LockNames {
    pub(crate) fn new(
        kind: &'static str,
        name: &str,
        key: &str,
        channel: String,
        publish: Publish,
    ) -> LockNames {
        LockNames {
            kind,
            name: name.to_owned(),
            key: key.to_owned(),
            channel,
            publish,
            told: None,
        }
    }

    /// The names of a kind whose releases tell `owner` on `told(key, owner)`.
    pub(crate) fn telling(self, told: fn(key: &str, owner: &str) -> String) -> LockNames {
        let listening = keys::lock_listening_channel(&self.key);
        LockNames {
            told: Some(ToldChannels { told, listening }),
            ..self
        }
    }
}

pub(crate) use crate::connection::ScriptCall;

/// A kind of lock: its keys, scripts and replies. Replies of `release`: nil (not held by the
/// owner), 0 (still held), 1 (released).
pub(crate) trait LockKind: Send + Sync + 'static {
    /// The lock's kind, name, key, wait channel and publish form.
    fn names(&self) -> &LockNames;

    /// The lock's name as the user gave it.
    fn name(&self) -> &str {
        &self.names().name
    }

    /// What the engine's messages call a handle of the kind (`lock 'orders:42' was lost`):
    /// `lock` for the plain, fair, FIFO and fenced locks, as their users call them all.
    fn noun(&self) -> &'static str {
        "lock"
    }

    /// How messages name a handle of the kind: `semaphore 'permits'`, `lock 'orders:42'` (the
    /// name as the user gave it, without the client's key prefix).
    fn described(&self) -> String {
        format!("{} '{}'", self.noun(), self.name())
    }

    /// The lock's key: its name under the client's key prefix (`ClientOptions::key_prefix`),
    /// from which every other key and channel of the kind derives.
    fn key(&self) -> &str {
        &self.names().key
    }

    /// The kind's name in metrics and the client record: `lock`, `fair_lock`, `fenced_lock`,
    /// `read_write_lock`, `semaphore`, `expirable_semaphore`.
    fn kind_name(&self) -> &'static str {
        self.names().kind
    }

    /// The channel on which `owner` waits to be woken.
    fn wait_channel(&self, _owner: &str) -> String {
        self.names().channel.clone()
    }

    /// A channel of `owner`'s own on which a release tells it that it is next, beside the wait
    /// channel (which then still carries the wake-ups of other clients, Redisson's).
    fn told_channel(&self, owner: &str) -> Option<String> {
        let names = self.names();
        names
            .told
            .as_ref()
            .map(|told| (told.told)(&names.key, owner))
    }

    /// A channel subscribed together with the wait channel (after it, and left before it) on
    /// which nothing is published: the wait channel's subscriber count less this one's is how
    /// many clients other than polylock listen there, which a release may skip telling.
    fn listening_channel(&self) -> Option<String> {
        self.names()
            .told
            .as_ref()
            .map(|told| told.listening.clone())
    }

    /// For kinds with a waiter list: commands (no script) whose replies are all non-nil and
    /// non-zero when `owner`, just subscribed, missed nothing since its last look (the lock is
    /// still held and `owner` still listed, not told), so it may sleep without looking again.
    fn nothing_missed(&self, _owner: &str) -> Option<redis::Pipeline> {
        None
    }

    /// How a waiter of this kind subscribes, sleeps and is told (the plain lock's by default).
    fn wait_policy(&self, _options: &ClientOptions) -> WaitPolicy {
        WaitPolicy::default()
    }

    fn acquire(&self, args: &AcquireArgs<'_>, options: &ClientOptions) -> ScriptCall;

    /// Reads the reply of [`LockKind::acquire`]: nil acquired, an integer the holder's PTTL
    /// (or how long to wait at most; negative: no expiry), `UNDONE` a tombstone.
    fn read_acquire(&self, reply: Value) -> Result<Attempt, Value> {
        read_plain_acquire(reply)
    }

    fn undo_acquire(&self, args: &UndoArgs<'_>, options: &ClientOptions) -> ScriptCall;

    fn release(&self, args: &ReleaseArgs<'_>) -> ScriptCall;

    /// A waiter that gives up: leave whatever queue it joined, give back the lock if a release
    /// granted it to `request` meanwhile, and make `request` a tombstone for `latch_ms` so that
    /// no later release grants it.
    fn leave_queue(&self, _args: &LeaveArgs<'_>) -> Option<ScriptCall> {
        None
    }

    /// Whether a release that failed in its caller's window is sent again in the background
    /// until the lease ends: yes where a late copy finds what it released gone (the level's own
    /// field, a permit's id) and so takes nothing twice. The read-write lock's release reads
    /// only the owner's count, and its latch lives the caller's window only (a latch per
    /// release for the whole lease would grow with the release rate): its retries end with that
    /// window, and a level whose release never reached the server expires with its lease (its
    /// renewal has stopped), as Redisson's does.
    fn retries_release_late(&self) -> bool {
        true
    }

    /// Deletes the lock whoever holds it and wakes a waiter; replies 1 when there was one.
    /// `None` (the default) for kinds that have no such thing (a semaphore's permits).
    fn force_unlock(&self) -> Option<ScriptCall> {
        None
    }

    /// How `owner`'s hold is renewed: by default the lock hash's (its field `owner`), which the
    /// reentrant, fenced, fair and FIFO locks share.
    fn renewal(&self, owner: &str) -> Renewal {
        Renewal::of_hash(self.key(), owner.to_owned())
    }
}

/// One waiting look of `owner` under `request` at `kind`, run on `con`, as the engine reads it
/// (the kinds' script-level tests).
#[cfg(test)]
pub(crate) fn look_as(
    kind: &dyn LockKind,
    con: &mut redis::Connection,
    owner: &str,
    request: &str,
) -> Attempt {
    let args = AcquireArgs {
        owner,
        lease_ms: 30_000,
        request,
        will_wait: true,
        grant_look: None,
        reenters: false,
    };
    let reply: Value = kind
        .acquire(&args, &ClientOptions::default())
        .invoke(con)
        .unwrap();
    kind.read_acquire(reply).unwrap()
}

#[cfg(test)]
mod retried_acquisitions {
    use super::*;
    use crate::connection::Publish;

    const OWNER: &str = "6b1f1f5e-0000-4000-8000-000000000001:1";
    /// The expirable semaphore's owner is the permit's id, 32 hex digits.
    const PERMIT_ID: &str = "00112233445566778899aabbccddeeff";
    const REQUEST: &str = "0123456789abcdef0123456789abcdef";

    /// The server's writes so far (each one is propagated to replicas).
    fn writes(con: &mut redis::Connection) -> i64 {
        let info: String = redis::cmd("INFO").arg("persistence").query(con).unwrap();
        info.lines()
            .find_map(|line| line.strip_prefix("rdb_changes_since_last_save:"))
            .map(|count| count.trim().parse().unwrap())
            .unwrap()
    }

    /// Every kind's retry of a request that acquired writes: `sync_replicas` confirms an
    /// acquisition with the retry and `WAIT` in one pipeline, and `WAIT` covers only what its
    /// own connection wrote (PROTOCOL.md, "Confirming an acquisition").
    #[test]
    fn every_kinds_retry_of_an_acquisition_writes() {
        let server = polylock_testkit::RedisServer::start();
        let mut con = redis::Client::open(server.url())
            .unwrap()
            .get_connection()
            .unwrap();
        let options = ClientOptions::default();
        let kinds: Vec<(&str, Box<dyn LockKind>)> = vec![
            (
                OWNER,
                Box::new(reentrant::Reentrant::new(
                    "reentrant",
                    "reentrant",
                    Publish::Plain,
                )),
            ),
            (
                OWNER,
                Box::new(fair::Fair::new("fair", "fair", Publish::Plain)),
            ),
            (
                OWNER,
                Box::new(fifo::Fifo::new("fifo", "fifo", Publish::Plain)),
            ),
            (
                OWNER,
                Box::new(fenced::Fenced::new("fenced", "fenced", Publish::Plain)),
            ),
            (
                OWNER,
                Box::new(read_write::ReadWriteSide::read(
                    "read",
                    "read",
                    Publish::Plain,
                )),
            ),
            (
                OWNER,
                Box::new(read_write::ReadWriteSide::write(
                    "write",
                    "write",
                    Publish::Plain,
                )),
            ),
            (
                OWNER,
                Box::new(semaphore::SemaphoreAcquisition::new(
                    "permits",
                    "permits",
                    1,
                    Publish::Plain,
                )),
            ),
            (
                PERMIT_ID,
                Box::new(expirable_semaphore::Permit::new(
                    "expirable",
                    "expirable",
                    Publish::Plain,
                )),
            ),
        ];
        let _: () = redis::cmd("MSET")
            .arg("permits")
            .arg(2)
            .arg("expirable")
            .arg(2)
            .query(&mut con)
            .unwrap();
        for (owner, kind) in kinds {
            let args = AcquireArgs {
                owner,
                lease_ms: 30_000,
                request: REQUEST,
                will_wait: false,
                grant_look: None,
                reenters: false,
            };
            let attempt = |con: &mut redis::Connection| {
                let reply: Value = kind.acquire(&args, &options).invoke(con).unwrap();
                kind.read_acquire(reply)
            };
            assert!(
                matches!(attempt(&mut con), Ok(Attempt::Acquired { .. })),
                "{}",
                kind.name()
            );
            let before = writes(&mut con);
            assert!(
                matches!(attempt(&mut con), Ok(Attempt::Acquired { .. })),
                "{}: the retry",
                kind.name()
            );
            assert!(
                writes(&mut con) > before,
                "{}: the retry wrote nothing",
                kind.name()
            );
        }
    }
}
