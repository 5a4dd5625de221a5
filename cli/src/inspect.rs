//! `polylock inspect NAME` and `polylock force-unlock NAME`.

use std::collections::HashMap;
use std::io::{BufRead, IsTerminal, Write};

use clap::Args;

use polylock::{Client, ElectionLeader, InspectedKind, KeyTtl, LockInfo, LockMode};
use serde::Serialize;

use crate::client_records::{self, ClientRecord};
use polylock_cli_common::block_on;
use polylock_cli_common::error::{CliError, CliResult};
use polylock_cli_common::raw;

#[derive(Args)]
#[command(after_help = "Examples:
  polylock inspect orders:42
  polylock inspect orders:42 --json | jq .holders
  POLYLOCK_REDIS_URL=redis://cache:6379/2 polylock inspect orders:42

Kinds: plain (a reentrant lock), fair (its queue or timeout set exists; a fair lock nobody
waits for is stored exactly like a plain one and shows as plain), fenced (its token counter
exists), read-write (mode, readers and writer, waiting writers), semaphore (a string holding an
integer: the permits available), expirable-semaphore (its set of taken permits exists: each
permit id with its expiry), latch (a count-down latch: its count), election (a leader
election: its leader, named from its client record, the leader's value and term; the last term
given when nobody leads), none (no key), not-a-lock (the name holds another Redis type, a
hash with other fields, or a string that is not a number: exit code 4).
One read-only snapshot (Client::inspect): nothing is changed, expired entries are shown.
Holders and waiters are named from their client records (polylock:client:<id>): name, pid,
host and, for holders, how long they have held (--json: client_name, client_pid, client_host,
held_for_ms); owners without a record (Redisson) show as their owner string.")]
pub struct InspectArgs {
    /// The lock name (the Redis key of the lock).
    pub name: String,
    /// The global --redis URL (filled in by main).
    #[arg(skip)]
    pub redis: String,
    /// Print one JSON object instead of text (for scripts).
    #[arg(long)]
    pub json: bool,
    /// The client's key prefix (`key_prefix`): the name is looked up under it, as the locks'
    /// clients see it (their key is <PREFIX><name>).
    #[arg(long, env = "POLYLOCK_KEY_PREFIX", value_name = "PREFIX")]
    pub key_prefix: Option<String>,
}

#[derive(Args)]
#[command(after_help = "Examples:
  polylock force-unlock orders:42          # asks for confirmation
  polylock force-unlock orders:42 --yes    # no question (scripts, CI)

The force-unlock of the kind `inspect` shows runs: fair (wakes the head of the queue), fenced
(the token counter stays), read-write (deletes it in the mode it is held in and wakes every
waiter), plain (publishes the unlock message). Semaphores have no holders: refused (exit 1).
The holder is not told directly: its next renewal or release reports the lock as lost.")]
pub struct ForceUnlockArgs {
    /// The lock name (the Redis key of the lock).
    pub name: String,
    /// The global --redis URL (filled in by main).
    #[arg(skip)]
    pub redis: String,
    /// Do not ask for confirmation (required when stdin is not a terminal).
    #[arg(long, short = 'y')]
    pub yes: bool,
    /// The client's key prefix (`key_prefix`): the name is looked up under it, as the locks'
    /// clients see it (their key is <PREFIX><name>).
    #[arg(long, env = "POLYLOCK_KEY_PREFIX", value_name = "PREFIX")]
    pub key_prefix: Option<String>,
}

/// What `inspect` shows (and prints as JSON), from the core's [`LockInfo`]. The fields of
/// the first version (name, kind, redis_type, holders, remaining_lease_ms, expires, queue) keep
/// their meaning; the others describe the newer kinds.
#[derive(Debug, Clone, Serialize)]
pub struct LockState {
    pub name: String,
    pub kind: Kind,
    /// What TYPE says about the key at the name (`none`, `hash`, `string`, ...).
    pub redis_type: String,
    pub holders: Vec<Holder>,
    /// PTTL of the key at the name; `None` when there is none, or it has no expiry.
    pub remaining_lease_ms: Option<u64>,
    /// False for a key without an expiry (a lock never written by polylock or Redisson, or a
    /// semaphore), or no key.
    pub expires: bool,
    /// Fair lock waiters in queue order (a FIFO lock's, in line order).
    pub queue: Vec<Waiter>,
    /// A read-write lock's mode (`read` or `write`) while held.
    pub mode: Option<&'static str>,
    /// A read-write lock's waiting polylock writers.
    pub waiting_writers: Vec<Waiter>,
    /// A semaphore's available permits (as stored).
    pub permits_available: Option<i64>,
    /// An expirable semaphore's taken permits.
    pub permits: Vec<Permit>,
    /// A fenced lock's token counter (the last token given); an election's last term given.
    pub fence_token: Option<i64>,
    /// A count-down latch's count.
    pub latch_count: Option<i64>,
    /// An election's leader; `None` when nobody leads, and for other kinds.
    pub leader: Option<Leader>,
    /// The server's clock at the snapshot (epoch ms): hold ages are measured against it.
    #[serde(skip)]
    pub server_time_ms: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// A reentrant lock (or a fair lock nobody waits for: Redis stores them alike).
    Plain,
    /// A lock whose fair queue or timeout set exists.
    Fair,
    /// A lock whose FIFO line exists (polylock's own layout).
    Fifo,
    /// A lock whose fencing token counter exists.
    Fenced,
    /// A read-write lock (a hash with a `mode` field, or waiting writers).
    ReadWrite,
    /// A string holding an integer: a semaphore's permits.
    Semaphore,
    /// A semaphore whose set of taken permits exists.
    ExpirableSemaphore,
    /// A count-down latch (a count with polylock's latch mark beside it).
    Latch,
    /// A leader election (its fenced lock and its leader's record).
    Election,
    /// Nothing at this name.
    None,
    /// A key that is not a lock (another type, or a hash with other fields).
    NotALock,
}

impl Kind {
    pub fn label(self) -> &'static str {
        match self {
            Kind::Plain => "plain",
            Kind::Fair => "fair",
            Kind::Fifo => "fifo",
            Kind::Fenced => "fenced",
            Kind::ReadWrite => "read-write",
            Kind::Semaphore => "semaphore",
            Kind::ExpirableSemaphore => "expirable-semaphore",
            Kind::Latch => "latch",
            Kind::Election => "election",
            Kind::None => "none",
            Kind::NotALock => "not-a-lock",
        }
    }

    /// Kinds with holders (an election's are its lock's).
    pub fn is_lock(self) -> bool {
        matches!(
            self,
            Kind::Plain | Kind::Fair | Kind::Fifo | Kind::Fenced | Kind::ReadWrite | Kind::Election
        )
    }

    /// Kinds listed (by `watch` and the console) while nobody holds them: their count or their
    /// term is worth seeing.
    pub fn listed_while_free(self) -> bool {
        self.is_semaphore() || matches!(self, Kind::Latch | Kind::Election)
    }

    pub fn is_semaphore(self) -> bool {
        matches!(self, Kind::Semaphore | Kind::ExpirableSemaphore)
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Holder {
    /// `<client-uuid>:<holder-id>`.
    pub owner: String,
    /// Reentrancy count.
    pub count: u64,
    /// For a read-write lock, the side held (`read` or `write`); otherwise absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<&'static str>,
    #[serde(flatten)]
    pub client: OwnerClient,
    /// How long it has held the lock (from its client record); `None` without a record, or
    /// before the record lists the hold (it is refreshed about a second after holds change).
    pub held_for_ms: Option<u64>,
}

/// Who an owner is, from its client record (`polylock:client:<client-id>`); all `None` for an
/// owner without a record (Redisson, a closed or crashed client).
#[derive(Debug, Clone, Default, Serialize)]
pub struct OwnerClient {
    pub client_name: Option<String>,
    pub client_pid: Option<u64>,
    pub client_host: Option<String>,
    /// `worker-7 (pid 1234 on host-a) held 12.3 s` for the text views.
    #[serde(skip)]
    pub text: Option<String>,
}

impl OwnerClient {
    fn of(records: &HashMap<String, ClientRecord>, owner: &str, held_for_ms: Option<u64>) -> Self {
        let Some(record) = records.get(client_records::client_id(owner)) else {
            return OwnerClient::default();
        };
        OwnerClient {
            client_name: record.name.clone(),
            client_pid: record.pid,
            client_host: record.host.clone(),
            text: client_records::owner_text(records, owner, held_for_ms),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Waiter {
    pub owner: String,
    /// Absolute deadline (epoch ms) after which it is skipped unless it looks again.
    pub deadline_ms: Option<u64>,
    /// The deadline minus the server's time; negative when already passed.
    pub deadline_in_ms: Option<i64>,
    #[serde(flatten)]
    pub client: OwnerClient,
}

/// An election's leader: who (its owner string, named from its client record), what it
/// announced and its term.
#[derive(Debug, Clone, Serialize)]
pub struct Leader {
    pub owner: String,
    pub value: String,
    pub term: i64,
    /// The client name the leader announced with its value (may be empty).
    pub announced_by: String,
    #[serde(flatten)]
    pub client: OwnerClient,
}

impl From<ElectionLeader> for Leader {
    fn from(leader: ElectionLeader) -> Leader {
        Leader {
            owner: leader.owner,
            value: leader.value,
            term: leader.term,
            announced_by: leader.client_name,
            client: OwnerClient::default(),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Permit {
    /// The permit id (32 hex characters).
    pub id: String,
    /// Expiry (epoch ms, the server's clock); `None`: never.
    pub expires_at_ms: Option<i64>,
    /// The expiry minus the server's time; negative when passed (given back at the next
    /// operation on the semaphore).
    pub expires_in_ms: Option<i64>,
}

impl LockState {
    pub fn is_held(&self) -> bool {
        !self.holders.is_empty()
    }

    /// Every owner string it names: holders, fair queue, waiting writers, an election's leader.
    pub fn owners(&self) -> impl Iterator<Item = &str> {
        let holders = self.holders.iter().map(|holder| holder.owner.as_str());
        let waiters = self.queue.iter().chain(&self.waiting_writers);
        let leader = self.leader.iter().map(|leader| leader.owner.as_str());
        holders
            .chain(waiters.map(|waiter| waiter.owner.as_str()))
            .chain(leader)
    }

    /// Fills in who each holder and waiter is, and how long each holder has held, from the
    /// client records.
    pub fn attach_records(&mut self, records: &HashMap<String, ClientRecord>) {
        for holder in &mut self.holders {
            // The core's own reading (Client::inspect) first; the records for what it lacks.
            holder.held_for_ms = holder.held_for_ms.or_else(|| {
                client_records::held_for_ms(records, &holder.owner, &self.name, self.server_time_ms)
            });
            let client = OwnerClient::of(records, &holder.owner, holder.held_for_ms);
            holder.client = OwnerClient {
                client_name: holder.client.client_name.take().or(client.client_name),
                ..client
            };
        }
        for waiter in self.queue.iter_mut().chain(&mut self.waiting_writers) {
            waiter.client = OwnerClient::of(records, &waiter.owner, None);
        }
        if let Some(leader) = &mut self.leader {
            leader.client = OwnerClient::of(records, &leader.owner, None);
        }
    }
}

impl From<LockInfo> for LockState {
    fn from(info: LockInfo) -> LockState {
        let now = info.server_time_ms;
        let kind = match info.kind {
            InspectedKind::None => Kind::None,
            InspectedKind::Reentrant => Kind::Plain,
            InspectedKind::Fair => Kind::Fair,
            InspectedKind::Fifo => Kind::Fifo,
            InspectedKind::Fenced => Kind::Fenced,
            InspectedKind::ReadWrite => Kind::ReadWrite,
            InspectedKind::Semaphore => Kind::Semaphore,
            InspectedKind::ExpirableSemaphore => Kind::ExpirableSemaphore,
            InspectedKind::Latch => Kind::Latch,
            InspectedKind::Election => Kind::Election,
            _ => Kind::NotALock,
        };
        let waiter = |owner: String, deadline: Option<i64>| Waiter {
            owner,
            deadline_ms: deadline.and_then(|ms| u64::try_from(ms).ok()),
            deadline_in_ms: deadline.map(|ms| ms - now),
            client: OwnerClient::default(),
        };
        LockState {
            kind,
            redis_type: info.redis_type,
            holders: info
                .holders
                .into_iter()
                .map(|holder| Holder {
                    owner: holder.owner,
                    count: holder.count,
                    mode: holder.mode.map(LockMode::label),
                    client: OwnerClient {
                        client_name: holder.client_name,
                        ..OwnerClient::default()
                    },
                    held_for_ms: holder.held_for.map(|held| held.as_millis() as u64),
                })
                .collect(),
            remaining_lease_ms: match info.ttl {
                KeyTtl::Remaining(left) => Some(left.as_millis() as u64),
                _ => None,
            },
            expires: matches!(info.ttl, KeyTtl::Remaining(_)),
            queue: info
                .queue
                .into_iter()
                .map(|queued| {
                    let deadline = queued.skipped_at_ms();
                    waiter(queued.owner, deadline)
                })
                .collect(),
            mode: info.mode.map(LockMode::label),
            waiting_writers: info
                .waiting_writers
                .into_iter()
                .map(|writer| waiter(writer.owner, Some(writer.until_ms)))
                .collect(),
            permits_available: info.permits_available,
            permits: info
                .permits
                .into_iter()
                .map(|permit| Permit {
                    expires_in_ms: permit.expires_at_ms.map(|ms| ms - now),
                    expires_at_ms: permit.expires_at_ms,
                    id: permit.id,
                })
                .collect(),
            fence_token: info.fence_token,
            latch_count: info.latch_count,
            leader: info.leader.map(Leader::from),
            server_time_ms: now,
            name: info.name,
        }
    }
}

/// Reads everything known about `name` with the core's one-snapshot inspection (owners not
/// yet named: see [`LockState::attach_records`]).
pub async fn read_state(client: &Client, name: &str) -> CliResult<LockState> {
    Ok(client.inspect(name).await?.into())
}

/// [`read_state`] with its owners named from their client records.
pub async fn read_named_state(client: &Client, name: &str) -> CliResult<LockState> {
    let mut state = read_state(client, name).await?;
    let records = client_records::read_or_warn(client, Some(state.owners())).await;
    state.attach_records(&records);
    Ok(state)
}

/// Connects, reads `name`, closes.
fn inspect_once(url: &str, key_prefix: Option<&str>, name: &str) -> CliResult<LockState> {
    block_on(async {
        let client = raw::client(url, key_prefix).await?;
        let state = read_named_state(&client, name).await;
        client.shutdown().await;
        state
    })
}

fn not_a_lock(state: &LockState) -> CliError {
    let what = if state.redis_type == "hash" {
        "a hash whose fields are not lock owners".to_owned()
    } else if state.redis_type == "string" {
        "a string that is not a number of permits".to_owned()
    } else {
        format!("a Redis {}", state.redis_type)
    };
    CliError::NotALock(format!(
        "'{}' is not a lock: the key holds {what}; another program uses this name",
        state.name
    ))
}

pub fn run_inspect(args: InspectArgs) -> CliResult<()> {
    let state = inspect_once(&args.redis, args.key_prefix.as_deref(), &args.name)?;
    if args.json {
        let text = serde_json::to_string_pretty(&state)
            .map_err(|err| CliError::Failed(format!("cannot encode JSON: {err}")))?;
        println!("{text}");
    } else {
        print_state(&state);
    }
    if state.kind == Kind::NotALock {
        return Err(not_a_lock(&state));
    }
    Ok(())
}

/// `skipped if silent for 9.8 s`, or that the deadline passed.
fn deadline_text(deadline_in_ms: Option<i64>, passed: &str) -> String {
    match deadline_in_ms {
        Some(ms) if ms >= 0 => format!("skipped if silent for {}", crate::seconds(ms as u64)),
        Some(_) => passed.to_owned(),
        None => "no deadline recorded".to_owned(),
    }
}

fn print_state(state: &LockState) {
    println!("lock:   {}", state.name);
    let kind = match state.kind {
        Kind::NotALock => format!("not-a-lock (Redis type: {})", state.redis_type),
        Kind::None if state.queue.is_empty() => "none (no such key: not held)".to_owned(),
        Kind::Fair | Kind::Fifo | Kind::Fenced | Kind::ReadWrite | Kind::Election
            if !state.is_held() =>
        {
            format!("{} (not held now)", state.kind.label())
        }
        Kind::ReadWrite => format!("read-write (mode: {})", state.mode.unwrap_or("?")),
        kind => kind.label().to_owned(),
    };
    println!("kind:   {kind}");
    if state.kind == Kind::NotALock {
        return;
    }
    if state.kind.is_semaphore() {
        print_permits(state);
        return;
    }
    if state.kind == Kind::Latch {
        println!("count:  {}", state.latch_count.unwrap_or(0));
        return;
    }
    if state.kind == Kind::Election {
        print_leader(state);
    }
    if state.holders.is_empty() {
        println!("holders: none");
    } else {
        println!("holders:");
        for holder in &state.holders {
            let side = holder
                .mode
                .map(|mode| format!("{mode}, "))
                .unwrap_or_default();
            match &holder.client.text {
                Some(who) => println!(
                    "  {who}  ({side}hold count {}, owner {})",
                    holder.count, holder.owner
                ),
                None => println!("  {}  ({side}hold count {})", holder.owner, holder.count),
            }
        }
        let lease = match state.remaining_lease_ms {
            Some(ms) => crate::seconds(ms),
            None if !state.expires => "no expiry (not written by polylock or Redisson)".to_owned(),
            None => "-".to_owned(),
        };
        println!("lease:  {lease} remaining");
    }
    if let Some(token) = state.fence_token {
        println!("token:  {token} (the last fencing token given)");
    }
    if state.kind == Kind::ReadWrite && !state.waiting_writers.is_empty() {
        println!(
            "writers waiting: {} (new polylock readers wait behind them):",
            state.waiting_writers.len()
        );
        for writer in &state.waiting_writers {
            let deadline = deadline_text(writer.deadline_in_ms, "registration passed");
            println!("  {}", waiter_text(writer, &deadline));
        }
    }
    if matches!(state.kind, Kind::Fair | Kind::Fifo) {
        if state.queue.is_empty() {
            println!("queue:  empty");
        } else {
            println!("queue:  {} waiting, in order:", state.queue.len());
            for (place, waiter) in state.queue.iter().enumerate() {
                let deadline = deadline_text(
                    waiter.deadline_in_ms,
                    "deadline passed (stale, removed on next operation)",
                );
                println!("  {}. {}", place + 1, waiter_text(waiter, &deadline));
            }
        }
    }
}

/// An election's leader, its value and its term, or that nobody leads (and the last term).
fn print_leader(state: &LockState) {
    let Some(leader) = &state.leader else {
        let last = match state.fence_token {
            Some(term) => format!(" (the last term given: {term})"),
            None => String::new(),
        };
        println!("leader: none{last}");
        return;
    };
    match &leader.client.text {
        Some(who) => println!("leader: {who}  (owner {})", leader.owner),
        None if !leader.announced_by.is_empty() => println!(
            "leader: {} (no client record)  (owner {})",
            leader.announced_by, leader.owner
        ),
        None => println!("leader: {}", leader.owner),
    }
    println!("value:  {}", leader.value);
    println!("term:   {}", leader.term);
}

/// `worker-8 (pid 99 on host-b)  (skipped if silent for 9.8 s, owner 5f3e:1)`, or the owner
/// string first when it has no client record.
fn waiter_text(waiter: &Waiter, deadline: &str) -> String {
    match &waiter.client.text {
        Some(who) => format!("{who}  ({deadline}, owner {})", waiter.owner),
        None => format!("{}  ({deadline})", waiter.owner),
    }
}

fn print_permits(state: &LockState) {
    println!(
        "permits: {} available",
        state.permits_available.unwrap_or(0)
    );
    if state.kind == Kind::ExpirableSemaphore {
        if state.permits.is_empty() {
            println!("taken:  none");
        } else {
            println!("taken:  {} permit(s):", state.permits.len());
            for permit in &state.permits {
                let expiry = match permit.expires_in_ms {
                    None => "never expires".to_owned(),
                    Some(ms) if ms >= 0 => format!("expires in {}", crate::seconds(ms as u64)),
                    Some(_) => "expired: given back at the next operation".to_owned(),
                };
                println!("  {}  ({expiry})", permit.id);
            }
        }
    }
    if let Some(ms) = state.remaining_lease_ms {
        println!("expiry: {} (the permits key)", crate::seconds(ms));
    }
}

/// Deletes the held lock `state` describes whoever holds it, with the force-unlock of its kind
/// (which wakes a waiter); false when it was released meanwhile.
pub async fn force_unlock(client: &Client, state: &LockState) -> CliResult<bool> {
    let name = &state.name;
    let lock = match state.kind {
        Kind::Fair => client.fair_lock(name)?,
        Kind::Fifo => client.fifo_lock(name)?,
        Kind::Fenced | Kind::Election => client.fenced_lock(name)?,
        // Redisson's rule: each side deletes the hash only in its own mode.
        Kind::ReadWrite if state.mode == Some("write") => {
            client.read_write_lock(name)?.write_lock()
        }
        Kind::ReadWrite => client.read_write_lock(name)?.read_lock(),
        _ => client.lock(name)?,
    };
    Ok(lock.force_unlock().await?)
}

/// Asks on the terminal; anything but y/yes is a no.
fn confirm(question: &str) -> CliResult<bool> {
    eprint!("{question} [y/N] ");
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut answer)
        .map_err(|err| CliError::Failed(format!("cannot read the answer: {err}")))?;
    Ok(matches!(answer.trim().to_lowercase().as_str(), "y" | "yes"))
}

pub fn run_force_unlock(args: ForceUnlockArgs) -> CliResult<()> {
    if !args.yes && !std::io::stdin().is_terminal() {
        return Err(CliError::Usage(format!(
            "force-unlock '{}' needs --yes when stdin is not a terminal",
            args.name
        )));
    }
    let state = inspect_once(&args.redis, args.key_prefix.as_deref(), &args.name)?;
    match state.kind {
        Kind::NotALock => return Err(not_a_lock(&state)),
        Kind::Latch => {
            return Err(CliError::Failed(format!(
                "'{}' is a count-down latch: nobody holds it, so there is nothing to \
                 force-unlock (count it down, or delete it with the latch's delete)",
                args.name
            )))
        }
        Kind::Semaphore | Kind::ExpirableSemaphore => {
            return Err(CliError::Failed(format!(
                "'{}' is a {}: its permits belong to nobody, so there is nothing to \
                 force-unlock (permits come back by release or add_permits{})",
                args.name,
                state.kind.label(),
                if state.kind == Kind::ExpirableSemaphore {
                    ", or when their lease runs out"
                } else {
                    ""
                }
            )))
        }
        _ if !state.is_held() => {
            println!("'{}' is not locked; nothing to do", args.name);
            return Ok(());
        }
        _ => {}
    }
    let mut owners: Vec<&str> = state.holders.iter().map(|h| h.owner.as_str()).collect();
    owners.dedup();
    if !args.yes {
        let question = format!(
            "Force-unlock {} lock '{}' held by {}?",
            state.kind.label(),
            args.name,
            owners.join(", ")
        );
        if !confirm(&question)? {
            return Err(CliError::Failed(
                "not confirmed; the lock is unchanged".into(),
            ));
        }
    }
    let deleted = block_on(async {
        let client = raw::client(&args.redis, args.key_prefix.as_deref()).await?;
        let deleted = force_unlock(&client, &state).await;
        client.shutdown().await;
        deleted
    })?;
    if deleted {
        println!(
            "force-unlocked {} lock '{}' (was held by {})",
            state.kind.label(),
            args.name,
            owners.join(", ")
        );
    } else {
        println!("'{}' was released meanwhile; nothing to do", args.name);
    }
    Ok(())
}
