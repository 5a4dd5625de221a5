//! polylock: distributed locks on Redis, compatible with Redisson's data layout and messages.
//!
//! ```no_run
//! # async fn demo() -> polylock::Result<()> {
//! let client = polylock::Client::connect("redis://127.0.0.1:6379/0").await?;
//! let lock = client.lock("orders:42")?;
//! if lock.acquire(Some(std::time::Duration::from_secs(5)), None).await? {
//!     // ... critical section, lease renewed by the watchdog ...
//!     lock.release().await?;
//! }
//! # Ok(()) }
//! ```

mod client;
mod engine;
mod error;
mod expirable_semaphore;
mod inspect;
pub mod keys;
mod kinds;
mod lock;
pub mod options;
mod pubsub;
mod read_write_lock;
mod runtime;
mod semaphore;

pub use client::{Client, ClientBuilder};
pub use error::{Error, ErrorKind, Result};
pub use expirable_semaphore::ExpirableSemaphore;
pub use inspect::{
    FairWaiter, HeldPermit, InspectedKind, KeyTtl, LockHolder, LockInfo, LockMode, WaitingWriter,
};
pub use lock::Lock;
pub use options::{ClientOptions, MAX_DURATION, MAX_NAME_BYTES, MAX_PERMITS};
pub use read_write_lock::ReadWriteLock;
pub use runtime::runtime;
pub use semaphore::Semaphore;

/// The README's Rust example, compiled as a doc test so it cannot drift from the API.
#[doc = include_str!("../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
