//! `polylock demo`: a ticket sale. Worker processes in Rust, Python and Node buy tickets at the
//! same time; each purchase reads the stock and writes it back minus one under one lock. With
//! the lock exactly N tickets are sold; with `--no-lock` the lost updates oversell.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::Args;

use crate::block_on;
use crate::embedded::EmbeddedRedis;
use crate::error::{CliError, CliResult};
use crate::raw;
use crate::signals;

#[path = "demo_scenarios.rs"]
mod scenarios;

const LANGUAGES: [&str; 3] = ["rust", "python", "node"];
const PROBE_TIMEOUT: Duration = Duration::from_secs(30);
const READY_TIMEOUT: Duration = Duration::from_secs(60);

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
    /// The global --redis URL (filled in by main); none: a private redis-server.
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

/// How to start one language's worker.
pub(crate) struct Launcher {
    pub(crate) language: &'static str,
    program: PathBuf,
    args: Vec<String>,
}

/// The repository root: `POLYLOCK_REPO`, else where this crate was built from.
fn repo_root() -> PathBuf {
    if let Some(repo) = std::env::var_os("POLYLOCK_REPO") {
        return PathBuf::from(repo);
    }
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

/// Runs a probe command with a bound; Ok(()) when it exits 0, else what it printed.
fn probe(program: &Path, args: &[&str]) -> Result<(), String> {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|err| format!("cannot run {}: {err}", program.display()))?;
    let deadline = Instant::now() + PROBE_TIMEOUT;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                if status.success() {
                    return Ok(());
                }
                let mut stderr = String::new();
                if let Some(mut pipe) = child.stderr.take() {
                    let _ = pipe.read_to_string(&mut stderr);
                }
                let last = stderr.lines().rev().find(|line| !line.trim().is_empty());
                return Err(last.unwrap_or("failed").trim().to_owned());
            }
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "{} did not answer in {PROBE_TIMEOUT:?}",
                    program.display()
                ));
            }
        }
    }
}

/// A worker script of this repository; the binary finds it through `POLYLOCK_REPO` when it
/// runs away from the checkout it was built in.
fn worker_script(repo: &Path, file: &str) -> Result<PathBuf, String> {
    let script = repo.join("cli/workers").join(file);
    if script.is_file() {
        Ok(script)
    } else {
        Err(format!(
            "{} not found; set POLYLOCK_REPO to the polylock repository",
            script.display()
        ))
    }
}

fn python_program(repo: &Path) -> PathBuf {
    if let Some(python) = std::env::var_os("POLYLOCK_PYTHON") {
        return PathBuf::from(python);
    }
    let venv = repo.join("python/.venv/bin/python");
    if venv.is_file() {
        venv
    } else {
        PathBuf::from("python3")
    }
}

/// The worker launcher of `language`, or why it cannot run here.
fn launcher(
    language: &'static str,
    repo: &Path,
    scenario: Scenario,
    fair: bool,
) -> Result<Launcher, String> {
    let (python_needs, node_needs) = scenario.needs(fair);
    match language {
        "rust" => {
            let program = std::env::current_exe()
                .map_err(|err| format!("cannot find the polylock binary: {err}"))?;
            Ok(Launcher {
                language,
                program,
                args: vec!["demo-worker".into()],
            })
        }
        "python" => {
            let program = python_program(repo);
            let mut check = "import polylock".to_owned();
            for call in python_needs {
                check.push_str(&format!(
                    "; assert hasattr(polylock.Client, '{call}'), \
                     'this polylock Python package has no Client.{call} yet'"
                ));
            }
            probe(&program, &["-c", &check]).map_err(|why| {
                format!(
                    "`{} -c \"import polylock\"` failed ({why}); build it with `make build-python` \
                     or set POLYLOCK_PYTHON to an interpreter that has it",
                    program.display()
                )
            })?;
            let script = worker_script(repo, "worker.py")?;
            Ok(Launcher {
                language,
                program,
                args: vec![script.display().to_string()],
            })
        }
        "node" => {
            let package = repo.join("node/index.js");
            if !package.is_file() {
                return Err(format!(
                    "{} not found; build it with `make build-node`",
                    package.display()
                ));
            }
            let program = PathBuf::from("node");
            let mut check = format!(
                "const {{ Client }} = require({:?});",
                package.display().to_string()
            );
            for call in node_needs {
                check.push_str(&format!(
                    " if (typeof Client.prototype.{call} !== 'function') \
                     throw new Error('this polylock Node package has no Client.{call} yet');"
                ));
            }
            probe(&program, &["-e", &check]).map_err(|why| {
                format!(
                    "the Node package at {} does not load ({why}); build it with `make build-node`",
                    package.display()
                )
            })?;
            let script = worker_script(repo, "worker.mjs")?;
            Ok(Launcher {
                language,
                program,
                args: vec![script.display().to_string()],
            })
        }
        _ => Err(format!("unknown language '{language}'")),
    }
}

fn chosen_languages(args: &DemoArgs) -> CliResult<(Vec<&'static str>, bool)> {
    let Some(requested) = &args.languages else {
        return Ok((LANGUAGES.to_vec(), false));
    };
    let mut chosen = Vec::new();
    for language in requested {
        let language = language.trim().to_lowercase();
        let known = LANGUAGES
            .iter()
            .find(|known| **known == language)
            .ok_or_else(|| {
                CliError::Usage(format!(
                    "unknown language '{language}' in --languages; choose from rust, python, node \
                     (Kotlin workers are not part of the demo)"
                ))
            })?;
        if !chosen.contains(known) {
            chosen.push(*known);
        }
    }
    if chosen.is_empty() {
        return Err(CliError::Usage("--languages is empty".into()));
    }
    Ok((chosen, true))
}

/// One line from a worker, or its end.
enum Event {
    Line(usize, String),
    Closed(usize),
}

struct Worker {
    language: &'static str,
    child: Child,
    stdin: Option<ChildStdin>,
    stderr: Arc<Mutex<String>>,
    ready: bool,
    closed: bool,
    sold: u64,
    reported_done: bool,
}

/// Kills the workers still running when the demo ends early (error, Ctrl-C).
struct Workers(Vec<Worker>);

impl Drop for Workers {
    fn drop(&mut self) {
        for worker in &mut self.0 {
            if let Ok(None) = worker.child.try_wait() {
                let _ = worker.child.kill();
            }
            let _ = worker.child.wait();
        }
    }
}

fn spawn_worker(
    index: usize,
    launcher: &Launcher,
    worker_args: &[String],
    events: &Sender<Event>,
) -> CliResult<Worker> {
    let mut command = Command::new(&launcher.program);
    command
        .args(&launcher.args)
        .args(worker_args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    signals::die_with_parent(&mut command);
    let mut child = command.spawn().map_err(|err| {
        CliError::Failed(format!(
            "cannot start the {} worker ({}): {err}",
            launcher.language,
            launcher.program.display()
        ))
    })?;
    let stdout = child.stdout.take();
    let stderr_pipe = child.stderr.take();
    let stdin = child.stdin.take();
    let sender = events.clone();
    std::thread::spawn(move || {
        if let Some(stdout) = stdout {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if sender.send(Event::Line(index, line)).is_err() {
                    return;
                }
            }
        }
        let _ = sender.send(Event::Closed(index));
    });
    let stderr = Arc::new(Mutex::new(String::new()));
    let collected = stderr.clone();
    std::thread::spawn(move || {
        if let Some(pipe) = stderr_pipe {
            for line in BufReader::new(pipe).lines() {
                let Ok(line) = line else { break };
                let mut text = collected.lock().unwrap_or_else(|p| p.into_inner());
                // Keep the tail only: enough to explain a failure.
                if text.len() > 8192 {
                    let cut = text.len() - 4096;
                    let cut = (cut..text.len())
                        .find(|at| text.is_char_boundary(*at))
                        .unwrap_or(0);
                    text.drain(..cut);
                }
                text.push_str(&line);
                text.push('\n');
            }
        }
    });
    Ok(Worker {
        language: launcher.language,
        child,
        stdin,
        stderr,
        ready: false,
        closed: false,
        sold: 0,
        reported_done: false,
    })
}

fn describe_failure(worker: &mut Worker, what: &str) -> CliError {
    let status = worker
        .child
        .try_wait()
        .ok()
        .flatten()
        .map_or_else(String::new, |status| format!(" ({status})"));
    let stderr = worker
        .stderr
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    let tail: Vec<&str> = stderr.lines().rev().take(8).collect();
    let tail: Vec<&str> = tail.into_iter().rev().collect();
    CliError::Failed(format!(
        "a {} worker {what}{status}{}",
        worker.language,
        if tail.is_empty() {
            String::new()
        } else {
            format!(":\n  {}", tail.join("\n  "))
        }
    ))
}

/// p-th percentile (0..=100) by nearest rank.
fn percentile(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

struct Sale {
    /// Per language: wait times in ms of every ticket sold.
    waits: BTreeMap<&'static str, Vec<f64>>,
}

/// One worker to start: its launcher and its own arguments.
pub(crate) struct Planned<'a> {
    pub launcher: &'a Launcher,
    pub args: Vec<String>,
}

/// What the workers of one run said.
pub(crate) struct Run {
    /// Every event but `ready`, with the language of the worker that sent it, in order.
    pub events: Vec<(&'static str, serde_json::Value)>,
    /// From `go` to the last worker's end.
    pub elapsed: Duration,
}

impl Run {
    /// The events named `name`.
    pub fn named<'a>(
        &'a self,
        name: &'a str,
    ) -> impl Iterator<Item = (&'static str, &'a serde_json::Value)> + 'a {
        self.events
            .iter()
            .filter(move |(_, event)| event["event"] == name)
            .map(|(language, event)| (*language, event))
    }
}

/// Something the parent does while the workers run (from `go` on), in its own thread.
pub(crate) type Driver = Box<dyn FnOnce() -> CliResult<()> + Send>;

fn run_sale(
    args: &DemoArgs,
    launchers: &[Launcher],
    url: &str,
    lock_name: &str,
    stock_key: &str,
) -> CliResult<(Sale, Vec<(&'static str, u64)>)> {
    let mode = if args.no_lock {
        "none"
    } else if args.fair {
        "fair"
    } else {
        "lock"
    };
    let worker_args = vec![
        url.to_owned(),
        lock_name.to_owned(),
        stock_key.to_owned(),
        mode.to_owned(),
        args.think_ms.to_string(),
    ];
    let mut plan = Vec::new();
    for launcher in launchers {
        for _ in 0..args.workers {
            plan.push(Planned {
                launcher,
                args: worker_args.clone(),
            });
        }
    }
    let run = run_workers(args, &plan, args.tickets, None)?;
    let mut sale = Sale {
        waits: launchers.iter().map(|l| (l.language, Vec::new())).collect(),
    };
    for (language, event) in run.named("sale") {
        if let Some(waits) = sale.waits.get_mut(language) {
            waits.push(event["wait_ms"].as_f64().unwrap_or(0.0));
        }
    }
    let per_language = launchers
        .iter()
        .map(|launcher| {
            let sold = sale.waits.get(launcher.language).map_or(0, Vec::len) as u64;
            (launcher.language, sold)
        })
        .collect();
    Ok((sale, per_language))
}

/// Starts the planned workers, says `go` once all are ready (and starts `driver`), collects
/// their events until every one has ended, and checks that each ended well. `total`: the
/// sales the progress line counts towards (0: it counts events).
pub(crate) fn run_workers(
    args: &DemoArgs,
    plan: &[Planned<'_>],
    total: u64,
    driver: Option<Driver>,
) -> CliResult<Run> {
    let (events, received): (Sender<Event>, Receiver<Event>) = mpsc::channel();
    let mut workers = Workers(Vec::new());
    for planned in plan {
        let index = workers.0.len();
        workers.0.push(spawn_worker(
            index,
            planned.launcher,
            &planned.args,
            &events,
        )?);
    }
    drop(events);
    let mut run = Run {
        events: Vec::new(),
        elapsed: Duration::ZERO,
    };
    let mut driver = driver;
    let mut driving: Option<std::thread::JoinHandle<CliResult<()>>> = None;
    let started = Instant::now();
    let mut went_at = started;
    let deadline = started + Duration::from_secs(args.timeout);
    let live = std::io::stderr().is_terminal();
    let mut last_progress = Instant::now();
    let mut went = false;
    let mut sold = 0u64;
    loop {
        if signals::interrupted() {
            return Err(CliError::Interrupted);
        }
        if Instant::now() > deadline {
            return Err(CliError::Failed(format!(
                "the {} did not finish within {} s (--timeout); {sold} sold so far",
                args.scenario.label(),
                args.timeout
            )));
        }
        if !went && !workers.0.iter().all(|w| w.ready) && started.elapsed() > READY_TIMEOUT {
            let late = workers.0.iter_mut().find(|w| !w.ready);
            if let Some(worker) = late {
                return Err(describe_failure(worker, "did not connect in time"));
            }
        }
        match received.recv_timeout(Duration::from_millis(50)) {
            Ok(Event::Line(index, line)) => {
                let worker = &mut workers.0[index];
                let message: serde_json::Value = match serde_json::from_str(&line) {
                    Ok(message) => message,
                    // Not protocol: a stray print from a library; keep it for diagnostics.
                    Err(_) => {
                        let mut text = worker.stderr.lock().unwrap_or_else(|p| p.into_inner());
                        text.push_str(&line);
                        text.push('\n');
                        continue;
                    }
                };
                match message["event"].as_str() {
                    Some("ready") => {
                        worker.ready = true;
                        continue;
                    }
                    Some("sale") => {
                        worker.sold += 1;
                        sold += 1;
                    }
                    Some("done") => worker.reported_done = true,
                    Some("error") => {
                        let text = message["message"]
                            .as_str()
                            .unwrap_or("unknown error")
                            .to_owned();
                        worker
                            .stderr
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .push_str(&text);
                    }
                    _ => {}
                }
                run.events.push((worker.language, message));
            }
            Ok(Event::Closed(index)) => {
                let worker = &mut workers.0[index];
                worker.closed = true;
                if !worker.ready {
                    let _ = worker.child.wait();
                    return Err(describe_failure(worker, "exited before it was ready"));
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break,
        }
        // Everyone connected: open the counter for all at once.
        if !went && workers.0.iter().all(|w| w.ready) {
            went = true;
            went_at = Instant::now();
            for worker in &mut workers.0 {
                // Closed right after `go`: nothing more is said, and no worker waits on it.
                if let Some(mut stdin) = worker.stdin.take() {
                    let _ = stdin.write_all(b"go\n").and_then(|()| stdin.flush());
                }
            }
            if let Some(driver) = driver.take() {
                driving = Some(std::thread::spawn(driver));
            }
        }
        if live && last_progress.elapsed() >= Duration::from_millis(100) {
            last_progress = Instant::now();
            if went {
                eprint!(
                    "\r{}",
                    progress_line(&workers.0, sold, run.events.len(), total)
                );
            } else {
                let ready = workers.0.iter().filter(|w| w.ready).count();
                eprint!(
                    "\r  workers connecting: {ready} / {} ready",
                    workers.0.len()
                );
            }
        }
    }
    run.elapsed = went_at.elapsed();
    if live {
        eprintln!(
            "\r{}",
            progress_line(&workers.0, sold, run.events.len(), total)
        );
    }
    for worker in &mut workers.0 {
        let status = worker
            .child
            .wait()
            .map_err(|err| CliError::Failed(format!("cannot wait for a worker: {err}")))?;
        if !status.success() || !worker.reported_done {
            return Err(describe_failure(worker, "failed"));
        }
    }
    if let Some(driving) = driving {
        driving
            .join()
            .map_err(|_| CliError::Failed("the demo's driver thread panicked".into()))??;
    }
    Ok(run)
}

fn progress_line(workers: &[Worker], sold: u64, events: usize, tickets: u64) -> String {
    if tickets == 0 {
        return format!("  {events:>6} events from {} workers   ", workers.len());
    }
    let mut per_language: Vec<(&str, u64)> = Vec::new();
    for worker in workers {
        match per_language.iter_mut().find(|(l, _)| *l == worker.language) {
            Some((_, count)) => *count += worker.sold,
            None => per_language.push((worker.language, worker.sold)),
        }
    }
    let parts: Vec<String> = per_language
        .iter()
        .map(|(language, count)| format!("{language} {count}"))
        .collect();
    format!("  sold {sold:>6} / {tickets}   [{}]   ", parts.join(" | "))
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
            sell(&args, &launchers, &url, &lock_name, &stock_key)
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

fn sell(
    args: &DemoArgs,
    launchers: &[Launcher],
    url: &str,
    lock_name: &str,
    stock_key: &str,
) -> CliResult<()> {
    let mut connection = block_on(raw::connect(url))?;
    block_on(async {
        redis::cmd("SET")
            .arg(stock_key)
            .arg(args.tickets)
            .query_async::<()>(&mut connection)
            .await
            .map_err(|err| raw::redis_error("set the stock", err))
    })?;
    let names: Vec<&str> = launchers.iter().map(|l| l.language).collect();
    let how = if args.no_lock {
        "WITHOUT a lock".to_owned()
    } else if args.fair {
        format!("under the fair lock '{lock_name}'")
    } else {
        format!("under the lock '{lock_name}'")
    };
    println!(
        "selling {} tickets: {} worker(s) each in {}, {how}",
        args.tickets,
        args.workers,
        names.join(", ")
    );
    let started = Instant::now();
    let outcome = run_sale(args, launchers, url, lock_name, stock_key);
    let left: Option<i64> = block_on(async {
        let left = redis::cmd("GET")
            .arg(stock_key)
            .query_async(&mut connection)
            .await
            .map_err(|err| raw::redis_error("read the stock", err));
        let _ = redis::cmd("DEL")
            .arg(stock_key)
            .query_async::<i64>(&mut connection)
            .await;
        left
    })?;
    let (sale, per_language) = outcome?;
    let elapsed = started.elapsed();
    println!();
    println!(
        "{:<8} {:>7} {:>6} {:>12} {:>12}",
        "language", "workers", "sold", "wait p50 ms", "wait p99 ms"
    );
    let mut total = 0u64;
    let mut all_waits = Vec::new();
    for (language, sold) in &per_language {
        total += sold;
        let mut waits = sale.waits.get(language).cloned().unwrap_or_default();
        waits.sort_by(f64::total_cmp);
        all_waits.extend_from_slice(&waits);
        println!(
            "{:<8} {:>7} {:>6} {:>12} {:>12}",
            language,
            args.workers,
            sold,
            format_ms(percentile(&waits, 50.0)),
            format_ms(percentile(&waits, 99.0))
        );
    }
    all_waits.sort_by(f64::total_cmp);
    println!(
        "{:<8} {:>7} {:>6} {:>12} {:>12}",
        "total",
        args.workers * per_language.len() as u64,
        total,
        format_ms(percentile(&all_waits, 50.0)),
        format_ms(percentile(&all_waits, 99.0))
    );
    println!();
    println!(
        "sold {total} tickets for {} seats in {:.2} s; stock left in Redis: {}",
        args.tickets,
        elapsed.as_secs_f64(),
        left.map_or_else(|| "none".to_owned(), |left| left.to_string())
    );
    if args.no_lock {
        if total > args.tickets {
            println!(
                "WITHOUT the lock: oversold by {} ticket(s): concurrent purchases read the same \
                 stock and each wrote it back minus one. Run it with the lock to see exactly {}.",
                total - args.tickets,
                args.tickets
            );
        } else {
            println!(
                "WITHOUT the lock: no oversell this time (the race is timing-dependent); try \
                 more --workers or a larger --think-ms"
            );
        }
        return Ok(());
    }
    if total == args.tickets && left == Some(0) {
        println!("OK: exactly {} tickets sold, none twice", args.tickets);
        Ok(())
    } else {
        Err(CliError::Failed(format!(
            "FAILED: sold {total} tickets for {} seats under the lock",
            args.tickets
        )))
    }
}

fn format_ms(value: Option<f64>) -> String {
    value.map_or_else(|| "-".to_owned(), |ms| format!("{ms:.1}"))
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
