//! Acquire: each call's work runs on the caller's task until the caller drops it, then on as a
//! task of its own ([`Inline`]), so a script already sent is always answered, and an
//! acquisition nobody receives is undone (see [`Handoff`]).
//!
//! One request id per call makes every attempt idempotent: an attempt whose reply was lost
//! (timeout, dropped connection) is retried with the same id within the caller's wait bound,
//! and replays its first outcome. A call that ends while an attempt's outcome is unknown
//! leaves a resolver behind that undoes the attempt as soon as the server answers again.

use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use tokio::sync::oneshot;
use tracing::Instrument;

use crate::connection::{Publish, Synced};
use crate::engine::{latch_ms, request_id, Backoff, Lease, LockCore, LATCH_GRACE};
use crate::foundation::error::{Error, Result};
use crate::foundation::runtime::{runtime, Inline};
use crate::kinds::messages::LockSubscription;
use crate::kinds::{AcquireArgs, Attempt, LeaveArgs, Unconfirmed, UndoArgs};
use crate::metrics::{AcquireRecord, Progress, WokenBy};
use crate::settings::options::{validate_acquire, WaitMode};

/// Longest single sleep of a waiter between two looks at the lock (it normally wakes by message).
const MAX_WAIT_SLICE: Duration = Duration::from_secs(3600);

/// The sleeps of a poll waiter between two looks: bounded exponential backoff with full
/// jitter (each a random time up to `min * 2^n`, that cap at most `max`), so that waiters
/// started together spread out rather than look in step.
pub(crate) struct PollBackoff {
    cap: Duration,
    max: Duration,
}

impl PollBackoff {
    pub(crate) fn new(min: Duration, max: Duration) -> PollBackoff {
        PollBackoff { cap: min, max }
    }

    pub(crate) fn next_sleep(&mut self) -> Duration {
        let cap = self.cap;
        self.cap = (self.cap * 2).min(self.max);
        let fraction = (crate::foundation::ids::random_u64() >> 11) as f64 / (1u64 << 53) as f64;
        cap.mul_f64(fraction)
    }
}

/// Who owns an acquisition that completes while the caller may be dropping its future: the
/// task commits it (then the caller's guard undoes it if the result never arrives), or the
/// caller abandons first (then the task undoes it). Exactly one side wins the exchange.
#[derive(Default)]
struct Handoff(AtomicU8);

const WAITING: u8 = 0;
const COMMITTED: u8 = 1;
const ABANDONED: u8 = 2;

impl Handoff {
    /// True when the acquisition now belongs to the caller.
    fn commit(&self) -> bool {
        self.0
            .compare_exchange(WAITING, COMMITTED, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    fn is_abandoned(&self) -> bool {
        self.0.load(Ordering::Acquire) == ABANDONED
    }

    /// True when the task had already committed an acquisition the caller will never see.
    fn abandon(&self) -> bool {
        self.0
            .compare_exchange(WAITING, ABANDONED, Ordering::AcqRel, Ordering::Acquire)
            == Err(COMMITTED)
    }
}

/// Lives in the caller's `acquire` future; dropping it before the result arrived abandons the
/// attempt (and wakes the task through `_cancel`).
struct CallerGuard {
    handoff: Arc<Handoff>,
    lock: Arc<LockCore>,
    _cancel: oneshot::Sender<()>,
    received: bool,
}

impl Drop for CallerGuard {
    fn drop(&mut self) {
        if self.received || !self.handoff.abandon() {
            return;
        }
        // The task recorded the hold before committing it, so releasing one level undoes
        // exactly that acquisition. The level comes off at once, so the handle never reports
        // a hold its caller did not receive.
        let Ok(reserved) = self.lock.reserve_level() else {
            return;
        };
        let lock = self.lock.clone();
        runtime().spawn(async move {
            if let Err(err) = lock.finish_release(reserved).await {
                tracing::warn!(lock = %lock.name(), error = %err, "could not undo an acquire whose caller went away");
            }
        });
    }
}

/// A waiter's subscriptions: its wait channel, and for kinds with a waiter list, the channel of
/// its own on which a release tells it that it is next.
#[derive(Default)]
pub(crate) struct WaitSubscriptions {
    wait: Option<LockSubscription>,
    told: Option<LockSubscription>,
}

impl WaitSubscriptions {
    /// How many messages each channel has had so far (0 for one not subscribed): a sleep
    /// given these ends at once for any message that came after.
    fn messages(&self) -> (u64, u64) {
        let count = |subscription: &Option<LockSubscription>| {
            subscription.as_ref().map_or(0, LockSubscription::messages)
        };
        (count(&self.wait), count(&self.told))
    }

    /// The channel a grant comes on: the waiter's own, its told channel or else its wait
    /// channel (a fair waiter's is its own).
    fn grants(&self) -> Option<&LockSubscription> {
        self.told.as_ref().or(self.wait.as_ref())
    }
}

/// A waiter's subscriptions; whether it used up a wake-up message on the wait channel that the
/// next attempt has not answered yet (a waiter that leaves then passes it on); whether it took
/// a place it must leave when it gives up; and its latest looks that asked to be granted the
/// lock.
struct Waiting {
    subscriptions: WaitSubscriptions,
    woken: bool,
    has_place: bool,
    grant_looks: GrantLooks,
    /// What the caller's count of this call learns: attempts, and what woke it.
    progress: Arc<Progress>,
    /// The sleeps of a poll waiter, which never subscribes; `None` for a pub/sub waiter.
    poll: Option<PollBackoff>,
}

/// The latest looks of one acquire call that asked a release to grant it the lock, numbered
/// from 1, each with the instant it was sent. A grant names the look whose entry it read, and
/// that look ran before the grant gave the lock its whole lease: so the lease, counted by this
/// process's clock from when that look was sent, ends no later than the key's.
#[derive(Default)]
struct GrantLooks {
    last: u64,
    sent: std::collections::VecDeque<(u64, Instant)>,
}

impl GrantLooks {
    /// Looks remembered: a grant naming an older one is not counted on (the waiter looks
    /// again, which finds the lock granted and starts its lease anew).
    const KEPT: usize = 8;

    /// Numbers a look about to be sent now.
    fn next(&mut self, sent_at: Instant) -> u64 {
        self.last += 1;
        if self.sent.len() == Self::KEPT {
            self.sent.pop_front();
        }
        self.sent.push_back((self.last, sent_at));
        self.last
    }

    fn sent_at(&self, look: u64) -> Option<Instant> {
        self.sent
            .iter()
            .find(|(number, _)| *number == look)
            .map(|(_, sent_at)| *sent_at)
    }
}

impl Waiting {
    /// An attempt found the lock busy: a wake-up used is answered; `takes_place` when it listed
    /// this waiter.
    fn found_busy(&mut self, takes_place: bool) {
        self.woken = false;
        self.has_place |= takes_place;
    }
}

/// Waits for a message on `subscription`, at most `max`; never ends when there is none.
async fn told_or_pending(subscription: Option<&LockSubscription>, max: Duration, messages: u64) {
    match subscription {
        Some(subscription) => {
            subscription.wait(max, messages).await;
        }
        None => std::future::pending().await,
    }
}

/// Ends after `period` without a release that told a waiter elsewhere; never without a period.
async fn silence_or_pending(subscription: &LockSubscription, period: Option<Duration>) {
    match period {
        Some(period) => subscription.silence(period).await,
        None => std::future::pending().await,
    }
}

/// How an attempt loop ended, and whether its last attempt's outcome is unknown.
struct Ended {
    outcome: Result<bool>,
    unknown: bool,
}

impl Ended {
    /// An acquisition that could not be recorded (the client closed meanwhile): nothing may
    /// hold now, so the resolver undoes it.
    fn unknown_if_closed(self) -> Ended {
        let unknown = self.unknown || self.outcome.is_err();
        Ended { unknown, ..self }
    }
}

/// Counts one acquire call of a handle while it is under way.
struct Acquiring<'a>(&'a AtomicUsize);

impl<'a> Acquiring<'a> {
    fn start(calls: &'a AtomicUsize) -> Self {
        calls.fetch_add(1, Ordering::AcqRel);
        Acquiring(calls)
    }
}

impl Drop for Acquiring<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

fn remaining(deadline: Option<Instant>) -> Duration {
    deadline.map_or(MAX_WAIT_SLICE, |deadline| {
        deadline.saturating_duration_since(Instant::now())
    })
}

/// The channels an acquire call waits on: the lock's (`wait`), the waiter's own (`told`) and
/// the channel a plain waiter announces itself on (`listening`), as its kind names them.
struct WaitChannels {
    wait: String,
    told: Option<String>,
    listening: Option<String>,
}

/// What the acquire loop does after [`LockCore::subscribe`].
enum Subscribed {
    /// It was subscribed already.
    Already,
    /// Subscribed, and nothing was missed: sleep, woken by messages after these counts.
    Sleep((u64, u64)),
    /// Look again first (a message may have been missed, or the client closed).
    LookAgain,
    /// The call ends with this outcome.
    Ended(Result<bool>),
}

/// How a wait of the acquire loop ended.
enum Waited<T> {
    /// What it waited for came (its output).
    Done(T),
    /// The caller cancelled the call.
    Cancelled,
    /// The client closed: the loop looks again, which ends the call with the client's error.
    Closed,
}

/// What ends every wait of the acquire loop besides what it waits for: the caller's
/// cancellation and the client's close.
struct Interruptions<'a> {
    cancelled: &'a mut oneshot::Receiver<()>,
    closed: tokio::sync::watch::Receiver<bool>,
}

impl Interruptions<'_> {
    /// Runs `future` until it ends, the call is cancelled or the client closes. Boxed, as every
    /// path that only a waiting or retrying call takes: an acquire's future is as large as its
    /// largest await, and it is allocated and moved at each call.
    async fn run<T>(&mut self, future: impl std::future::Future<Output = T>) -> Waited<T> {
        Box::pin(async move {
            tokio::select! {
                output = future => Waited::Done(output),
                _ = &mut *self.cancelled => Waited::Cancelled,
                _ = self.closed.wait_for(|closed| *closed) => Waited::Closed,
            }
        })
        .await
    }

    /// Sleeps `delay` (a backoff before the next look). False when the call was cancelled.
    async fn pause(&mut self, delay: Duration) -> bool {
        !matches!(self.run(tokio::time::sleep(delay)).await, Waited::Cancelled)
    }
}

impl LockCore {
    /// Acquires or re-enters. `wait`: `None` no bound, zero one attempt. `lease`: `None` the
    /// watchdog lease. `mode`: `None` the client's wait mode. Dropping the future leaves no
    /// lock held and no subscription behind.
    pub(crate) async fn acquire(
        self: &Arc<Self>,
        wait: Option<Duration>,
        lease: Option<Duration>,
        mode: Option<WaitMode>,
    ) -> Result<bool> {
        validate_acquire(wait, lease)?;
        let mode = mode.unwrap_or(self.client.options.wait_mode);
        mode.validate()?;
        if !mode.is_poll() && self.client.hub.is_none() {
            return Err(crate::settings::options::invalid(format!(
                "{}: wait_mode pubsub needs a pub/sub connection, which a client \
                 connected with wait_mode poll does not open",
                self.described()
            )));
        }
        let poll = match mode {
            WaitMode::Poll { min, max } => Some(PollBackoff::new(min, max)),
            WaitMode::PubSub => None,
        };
        // Dropped with this future: then counted as cancelled.
        let mut record = AcquireRecord::start(&self.stats);
        if let Err(err) = self.check_usable() {
            let failed = Err(err);
            record.end(&failed);
            return failed;
        }
        let lease = lease.map_or(Lease::Watchdog, Lease::Fixed);
        let deadline = wait.map(|wait| Instant::now() + wait);
        let (cancel, cancelled) = oneshot::channel::<()>();
        let handoff = Arc::new(Handoff::default());
        let mut caller = CallerGuard {
            handoff: handoff.clone(),
            lock: self.clone(),
            _cancel: cancel,
            received: false,
        };
        let task = Inline::new(
            self.clone()
                .acquire_task(deadline, lease, cancelled, handoff, record.progress(), poll)
                .instrument(record.span().clone()),
            || self.task_panicked("acquire"),
        );
        let mut closed = self.client.closed_receiver();
        let outcome = tokio::select! {
            acquired = task => {
                caller.received = true;
                acquired
            }
            // A pending wait ends at once when the client closes; the guard abandons the task.
            _ = closed.wait_for(|closed| *closed) => Err(self.client.closed_error(&self.described())),
        };
        record.end(&outcome);
        outcome
    }

    async fn acquire_task(
        self: Arc<Self>,
        deadline: Option<Instant>,
        lease: Lease,
        mut cancelled: oneshot::Receiver<()>,
        handoff: Arc<Handoff>,
        progress: Arc<Progress>,
        poll: Option<PollBackoff>,
    ) -> Result<bool> {
        let _acquiring = Acquiring::start(&self.acquiring);
        let mut request = request_id();
        // A poll waiter leaves kept channels to the handle's next pub/sub wait.
        let subscriptions = if poll.is_some() {
            WaitSubscriptions::default()
        } else {
            self.take_kept_subscriptions()
        };
        let polling = poll.is_some();
        let mut waiting = Waiting {
            poll,
            subscriptions,
            woken: false,
            has_place: false,
            grant_looks: GrantLooks::default(),
            progress,
        };
        let first_sent = Instant::now();
        let ended = self
            .acquire_loop(
                &mut request,
                deadline,
                lease,
                &mut cancelled,
                &handoff,
                &mut waiting,
            )
            .await;
        let acquired = matches!(ended.outcome, Ok(true));
        if !acquired {
            if ended.unknown {
                self.resolve_unknown(request, lease, first_sent);
            } else if waiting.has_place && !self.leave_queue(&request).await {
                // Its place and grant entry must not outlive it: a release could grant the
                // lock to a request nobody waits under. Undoing also removes them.
                self.resolve_unknown(request, lease, first_sent);
            }
            let wait = waiting.subscriptions.wait.as_ref();
            if let Some(subscription) = wait.filter(|_| waiting.woken) {
                // Our wake-up went unused: another local waiter may be next.
                subscription.pass_on();
            }
        }
        // Kept only by a holder: a waiter that gives up leaves no subscription behind.
        if acquired && !polling {
            self.keep_subscriptions(waiting.subscriptions);
        }
        ended.outcome
    }

    async fn acquire_loop(
        self: &Arc<Self>,
        request: &mut String,
        deadline: Option<Instant>,
        lease: Lease,
        cancelled: &mut oneshot::Receiver<()>,
        handoff: &Handoff,
        waiting: &mut Waiting,
    ) -> Ended {
        let ended = |outcome: Result<bool>, unknown: bool| Ended { outcome, unknown };
        // Named when the call first subscribes: a call that takes the lock at once needs none.
        let mut channels: Option<WaitChannels> = None;
        let mut interruptions = Interruptions {
            cancelled,
            closed: self.client.closed_receiver(),
        };
        let mut backoff = Backoff::default();
        let mut unknown = false;
        // What ended the latest sleep, until the next attempt answers.
        let mut woke: Option<WokenBy> = None;
        let progress = waiting.progress.clone();
        loop {
            if handoff.is_abandoned() {
                return ended(Ok(false), unknown);
            }
            if let Err(err) = self.check_usable() {
                return ended(Err(err), unknown);
            }
            if let Some(sent_at) = self.granted(waiting, request) {
                waiting.woken = false;
                progress.took_it_after(Some(WokenBy::Grant));
                return ended(
                    self.hand_over(request, None, lease, sent_at, handoff).await,
                    false,
                )
                .unknown_if_closed();
            }
            match self
                .wait_for_release_gate(deadline, &mut interruptions)
                .await
            {
                // Look again: abandoned, closed or granted meanwhile.
                Some(true) => continue,
                Some(false) => return ended(Ok(false), unknown),
                None => {}
            }
            // Messages after this look are not missed by the sleep after it.
            let (mut messages, mut told) = waiting.subscriptions.messages();
            let (attempt, sent_at, registers) = self.look(request, lease, deadline, waiting).await;
            let woken = woke.take();
            if woken.is_some() && matches!(attempt, Ok(Attempt::Busy(_) | Attempt::Queued { .. })) {
                self.stats.wakeup_found_taken();
            }
            let holder_lease = match attempt {
                Ok(Attempt::Acquired { token }) => {
                    waiting.woken = false;
                    progress.took_it_after(woken);
                    return ended(
                        self.hand_over(request, token, lease, sent_at, handoff)
                            .await,
                        false,
                    )
                    .unknown_if_closed();
                }
                Ok(Attempt::Undone) => return ended(Ok(false), false),
                Ok(Attempt::NotSynced(why)) => {
                    if let Err(err) = Box::pin(self.undo_not_synced(request, lease, waiting)).await
                    {
                        return ended(Err(err), true);
                    }
                    unknown = false;
                    let left = remaining(deadline);
                    if left.is_zero() {
                        return ended(Err(self.not_synced(why)), false);
                    }
                    if !interruptions.pause(backoff.next_delay().min(left)).await {
                        return ended(Ok(false), false);
                    }
                    continue;
                }
                Ok(Attempt::Busy(wait)) => {
                    unknown = false;
                    backoff = Backoff::default();
                    waiting.found_busy(self.wait_policy().busy_attempt_takes_a_place(registers));
                    wait
                }
                Ok(Attempt::Queued { wait }) => {
                    unknown = false;
                    backoff = Backoff::default();
                    waiting.found_busy(true);
                    wait
                }
                Err(err) if err.is_transient() => {
                    // The outcome is unknown: retry the same request within the wait bound.
                    unknown = true;
                    // The look may have taken a place before its reply was lost; a retry sent
                    // once the wait has run out takes none, and finds it busy: the call must
                    // still leave that place when it gives up.
                    waiting.has_place |= self.wait_policy().busy_attempt_takes_a_place(registers);
                    let left = remaining(deadline);
                    if left.is_zero() {
                        return ended(Err(err), true);
                    }
                    tracing::debug!(%err, "acquire attempt failed; retrying with the same request id");
                    if !interruptions.pause(backoff.next_delay().min(left)).await {
                        return ended(Ok(false), true);
                    }
                    continue;
                }
                // An earlier attempt's outcome stays unknown: the resolver must still run.
                Err(err) => return ended(Err(err), unknown),
            };
            if handoff.is_abandoned() {
                return ended(Ok(false), false);
            }
            let left = remaining(deadline);
            if left.is_zero() {
                return ended(Ok(false), false);
            }
            if let Some(poll) = waiting.poll.as_mut() {
                // The last sleep ends with the wait, so the wait ends at its bound (with one
                // more look), not a backoff later.
                let slice = self.sleep_slice(poll.next_sleep().min(left), holder_lease);
                match interruptions.run(tokio::time::sleep(slice)).await {
                    Waited::Done(()) => woke = Some(WokenBy::Poll),
                    Waited::Cancelled => return ended(Ok(false), false),
                    Waited::Closed => {}
                }
                continue;
            }
            // The waits are boxed (see `Interruptions::run`): a call that takes the lock at once
            // never allocates them.
            match Box::pin(self.subscribe(
                waiting,
                channels.get_or_insert_with(|| self.wait_channels()),
                left,
                &mut interruptions,
                &mut backoff,
            ))
            .await
            {
                Subscribed::Sleep(counts) => (messages, told) = counts,
                Subscribed::LookAgain => continue,
                Subscribed::Ended(outcome) => return ended(outcome, false),
                Subscribed::Already => {}
            }
            let slice = self.sleep_slice(left.min(MAX_WAIT_SLICE), holder_lease);
            match Box::pin(self.sleep_until_news(
                waiting,
                slice,
                (messages, told),
                &mut interruptions,
            ))
            .await
            {
                Waited::Done(by) => woke = by,
                Waited::Cancelled => return ended(Ok(false), false),
                Waited::Closed => {}
            }
        }
    }

    fn wait_channels(&self) -> WaitChannels {
        WaitChannels {
            wait: self.kind.wait_channel(&self.owner),
            told: self.kind.told_channel(&self.owner),
            listening: self.kind.listening_channel(),
        }
    }

    /// Subscribes to the waiter's channels where it is not subscribed yet, before it sleeps, so
    /// that an unlock after its look is never missed.
    async fn subscribe(
        &self,
        waiting: &mut Waiting,
        channels: &WaitChannels,
        left: Duration,
        interruptions: &mut Interruptions<'_>,
        backoff: &mut Backoff,
    ) -> Subscribed {
        let Some(hub) = self.client.hub.as_ref() else {
            // Checked when the call began; a client never loses its hub.
            return Subscribed::Ended(Err(Error::redis("no pub/sub connection to wait on")));
        };
        let subscriptions = &mut waiting.subscriptions;
        let told_missing = channels
            .told
            .as_ref()
            .filter(|_| subscriptions.told.is_none());
        if subscriptions.wait.is_some() && told_missing.is_none() {
            return Subscribed::Already;
        }
        let subscribing = async {
            if subscriptions.wait.is_none() {
                let listening = channels.listening.as_deref();
                subscriptions.wait = Some(hub.subscribe(&channels.wait, listening).await?);
            }
            if let Some(told_channel) = told_missing {
                subscriptions.told = Some(hub.subscribe(told_channel, None).await?);
            }
            Ok::<(), Error>(())
        };
        let subscribed = match interruptions
            .run(tokio::time::timeout(left, subscribing))
            .await
        {
            Waited::Done(Ok(subscribed)) => subscribed,
            // The wait ran out while subscribing.
            Waited::Done(Err(_)) | Waited::Cancelled => return Subscribed::Ended(Ok(false)),
            Waited::Closed => return Subscribed::LookAgain,
        };
        // Messages from here on wake the sleep.
        let counts = subscriptions.messages();
        match subscribed {
            // Sleep without a second look when it can be shown that nothing was missed.
            Ok(()) if self.nothing_missed().await => Subscribed::Sleep(counts),
            Ok(()) => Subscribed::LookAgain,
            Err(err) if err.is_transient() => {
                tracing::debug!(%err, "subscribe failed; retrying");
                if !interruptions.pause(backoff.next_delay().min(left)).await {
                    return Subscribed::Ended(Ok(false));
                }
                Subscribed::LookAgain
            }
            Err(err) => Subscribed::Ended(Err(err)),
        }
    }

    /// Sleeps at most `slice` until a message on the waiter's channels after `counts` (the
    /// lock's channel, its told channel), or the channel's silence (a lost connection): what
    /// woke it.
    async fn sleep_until_news(
        &self,
        waiting: &mut Waiting,
        slice: Duration,
        (messages, told): (u64, u64),
        interruptions: &mut Interruptions<'_>,
    ) -> Waited<Option<WokenBy>> {
        let subscriptions = &waiting.subscriptions;
        let Some(subscription) = subscriptions.wait.as_ref() else {
            return Waited::Done(None);
        };
        let silence = self.wait_policy().longest_silence;
        // What woke it, and for a message on the lock's channel whether it was woken
        // (`Waiting::woken`; the others leave that as it is).
        let sleep = async {
            tokio::select! {
                woken = subscription.wait(slice, messages) => {
                    tracing::trace!(target: "polylock::handoff", "woken");
                    (Some(woken), if woken { WokenBy::Message } else { WokenBy::Poll })
                }
                _ = told_or_pending(subscriptions.told.as_ref(), slice, told) => {
                    tracing::trace!(target: "polylock::handoff", "woken");
                    (None, WokenBy::Message)
                }
                _ = silence_or_pending(subscription, silence) => (None, WokenBy::Poll),
            }
        };
        match interruptions.run(sleep).await {
            Waited::Done((woken, by)) => {
                if let Some(woken) = woken {
                    waiting.woken = woken;
                }
                Waited::Done(Some(by))
            }
            Waited::Cancelled => Waited::Cancelled,
            Waited::Closed => Waited::Closed,
        }
    }

    /// Waits while the owner's undo or release of this lock is in flight (`release_gate`),
    /// within the call's wait: None when nothing is, else whether to look again (false: the
    /// call ends, not acquired).
    async fn wait_for_release_gate(
        &self,
        deadline: Option<Instant>,
        interruptions: &mut Interruptions<'_>,
    ) -> Option<bool> {
        let bound = self.held_back(deadline)?;
        if deadline.is_some() && bound.is_zero() {
            return Some(false);
        }
        let (gate, key, owner) = (&self.client.release_gate, self.kind.key(), &self.owner);
        let opened = async {
            match deadline {
                Some(_) => tokio::time::timeout(bound, gate.open(key, owner))
                    .await
                    .is_ok(),
                None => {
                    gate.open(key, owner).await;
                    true
                }
            }
        };
        Some(match interruptions.run(opened).await {
            Waited::Done(opened) => opened,
            Waited::Closed => true,
            Waited::Cancelled => false,
        })
    }

    /// One look: the acquire script under `request`. With it, when it was sent, and whether it
    /// registered the caller as a waiter.
    async fn look(
        &self,
        request: &str,
        lease: Lease,
        deadline: Option<Instant>,
        waiting: &mut Waiting,
    ) -> (Result<Attempt>, Instant, bool) {
        let will_wait = !remaining(deadline).is_zero();
        // A kind that keeps the lock for the waiter it told must not list a poll waiter: the
        // one told would never hear it, and the lock would stay kept for it.
        let registers =
            will_wait && (waiting.poll.is_none() || self.wait_policy().lists_poll_waiters);
        let sent_at = Instant::now();
        let grant_look = (waiting.poll.is_none() && self.accepts_grant(lease, will_wait))
            .then(|| waiting.grant_looks.next(sent_at));
        waiting.progress.attempt_sent();
        let attempt = self
            .try_acquire(lease, request, registers, grant_look)
            .await;
        (attempt, sent_at, registers)
    }

    /// An acquisition held on the primary only, where a failover would hand it to a second
    /// holder: undone, and `request` replaced by a new request id to try again under (first in
    /// line still, for a kind with a queue: the place is kept for the new request).
    async fn undo_not_synced(
        self: &Arc<Self>,
        request: &mut String,
        lease: Lease,
        waiting: &mut Waiting,
    ) -> Result<()> {
        let next = request_id();
        if let Err(err) = self.undo_attempt(request, lease, Some(&next)).await {
            // The undo may have kept the place for `next`, which will never look: that place
            // is undone too (the resolver undoes `request`).
            self.resolve_unknown(next, lease, Instant::now());
            return Err(err);
        }
        *request = next;
        // A place kept for it is left if the call ends before it looks.
        waiting.has_place = true;
        Ok(())
    }

    /// How long a look may be held back for the owner's undo or release of this lock in
    /// flight (`release_gate`), or None when nothing is in flight.
    fn held_back(&self, deadline: Option<Instant>) -> Option<Duration> {
        let (gate, key, owner) = (&self.client.release_gate, self.kind.key(), &self.owner);
        if !gate.no_undo(key, owner) {
            // An undo of this owner's earlier request is in flight: a look now could take over
            // the place it is for, ahead of waiters that queued since. Wait for it within the
            // wait bound, and a call that waits less (`try_lock`) for one response time, as for
            // its own command.
            Some(remaining(deadline).max(self.client.options.response_timeout))
        } else if !gate.is_clear(key, owner) {
            // The owner's release of this lock awaits its answer: the attempt waits for it,
            // within the wait bound. A call that cannot wait that long (a no-wait acquire,
            // `try_lock`) answers "not acquired", as when the lock is taken, rather than wait
            // up to the release's retry window.
            Some(remaining(deadline))
        } else {
            None
        }
    }

    /// A sleep between two looks: at most `longest`, the holder's lease (the lock may lapse
    /// then) and the kind's longest wait (a queued waiter must look before its place lapses).
    fn sleep_slice(&self, longest: Duration, holder_lease: Option<Duration>) -> Duration {
        let slice = longest.min(holder_lease.unwrap_or(MAX_WAIT_SLICE));
        match self.wait_policy().longest_wait {
            Some(longest_wait) => slice.min(longest_wait),
            None => slice,
        }
    }

    /// Records an acquisition of `request` (its key lives at least until `sent_at` + its lease)
    /// and hands it to the caller; if the caller is gone, releases it and answers false. An
    /// error (the client closed meanwhile) leaves it to the resolver to undo.
    async fn hand_over(
        self: &Arc<Self>,
        request: &str,
        token: Option<i64>,
        lease: Lease,
        sent_at: Instant,
        handoff: &Handoff,
    ) -> Result<bool> {
        if self.record_acquired(request.to_owned(), token, lease, sent_at)? {
            // Confirmed after its lease could have ended, so reported lost; yet the script ran
            // later than it was sent, and the server may keep the level for a lease from then,
            // held by nobody (and re-entered by this handle's next call): undone like an
            // acquire whose reply was lost.
            self.resolve_unknown(request.to_owned(), lease, sent_at);
        }
        if handoff.commit() {
            return Ok(true);
        }
        // Boxed (see `Interruptions::run`): only an acquire whose caller went away gets here.
        if let Err(err) = Box::pin(self.release()).await {
            tracing::warn!(lock = %self.name(), error = %err, "could not undo an acquire whose caller went away");
        }
        Ok(false)
    }

    /// Whether a release granted the lock to `request` (a message on its own channel naming one
    /// of its looks), early enough to count on: then the instant that look was sent, from which
    /// this process counts the lease (the grant gave the key the whole lease after that look
    /// ran, by the server's clock; no time of the server's is read). A grant whose lease, so
    /// counted, is half gone (a long wait, a process paused meanwhile), or that names a look no
    /// longer remembered, is left to the next look under the same request, which finds the lock
    /// granted and starts the lease anew.
    fn granted(&self, waiting: &Waiting, request: &str) -> Option<Instant> {
        let look = waiting.subscriptions.grants()?.take_grant(request)?;
        let sent_at = waiting.grant_looks.sent_at(look)?;
        let lease = self.lease_of(Lease::Watchdog);
        let now = Instant::now();
        let ends = sent_at + lease;
        if ends <= now + lease / 2 {
            return None;
        }
        // The watchdog's next round counts from the look; make sure it comes well in time.
        self.client.upkeep.renew_by(now + (ends - now) / 3);
        Some(sent_at)
    }

    /// Whether a release may grant the lock to this call directly: a waiter held by the
    /// watchdog, of a kind that grants, unless each acquisition must be confirmed by the
    /// replicas first, or the scripts' PUBLISH replies cannot tell whether it listens (a
    /// cluster in broadcast mode, whose scripts grant nothing anyway).
    fn accepts_grant(&self, lease: Lease, will_wait: bool) -> bool {
        will_wait
            && lease == Lease::Watchdog
            && self.client.replica_sync.is_none()
            && self.client.publish != Publish::Broadcast
            && self.wait_policy().grants_directly
    }

    /// One acquire attempt.
    async fn try_acquire(
        &self,
        lease: Lease,
        request: &str,
        will_wait: bool,
        grant_look: Option<u64>,
    ) -> Result<Attempt> {
        let mut connection = self.client.connection.clone();
        let lease = self.lease_of(lease);
        let args = AcquireArgs {
            owner: &self.owner,
            lease_ms: lease.as_millis() as u64,
            request,
            will_wait,
            grant_look,
            // This call is one of those under way.
            reenters: self.hold_count() > 0 || self.acquiring.load(Ordering::Acquire) > 1,
        };
        tracing::trace!(target: "polylock::handoff", "attempt sent");
        let reply: redis::Value = self
            .kind
            .acquire(&args, &self.client.options)
            .invoke_async(&mut connection)
            .await
            .map_err(|err| Error::from_redis(&self.what("acquire"), err))?;
        tracing::trace!(target: "polylock::handoff", "attempt reply");
        let attempt = self.kind.read_acquire(reply).map_err(|other| {
            Error::redis(format!(
                "{}: unexpected reply {other:?}",
                self.what("acquire")
            ))
        })?;
        let Some(sync) = self
            .client
            .replica_sync
            .as_ref()
            .filter(|sync| sync.is_on())
        else {
            return Ok(attempt);
        };
        if !matches!(attempt, Attempt::Acquired { .. }) {
            return Ok(attempt);
        }
        // The same request again, with `INFO` and `WAIT` on the same connection: the server
        // that answers holds this acquisition (a failover in between may have moved the
        // connection to one that never had it), and its replicas are the ones counted. A
        // failed confirmation leaves it unknown whether they have it: the same request is
        // retried, replays the acquisition, and is confirmed again.
        let repeat = self.kind.acquire(&args, &self.client.options);
        let (repeated, synced) =
            Box::pin(sync.confirm_acquisition(&self.client.connection, self.kind.key(), &repeat))
                .await
                .map_err(|err| Error::from_redis(&self.what("wait for the replicas of"), err))?;
        let confirmed = match self.kind.read_acquire(repeated) {
            Ok(confirmed @ Attempt::Acquired { .. }) => confirmed,
            // Not held there: the server that took it is no longer the one answering. Undone
            // like an unconfirmed acquisition, and tried again under a new request.
            Ok(_) | Err(_) => return Ok(Attempt::NotSynced(Unconfirmed::NotHeldThere)),
        };
        match synced {
            Synced::NotAcked { replicas } => {
                Ok(Attempt::NotSynced(Unconfirmed::NotAcked { replicas }))
            }
            _ => Ok(confirmed),
        }
    }

    /// Whether a waiter that has just subscribed missed nothing since its last look (see
    /// [`crate::kinds::LockKind::nothing_missed`]); false when the kind cannot tell, or on error.
    async fn nothing_missed(&self) -> bool {
        let Some(pipe) = self.kind.nothing_missed(&self.owner) else {
            return false;
        };
        let mut connection = self.client.connection.clone();
        match pipe.query_async::<Vec<redis::Value>>(&mut connection).await {
            Ok(replies) => replies
                .iter()
                .all(|reply| !matches!(reply, redis::Value::Nil | redis::Value::Int(0))),
            Err(_) => false,
        }
    }

    fn not_synced(&self, why: Unconfirmed) -> Error {
        let timeout = self
            .client
            .replica_sync
            .as_ref()
            .map_or(Duration::ZERO, |sync| sync.timeout());
        Error::not_synced(not_synced_message(&self.described(), why, timeout))
    }

    /// Undoes acquire `request` (or makes sure it never takes effect); 1 when something was
    /// undone. `keeps_place`: the request under which the caller tries again at once, first in
    /// line still.
    async fn undo_attempt(
        self: &Arc<Self>,
        request: &str,
        lease: Lease,
        keeps_place: Option<&str>,
    ) -> Result<i64> {
        let lease = self.lease_of(lease);
        let restore = self.current_lease_ms();
        let args = UndoArgs {
            owner: &self.owner,
            request,
            latch_ms: latch_ms(lease),
            lease_ms: restore,
            keeps_place,
        };
        let mut connection = self.client.connection.clone();
        let sent_at = Instant::now();
        let undone = self
            .kind
            .undo_acquire(&args, &self.client.options)
            .invoke_async::<i64>(&mut connection)
            .await
            .map_err(|err| Error::from_redis(&self.what("undo an acquire of"), err))?;
        if undone == 1 && restore > 0 {
            // The TTL of the levels still held was set again just now.
            self.partially_released(sent_at);
        }
        Ok(undone)
    }

    /// The reply of acquire `request` was lost and its caller is gone: undo it (or make sure it
    /// never takes effect) as soon as the server answers again.
    fn resolve_unknown(self: &Arc<Self>, request: String, lease: Lease, first_sent: Instant) {
        let lock = self.clone();
        let attempt_lease = lease;
        // After this, whatever it acquired has expired, and the request can no longer arrive.
        let until = first_sent + self.lease_of(lease) + LATCH_GRACE;
        let in_flight = self.wait_policy().serves_in_order.then(|| {
            self.client
                .release_gate
                .begin_undo(self.kind.key(), &self.owner)
        });
        runtime().spawn(async move {
            let _in_flight = in_flight;
            let mut backoff = Backoff::default();
            loop {
                match lock.undo_attempt(&request, attempt_lease, None).await {
                    Ok(undone) => {
                        tracing::info!(lock = %lock.name(), undone, "resolved an acquire whose reply was lost");
                        return;
                    }
                    Err(err)
                        if err.is_transient()
                            && Instant::now() < until
                            && !lock.client.is_closed() =>
                    {
                        tokio::time::sleep(backoff.next_delay()).await;
                    }
                    Err(err) => {
                        tracing::warn!(lock = %lock.name(), error = %err, "could not undo an acquire whose reply was lost; it expires with its lease");
                        return;
                    }
                }
            }
        });
    }

    /// A waiter that gives up leaves its queue at once, gives back a lock granted to its
    /// `request` meanwhile, and makes `request` a tombstone. False when the server did not
    /// answer (the caller then undoes `request` in the background).
    async fn leave_queue(&self, request: &str) -> bool {
        let Some(call) = self.kind.leave_queue(&LeaveArgs {
            owner: &self.owner,
            request,
            latch_ms: latch_ms(self.lease_of(Lease::Watchdog)),
        }) else {
            return true;
        };
        let mut connection = self.client.connection.clone();
        match call.invoke_async::<i64>(&mut connection).await {
            Ok(_) => true,
            Err(err) => {
                tracing::warn!(lock = %self.name(), error = %err, "could not leave the queue; undoing the request in the background");
                false
            }
        }
    }

    fn take_kept_subscriptions(&self) -> WaitSubscriptions {
        std::mem::take(
            &mut *self
                .kept_subscriptions
                .lock()
                .unwrap_or_else(|p| p.into_inner()),
        )
    }

    fn keep_subscriptions(&self, subscriptions: WaitSubscriptions) {
        if self.wait_policy().keeps_subscription {
            *self
                .kept_subscriptions
                .lock()
                .unwrap_or_else(|p| p.into_inner()) = subscriptions;
        }
    }
}

/// The `NotSynced` error's message for the handle `described` (`lock 'orders:42'`),
/// unconfirmed because of `why` when the acquire's time ran out (`timeout`: the wait for the
/// replicas).
fn not_synced_message(described: &str, why: Unconfirmed, timeout: Duration) -> String {
    match why {
        Unconfirmed::NotAcked { replicas } => format!(
            "{described} was acquired on the primary, but not all of its {replicas} replicas \
             acknowledged it within {} ms, so a failover could hand it to a second holder; it was \
             undone (sync_replicas)",
            timeout.as_millis()
        ),
        Unconfirmed::NotHeldThere => format!(
            "{described} was acquired, but the server answering for it when the replicas were \
             asked (another one, after a failover) did not hold it, so a second holder could take \
             it; it was undone (sync_replicas)"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unconfirmed_acquisition_says_why() {
        let timeout = Duration::from_millis(200);
        assert_eq!(
            not_synced_message("lock 'a'", Unconfirmed::NotAcked { replicas: 2 }, timeout),
            "lock 'a' was acquired on the primary, but not all of its 2 replicas acknowledged it \
             within 200 ms, so a failover could hand it to a second holder; it was undone \
             (sync_replicas)"
        );
        // A server that did not hold it has no replica count worth naming.
        let moved = not_synced_message("semaphore 'a'", Unconfirmed::NotHeldThere, timeout);
        assert!(moved.starts_with("semaphore 'a' was acquired"), "{moved}");
        assert!(moved.contains("did not hold it"), "{moved}");
        assert!(!moved.contains("replicas acknowledged"), "{moved}");
    }
}
