//! polylock: distributed locks on Redis, compatible with Redisson's data layout and messages.
//!
//! ```no_run
//! # async fn demo() -> polylock::Result<()> {
//! use polylock::Hold;
//! let client = polylock::Client::connect("redis://127.0.0.1:6379/0").await?;
//! let lock = client.lock("orders:42")?;
//! let guard = lock.lock().await?;
//! // ... critical section, lease renewed by the watchdog ...
//! guard.release().await?; // or let it drop: the lock is released in the background
//! # Ok(()) }
//! ```
//!
//! With a bounded wait and a fixed lease, named:
//!
//! ```no_run
//! # async fn demo(client: polylock::Client) -> polylock::Result<()> {
//! use std::time::Duration;
//! use polylock::{AcquireOptions, Hold};
//! let lock = client.lock("orders:42")?;
//! let options = AcquireOptions::new().wait(Duration::from_secs(5)).lease(Duration::from_secs(10));
//! if let Some(guard) = lock.try_lock_with(options).await? {
//!     // ... at most 10 s, then the lease is lost ...
//!     guard.release().await?;
//! }
//! # Ok(()) }
//! ```

pub mod acl;
mod client;
mod client_record;
mod connection;
mod election;
mod engine;
mod error;
mod expirable_semaphore;
// The protocol explorer needs a Valkey server under libfaketime: `make test-protocol`.
#[cfg(all(test, feature = "explorer"))]
mod explorer;
mod hold;
mod ids;
mod inspect;
mod job_lock;
pub mod key_prefix;
pub mod keys;
mod kinds;
mod latch;
mod lock;
pub mod metrics;
mod multi;
pub mod options;
#[cfg(feature = "opentelemetry")]
pub mod otel;
mod pubsub;
mod read_write_lock;
mod redis_errors;
mod runtime;
mod semaphore;
mod semaphore_permits;
mod shrinking;
mod tls;

pub use client::{Client, ClientBuilder};
pub use election::{Election, Leader, Leadership, Observer, OBSERVE_POLL};
pub use error::{Error, ErrorKind, Result};
pub use expirable_semaphore::ExpirableSemaphore;
pub use hold::{Guard, Hold};

/// The guard of a [`Lock`], by its former name.
#[deprecated(note = "use Guard<Lock>")]
pub type LockGuard = Guard<Lock>;
pub use inspect::{
    ClientRecordFields, FairWaiter, HeldPermit, InspectedKind, KeyTtl, LockHolder, LockInfo,
    LockMode, WaitingWriter,
};
pub use job_lock::{JobHold, JobLock, JobLockOptions, JobOutcome};
pub use latch::{latch_timeout_from_millis, CountDownLatch, MAX_LATCH_COUNT};
pub use lock::Lock;
pub use metrics::MetricsSnapshot;
pub use multi::{LockGroup, MultiLock, RedLock};
pub use options::WaitMode;
pub use options::{AcquireOptions, ClientOptions, MAX_DURATION, MAX_NAME_BYTES, MAX_PERMITS};
pub use read_write_lock::ReadWriteLock;
pub use runtime::runtime;
pub use semaphore::Semaphore;
pub use semaphore_permits::SemaphorePermits;

// Every page with Rust examples is compiled as doc tests, so the docs cannot drift from the
// API; `tests/doc_pages.rs` fails when a page with a ```rust block is missing here.
#[doc = include_str!("../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

#[doc = include_str!("../../docs/rust.md")]
#[cfg(doctest)]
pub struct RustGuideDoctests;

#[doc = include_str!("../../docs/redisson.md")]
#[cfg(doctest)]
pub struct RedissonGuideDoctests;

#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct CrateReadmeDoctests;

// Its examples use the `opentelemetry` feature (`make test-core` runs them with it on).
#[doc = include_str!("../../docs/observability.md")]
#[cfg(all(doctest, feature = "opentelemetry"))]
pub struct ObservabilityDoctests;
