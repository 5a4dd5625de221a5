//! Where the time of one lock handoff goes, between two processes on one server: the holder
//! (this process) releases while a waiter (this program again, `--waiter`) waits; both record
//! the core's handoff trace events (target `polylock::handoff`) with the wall clock, and each
//! handoff is cut into its steps:
//!
//! - release → message: the release script runs and the server delivers its message;
//! - message → woken: the waiter's process hands the message to the waiting task;
//! - woken → attempt: the waiter prepares its acquire attempt;
//! - attempt → reply: the acquire script's round trip;
//! - reply → caller: the hold is recorded and `acquire` returns to the caller.
//!
//! The waiter holds with the watchdog, so a plain lock's release grants it the lock: its
//! attempt steps are then empty (a fixed lease would show them, as the fair lock does).
//!
//! Usage: `handoff <redis-url> [handoffs] [plain|fair] [hold-ms]` (default 200, plain, 2 ms: how
//! long the holder keeps the lock once the waiter was told to wait). Prints one table of medians
//! and 90th percentiles in microseconds. A measuring tool, not a test.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use polylock::{AcquireOptions, Client, Lock};
use tracing::field::{Field, Visit};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::Layer;

/// The trace events of this process since the last `take_events`: (what, wall clock in ns).
static EVENTS: Mutex<Vec<(String, u128)>> = Mutex::new(Vec::new());

fn now_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("a clock after 1970")
        .as_nanos()
}

fn take_events() -> Vec<(String, u128)> {
    std::mem::take(&mut *EVENTS.lock().unwrap())
}

/// Records every `polylock::handoff` event's message with the time it was emitted.
struct Recorder;

impl<S: tracing::Subscriber> Layer<S> for Recorder {
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        if event.metadata().target() != "polylock::handoff" {
            return;
        }
        struct Message(String);
        impl Visit for Message {
            fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
                if field.name() == "message" {
                    self.0 = format!("{value:?}");
                }
            }
        }
        let at = now_ns();
        let mut message = Message(String::new());
        event.record(&mut message);
        EVENTS.lock().unwrap().push((message.0, at));
    }
}

fn lock_of(client: &Client, name: &str, kind: &str) -> Lock {
    match kind {
        "fair" => client.fair_lock(name),
        _ => client.lock(name),
    }
    .expect("a valid lock name")
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    tracing::subscriber::set_global_default(
        tracing_subscriber::registry().with(
            Recorder.with_filter(
                tracing_subscriber::filter::Targets::new()
                    .with_target("polylock::handoff", tracing::Level::TRACE),
            ),
        ),
    )
    .expect("one subscriber");
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--waiter") {
        return waiter(&args[2], &args[3], &args[4]).await;
    }
    let url = args
        .get(1)
        .expect("usage: handoff <redis-url> [handoffs] [plain|fair] [hold-ms]");
    let handoffs: usize = args.get(2).map_or(200, |n| n.parse().expect("a count"));
    let kind = args.get(3).map_or("plain", String::as_str);
    let hold = Duration::from_millis(args.get(4).map_or(2, |ms| ms.parse().expect("ms")));
    holder(url, handoffs, kind, hold).await;
}

/// The waiter: on each `go`, acquires (waiting), notes when `acquire` returned, releases, and
/// prints its events of that handoff as one JSON line.
async fn waiter(url: &str, name: &str, kind: &str) {
    let client = Client::connect(url).await.expect("connect");
    let lock = lock_of(&client, name, kind);
    println!("ready");
    for line in std::io::stdin().lock().lines() {
        if line.expect("stdin") != "go" {
            break;
        }
        take_events();
        let acquired = lock
            .acquire(AcquireOptions::new().wait(Duration::from_secs(10)))
            .await
            .expect("acquire");
        let returned = now_ns();
        assert!(acquired, "the holder never released");
        let events = take_events();
        lock.release().await.expect("release");
        let line = serde_json::json!({
            "events": events.iter().map(|(what, at)| (what, at.to_string())).collect::<Vec<_>>(),
            "returned": returned.to_string(),
        });
        println!("{line}");
        std::io::stdout().flush().expect("stdout");
    }
}

async fn holder(url: &str, handoffs: usize, kind: &str, hold: Duration) {
    let client = Client::connect(url).await.expect("connect");
    let name = format!("polylock:handoff:{}", &client.id()[..8]);
    let lock = lock_of(&client, &name, kind);
    let mut child = Command::new(std::env::current_exe().expect("this program"))
        .args(["--waiter", url, &name, kind])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the waiter");
    let mut to_waiter = child.stdin.take().expect("stdin");
    let mut from_waiter = BufReader::new(child.stdout.take().expect("stdout")).lines();
    assert_eq!(from_waiter.next().expect("ready").expect("ready"), "ready");

    let mut steps: Vec<[f64; 6]> = Vec::with_capacity(handoffs);
    for _ in 0..handoffs {
        assert!(lock.acquire(AcquireOptions::new().no_wait()).await.unwrap());
        writeln!(to_waiter, "go").expect("to the waiter");
        // Usually long enough for the waiter's first attempt and subscription; a handoff where
        // it was not yet waiting has no wake-up and is left out of the table.
        tokio::time::sleep(hold).await;
        take_events();
        lock.release().await.expect("release");
        let ours = take_events();
        let line = from_waiter.next().expect("a report").expect("a report");
        let report: serde_json::Value = serde_json::from_str(&line).expect("JSON");
        let theirs: Vec<(String, u128)> = report["events"]
            .as_array()
            .expect("events")
            .iter()
            .map(|pair| {
                (
                    pair[0].as_str().unwrap().to_owned(),
                    pair[1].as_str().unwrap().parse().unwrap(),
                )
            })
            .collect();
        let returned: u128 = report["returned"].as_str().unwrap().parse().unwrap();
        if let Some(handoff) = cut(&ours, &theirs, returned) {
            steps.push(handoff);
        }
    }
    drop(to_waiter);
    let _ = child.wait();
    lock.force_unlock().await.ok();
    print_table(kind, handoffs, &steps);
}

/// One handoff's steps in µs: release→message, message→woken, woken→attempt, attempt→reply,
/// reply→caller, and the release round trip; None if an event is missing (a retry).
fn cut(ours: &[(String, u128)], theirs: &[(String, u128)], returned: u128) -> Option<[f64; 6]> {
    let first = |events: &[(String, u128)], what: &str, after: u128| {
        events
            .iter()
            .find(|(name, at)| name == what && *at >= after)
            .map(|(_, at)| *at)
    };
    let release_sent = first(ours, "release sent", 0)?;
    let release_reply = first(ours, "release reply", release_sent)?;
    let message = first(theirs, "message", release_sent)?;
    let woken = first(theirs, "woken", message)?;
    // A waiter the release granted the lock to (one held by the watchdog) sends no attempt:
    // those two steps are empty, and the hand-back follows the wake-up.
    let (attempt, reply) = match first(theirs, "attempt sent", woken) {
        Some(attempt) => (attempt, first(theirs, "attempt reply", attempt)?),
        None => (woken, woken),
    };
    let us = |from: u128, to: u128| (to.saturating_sub(from)) as f64 / 1000.0;
    Some([
        us(release_sent, message),
        us(message, woken),
        us(woken, attempt),
        us(attempt, reply),
        us(reply, returned),
        us(release_sent, release_reply),
    ])
}

fn print_table(kind: &str, handoffs: usize, steps: &[[f64; 6]]) {
    let names = [
        "release sent → message in the waiter's process",
        "message → waiting task woken",
        "woken → acquire attempt sent",
        "acquire attempt → its reply",
        "reply → acquire returns to the caller",
    ];
    // The handoff itself: the five steps together, as a last column.
    let rows: Vec<[f64; 7]> = steps
        .iter()
        .map(|row| {
            let mut with_total = [0.0; 7];
            with_total[..6].copy_from_slice(row);
            with_total[6] = row[..5].iter().sum();
            with_total
        })
        .collect();
    let quantile = |column: usize, q: f64| {
        let mut values: Vec<f64> = rows.iter().map(|row| row[column]).collect();
        values.sort_by(f64::total_cmp);
        values
            .get(((values.len() as f64 - 1.0) * q).round() as usize)
            .copied()
            .unwrap_or(f64::NAN)
    };
    println!(
        "{kind} lock: {} of {handoffs} handoffs traced end to end (µs)",
        steps.len()
    );
    println!("| step | p50 | p90 |\n| --- | ---: | ---: |");
    for (column, name) in names.iter().enumerate() {
        println!(
            "| {name} | {:.0} | {:.0} |",
            quantile(column, 0.5),
            quantile(column, 0.9)
        );
    }
    println!(
        "| **release sent → acquire returns (the handoff)** | {:.0} | {:.0} |",
        quantile(6, 0.5),
        quantile(6, 0.9)
    );
    println!(
        "| (release round trip, in the holder) | {:.0} | {:.0} |",
        quantile(5, 0.5),
        quantile(5, 0.9)
    );
}
