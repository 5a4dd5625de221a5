//! The explorer driving the engine's own code: real [`Client`]s and [`Lock`] handles, on the
//! engine's I/O seam (`connection::explored`), on one thread under a paused tokio clock that
//! moves only with the server's (faked) clock.
//!
//! Each actor is a client with one handle running a list of calls ([`Op`]) as a task. Every
//! command any part of the engine sends (acquire, wait, release, renew, undo, resolver, release
//! gate) waits on its client's wire; a step runs the oldest one of one client on the real
//! server (a connection runs its commands in order) and answers it, or loses its reply, or runs
//! it twice. Every message a script publishes waits for a step that delivers it (in order per
//! client) or loses it. A step may move both clocks. After each step the runtime runs until
//! every task waits on the wire, a message or a timer, and the properties are checked against
//! what the handles believe and what the server has.

use std::fmt::Write as _;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::runtime::Runtime;

use polylock_testkit::redisson;

use super::server::Server;
use polylock::explorer_seam::{self, Bus, Connection, Seam};
use polylock::{AcquireOptions, Client, ClientOptions, ErrorKind, Lock, Semaphore};

/// A property that failed, and how.
#[derive(Debug, Clone)]
pub(crate) struct Violation {
    pub property: &'static str,
    pub detail: String,
}

fn violation(property: &'static str, detail: String) -> Option<Violation> {
    Some(Violation { property, detail })
}

/// The walks' random numbers: the same seed, the same steps.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// The lock every actor works on.
const NAME: &str = "driven";

/// Every scenario's lease, fixed or the watchdog's.
const LEASE_MS: u64 = 30_000;

/// How long a waiter's place in line lives after its last look (the clients' default).
fn queue_timeout_ms() -> u64 {
    ClientOptions::default().fair_queue_timeout.as_millis() as u64
}

/// How long a step lets the runtime run: rounds of yields until nothing changed for this many.
const STILL_ROUNDS: usize = 3;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Plain,
    Fenced,
    Fair,
    Fifo,
    /// The two sides of one read-write lock.
    Read,
    Write,
    /// A permit of a semaphore of one permit (each call takes or gives back one).
    Permit,
    /// Redisson's `RLock`, emulated (see [`RedissonLock`]).
    RLock,
    /// Redisson's `RFairLock`, emulated likewise.
    RFairLock,
}

impl Kind {
    /// The line its waiters queue in, for the kinds that serve in order: the fair lock's queue
    /// (polylock's and Redisson's fair locks share it), the FIFO lock's line.
    fn line(self) -> Option<&'static str> {
        match self {
            Kind::Fair | Kind::RFairLock => Some("fair queue"),
            Kind::Fifo => Some("FIFO line"),
            _ => None,
        }
    }

    /// The field of the lock's hash that holds `owner`'s levels.
    fn field(self, owner: &str) -> String {
        match self {
            Kind::Write => format!("{owner}:write"),
            _ => owner.to_owned(),
        }
    }
}

/// How the emulated Redisson locks publish: through the explorer's log, as the explored form
/// of polylock's scripts does.
const EXPLORED_PUBLISH: &str = "redis.call('rpush', 'explorer:published', {channel}, '0')";

/// Redisson's `RLock`, or its `RFairLock` (`fair`), with its own wait loop (`tryLock(wait,
/// lease)`): try; if busy, subscribe (the `RLock` to the lock channel, the `RFairLock` to its
/// own) and try again, then sleep until a message (any: Redisson reads `0`, `00` and `1` as
/// numbers that wake a waiter) or the time the try replied (the holder's PTTL; for the fair
/// lock the time until its turn), within the wait; try again. An `RFairLock` that gives up
/// leaves the queue. No watchdog: a hold lasts its lease. Its commands go through the seam's
/// wire like a client's, and it subscribes on the seam's bus.
struct RedissonLock {
    connection: Connection,
    bus: Arc<Bus>,
    messages: tokio::sync::Mutex<tokio::sync::mpsc::UnboundedReceiver<(String, Vec<u8>)>>,
    key: String,
    fair: bool,
    /// The channel it listens on.
    channel: String,
    owner: String,
    /// When the latest acquisition's lease ends.
    held_until: Mutex<Option<tokio::time::Instant>>,
}

impl RedissonLock {
    fn new(seam: &Seam, key: &str, owner: String, fair: bool) -> RedissonLock {
        let (inbox, messages) = tokio::sync::mpsc::unbounded_channel();
        seam.bus.connect(inbox);
        let channel = polylock::keys::lock_channel(key);
        RedissonLock {
            connection: Connection::explored(seam.wire.clone()),
            bus: seam.bus.clone(),
            messages: tokio::sync::Mutex::new(messages),
            key: key.to_owned(),
            fair,
            channel: if fair {
                format!("{channel}:{owner}")
            } else {
                channel
            },
            owner,
            held_until: Mutex::new(None),
        }
    }

    /// Runs one of its scripts: KEYS the lock (and for the fair lock its queue and timeouts),
    /// then `keys`; ARGV `args`.
    async fn run<T: redis::FromRedisValue>(
        &self,
        script: &str,
        keys: &[String],
        args: &[String],
    ) -> polylock::Result<T> {
        let script = redis::Script::new(script);
        let mut call = script.key(&self.key);
        if self.fair {
            call.key(polylock::keys::fair_queue(&self.key))
                .key(polylock::keys::fair_timeouts(&self.key));
        }
        for key in keys {
            call.key(key);
        }
        for arg in args {
            call.arg(arg);
        }
        call.invoke_async(&mut self.connection.clone())
            .await
            .map_err(|err| explorer_seam::error_from_redis("Redisson's lock", err))
    }

    async fn try_lock(&self, options: AcquireOptions) -> polylock::Result<bool> {
        let lease = options.lease.unwrap_or(Duration::from_millis(LEASE_MS));
        let deadline = options.wait.map(|wait| tokio::time::Instant::now() + wait);
        let (script, mut args) = if self.fair {
            (redisson::rfair_try(), vec![queue_timeout_ms().to_string()])
        } else {
            (redisson::RLOCK_TRY.to_owned(), vec![])
        };
        args.insert(0, self.owner.clone());
        args.insert(0, lease.as_millis().to_string());
        let mut subscribed = false;
        let acquired = loop {
            let ttl: Option<i64> = self.run(&script, &[], &args).await?;
            let Some(ttl) = ttl else {
                *self.held_until.lock().unwrap() = Some(tokio::time::Instant::now() + lease);
                break true;
            };
            let left = deadline.map(|d| d.saturating_duration_since(tokio::time::Instant::now()));
            if left.is_some_and(|left| left.is_zero()) {
                break false;
            }
            if !subscribed {
                self.bus
                    .subscribe(std::slice::from_ref(&self.channel), true);
                subscribed = true;
                continue;
            }
            let holder = u64::try_from(ttl).map_or(Duration::MAX, Duration::from_millis);
            let sleep = left.map_or(holder, |left| left.min(holder));
            let mut messages = self.messages.lock().await;
            tokio::select! {
                _ = messages.recv() => {}
                _ = tokio::time::sleep(sleep) => {}
            }
        };
        if subscribed {
            self.bus
                .subscribe(std::slice::from_ref(&self.channel), false);
            while self.messages.lock().await.try_recv().is_ok() {}
        }
        if !acquired && self.fair {
            let args = [self.owner.clone(), queue_timeout_ms().to_string()];
            self.run::<i64>(&redisson::rfair_leave(), &[], &args)
                .await?;
        }
        Ok(acquired)
    }

    async fn unlock(&self) -> polylock::Result<()> {
        let channel = polylock::keys::lock_channel(&self.key);
        let unlock = if self.fair {
            redisson::rfair_unlock(EXPLORED_PUBLISH)
        } else {
            redisson::rlock_unlock(EXPLORED_PUBLISH)
        };
        let args = [LEASE_MS.to_string(), self.owner.clone()];
        let released: Option<i64> = self.run(&unlock, &[channel], &args).await?;
        match released {
            Some(_) => Ok(()),
            None => Err(polylock::Error::lock_lost("Redisson's unlock: not held")),
        }
    }

    /// Whether its latest lease has not run out (it holds no longer, whatever it thinks).
    fn within_lease(&self) -> bool {
        self.held_until
            .lock()
            .unwrap()
            .is_some_and(|until| tokio::time::Instant::now() < until)
    }
}

/// An actor's handle.
#[derive(Clone)]
enum Handle {
    Lock(Lock),
    Permits(Semaphore),
    Redisson(Arc<RedissonLock>),
}

impl Handle {
    /// The levels (or permits) the actor holds: a semaphore's permits are the caller's, and
    /// the emulated RLock keeps no count: the journal counts both.
    fn held(&self, journal: &Journal) -> u32 {
        match self {
            Handle::Lock(lock) => lock.hold_count(),
            Handle::Permits(_) | Handle::Redisson(_) => journal.taken,
        }
    }

    /// Whether the journal counts what it holds (see [`Handle::held`]).
    fn counted_by_journal(&self) -> bool {
        !matches!(self, Handle::Lock(_))
    }

    fn owner(&self) -> &str {
        match self {
            Handle::Lock(lock) => lock.owner(),
            Handle::Permits(_) => "permits",
            Handle::Redisson(rlock) => &rlock.owner,
        }
    }

    async fn acquire(&self, options: AcquireOptions) -> polylock::Result<bool> {
        match self {
            Handle::Lock(lock) => lock.acquire(options).await,
            // Its lease is the engine's own (the permits are detached once taken).
            Handle::Permits(semaphore) => semaphore.acquire(1, options.wait).await,
            Handle::Redisson(rlock) => rlock.try_lock(options).await,
        }
    }

    async fn release(&self) -> polylock::Result<()> {
        match self {
            Handle::Lock(lock) => lock.release().await,
            Handle::Permits(semaphore) => semaphore.release(1).await,
            Handle::Redisson(rlock) => rlock.unlock().await,
        }
    }
}

/// One call of an actor.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Op {
    /// `acquire` with a fixed lease (`None`: the watchdog's) and a wait (`None`: unbounded).
    Acquire {
        lease_ms: Option<u64>,
        wait_ms: Option<u64>,
    },
    /// `release` of one level, if the handle holds any.
    Release,
    /// Two `release` calls at once (two levels of one hold), if it holds two.
    ReleaseTwoLevels,
}

#[derive(Debug, Clone)]
pub(crate) struct Actor {
    pub kind: Kind,
    pub ops: Vec<Op>,
    /// Waits by polling (`WaitMode::Poll`) instead of listening.
    pub poll: bool,
}

#[derive(Debug, Clone, Default)]
pub(crate) struct Faults {
    /// A command runs and its reply is lost (the connection drops).
    pub reply_lost: bool,
    /// A command runs twice (a retry racing its original), answered once.
    pub duplicated: bool,
    pub message_lost: bool,
    /// A client's pub/sub connection drops (what was on its way to it is lost with it).
    pub cut: bool,
    /// Clock moves.
    pub advance_ms: Vec<u64>,
    /// The server's clock moves and the clients' stand still (their machines were suspended:
    /// a monotonic clock does not count a suspension).
    pub suspend_ms: Vec<u64>,
}

#[derive(Debug, Clone)]
pub(crate) struct Scenario {
    pub name: &'static str,
    pub actors: Vec<Actor>,
    pub faults: Faults,
    pub key_prefix: Option<&'static str>,
    /// Each call of an actor begins at a step of its own (else each begins as soon as the
    /// one before has ended): calls begin at any point of the others' calls.
    pub paced: bool,
    /// The clients confirm acquisitions on a replica (`sync_replicas`, `min_replicas` 1); the
    /// explorer keeps the replica (see [`Replica`]), cuts it off and promotes it.
    pub replica: bool,
    /// Scripts publish as on a cluster without sharded pub/sub (no listener count trusted, no
    /// grant by message).
    pub broadcast: bool,
}

/// The replica of the scenarios with one. Commands run on the one real server; the replica is
/// what the explorer answers for it (`INFO replication`, `WAIT`) and, once cut off, a copy of
/// the server's keys as they were then. A promotion makes that copy the server's contents (and
/// a new replication id); the old primary comes back as its replica.
struct Replica {
    linked: bool,
    replication_id: u32,
    /// The keys when the link was cut: (key, DUMP, PTTL), at `cut_at_ms`.
    copy: Vec<(String, Vec<u8>, i64)>,
    cut_at_ms: u64,
    promoted: bool,
}

impl Replica {
    /// The replica's answer to `cmd`, if it is one the replica gives.
    fn stand_in(&self, cmd: &redis::Cmd) -> Option<redis::Value> {
        let mut args = cmd.args_iter().map(|arg| match arg {
            redis::Arg::Simple(bytes) => String::from_utf8_lossy(bytes).to_lowercase(),
            _ => String::new(),
        });
        match (args.next()?.as_str(), args.next().as_deref()) {
            ("info", Some("replication")) => {
                let replica = if self.linked {
                    "slave0:ip=127.0.0.1,port=1,state=online,offset=1,lag=0\r\n"
                } else {
                    ""
                };
                Some(redis::Value::BulkString(
                    format!(
                        "# Replication\r\nrole:master\r\nconnected_slaves:{}\r\n{replica}\
                         master_replid:explored{}\r\n",
                        u8::from(self.linked),
                        self.replication_id
                    )
                    .into_bytes(),
                ))
            }
            ("wait", _) => Some(redis::Value::Int(i64::from(self.linked))),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// `actor` begins its next call.
    Call {
        actor: usize,
    },
    /// The server runs the oldest command `actor` sent, and answers it.
    Run {
        actor: usize,
    },
    ReplyLost {
        actor: usize,
    },
    /// As `ReplyLost`, and the connection drops: every other command in flight fails.
    Disconnect {
        actor: usize,
    },
    Duplicated {
        actor: usize,
    },
    /// The oldest message to `actor` arrives.
    Deliver {
        actor: usize,
    },
    MessageLost {
        actor: usize,
    },
    /// `actor`'s pub/sub connection drops.
    Cut {
        actor: usize,
    },
    Advance {
        ms: u64,
    },
    /// The server's clock moves; the clients' stand still.
    Suspend {
        ms: u64,
    },
    /// The replica's link is cut (a partition).
    Partition,
    /// The replica is promoted (what Sentinel does): its copy becomes the server's contents.
    Promote,
}

impl Step {
    /// Counted against a path's fault budget (a scenario with a replica partitions and
    /// promotes it once on every path, outside the budget).
    fn is_fault(self) -> bool {
        !matches!(
            self,
            Step::Run { .. }
                | Step::Deliver { .. }
                | Step::Call { .. }
                | Step::Partition
                | Step::Promote
        )
    }
}

/// What an actor's task reports of its calls.
#[derive(Debug, Default)]
struct Journal {
    /// Waits for its turn to begin its next call.
    ready: bool,
    /// The call under way (index into the ops), or `ops.len()` when done.
    op: usize,
    done: bool,
    /// An acquire is under way.
    acquiring: bool,
    /// Levels the handle held when the acquire under way began.
    held_before: u32,
    /// The step after which the server first had the acquire under way's owner in line: see
    /// `note_queued`.
    queued_at: Option<usize>,
    /// Whether the server had the owner holding as the acquire under way began.
    held_at_begin: Option<bool>,
    /// A gap of the queue timeout or more came between two looks of the acquire under way: its
    /// place lapsed, and what order it is served in is no longer FIFO's to say.
    lapsed: bool,
    /// When the acquire under way stops waiting (none: it waits without bound).
    deadline: Option<tokio::time::Instant>,
    /// The server's time when a script of the acquire under way last ran (a look keeps the
    /// waiter's place alive for the queue timeout from then).
    last_look_ms: Option<u64>,
    /// Release calls under way.
    releasing: u32,
    /// Permits taken and not given back (a semaphore's actor), or levels held (the emulated
    /// RLock's).
    taken: u32,
    /// Outcomes, in order (for the log).
    outcomes: Vec<String>,
    /// A release reported `LockLost`.
    release_lost: Option<String>,
    /// An acquire reported true, not yet seen by the FIFO check.
    just_acquired: bool,
}

struct Member {
    seam: Seam,
    /// None for the emulated RLock.
    client: Option<Client>,
    handle: Handle,
    kind: Kind,
    /// Waits by polling: no message wakes it.
    poll: bool,
    journal: Arc<Mutex<Journal>>,
    /// A permit per call it may begin.
    turns: Arc<tokio::sync::Semaphore>,
    /// Messages published to it and not yet delivered: (channel, payload).
    inbox: Vec<(String, String)>,
}

/// Runs the tasks that can go on, a few rounds of yields (no clock moves: it is paused, and a
/// yield keeps the runtime busy).
fn run_ready_tasks(runtime: &Runtime) {
    runtime.block_on(async {
        for _ in 0..16 {
            tokio::task::yield_now().await;
        }
    });
}

fn journal(journal: &Mutex<Journal>) -> MutexGuard<'_, Journal> {
    journal.lock().unwrap_or_else(|e| e.into_inner())
}

/// An actor's task: its calls, one after another.
async fn act(
    lock: Handle,
    ops: Vec<Op>,
    record: Arc<Mutex<Journal>>,
    turns: Arc<tokio::sync::Semaphore>,
) {
    for (index, op) in ops.into_iter().enumerate() {
        journal(&record).op = index;
        journal(&record).ready = true;
        turns.acquire().await.expect("never closed").forget();
        journal(&record).ready = false;
        match op {
            Op::Acquire { lease_ms, wait_ms } => {
                {
                    let mut j = journal(&record);
                    j.acquiring = true;
                    j.held_before = lock.held(&j);
                    j.queued_at = None;
                    j.held_at_begin = None;
                    j.last_look_ms = None;
                    j.lapsed = false;
                    j.deadline = wait_ms
                        .map(|wait| tokio::time::Instant::now() + Duration::from_millis(wait));
                }
                let options = AcquireOptions {
                    wait: wait_ms.map(Duration::from_millis),
                    lease: lease_ms.map(Duration::from_millis),
                };
                let outcome = lock.acquire(options).await;
                let mut j = journal(&record);
                j.acquiring = false;
                if matches!(outcome, Ok(true)) {
                    j.just_acquired = true;
                    if lock.counted_by_journal() {
                        j.taken += 1;
                    }
                }
                j.outcomes.push(format!("acquire: {outcome:?}"));
            }
            Op::Release if lock.held(&journal(&record)) > 0 => {
                journal(&record).releasing += 1;
                let outcome = lock.release().await;
                released(&lock, &record, outcome);
            }
            Op::ReleaseTwoLevels if lock.held(&journal(&record)) > 1 => {
                journal(&record).releasing += 2;
                let (first, second) = tokio::join!(lock.release(), lock.release());
                released(&lock, &record, first);
                released(&lock, &record, second);
            }
            Op::Release | Op::ReleaseTwoLevels => {}
        }
    }
    let mut j = journal(&record);
    j.done = true;
}

fn released(handle: &Handle, record: &Mutex<Journal>, outcome: polylock::Result<()>) {
    let mut j = journal(record);
    j.releasing -= 1;
    if handle.counted_by_journal() {
        // Given back, or (an error) no longer the caller's to use either way.
        j.taken -= 1;
    }
    if let Err(err) = &outcome {
        if err.kind() == ErrorKind::LockLost {
            j.release_lost = Some(err.to_string());
        }
    }
    j.outcomes.push(format!("release: {outcome:?}"));
}

/// One run of a scenario from an empty server.
pub(crate) struct World {
    runtime: Option<&'static Runtime>,
    members: Vec<Member>,
    /// The lock's key (prefix included).
    key: String,
    steps: usize,
    /// A fault other than a clock move happened on this path.
    faulted: bool,
    /// The clocks' moves so far, in all.
    advanced_ms: u64,
    log: Vec<String>,
    replica: Option<Replica>,
    /// A promotion put the server's contents back to an older copy.
    history_rewound: bool,
}

/// What becomes of a command the explorer runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    Answered,
    /// It runs twice (a retry racing its original); the client gets the second reply.
    RunTwice,
    /// It runs; its reply is lost (its caller gets a connection error), the other commands
    /// in flight go on.
    ReplyLost,
    /// It runs; the connection drops before the reply comes, and every command sent after it
    /// on that connection fails unrun.
    Disconnected,
}

/// What one actor has done so far, as far as `settle` needs to tell: its waiting commands, its
/// journal's counters, its subscriptions.
type Progress = (Vec<u64>, usize, bool, bool, bool, u32, usize, Vec<String>);

impl World {
    pub(crate) fn new(server: &mut Server, scenario: &Scenario) -> World {
        server.reset();
        // Every script is loaded on the path that first uses it (NOSCRIPT, then SCRIPT LOAD), as
        // on a fresh server: the same steps on every replay.
        let _: () = redis::cmd("SCRIPT")
            .arg("FLUSH")
            .query(server.connection())
            .unwrap();
        // The same ids on every replay of the same steps.
        explorer_seam::count_from(1 << 64);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .expect("the explorer's runtime");
        // Given back in `Drop` (`Box::from_raw`), once every client is gone; the core holds
        // `&'static` runtimes, and nothing of this world outlives it.
        let runtime: &'static Runtime = unsafe { &*Box::into_raw(Box::new(runtime)) };
        explorer_seam::explore_on(Some(runtime));
        let mut world = World {
            runtime: Some(runtime),
            members: Vec::new(),
            key: explorer_seam::prefixed(scenario.key_prefix, NAME),
            steps: 0,
            faulted: false,
            advanced_ms: 0,
            log: Vec::new(),
            history_rewound: false,
            replica: scenario.replica.then_some(Replica {
                linked: true,
                replication_id: 1,
                copy: Vec::new(),
                cut_at_ms: 0,
                promoted: false,
            }),
        };
        for (index, actor) in scenario.actors.iter().enumerate() {
            let seam = Seam::default();
            let options = ClientOptions {
                name: Some(format!("actor{index}")),
                key_prefix: scenario.key_prefix.map(str::to_owned),
                sync_replicas: scenario.replica,
                ..ClientOptions::default()
            };
            // The emulated RLock has no polylock client: its commands and subscription are its own.
            let client = (!matches!(actor.kind, Kind::RLock | Kind::RFairLock))
                .then(|| world.connect(server, &seam, options, !scenario.broadcast));
            let lock = match actor.kind {
                Kind::RLock | Kind::RFairLock => Handle::Redisson(Arc::new(RedissonLock::new(
                    &seam,
                    &world.key,
                    format!("0b5d2f3c-1111-4222-8333-{index:012}:1"),
                    actor.kind == Kind::RFairLock,
                ))),
                Kind::Permit => {
                    // The semaphore's one permit.
                    let _: () = redis::cmd("SET")
                        .arg(&world.key)
                        .arg(1)
                        .arg("NX")
                        .query(server.connection())
                        .unwrap();
                    let client = client.as_ref().expect("a client");
                    Handle::Permits(client.semaphore(NAME).expect("a semaphore"))
                }
                kind => {
                    let client = client.as_ref().expect("a client");
                    let lock = match kind {
                        Kind::Plain => client.lock(NAME),
                        Kind::Fenced => client.fenced_lock(NAME),
                        Kind::Fair => client.fair_lock(NAME),
                        Kind::Fifo => client.fifo_lock(NAME),
                        Kind::Read => client.read_write_lock(NAME).map(|rw| rw.read_lock()),
                        Kind::Write => client.read_write_lock(NAME).map(|rw| rw.write_lock()),
                        Kind::Permit | Kind::RLock | Kind::RFairLock => unreachable!("above"),
                    }
                    .expect("a handle");
                    Handle::Lock(if actor.poll {
                        lock.with_wait_mode(polylock::WaitMode::Poll {
                            min: polylock::options::DEFAULT_POLL_MIN,
                            max: polylock::options::DEFAULT_POLL_MAX,
                        })
                        .expect("a poll waiter")
                    } else {
                        lock
                    })
                }
            };
            let journal = Arc::new(Mutex::new(Journal::default()));
            let turns = Arc::new(tokio::sync::Semaphore::new(if scenario.paced {
                0
            } else {
                actor.ops.len()
            }));
            runtime.spawn(act(
                lock.clone(),
                actor.ops.clone(),
                journal.clone(),
                turns.clone(),
            ));
            world.members.push(Member {
                seam,
                client,
                handle: lock,
                kind: actor.kind,
                poll: actor.poll,
                journal,
                turns,
                inbox: Vec::new(),
            });
        }
        world.settle();
        world
    }

    /// A client on `seam`; what it sends while it connects is answered at once.
    fn connect(
        &self,
        server: &mut Server,
        seam: &Seam,
        options: ClientOptions,
        exact: bool,
    ) -> Client {
        let runtime = self.runtime();
        let connecting = runtime.spawn({
            let seam = seam.clone();
            async move { explorer_seam::explored_client(&seam, options, exact).await }
        });
        while !connecting.is_finished() {
            run_ready_tasks(runtime);
            if let Some(request) = seam.wire.take_oldest() {
                let reply = request.run_answering(server.connection(), &|cmd| self.stand_in(cmd));
                request.answer(reply);
            }
        }
        runtime
            .block_on(connecting)
            .expect("the connect task")
            .expect("an explored client")
    }

    fn stand_in(&self, cmd: &redis::Cmd) -> Option<redis::Value> {
        self.replica
            .as_ref()
            .and_then(|replica| replica.stand_in(cmd))
    }

    fn runtime(&self) -> &'static Runtime {
        self.runtime.expect("the world's runtime")
    }

    /// What changes when a task makes progress.
    fn progress_mark(&self) -> Vec<Progress> {
        self.members
            .iter()
            .map(|m| {
                let j = journal(&m.journal);
                (
                    m.seam.wire.waiting(),
                    j.op,
                    j.ready,
                    j.done,
                    j.acquiring,
                    j.releasing,
                    j.outcomes.len(),
                    m.seam.bus.subscribed(),
                )
            })
            .collect()
    }

    /// Lets every task run until none can go on without a step.
    fn settle(&self) {
        let runtime = self.runtime();
        let mut still = 0;
        let mut mark = self.progress_mark();
        while still < STILL_ROUNDS {
            run_ready_tasks(runtime);
            let now = self.progress_mark();
            if now == mark {
                still += 1;
            } else {
                still = 0;
                mark = now;
            }
        }
    }

    fn enabled(&self, faults: &Faults, faults_left: bool) -> Vec<Step> {
        let mut steps: Vec<Step> = (0..self.members.len())
            .filter(|&actor| self.ready(actor))
            .map(|actor| Step::Call { actor })
            .collect();
        for (actor, member) in self.members.iter().enumerate() {
            if !member.seam.wire.waiting().is_empty() {
                steps.push(Step::Run { actor });
                if faults_left && faults.reply_lost {
                    steps.push(Step::ReplyLost { actor });
                    if member.seam.wire.waiting().len() > 1 {
                        steps.push(Step::Disconnect { actor });
                    }
                }
                if faults_left && faults.duplicated {
                    steps.push(Step::Duplicated { actor });
                }
            }
        }
        for (actor, member) in self.members.iter().enumerate() {
            if !member.inbox.is_empty() {
                steps.push(Step::Deliver { actor });
                if faults_left && faults.message_lost {
                    steps.push(Step::MessageLost { actor });
                }
            }
            // A polylock client's hub connects again; the emulated RLock would not.
            let listens = !member.seam.bus.subscribed().is_empty();
            if faults_left && faults.cut && listens && member.client.is_some() {
                steps.push(Step::Cut { actor });
            }
        }
        if faults_left {
            steps.extend(faults.advance_ms.iter().map(|&ms| Step::Advance { ms }));
            steps.extend(faults.suspend_ms.iter().map(|&ms| Step::Suspend { ms }));
        }
        // Once per path: a partition, then a promotion while some client believes it holds
        // (what a failover can take from it), or once nothing else is under way.
        if let Some(replica) = self.replica.as_ref().filter(|r| !r.promoted) {
            if replica.linked {
                steps.push(Step::Partition);
            } else if !self.believers().is_empty() || self.quiescent() {
                steps.push(Step::Promote);
            }
        }
        steps
    }

    /// `actor` waits for a step to begin its next call.
    fn ready(&self, actor: usize) -> bool {
        let member = &self.members[actor];
        journal(&member.journal).ready && member.turns.available_permits() == 0
    }

    fn quiescent(&self) -> bool {
        self.members
            .iter()
            .all(|m| m.seam.wire.waiting().is_empty() && m.inbox.is_empty())
    }

    fn all_done(&self) -> bool {
        self.members.iter().all(|m| journal(&m.journal).done)
    }

    /// Runs the oldest command `actor` sent on the server, with the listener counts of now,
    /// and routes what it published; then the client gets its reply, or (`fate`) its second
    /// run's, or loses it.
    fn run(&mut self, server: &mut Server, actor: usize, fate: Fate) {
        let request = self.members[actor]
            .seam
            .wire
            .take_oldest()
            .expect("a waiting request");
        self.write_listener_counts(server);
        let mut reply = request.run_answering(server.connection(), &|cmd| self.stand_in(cmd));
        if fate == Fate::RunTwice {
            reply = request.run_answering(server.connection(), &|cmd| self.stand_in(cmd));
        }
        if request.is_script() {
            self.note_look(actor, server, &reply);
        }
        for (channel, payload) in server.take_published() {
            for member in &mut self.members {
                if member.seam.bus.listens(&channel) {
                    member.inbox.push((channel.clone(), payload.clone()));
                }
            }
        }
        let shown = match (&reply, fate) {
            (Ok(_), Fate::ReplyLost) => "(reply lost)".to_owned(),
            (Ok(_), Fate::Disconnected) => "(reply lost, connection dropped)".to_owned(),
            (Ok(values), _) => format!("{values:?}"),
            (Err(err), _) => format!("error {err}"),
        };
        let twice = if fate == Fate::RunTwice {
            " (run twice)"
        } else {
            ""
        };
        self.log.push(format!(
            "actor{actor}: {}{twice} -> {shown}",
            request.describe()
        ));
        match fate {
            Fate::ReplyLost => request.drop_connection(),
            Fate::Disconnected => {
                request.drop_connection();
                let wire = &self.members[actor].seam.wire;
                while let Some(unrun) = wire.take_oldest() {
                    self.log.push(format!(
                        "actor{actor}: {} -> (failed unrun: connection dropped)",
                        unrun.describe()
                    ));
                    unrun.drop_connection();
                }
            }
            Fate::Answered | Fate::RunTwice => request.answer(reply),
        }
    }

    /// A script call of `actor` ran: if an acquire of it is under way and the server knew
    /// the script, it looked now, and its place in line lives for the queue timeout from now;
    /// a gap as long before it lapsed the place (see `Journal::lapsed`).
    fn note_look(
        &self,
        actor: usize,
        server: &mut Server,
        reply: &redis::RedisResult<Vec<redis::Value>>,
    ) {
        let ran = reply.as_ref().is_ok_and(|values| {
            !values.iter().any(|value| {
                matches!(value, redis::Value::ServerError(err)
                        if err.kind() == Some(redis::ServerErrorKind::NoScript))
            })
        });
        let now = server.now_ms();
        let member = &self.members[actor];
        let mut j = journal(&member.journal);
        if j.acquiring && ran && !self.undo_in_flight(member) {
            j.lapsed |= j
                .last_look_ms
                .is_some_and(|last| now - last >= queue_timeout_ms());
            j.last_look_ms = Some(now);
        }
    }

    /// Whether an undo of `member`'s owner is in flight: the engine's next look waits for it
    /// (`engine/release_gate.rs`), so a script that runs meanwhile is the undo, and a place in
    /// line is the undone request's, not the call's under way.
    fn undo_in_flight(&self, member: &Member) -> bool {
        member
            .client
            .as_ref()
            .is_some_and(|client| !explorer_seam::no_undo(client, &self.key, member.handle.owner()))
    }

    /// Marks, for each acquire under way of a fair or FIFO lock, the first step after which
    /// the server had its owner in line, or holding when it did not as the call began: when
    /// it queued (or took the lock without queueing), as the server tells. A level held as the
    /// call began is an orphan of an earlier call, which comes with no place in line.
    fn note_queued(&mut self, server: &mut Server) {
        for member in &self.members {
            let line = match member.kind {
                Kind::Fair | Kind::RFairLock => polylock::keys::fair_queue(&self.key),
                Kind::Fifo => polylock::keys::fifo_line(&self.key),
                Kind::Plain
                | Kind::Fenced
                | Kind::Read
                | Kind::Write
                | Kind::Permit
                | Kind::RLock => continue,
            };
            let mut j = journal(&member.journal);
            if !j.acquiring || j.queued_at.is_some() || self.undo_in_flight(member) {
                continue;
            }
            let owner = member.handle.owner();
            let (place, holds): (Option<i64>, bool) = redis::pipe()
                .cmd("LPOS")
                .arg(&line)
                .arg(owner)
                .hexists(&self.key, owner)
                .query(server.connection())
                .unwrap();
            // The first look after the call began sees what the owner held before it.
            let held_before = *j.held_at_begin.get_or_insert(holds);
            if place.is_some() || (holds && !held_before) {
                j.queued_at = Some(self.steps);
            }
        }
    }

    /// What a publish on each channel answers now: the clients listening on it.
    fn write_listener_counts(&self, server: &mut Server) {
        let mut counts: std::collections::BTreeMap<String, i64> = Default::default();
        for member in &self.members {
            for channel in member.seam.bus.subscribed() {
                *counts.entry(channel).or_default() += 1;
            }
        }
        server.set_listener_counts(counts);
    }

    fn apply(&mut self, server: &mut Server, step: Step) {
        self.steps += 1;
        self.faulted |= !matches!(
            step,
            Step::Run { .. } | Step::Deliver { .. } | Step::Call { .. } | Step::Advance { .. }
        );
        match step {
            Step::Call { actor } => {
                let op = journal(&self.members[actor].journal).op;
                self.log.push(format!("actor{actor}: begins call {op}"));
                self.members[actor].turns.add_permits(1);
            }
            Step::Run { actor } => self.run(server, actor, Fate::Answered),
            Step::Duplicated { actor } => self.run(server, actor, Fate::RunTwice),
            Step::ReplyLost { actor } => self.run(server, actor, Fate::ReplyLost),
            Step::Disconnect { actor } => self.run(server, actor, Fate::Disconnected),
            Step::Deliver { actor } => {
                let (channel, payload) = self.members[actor].inbox.remove(0);
                let delivered = self.members[actor]
                    .seam
                    .bus
                    .deliver(&channel, payload.as_bytes());
                self.log.push(format!(
                    "actor{actor} <- {channel} '{payload}'{}",
                    if delivered {
                        ""
                    } else {
                        " (no longer subscribed)"
                    }
                ));
            }
            Step::MessageLost { actor } => {
                let (channel, payload) = self.members[actor].inbox.remove(0);
                self.log
                    .push(format!("actor{actor} <- {channel} '{payload}' LOST"));
            }
            Step::Cut { actor } => {
                let member = &mut self.members[actor];
                member.seam.bus.cut();
                let lost = std::mem::take(&mut member.inbox).len();
                self.log.push(format!(
                    "actor{actor}: pub/sub connection cut ({lost} messages lost)"
                ));
            }
            Step::Advance { ms } => self.advance(server, ms),
            Step::Suspend { ms } => {
                self.advanced_ms += ms;
                server.set_time(server.now_ms() + ms);
                self.log.push(format!(
                    "server clock +{ms} ms, the clients' stood still (now {} ms)",
                    server.now_ms()
                ));
            }
            Step::Partition => self.partition(server),
            Step::Promote => self.promote(server),
        }
        self.settle();
        self.note_queued(server);
    }

    /// Cuts the replica off: it keeps the keys of now.
    fn partition(&mut self, server: &mut Server) {
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg("*")
            .query(server.connection())
            .unwrap();
        let mut copy = Vec::new();
        for key in keys.into_iter().filter(|key| !key.starts_with("explorer:")) {
            let (dump, pttl): (Vec<u8>, i64) = redis::pipe()
                .cmd("DUMP")
                .arg(&key)
                .cmd("PTTL")
                .arg(&key)
                .query(server.connection())
                .unwrap();
            copy.push((key, dump, pttl));
        }
        let replica = self.replica.as_mut().expect("a replica");
        replica.linked = false;
        replica.copy = copy;
        replica.cut_at_ms = server.now_ms();
        self.log
            .push(format!("replica cut off, with {} keys", replica.copy.len()));
    }

    /// Promotes the replica: after a partition, the server's contents become its copy (what
    /// expired on it meanwhile gone); the old primary is its replica from now on.
    fn promote(&mut self, server: &mut Server) {
        let now = server.now_ms();
        let replica = self.replica.as_mut().expect("a replica");
        if !replica.linked {
            // The line's order is the copy's from now on: FIFO holds within one history.
            self.history_rewound = true;
            let _: () = redis::cmd("FLUSHALL").query(server.connection()).unwrap();
            for (key, dump, pttl) in &replica.copy {
                let left = if *pttl < 0 {
                    0
                } else {
                    let left = *pttl - (now - replica.cut_at_ms) as i64;
                    if left <= 0 {
                        continue;
                    }
                    left
                };
                let _: () = redis::cmd("RESTORE")
                    .arg(key)
                    .arg(left)
                    .arg(dump.as_slice())
                    .query(server.connection())
                    .unwrap();
            }
        }
        self.log.push(format!(
            "replica promoted{}",
            if replica.linked {
                " (it had every write)"
            } else {
                " (with its copy)"
            }
        ));
        // Sentinel's switch: every client's pub/sub connection moves to the new primary.
        for (actor, member) in self.members.iter_mut().enumerate() {
            if member.client.is_some() && !member.seam.bus.subscribed().is_empty() {
                member.seam.bus.cut();
                member.inbox.clear();
                self.log.push(format!(
                    "actor{actor}: pub/sub connection moves to the new primary"
                ));
            }
        }
        let replica = self.replica.as_mut().expect("a replica");
        replica.linked = true;
        replica.promoted = true;
        replica.replication_id += 1;
        replica.copy.clear();
    }

    fn advance(&mut self, server: &mut Server, ms: u64) {
        self.advanced_ms += ms;
        server.set_time(server.now_ms() + ms);
        self.runtime()
            .block_on(tokio::time::advance(Duration::from_millis(ms)));
        self.log
            .push(format!("clocks +{ms} ms (now {} ms)", server.now_ms()));
    }

    fn has_permits(&self) -> bool {
        self.members.iter().any(|m| m.kind == Kind::Permit)
    }

    /// The semaphore's permits not taken.
    fn permits_available(&self, server: &mut Server) -> i64 {
        redis::cmd("GET")
            .arg(&self.key)
            .query::<Option<i64>>(server.connection())
            .unwrap()
            .unwrap_or(0)
    }

    fn believers(&self) -> Vec<usize> {
        (0..self.members.len())
            .filter(|&i| {
                let m = &self.members[i];
                let j = journal(&m.journal);
                // A release under way of its last level: the caller has left its section.
                let still_held = match &m.handle {
                    // A hold found lost is no longer believed (its levels stay until released).
                    Handle::Lock(lock) => lock.is_held(),
                    Handle::Permits(_) => true,
                    Handle::Redisson(rlock) => rlock.within_lease(),
                };
                still_held && j.releasing < m.handle.held(&j)
            })
            .collect()
    }

    /// After every step.
    fn check(&mut self, server: &mut Server) -> Option<Violation> {
        let believers = self.believers();
        // Readers share the lock with each other, and with nobody else.
        let exclusive: Vec<usize> = believers
            .iter()
            .copied()
            .filter(|&actor| self.members[actor].kind != Kind::Read)
            .collect();
        if exclusive.len() > 1 || (!exclusive.is_empty() && believers.len() > exclusive.len()) {
            return violation(
                "exclusion",
                format!("actors {believers:?} each believe they hold the lock"),
            );
        }
        for &actor in &believers {
            let member = &self.members[actor];
            if member.kind == Kind::Permit {
                // The one permit is taken: none is left to give.
                let available = self.permits_available(server);
                if available != 0 {
                    return violation(
                        "a belief is backed by the server",
                        format!(
                            "actor{actor} believes it holds the permit, yet {available} are free"
                        ),
                    );
                }
                continue;
            }
            let field = member.kind.field(member.handle.owner());
            let held: bool = redis::cmd("HEXISTS")
                .arg(&self.key)
                .arg(&field)
                .query(server.connection())
                .unwrap();
            if !held {
                return violation(
                    "a belief is backed by the server",
                    format!(
                        "actor{actor} believes it holds, but {} has no field {field}",
                        self.key
                    ),
                );
            }
        }
        for (actor, member) in self.members.iter().enumerate() {
            let j = journal(&member.journal);
            // Every lease of the scenarios is 30 s: a hold cannot have ended before.
            if let (Some(lost), true) = (&j.release_lost, self.advanced_ms < LEASE_MS) {
                return violation(
                    "a release that went through is never reported lost",
                    format!(
                        "actor{actor}'s release said {lost}, and the clocks moved {} ms in all",
                        self.advanced_ms
                    ),
                );
            }
        }
        if let Some(found) = self.fifo(server.now_ms()) {
            return Some(found);
        }
        if self.quiescent() && !self.faulted && self.advanced_ms == 0 && !self.all_done() {
            let free = if self.has_permits() {
                self.permits_available(server) > 0
            } else {
                !redis::cmd("EXISTS")
                    .arg(&self.key)
                    .query::<bool>(server.connection())
                    .unwrap()
            };
            // A poll waiter wakes by its own timer, not by a message.
            let waiting: Vec<usize> = (0..self.members.len())
                .filter(|&i| !self.members[i].poll && journal(&self.members[i].journal).acquiring)
                .collect();
            if free && !waiting.is_empty() {
                return violation(
                    "no waiter asleep beside a free lock",
                    format!(
                        "the lock is free, every message delivered, nothing in flight, and actors \
                         {waiting:?} wait on"
                    ),
                );
            }
        }
        None
    }

    /// Fair and FIFO locks: an acquisition (not a reentry) never overtakes a live waiter (still
    /// within its wait, and looking within the queue timeout all along) whose command queued
    /// it on the server earlier.
    fn fifo(&self, now: u64) -> Option<Violation> {
        let clock = {
            let _inside = self.runtime().enter();
            tokio::time::Instant::now()
        };
        let mut found = None;
        for (actor, member) in self.members.iter().enumerate() {
            let mut j = journal(&member.journal);
            if !std::mem::take(&mut j.just_acquired) {
                continue;
            }
            if member.kind.line().is_none() || j.held_before > 0 || self.history_rewound {
                continue;
            }
            let mine = j.queued_at;
            drop(j);
            for (other, waiter) in self.members.iter().enumerate() {
                let w = journal(&waiter.journal);
                let earlier = match (w.queued_at, mine) {
                    (Some(theirs), Some(mine)) => theirs < mine,
                    (Some(_), None) => true,
                    _ => false,
                };
                // Still waiting, and its place alive all along.
                let live = w.deadline.is_none_or(|deadline| clock < deadline)
                    && !w.lapsed
                    && w.last_look_ms
                        .is_some_and(|last| now - last < queue_timeout_ms());
                let same_line = waiter.kind.line() == member.kind.line();
                if other != actor && w.acquiring && live && earlier && same_line {
                    found = violation(
                        "FIFO",
                        format!("actor{actor} acquired ahead of actor{other}, queued earlier"),
                    );
                }
            }
        }
        found
    }

    /// The first command waiting, to run and answer, or else the first message waiting, to
    /// deliver: none when the world is quiescent.
    fn next_plain_step(&self) -> Option<Step> {
        let actors = 0..self.members.len();
        actors
            .clone()
            .find(|&i| !self.members[i].seam.wire.waiting().is_empty())
            .map(|actor| Step::Run { actor })
            .or_else(|| {
                actors
                    .clone()
                    .find(|&i| !self.members[i].inbox.is_empty())
                    .map(|actor| Step::Deliver { actor })
            })
    }

    /// Ends a path: answers everything in order (moving the clocks a second at a time when
    /// nothing is in flight, for waits to end) until every actor is done, then moves the
    /// clocks past the longest retry window: then nothing may be left but the fenced lock's
    /// token counter.
    fn at_rest(&mut self, server: &mut Server) -> Option<Violation> {
        for _ in 0..400 {
            if self.all_done() && self.quiescent() {
                break;
            }
            let step = self
                .next_plain_step()
                .or_else(|| {
                    (0..self.members.len())
                        .find(|&i| self.ready(i))
                        .map(|actor| Step::Call { actor })
                })
                .unwrap_or(Step::Advance { ms: 1_000 });
            self.apply(server, step);
            if let Some(found) = self.check(server) {
                return Some(found);
            }
        }
        if !self.all_done() {
            return violation(
                "every call ends",
                "actors still in a call after 400 steps".into(),
            );
        }
        // A release's trace (and the read-write lock's release latch) lives for its caller's
        // retry window; an acquire's latch for its lease and `LATCH_GRACE` (its retries and the
        // resolver's undo all come within it), and so does a semaphore's release latch (its
        // background retries come within a minute of its first send).
        let options = ClientOptions::default();
        let window = explorer_seam::trace_window(options.response_timeout * 2, &options);
        let spared: &[&str] = if self.has_permits() {
            &["polylock_acquire_latch:", "redisson_unlock_latch:"]
        } else {
            &["polylock_acquire_latch:"]
        };
        if let Some(found) = self.rest_for(server, window, spared) {
            return Some(found);
        }
        let latch_window =
            Duration::from_millis(explorer_seam::latch_ms(Duration::from_millis(LEASE_MS)));
        self.rest_for(server, latch_window, &[])
    }

    /// Moves the clocks by `window`, answers what that sends, then checks that nothing is
    /// left but the fenced lock's token counter (and keys starting with one of `spared`).
    fn rest_for(
        &mut self,
        server: &mut Server,
        window: Duration,
        spared: &[&str],
    ) -> Option<Violation> {
        self.apply(
            server,
            Step::Advance {
                ms: window.as_millis() as u64 + 1,
            },
        );
        while let Some(step) = self.next_plain_step() {
            self.apply(server, step);
        }
        // A semaphore's permits are its value, kept at rest: every permit came back.
        let permits = self.has_permits();
        if permits && self.permits_available(server) != 1 {
            return violation(
                "every permit comes back",
                format!(
                    "every call ended, yet {} permits of 1 are free",
                    self.permits_available(server)
                ),
            );
        }
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg("*")
            .query(server.connection())
            .unwrap();
        // A semaphore's tombstone (an undone acquire) lives its request window: permits never
        // expire, so a late copy of the acquire must never take one (one per acquire whose
        // outcome was unknown, not one per call).
        let tombstones: Vec<String> = if permits {
            keys.iter()
                .filter(|key| key.contains("polylock_acquire_latch:"))
                .filter(|key| {
                    redis::cmd("GET")
                        .arg(key.as_str())
                        .query::<Option<String>>(server.connection())
                        .unwrap()
                        .as_deref()
                        == Some("0")
                })
                .cloned()
                .collect()
        } else {
            Vec::new()
        };
        let left: Vec<String> = keys
            .into_iter()
            .filter(|key| {
                let kept = (permits && *key == self.key)
                    || tombstones.contains(key)
                    || key.starts_with("explorer:")
                    || key.contains("redisson_lock_token:")
                    || spared.iter().any(|prefix| key.contains(prefix));
                !kept
            })
            .collect();
        if !left.is_empty() {
            let ttls: Vec<i64> = left
                .iter()
                .map(|key| {
                    redis::cmd("PTTL")
                        .arg(key)
                        .query(server.connection())
                        .unwrap()
                })
                .collect();
            return violation(
                "nothing outlives its retry window",
                format!(
                    "every call ended {} ms ago, yet {left:?} remain (PTTL {ttls:?} ms)",
                    window.as_millis()
                ),
            );
        }
        None
    }
}

impl Drop for World {
    fn drop(&mut self) {
        let Some(runtime) = self.runtime.take() else {
            return;
        };
        {
            let _inside = runtime.enter();
            for member in self.members.drain(..) {
                if let Some(client) = &member.client {
                    client.close();
                }
                drop(member);
            }
        }
        explorer_seam::explore_on(None);
        // SAFETY: made by `Box::into_raw` in `new`; every client of this world is gone, and
        // the tasks that hold it are dropped with it.
        drop(unsafe { Box::from_raw(runtime as *const Runtime as *mut Runtime) });
    }
}

impl std::fmt::Display for World {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for line in &self.log {
            writeln!(f, "  {line}")?;
        }
        for (actor, member) in self.members.iter().enumerate() {
            let j = journal(&member.journal);
            writeln!(
                f,
                "  actor{actor} ({:?}, {}): {:?}",
                member.kind,
                member.handle.owner(),
                j.outcomes
            )?;
        }
        Ok(())
    }
}

/// How far a search goes.
#[derive(Debug, Clone)]
pub(crate) struct Bound {
    pub walks: usize,
    pub depth: usize,
    pub faults: usize,
    pub seed: u64,
}

pub(crate) struct Finding {
    pub violation: Violation,
    pub seed: u64,
    pub log: String,
}

pub(crate) struct Report {
    pub walks: usize,
    pub steps: usize,
    pub elapsed: Duration,
    pub finding: Option<Finding>,
}

impl Report {
    pub(crate) fn summary(&self, scenario: &Scenario, bound: &Bound) -> String {
        let mut text = format!(
            "driven explorer {}: {} walks, {} steps in {:.1?}",
            scenario.name, self.walks, self.steps, self.elapsed
        );
        if let Some(finding) = &self.finding {
            let _ = write!(
                text,
                "\nFOUND: {} — {}\n{}  replay: POLYLOCK_DRIVEN_REPLAY='{}:{}:{}:{}' cargo test -p polylock --features explorer --test explorer driven_tests::driven_replay -- --ignored --nocapture",
                finding.violation.property,
                finding.violation.detail,
                finding.log,
                scenario.name,
                finding.seed,
                bound.depth,
                bound.faults,
            );
        }
        text
    }
}

/// One random walk: up to `depth` steps drawn from `seed`, at most `faults` of them faults
/// (clock moves included), then the path's end at rest.
pub(crate) fn walk(
    server: &mut Server,
    scenario: &Scenario,
    bound: &Bound,
    seed: u64,
) -> (usize, Option<Finding>, String) {
    let mut rng = XorShift(seed.max(1));
    let mut world = World::new(server, scenario);
    let mut used = 0;
    let mut found = world.check(server);
    while found.is_none() && world.steps < bound.depth {
        let steps = world.enabled(&scenario.faults, used < bound.faults);
        if steps.is_empty() {
            break;
        }
        let step = steps[(rng.next() % steps.len() as u64) as usize];
        used += step.is_fault() as usize;
        world.apply(server, step);
        found = world.check(server);
    }
    if found.is_none() {
        found = world.at_rest(server);
    }
    let log = world.to_string();
    (
        world.steps,
        found.map(|violation| Finding {
            violation,
            seed,
            log: log.clone(),
        }),
        log,
    )
}

/// Random walks from `bound.seed` on, until one finds a violation.
pub(crate) fn explore(server: &mut Server, scenario: &Scenario, bound: &Bound) -> Report {
    let started = Instant::now();
    let mut report = Report {
        walks: 0,
        steps: 0,
        elapsed: Duration::ZERO,
        finding: None,
    };
    for walk_index in 0..bound.walks {
        let seed = bound.seed.wrapping_add(walk_index as u64);
        let (steps, finding, _) = walk(server, scenario, bound, seed);
        report.walks += 1;
        report.steps += steps;
        if finding.is_some() {
            report.finding = finding;
            break;
        }
    }
    report.elapsed = started.elapsed();
    report
}
