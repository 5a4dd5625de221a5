//! `polylock check`: a safety self-test against the user's own deployment. Workers in this
//! process, each with a client of its own, take one fenced lock in turn, write a fenced
//! resource inside, and journal every entry and exit; `--failover` makes the deployment fail
//! over mid-run (`SENTINEL FAILOVER`, or `CLUSTER FAILOVER` on a replica of the lock's
//! primary). The report: acquisitions, overlaps (a worker entered while another was inside),
//! whether the earlier holder was told it lost the lock, and what replica sync and fencing
//! would have prevented.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::Args;
use polylock::{AcquireOptions, Client, ClientOptions, ErrorKind};
use serde::Serialize;

use polylock_cli_common::block_on;
use polylock_cli_common::error::{CliError, CliResult};
use polylock_cli_common::raw::redact;

#[derive(Args)]
#[command(after_help = "Examples:
  polylock check -u redis+sentinel://10.0.0.5:26379,10.0.0.6:26379/mymaster --failover
  polylock check -u redis+cluster://10.0.0.7:7000 --failover --compare
  polylock check -u redis://127.0.0.1:6379 --workers 16 --duration 30

Each worker has its own client and takes the fenced lock `polylock:check:<random>` (watchdog
lease), writes the fenced key `polylock:check:<random>:resource` with its token, and releases.
An overlap is a worker entering while another is inside: the lock failed its promise there.
'told lost' overlaps are ones whose earlier holder was told (its lost signal fired) before it
left: code that stops on that signal, and fencing, keep the resource safe. --failover needs a
Sentinel or cluster URL with at least one replica. --compare runs again with sync_replicas on.
Exit code 1 when an overlap was found. Keys used are deleted at the end.

polylock check --permissions --prefix app: -u redis://app:secret@10.0.0.5:6379 lists what that
user lacks of the ACL rule polylock needs for the locks named app:..., and the ACL SETUSER
arguments that grant it (exit code 1 when something is missing). With --console, the same for
the read-only rule polylock console needs to look (docs/console.md).")]
pub struct CheckArgs {
    /// The global --redis URL (filled in by main).
    #[arg(skip)]
    pub redis: String,
    /// Workers, each with its own client.
    #[arg(long, default_value_t = 8)]
    pub workers: usize,
    /// Seconds to run (each round).
    #[arg(long, default_value_t = 10.0)]
    pub duration: f64,
    /// Milliseconds each worker stays inside.
    #[arg(long, default_value_t = 2)]
    pub hold_ms: u64,
    /// Make the deployment fail over mid-run.
    #[arg(long)]
    pub failover: bool,
    /// Seconds into the run when the failover is started (default: a third of the run).
    #[arg(long)]
    pub failover_after: Option<f64>,
    /// Start the failover once a worker holds the lock (or was refused it as not synced), not
    /// at a time. The sections open then stay open until the failover has completed, another
    /// worker has entered and the holder's lost signal has fired (or --duration ran out), and
    /// the round ends when they close: the case of a holder across a failover, whatever the
    /// machine's speed.
    #[arg(long, requires = "failover", conflicts_with = "failover_after")]
    pub failover_while_held: bool,
    /// Run with replica sync (WAIT after every acquire, renewal and release).
    #[arg(long)]
    pub sync_replicas: bool,
    /// Run twice: without and then with replica sync, and report both.
    #[arg(long)]
    pub compare: bool,
    /// How long WAIT waits for the replicas, in milliseconds (with replica sync).
    #[arg(long, default_value_t = 1000)]
    pub replica_sync_timeout_ms: u64,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
    /// Instead of the self-test: list what the connecting Redis user lacks of the ACL rule
    /// polylock needs for the locks under --prefix (each command and key or channel tried
    /// harmlessly; no admin command needed). Exit code 1 when something is missing.
    #[arg(long)]
    pub permissions: bool,
    /// With --permissions: check the read-only rule `polylock console` needs to look (the
    /// console's reads, and on a one-server URL each command alone) instead of the lock rule.
    #[arg(long, requires = "permissions")]
    pub console: bool,
    /// With --permissions: the prefix of the lock names the user's rule is for (e.g. `app:`).
    #[arg(long, default_value = "", requires = "permissions")]
    pub prefix: String,
    /// With --permissions: the clients' key prefix (`key_prefix`), put before every name and
    /// client record, so before --prefix too.
    #[arg(
        long,
        env = "POLYLOCK_KEY_PREFIX",
        value_name = "PREFIX",
        requires = "permissions"
    )]
    pub key_prefix: Option<String>,
}

/// One round's findings.
#[derive(Debug, Default, Serialize, Clone)]
pub struct Round {
    pub sync_replicas: bool,
    pub workers: usize,
    pub seconds: f64,
    /// How the failover was made, if one was.
    pub failover: Option<String>,
    /// Seconds into the run when the new primary was in place (the failover completed), if seen.
    pub failover_completed_after: Option<f64>,
    /// Sections open from the start of the failover until it completed (--failover-while-held).
    pub sections_across_failover: u64,
    pub acquisitions: u64,
    /// Entries while another worker was inside.
    pub overlaps: u64,
    /// Overlaps whose earlier holder was told it lost the lock before it left.
    pub overlaps_told_lost: u64,
    /// Overlaps whose earlier holder held a lower token than the newcomer: a fenced resource
    /// refuses the earlier holder's writes once the newcomer wrote.
    pub overlaps_fencing_orders: u64,
    /// Writes the fenced resource refused (a stale token).
    pub stale_writes_refused: u64,
    /// Acquisitions undone because no replica acknowledged them (replica sync).
    pub not_synced: u64,
    /// Acquire errors other than "not synced".
    pub acquire_errors: u64,
    /// Releases that failed (lost lock, unreachable server).
    pub release_errors: u64,
    /// Holds whose lost signal fired.
    pub lost: u64,
}

#[derive(Default)]
struct Journal {
    /// Workers inside now, with the section number and token of their entry.
    inside: Vec<(usize, u64, i64)>,
    /// Overlaps: (earlier worker, its section, its token, newcomer's token).
    overlaps: Vec<(usize, u64, i64, i64)>,
    /// Sections (worker, section) that left with their lost signal fired.
    left_lost: HashSet<(usize, u64)>,
    /// A worker's acquire answered: it entered, or was refused as not synced.
    answered: bool,
    /// With --failover-while-held: the sections (worker, section) open when the failover
    /// started, until they close.
    across_failover: Option<HashSet<(usize, u64)>>,
    failover_completed: bool,
    round: Round,
}

impl Journal {
    /// The failover-while-held case ran: its failover completed and every section open across
    /// it closed (the round may end).
    fn failover_case_done(&self) -> bool {
        self.failover_completed && self.across_failover.as_ref().is_some_and(HashSet::is_empty)
    }
}

type Shared = Arc<Mutex<Journal>>;

fn journal(shared: &Shared) -> std::sync::MutexGuard<'_, Journal> {
    shared.lock().unwrap_or_else(|p| p.into_inner())
}

pub fn run(args: CheckArgs) -> CliResult<()> {
    if args.permissions && args.console {
        return crate::console_permissions::run(
            &args.redis,
            args.key_prefix.as_deref(),
            &args.prefix,
            args.json,
        );
    }
    if args.permissions {
        return crate::permissions::run(
            &args.redis,
            args.key_prefix.as_deref(),
            &args.prefix,
            args.json,
        );
    }
    if args.workers == 0 || args.workers > 1000 {
        return Err(CliError::Usage("--workers must be from 1 to 1000".into()));
    }
    if !(args.duration > 0.0 && args.duration <= 86_400.0) {
        return Err(CliError::Usage(
            "--duration must be from 0 to 86400 seconds".into(),
        ));
    }
    if args.failover && failover_target(&args.redis).is_none() {
        return Err(CliError::Usage(format!(
            "--failover needs a Sentinel (redis+sentinel://) or cluster (redis+cluster://) URL, got '{}'",
            redact(&args.redis)
        )));
    }
    let modes: Vec<bool> = if args.compare {
        vec![false, true]
    } else {
        vec![args.sync_replicas]
    };
    let mut rounds = Vec::new();
    for sync in modes {
        rounds.push(block_on(run_round(&args, sync))?);
    }
    if args.json {
        let json = serde_json::json!({ "url": redact(&args.redis), "rounds": rounds });
        println!("{json}");
    } else {
        for round in &rounds {
            print_round(&args.redis, round);
        }
    }
    let overlaps: u64 = rounds.iter().map(|round| round.overlaps).sum();
    if overlaps > 0 {
        return Err(CliError::Failed(format!(
            "check found {overlaps} overlap(s): two holders of one lock at once"
        )));
    }
    Ok(())
}

fn print_round(url: &str, round: &Round) {
    println!(
        "polylock check on {}: {} workers, {:.1} s, replica sync {}, failover: {}",
        redact(url),
        round.workers,
        round.seconds,
        if round.sync_replicas { "on" } else { "off" },
        round.failover.as_deref().unwrap_or("none")
    );
    println!("  acquisitions          {}", round.acquisitions);
    println!(
        "  overlaps              {}  (told lost: {}, fencing orders them: {})",
        round.overlaps, round.overlaps_told_lost, round.overlaps_fencing_orders
    );
    println!("  stale writes refused  {}", round.stale_writes_refused);
    println!("  lost signals          {}", round.lost);
    println!(
        "  not synced (undone)   {}   acquire errors {}   release errors {}",
        round.not_synced, round.acquire_errors, round.release_errors
    );
    if round.overlaps > 0 {
        if !round.sync_replicas {
            println!("  replica sync (--sync-replicas) keeps an acquisition only once a replica has it, so a failover to that replica keeps the lock: run with --compare to see it.");
        }
        println!("  fencing: {} of {} overlaps had the newcomer's token higher; a resource that checks tokens (fenced_set) refuses the earlier holder's writes after the newcomer's.", round.overlaps_fencing_orders, round.overlaps);
    }
}

async fn run_round(args: &CheckArgs, sync_replicas: bool) -> CliResult<Round> {
    let options = ClientOptions {
        sync_replicas,
        replica_sync_timeout: Duration::from_millis(args.replica_sync_timeout_ms.max(1)),
        response_timeout: Duration::from_secs(2),
        connect_timeout: Duration::from_secs(5),
        tls_ca: polylock_cli_common::raw::tls_ca(&args.redis),
        ..ClientOptions::default()
    };
    let mut clients = Vec::with_capacity(args.workers);
    for _ in 0..args.workers {
        clients.push(Client::connect_with(&args.redis, options.clone()).await?);
    }
    let name = format!("polylock:check:{}", &clients[0].id()[..8]);
    let resource = format!("{name}:resource");
    let shared: Shared = Arc::default();
    let started = Instant::now();
    let deadline = started + Duration::from_secs_f64(args.duration);
    let mut tasks = Vec::new();
    for (worker, client) in clients.iter().enumerate() {
        let lock = client.fenced_lock(&name)?;
        let client = client.clone();
        let (shared, resource) = (shared.clone(), resource.clone());
        let hold = Duration::from_millis(args.hold_ms);
        let while_held = args.failover_while_held;
        tasks.push(tokio::spawn(async move {
            let mut section = 0u64;
            while Instant::now() < deadline && !journal(&shared).failover_case_done() {
                let options = AcquireOptions::new().wait(Duration::from_secs(2));
                match lock.acquire(options).await {
                    Ok(true) => {}
                    Ok(false) => continue,
                    Err(err) => {
                        {
                            let mut journal = journal(&shared);
                            if err.kind() == ErrorKind::NotSynced {
                                journal.round.not_synced += 1;
                                journal.answered = true;
                            } else {
                                journal.round.acquire_errors += 1;
                            }
                        }
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        continue;
                    }
                }
                section += 1;
                let token = lock.token().unwrap_or(0);
                enter(&shared, worker, section, token);
                tokio::time::sleep(hold).await;
                if while_held {
                    stay_while_across_the_failover(&shared, worker, section, &lock, deadline).await;
                }
                match client
                    .fenced_set(&resource, worker.to_string(), token)
                    .await
                {
                    Err(err) if err.kind() == ErrorKind::StaleToken => {
                        journal(&shared).round.stale_writes_refused += 1
                    }
                    _ => {}
                }
                leave(&shared, worker, section, lock.is_lost());
                if lock.release().await.is_err() {
                    journal(&shared).round.release_errors += 1;
                }
            }
        }));
    }
    let mut failover = None;
    let mut failover_completed_after = None;
    if args.failover {
        // Who serves the lock before: the failover has completed once that changed.
        let mut primary_before = None;
        while primary_before.is_none() && Instant::now() < deadline {
            primary_before = primary_address(&args.redis, &name).await;
            if primary_before.is_none() {
                tokio::time::sleep(POLL).await;
            }
        }
        let primary_before = primary_before.ok_or_else(|| {
            CliError::Connection("--failover: the deployment never named its primary".into())
        })?;
        if args.failover_while_held {
            while !journal(&shared).answered && Instant::now() < deadline {
                tokio::time::sleep(POLL).await;
            }
            let mut journal = journal(&shared);
            let open = journal.inside.iter().map(|(w, s, _)| (*w, *s)).collect();
            journal.across_failover = Some(open);
        } else {
            let after = args
                .failover_after
                .unwrap_or(args.duration / 3.0)
                .clamp(0.0, args.duration);
            tokio::time::sleep(Duration::from_secs_f64(after)).await;
        }
        failover = Some(
            trigger_failover(&args.redis, &name)
                .await
                .map_err(|err| CliError::Connection(format!("--failover: {err}")))?,
        );
        // The new primary in place: the address that serves the lock changed.
        while Instant::now() < deadline {
            let primary = primary_address(&args.redis, &name).await;
            if primary.is_some_and(|primary| primary != primary_before) {
                failover_completed_after = Some(started.elapsed().as_secs_f64());
                let mut journal = journal(&shared);
                journal.failover_completed = true;
                journal.round.sections_across_failover = journal
                    .across_failover
                    .as_ref()
                    .map_or(0, |open| open.len() as u64);
                break;
            }
            tokio::time::sleep(POLL).await;
        }
    }
    for task in tasks {
        let _ = task.await;
    }
    // Best effort: the keys this round wrote.
    let _ = clients[0].lock(&name)?.force_unlock().await;
    let _ = clients[0].fenced_delete(&resource, i64::MAX).await;
    for client in &clients {
        client.shutdown().await;
    }
    let mut journal = journal(&shared);
    let overlaps = std::mem::take(&mut journal.overlaps);
    let mut round = journal.round.clone();
    round.sync_replicas = sync_replicas;
    round.workers = args.workers;
    round.seconds = started.elapsed().as_secs_f64();
    round.failover = failover;
    round.failover_completed_after = failover_completed_after;
    round.overlaps = overlaps.len() as u64;
    round.overlaps_told_lost = overlaps
        .iter()
        .filter(|(worker, section, _, _)| journal.left_lost.contains(&(*worker, *section)))
        .count() as u64;
    round.overlaps_fencing_orders = overlaps
        .iter()
        .filter(|(_, _, earlier, newcomer)| earlier < newcomer)
        .count() as u64;
    Ok(round)
}

/// How often the round looks at the failover's progress and a held section's conditions.
const POLL: Duration = Duration::from_millis(20);

/// With --failover-while-held, a section waits for the failover to start (the round's first
/// one is then open), and one open when it started stays open until the failover completed,
/// another worker entered (the overlap the case is about, or none) and this holder's lost
/// signal fired, or the run's time ran out.
async fn stay_while_across_the_failover(
    shared: &Shared,
    worker: usize,
    section: u64,
    lock: &polylock::Lock,
    deadline: Instant,
) {
    let across = |journal: &Journal| {
        journal
            .across_failover
            .as_ref()
            .is_some_and(|open| open.contains(&(worker, section)))
    };
    while Instant::now() < deadline {
        {
            let mut journal = journal(shared);
            if journal.across_failover.is_some() && !across(&journal) {
                return;
            }
            let other_entered = journal.inside.iter().any(|(w, _, _)| *w != worker);
            if journal.failover_completed && other_entered && lock.is_lost() {
                if let Some(open) = journal.across_failover.as_mut() {
                    open.remove(&(worker, section));
                }
                return;
            }
        }
        tokio::time::sleep(POLL).await;
    }
    if let Some(open) = journal(shared).across_failover.as_mut() {
        open.remove(&(worker, section));
    }
}

fn enter(shared: &Shared, worker: usize, section: u64, token: i64) {
    let mut journal = journal(shared);
    journal.round.acquisitions += 1;
    journal.answered = true;
    let earlier: Vec<(usize, u64, i64, i64)> = journal
        .inside
        .iter()
        .map(|(other, their_section, their_token)| (*other, *their_section, *their_token, token))
        .collect();
    journal.overlaps.extend(earlier);
    journal.inside.push((worker, section, token));
}

fn leave(shared: &Shared, worker: usize, section: u64, lost: bool) {
    let mut journal = journal(shared);
    journal
        .inside
        .retain(|(w, s, _)| (*w, *s) != (worker, section));
    if lost {
        journal.round.lost += 1;
        journal.left_lost.insert((worker, section));
    }
}

/// The deployment a URL names, for `--failover`: Sentinel's hosts and master, or a cluster.
pub(crate) enum FailoverTarget {
    Sentinel { hosts: Vec<String>, master: String },
    Cluster { hosts: Vec<String> },
}

pub(crate) fn failover_target(url: &str) -> Option<FailoverTarget> {
    let (scheme, rest) = url.split_once("://")?;
    let rest = rest.rsplit_once('@').map_or(rest, |(_, hosts)| hosts);
    match scheme {
        "redis+sentinel" | "rediss+sentinel" => {
            let mut parts = rest.split('/');
            let hosts = parts.next()?.split(',').map(str::to_owned).collect();
            let master = parts.next().filter(|m| !m.is_empty())?.to_owned();
            Some(FailoverTarget::Sentinel { hosts, master })
        }
        "redis+cluster" | "rediss+cluster" => Some(FailoverTarget::Cluster {
            hosts: rest
                .trim_end_matches('/')
                .split(',')
                .map(str::to_owned)
                .collect(),
        }),
        _ => None,
    }
}

/// Starts a failover of the primary serving `name`; returns how.
async fn trigger_failover(url: &str, name: &str) -> Result<String, String> {
    match failover_target(url) {
        Some(FailoverTarget::Sentinel { hosts, master }) => {
            let mut last = String::from("no sentinel answered");
            for host in hosts {
                let reply =
                    command_at(&host, redis::cmd("SENTINEL").arg("FAILOVER").arg(&master)).await;
                match reply {
                    Ok(_) => return Ok(format!("SENTINEL FAILOVER {master} via {host}")),
                    Err(err) => last = format!("{host}: {err}"),
                }
            }
            Err(last)
        }
        Some(FailoverTarget::Cluster { hosts }) => {
            let replica = replica_serving(&hosts, name).await?;
            command_at(&replica, redis::cmd("CLUSTER").arg("FAILOVER"))
                .await
                .map_err(|err| format!("{replica}: {err}"))?;
            Ok(format!("CLUSTER FAILOVER on replica {replica}"))
        }
        None => Err("not a Sentinel or cluster URL".into()),
    }
}

/// The address of the primary serving `name` as the deployment tells it now (Sentinel's
/// `GET-MASTER-ADDR-BY-NAME`, the cluster's `CLUSTER NODES`), if one answers.
async fn primary_address(url: &str, name: &str) -> Option<String> {
    match failover_target(url)? {
        FailoverTarget::Sentinel { hosts, master } => {
            for host in hosts {
                let mut command = redis::cmd("SENTINEL");
                command.arg("GET-MASTER-ADDR-BY-NAME").arg(&master);
                if let Ok(redis::Value::Array(parts)) = command_at(&host, &mut command).await {
                    let text: Vec<String> = parts
                        .iter()
                        .filter_map(|part| redis::from_redis_value_ref::<String>(part).ok())
                        .collect();
                    return Some(text.join(":"));
                }
            }
            None
        }
        FailoverTarget::Cluster { hosts } => {
            let (slot, nodes) = slot_and_nodes(&hosts, name).await.ok()?;
            primary_in(&nodes, slot)
        }
    }
}

/// One command on a fresh connection to `host:port` (`user:password@host:port` to log in).
pub(crate) async fn command_at(
    host: &str,
    command: &mut redis::Cmd,
) -> Result<redis::Value, String> {
    let client = redis::Client::open(format!("redis://{host}")).map_err(|err| err.to_string())?;
    let config = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Some(Duration::from_secs(5)))
        .set_response_timeout(Some(Duration::from_secs(5)));
    let mut connection = client
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .map_err(|err| err.to_string())?;
    command
        .query_async(&mut connection)
        .await
        .map_err(|err| err.to_string())
}

/// A healthy replica of the cluster primary serving `key`, asked from the first seed node that
/// answers.
async fn replica_serving(hosts: &[String], key: &str) -> Result<String, String> {
    let (slot, nodes) = slot_and_nodes(hosts, key).await?;
    replica_in(&nodes, slot).ok_or_else(|| {
        format!("the primary serving slot {slot} has no healthy replica to fail over to")
    })
}

/// The slot of `key` and the `CLUSTER NODES` listing, from the first seed node that answers.
async fn slot_and_nodes(hosts: &[String], key: &str) -> Result<(i64, String), String> {
    let mut last = String::from("no seed node answered");
    for host in hosts {
        let slot = match command_at(host, redis::cmd("CLUSTER").arg("KEYSLOT").arg(key)).await {
            Ok(redis::Value::Int(slot)) => slot,
            Ok(other) => return Err(format!("{host}: CLUSTER KEYSLOT replied {other:?}")),
            Err(err) => {
                last = format!("{host}: {err}");
                continue;
            }
        };
        let nodes = match command_at(host, redis::cmd("CLUSTER").arg("NODES")).await {
            Ok(redis::Value::BulkString(text)) => String::from_utf8_lossy(&text).into_owned(),
            Ok(redis::Value::VerbatimString { text, .. }) => text,
            Ok(other) => return Err(format!("{host}: CLUSTER NODES replied {other:?}")),
            Err(err) => {
                last = format!("{host}: {err}");
                continue;
            }
        };
        return Ok((slot, nodes));
    }
    Err(last)
}

/// A `CLUSTER NODES` listing, a node's fields per line.
fn node_lines(nodes: &str) -> Vec<Vec<&str>> {
    nodes
        .lines()
        .map(|line| line.split(' ').collect())
        .collect()
}

/// Of `lines`, the primary (not failed) that serves `slot`.
fn primary_line<'a>(lines: &'a [Vec<&'a str>], slot: i64) -> Option<&'a Vec<&'a str>> {
    let serves = |fields: &Vec<&str>| {
        fields.iter().skip(8).any(|range| {
            let (low, high) = range.split_once('-').unwrap_or((range, range));
            matches!((low.parse::<i64>(), high.parse::<i64>()), (Ok(l), Ok(h)) if l <= slot && slot <= h)
        })
    };
    lines.iter().find(|fields| {
        fields.len() > 8
            && fields[2].contains("master")
            && !fields[2].contains("fail")
            && serves(fields)
    })
}

/// A node's `host:port` (without the cluster bus port).
fn node_address(fields: &[&str]) -> String {
    fields[1].split('@').next().unwrap_or(fields[1]).to_owned()
}

/// In a `CLUSTER NODES` listing: the address of the primary of `slot`.
fn primary_in(nodes: &str, slot: i64) -> Option<String> {
    let lines = node_lines(nodes);
    primary_line(&lines, slot).map(|fields| node_address(fields))
}

/// In a `CLUSTER NODES` listing: the address of a healthy replica of the primary of `slot`.
fn replica_in(nodes: &str, slot: i64) -> Option<String> {
    let lines = node_lines(nodes);
    let primary = primary_line(&lines, slot)?;
    lines
        .iter()
        .find(|fields| {
            fields.len() > 3
                && fields[3] == primary[0]
                && fields[2].contains("slave")
                && !fields[2].contains("fail")
        })
        .map(|fields| node_address(fields))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_replica_of_the_slots_primary_is_found_in_cluster_nodes() {
        let nodes = "a1 127.0.0.1:7000@17000 myself,master - 0 0 1 connected 0-5460\n\
                     b2 127.0.0.1:7001@17001 master - 0 0 2 connected 5461-10922\n\
                     c3 127.0.0.1:7003@17003 slave a1 0 0 1 connected\n\
                     d4 127.0.0.1:7004@17004 slave,fail b2 0 0 2 connected\n";
        assert_eq!(replica_in(nodes, 42).as_deref(), Some("127.0.0.1:7003"));
        assert_eq!(
            replica_in(nodes, 6000),
            None,
            "a failed replica is not chosen"
        );
        assert_eq!(replica_in(nodes, 16000), None, "nobody serves that slot");
        assert_eq!(primary_in(nodes, 42).as_deref(), Some("127.0.0.1:7000"));
        assert_eq!(primary_in(nodes, 6000).as_deref(), Some("127.0.0.1:7001"));
        assert_eq!(primary_in(nodes, 16000), None);
    }

    #[test]
    fn failover_needs_a_sentinel_or_cluster_url() {
        assert!(failover_target("redis://127.0.0.1:6379").is_none());
        let Some(FailoverTarget::Sentinel { hosts, master }) =
            failover_target("redis+sentinel://:pw@h1:26379,h2:26379/mymaster/2")
        else {
            panic!("not sentinel");
        };
        assert_eq!(hosts, ["h1:26379", "h2:26379"]);
        assert_eq!(master, "mymaster");
        assert!(matches!(
            failover_target("redis+cluster://h1:7000,h2:7001"),
            Some(FailoverTarget::Cluster { hosts }) if hosts.len() == 2
        ));
    }
}
