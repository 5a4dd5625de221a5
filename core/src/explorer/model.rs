//! A simulated client: one lock handle stepping through what the engine does, one function per
//! engine decision, each naming the engine code it mirrors. Scripts are built by the kinds
//! themselves ([`LockKind`]), so what runs here is what the engine sends.

use std::sync::Arc;
use std::time::Duration;

use crate::connection::Publish;
use crate::engine::latch_ms;
use crate::kinds::{self, AcquireArgs, Attempt, LockKind, ReleaseArgs, UndoArgs};
use crate::options::ClientOptions;

/// The lock the simulated clients contend for.
pub(crate) const LOCK: &str = "explored";

/// Which side of which lock kind a client takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Side {
    Reentrant,
    Fair,
    Fifo,
    Read,
    Write,
    /// One permit of a semaphore.
    Permit,
}

impl Side {
    pub(crate) fn kind(self, publish: Publish) -> Arc<dyn LockKind> {
        match self {
            Side::Reentrant => Arc::new(kinds::reentrant::Reentrant::new(
                LOCK,
                LOCK,
                publish,
                Default::default(),
            )),
            Side::Fair => Arc::new(kinds::fair::Fair::new(
                LOCK,
                LOCK,
                publish,
                Default::default(),
            )),
            Side::Fifo => Arc::new(kinds::fifo::Fifo::new(
                LOCK,
                LOCK,
                publish,
                Default::default(),
            )),
            Side::Read => Arc::new(kinds::read_write::ReadLock::new(LOCK, LOCK, publish)),
            Side::Write => Arc::new(kinds::read_write::WriteLock::new(LOCK, LOCK, publish)),
            Side::Permit => Arc::new(kinds::semaphore::SemaphoreAcquisition::new(
                LOCK, LOCK, 1, publish,
            )),
        }
    }

    /// The field of the lock hash that records `owner`'s hold (none: permits belong to nobody).
    pub(crate) fn field(self, owner: &str) -> Option<String> {
        match self {
            Side::Reentrant | Side::Fair | Side::Fifo | Side::Read => Some(owner.to_owned()),
            Side::Write => Some(format!("{owner}:write")),
            Side::Permit => None,
        }
    }
}

/// What one client does: one acquire call per entry (`None`: the watchdog lease, else a fixed
/// lease in ms), each followed by a release once held (or by giving up).
#[derive(Debug, Clone)]
pub(crate) struct ClientSpec {
    pub side: Side,
    pub leases: Vec<Option<u64>>,
    /// In cluster broadcast mode: its pub/sub connection is on another node than the lock's, so
    /// a `PUBLISH` there does not count it (the message still reaches it).
    pub other_node: bool,
    /// A poll waiter (`WaitMode::Poll`): never subscribes, never listed to be told, accepts no
    /// grant, and looks again after a sleep of any length (full jitter may make it 0).
    pub poll: bool,
}

/// Where a client is in its acquire/hold cycle (the engine's loop in `engine/acquire.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Phase {
    /// About to send an attempt (first, or again after a wake-up or a missed-something check).
    Looking,
    /// Busy reply, not yet subscribed: `acquire_loop` subscribes before sleeping.
    Subscribing,
    /// Asleep until a message or its timer.
    Sleeping,
    /// The last attempt's reply was lost: retry the same request, or give up and undo.
    Unknown,
    Holding,
    Done,
}

#[derive(Debug, Clone, Hash)]
pub(crate) struct Held {
    /// The acquire request of each level (`Hold::levels`).
    pub levels: Vec<String>,
    pub lease_ms: u64,
    pub watchdog: bool,
    /// When the lease ends by this client's own clock (`Upkeep`): beyond it the hold is lost.
    pub ends_local: i64,
}

/// One simulated handle with its own clock.
#[derive(Clone)]
pub(crate) struct SimClient {
    pub index: usize,
    pub owner: String,
    pub spec: ClientSpec,
    pub kind: Arc<dyn LockKind>,
    publish: Publish,
    /// Its clock is the explorer's plus this (a suspended VM's monotonic clock falls behind).
    pub clock_offset_ms: i64,
    pub phase: Phase,
    /// Acquire calls made so far (the next one uses `spec.leases[calls]`).
    pub calls: usize,
    pub request: String,
    requests_made: u32,
    pub listening: bool,
    /// A message came since its last look (`Subscription::messages` moved).
    pub woken: bool,
    /// The latest grant message, `(request, look)` (`Subscription::take_grant`'s slot).
    pub grant_slot: Option<(String, u64)>,
    /// `Waiting::grant_looks`: the call's latest looks that asked for a grant, numbered from 1,
    /// each with its local send time (at most `GrantLooks::KEPT`, 8).
    pub grant_looks: Vec<(u64, i64)>,
    pub last_look: u64,
    /// An acquire request whose outcome is unknown (a reply lost, a leave that failed): the
    /// resolver (`resolve_unknown`) undoes it in the background, retrying until it runs.
    pub pending_undo: Vec<String>,
    /// `Waiting::has_place`.
    pub has_place: bool,
    /// Its sleep ends by this local time even without a message.
    pub wakes_at_local: i64,
    pub held: Option<Held>,
    /// Explorer time of its latest look (fair queue liveness) and of its first busy reply in
    /// the current call (FIFO order).
    pub last_look_ms: u64,
    pub waiting_since: Option<u64>,
    /// The explorer's step numbers of the current call's first attempt that ran (its reply
    /// may have been lost: it counts from when it ran) and of its first busy reply: the
    /// order the server saw them in, which the frozen clock cannot tell (FIFO order).
    pub first_attempt_step: Option<usize>,
    pub waiting_since_step: Option<usize>,
}

impl std::fmt::Debug for SimClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {:?} {:?} call {} req {} listen {} woken {} slot {:?} looks {:?} undo {:?} place {} wakes {} held {:?} off {}",
            self.owner,
            self.spec.side,
            self.phase,
            self.calls,
            self.request,
            self.listening,
            self.woken,
            self.grant_slot,
            self.grant_looks,
            self.pending_undo,
            self.has_place,
            self.wakes_at_local,
            self.held,
            self.clock_offset_ms
        )
    }
}

pub(crate) fn options() -> ClientOptions {
    ClientOptions::default()
}

impl SimClient {
    pub(crate) fn new(index: usize, spec: ClientSpec, publish: Publish) -> SimClient {
        SimClient {
            index,
            owner: format!("client{index}:1"),
            kind: spec.side.kind(publish),
            publish,
            spec,
            clock_offset_ms: 0,
            phase: Phase::Looking,
            calls: 0,
            request: String::new(),
            requests_made: 0,
            listening: false,
            woken: false,
            grant_slot: None,
            grant_looks: Vec::new(),
            last_look: 0,
            pending_undo: Vec::new(),
            has_place: false,
            wakes_at_local: 0,
            held: None,
            last_look_ms: 0,
            waiting_since: None,
            first_attempt_step: None,
            waiting_since_step: None,
        }
    }

    pub(crate) fn local(&self, explorer_ms: u64) -> i64 {
        explorer_ms as i64 + self.clock_offset_ms
    }

    /// The lease of the current acquire call (`None`: the watchdog's).
    pub(crate) fn call_lease(&self) -> Option<u64> {
        self.spec.leases[self.calls]
    }

    pub(crate) fn lease_ms(&self) -> u64 {
        self.call_lease()
            .unwrap_or(options().watchdog_timeout.as_millis() as u64)
    }

    /// A fresh request id (`engine::request_id`), deterministic so replays are identical.
    pub(crate) fn new_request(&mut self) -> String {
        self.requests_made += 1;
        format!("{:0>32}", format!("{}f{}", self.index, self.requests_made))
    }

    /// The start of an acquire call (`acquire_task`): a new request, kept subscriptions.
    pub(crate) fn begin_call(&mut self) {
        self.request = self.new_request();
        self.grant_looks.clear();
        self.last_look = 0;
        self.has_place = false;
        self.woken = false;
        self.waiting_since = None;
        self.first_attempt_step = None;
        self.waiting_since_step = None;
    }

    /// `LockCore::accepts_grant`: a waiter held by the watchdog, of a kind that grants, where
    /// PUBLISH replies count every listener (no replica sync in the explorer).
    pub(crate) fn accepts_grant(&self, will_wait: bool) -> bool {
        will_wait
            && self.call_lease().is_none()
            && self.publish != (Publish::Explored { exact: false })
            && self.kind.wait_policy(&options()).grants_directly
    }

    /// `LockCore::try_acquire`'s arguments, for a look sent at local `sent_local` (numbered
    /// when it asks for a grant, as `GrantLooks::next`): every explored waiter will wait.
    pub(crate) fn acquire_call(&mut self, sent_local: i64) -> redis::ScriptInvocation<'static> {
        let grant_look = (!self.spec.poll && self.accepts_grant(true)).then(|| {
            self.last_look += 1;
            if self.grant_looks.len() == 8 {
                self.grant_looks.remove(0);
            }
            self.grant_looks.push((self.last_look, sent_local));
            self.last_look
        });
        let args = AcquireArgs {
            owner: &self.owner,
            lease_ms: self.lease_ms(),
            request: &self.request,
            will_wait: self.registers(),
            grant_look,
            // `LockCore::try_acquire`: one call at a time per client.
            reenters: self
                .held
                .as_ref()
                .is_some_and(|held| !held.levels.is_empty()),
        };
        self.kind.acquire(&args, &options())
    }

    /// `LockCore::undo_attempt` (from `resolve_unknown`) of the oldest pending request.
    pub(crate) fn undo_call(&self) -> Option<redis::ScriptInvocation<'static>> {
        let request = self.pending_undo.first()?;
        let restore = self.held.as_ref().map_or(0, |held| held.lease_ms);
        let args = UndoArgs {
            owner: &self.owner,
            request,
            latch_ms: latch_ms(Duration::from_millis(self.lease_ms_of_undo())),
            lease_ms: restore,
            keeps_place: None,
        };
        Some(self.kind.undo_acquire(&args, &options()))
    }

    /// The lease the undone request asked for: its call's, or the watchdog's once that call
    /// is over (the latch lifetime only needs to outlive it).
    fn lease_ms_of_undo(&self) -> u64 {
        self.spec
            .leases
            .get(self.calls)
            .copied()
            .flatten()
            .unwrap_or(options().watchdog_timeout.as_millis() as u64)
            .max(options().watchdog_timeout.as_millis() as u64)
    }

    /// `LockCore::leave_queue`: its tombstone lasts as long as a watchdog latch.
    pub(crate) fn leave_call(&self) -> Option<redis::ScriptInvocation<'static>> {
        let tombstone_ms = latch_ms(options().watchdog_timeout);
        self.kind
            .leave_queue(&self.owner, &self.request, tombstone_ms, &options())
    }

    /// `engine/release.rs`: one level, under a new release request.
    pub(crate) fn release_call(&mut self) -> Option<redis::ScriptInvocation<'static>> {
        let held = self.held.as_ref()?;
        let acquired_by = held.levels.last()?.clone();
        let lease_ms = held.lease_ms;
        let lease = Duration::from_millis(lease_ms);
        let request = self.new_request();
        if self.spec.side == Side::Permit {
            // `Semaphore`: an acquisition is detached (its latch deleted) once its caller has
            // it, and a release is an add of its permits (`add.lua`).
            let mut call = kinds::semaphore::ADD.prepare_invoke(self.publish);
            call.key(LOCK)
                .key(crate::keys::semaphore_channel(LOCK))
                .key(crate::keys::unlock_latch(LOCK, &request))
                .arg(1)
                .arg(latch_ms(options().response_timeout * 2));
            return Some(call);
        }
        let args = ReleaseArgs {
            owner: &self.owner,
            lease_ms,
            request: &request,
            acquired_by: &acquired_by,
            latch_ms: latch_ms(lease),
            final_latch_ms: latch_ms(options().response_timeout * 2),
            trace_ms: crate::engine::release::trace_window(
                options().response_timeout * 2,
                &options(),
            )
            .as_millis() as u64,
        };
        Some(self.kind.release(&args))
    }

    /// The watchdog's renewal (`engine/renew.rs`, a batch of one).
    pub(crate) fn renewal_call(&self, publish: Publish) -> redis::ScriptInvocation<'static> {
        let renewal = self.kind.renewal(&self.owner);
        let mut call = renewal.script.prepare_invoke(publish);
        call.key(renewal.key)
            .arg(options().watchdog_timeout.as_millis() as u64)
            .arg(renewal.owner);
        call
    }

    /// The channels it listens on while subscribed (`WaitSubscriptions`).
    pub(crate) fn channels(&self) -> Vec<String> {
        let mut channels = vec![self.kind.wait_channel(&self.owner)];
        channels.extend(self.kind.told_channel(&self.owner));
        channels
    }

    /// Whether it believes it holds: a recorded hold whose lease has not ended by its clock.
    pub(crate) fn believes_held(&self, explorer_ms: u64) -> bool {
        self.held
            .as_ref()
            .is_some_and(|held| self.local(explorer_ms) < held.ends_local)
    }

    /// `acquire_loop` on an attempt's reply. `sent_local`: when it was sent, by this clock.
    pub(crate) fn on_attempt(&mut self, attempt: Attempt, sent_local: i64, explorer_ms: u64) {
        match attempt {
            Attempt::Acquired { .. } => self.record_acquired(sent_local),
            Attempt::Undone => self.end_call(),
            Attempt::Busy(wait) => {
                self.has_place |= self
                    .kind
                    .wait_policy(&options())
                    .busy_attempt_takes_a_place(self.registers());
                self.sleep_after_busy(wait, sent_local, explorer_ms);
            }
            Attempt::Queued { wait } => {
                self.has_place = true;
                self.sleep_after_busy(wait, sent_local, explorer_ms);
            }
            Attempt::NotSynced(_) => unreachable!("no replica sync in the explorer"),
        }
    }

    /// `acquire_loop`'s `registers`: a poll waiter is not listed by a kind that keeps the lock
    /// for the waiter it told (it could not hear it); it registers in the other kinds' queues.
    fn registers(&self) -> bool {
        !self.spec.poll || self.kind.wait_policy(&options()).lists_poll_waiters
    }

    /// `acquire_loop` after a busy reply: subscribe if not yet, then sleep at most the slice
    /// (the wait replied, the kind's longest wait, and the longest silence). A poll waiter
    /// sleeps without subscribing, for any time up to its backoff: it may look again at once.
    fn sleep_after_busy(&mut self, wait: Option<Duration>, sent_local: i64, explorer_ms: u64) {
        self.waiting_since.get_or_insert(explorer_ms);
        if self.spec.poll {
            self.wakes_at_local = sent_local;
            self.phase = Phase::Sleeping;
            return;
        }
        let policy = self.kind.wait_policy(&options());
        let slice = [wait, policy.longest_wait, policy.longest_silence]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(Duration::from_secs(3600));
        self.wakes_at_local = sent_local + slice.as_millis() as i64;
        self.phase = if self.listening {
            Phase::Sleeping
        } else {
            Phase::Subscribing
        };
    }

    /// `hand_over` → `record_acquired`: the lease runs from `counted_from` (local).
    pub(crate) fn record_acquired(&mut self, counted_from: i64) {
        let lease_ms = self.lease_ms();
        let watchdog = self.call_lease().is_none();
        let permit = self.spec.side == Side::Permit;
        let request = self.request.clone();
        let held = self.held.get_or_insert(Held {
            levels: Vec::new(),
            lease_ms,
            watchdog,
            ends_local: 0,
        });
        held.levels.push(request);
        held.lease_ms = lease_ms;
        held.watchdog = watchdog;
        held.ends_local = if permit {
            i64::MAX
        } else {
            counted_from + lease_ms as i64
        };
        // `waiting_since` stays until the next call: the FIFO check reads it.
        self.phase = Phase::Holding;
    }

    /// The acquire call ended without the lock (gave up, undone): `acquire_task` drops the
    /// subscriptions of a waiter that gives up; the next call starts, or the handle is done.
    pub(crate) fn end_call(&mut self) {
        self.listening = false;
        self.woken = false;
        self.grant_slot = None;
        self.waiting_since = None;
        self.first_attempt_step = None;
        self.waiting_since_step = None;
        self.next_call();
    }

    /// After a release or a call given up: the next acquire call, or done (handle dropped).
    pub(crate) fn next_call(&mut self) {
        self.calls += 1;
        if self.calls < self.spec.leases.len() {
            self.phase = Phase::Looking;
            self.begin_call();
        } else {
            self.phase = Phase::Done;
            self.listening = false;
        }
    }

    /// A message on one of its channels (`kinds/messages.rs`): `00` only notes that the line
    /// moves; a grant fills the grant slot; any other wakes the sleep.
    pub(crate) fn deliver(&mut self, payload: &str) {
        if payload == "00" {
            return;
        }
        self.woken = true;
        if let Some(grant) = payload.strip_prefix("g:") {
            if let Some((request, look)) = grant.rsplit_once(':') {
                if let Ok(look) = look.parse() {
                    self.grant_slot = Some((request.to_owned(), look));
                }
            }
        }
    }

    /// `Subscription::take_grant`: the slot's grant if it is for `request`.
    pub(crate) fn take_grant(&mut self) -> Option<u64> {
        match self.grant_slot.take() {
            Some((request, look)) if request == self.request => Some(look),
            other => {
                self.grant_slot = other;
                None
            }
        }
    }

    /// `acquire_loop`'s first check on each pass (`LockCore::granted`): a grant for this call's
    /// request, counted by [`grant_lease_end`]. True when it now holds.
    pub(crate) fn check_granted(&mut self, explorer_ms: u64) -> bool {
        let Some(look) = self.take_grant() else {
            return false;
        };
        let Some(&(_, sent_local)) = self.grant_looks.iter().find(|(number, _)| *number == look)
        else {
            return false;
        };
        let now = self.local(explorer_ms);
        let Some(counted_from) = grant_lease_start(sent_local, self.lease_ms() as i64, now) else {
            return false;
        };
        self.record_acquired(counted_from);
        true
    }
}

/// THE grant rule (`LockCore::granted` in `engine/acquire.rs`), in one place: the grant names
/// the look whose entry it read, and gave the key the whole lease after that look ran, so the
/// lease counts from that look's local send time `sent_local`. A grant whose lease, so
/// counted, is half gone is not counted on (the waiter looks again). Returns the local instant
/// the hold's lease counts from.
pub(crate) fn grant_lease_start(sent_local: i64, lease_ms: i64, now_local: i64) -> Option<i64> {
    (sent_local + lease_ms > now_local + lease_ms / 2).then_some(sent_local)
}
