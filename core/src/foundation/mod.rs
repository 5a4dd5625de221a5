//! The foundation: what every layer above uses and that uses nothing of the core above it. The
//! error type and the readings of `redis` errors it classifies by, ids, the runtime, maps that
//! shrink, and the key names of the Redisson data layout (public as `polylock::keys` and
//! `polylock::key_prefix`).

pub(crate) mod error;
pub(crate) mod ids;
pub mod key_prefix;
pub mod keys;
pub(crate) mod maps;
pub(crate) mod redis_errors;
pub(crate) mod runtime;
