//! The core's `tracing` events, delivered to Python's `logging` (logger `polylock`).
//!
//! The thread that emits an event (a runtime worker, or a Python thread inside the core) only
//! formats it and queues it: it never waits for the GIL, so it cannot deadlock with a thread
//! that holds the GIL while it waits on the core, nor with a core lock it holds itself. One
//! delivery thread per process takes the GIL and calls `logging`, through the gate of
//! `interpreter.rs`: once Python is exiting, records are dropped (they hold no Python object).
//! The queue is bounded; when Python cannot keep up, records are dropped rather than block the
//! core. Which records are kept is decided by the `polylock` logger (`isEnabledFor`) at
//! delivery; events below DEBUG and events of other crates never leave the emitting thread.

use std::fmt::Write as _;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Mutex;

use pyo3::prelude::*;
use pyo3::types::PyTuple;
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Metadata, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};

use crate::interpreter;

/// The Python logger every record goes to.
const LOGGER: &str = "polylock";
/// Records waiting for the delivery thread, at most.
const QUEUE: usize = 1024;

struct Record {
    /// Python's level number (`logging.WARNING` is 30).
    level: i32,
    message: String,
    /// Where the event was emitted: the Rust module path, source file and line.
    module: &'static str,
    file: &'static str,
    line: u32,
}

/// The sender of this process's delivery thread (a forked child starts its own).
static SENDER: Mutex<Option<(u32, SyncSender<Record>)>> = Mutex::new(None);

fn queue(record: Record) {
    let pid = std::process::id();
    let mut sender = SENDER.lock().unwrap_or_else(|p| p.into_inner());
    if !matches!(&*sender, Some((owner, _)) if *owner == pid) {
        let (tx, rx) = sync_channel(QUEUE);
        let started = std::thread::Builder::new()
            .name("polylock-logging".into())
            .spawn(move || deliver(rx));
        if started.is_err() {
            return; // out of threads: no logging rather than no locks
        }
        *sender = Some((pid, tx));
    }
    if let Some((_, tx)) = &*sender {
        let _ = tx.try_send(record); // full: dropped, never blocks the core
    }
}

fn deliver(records: Receiver<Record>) {
    for record in records {
        let delivered = interpreter::unless_exiting(|| {
            Python::try_attach(|py| {
                if let Err(err) = log(py, &record) {
                    err.write_unraisable(py, None);
                }
            })
        });
        if delivered.is_none() {
            return; // Python is exiting: nobody is left to tell
        }
    }
}

fn log(py: Python<'_>, record: &Record) -> PyResult<()> {
    let logger = py.import("logging")?.call_method1("getLogger", (LOGGER,))?;
    if logger
        .call_method1("isEnabledFor", (record.level,))?
        .is_truthy()?
    {
        // As `Logger.log` would, but with the Rust event's origin instead of a Python frame.
        let made = logger.call_method1(
            "makeRecord",
            (
                LOGGER,
                record.level,
                record.file,
                record.line,
                record.message.as_str(),
                PyTuple::empty(py),
                py.None(),
                record.module,
            ),
        )?;
        logger.call_method1("handle", (made,))?;
    }
    Ok(())
}

fn python_level(level: &Level) -> i32 {
    match *level {
        Level::ERROR => 40,
        Level::WARN => 30,
        Level::INFO => 20,
        Level::DEBUG => 10,
        Level::TRACE => 5,
    }
}

/// `message key=value ...`, as tracing's own formatter writes an event.
#[derive(Default)]
struct Message {
    text: String,
    fields: String,
}

impl Visit for Message {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.text.push_str(value);
        } else {
            let _ = write!(self.fields, " {}={}", field.name(), value);
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.text, "{value:?}");
        } else {
            let _ = write!(self.fields, " {}={:?}", field.name(), value);
        }
    }
}

/// The layer that queues the core's events for Python.
struct PythonLogging;

impl<S: Subscriber> Layer<S> for PythonLogging {
    fn enabled(&self, metadata: &Metadata<'_>, _: Context<'_, S>) -> bool {
        let target = metadata.target();
        let ours = target == "polylock" || target.starts_with("polylock::");
        ours && metadata.is_event() && *metadata.level() <= Level::DEBUG
    }

    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        let mut message = Message::default();
        event.record(&mut message);
        message.text.push_str(&message.fields);
        let metadata = event.metadata();
        queue(Record {
            level: python_level(metadata.level()),
            message: message.text,
            module: metadata.module_path().unwrap_or(""),
            file: metadata.file().unwrap_or(""),
            line: metadata.line().unwrap_or(0),
        });
    }
}

/// Sends the core's events to `logging` (once, when `polylock._native` is imported). When
/// something else in the process already set tracing's global subscriber, that one keeps them.
pub(crate) fn register() {
    let subscriber = tracing_subscriber::registry().with(PythonLogging);
    let _ = tracing::subscriber::set_global_default(subscriber);
}
