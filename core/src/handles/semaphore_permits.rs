//! [`SemaphorePermits`]: a number of a [`Semaphore`]'s permits as a [`Hold`], so that code
//! written over holds (guards, groups of calls in tests and bindings) takes permits too.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::SystemTime;

use tokio::time::Instant;

use tokio::sync::watch;

use crate::foundation::error::{Error, Result};
use crate::handles::guard::Hold;
use crate::handles::semaphore::Semaphore;
use crate::settings::options::{invalid, validate_permits, AcquireOptions};

/// `permits` permits of one semaphore, taken together by each acquire and given back together
/// by each release ([`Semaphore::permits`]). Clones share the count of levels held.
///
/// Permits belong to nobody and never expire, so a hold of them is never lost and takes no
/// lease. Dropping the handle gives nothing back; dropping a [`crate::Guard`] does.
#[derive(Clone)]
pub struct SemaphorePermits {
    semaphore: Semaphore,
    permits: i64,
    defaults: AcquireOptions,
    levels: Arc<Levels>,
}

struct Levels {
    /// When each level held was taken, oldest first (its hold is counted from then).
    held: Mutex<Vec<(SystemTime, Instant)>>,
    /// Never turns `true` (permits are never lost); kept so that receivers stay open.
    lost: watch::Sender<bool>,
}

impl Levels {
    fn held(&self) -> MutexGuard<'_, Vec<(SystemTime, Instant)>> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl std::fmt::Debug for SemaphorePermits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SemaphorePermits")
            .field("name", &self.semaphore.name())
            .field("permits", &self.permits)
            .field("hold_count", &self.hold_count())
            .finish()
    }
}

impl SemaphorePermits {
    pub(crate) fn new(semaphore: Semaphore, permits: i64) -> Result<SemaphorePermits> {
        validate_permits("permits", permits, 1)?;
        Ok(SemaphorePermits {
            semaphore,
            permits,
            defaults: AcquireOptions::new(),
            levels: Arc::new(Levels {
                held: Mutex::new(Vec::new()),
                lost: watch::Sender::new(false),
            }),
        })
    }

    /// How many permits each level takes.
    pub fn permits(&self) -> i64 {
        self.permits
    }

    /// The semaphore they are taken from.
    pub fn semaphore(&self) -> &Semaphore {
        &self.semaphore
    }

    fn without_lease(&self, options: AcquireOptions) -> Result<()> {
        options.validate()?;
        if options.lease.is_some() {
            return Err(invalid(format!(
                "the permits of semaphore '{}' take no lease: they never expire (an expirable \
                 semaphore's do)",
                self.semaphore.name()
            )));
        }
        Ok(())
    }
}

impl Hold for SemaphorePermits {
    fn name(&self) -> &str {
        self.semaphore.name()
    }

    fn defaults(&self) -> AcquireOptions {
        self.defaults
    }

    fn with_defaults(mut self, defaults: AcquireOptions) -> Result<Self> {
        self.without_lease(defaults)?;
        self.defaults = defaults;
        Ok(self)
    }

    async fn acquire(&self, options: AcquireOptions) -> Result<bool> {
        self.without_lease(options)?;
        let acquired = self.semaphore.acquire(self.permits, options.wait).await?;
        if acquired {
            self.semaphore.stats().hold_started();
            self.levels.held().push((SystemTime::now(), Instant::now()));
        }
        Ok(acquired)
    }

    async fn release(&self) -> Result<()> {
        let Some(level) = self.levels.held().pop() else {
            return Err(Error::not_held(format!(
                "{} permits of semaphore '{}' are not held by this handle: release \
                 without acquire, or released twice",
                self.permits,
                self.semaphore.name()
            )));
        };
        let released = self.semaphore.release(self.permits).await;
        match released {
            Ok(()) => {
                let (started, since) = level;
                self.semaphore
                    .stats()
                    .hold_ended(started, since.elapsed(), false);
            }
            // Not given back: the level is still this handle's to release.
            Err(_) => self.levels.held().push(level),
        }
        released
    }

    fn is_held(&self) -> bool {
        !self.levels.held().is_empty()
    }

    fn hold_count(&self) -> u32 {
        self.levels.held().len() as u32
    }

    fn is_lost(&self) -> bool {
        false
    }

    fn lost_receiver(&self) -> watch::Receiver<bool> {
        self.levels.lost.subscribe()
    }

    fn on_lost(&self, _callback: impl Fn(&Error) + Send + Sync + 'static) {
        // Permits are never lost: there is nothing to call it for.
    }

    /// A semaphore's own words for [`Error::not_acquired`] (the same kind, `Timeout`).
    fn not_acquired_error(
        &self,
        wait: std::time::Duration,
    ) -> impl std::future::Future<Output = Error> + Send {
        let message = format!(
            "{} permits of semaphore '{}' were not acquired within {} ms: other holders kept \
             them all that time",
            self.permits,
            self.name(),
            wait.as_secs_f64() * 1000.0
        );
        async move { Error::timeout(message) }
    }
}
