//! The lock messages (Redisson's `LockPubSub` beside its generic `PublishSubscribe`): what
//! a release publishes on a lock's channels, and what a local waiter does on each. The hub
//! (`crate::connection::pubsub`) keeps one [`Wakeups`] per channel and hands it every message.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::Notify;

use crate::connection::pubsub::{ChannelState, Hub, Subscription};

/// The client's pub/sub hub, its channels read as lock channels.
pub(crate) type LockHub = Hub<Wakeups>;
/// A waiter's subscription to a lock channel.
pub(crate) type LockSubscription = Subscription<Wakeups>;

/// Payload of an unlock message that frees the lock for one waiter.
const UNLOCKED: &[u8] = b"0";
/// Payload of a read-unlock message that frees it for every waiter.
const READ_UNLOCKED: &[u8] = b"1";
/// Payload of a polylock release that told its next polylock waiter directly: Redisson reads it
/// as 0 (wake one waiter); polylock's waiters leave it to the one told.
const TOLD_ELSEWHERE: &[u8] = b"00";
/// Prefix of a message granting the lock to a waiter, on its own channel:
/// `g:<request>:<look>` (the waiter's look whose grant entry the release read).
const GRANTED: &[u8] = b"g:";

/// The wake-ups of one channel, and how many messages it has had (a waiter that looked
/// before a message and sleeps after it does not sleep: see `LockSubscription::wait`).
#[derive(Default)]
pub(crate) struct Wakeups {
    notify: Notify,
    messages: AtomicU64,
    /// Releases that told a waiter elsewhere (`00`): the line is moving.
    told_elsewhere: AtomicU64,
    /// The latest grant received: the request the lock was granted to, and the look it names.
    grant: Mutex<Option<(String, u64)>>,
}

impl Wakeups {
    fn message(&self) {
        self.messages.fetch_add(1, Ordering::SeqCst);
    }

    fn wake_one(&self) {
        self.message();
        self.notify.notify_one();
    }

    fn wake_all(&self) {
        self.message();
        self.notify.notify_waiters();
        self.notify.notify_one();
    }
}

impl ChannelState for Wakeups {
    fn on_message(&self, payload: &[u8]) {
        match payload {
            UNLOCKED => self.wake_one(),
            TOLD_ELSEWHERE => {
                self.told_elsewhere.fetch_add(1, Ordering::SeqCst);
            }
            // Every call of the owner waiting now looks whether the grant is its own. No permit
            // is stored for a later one (which would wake at once for a grant it cannot use, and
            // look again for nothing); one between its look and its sleep sees the message count
            // move.
            granted if granted.starts_with(GRANTED) => {
                if let Some(grant) = parse_grant(&granted[GRANTED.len()..]) {
                    *self.grant.lock().unwrap_or_else(|p| p.into_inner()) = Some(grant);
                }
                self.message();
                self.notify.notify_waiters();
            }
            READ_UNLOCKED => self.wake_all(),
            // A semaphore's release publishes the permits now available (any number): every
            // local waiter looks, since which of them the permits suit (one needing 1 or 3) only
            // the server can tell. Unknown payloads also mean the lock changed.
            _ => self.wake_all(),
        }
    }

    fn on_gap(&self) {
        self.wake_all();
    }
}

impl Subscription<Wakeups> {
    /// How many messages the channel has had: take it before looking at the lock, and pass
    /// it to `LockSubscription::wait`.
    pub(crate) fn messages(&self) -> u64 {
        self.state().messages.load(Ordering::SeqCst)
    }

    /// Waits for a wake-up message, at most `max`; returns at once when a message came since
    /// `messages` was taken (so no wake-up meant for a waiter busy looking is lost). True when
    /// woken by a message.
    pub(crate) async fn wait(&self, max: Duration, messages: u64) -> bool {
        let notified = self.state().notify.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if self.messages() != messages {
            return true;
        }
        tokio::select! {
            _ = notified => true,
            _ = tokio::time::sleep(max) => false,
        }
    }

    /// Returns once `period` has passed without a release that told a waiter elsewhere (`00`):
    /// while such releases keep coming the line is moving, and a waiter need not look.
    pub(crate) async fn silence(&self, period: Duration) {
        loop {
            let seen = self.state().told_elsewhere.load(Ordering::SeqCst);
            tokio::time::sleep(period).await;
            if self.state().told_elsewhere.load(Ordering::SeqCst) == seen {
                return;
            }
        }
    }

    /// The look of `request` that the lock was granted to, if this channel received that grant
    /// (taken: it is read once).
    pub(crate) fn take_grant(&self, request: &str) -> Option<u64> {
        let mut grant = self.state().grant.lock().unwrap_or_else(|p| p.into_inner());
        match grant.take() {
            Some((granted, look)) if granted == request => Some(look),
            other => {
                *grant = other;
                None
            }
        }
    }

    /// Passes a wake-up on to another local waiter (used by a woken waiter that leaves).
    pub(crate) fn pass_on(&self) {
        self.state().notify.notify_one();
    }
}

/// `<request>:<look>`, the rest of a grant message.
fn parse_grant(rest: &[u8]) -> Option<(String, u64)> {
    let rest = std::str::from_utf8(rest).ok()?;
    let (request, look) = rest.rsplit_once(':')?;
    Some((request.to_owned(), look.parse().ok()?))
}
