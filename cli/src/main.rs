//! `polylock`: inspect, force-unlock and watch polylock/Redisson locks, and a cross-language
//! ticket-sale demo.

mod demo;
mod embedded;
mod error;
mod inspect;
mod raw;
mod signals;
mod watch;
mod worker;

use clap::{Parser, Subcommand};

const DEFAULT_URL: &str = "redis://127.0.0.1:6379";

#[derive(Parser)]
#[command(
    name = "polylock",
    version,
    about = "Distributed locks on Redis, wire-compatible with Redisson: inspect, force-unlock, watch, demo",
    after_help = "Examples:
  polylock demo                          # ticket sale with Rust, Python and Node workers
  polylock inspect orders:42             # who holds the lock, for how long, who waits
  polylock force-unlock orders:42 --yes  # delete a lock whoever holds it
  polylock watch 'orders:*'              # live table of held locks

Every command takes --redis URL (or POLYLOCK_REDIS_URL).
Exit codes: 0 ok, 1 failed (e.g. the demo sold the wrong number), 2 bad usage or URL,
3 Redis unreachable or failing, 4 the name holds a key that is not a lock, 130 interrupted."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Scenarios (ticket sale, cache rebuild, read-write, segmented stock, fencing) with workers in several languages.
    Demo(demo::DemoArgs),
    /// Shows what is under a name: kind, holders, lease, fair queue, read-write mode, permits, token.
    Inspect(inspect::InspectArgs),
    /// Deletes a lock whoever holds it, and wakes a waiter.
    ForceUnlock(inspect::ForceUnlockArgs),
    /// A live table of the held locks and semaphores whose names match a pattern.
    Watch(watch::WatchArgs),
    /// One demo worker process (started by `polylock demo`).
    #[command(hide = true)]
    DemoWorker(worker::WorkerArgs),
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Demo(args) => demo::run(args),
        Command::Inspect(args) => inspect::run_inspect(args),
        Command::ForceUnlock(args) => inspect::run_force_unlock(args),
        Command::Watch(args) => watch::run(args),
        Command::DemoWorker(args) => worker::run(args),
    };
    if let Err(err) = result {
        eprintln!("polylock: {err}");
        std::process::exit(err.exit_code());
    }
}

/// Runs a future to completion on the core's runtime (the CLI is synchronous otherwise).
pub(crate) fn block_on<F: std::future::Future>(future: F) -> F::Output {
    polylock::runtime().block_on(future)
}
