//! One acquire call as counted: a waiter while it runs, then its result, wait, attempts and
//! what woke it, or cancelled when its caller drops it first. Used by the engine and by the
//! groups of locks alike.

use std::sync::atomic::{AtomicU32, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use super::{AcquireResult, LockStats, WokenBy};
use crate::foundation::error::Result;

/// What the acquire task tells the caller's [`AcquireRecord`]: how many attempts it sent, and
/// what woke it before the attempt that took the lock (shared, as the task may outlive the
/// caller's future).
#[derive(Default)]
pub(crate) struct Progress {
    attempts: AtomicU32,
    /// 0: none; else a [`WokenBy`], as `took_it_after` writes it.
    woken_by: AtomicU8,
}

impl Progress {
    pub(crate) fn attempt_sent(&self) {
        self.attempts.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn took_it_after(&self, wake: Option<WokenBy>) {
        let code = match wake {
            None => 0,
            Some(WokenBy::Grant) => 1,
            Some(WokenBy::Message) => 2,
            Some(WokenBy::Poll) => 3,
        };
        self.woken_by.store(code, Ordering::Relaxed);
    }

    fn woken_by(&self) -> Option<WokenBy> {
        match self.woken_by.load(Ordering::Relaxed) {
            1 => Some(WokenBy::Grant),
            2 => Some(WokenBy::Message),
            3 => Some(WokenBy::Poll),
            _ => None,
        }
    }
}

/// Counts one acquire call: a waiter from its start; its result when it ends, or cancelled when
/// the caller drops it first. Carries the call's `polylock.acquire` span.
pub(crate) struct AcquireRecord {
    stats: Arc<LockStats>,
    progress: Arc<Progress>,
    started: SystemTime,
    since: Instant,
    span: tracing::Span,
    ended: bool,
}

impl AcquireRecord {
    /// The progress the acquire's work reports into.
    pub(crate) fn progress(&self) -> Arc<Progress> {
        self.progress.clone()
    }

    /// The call's `polylock.acquire` span, for its work to run in.
    pub(crate) fn span(&self) -> &tracing::Span {
        &self.span
    }

    pub(crate) fn start(stats: &Arc<LockStats>) -> AcquireRecord {
        stats.acquire_started();
        let span = tracing::debug_span!(target: "polylock", "polylock.acquire",
            polylock.lock.name = %stats.name(), polylock.lock.kind = stats.kind(),
            polylock.acquire.result = tracing::field::Empty,
            polylock.acquire.attempts = tracing::field::Empty,
            polylock.acquire.woken_by = tracing::field::Empty);
        AcquireRecord {
            stats: stats.clone(),
            progress: Arc::default(),
            started: SystemTime::now(),
            since: Instant::now(),
            span,
            ended: false,
        }
    }

    pub(crate) fn end(&mut self, outcome: &Result<bool>) {
        let result = match outcome {
            Ok(true) => AcquireResult::Acquired,
            Ok(false) => AcquireResult::TimedOut,
            Err(_) => AcquireResult::Failed,
        };
        self.record(result);
    }

    fn record(&mut self, result: AcquireResult) {
        self.ended = true;
        let attempts = self.progress.attempts.load(Ordering::Relaxed);
        let woken_by = self
            .progress
            .woken_by()
            .filter(|_| result == AcquireResult::Acquired);
        self.span.record("polylock.acquire.result", result.as_str());
        self.span.record("polylock.acquire.attempts", attempts);
        if let Some(woken_by) = woken_by {
            self.span
                .record("polylock.acquire.woken_by", woken_by.as_str());
        }
        self.stats.acquire_ended(
            result,
            self.started,
            self.since.elapsed(),
            attempts,
            woken_by,
        );
    }
}

impl Drop for AcquireRecord {
    fn drop(&mut self) {
        if !self.ended {
            self.record(AcquireResult::Cancelled);
        }
    }
}
