//! The Rust worker of the history test (tests/history, see its README).
//!
//! Usage: `history_worker <redis-url> <journal-path> <worker-id> [seconds]`
//!
//! The environment variable `POLYLOCK_HISTORY_KIND` picks the kind of lock: `lock` (the
//! default, `Client::lock`) or `fifo` (`Client::fifo_lock`).
//!
//! Until stdin closes (or `seconds` pass): acquire the lock `history` (watchdog lease of
//! 1500 ms, response timeout 500 ms, wait bound 10 s), append `enter` to the journal, hold for
//! 1-20 ms (one time in 100: 500-1500 ms, so renewals meet the faults too), append `leave` with
//! the handle's lost flag, release. Transient errors are journaled
//! and retried; any other acquire error ends the worker with exit code 3. Every journal line
//! is one `write()` on a file opened with `O_APPEND`, stamped with `CLOCK_MONOTONIC` in ns (the
//! clock the Python and Node workers and the runner use):
//!
//! - `enter <worker> <seq> <ns> <acquire-called-ns>`
//! - `leave <worker> <seq> <ns> lost=<true|false>`
//! - `release-error <worker> <seq> <ns> <kind>`
//! - `acquire-error <worker> <seq> <ns> <kind>` / `acquire-timeout <worker> <seq> <ns>`

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use polylock::{AcquireOptions, Client, ErrorKind};

const LOCK_NAME: &str = "history";
/// The kind of lock (set by run.py's `--kind`): `lock` or `fifo`.
const KIND_VARIABLE: &str = "POLYLOCK_HISTORY_KIND";
const WATCHDOG_TIMEOUT: Duration = Duration::from_millis(1500);
const RESPONSE_TIMEOUT: Duration = Duration::from_millis(500);
const WAIT_BOUND: Duration = Duration::from_secs(10);

#[cfg(unix)]
mod clock {
    use std::os::raw::{c_int, c_long};

    #[repr(C)]
    struct Timespec {
        tv_sec: c_long,
        tv_nsec: c_long,
    }

    extern "C" {
        fn clock_gettime(clock: c_int, time: *mut Timespec) -> c_int;
    }

    #[cfg(target_os = "linux")]
    const CLOCK_MONOTONIC: c_int = 1;
    #[cfg(not(target_os = "linux"))]
    const CLOCK_MONOTONIC: c_int = 6; // macOS

    /// `CLOCK_MONOTONIC` in ns: `std::time::Instant` reads the same clock but hides its value.
    pub fn monotonic_ns() -> u128 {
        let mut time = Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: clock_gettime writes one timespec through a valid pointer.
        let status = unsafe { clock_gettime(CLOCK_MONOTONIC, &mut time) };
        assert_eq!(status, 0, "clock_gettime(CLOCK_MONOTONIC) failed");
        time.tv_sec as u128 * 1_000_000_000 + time.tv_nsec as u128
    }
}

#[cfg(not(unix))]
mod clock {
    /// The journal compares times across processes, which needs `CLOCK_MONOTONIC` (Unix).
    pub fn monotonic_ns() -> u128 {
        eprintln!("history_worker runs on Unix only");
        std::process::exit(2);
    }
}

/// The shared journal: each line is written with one `write()` call.
struct Journal {
    file: File,
    worker: String,
}

impl Journal {
    fn write(&self, event: &str, seq: u64, rest: &str) {
        let mut line = format!("{event} {} {seq} {}", self.worker, clock::monotonic_ns());
        if !rest.is_empty() {
            line.push(' ');
            line.push_str(rest);
        }
        line.push('\n');
        let written = (&self.file)
            .write(line.as_bytes())
            .expect("cannot write the journal");
        assert_eq!(written, line.len(), "short write to the journal");
    }
}

/// xorshift64*, enough to pick hold times.
struct Random(u64);

impl Random {
    fn new() -> Random {
        let seed = clock::monotonic_ns() as u64 ^ (u64::from(std::process::id()) << 32);
        Random(seed | 1)
    }

    fn below(&mut self, bound: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % bound
    }
}

/// 1-20 ms; one section in 100 holds 500-1500 ms, across watchdog renewals (every 500 ms).
fn hold_ms(random: &mut Random) -> u64 {
    if random.below(100) == 0 {
        500 + random.below(1001)
    } else {
        1 + random.below(20)
    }
}

fn transient(kind: ErrorKind) -> bool {
    matches!(kind, ErrorKind::Connection | ErrorKind::Timeout)
}

async fn run(url: String, fifo: bool, journal: Journal, stop: impl Fn() -> bool) -> i32 {
    let client = loop {
        if stop() {
            return 0;
        }
        let connecting = Client::builder(url.clone())
            .watchdog_timeout(WATCHDOG_TIMEOUT)
            .response_timeout(RESPONSE_TIMEOUT)
            .connect()
            .await;
        match connecting {
            Ok(client) => break client,
            Err(err) if transient(err.kind()) => {
                eprintln!("{}: connect failed, retrying: {err}", journal.worker);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(err) => {
                eprintln!("{}: connect failed: {err}", journal.worker);
                return 3;
            }
        }
    };
    let made = if fifo {
        client.fifo_lock(LOCK_NAME)
    } else {
        client.lock(LOCK_NAME)
    };
    let lock = match made {
        Ok(lock) => lock,
        Err(err) => {
            eprintln!("{}: {err}", journal.worker);
            return 3;
        }
    };
    let mut random = Random::new();
    let mut seq = 0;
    while !stop() {
        seq += 1;
        let called = clock::monotonic_ns();
        match lock.acquire(AcquireOptions::new().wait(WAIT_BOUND)).await {
            Ok(true) => {}
            Ok(false) => {
                journal.write("acquire-timeout", seq, "");
                continue;
            }
            Err(err) => {
                journal.write("acquire-error", seq, &format!("{:?}", err.kind()));
                eprintln!("{}: acquire failed: {err}", journal.worker);
                if !transient(err.kind()) {
                    return 3;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        }
        journal.write("enter", seq, &called.to_string());
        tokio::time::sleep(Duration::from_millis(hold_ms(&mut random))).await;
        journal.write("leave", seq, &format!("lost={}", lock.is_lost()));
        if let Err(err) = lock.release().await {
            journal.write("release-error", seq, &format!("{:?}", err.kind()));
            eprintln!("{}: release failed: {err}", journal.worker);
        }
    }
    client.close();
    0
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 4 || args.len() > 5 {
        eprintln!("usage: history_worker <redis-url> <journal-path> <worker-id> [seconds]");
        std::process::exit(2);
    }
    let deadline = args.get(4).map(|seconds| {
        let seconds: f64 = seconds.parse().expect("seconds must be a number");
        Instant::now() + Duration::from_secs_f64(seconds)
    });
    let kind = std::env::var(KIND_VARIABLE).unwrap_or_else(|_| "lock".to_string());
    let fifo = match kind.as_str() {
        "lock" => false,
        "fifo" => true,
        other => {
            eprintln!(
                "{}: {KIND_VARIABLE} must be lock or fifo, not {other}",
                args[3]
            );
            std::process::exit(2);
        }
    };
    eprintln!("{}: kind {kind}", args[3]);
    let file = OpenOptions::new()
        .append(true)
        .create(true)
        .open(&args[2])
        .expect("cannot open the journal");
    let journal = Journal {
        file,
        worker: args[3].clone(),
    };
    let closed = Arc::new(AtomicBool::new(false));
    {
        let closed = closed.clone();
        std::thread::spawn(move || {
            let mut sink = [0u8; 256];
            let mut stdin = std::io::stdin();
            while matches!(stdin.read(&mut sink), Ok(n) if n > 0) {}
            closed.store(true, Ordering::SeqCst);
        });
    }
    let stop =
        move || closed.load(Ordering::SeqCst) || deadline.is_some_and(|at| Instant::now() >= at);
    let code = polylock::runtime().block_on(run(args[1].clone(), fifo, journal, stop));
    std::process::exit(code);
}
