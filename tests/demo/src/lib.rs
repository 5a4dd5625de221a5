//! The cross-language demo that `polylock demo` runs: worker processes in Rust, Python and Node
//! lock against each other on one Redis, in a scenario that checks one invariant: the ticket
//! sale (`ticket_sale`) or one of the others (`scenarios`). `launchers` finds which languages
//! can run here, `workers` runs them; `embedded` is the private redis-server started without
//! `--redis`. The Python and Node workers are `workers/worker.py` and `workers/worker.mjs` of
//! this crate, found in the repository checkout (`POLYLOCK_REPO`, else where this crate was
//! built from).
//!
//! A binary that calls [`run`] runs the Rust worker too, as its hidden subcommand
//! [`WorkerCommand`] (`demo-worker`): the demo starts that binary again for each Rust worker.
//! Two binaries do: `polylock` (cli/) and this crate's own `polylock-demo`.

use clap::Args;

use crate::embedded::EmbeddedRedis;
use polylock_cli_common::error::{CliError, CliResult};
use polylock_cli_common::raw;

mod embedded;
mod launchers;
mod scenarios;
mod signals;
mod ticket_sale;
pub mod worker;
mod workers;

use launchers::{chosen_languages, launcher, repo_root};

/// The Rust worker's hidden subcommand, flattened into the subcommands of a binary that runs
/// the demo (see the crate's documentation).
#[derive(clap::Subcommand)]
pub enum WorkerCommand {
    /// One demo worker process (started by `polylock demo`).
    #[command(name = WORKER_COMMAND, hide = true)]
    DemoWorker(worker::WorkerArgs),
}

/// The name the demo starts its Rust workers with: `<this binary> demo-worker ARGS`.
const WORKER_COMMAND: &str = "demo-worker";

impl WorkerCommand {
    pub fn run(self) -> CliResult<()> {
        match self {
            WorkerCommand::DemoWorker(args) => worker::run(args),
        }
    }
}

#[derive(Args)]
#[command(after_help = "Examples:
  polylock demo                                # all available languages, 100 tickets
  polylock demo --tickets 500 --workers 3      # bigger sale
  polylock demo --fair                         # fair lock: buyers served in arrival order
  polylock demo --no-lock                      # the same sale without the lock: oversold
  polylock demo --languages rust,python --redis redis://127.0.0.1:6379
  polylock demo --scenario cache-rebuild       # a hot key expires: exactly one rebuild each time
  polylock demo --scenario read-write          # readers share, writers exclude: no torn reads
  polylock demo --scenario segmented-stock --segments 8   # N locks vs one: same sale, faster
  polylock demo --scenario fencing             # a paused holder's late write is refused
  polylock demo --scenario fencing --no-fencing            # ... or overwrites: the lost update

Scenarios (each checks an invariant; exit 1 when it does not hold):
  ticket-sale      workers buy --tickets under one lock: exactly N sold (--no-lock, --fair)
  cache-rebuild    the hot key expires --rounds times under load; exactly one worker rebuilds it
                   from a slow database (--slow-ms), the others wait on the lock, then read it
                   (--no-lock: the stampede)
  read-write       --ops reads and writes of a cache key and a database key under a read-write
                   lock: zero disagreements; shows reader concurrency and writers' wait (--no-lock)
  segmented-stock  --tickets units in --segments keys, each with its own lock, then the same sale
                   under one global lock: both sell exactly the stock; prints the speed-up
  fencing          a holder with a --lease-ms lease pauses past it; another takes the fenced lock
                   and writes with fenced_set; the late write is refused (StaleToken);
                   --no-fencing: plain lock and SET, the late write overwrites (lost update)

Without --redis (or POLYLOCK_REDIS_URL) a private redis-server is started on a free loopback port
and stopped at the end. Python workers need the `polylock` package importable (POLYLOCK_PYTHON,
else python/.venv/bin/python, else python3); Node workers need node/index.js built
(`make build-node`). Languages that are not available (or whose package lacks the calls the
scenario needs) are skipped with a message.")]
pub struct DemoArgs {
    /// The global --redis URL (filled in by the binary's main); none: a private redis-server.
    #[arg(skip)]
    pub redis: Option<String>,
    /// Tickets for sale.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub tickets: u64,
    /// Worker processes per language.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(1..=64))]
    pub workers: u64,
    /// Comma-separated languages: rust, python, node. Default: all available.
    #[arg(long, value_delimiter = ',')]
    pub languages: Option<Vec<String>>,
    /// Use the fair lock (waiters served in arrival order).
    #[arg(long, conflicts_with = "no_lock")]
    pub fair: bool,
    /// Sell without the lock, to see the oversell.
    #[arg(long)]
    pub no_lock: bool,
    /// The scenario: ticket-sale (default), cache-rebuild, read-write, segmented-stock, fencing.
    #[arg(long, value_enum, default_value_t = Scenario::TicketSale)]
    pub scenario: Scenario,
    /// The lock name (the scenario's keys live under NAME:...). Default: polylock-demo:tickets
    /// for the ticket sale, polylock-demo:<scenario> for the others.
    #[arg(long)]
    pub lock_name: Option<String>,
    /// segmented-stock: the number of segments (each its own key and lock).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub segments: u64,
    /// cache-rebuild: how many times the hot key expires.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub rounds: u64,
    /// read-write: reads and writes in all, shared by every worker.
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub ops: u64,
    /// cache-rebuild: milliseconds the slow "database" takes to answer a rebuild.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u64).range(0..=60_000))]
    pub slow_ms: u64,
    /// fencing: the first holder's fixed lease in milliseconds (it then pauses three of them).
    #[arg(long, default_value_t = 300, value_parser = clap::value_parser!(u64).range(10..=60_000))]
    pub lease_ms: u64,
    /// fencing: a plain lock and a plain SET instead, to see the lost update.
    #[arg(long)]
    pub no_fencing: bool,
    /// Milliseconds each purchase spends between reading and writing the stock.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(0..=10_000))]
    pub think_ms: u64,
    /// Give up (and fail) after this many seconds.
    #[arg(long, default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..))]
    pub timeout: u64,
}

/// What the workers do: see `polylock demo --help`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Scenario {
    TicketSale,
    CacheRebuild,
    ReadWrite,
    SegmentedStock,
    Fencing,
}

impl Scenario {
    pub fn label(self) -> &'static str {
        match self {
            Scenario::TicketSale => "ticket-sale",
            Scenario::CacheRebuild => "cache-rebuild",
            Scenario::ReadWrite => "read-write",
            Scenario::SegmentedStock => "segmented-stock",
            Scenario::Fencing => "fencing",
        }
    }

    /// The calls a binding must have for this scenario (besides `lock`): Python, Node.
    fn needs(self, fair: bool) -> (&'static [&'static str], &'static [&'static str]) {
        match self {
            Scenario::TicketSale if fair => (&["fair_lock"], &["fairLock"]),
            Scenario::ReadWrite => (&["read_write_lock"], &["readWriteLock"]),
            Scenario::Fencing => (&["fenced_lock", "fenced_set"], &["fencedLock", "fencedSet"]),
            _ => (&[], &[]),
        }
    }
}

/// p-th percentile (0..=100) by nearest rank.
fn percentile(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

pub fn run(args: DemoArgs) -> CliResult<()> {
    signals::install();
    let repo = repo_root();
    let (languages, explicit) = chosen_languages(&args)?;
    check_options(&args)?;
    // Check the URL before probing or starting anything.
    if let Some(url) = &args.redis {
        raw::parse_url(url)?;
    }
    let mut launchers = Vec::new();
    for language in languages {
        match launcher(language, &repo, args.scenario, args.fair) {
            Ok(launcher) => launchers.push(launcher),
            // A language asked for by name must run; by default the demo uses what it finds.
            Err(why) if explicit => {
                return Err(CliError::Failed(format!(
                    "{language} was requested with --languages but cannot run: {why}"
                )))
            }
            Err(why) => eprintln!("polylock demo: skipping {language}: {why}"),
        }
    }
    if launchers.is_empty() {
        return Err(CliError::Failed(
            "no language can run the demo (see the messages above)".into(),
        ));
    }
    let (url, embedded) = match &args.redis {
        Some(url) => (url.clone(), None),
        None => {
            let server = EmbeddedRedis::start()?;
            println!(
                "started a private redis-server on 127.0.0.1:{} (stopped at the end)",
                server.port()
            );
            (server.url(), Some(server))
        }
    };
    let lock_name = args
        .lock_name
        .clone()
        .unwrap_or_else(|| match args.scenario {
            Scenario::TicketSale => "polylock-demo:tickets".to_owned(),
            scenario => format!("polylock-demo:{}", scenario.label()),
        });
    let result = match args.scenario {
        Scenario::TicketSale => {
            let stock_key = format!("{lock_name}:stock");
            ticket_sale::sell(&args, &launchers, &url, &lock_name, &stock_key)
        }
        _ => scenarios::run(&args, &launchers, &url, &lock_name),
    };
    if signals::interrupted() || matches!(result, Err(CliError::Interrupted)) {
        eprintln!("\npolylock demo: interrupted; workers and the private redis-server stopped");
        drop(embedded);
        return Err(CliError::Interrupted);
    }
    if embedded.is_some() {
        println!("stopped the private redis-server");
    }
    drop(embedded);
    result
}

/// Options that only some scenarios take.
fn check_options(args: &DemoArgs) -> CliResult<()> {
    let scenario = args.scenario;
    let refuse = |option: &str, takes: &str| {
        Err(CliError::Usage(format!(
            "{option} does not apply to --scenario {}; {takes}",
            scenario.label()
        )))
    };
    if args.fair && scenario != Scenario::TicketSale {
        return refuse("--fair", "only the ticket sale takes it");
    }
    if args.no_lock && matches!(scenario, Scenario::SegmentedStock | Scenario::Fencing) {
        return refuse(
            "--no-lock",
            "ticket-sale, cache-rebuild and read-write take it (fencing: --no-fencing)",
        );
    }
    if args.no_fencing && scenario != Scenario::Fencing {
        return refuse("--no-fencing", "only the fencing scenario takes it");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::percentile;

    #[test]
    fn nearest_rank_percentiles() {
        let values = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0];
        assert_eq!(percentile(&values, 50.0), Some(5.0));
        assert_eq!(percentile(&values, 99.0), Some(10.0));
        assert_eq!(percentile(&[], 50.0), None);
    }
}
