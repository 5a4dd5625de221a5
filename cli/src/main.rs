//! `polylock`: inspect, force-unlock and watch polylock/Redisson locks, and a cross-language
//! ticket-sale demo (`polylock demo`: the `polylock-demo` crate, tests/demo/).

mod check;
mod client_records;
mod console;
mod console_permissions;
mod inspect;
mod lock_rates;
mod lock_scan;
mod permissions;
mod watch;

use clap::{CommandFactory, Parser, Subcommand};
use polylock_cli_common::{exit_on_error, RedisOption};

const DEFAULT_URL: &str = "redis://127.0.0.1:6379";

#[derive(Parser)]
#[command(
    name = "polylock",
    version,
    about = "Distributed locks on Redis, wire-compatible with Redisson: inspect, force-unlock, watch, console, demo",
    after_help = "Examples:
  polylock demo                          # ticket sale with Rust, Python and Node workers
  polylock inspect orders:42             # who holds the lock, for how long, who waits
  polylock force-unlock orders:42 --yes  # delete a lock whoever holds it
  polylock watch 'orders:*'              # live table of held locks
  polylock console                       # the same, live in a browser: http://127.0.0.1:7474/
  polylock check --failover -u redis+sentinel://h:26379/mymaster  # safety self-test
  polylock check --permissions --prefix app: -u redis://app:pw@h:6379  # what this ACL user lacks

Every command takes --redis URL (also -u, or POLYLOCK_REDIS_URL; default
redis://127.0.0.1:6379, and for the demo a private redis-server), and --tls-ca FILE (or
POLYLOCK_TLS_CA) for a rediss:// server with a private CA.
Shell completions: polylock completions bash|zsh|fish|elvish|powershell.
Exit codes: 0 ok, 1 failed (e.g. the demo sold the wrong number), 2 bad usage or URL,
3 Redis unreachable or failing (also: a command refused by ACL), 4 the name holds a key that is not a lock, 130 interrupted."
)]
struct Cli {
    #[command(flatten)]
    global: RedisOption,
    /// A CA bundle (PEM file) to check a rediss:// server's certificate with, for a server
    /// whose certificate a private CA signed (the default trusts the public web roots only).
    #[arg(long, global = true, env = "POLYLOCK_TLS_CA", value_name = "FILE")]
    tls_ca: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Scenarios (ticket sale, cache rebuild, read-write, segmented stock, fencing) with workers in several languages.
    Demo(polylock_demo::DemoArgs),
    /// Shows what is under a name: kind, holders, lease, fair queue, read-write mode, permits, token.
    Inspect(inspect::InspectArgs),
    /// Deletes a lock whoever holds it, and wakes a waiter.
    ForceUnlock(inspect::ForceUnlockArgs),
    /// A live table of the held locks and semaphores whose names match a pattern.
    Watch(watch::WatchArgs),
    /// The locks, their holders and queues, the clients and a timeline, live in a browser.
    Console(console::ConsoleArgs),
    /// A safety self-test of your deployment: workers hammer one lock, optionally through a failover, and overlaps are reported.
    Check(check::CheckArgs),
    /// Prints a completion script for a shell, e.g. `polylock completions bash > /etc/bash_completion.d/polylock`.
    Completions { shell: clap_complete::Shell },
    // The demo's Rust worker, hidden (`polylock demo-worker`): the demo starts this binary again
    // for each.
    #[command(flatten)]
    DemoWorker(polylock_demo::WorkerCommand),
}

fn main() {
    let cli = Cli::parse();
    if let Some(ca) = &cli.tls_ca {
        polylock_cli_common::raw::trust_tls_ca(ca);
    }
    let url = cli
        .global
        .redis
        .clone()
        .unwrap_or_else(|| DEFAULT_URL.to_owned());
    let result = match cli.command {
        Command::Demo(mut args) => {
            args.redis = cli.global.redis;
            polylock_demo::run(args)
        }
        Command::Inspect(mut args) => {
            args.redis = url;
            inspect::run_inspect(args)
        }
        Command::ForceUnlock(mut args) => {
            args.redis = url;
            inspect::run_force_unlock(args)
        }
        Command::Console(mut args) => {
            args.redis = url;
            console::run(args)
        }
        Command::Check(mut args) => {
            args.redis = url;
            check::run(args)
        }
        Command::Watch(mut args) => {
            args.redis = url;
            watch::run(args)
        }
        Command::Completions { shell } => {
            clap_complete::generate(
                shell,
                &mut Cli::command(),
                "polylock",
                &mut std::io::stdout(),
            );
            Ok(())
        }
        Command::DemoWorker(worker) => worker.run(),
    };
    exit_on_error(result);
}

/// Seconds with one decimal, for tables: `29.4 s`.
pub(crate) fn seconds(ms: u64) -> String {
    format!("{:.1} s", ms as f64 / 1000.0)
}
