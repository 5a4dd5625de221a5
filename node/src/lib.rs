//! The napi-rs binding of polylock: the native `Client`, `Lock`, `LockGroup`, `ReadWriteLock`,
//! `Semaphore`, `ExpirableSemaphore` and `Cancellation` classes and `setLogger`.
//!
//! `node/lib/` (one module per class, exported by `node/index.js`) wraps them to give `using`,
//! `AbortSignal` and `Symbol.asyncDispose`. This binding checks only the JavaScript types of
//! arguments ([`args`]) and maps every error to a JS `Error` with a `code` ([`error`]); the core
//! checks every value, so a bad value gets the same message in every language. Times are
//! milliseconds.

mod args;
mod cancellation;
mod client;
mod election;
mod error;
mod event_loop;
mod expirable_semaphore;
mod group;
mod hold;
mod job_lock;
mod latch;
mod lock;
pub mod log;
pub mod metrics;
mod options;
mod permits;
mod promise;
mod read_write_lock;
mod semaphore;

/// The engine's threads allocate on every call (its futures, commands and replies): mimalloc
/// takes 10-15 % less CPU per lock cycle than the system allocator (bench/NOTES.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
