//! The native `Client`: a connection to one Redis server, and the maker of every handle.

use napi::bindgen_prelude::{Object, ToNapiValue, Unknown};
use napi::{sys, Env};
use napi_derive::napi;

use crate::args::{bytes, integer, string};
use crate::error::OrThrow;
use crate::expirable_semaphore::ExpirableSemaphore;
use crate::latch::CountDownLatch;
use crate::lock::Lock;
use crate::metrics::{MetricEvent, MetricsSnapshot};
use crate::options::{connect_options, lock_defaults, with_lock_wait_mode};
use crate::promise::promise;
use crate::read_write_lock::ReadWriteLock;
use crate::semaphore::Semaphore;

/// A connection to one Redis server; make locks from it.
#[napi]
pub struct Client {
    inner: polylock::Client,
}

impl Client {
    /// The handle `make` makes on the object `name` (`what` names it in messages).
    fn named<T>(
        &self,
        env: &Env,
        name: Unknown,
        what: &str,
        make: impl FnOnce(&polylock::Client, &str) -> polylock::Result<T>,
    ) -> napi::Result<T> {
        string(name, what)
            .and_then(|name| make(&self.inner, &name))
            .or_throw(env)
    }

    /// A lock handle made by `make` on the lock `name`, with `defaults` (checked by the core).
    fn lock_handle(
        &self,
        env: &Env,
        name: Unknown,
        defaults: Option<Unknown>,
        make: fn(&polylock::Client, &str) -> polylock::Result<polylock::Lock>,
    ) -> napi::Result<Lock> {
        self.named(env, name, "lock name", |client, name| {
            let inner = with_lock_wait_mode(make(client, name)?, defaults)?
                .with_defaults(lock_defaults(defaults)?)?;
            Ok(Lock { inner })
        })
    }
}

/// The fencing token of a fenced write (a number, as `lock.token` gives it).
fn token(value: Unknown) -> polylock::Result<i64> {
    integer(value, "token")
}

/// A connected client and its loop link (`event_loop`), attached to the JS thread that gets
/// the client, as its promise settles there.
struct Connected {
    client: Client,
    link: Option<polylock::LoopLink>,
}

impl ToNapiValue for Connected {
    unsafe fn to_napi_value(env: sys::napi_env, value: Self) -> napi::Result<sys::napi_value> {
        if let Some(link) = value.link {
            crate::event_loop::attach(env, link)?;
        }
        unsafe { Client::to_napi_value(env, value.client) }
    }
}

#[napi]
impl Client {
    /// Connects; rejects with `ERR_CONNECTION` when the server cannot be reached in time.
    #[napi(
        strict,
        ts_args_type = "url: string, options?: ConnectOptions | null",
        ts_return_type = "Promise<Client>"
    )]
    pub fn connect<'env>(
        env: &'env Env,
        url: Unknown,
        options: Option<Unknown>,
    ) -> napi::Result<Object<'env>> {
        let (url, options) = connect_options(url, options).or_throw(env)?;
        promise(env, async move {
            let inner = polylock::Client::connect_with(&url, options).await?;
            // The hot path's socket on the event loop, where the client has one plain server.
            let link = inner.loop_link().await;
            Ok(Connected {
                client: Client { inner },
                link,
            })
        })
    }

    /// This client's id, the first half of every owner string it writes.
    #[napi(getter)]
    pub fn id(&self) -> String {
        self.inner.id().to_owned()
    }

    /// The client's name (the `name` option, default `host:pid`), recorded beside its locks.
    #[napi(getter)]
    pub fn name(&self) -> String {
        self.inner.name().to_owned()
    }

    /// The lease of watchdog-renewed locks, in milliseconds.
    #[napi(getter)]
    pub fn watchdog_timeout_ms(&self) -> f64 {
        self.inner.watchdog_timeout().as_secs_f64() * 1000.0
    }

    /// What the locks of this client did since it connected. No I/O.
    #[napi]
    pub fn metrics(&self) -> MetricsSnapshot {
        self.inner.metrics().into()
    }

    /// For `@polylock/polylock/otel` only: starts (`true`) or stops buffering metric events.
    #[napi]
    pub fn record_metric_events(&self, on: bool) {
        self.inner.record_metric_events(on);
    }

    /// For `@polylock/polylock/otel` only: the metric events buffered since the last call.
    #[napi]
    pub fn drain_metric_events(&self) -> Vec<MetricEvent> {
        self.inner
            .drain_metric_events()
            .into_iter()
            .map(MetricEvent::from)
            .collect()
    }

    /// A new handle (a new owner) on the lock `name`, with per-lock `defaults` for its acquires
    /// and, optionally, its own wait mode (checked now). No I/O.
    #[napi(ts_args_type = "name: string, defaults?: LockOptions | null")]
    pub fn lock(&self, env: &Env, name: Unknown, defaults: Option<Unknown>) -> napi::Result<Lock> {
        self.lock_handle(env, name, defaults, polylock::Client::lock)
    }

    /// A new handle (a new owner) on the fair lock `name`: FIFO, a release wakes only the next
    /// waiter. No I/O.
    #[napi(ts_args_type = "name: string, defaults?: LockOptions | null")]
    pub fn fair_lock(
        &self,
        env: &Env,
        name: Unknown,
        defaults: Option<Unknown>,
    ) -> napi::Result<Lock> {
        self.lock_handle(env, name, defaults, polylock::Client::fair_lock)
    }

    /// A new handle (a new owner) on the FIFO lock `name` (polylock's own layout, not
    /// Redisson's): waiters are served in arrival order and a release hands the lock to the next
    /// one directly, at about half the server calls of the fair lock. No I/O.
    #[napi(ts_args_type = "name: string, defaults?: LockOptions | null")]
    pub fn fifo_lock(
        &self,
        env: &Env,
        name: Unknown,
        defaults: Option<Unknown>,
    ) -> napi::Result<Lock> {
        self.lock_handle(env, name, defaults, polylock::Client::fifo_lock)
    }

    /// A new handle (a new owner) on the fenced lock `name`: the lock API plus a token per
    /// acquisition (`token`). No I/O.
    #[napi(ts_args_type = "name: string, defaults?: LockOptions | null")]
    pub fn fenced_lock(
        &self,
        env: &Env,
        name: Unknown,
        defaults: Option<Unknown>,
    ) -> napi::Result<Lock> {
        self.lock_handle(env, name, defaults, polylock::Client::fenced_lock)
    }

    /// A new owner's handle on the read-write lock `name`. No I/O.
    /// `defaults` are those of both its locks.
    #[napi(ts_args_type = "name: string, defaults?: AcquireOptions | null")]
    pub fn read_write_lock(
        &self,
        env: &Env,
        name: Unknown,
        defaults: Option<Unknown>,
    ) -> napi::Result<ReadWriteLock> {
        self.named(env, name, "lock name", |client, name| {
            ReadWriteLock::new(client.read_write_lock(name)?, lock_defaults(defaults)?)
        })
    }

    /// A handle on the semaphore `name`. No I/O.
    #[napi(ts_args_type = "name: string")]
    pub fn semaphore(&self, env: &Env, name: Unknown) -> napi::Result<Semaphore> {
        self.named(env, name, "semaphore name", |client, name| {
            Ok(Semaphore {
                inner: client.semaphore(name)?,
            })
        })
    }

    /// A handle on the expirable semaphore `name` (permits with ids and leases). No I/O.
    #[napi(ts_args_type = "name: string")]
    pub fn expirable_semaphore(
        &self,
        env: &Env,
        name: Unknown,
    ) -> napi::Result<ExpirableSemaphore> {
        self.named(env, name, "semaphore name", |client, name| {
            Ok(ExpirableSemaphore {
                inner: client.expirable_semaphore(name)?,
            })
        })
    }

    /// Sets `key` to `value` only if `token` is at least the highest token applied to `key`,
    /// else rejects with `ERR_STALE_TOKEN` and writes nothing.
    #[napi(
        ts_args_type = "key: string, value: string | Buffer, token: number",
        ts_return_type = "Promise<void>"
    )]
    pub fn fenced_set<'env>(
        &self,
        env: &'env Env,
        key: Unknown,
        value: Unknown,
        token: Unknown,
    ) -> napi::Result<Object<'env>> {
        let args = (|| {
            Ok((
                string(key, "fenced key")?,
                bytes(value, "value")?,
                self::token(token)?,
            ))
        })();
        let (key, value, token) = args.or_throw(env)?;
        let client = self.inner.clone();
        promise(
            env,
            async move { client.fenced_set(&key, value, token).await },
        )
    }

    /// Deletes `key` under the rule of `fencedSet`; `true` when a key was deleted.
    #[napi(
        ts_args_type = "key: string, token: number",
        ts_return_type = "Promise<boolean>"
    )]
    pub fn fenced_delete<'env>(
        &self,
        env: &'env Env,
        key: Unknown,
        token: Unknown,
    ) -> napi::Result<Object<'env>> {
        let args = (|| Ok((string(key, "fenced key")?, self::token(token)?)))();
        let (key, token) = args.or_throw(env)?;
        let client = self.inner.clone();
        promise(env, async move { client.fenced_delete(&key, token).await })
    }

    /// Stops the watchdog and pub/sub, then waits (at most the response timeout) until the
    /// client's record is deleted; resolves to the names of locks still held (they expire).
    #[napi(ts_return_type = "Promise<Array<string>>")]
    pub fn close<'env>(&self, env: &'env Env) -> napi::Result<Object<'env>> {
        let client = self.inner.clone();
        promise(env, async move { Ok(client.shutdown().await) })
    }

    /// The run-once job lock `name`: held at most `atMostMs`, at least `atLeastMs` (default 0)
    /// from the job's start. No I/O.
    #[napi(ts_args_type = "name: string, options: JobLockOptions")]
    pub fn job_lock(
        &self,
        env: &Env,
        name: Unknown,
        options: Option<Unknown>,
    ) -> napi::Result<crate::job_lock::JobLock> {
        crate::job_lock::job_lock(&self.inner, name, options).or_throw(env)
    }

    /// A handle on the count-down latch `name`. No I/O.
    #[napi(ts_args_type = "name: string")]
    pub fn count_down_latch(&self, env: &Env, name: Unknown) -> napi::Result<CountDownLatch> {
        self.named(env, name, "latch name", |client, name| {
            Ok(CountDownLatch {
                inner: client.count_down_latch(name)?,
            })
        })
    }

    /// The leader election `name`. No I/O.
    #[napi(ts_args_type = "name: string")]
    pub fn election(&self, env: &Env, name: Unknown) -> napi::Result<crate::election::Election> {
        self.named(env, name, "election name", |client, name| {
            Ok(crate::election::Election {
                inner: client.election(name)?,
            })
        })
    }
}
