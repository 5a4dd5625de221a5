//! [`Client::inspect`](crate::Client::inspect): what polylock and Redisson keep under a name,
//! read in one snapshot without side effects (Redisson's `getLockInfo` idea), for tools such as
//! the `polylock` CLI.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use redis::{Script, Value};

use crate::engine::client_record::{self, RecordView};
use crate::engine::context::ClientInner;
use crate::foundation::error::{Error, Result};
use crate::foundation::keys;
use crate::foundation::runtime::on_runtime;
use crate::settings::options::validate_name;

/// Reads every key of every kind at once (`inspect.lua`); writes nothing.
static INSPECT: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("inspect.lua")));

/// Redisson's expiry of a permit that never expires (epoch ms).
const NEVER: i64 = 922_337_203_685_477;

/// What is kept under a name, as far as the keys tell. Redis stores some kinds alike, so the
/// answer is the most specific one the keys support: a fair lock nobody waits for looks like a
/// reentrant lock, an expirable semaphore with no permit taken like a semaphore, any string
/// holding an integer without polylock's latch mark (a Redisson latch too) like a semaphore, and
/// an election without a leader's record (nobody has announced) like a fenced lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum InspectedKind {
    /// Nothing at the name nor in any key of a kind: free.
    None,
    /// A reentrant lock (Redisson `RLock`): a hash of owners (or a fair lock with no queue).
    Reentrant,
    /// A fair lock (Redisson `RFairLock`): its queue or its deadlines exist.
    Fair,
    /// A FIFO lock (polylock's own layout): its line exists.
    Fifo,
    /// A fenced lock (Redisson `RFencedLock`): its token counter exists.
    Fenced,
    /// A read-write lock (Redisson `RReadWriteLock`): a hash with a `mode` field, or only
    /// polylock's record of waiting writers.
    ReadWrite,
    /// A semaphore (Redisson `RSemaphore`): a string holding an integer.
    Semaphore,
    /// An expirable semaphore (Redisson `RPermitExpirableSemaphore`): its ZSET of taken permits
    /// exists.
    ExpirableSemaphore,
    /// A count-down latch (polylock's `Client::count_down_latch`): a string holding the count,
    /// with polylock's latch mark beside it.
    Latch,
    /// A leader election (`Client::election`): its fenced lock and its leader's record.
    Election,
    /// Something else: another Redis type, a hash whose fields are not lock owners, a string
    /// that is not a number.
    Unknown,
}

impl InspectedKind {
    /// A short lowercase label: `none`, `reentrant`, `fair`, `fifo`, `fenced`, `read-write`,
    /// `semaphore`, `expirable-semaphore`, `latch`, `election`, `unknown`.
    pub fn label(self) -> &'static str {
        match self {
            InspectedKind::None => "none",
            InspectedKind::Reentrant => "reentrant",
            InspectedKind::Fair => "fair",
            InspectedKind::Fifo => "fifo",
            InspectedKind::Fenced => "fenced",
            InspectedKind::ReadWrite => "read-write",
            InspectedKind::Semaphore => "semaphore",
            InspectedKind::ExpirableSemaphore => "expirable-semaphore",
            InspectedKind::Latch => "latch",
            InspectedKind::Election => "election",
            InspectedKind::Unknown => "unknown",
        }
    }

    /// True for the kinds that have holders (every lock kind, and an election: its lock).
    pub fn is_lock(self) -> bool {
        matches!(
            self,
            InspectedKind::Reentrant
                | InspectedKind::Fair
                | InspectedKind::Fifo
                | InspectedKind::Fenced
                | InspectedKind::ReadWrite
                | InspectedKind::Election
        )
    }
}

/// The side of a read-write lock a holder holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LockMode {
    Read,
    Write,
}

impl LockMode {
    /// `read` or `write`, as Redisson writes the `mode` field.
    pub fn label(self) -> &'static str {
        match self {
            LockMode::Read => "read",
            LockMode::Write => "write",
        }
    }
}

/// One holder of a lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockHolder {
    /// The owner string, `<client-id>:<holder-id>` (see `docs/PROTOCOL.md`).
    pub owner: String,
    /// How many times it holds (reentrancy).
    pub count: u64,
    /// For a read-write lock, the side held (an owner holding both sides is listed twice,
    /// writer first); `None` for other kinds.
    pub mode: Option<LockMode>,
    /// The name of the polylock client that holds it (`ClientOptions::name`), from its client
    /// record; `None` when the owner has no record (a Redisson client, an older polylock, or
    /// a user whose ACL forbids the record).
    pub client_name: Option<String>,
    /// How long its client has held the lock (from the record's acquire time, by this
    /// process's clock); `None` without a record, or in the first second of a hold, before
    /// the record lists it.
    pub held_for: Option<Duration>,
}

/// The TTL of the key at the name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyTtl {
    /// There is no key.
    Missing,
    /// The key never expires (for a lock: not written by polylock or Redisson).
    Persistent,
    /// The key expires in this long (for a lock: the remaining lease).
    Remaining(Duration),
}

/// A waiter in a fair lock's queue or a FIFO lock's line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FairWaiter {
    pub owner: String,
    /// Its deadline in the fair lock's shared deadlines ZSET (epoch ms): skipped once passed.
    /// `None` in a FIFO lock's line.
    pub deadline_ms: Option<i64>,
    /// polylock's liveness record (epoch ms, the server's clock): a polylock waiter is skipped
    /// once it passes (it stopped looking); for a FIFO lock, when its record lapses (the
    /// snapshot's time when it has already lapsed). `None` for Redisson waiters.
    pub seen_deadline_ms: Option<i64>,
}

impl FairWaiter {
    /// The earlier of its two deadlines: when it is skipped unless it looks again.
    pub fn skipped_at_ms(&self) -> Option<i64> {
        match (self.deadline_ms, self.seen_deadline_ms) {
            (Some(shared), Some(seen)) => Some(shared.min(seen)),
            (shared, seen) => shared.or(seen),
        }
    }
}

/// A polylock writer waiting for a read-write lock (while one waits, new polylock readers wait).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaitingWriter {
    /// The writer's owner string (without the `:write` suffix).
    pub owner: String,
    /// Server time (epoch ms) until which its registration holds unless it looks again.
    pub until_ms: i64,
}

/// A permit taken from an expirable semaphore.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldPermit {
    /// Its id, 32 hex characters (the id `ExpirableSemaphore::acquire` returned).
    pub id: String,
    /// When it expires (epoch ms, the server's clock); `None`: never. A permit whose expiry has
    /// passed is still listed until the next operation on the semaphore gives it back.
    pub expires_at_ms: Option<i64>,
}

/// An election's leader, from its record (`docs/PROTOCOL.md`, "Leader election"), as
/// [`Election::leader`](crate::Election::leader) reads it: only while its owner holds the
/// election's lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ElectionLeader {
    /// The lock owner it holds as (`<client-id>:<holder-id>`).
    pub owner: String,
    /// The value it announced last.
    pub value: String,
    /// Its term: the fencing token of its hold.
    pub term: i64,
    /// The name its client announced (`ClientOptions::name`); may be empty.
    pub client_name: String,
}

/// What [`Client::inspect`](crate::Client::inspect) found under a name, in one snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockInfo {
    /// The name inspected.
    pub name: String,
    pub kind: InspectedKind,
    /// What Redis `TYPE` says of the key at the name (`none`, `hash`, `string`, ...).
    pub redis_type: String,
    /// The server's clock when the snapshot was taken (epoch ms): compare deadlines with it.
    pub server_time_ms: i64,
    /// The TTL of the key at the name.
    pub ttl: KeyTtl,
    /// The holders of a lock, in the order Redis keeps the fields (for a read-write lock, the
    /// writer first). Empty when free, and for semaphores (permits belong to nobody).
    pub holders: Vec<LockHolder>,
    /// A read-write lock's `mode` field while it is held.
    pub mode: Option<LockMode>,
    /// A fair lock's or a FIFO lock's waiters, head first (a FIFO line may still list waiters
    /// whose record lapsed: they leave it when they reach the head).
    pub queue: Vec<FairWaiter>,
    /// A read-write lock's waiting polylock writers, earliest registration end first.
    pub waiting_writers: Vec<WaitingWriter>,
    /// A semaphore's available permits as stored (`None` for other kinds). For an expirable
    /// semaphore, permits whose expiry has passed are not counted until they are given back.
    pub permits_available: Option<i64>,
    /// An expirable semaphore's taken permits, earliest expiry first.
    pub permits: Vec<HeldPermit>,
    /// A fenced lock's token counter: the last token given (while held, the token of the
    /// latest acquisition). For an election, the last term given.
    pub fence_token: Option<i64>,
    /// A count-down latch's count (`None` for other kinds).
    pub latch_count: Option<i64>,
    /// An election's leader; `None` when nobody leads (or the holder has not announced yet),
    /// and for other kinds.
    pub leader: Option<ElectionLeader>,
}

impl LockInfo {
    /// True when a lock kind has at least one holder.
    pub fn is_held(&self) -> bool {
        !self.holders.is_empty()
    }

    /// The remaining lease of a held lock (the TTL of its key), `None` when the key is
    /// missing or never expires.
    pub fn remaining_lease(&self) -> Option<Duration> {
        match self.ttl {
            KeyTtl::Remaining(left) => Some(left),
            _ => None,
        }
    }
}

/// [`Client::inspect`](crate::Client::inspect).
pub(crate) async fn inspect(client: &Arc<ClientInner>, name: &str) -> Result<LockInfo> {
    inspect_with_records(client, name)
        .await
        .map(|(info, _)| info)
}

/// [`Client::inspect_without_records`](crate::Client::inspect_without_records).
pub(crate) async fn inspect_without_records(
    client: &Arc<ClientInner>,
    name: &str,
) -> Result<LockInfo> {
    inspect_keys(client, name, false)
        .await
        .map(|(info, _)| info)
}

/// [`inspect`], and the records of the holders' clients.
async fn inspect_with_records(
    client: &Arc<ClientInner>,
    name: &str,
) -> Result<(LockInfo, HashMap<String, RecordView>)> {
    inspect_keys(client, name, true).await
}

/// The inspection script's reading of `name`; with `name_holders`, the holders named from
/// their clients' records (one `HMGET` per distinct client), which it returns too.
async fn inspect_keys(
    client: &Arc<ClientInner>,
    name: &str,
    name_holders: bool,
) -> Result<(LockInfo, HashMap<String, RecordView>)> {
    validate_name(name)?;
    let what = format!("inspect '{name}'");
    client.check_usable_for(&what)?;
    let key = &client.key_of(name);
    let mut call = INSPECT.prepare_invoke();
    call.key(key)
        .key(keys::fair_queue(key))
        .key(keys::fair_timeouts(key))
        .key(keys::fair_seen(key))
        .key(keys::fenced_token(key))
        .key(keys::rwlock_writers(key))
        .key(keys::permit_timeouts(key))
        .key(keys::fifo_line(key))
        .key(keys::fifo_waiter_prefix(key))
        .key(keys::election_record(key))
        .key(keys::latch_mark(key));
    let inner = client.clone();
    let name = name.to_owned();
    on_runtime(&what.clone(), async move {
        inner.check_usable_for(&what)?;
        let mut connection = inner.connection.clone();
        let key_prefix = inner.options.key_prefix.as_deref();
        let reply: Value = call
            .invoke_async(&mut connection)
            .await
            .map_err(|err| Error::from_redis(&what, err))?;
        let mut info = parse(name, reply)
            .ok_or_else(|| Error::redis(format!("{what}: unexpected reply from the script")))?;
        if !name_holders {
            return Ok((info, HashMap::new()));
        }
        let records =
            client_record::read_records(&connection, key_prefix, &holder_client_ids(&info.holders))
                .await;
        for holder in &mut info.holders {
            if let Some(record) = records.get(keys::owner_client_id(&holder.owner)) {
                holder.client_name = Some(record.name.clone());
                holder.held_for = record.held_for(&info.name);
            }
        }
        Ok((info, records))
    })
    .await
}

/// The text a timed-out acquire of `name` adds to name who held it (`held by 'worker-7', pid
/// 1234 on host-a, for 1.2 s`), or `None` when the lock looks free now or anything fails: one
/// inspect and the holders' records, bounded by the response timeout.
pub(crate) async fn describe_holders(client: &Arc<ClientInner>, name: &str) -> Option<String> {
    let bound = client.options.response_timeout;
    let (client, name) = (client.clone(), name.to_owned());
    // On the core's runtime: its timer, whatever thread (a binding's) awaits this.
    on_runtime("describe holders", async move {
        let Ok(Ok((info, records))) =
            tokio::time::timeout(bound, inspect_with_records(&client, &name)).await
        else {
            return Ok(None);
        };
        let owners: Vec<String> = info.holders.iter().map(|h| h.owner.clone()).collect();
        Ok(client_record::describe_holders(&name, &owners, &records))
    })
    .await
    .ok()
    .flatten()
}

/// The distinct client ids of `holders`, in order.
fn holder_client_ids(holders: &[LockHolder]) -> Vec<&str> {
    let mut ids: Vec<&str> = Vec::with_capacity(holders.len());
    for holder in holders {
        let id = keys::owner_client_id(&holder.owner);
        if !ids.contains(&id) {
            ids.push(id);
        }
    }
    ids
}

/// [`Client::scan_names`](crate::Client::scan_names).
pub(crate) async fn scan_names(client: &Arc<ClientInner>, pattern: &str) -> Result<Vec<String>> {
    let what = format!("scan '{pattern}'");
    client.check_usable_for(&what)?;
    let inner = client.clone();
    // The pattern is of the user's names: under a key prefix, of the keys after it.
    let pattern = client.key_of(pattern);
    on_runtime(&what.clone(), async move {
        let found = inner
            .connection
            .scan(&pattern)
            .await
            .map_err(|err| Error::from_redis(&what, err))?;
        Ok(names_of_keys(&inner, &found))
    })
    .await
}

/// The names among `keys`: without the key prefix, the keys kept beside a name left out;
/// sorted, once each.
fn names_of_keys(client: &ClientInner, keys: &[String]) -> Vec<String> {
    let prefix = client.options.key_prefix.as_deref();
    let mut names: Vec<String> = keys
        .iter()
        .filter_map(|key| crate::foundation::key_prefix::strip(prefix, key))
        .filter(|name| !keys::is_auxiliary(name))
        .map(str::to_owned)
        .collect();
    names.sort();
    names.dedup();
    names
}

/// Where a sweep of the keyspace by pages is ([`Client::scan_names_page`],
/// [`Client::scan_client_ids_page`]): each primary's `SCAN` cursor. A new one has not started.
#[derive(Debug, Clone, Default)]
pub struct ScanSweep {
    cursors: crate::connection::ScanCursors,
}

impl ScanSweep {
    /// The last page ended the sweep: every key that existed throughout it has been returned
    /// (`SCAN`'s guarantee). The next page starts a new sweep.
    pub fn is_through(&self) -> bool {
        self.cursors.through()
    }
}

/// One page of a sweep: one `SCAN` per primary not through yet, the keys it gave.
async fn scan_page(
    client: &Arc<ClientInner>,
    what: String,
    pattern: String,
    sweep: &mut ScanSweep,
) -> Result<Vec<String>> {
    client.check_usable_for(&what)?;
    if sweep.is_through() {
        *sweep = ScanSweep::default();
    }
    let inner = client.clone();
    let mut cursors = sweep.cursors.clone();
    let (keys, cursors) = on_runtime(&what.clone(), async move {
        let mut keys = Vec::new();
        inner
            .connection
            .scan_page(&pattern, &mut cursors, &mut keys)
            .await
            .map_err(|err| Error::from_redis(&what, err))?;
        Ok((keys, cursors))
    })
    .await?;
    sweep.cursors = cursors;
    Ok(keys)
}

/// [`Client::scan_names_page`](crate::Client::scan_names_page).
pub(crate) async fn scan_names_page(
    client: &Arc<ClientInner>,
    pattern: &str,
    sweep: &mut ScanSweep,
) -> Result<Vec<String>> {
    let what = format!("scan '{pattern}'");
    let keys = scan_page(client, what, client.key_of(pattern), sweep).await?;
    Ok(names_of_keys(client, &keys))
}

/// [`Client::scan_client_ids_page`](crate::Client::scan_client_ids_page).
pub(crate) async fn scan_client_ids_page(
    client: &Arc<ClientInner>,
    sweep: &mut ScanSweep,
) -> Result<Vec<String>> {
    let records_prefix = client.key_of(keys::CLIENT_RECORD_PREFIX);
    let pattern = format!("{records_prefix}*");
    let keys = scan_page(client, "scan the client records".to_owned(), pattern, sweep).await?;
    let mut ids: Vec<String> = keys
        .iter()
        .filter_map(|key| key.strip_prefix(&records_prefix))
        .map(str::to_owned)
        .collect();
    ids.sort();
    ids.dedup();
    Ok(ids)
}

/// A client record (`polylock:client:<client-id>`) as stored: the fields of docs/PROTOCOL.md it
/// has, unparsed (tools such as the CLI read its JSON fields).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientRecordFields {
    /// The client id: the uuid that starts the owner strings of its holds.
    pub client_id: String,
    pub fields: std::collections::BTreeMap<String, String>,
}

/// The fields of a client record (docs/PROTOCOL.md).
const RECORD_FIELDS: &[&str] = &[
    "name",
    "host",
    "pid",
    "connected_ms",
    "refreshed_ms",
    "holds",
    "metrics",
];

/// [`Client::client_records`](crate::Client::client_records).
pub(crate) async fn client_records(
    client: &Arc<ClientInner>,
    client_ids: Option<Vec<String>>,
) -> Result<Vec<ClientRecordFields>> {
    let what = "read the client records".to_owned();
    client.check_usable_for(&what)?;
    let inner = client.clone();
    on_runtime(&what.clone(), async move {
        let records_prefix = inner.key_of(keys::CLIENT_RECORD_PREFIX);
        let mut record_keys = match client_ids {
            Some(ids) => ids
                .iter()
                .map(|id| inner.key_of(&keys::client_record(id)))
                .collect(),
            None => inner
                .connection
                .scan(&format!("{records_prefix}*"))
                .await
                .map_err(|err| Error::from_redis(&what, err))?,
        };
        record_keys.sort();
        record_keys.dedup();
        // One HMGET per record (the command the ACL rules grant on the records), sent
        // together: the multiplexed connection pipelines them (one round trip per node).
        let replies = futures_util::future::join_all(record_keys.iter().map(|key| {
            let mut read = redis::cmd("HMGET");
            read.arg(key).arg(RECORD_FIELDS);
            inner.connection.query_at(key, read)
        }))
        .await;
        let mut records = Vec::with_capacity(record_keys.len());
        for (key, reply) in record_keys.iter().zip(replies) {
            let fields = match reply {
                Ok(value) => redis::from_redis_value::<Vec<Option<String>>>(value)
                    .map_err(|err| Error::from_redis(&what, err.into()))?
                    .into_iter()
                    .zip(RECORD_FIELDS)
                    .filter_map(|(value, field)| Some(((*field).to_owned(), value?)))
                    .collect::<std::collections::BTreeMap<String, String>>(),
                // Another program's key under the prefix is not a record.
                Err(err) if err.code() == Some("WRONGTYPE") => continue,
                Err(err) => return Err(Error::from_redis(&what, err)),
            };
            if fields.is_empty() {
                continue; // gone since the scan, or nobody's record
            }
            records.push(ClientRecordFields {
                client_id: key[records_prefix.len()..].to_owned(),
                fields,
            });
        }
        Ok(records)
    })
    .await
}

/// The reply of `inspect.lua`, decoded: `None` when its shape is not the script's.
fn parse(name: String, reply: Value) -> Option<LockInfo> {
    let mut parts = array(reply)?.into_iter();
    let server_time_ms = int(parts.next()?)?;
    let redis_type = text(parts.next()?)?;
    let pttl = int(parts.next()?)?;
    let contents = strings(parts.next()?)?;
    let beside = KindKeys::parse(&mut parts, server_time_ms)?;
    let mut info = LockInfo {
        name,
        kind: InspectedKind::None,
        redis_type,
        server_time_ms,
        ttl: key_ttl(pttl),
        holders: Vec::new(),
        mode: None,
        queue: Vec::new(),
        waiting_writers: Vec::new(),
        permits_available: None,
        permits: Vec::new(),
        fence_token: None,
        latch_count: None,
        leader: None,
    };
    match info.redis_type.as_str() {
        "none" => info.read_no_key(&beside),
        "hash" => info.read_hash(&contents, &beside),
        "string" => info.read_string(&contents, &beside),
        _ => info.kind = InspectedKind::Unknown,
    }
    info.read_election(&beside);
    info.add_what_the_kind_keeps(beside);
    Some(info)
}

/// The TTL of the key at the name, from its `PTTL` (-2: no key; another negative: no expiry).
fn key_ttl(pttl: i64) -> KeyTtl {
    match pttl {
        -2 => KeyTtl::Missing,
        ms if ms < 0 => KeyTtl::Persistent,
        ms => KeyTtl::Remaining(Duration::from_millis(ms as u64)),
    }
}

/// One key a kind keeps beside the name, as the script reads it: its Redis type and its items.
struct TypedKey {
    redis_type: String,
    items: Vec<Vec<u8>>,
}

impl TypedKey {
    /// The key exists with the type its kind gives it.
    fn is(&self, redis_type: &str) -> bool {
        self.redis_type == redis_type
    }

    /// Its items if it has the type its kind gives it (a key of another type is no part of it).
    fn items(&self, redis_type: &str) -> &[Vec<u8>] {
        if self.is(redis_type) {
            &self.items
        } else {
            &[]
        }
    }
}

/// What the keys the kinds keep beside the name tell: which exist, and what they hold.
struct KindKeys {
    /// A fair lock's queue or deadlines exist.
    has_fair_keys: bool,
    /// A fenced lock's token counter exists.
    has_token: bool,
    /// polylock's record of a read-write lock's waiting writers exists.
    has_writers: bool,
    /// An expirable semaphore's taken permits exist.
    has_permits: bool,
    /// A FIFO lock's line exists.
    has_line: bool,
    /// polylock's latch mark exists.
    has_latch_mark: bool,
    /// An election's record: its fields (`owner`, `value`, `term`, `client`), when it is a hash.
    election_record: Option<HashMap<String, String>>,
    fair_queue: Vec<FairWaiter>,
    fifo_line: Vec<FairWaiter>,
    fence_token: Option<i64>,
    waiting_writers: Vec<WaitingWriter>,
    permits: Vec<HeldPermit>,
}

impl KindKeys {
    /// Decodes the reply's parts after the name's: the kinds' keys, the FIFO records' TTLs.
    fn parse(parts: &mut impl Iterator<Item = Value>, server_time_ms: i64) -> Option<KindKeys> {
        let mut aux = Vec::with_capacity(7);
        for part in parts.by_ref().take(7) {
            let mut pair = array(part)?.into_iter();
            let redis_type = text(pair.next()?)?;
            let items = strings(pair.next()?)?;
            aux.push(TypedKey { redis_type, items });
        }
        let record_ttls: Vec<i64> = array(parts.next()?)?
            .into_iter()
            .map(int)
            .collect::<Option<_>>()?;
        let [queue, deadlines, seen, token, writers, permits, line]: [TypedKey; 7] =
            aux.try_into().ok()?;
        let mut typed_key = || -> Option<TypedKey> {
            let mut pair = array(parts.next()?)?.into_iter();
            Some(TypedKey {
                redis_type: text(pair.next()?)?,
                items: strings(pair.next()?)?,
            })
        };
        let (election, mark) = (typed_key()?, typed_key()?);
        let election_record = election.is("hash").then(|| {
            pairs(&election.items)
                .into_iter()
                .map(|(field, value)| (field.to_owned(), value.to_owned()))
                .collect()
        });
        Some(KindKeys {
            has_fair_keys: queue.is("list") || deadlines.is("zset"),
            has_token: token.is("string"),
            has_writers: writers.is("zset"),
            has_permits: permits.is("zset"),
            has_line: line.is("list"),
            has_latch_mark: mark.is("string"),
            election_record,
            fair_queue: fair_queue(
                queue.items("list"),
                deadlines.items("zset"),
                seen.items("zset"),
            ),
            fifo_line: fifo_line(line.items("list"), &record_ttls, server_time_ms),
            fence_token: first_integer(token.items("string")),
            waiting_writers: waiting_writers(writers.items("zset")),
            permits: held_permits(permits.items("zset")),
        })
    }

    /// The lock kind these keys tell: a free lock (no hash at the name) is told apart by them.
    fn lock_kind(&self) -> Option<InspectedKind> {
        if self.has_fair_keys {
            Some(InspectedKind::Fair)
        } else if self.has_line {
            Some(InspectedKind::Fifo)
        } else if self.has_token {
            Some(InspectedKind::Fenced)
        } else if self.has_writers {
            Some(InspectedKind::ReadWrite)
        } else {
            None
        }
    }
}

/// A fair lock's queue, head first, each waiter with its shared and its liveness deadline.
fn fair_queue(queue: &[Vec<u8>], deadlines: &[Vec<u8>], seen: &[Vec<u8>]) -> Vec<FairWaiter> {
    let (deadlines, seen) = (scores(deadlines), scores(seen));
    let score_of = |scores: &[(String, i64)], owner: &str| {
        scores
            .iter()
            .find(|(queued, _)| queued == owner)
            .map(|(_, score)| *score)
    };
    queue
        .iter()
        .filter_map(|owner| utf8(owner).map(str::to_owned))
        .map(|owner| FairWaiter {
            deadline_ms: score_of(&deadlines, &owner),
            seen_deadline_ms: score_of(&seen, &owner),
            owner,
        })
        .collect()
}

/// A FIFO lock's line, head first, each waiter with when its record (`record_ttls`) lapses.
fn fifo_line(line: &[Vec<u8>], record_ttls: &[i64], server_time_ms: i64) -> Vec<FairWaiter> {
    line.iter()
        .zip(record_ttls)
        .filter_map(|(owner, ttl)| {
            Some(FairWaiter {
                owner: utf8(owner)?.to_owned(),
                deadline_ms: None,
                seen_deadline_ms: Some(server_time_ms + (*ttl).max(0)),
            })
        })
        .collect()
}

/// A read-write lock's waiting writers, from their ZSET (members `<owner>:write`).
fn waiting_writers(writers: &[Vec<u8>]) -> Vec<WaitingWriter> {
    scores(writers)
        .into_iter()
        .map(|(field, until_ms)| WaitingWriter {
            owner: field
                .strip_suffix(":write")
                .map_or(field.clone(), str::to_owned),
            until_ms,
        })
        .collect()
}

/// An expirable semaphore's taken permits, from their ZSET (binary ids scored by expiry).
fn held_permits(permits: &[Vec<u8>]) -> Vec<HeldPermit> {
    permits
        .chunks(2)
        .filter_map(|pair| {
            let expiry = utf8(pair.get(1)?)?.parse::<f64>().ok()? as i64;
            Some(HeldPermit {
                id: hex(&pair[0]),
                expires_at_ms: (expiry < NEVER).then_some(expiry),
            })
        })
        .collect()
}

/// The integer the first item holds (a string key's value), if it holds one.
fn first_integer(items: &[Vec<u8>]) -> Option<i64> {
    items
        .first()
        .and_then(|value| utf8(value)?.parse::<i64>().ok())
}

/// The steps of `parse` that tell the kind from the key at the name and the keys beside it.
impl LockInfo {
    /// No key at the name: an expirable semaphore with no permit left, a free lock, or nothing.
    fn read_no_key(&mut self, beside: &KindKeys) {
        if beside.has_permits {
            self.kind = InspectedKind::ExpirableSemaphore;
            self.permits_available = Some(0);
        } else if let Some(kind) = beside.lock_kind() {
            self.kind = kind;
        }
    }

    /// A hash at the name: a read-write lock (with a `mode` field), another lock, or unknown.
    fn read_hash(&mut self, contents: &[Vec<u8>], beside: &KindKeys) {
        let fields = pairs(contents);
        if let Some(mode) = fields
            .iter()
            .find_map(|(field, value)| (*field == "mode").then_some(*value))
        {
            match read_write_holders(mode, &fields) {
                Some((mode, holders)) => {
                    self.kind = InspectedKind::ReadWrite;
                    self.mode = Some(mode);
                    self.holders = holders;
                }
                None => self.kind = InspectedKind::Unknown,
            }
        } else {
            match lock_holders(&fields) {
                Some(holders) => {
                    self.holders = holders;
                    // Without a `mode` field, waiting writers make no read-write lock.
                    self.kind = match beside.lock_kind() {
                        Some(InspectedKind::ReadWrite) | None => InspectedKind::Reentrant,
                        Some(kind) => kind,
                    };
                }
                None => self.kind = InspectedKind::Unknown,
            }
        }
    }

    /// A string at the name: a semaphore's available permits, a latch's count (with polylock's
    /// mark beside it), or unknown if it is no integer.
    fn read_string(&mut self, contents: &[Vec<u8>], beside: &KindKeys) {
        match first_integer(contents) {
            Some(permits) => {
                self.kind = if beside.has_permits {
                    InspectedKind::ExpirableSemaphore
                } else if beside.has_latch_mark {
                    InspectedKind::Latch
                } else {
                    InspectedKind::Semaphore
                };
                if self.kind == InspectedKind::Latch {
                    self.latch_count = Some(permits);
                } else {
                    self.permits_available = Some(permits);
                }
            }
            None => self.kind = InspectedKind::Unknown,
        }
    }

    /// An election's record beside a fenced lock (held or free): an election, led by the
    /// record's owner while that owner holds the lock (as `kinds/election/leader.lua` reads it).
    fn read_election(&mut self, beside: &KindKeys) {
        let Some(record) = &beside.election_record else {
            return;
        };
        let field = |name: &str| record.get(name).cloned();
        let Some(owner) = field("owner") else {
            return; // not an election's record
        };
        let lock_of_an_election = matches!(
            self.kind,
            InspectedKind::Fenced | InspectedKind::Reentrant | InspectedKind::None
        );
        if !lock_of_an_election {
            return;
        }
        self.kind = InspectedKind::Election;
        if self.holders.iter().any(|holder| holder.owner == owner) {
            self.leader = Some(ElectionLeader {
                owner,
                value: field("value").unwrap_or_default(),
                term: field("term")
                    .and_then(|term| term.parse().ok())
                    .unwrap_or(0),
                client_name: field("client").unwrap_or_default(),
            });
        }
    }

    /// What the keys beside the name hold for the kind found, and for no other kind.
    fn add_what_the_kind_keeps(&mut self, beside: KindKeys) {
        match self.kind {
            InspectedKind::Fair => self.queue = beside.fair_queue,
            InspectedKind::Fifo => self.queue = beside.fifo_line,
            InspectedKind::ExpirableSemaphore => self.permits = beside.permits,
            InspectedKind::ReadWrite => self.waiting_writers = beside.waiting_writers,
            InspectedKind::Fenced | InspectedKind::Election => {
                self.fence_token = beside.fence_token
            }
            _ => {}
        }
    }
}

/// `<client-id>:<holder-id>`: the owner strings polylock and Redisson write (a UUID, a colon, a
/// number).
fn is_owner(field: &str) -> bool {
    let Some((client, holder)) = field.rsplit_once(':') else {
        return false;
    };
    let uuid_shape = client.len() == 36
        && client.char_indices().all(|(at, c)| match at {
            8 | 13 | 18 | 23 => c == '-',
            _ => c.is_ascii_hexdigit(),
        });
    uuid_shape && !holder.is_empty() && holder.bytes().all(|b| b.is_ascii_digit())
}

fn count(value: &str) -> Option<u64> {
    value.parse::<u64>().ok().filter(|count| *count > 0)
}

/// The holders of a lock hash, or `None` when a field is not an owner with a count.
/// The prefix of the fields polylock keeps in a lock hash beside the owners' (see
/// `kinds/lock_hash.lua`).
const POLYLOCK_FIELD_PREFIX: &str = "polylock:";

fn lock_holders(fields: &[(&str, &str)]) -> Option<Vec<LockHolder>> {
    let mut holders = Vec::with_capacity(fields.len());
    for (field, value) in fields {
        // polylock's own fields beside the owners' (`docs/PROTOCOL.md`): a level's record, the
        // waiters mark.
        if field.starts_with(POLYLOCK_FIELD_PREFIX) {
            continue;
        }
        if !is_owner(field) {
            return None;
        }
        holders.push(LockHolder {
            owner: (*field).to_owned(),
            count: count(value)?,
            mode: None,
            client_name: None,
            held_for: None,
        });
    }
    (!holders.is_empty()).then_some(holders)
}

/// The mode and holders of a read-write lock hash (writer first, then readers), or `None` when
/// it is not one.
fn read_write_holders(mode: &str, fields: &[(&str, &str)]) -> Option<(LockMode, Vec<LockHolder>)> {
    let mode = match mode {
        "read" => LockMode::Read,
        "write" => LockMode::Write,
        _ => return None,
    };
    let mut writers = Vec::new();
    let mut readers = Vec::new();
    for (field, value) in fields {
        if *field == "mode" {
            continue;
        }
        let (owner, side) = match field.strip_suffix(":write") {
            Some(owner) => (owner, LockMode::Write),
            None => (*field, LockMode::Read),
        };
        if !is_owner(owner) {
            return None;
        }
        let holder = LockHolder {
            owner: owner.to_owned(),
            count: count(value)?,
            mode: Some(side),
            client_name: None,
            held_for: None,
        };
        match side {
            LockMode::Write => writers.push(holder),
            LockMode::Read => readers.push(holder),
        }
    }
    writers.extend(readers);
    Some((mode, writers))
}

fn array(value: Value) -> Option<Vec<Value>> {
    match value {
        Value::Array(items) => Some(items),
        _ => None,
    }
}

fn int(value: Value) -> Option<i64> {
    match value {
        Value::Int(n) => Some(n),
        _ => None,
    }
}

fn text(value: Value) -> Option<String> {
    match value {
        Value::BulkString(bytes) => String::from_utf8(bytes).ok(),
        Value::SimpleString(text) => Some(text),
        _ => None,
    }
}

fn strings(value: Value) -> Option<Vec<Vec<u8>>> {
    array(value)?
        .into_iter()
        .map(|item| match item {
            Value::BulkString(bytes) => Some(bytes),
            Value::SimpleString(text) => Some(text.into_bytes()),
            Value::Int(n) => Some(n.to_string().into_bytes()),
            _ => None,
        })
        .collect()
}

fn utf8(bytes: &[u8]) -> Option<&str> {
    std::str::from_utf8(bytes).ok()
}

/// HGETALL's flat list as (field, value) pairs (fields that are not UTF-8 become empty, which
/// no kind accepts).
fn pairs(items: &[Vec<u8>]) -> Vec<(&str, &str)> {
    items
        .chunks(2)
        .map(|pair| {
            (
                utf8(&pair[0]).unwrap_or(""),
                pair.get(1).and_then(|value| utf8(value)).unwrap_or(""),
            )
        })
        .collect()
}

/// ZRANGE WITHSCORES's flat list as (member, score) pairs.
fn scores(items: &[Vec<u8>]) -> Vec<(String, i64)> {
    items
        .chunks(2)
        .filter_map(|pair| {
            let member = utf8(&pair[0])?.to_owned();
            let score = utf8(pair.get(1)?)?.parse::<f64>().ok()?;
            Some((member, score as i64))
        })
        .collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owners_are_uuid_colon_number() {
        assert!(is_owner("6e3814a1-e847-452b-a982-45baf93a1df2:1"));
        assert!(!is_owner("6e3814a1-e847-452b-a982-45baf93a1df2:x"));
        assert!(!is_owner("mode"));
        assert!(!is_owner("6e3814a1e847452ba98245baf93a1df2abcd:1"));
    }

    #[test]
    fn read_write_holders_list_the_writer_first() {
        let owner = "6e3814a1-e847-452b-a982-45baf93a1df2:1";
        let write = format!("{owner}:write");
        let fields = [(owner, "2"), (write.as_str(), "1")];
        let (mode, holders) = read_write_holders("write", &fields).unwrap();
        assert_eq!(mode, LockMode::Write);
        assert_eq!(holders[0].mode, Some(LockMode::Write));
        assert_eq!(holders[1].count, 2);
        assert!(read_write_holders("other", &fields).is_none());
        assert!(read_write_holders("read", &[("name", "ada")]).is_none());
    }
}
