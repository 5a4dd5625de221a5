//! The run-once job lock (ShedLock's `lockAtMostFor` / `lockAtLeastFor`): a scheduled job that
//! many nodes fire runs on one of them per slot. It is the plain lock (Redisson RLock layout:
//! Redisson sees a held lock), taken without waiting and with a fixed lease of `at_most`; after
//! the job, the key is kept until `at_least` from the job's start, or released at once when
//! that moment has passed. See the "Run-once job lock" section of docs/recipes.md.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

use crate::client::Client;
use crate::foundation::error::{ErrorKind, Result};
use crate::handles::lock::Lock;
use crate::settings::options::{invalid, validate_name, AcquireOptions, MAX_DURATION};

/// How long a job lock is held: at most `at_most` (the fixed lease: a node that dies holding
/// it blocks the job no longer than that), at least `at_least` from the job's start (a node
/// whose clock or schedule lags by less than that finds it held and skips).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobLockOptions {
    pub at_most: Duration,
    pub at_least: Duration,
}

/// Milliseconds as messages show them: `1500`, `0.5`.
fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

impl JobLockOptions {
    /// Held at most `at_most`, at least `at_least`; see [`JobLockOptions::validate`].
    pub const fn new(at_most: Duration, at_least: Duration) -> Self {
        JobLockOptions { at_most, at_least }
    }

    /// [`ErrorKind::InvalidArgument`] unless 1 ms <= `at_most` <= 10 years and `at_least` <=
    /// `at_most`.
    pub fn validate(&self) -> Result<()> {
        if self.at_most < Duration::from_millis(1) || self.at_most > MAX_DURATION {
            return Err(invalid(format!(
                "at_most must be from 1 ms to 10 years, got {} ms",
                ms(self.at_most)
            )));
        }
        if self.at_least > self.at_most {
            return Err(invalid(format!(
                "at_least ({} ms) must not be longer than at_most ({} ms)",
                ms(self.at_least),
                ms(self.at_most)
            )));
        }
        Ok(())
    }

    /// The options as bindings receive them, in milliseconds, checked as
    /// [`JobLockOptions::validate`] does (so every language gives the same message).
    pub fn from_millis(at_most_ms: f64, at_least_ms: f64) -> Result<Self> {
        for (what, millis) in [("at_most", at_most_ms), ("at_least", at_least_ms)] {
            if !millis.is_finite() || millis < 0.0 {
                return Err(invalid(format!(
                    "{what} must be a finite number of milliseconds >= 0, got {millis}"
                )));
            }
        }
        // The limits checked on the numbers given, so that the message shows them as given
        // (a duration may not even hold a number past the maximum).
        if !(1.0..=ms(MAX_DURATION)).contains(&at_most_ms) {
            return Err(invalid(format!(
                "at_most must be from 1 ms to 10 years, got {at_most_ms} ms"
            )));
        }
        if at_least_ms > at_most_ms {
            return Err(invalid(format!(
                "at_least ({at_least_ms} ms) must not be longer than at_most ({at_most_ms} ms)"
            )));
        }
        let options = JobLockOptions::new(
            Duration::from_secs_f64(at_most_ms / 1000.0),
            Duration::from_secs_f64(at_least_ms / 1000.0),
        );
        options.validate()?;
        Ok(options)
    }
}

/// A run-once job lock: [`Client::job_lock`].
#[derive(Clone)]
pub struct JobLock {
    client: Client,
    name: String,
    options: JobLockOptions,
}

/// What [`JobLock::try_run`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobOutcome<T> {
    /// The job ran and gave this.
    Ran(T),
    /// Another node held the lock: the job did not run.
    Skipped,
}

impl std::fmt::Debug for JobLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobLock")
            .field("name", &self.name)
            .field("options", &self.options)
            .finish()
    }
}

impl<T> JobOutcome<T> {
    /// The job's output, `None` when it was skipped.
    pub fn ran(self) -> Option<T> {
        match self {
            JobOutcome::Ran(output) => Some(output),
            JobOutcome::Skipped => None,
        }
    }
}

impl JobLock {
    pub(crate) fn new(client: Client, name: &str, options: JobLockOptions) -> Result<JobLock> {
        options.validate()?;
        validate_name(name)?;
        Ok(JobLock {
            client,
            name: name.to_owned(),
            options,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn options(&self) -> JobLockOptions {
        self.options
    }

    /// Takes the lock if nobody holds it, never waiting: `None` when another node (or another
    /// job lock handle) holds it. The hold's lease is `at_most`, never renewed. The job's start
    /// is counted from before the attempt was sent, so `at_least` is a lower bound.
    pub async fn try_acquire(&self) -> Result<Option<JobHold>> {
        let lock = self.client.lock(&self.name)?;
        let started = Instant::now();
        let options = AcquireOptions::new().no_wait().lease(self.options.at_most);
        if !lock.acquire(options).await? {
            return Ok(None);
        }
        Ok(Some(JobHold {
            lock: Some(lock),
            started,
            options: self.options,
        }))
    }

    /// Runs `f`'s future if the lock is free ([`JobLock::try_acquire`]), then
    /// [`JobHold::finish`]es: [`JobOutcome::Skipped`] (and `f` is not called) when another node
    /// holds it. A job that fails is finished the same way; its error is in `T`. An error of
    /// the finish (the server unreachable) is the error, though the job ran.
    pub async fn try_run<F, Fut, T>(&self, f: F) -> Result<JobOutcome<T>>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = T>,
    {
        let Some(hold) = self.try_acquire().await? else {
            return Ok(JobOutcome::Skipped);
        };
        let output = f().await;
        hold.finish().await?;
        Ok(JobOutcome::Ran(output))
    }
}

/// A held job lock, from [`JobLock::try_acquire`]. Call [`JobHold::finish`] after the job; a
/// hold dropped unfinished (a panic, a cancelled future) is finished in the background.
#[derive(Debug)]
pub struct JobHold {
    lock: Option<Lock>,
    started: Instant,
    options: JobLockOptions,
}

impl JobHold {
    /// When the attempt that took the lock was sent: `at_least` counts from here.
    pub fn started(&self) -> Instant {
        self.started
    }

    /// Whether the hold is still within its `at_most` lease (no I/O).
    pub fn is_held(&self) -> bool {
        self.lock.as_ref().is_some_and(|lock| lock.is_held())
    }

    /// The job is done: before `at_least` from its start, the lock is kept until then (its TTL
    /// set to what is left, only if this hold still owns it); after, it is released. A job that
    /// outlived `at_most` finds its lock lapsed (another node may hold it): nothing is written,
    /// a warning is logged, and this is no error (as ShedLock). Errors: the server could not
    /// be reached.
    pub async fn finish(mut self) -> Result<()> {
        let lock = self.lock.take().expect("a JobHold is finished once");
        finish(lock, self.started, self.options).await
    }
}

impl Drop for JobHold {
    fn drop(&mut self) {
        if let Some(lock) = self.lock.take() {
            let (started, options) = (self.started, self.options);
            crate::foundation::runtime::runtime().spawn(async move {
                if let Err(err) = finish(lock, started, options).await {
                    tracing::warn!(%err, "job lock dropped unfinished: its finish failed");
                }
            });
        }
    }
}

async fn finish(lock: Lock, started: Instant, options: JobLockOptions) -> Result<()> {
    let ran = started.elapsed();
    let lapsed = || {
        tracing::warn!(lock = %lock.name(), ran = ?ran, at_most = ?options.at_most,
            "the job outlived its job lock's at_most: the lock lapsed while it ran, another node may have run it too");
    };
    if !lock.is_held() {
        // Found lapsed by the lease's upkeep: the release only reports it.
        let _ = lock.release().await;
        lapsed();
        return Ok(());
    }
    if let Some(left) = options
        .at_least
        .checked_sub(ran)
        .filter(|left| !left.is_zero())
    {
        let core = lock.core.clone();
        let kept = crate::foundation::runtime::Inline::new(
            async move { core.leave_held_for(left).await },
            || lock.core.task_panicked("keep"),
        )
        .await?;
        if !kept {
            lapsed();
        }
        return Ok(());
    }
    match lock.release().await {
        Err(err) if matches!(err.kind(), ErrorKind::LockLost | ErrorKind::NotHeld) => {
            lapsed();
            Ok(())
        }
        released => released,
    }
}
