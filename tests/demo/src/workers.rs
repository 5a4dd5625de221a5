//! The demo's worker processes: started from their launchers, told `go` together once all
//! are ready, their JSON events collected until every one has ended.

use std::io::{BufRead, BufReader, IsTerminal, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::launchers::Launcher;
use crate::signals;
use crate::DemoArgs;
use polylock_cli_common::error::{CliError, CliResult};

const READY_TIMEOUT: Duration = Duration::from_secs(60);

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
