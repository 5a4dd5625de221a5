//! Benchmark worker for Rust contenders, driven by `bench/run.py`.
//!
//! Usage: `polylock-bench <scenario> <contender> <redis-url> <lock-name> [options as JSON]`
//!   scenario:  uncontended | contended | many | renewal | rwmix | permits
//!   contender: polylock | polylock-fair | polylock-fifo | polylock-metrics-off |
//!              polylock-core-runtime | polylock-block-on | rslock | rslock-block-on | raw |
//!              plain-key (rwmix and permits: polylock only;
//!              polylock-metrics-off: polylock's plain lock from a client made with
//!              `ClientOptions::metrics` false, to measure what counting costs;
//!              polylock-core-runtime: the plain lock, the scenario's loop run on polylock's own
//!              runtime, `polylock::runtime()`, instead of this program's, to measure what
//!              crossing from the caller's runtime to the core's costs; uncontended and
//!              contended only; U runs each contender's loop in a task spawned on this
//!              program's multi-thread runtime, as a service runs lock code, and the
//!              `-block-on` ones on the runtime's `block_on` in the main thread instead;
//!              plain-key: the cheapest lock on a plain key that keeps polylock's guarantees,
//!              the yardstick of M's server CPU, bench/probes/lock_protocol_cost.py's; many and
//!              uncontended only;
//!              polylock-scripts: the two commands one uncontended cycle of polylock's `lock`
//!              sends, read from the server's slow log and sent again on the same connection as
//!              `raw`, with no engine around them: what polylock's protocol alone lets a serial
//!              client reach; uncontended only;
//!              redisson-layout: the least a lock on Redisson's `RLock` hash must do to exclude
//!              it (a reentrant owner count, its TTL, the unlock message), with none of
//!              polylock's guarantees and no engine: the floor of any lock on that layout;
//!              uncontended only)
//!
//! Protocol (the same for the Python and Node workers): connect and warm up, print `ready`;
//! read `go <start-epoch-us> <duration-s>` from stdin, wait for the start, run for the duration,
//! print one JSON line of results; then wait for stdin to close before exiting, so that closing
//! connections happens after the driver has read the server's command counters.

use polylock::AcquireOptions;
use std::io::{BufRead, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use redis::aio::MultiplexedConnection;
use serde_json::{json, Value};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The trivial script of the raw round-trip limit: the cheapest possible EVALSHA.
const TRIVIAL_SCRIPT: &str = "return 1";
/// Fixed lease for peers that have no watchdog: far longer than any hold, so it never expires.
const PEER_LEASE: Duration = Duration::from_secs(30);

fn now_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| elapsed.as_micros() as i64)
        .unwrap_or(0)
}

fn cpu_seconds() -> f64 {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes a whole rusage into the pointer it is given.
    let usage = unsafe {
        libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr());
        usage.assume_init()
    };
    let seconds = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

/// One lock implementation, behind the two calls every scenario needs.
enum Contender {
    Polylock {
        client: polylock::Client,
        /// `polylock-fair` or `polylock-fifo`: the fair or the FIFO lock; else the plain one.
        kind: String,
    },
    Rslock(rslock::LockManager),
    /// Two EVALSHA of a trivial script per cycle: the round-trip floor of a two-script lock.
    Raw {
        connection: MultiplexedConnection,
        script: redis::Script,
    },
    /// A lock on a plain key that keeps polylock's guarantees at the least server cost
    /// (bench/probes/lock_protocol_cost.py): an acquire that checks its request's tombstone
    /// before `SET NX PX`, a release that reads the key and a waiters mark in one `MGET` and
    /// renames the key to the owner's release trace.
    PlainKey {
        connection: MultiplexedConnection,
        acquire: redis::Script,
        release: redis::Script,
    },
    /// polylock's `lock` as the server sees it, without polylock's client: see
    /// [`PolylockScriptsHandle`].
    PolylockScripts {
        client: polylock::Client,
        connection: MultiplexedConnection,
    },
    /// The floor of a lock on Redisson's `RLock` layout: [`REDISSON_LAYOUT_ACQUIRE`],
    /// [`REDISSON_LAYOUT_RELEASE`].
    RedissonLayout {
        connection: MultiplexedConnection,
        acquire: redis::Script,
        release: redis::Script,
    },
}

/// The least an acquire on Redisson's `RLock` layout does: the lock is a hash of owner ->
/// levels with a TTL; a free lock, or one the owner holds, takes one more level. KEYS: the lock.
/// ARGV: the lease (ms), the owner. (Written here from the layout, not taken from Redisson.)
const REDISSON_LAYOUT_ACQUIRE: &str = "if redis.call('exists', KEYS[1]) == 0
  or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('hincrby', KEYS[1], ARGV[2], '1')
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
return redis.call('pttl', KEYS[1])";
/// The least a release on that layout does: the owner's level comes off; the last one deletes
/// the hash and tells Redisson's waiters on the lock's channel (they are not listed anywhere, so
/// the message always goes). KEYS: the lock, its channel. ARGV: the owner, the lease (ms).
const REDISSON_LAYOUT_RELEASE: &str = "if redis.call('hexists', KEYS[1], ARGV[1]) == 0 then
  return nil
end
if redis.call('hincrby', KEYS[1], ARGV[1], '-1') > 0 then
  redis.call('pexpire', KEYS[1], ARGV[2])
  return 0
end
redis.call('del', KEYS[1])
redis.call('publish', KEYS[2], '0')
return 1";
/// The owner every handle of the floor contenders writes: each holds a name of its own.
const FLOOR_OWNER: &str = "6b1f1f5e-0000-4000-8000-000000000001:1";

/// The plain-key lock's acquire. KEYS: the lock, the request's tombstone. ARGV: the owner's
/// token, the lease (ms).
const PLAIN_KEY_ACQUIRE: &str = "if redis.call('exists', KEYS[2]) == 1 then return 'UNDONE' end
if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return nil end
return redis.call('pttl', KEYS[1])";
/// The plain-key lock's release. KEYS: the lock, the owner's release trace, the waiters mark,
/// the channel. ARGV: the owner's token.
const PLAIN_KEY_RELEASE: &str = "local held, waiting = unpack(redis.call('mget', KEYS[1], KEYS[3]))
if held == ARGV[1] then
  redis.call('rename', KEYS[1], KEYS[2])
  if waiting then redis.call('publish', KEYS[4], 0) end
  return 1
end
return 0";

enum Held {
    Polylock(polylock::Lock),
    Rslock(rslock::Lock),
    Raw,
}

/// A contender's name without the `-block-on` that says where U runs its loop.
fn contender_kind(contender: &str) -> &str {
    contender.strip_suffix("-block-on").unwrap_or(contender)
}

/// A redis-rs multiplexed connection: the client stack of `raw` and of the contenders sent bare.
async fn plain_connection(url: &str) -> Result<MultiplexedConnection, BoxError> {
    Ok(redis::Client::open(url)?
        .get_multiplexed_async_connection()
        .await?)
}

impl Contender {
    async fn connect(kind: &str, url: &str, watchdog: Option<Duration>) -> Result<Self, BoxError> {
        Ok(match contender_kind(kind) {
            "polylock"
            | "polylock-fair"
            | "polylock-fifo"
            | "polylock-metrics-off"
            | "polylock-core-runtime" => {
                let mut options = polylock::ClientOptions {
                    metrics: kind != "polylock-metrics-off",
                    ..polylock::ClientOptions::default()
                };
                if let Some(timeout) = watchdog {
                    options.watchdog_timeout = timeout;
                }
                Contender::Polylock {
                    client: polylock::Client::connect_with(url, options).await?,
                    kind: kind.to_owned(),
                }
            }
            "rslock" => Contender::Rslock(rslock::LockManager::new(vec![url.to_owned()])),
            "raw" => Contender::Raw {
                connection: plain_connection(url).await?,
                script: redis::Script::new(TRIVIAL_SCRIPT),
            },
            "plain-key" => Contender::PlainKey {
                connection: plain_connection(url).await?,
                acquire: redis::Script::new(PLAIN_KEY_ACQUIRE),
                release: redis::Script::new(PLAIN_KEY_RELEASE),
            },
            "polylock-scripts" => Contender::PolylockScripts {
                client: polylock::Client::connect(url).await?,
                connection: plain_connection(url).await?,
            },
            "redisson-layout" => Contender::RedissonLayout {
                connection: plain_connection(url).await?,
                acquire: redis::Script::new(REDISSON_LAYOUT_ACQUIRE),
                release: redis::Script::new(REDISSON_LAYOUT_RELEASE),
            },
            other => return Err(format!("unknown contender '{other}'").into()),
        })
    }

    /// A handle for one holder: each concurrent holder gets its own.
    fn handle(&self, name: &str) -> Result<Handle<'_>, BoxError> {
        Ok(match self {
            Contender::Polylock { client, kind } => Handle::Polylock(match kind.as_str() {
                "polylock-fair" => client.fair_lock(name)?,
                "polylock-fifo" => client.fifo_lock(name)?,
                _ => client.lock(name)?,
            }),
            Contender::Rslock(manager) => Handle::Rslock(manager, name.to_owned()),
            Contender::Raw { connection, script } => {
                Handle::Raw(connection.clone(), script.clone(), name.to_owned())
            }
            Contender::PlainKey {
                connection,
                acquire,
                release,
            } => Handle::PlainKey(PlainKeyHandle::new(
                connection.clone(),
                acquire,
                release,
                name,
            )),
            Contender::PolylockScripts { client, connection } => {
                Handle::PolylockScripts(PolylockScriptsHandle {
                    lock: client.lock(name)?,
                    connection: connection.clone(),
                    cycle: None,
                })
            }
            Contender::RedissonLayout {
                connection,
                acquire,
                release,
            } => Handle::RedissonLayout {
                connection: connection.clone(),
                acquire,
                release,
                keys: [
                    name.to_owned(),
                    format!("redisson_lock__channel:{{{name}}}"),
                ],
            },
        })
    }
}

/// polylock's `lock` of one name as the server sees it: at its first acquire, one cycle of the
/// real client under the server's slow log (every command logged) yields the two `EVALSHA`s an
/// uncontended cycle sends; every cycle after sends those two again, byte for byte, on a plain
/// redis-rs connection. Sending the same request id each time costs the server what a new one
/// does: the id names a level field and a tombstone that a cycle writes and the release takes
/// off (or, for the tombstone, only checks), and the owner's release trace is overwritten each
/// cycle by the real client too.
struct PolylockScriptsHandle {
    lock: polylock::Lock,
    connection: MultiplexedConnection,
    /// The acquire's and the release's `EVALSHA`, once read.
    cycle: Option<(redis::Cmd, redis::Cmd)>,
}

impl PolylockScriptsHandle {
    async fn capture(&mut self) -> Result<(redis::Cmd, redis::Cmd), BoxError> {
        // A first cycle loads the scripts (the first EVALSHA of each is answered NOSCRIPT).
        self.lock.acquire(AcquireOptions::new()).await?;
        self.lock.release().await?;
        let config = |value: &str| {
            let mut set = redis::cmd("CONFIG");
            set.arg("SET").arg("slowlog-log-slower-than").arg(value);
            set
        };
        let (_, was): (String, String) = redis::cmd("CONFIG")
            .arg("GET")
            .arg("slowlog-log-slower-than")
            .query_async(&mut self.connection)
            .await?;
        config("0").query_async::<()>(&mut self.connection).await?;
        let logged = async {
            redis::cmd("SLOWLOG")
                .arg("RESET")
                .query_async::<()>(&mut self.connection)
                .await?;
            self.lock.acquire(AcquireOptions::new()).await?;
            self.lock.release().await?;
            // Newest first: [id, time, µs, [command and arguments], client address, client name].
            let entries: Vec<Vec<redis::Value>> = redis::cmd("SLOWLOG")
                .arg("GET")
                .arg(128)
                .query_async(&mut self.connection)
                .await?;
            Ok::<_, BoxError>(entries)
        }
        .await;
        // Restored whatever happened: a server logging every command would slow the contenders
        // measured after this one.
        config(&was).query_async::<()>(&mut self.connection).await?;
        let entries = logged?;
        let mut scripts = Vec::new();
        for entry in entries.into_iter().rev() {
            let words: Vec<Vec<u8>> =
                redis::from_redis_value(entry.into_iter().nth(3).ok_or("a short slow log entry")?)?;
            if words
                .first()
                .is_some_and(|w| w.eq_ignore_ascii_case(b"evalsha"))
            {
                let mut call = redis::cmd("EVALSHA");
                for word in &words[1..] {
                    call.arg(&word[..]);
                }
                scripts.push(call);
            }
        }
        let [acquire, release] = <[redis::Cmd; 2]>::try_from(scripts).map_err(|sent| {
            format!(
                "an uncontended cycle of polylock sent {} EVALSHAs, not 2",
                sent.len()
            )
        })?;
        Ok((acquire, release))
    }
}

/// One holder of the plain-key lock: its keys, its owner token and its request's tombstone.
struct PlainKeyHandle<'a> {
    connection: MultiplexedConnection,
    acquire: &'a redis::Script,
    release: &'a redis::Script,
    /// The lock, the release trace, the waiters mark, the channel (the release's keys).
    keys: [String; 4],
    tombstone: String,
    token: String,
}

impl<'a> PlainKeyHandle<'a> {
    fn new(
        connection: MultiplexedConnection,
        acquire: &'a redis::Script,
        release: &'a redis::Script,
        name: &str,
    ) -> Self {
        // One owner for every holder: each holds a name of its own.
        let owner = "6b1f1f5e-0000-4000-8000-000000000001:1";
        let request = "0123456789abcdef0123456789abcdef";
        PlainKeyHandle {
            connection,
            acquire,
            release,
            keys: [
                name.to_owned(),
                format!("polylock_released:{{{name}}}:{owner}"),
                format!("polylock_waiting:{{{name}}}"),
                format!("polylock_channel:{{{name}}}"),
            ],
            tombstone: format!("polylock_acquire_latch:{{{name}}}:{request}"),
            token: format!("{owner}:{request}"),
        }
    }
}

enum Handle<'a> {
    Polylock(polylock::Lock),
    Rslock(&'a rslock::LockManager, String),
    Raw(MultiplexedConnection, redis::Script, String),
    PlainKey(PlainKeyHandle<'a>),
    PolylockScripts(PolylockScriptsHandle),
    RedissonLayout {
        connection: MultiplexedConnection,
        acquire: &'a redis::Script,
        release: &'a redis::Script,
        /// The lock, its channel.
        keys: [String; 2],
    },
}

impl Handle<'_> {
    /// Waits without bound (the watchdog lease for polylock, a fixed one for the peer).
    async fn acquire(&mut self) -> Result<Held, BoxError> {
        match self {
            Handle::Polylock(lock) => {
                lock.acquire(AcquireOptions::new()).await?;
                Ok(Held::Polylock(lock.clone()))
            }
            Handle::Rslock(manager, name) => Ok(Held::Rslock(
                manager
                    .acquire_no_guard(name.as_bytes(), PEER_LEASE)
                    .await?,
            )),
            Handle::Raw(connection, script, name) => {
                script.key(&*name).invoke_async::<i64>(connection).await?;
                Ok(Held::Raw)
            }
            Handle::PlainKey(lock) => {
                // Each holder of M has a name of its own: the first try takes it.
                let busy: Option<redis::Value> = lock
                    .acquire
                    .key(&lock.keys[0])
                    .key(&lock.tombstone)
                    .arg(&lock.token)
                    .arg(PEER_LEASE.as_millis() as u64)
                    .invoke_async(&mut lock.connection)
                    .await?;
                match busy {
                    None => Ok(Held::Raw),
                    Some(reply) => Err(format!("plain-key lock busy: {reply:?}").into()),
                }
            }
            Handle::PolylockScripts(lock) => {
                let (acquire, _) = match lock.cycle {
                    Some(ref cycle) => cycle,
                    None => {
                        let cycle = lock.capture().await?;
                        lock.cycle.insert(cycle)
                    }
                };
                match acquire
                    .query_async::<redis::Value>(&mut lock.connection)
                    .await?
                {
                    redis::Value::Nil => Ok(Held::Raw),
                    reply => Err(format!("polylock's acquire script replied {reply:?}").into()),
                }
            }
            Handle::RedissonLayout {
                connection,
                acquire,
                keys,
                ..
            } => {
                let busy: Option<i64> = acquire
                    .key(&keys[0])
                    .arg(PEER_LEASE.as_millis() as u64)
                    .arg(FLOOR_OWNER)
                    .invoke_async(connection)
                    .await?;
                match busy {
                    None => Ok(Held::Raw),
                    Some(ttl) => Err(format!("Redisson-layout lock busy for {ttl} ms").into()),
                }
            }
        }
    }

    async fn release(&mut self, held: Held) -> Result<(), BoxError> {
        match (self, held) {
            (Handle::Polylock(_), Held::Polylock(lock)) => Ok(lock.release().await?),
            (Handle::Rslock(manager, _), Held::Rslock(lock)) => {
                manager.unlock(&lock).await;
                Ok(())
            }
            (Handle::Raw(connection, script, name), Held::Raw) => {
                script.key(&*name).invoke_async::<i64>(connection).await?;
                Ok(())
            }
            (Handle::PlainKey(lock), Held::Raw) => {
                let released: i64 = lock
                    .release
                    .key(&lock.keys[..])
                    .arg(&lock.token)
                    .invoke_async(&mut lock.connection)
                    .await?;
                if released == 1 {
                    Ok(())
                } else {
                    Err("plain-key lock not held at its release".into())
                }
            }
            (Handle::PolylockScripts(lock), Held::Raw) => {
                let (_, release) = lock.cycle.as_ref().ok_or("released before acquiring")?;
                match release.query_async::<i64>(&mut lock.connection).await? {
                    1 => Ok(()),
                    other => Err(format!("polylock's release script replied {other}").into()),
                }
            }
            (
                Handle::RedissonLayout {
                    connection,
                    release,
                    keys,
                    ..
                },
                Held::Raw,
            ) => {
                let freed: Option<i64> = release
                    .key(&keys[..])
                    .arg(FLOOR_OWNER)
                    .arg(PEER_LEASE.as_millis() as u64)
                    .invoke_async(connection)
                    .await?;
                match freed {
                    Some(1) => Ok(()),
                    other => Err(format!("Redisson-layout release replied {other:?}").into()),
                }
            }
            _ => Err("released through the wrong kind of handle".into()),
        }
    }
}

struct Args {
    scenario: String,
    contender: String,
    url: String,
    name: String,
    options: Value,
}

impl Args {
    fn parse() -> Result<Self, BoxError> {
        let mut args = std::env::args().skip(1);
        let mut next = |what: &str| args.next().ok_or_else(|| format!("missing {what}"));
        let scenario = next("scenario")?;
        let contender = next("contender")?;
        let url = next("redis url")?;
        let name = next("lock name")?;
        let options = match args.next() {
            Some(text) => serde_json::from_str(&text)?,
            None => json!({}),
        };
        Ok(Args {
            scenario,
            contender,
            url,
            name,
            options,
        })
    }

    fn option_u64(&self, key: &str, default: u64) -> u64 {
        self.options
            .get(key)
            .and_then(Value::as_u64)
            .unwrap_or(default)
    }
}

/// Prints `ready`, reads `go <start-us> <duration-s>`, sleeps until the start.
async fn handshake() -> Result<(i64, Duration), BoxError> {
    println!("ready");
    std::io::stdout().flush()?;
    let line = tokio::task::spawn_blocking(|| {
        let mut line = String::new();
        std::io::stdin().lock().read_line(&mut line).map(|_| line)
    })
    .await??;
    let mut words = line.split_whitespace();
    if words.next() != Some("go") {
        return Err(format!("expected 'go', got '{line}'").into());
    }
    let start_us: i64 = words.next().ok_or("go without a start")?.parse()?;
    let duration: f64 = words.next().ok_or("go without a duration")?.parse()?;
    let wait = start_us - now_us();
    if wait > 0 {
        tokio::time::sleep(Duration::from_micros(wait as u64)).await;
    }
    Ok((start_us, Duration::from_secs_f64(duration)))
}

fn report(result: Value) -> Result<(), BoxError> {
    println!("{result}");
    std::io::stdout().flush()?;
    // Keep connections open until the driver has read the counters and closes stdin.
    let mut rest = String::new();
    while std::io::stdin().lock().read_line(&mut rest)? > 0 {
        rest.clear();
    }
    Ok(())
}

/// U: serial acquire+release cycles of one holder.
async fn uncontended(args: &Args) -> Result<Value, BoxError> {
    let contender = Contender::connect(&args.contender, &args.url, None).await?;
    let mut handle = contender.handle(&args.name)?;
    for _ in 0..20 {
        let held = handle.acquire().await?;
        handle.release(held).await?;
    }
    let (_, duration) = handshake().await?;
    let cpu_before = cpu_seconds();
    let started = Instant::now();
    let mut cycles = 0u64;
    while started.elapsed() < duration {
        let held = handle.acquire().await?;
        handle.release(held).await?;
        cycles += 1;
    }
    Ok(json!({
        "cycles": cycles,
        "seconds": started.elapsed().as_secs_f64(),
        "cpu_s": cpu_seconds() - cpu_before,
    }))
}

/// C: one holder per process on a shared lock; 1 ms hold around a non-atomic GET/SET increment.
async fn contended(args: &Args) -> Result<Value, BoxError> {
    let hold = Duration::from_micros(args.option_u64("hold_us", 1000));
    let counter_key = args
        .options
        .get("counter")
        .and_then(Value::as_str)
        .ok_or("contended needs a 'counter' option")?
        .to_owned();
    let contender = Contender::connect(&args.contender, &args.url, None).await?;
    let mut data = redis::Client::open(args.url.as_str())?
        .get_multiplexed_async_connection()
        .await?;
    let mut handle = contender.handle(&args.name)?;
    let held = handle.acquire().await?;
    handle.release(held).await?;
    let (start_us, duration) = handshake().await?;
    let end_us = start_us + duration.as_micros() as i64;
    let mut waits_us = Vec::new();
    let mut holds = Vec::new();
    while now_us() < end_us {
        let asked = now_us();
        let held = handle.acquire().await?;
        let got = now_us();
        let value: Option<i64> = redis::cmd("GET")
            .arg(&counter_key)
            .query_async(&mut data)
            .await?;
        std::thread::sleep(hold);
        redis::cmd("SET")
            .arg(&counter_key)
            .arg(value.unwrap_or(0) + 1)
            .query_async::<()>(&mut data)
            .await?;
        let releasing = now_us();
        handle.release(held).await?;
        waits_us.push(got - asked);
        holds.push([got, releasing]);
    }
    Ok(json!({ "cycles": holds.len(), "waits_us": waits_us, "holds": holds }))
}

/// What a worker of the read-write (`rwmix`) and semaphore (`permits`) scenarios does in one
/// hold, between its acquire and its release.
enum KindHandle {
    Read(polylock::Lock),
    Write(polylock::Lock),
    Permit(polylock::Semaphore),
}

impl KindHandle {
    /// polylock's read or write lock of `name`, or its semaphore; peers have none here.
    fn new(args: &Args, client: &polylock::Client) -> Result<Self, BoxError> {
        Ok(match args.scenario.as_str() {
            "rwmix" => {
                let read_write = client.read_write_lock(&args.name)?;
                match args.options.get("role").and_then(Value::as_str) {
                    Some("writer") => KindHandle::Write(read_write.write_lock()),
                    _ => KindHandle::Read(read_write.read_lock()),
                }
            }
            _ => KindHandle::Permit(client.semaphore(&args.name)?),
        })
    }

    async fn acquire(&self) -> Result<(), BoxError> {
        match self {
            KindHandle::Read(lock) | KindHandle::Write(lock) => {
                lock.acquire(AcquireOptions::new()).await?;
            }
            KindHandle::Permit(semaphore) => {
                semaphore.acquire(1, None).await?;
            }
        }
        Ok(())
    }

    async fn release(&self) -> Result<(), BoxError> {
        match self {
            KindHandle::Read(lock) | KindHandle::Write(lock) => lock.release().await?,
            KindHandle::Permit(semaphore) => semaphore.release(1).await?,
        }
        Ok(())
    }
}

/// A writer's weight in the gauge of the rwmix scenario (a reader's is 1): a writer alone
/// reads exactly this, a reader beside a writer at least this.
const WRITER_WEIGHT: i64 = 1_000_000;

/// RW and S: one holder per process on one read-write lock (readers check that the two data
/// keys agree, writers update both) or one semaphore, each hold lasting `hold_us`; every holder
/// counts itself in a gauge key.
async fn kind_scenario(args: &Args) -> Result<Value, BoxError> {
    if args.contender != "polylock" {
        println!("unsupported no {} in {}", args.scenario, args.contender);
        std::process::exit(0);
    }
    let hold = Duration::from_micros(args.option_u64("hold_us", 1000));
    let data_key = |suffix: &str| format!("{}:{suffix}", args.name);
    let client = polylock::Client::connect(&args.url).await?;
    let handle = KindHandle::new(args, &client)?;
    let mut data = redis::Client::open(args.url.as_str())?
        .get_multiplexed_async_connection()
        .await?;
    handle.acquire().await?;
    handle.release().await?;
    let (start_us, duration) = handshake().await?;
    let end_us = start_us + duration.as_micros() as i64;
    let (mut waits_us, mut holds) = (Vec::new(), Vec::new());
    let (mut mismatches, mut crossed, mut max_gauge) = (0u64, 0u64, 0i64);
    // Every holder adds its weight to a gauge key for its hold: the server's count of who is
    // inside, exact whatever the processes' clocks say.
    let weight = match handle {
        KindHandle::Write(_) => WRITER_WEIGHT,
        _ => 1,
    };
    while now_us() < end_us {
        let asked = now_us();
        handle.acquire().await?;
        let got = now_us();
        let gauge: i64 = redis::cmd("INCRBY")
            .arg(data_key("gauge"))
            .arg(weight)
            .query_async(&mut data)
            .await?;
        max_gauge = max_gauge.max(gauge);
        crossed += u64::from(match handle {
            KindHandle::Read(_) => gauge >= WRITER_WEIGHT,
            KindHandle::Write(_) => gauge != WRITER_WEIGHT,
            KindHandle::Permit(_) => false,
        });
        match &handle {
            KindHandle::Read(_) => {
                let (a, b): (Option<i64>, Option<i64>) = redis::pipe()
                    .get(data_key("a"))
                    .get(data_key("b"))
                    .query_async(&mut data)
                    .await?;
                std::thread::sleep(hold);
                mismatches += u64::from(a != b);
            }
            KindHandle::Write(_) => {
                let a: Option<i64> = redis::cmd("GET")
                    .arg(data_key("a"))
                    .query_async(&mut data)
                    .await?;
                let next = a.unwrap_or(0) + 1;
                redis::cmd("SET")
                    .arg(data_key("a"))
                    .arg(next)
                    .query_async::<()>(&mut data)
                    .await?;
                std::thread::sleep(hold);
                redis::cmd("SET")
                    .arg(data_key("b"))
                    .arg(next)
                    .query_async::<()>(&mut data)
                    .await?;
            }
            KindHandle::Permit(_) => std::thread::sleep(hold),
        }
        redis::cmd("DECRBY")
            .arg(data_key("gauge"))
            .arg(weight)
            .query_async::<()>(&mut data)
            .await?;
        let releasing = now_us();
        handle.release().await?;
        waits_us.push(got - asked);
        holds.push([got, releasing]);
    }
    let role = match handle {
        KindHandle::Read(_) => "reader",
        KindHandle::Write(_) => "writer",
        KindHandle::Permit(_) => "holder",
    };
    Ok(json!({
        "role": role,
        "cycles": holds.len(),
        "waits_us": waits_us,
        "holds": holds,
        "mismatches": mismatches,
        "crossed": crossed,
        "max_gauge": max_gauge,
    }))
}

/// M: `holders` concurrent tasks in this process, each cycling on its own lock name.
async fn many(args: &Args) -> Result<Value, BoxError> {
    let holders = args.option_u64("holders", 64) as usize;
    let contender = Arc::new(Contender::connect(&args.contender, &args.url, None).await?);
    let (_, duration) = handshake().await?;
    let stop = Arc::new(AtomicBool::new(false));
    let cycles = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for index in 0..holders {
        let (contender, stop, cycles) = (contender.clone(), stop.clone(), cycles.clone());
        let name = format!("{}:{index}", args.name);
        tasks.push(tokio::spawn(async move {
            let mut handle = contender.handle(&name)?;
            while !stop.load(Ordering::Relaxed) {
                let held = handle.acquire().await?;
                handle.release(held).await?;
                cycles.fetch_add(1, Ordering::Relaxed);
            }
            Ok::<(), BoxError>(())
        }));
    }
    tokio::time::sleep(duration).await;
    stop.store(true, Ordering::Relaxed);
    for task in tasks {
        task.await??;
    }
    Ok(json!({
        "cycles": cycles.load(Ordering::Relaxed),
        "seconds": started.elapsed().as_secs_f64(),
    }))
}

/// The server's counters so far: script calls, and PEXPIRE calls (made inside the renewal script,
/// one per renewed lock), from INFO commandstats.
async fn script_counters(connection: &mut MultiplexedConnection) -> Result<(u64, u64), BoxError> {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(connection)
        .await?;
    let (mut scripts, mut pexpires) = (0, 0);
    for line in info.lines() {
        let Some((command, stats)) = line.split_once(':') else {
            continue;
        };
        let Some(calls) = stats
            .split(',')
            .find_map(|field| field.strip_prefix("calls="))
        else {
            continue;
        };
        match command {
            "cmdstat_evalsha" | "cmdstat_eval" | "cmdstat_evalsha_ro" | "cmdstat_eval_ro" => {
                scripts += calls.parse::<u64>()?
            }
            "cmdstat_pexpire" => pexpires += calls.parse::<u64>()?,
            _ => {}
        }
    }
    Ok((scripts, pexpires))
}

/// R: `locks` watchdog-held locks for the duration. The server's counters are sampled every
/// 20 ms: each burst of script calls after a quiet sample counts as one renewal tick, and the
/// PEXPIREs made inside the renewal script count the locks renewed.
async fn renewal(args: &Args) -> Result<Value, BoxError> {
    let locks = args.option_u64("locks", 10_000) as usize;
    let watchdog = Duration::from_millis(args.option_u64("watchdog_ms", 3000));
    let contender = Contender::connect("polylock", &args.url, Some(watchdog)).await?;
    let Contender::Polylock { client, .. } = &contender else {
        return Err("renewal measures polylock only".into());
    };
    let mut counters = redis::Client::open(args.url.as_str())?
        .get_multiplexed_async_connection()
        .await?;
    let mut held = Vec::with_capacity(locks);
    let acquiring = Instant::now();
    for chunk in 0..locks.div_ceil(256) {
        let mut batch = Vec::new();
        for index in chunk * 256..((chunk + 1) * 256).min(locks) {
            let lock = client.lock(&format!("{}:{index}", args.name))?;
            batch.push(async move { lock.acquire(AcquireOptions::new()).await.map(|_| lock) });
        }
        for lock in futures_join(batch).await {
            held.push(lock?);
        }
    }
    let acquire_seconds = acquiring.elapsed().as_secs_f64();
    first_renewal_tick(&mut counters, watchdog).await?;
    let (_, duration) = handshake().await?;
    let cpu_before = cpu_seconds();
    let (calls_before, pexpires_before) = script_counters(&mut counters).await?;
    let started = Instant::now();
    let (mut last, mut last_pexpires, mut ticks, mut in_burst) =
        (calls_before, pexpires_before, 0u64, false);
    while started.elapsed() < duration {
        tokio::time::sleep(Duration::from_millis(20)).await;
        let (calls, pexpires) = script_counters(&mut counters).await?;
        last_pexpires = pexpires;
        if calls > last && !in_burst {
            ticks += 1;
        }
        in_burst = calls > last;
        last = calls;
    }
    let seconds = started.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - cpu_before;
    let lost = held.iter().filter(|lock| lock.is_lost()).count();
    let watched = client.watched_locks();
    for chunk in held.chunks(256) {
        let releases = chunk
            .iter()
            .cloned()
            .map(|lock| async move { lock.release().await });
        for result in futures_join(releases).await {
            result?;
        }
    }
    Ok(json!({
        "locks": locks,
        "watched": watched,
        "lost": lost,
        "acquire_s": acquire_seconds,
        "seconds": seconds,
        "watchdog_ms": watchdog.as_millis() as u64,
        "script_calls": last - calls_before,
        "renewals": last_pexpires - pexpires_before,
        "ticks": ticks,
        "cpu_s": cpu,
    }))
}

/// Waits until the client's first renewal tick is over, before timing starts: on a fresh
/// server its first call is answered NOSCRIPT (the client then loads the script and calls
/// again), a one-time cost that is not a renewal's.
async fn first_renewal_tick(
    counters: &mut MultiplexedConnection,
    watchdog: Duration,
) -> Result<(), BoxError> {
    let bound = Instant::now() + watchdog * 2;
    let (before, _) = script_counters(counters).await?;
    let mut last = before;
    loop {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let (calls, _) = script_counters(counters).await?;
        // A burst began and stopped: a sample saw no new call after some were made.
        if (calls == last && last > before) || Instant::now() > bound {
            return Ok(());
        }
        last = calls;
    }
}

/// Awaits all futures concurrently (a tiny join_all, to avoid another dependency).
async fn futures_join<F>(futures: impl IntoIterator<Item = F>) -> Vec<F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    let handles: Vec<_> = futures.into_iter().map(tokio::spawn).collect();
    let mut outputs = Vec::with_capacity(handles.len());
    for handle in handles {
        match handle.await {
            Ok(output) => outputs.push(output),
            Err(err) => std::panic::resume_unwind(err.into_panic()),
        }
    }
    outputs
}

/// Runs the scenario on polylock's runtime, where the client's connection tasks run: each reply
/// then wakes the loop on the same runtime.
async fn on_core_runtime(args: Args) -> Result<Value, BoxError> {
    let ran = polylock::runtime().spawn(async move {
        let outcome = match args.scenario.as_str() {
            "uncontended" => uncontended(&args).await,
            _ => contended(&args).await,
        };
        outcome.map_err(|err| err.to_string())
    });
    Ok(ran.await??)
}

/// Runs U's loop in a task spawned on this program's multi-thread runtime: where a service runs
/// its lock code (the `-block-on` contenders run it on `block_on` in the main thread instead).
async fn spawned_uncontended(args: Args) -> Result<Value, BoxError> {
    let ran = tokio::spawn(async move { uncontended(&args).await.map_err(|err| err.to_string()) });
    Ok(ran.await??)
}

#[tokio::main]
async fn main() {
    let outcome = async {
        let args = Args::parse()?;
        let result = match args.scenario.as_str() {
            "uncontended" | "contended" if args.contender == "polylock-core-runtime" => {
                on_core_runtime(args).await?
            }
            "uncontended" if args.contender.ends_with("-block-on") => uncontended(&args).await?,
            "uncontended" => spawned_uncontended(args).await?,
            "contended" => contended(&args).await?,
            "many" => many(&args).await?,
            "renewal" => renewal(&args).await?,
            "rwmix" | "permits" => kind_scenario(&args).await?,
            other => return Err::<(), BoxError>(format!("unknown scenario '{other}'").into()),
        };
        report(result)
    }
    .await;
    if let Err(err) = outcome {
        eprintln!("polylock-bench: {err}");
        std::process::exit(1);
    }
}
