//! The semaphore handle (`Client::semaphore`): permits counted in Redis, shared by every client
//! (Redisson RSemaphore layout).

use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use crate::engine::context::{query, ClientInner};
use crate::engine::{latch_ms, request_id, run_idempotent_or_in_background, LockCore};
use crate::foundation::error::Result;
use crate::foundation::keys;
use crate::foundation::runtime::{on_runtime, runtime};
use crate::handles::named::Named;
use crate::handles::semaphore_permits::SemaphorePermits;
use crate::kinds::semaphore::{SemaphoreAcquisition, ADD, AVAILABLE, TRY_SET};
use crate::metrics::{kind as metric_kind, LockStats};
use crate::settings::options::validate_permits;

/// How long an acquire request's latch lives: every retry of one request (a reply lost to a
/// dropped connection) must arrive within it, or it could take its permits twice.
pub(crate) const REQUEST_WINDOW: Duration = Duration::from_secs(3600);

/// A counting semaphore: `acquire` takes permits (waiting for a release message when too few
/// are available), `release` gives permits back, from any client. Permits belong to nobody and
/// never expire: permits taken by a process that dies are gone until someone adds them back
/// (use [`crate::ExpirableSemaphore`] when holders may die). Cheap to clone.
#[derive(Clone)]
pub struct Semaphore {
    inner: Arc<Inner>,
}

struct Inner {
    named: Named,
    /// Taken at the first acquire or release: an expirable semaphore uses this handle for its
    /// counter only, and must not show as a semaphore in the metrics.
    stats: OnceLock<Arc<LockStats>>,
}

impl std::fmt::Debug for Semaphore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.inner.named.debug(f, "Semaphore")
    }
}

impl Semaphore {
    pub(crate) fn new(client: Arc<ClientInner>, name: &str) -> Semaphore {
        Semaphore {
            inner: Arc::new(Inner {
                named: Named::new(client, name, "semaphore", keys::semaphore_channel),
                stats: OnceLock::new(),
            }),
        }
    }

    pub fn name(&self) -> &str {
        &self.inner.named.name
    }

    pub(crate) fn stats(&self) -> &Arc<LockStats> {
        self.inner.stats.get_or_init(|| {
            self.inner
                .named
                .client
                .metrics
                .lock(&self.inner.named.name, metric_kind::SEMAPHORE)
        })
    }

    fn what(&self, action: &str) -> String {
        self.inner.named.what(action)
    }

    /// Sets the number of permits if it was never set (no key); true when set. Wakes waiters.
    pub async fn try_set_permits(&self, permits: i64) -> Result<bool> {
        validate_permits("permits", permits, 0)?;
        let mut call = TRY_SET.prepare_invoke(self.inner.named.client.publish);
        call.key(&self.inner.named.key)
            .key(&self.inner.named.channel)
            .arg(permits);
        // Not retried: a retry after a lost reply would find the key and answer false.
        let set = query::<i64>(
            &self.inner.named.client,
            self.what("set the permits of"),
            call,
        )
        .await?;
        Ok(set == 1)
    }

    /// Adds permits (a negative number takes some away, even below zero); waiters are woken
    /// when permits became available. Retried on a dropped connection without adding twice.
    pub async fn add_permits(&self, permits: i64) -> Result<()> {
        validate_permits("permits", permits, i64::MIN)?;
        self.add(permits, self.what("add permits to")).await
    }

    /// Gives `permits` permits back (whoever took them) and wakes as many waiters. Retried on a
    /// dropped connection without giving back twice.
    pub async fn release(&self, permits: i64) -> Result<()> {
        validate_permits("permits", permits, 1)?;
        let (started, since) = (SystemTime::now(), Instant::now());
        let span = tracing::debug_span!(target: "polylock", "polylock.release",
            polylock.lock.name = %self.stats().name(), polylock.lock.kind = self.stats().kind(),
            polylock.release.ok = tracing::field::Empty,
            polylock.release.retries = tracing::field::Empty);
        let released = self.add(permits, self.what("release")).await;
        span.record("polylock.release.ok", released.is_ok());
        // Its retries are those of an idempotent call, not counted apart.
        span.record("polylock.release.retries", 0);
        self.stats()
            .release_ended(released.is_ok(), 0, started, since.elapsed());
        released
    }

    async fn add(&self, permits: i64, what: String) -> Result<()> {
        let mut call = ADD.prepare_invoke(self.inner.named.client.publish);
        let client = &self.inner.named.client;
        call.key(&self.inner.named.key)
            .key(&self.inner.named.channel)
            .key(keys::unlock_latch(&self.inner.named.key, &request_id()))
            .arg(permits)
            .arg(latch_ms(client.options.response_timeout * 2));
        let inner = self.inner.clone();
        // Permits never expire: ones not given back in the caller's time are sent again.
        on_runtime(&what.clone(), async move {
            run_idempotent_or_in_background::<i64>(&inner.named.client, &what, call)
                .await
                .map(|_| ())
        })
        .await
    }

    /// Takes `permits` permits, waiting for them up to `wait` (`None`: without bound, zero:
    /// one attempt); false when the wait ran out. Waiters are woken by release messages, not
    /// by polling. Dropping the future, or an attempt whose reply was lost, takes nothing: the
    /// attempt is undone as soon as the server answers again.
    pub async fn acquire(&self, permits: i64, wait: Option<Duration>) -> Result<bool> {
        validate_permits("permits", permits, 1)?;
        let kind = Arc::new(SemaphoreAcquisition::new(
            &self.inner.named.name,
            &self.inner.named.key,
            permits,
            self.inner.named.client.publish,
        ));
        // The permits leave the engine once taken: their holds are counted by `permits()`.
        let core = Arc::new(
            LockCore::with_owner(
                self.inner.named.client.clone(),
                kind,
                self.inner.named.client.id.clone(),
                self.stats().clone(),
            )
            .without_hold_counts(),
        );
        if !core.acquire(wait, Some(REQUEST_WINDOW), None).await? {
            return Ok(false);
        }
        // The permits are the caller's now; their request latches have done their work.
        // A latch left for its hour would be one key per acquisition whose deletion failed.
        let mut forget = redis::cmd("DEL");
        for request in core.detach() {
            forget.arg(keys::acquire_latch(&self.inner.named.key, &request));
        }
        let client = self.inner.named.client.clone();
        let what = self.what("forget the requests of");
        runtime().spawn(async move {
            if let Err(err) = run_idempotent_or_in_background::<i64>(&client, &what, forget).await {
                tracing::debug!(%err, "could not delete a semaphore request latch yet");
            }
        });
        Ok(true)
    }

    /// `permits` of this semaphore's permits as a [`crate::Hold`]: each acquire takes them,
    /// each release gives them back. [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) for a count below 1 or
    /// above [`crate::MAX_PERMITS`]. No I/O.
    pub fn permits(&self, permits: i64) -> Result<SemaphorePermits> {
        SemaphorePermits::new(self.clone(), permits)
    }

    /// The permits available now (0 when never set).
    pub async fn available_permits(&self) -> Result<i64> {
        let mut call = AVAILABLE.prepare_invoke(self.inner.named.client.publish);
        call.key(&self.inner.named.key);
        query(
            &self.inner.named.client,
            self.what("count the permits of"),
            call,
        )
        .await
    }
}
