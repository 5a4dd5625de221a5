//! The count-down latch handle (`Client::count_down_latch`): a count in Redis that any client
//! sets once and counts down, and that waiters wait to reach zero (Redisson RCountDownLatch
//! layout and messages, `crate::kinds::latch`).

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::engine::context::{query, ClientInner};
use crate::engine::PollBackoff;
use crate::foundation::error::{Error, Result};
use crate::foundation::keys;
use crate::foundation::runtime::on_runtime;
use crate::handles::named::Named;
use crate::kinds::latch::{COUNT_DOWN, DELETE, TRY_SET};
use crate::settings::options::{WaitMode, MAX_DURATION};

/// The largest count accepted: the largest integer every language's numbers hold exactly
/// (JavaScript's `Number.MAX_SAFE_INTEGER`), so that a count means the same everywhere.
pub const MAX_LATCH_COUNT: i64 = (1 << 53) - 1;

/// The longest a waiter sleeps before looking at the count again, even without a message:
/// the zero message may be lost (a pub/sub connection cut and not yet noticed), and a waiter
/// must not sleep through its whole timeout for that.
const LONGEST_SLEEP: Duration = Duration::from_secs(5);

/// A count-down latch: [`CountDownLatch::try_set_count`] sets a count once (while no count is
/// set), each [`CountDownLatch::count_down`] takes one from it, and
/// [`CountDownLatch::await_zero`] waits until it reaches zero. At zero the key is deleted: the
/// latch is open, and can be set again. Shared with Redisson's `RCountDownLatch` of the same
/// name. Cheap to clone; no I/O until a method is called.
#[derive(Clone)]
pub struct CountDownLatch {
    inner: Arc<Named>,
}

impl std::fmt::Debug for CountDownLatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.inner.debug(f, "CountDownLatch")
    }
}

/// Checks a count given to [`CountDownLatch::try_set_count`].
fn validate_count(count: i64) -> Result<()> {
    if !(1..=MAX_LATCH_COUNT).contains(&count) {
        return Err(Error::invalid_argument(format!(
            "count must be from 1 to {MAX_LATCH_COUNT}, got {count}"
        )));
    }
    Ok(())
}

fn timeout_too_long(millis: f64) -> Error {
    Error::invalid_argument(format!(
        "timeout of {millis} ms is longer than the 10 years accepted"
    ))
}

/// The timeout of [`CountDownLatch::await_zero`] given in milliseconds (as the bindings take
/// it): finite, from 0 to 10 years.
pub fn latch_timeout_from_millis(millis: f64) -> Result<Duration> {
    if millis.is_nan() || millis < 0.0 || millis.is_infinite() {
        return Err(Error::invalid_argument(format!(
            "timeout must be a finite number of milliseconds from 0, got {millis}"
        )));
    }
    if millis > MAX_DURATION.as_secs_f64() * 1000.0 {
        return Err(timeout_too_long(millis));
    }
    Ok(Duration::from_secs_f64(millis / 1000.0))
}

impl CountDownLatch {
    pub(crate) fn new(client: Arc<ClientInner>, name: &str) -> CountDownLatch {
        CountDownLatch {
            inner: Arc::new(Named::new(
                client,
                name,
                "count-down latch",
                keys::latch_channel,
            )),
        }
    }

    pub fn name(&self) -> &str {
        &self.inner.name
    }

    fn what(&self, action: &str) -> String {
        self.inner.what(action)
    }

    /// Sets the count to `count` when no count is set (the latch is open); true when set.
    /// Waiters of an earlier count, already open, are not held back by it.
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) for a count below 1
    /// or above [`MAX_LATCH_COUNT`]. Not retried: a retry after a lost reply would find its
    /// own count and answer false.
    pub async fn try_set_count(&self, count: i64) -> Result<bool> {
        validate_count(count)?;
        let mut call = TRY_SET.prepare_invoke(self.inner.client.publish);
        call.key(&self.inner.key)
            .key(&self.inner.channel)
            .key(keys::latch_mark(&self.inner.key))
            .arg(count);
        let set = query::<i64>(&self.inner.client, self.what("set the count of"), call).await?;
        Ok(set == 1)
    }

    /// Takes one from the count; the one that reaches zero opens the latch (deletes it) and
    /// wakes every waiter. On an open latch it does nothing. Not retried (as Redisson's): a
    /// retry after a lost reply could count down twice.
    pub async fn count_down(&self) -> Result<()> {
        let mut call = COUNT_DOWN.prepare_invoke(self.inner.client.publish);
        call.key(&self.inner.key)
            .key(&self.inner.channel)
            .key(keys::latch_mark(&self.inner.key));
        query::<i64>(&self.inner.client, self.what("count down"), call)
            .await
            .map(|_| ())
    }

    /// The count now: 0 when open (never set, or counted down to zero). A negative count
    /// (which only another client can write) reads as 0: it is open to waiters too.
    pub async fn count(&self) -> Result<u64> {
        let client = self.inner.client.clone();
        let key = self.inner.key.clone();
        let what = self.what("read the count of");
        on_runtime(&what.clone(), async move {
            read_count(&client, &key, &what).await
        })
        .await
    }

    /// Deletes the latch whatever its count (it is open then) and wakes its waiters; true when
    /// there was one.
    pub async fn delete(&self) -> Result<bool> {
        let mut call = DELETE.prepare_invoke(self.inner.client.publish);
        call.key(&self.inner.key)
            .key(&self.inner.channel)
            .key(keys::latch_mark(&self.inner.key));
        let deleted = query::<i64>(&self.inner.client, self.what("delete"), call).await?;
        Ok(deleted == 1)
    }

    /// Waits until the count is zero, at most `timeout` (zero: one look); true when it is.
    /// Woken by the zero message on the latch's channel, and looks again after every wake-up
    /// and at least every few seconds, so a message lost to a broken pub/sub connection costs
    /// a few seconds, never the whole timeout.
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) for a timeout over
    /// 10 years.
    pub async fn await_zero(&self, timeout: Duration) -> Result<bool> {
        if timeout > MAX_DURATION {
            return Err(timeout_too_long(timeout.as_secs_f64() * 1000.0));
        }
        let inner = self.inner.clone();
        let what = self.what("wait for");
        on_runtime(&what.clone(), async move {
            let deadline = Instant::now() + timeout;
            if read_count(&inner.client, &inner.key, &what).await? == 0 {
                return Ok(true);
            }
            let hub = match (inner.client.options.wait_mode, &inner.client.hub) {
                (WaitMode::PubSub, Some(hub)) => hub,
                (WaitMode::Poll { min, max }, _) => {
                    // A client that polls never subscribes: it looks again after each backoff,
                    // the last one cut to the timeout.
                    let mut backoff = PollBackoff::new(min, max);
                    loop {
                        let left = deadline.saturating_duration_since(Instant::now());
                        if left.is_zero() {
                            return Ok(false);
                        }
                        tokio::time::sleep(backoff.next_sleep().min(left)).await;
                        if read_count(&inner.client, &inner.key, &what).await? == 0 {
                            return Ok(true);
                        }
                    }
                }
                (WaitMode::PubSub, None) => {
                    return Err(Error::redis(format!("{what}: no pub/sub connection")))
                }
            };
            let left = deadline.saturating_duration_since(Instant::now());
            // Subscribed before the next look, so that a zero after that look is never missed.
            let subscription = tokio::select! {
                subscribed = hub.subscribe(&inner.channel, None) => subscribed?,
                _ = tokio::time::sleep(left) => return Ok(false),
            };
            loop {
                let seen = subscription.messages();
                if read_count(&inner.client, &inner.key, &what).await? == 0 {
                    // The zero message wakes one local waiter of this channel: it passes the
                    // wake-up on to the next.
                    subscription.pass_on();
                    return Ok(true);
                }
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Ok(false);
                }
                subscription.wait(left.min(LONGEST_SLEEP), seen).await;
            }
        })
        .await
    }
}

/// `GET` of the count at `key`: 0 when there is no key, and when the count is negative.
async fn read_count(client: &Arc<ClientInner>, key: &str, what: &str) -> Result<u64> {
    client.check_usable_for(what)?;
    let mut connection = client.connection.clone();
    let value: Option<String> = redis::cmd("GET")
        .arg(key)
        .query_async(&mut connection)
        .await
        .map_err(|err| Error::from_redis(what, err))?;
    let Some(value) = value else { return Ok(0) };
    match value.trim().parse::<i64>() {
        Ok(count) => Ok(count.max(0) as u64),
        Err(_) => Err(Error::wrong_type(format!(
            "{what}: the key holds a string that is not a count"
        ))),
    }
}
