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

// One folder per layer of docs/architecture.md, whose table gives their order (`acl/` has a
// file in two: its rule is a setting, its check a tool).
pub mod acl;
mod client;
mod connection;
mod engine;
mod exporters;
mod foundation;
mod handles;
mod kinds;
pub mod metrics;
mod settings;
// The protocol explorer needs a Valkey server under libfaketime: `make test-protocol`.
#[cfg(all(test, feature = "explorer"))]
mod explorer;

// The public modules that live in a layer's folder.
#[cfg(feature = "opentelemetry")]
pub use exporters::otel;
pub use foundation::{key_prefix, keys};
pub use settings::options;

pub use client::election::{Election, Leader, Leadership, Observer, OBSERVE_POLL};
pub use client::job_lock::{JobHold, JobLock, JobLockOptions, JobOutcome};
pub use client::{Client, ClientBuilder};
pub use foundation::error::{Error, ErrorKind, Result};
pub use foundation::runtime::runtime;
pub use handles::expirable_semaphore::ExpirableSemaphore;
pub use handles::guard::{Guard, Hold};

/// The guard of a [`Lock`], by its former name.
#[deprecated(note = "use Guard<Lock>")]
pub type LockGuard = Guard<Lock>;
pub use handles::inspect::{
    ClientRecordFields, FairWaiter, HeldPermit, InspectedKind, KeyTtl, LockHolder, LockInfo,
    LockMode, WaitingWriter,
};
pub use handles::latch::{latch_timeout_from_millis, CountDownLatch, MAX_LATCH_COUNT};
pub use handles::lock::Lock;
pub use handles::multi::{LockGroup, MultiLock, RedLock};
pub use handles::read_write_lock::ReadWriteLock;
pub use handles::semaphore::Semaphore;
pub use handles::semaphore_permits::SemaphorePermits;
pub use metrics::MetricsSnapshot;
// Shown in the docs as re-exports of `polylock::options`, where they are documented.
#[doc(no_inline)]
pub use options::WaitMode;
#[doc(no_inline)]
pub use options::{AcquireOptions, ClientOptions, MAX_DURATION, MAX_NAME_BYTES, MAX_PERMITS};

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
