//! `setLogger`: the core's tracing events handed to a JavaScript function, through a tracing
//! `Layer` and a napi thread-safe function that never keeps the event loop alive.

use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Mutex, Once};

use napi::bindgen_prelude::{Either3, FnArgs, Function, Unknown};
use napi::threadsafe_function::ThreadsafeFunctionCallMode;
use napi::Env;
use napi_derive::napi;
use tracing::field::{Field, Visit};
use tracing::subscriber::Interest;
use tracing::{Level, Metadata, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};

use crate::args::{optional, string};
use crate::error::{js_error, OrThrow};

/// A field's value as JavaScript gets it.
type Value = Either3<String, f64, bool>;
/// The arguments of the logger: level, message, fields.
type LoggerArgs = FnArgs<(&'static str, String, HashMap<String, Value>)>;

/// One event on its way to the JavaScript thread.
struct Record {
    level: &'static str,
    message: String,
    fields: HashMap<String, Value>,
}

/// How many events may wait for the JavaScript thread; more are dropped rather than queued.
const QUEUE: usize = 4096;

/// The logger's threshold: 0 = no logger, 1 = error ... 5 = trace.
static THRESHOLD: AtomicU8 = AtomicU8::new(0);
/// Hands one record to the JavaScript logger (a napi thread-safe function).
type Send = Box<dyn Fn(Record) + std::marker::Send + Sync>;
static LOGGER: Mutex<Option<Send>> = Mutex::new(None);
static INSTALL: Once = Once::new();

fn rank(level: &Level) -> u8 {
    match *level {
        Level::ERROR => 1,
        Level::WARN => 2,
        Level::INFO => 3,
        Level::DEBUG => 4,
        Level::TRACE => 5,
    }
}

fn name(level: &Level) -> &'static str {
    match *level {
        Level::ERROR => "error",
        Level::WARN => "warn",
        Level::INFO => "info",
        Level::DEBUG => "debug",
        Level::TRACE => "trace",
    }
}

fn threshold(level: &str) -> Option<u8> {
    Some(match level {
        "error" => 1,
        "warn" => 2,
        "info" => 3,
        "debug" => 4,
        "trace" => 5,
        _ => return None,
    })
}

/// Sends the core's tracing events at `level` and above (default `'info'`) to `logger`, as
/// `logger(level, message, fields)`; `null` stops it. One logger per process: a new call
/// replaces the last. The logger runs on the main thread and never keeps the process alive;
/// events that find the JavaScript thread far behind are dropped.
#[napi(
    ts_args_type = "logger: ((level: 'error' | 'warn' | 'info' | 'debug' | 'trace', message: string, fields: Record<string, string | number | boolean>) => void) | null, level?: 'error' | 'warn' | 'info' | 'debug' | 'trace' | null"
)]
pub fn set_logger(
    env: &Env,
    logger: Option<Function<LoggerArgs, ()>>,
    level: Option<Unknown>,
) -> napi::Result<()> {
    let level = optional(level, |level| string(level, "log level")).or_throw(env)?;
    let level = level.unwrap_or_else(|| "info".into());
    let Some(rank) = threshold(&level) else {
        let err = polylock::Error::invalid_argument(format!(
            "log level must be one of 'error', 'warn', 'info', 'debug', 'trace', got '{level}'"
        ));
        return Err(js_error(env, &err));
    };
    let send: Option<Send> = match logger {
        None => None,
        Some(logger) => {
            let tsfn = logger
                .build_threadsafe_function::<Record>()
                .weak::<true>()
                .max_queue_size::<QUEUE>()
                .build_callback(|context| {
                    let Record {
                        level,
                        message,
                        fields,
                    } = context.value;
                    Ok(FnArgs::from((level, message, fields)))
                })?;
            Some(Box::new(move |record| {
                // Fails when the queue is full or Node shuts down: the event is dropped.
                let _ = tsfn.call(record, ThreadsafeFunctionCallMode::NonBlocking);
            }))
        }
    };
    let rank = if send.is_some() { rank } else { 0 };
    *LOGGER.lock().unwrap_or_else(|p| p.into_inner()) = send;
    THRESHOLD.store(rank, Ordering::Relaxed);
    INSTALL.call_once(|| {
        let subscriber = tracing_subscriber::registry().with(ToJavaScript);
        // Fails only if something else in this process installed a subscriber first; then
        // this logger gets nothing, as that one takes the events.
        let _ = tracing::subscriber::set_global_default(subscriber);
    });
    Ok(())
}

/// The layer that sends events at or above the threshold to the logger.
struct ToJavaScript;

impl<S: Subscriber> Layer<S> for ToJavaScript {
    fn register_callsite(&self, _: &'static Metadata<'static>) -> Interest {
        // The threshold changes at run time: ask `enabled` every time.
        Interest::sometimes()
    }

    fn enabled(&self, metadata: &Metadata<'_>, _: Context<'_, S>) -> bool {
        rank(metadata.level()) <= THRESHOLD.load(Ordering::Relaxed)
    }

    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        let mut fields = Fields::default();
        event.record(&mut fields);
        let record = Record {
            level: name(event.metadata().level()),
            message: fields.message,
            fields: fields.values,
        };
        if let Some(send) = LOGGER.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
            send(record);
        }
    }
}

#[derive(Default)]
struct Fields {
    message: String,
    values: HashMap<String, Value>,
}

impl Fields {
    fn put(&mut self, field: &Field, value: Value) {
        match (field.name(), value) {
            ("message", Either3::A(message)) => self.message = message,
            (name, value) => {
                self.values.insert(name.to_owned(), value);
            }
        }
    }
}

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        self.put(field, Either3::A(format!("{value:?}")));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.put(field, Either3::A(value.to_owned()));
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.put(field, Either3::B(value as f64));
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.put(field, Either3::B(value as f64));
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.put(field, Either3::B(value));
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.put(field, Either3::C(value));
    }
}
