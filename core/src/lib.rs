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

// The public modules that live in a layer's folder.
#[cfg(feature = "opentelemetry")]
pub use exporters::otel;
pub use foundation::{key_prefix, keys};
pub use settings::options;

pub use client::election::{Election, Leader, Leadership, Observer, OBSERVE_POLL};
pub use client::job_lock::{JobHold, JobLock, JobLockOptions, JobOutcome};
pub use client::{Client, ClientBuilder};
/// A command connection on a foreign event loop's thread (issue 44), for the bindings.
#[doc(hidden)]
pub use connection::loop_link::LoopLink;
/// The futures a binding polls on its event loop's thread, beside its loop links.
#[doc(hidden)]
pub use connection::loop_tasks::LoopTasks;
pub use foundation::error::{Error, ErrorKind, Result};
pub use foundation::runtime::runtime;
pub use handles::expirable_semaphore::ExpirableSemaphore;
pub use handles::guard::{Guard, Hold};

/// The guard of a [`Lock`], by its former name.
#[deprecated(note = "use Guard<Lock>")]
pub type LockGuard = Guard<Lock>;
pub use handles::inspect::{
    ClientRecordFields, ElectionLeader, FairWaiter, HeldPermit, InspectedKind, KeyTtl, LockHolder,
    LockInfo, LockMode, ScanSweep, WaitingWriter,
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

/// Not API: the seams of the core that the protocol explorer drives, for its test target alone
/// (`core/tests/explorer`, `make test-protocol`). Compiled only with the test-only `explorer`
/// feature, never in a build of the product; no item here is covered by semver, documented or
/// meant for any other use.
#[cfg(feature = "explorer")]
#[doc(hidden)]
pub mod explorer_seam {
    // The engine's I/O seam: a client's commands wait on a `Wire`, its pub/sub on a `Bus`,
    // until the explorer runs, answers, delivers or loses them.
    pub use crate::connection::explored::{Bus, Request, Seam, Wire};
    // A command connection on a seam's wire, for the emulated Redisson locks' own scripts.
    pub use crate::connection::Connection;
    // A client on a seam, whose scripts publish through the explorer's log.
    pub use crate::client::explored as explored_client;
    // Its runtime (one thread, a paused clock) and ids (the same on every replay).
    pub use crate::foundation::ids::count_from;
    pub use crate::foundation::runtime::explore_on;
    // The keys the explored script form logs publishes to and reads listener counts from.
    pub use crate::kinds::script::{EXPLORED_LISTENERS, EXPLORED_LOG};
    // How long a release's trace and an acquire's latch live: what may be left at rest.
    pub use crate::engine::latch_ms;
    pub use crate::engine::release::trace_window;

    /// The lock's key for `name` under `prefix`, as the client maps it.
    pub fn prefixed(prefix: Option<&str>, name: &str) -> String {
        crate::foundation::key_prefix::apply(prefix, name)
    }

    /// The engine's error for a `redis` error met while doing `what`.
    pub fn error_from_redis(what: &str, err: redis::RedisError) -> crate::Error {
        crate::Error::from_redis(what, err)
    }

    /// Whether no undo of `owner` on `lock` is in flight in `client` (its release gate).
    pub fn no_undo(client: &crate::Client, lock: &str, owner: &str) -> bool {
        client.inner.release_gate.no_undo(lock, owner)
    }
}

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
