//! The Rust candidate of the mixed-language election test (tests/election/run.py; the same
//! behaviour as tests/election/worker.py and worker.js).
//!
//! Usage: `election_worker <redis-url> <election> <lease-ms> <id>`. Campaigns without bound;
//! once leading, logs `lead`, then every 50 ms takes the time, checks `is_leader()` (which reads
//! the clock, so a process resumed after a pause past its lease learns it lost there) and logs
//! `act` while leading, `lost` once not, and campaigns again. Each stdout line is
//! `<CLOCK_MONOTONIC ns> <id> <lead|act|lost|error> <term>`, the time taken before the check
//! it reports.

use std::io::Write;
use std::time::Duration;

use polylock::{Client, ClientOptions};

const ACT_EVERY: Duration = Duration::from_millis(50);

/// CLOCK_MONOTONIC in ns, the clock the Python (`time.monotonic_ns`) and Node
/// (`process.hrtime.bigint`) candidates read.
fn monotonic_ns() -> u128 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid timespec to write; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    now.tv_sec as u128 * 1_000_000_000 + now.tv_nsec as u128
}

fn log(worker: &str, event: &str, term: i64, at: u128) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{at} {worker} {event} {term}");
    let _ = out.flush();
}

#[tokio::main]
async fn main() -> polylock::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let [_, url, name, lease_ms, worker] = args.as_slice() else {
        eprintln!("usage: election_worker <redis-url> <election> <lease-ms> <id>");
        std::process::exit(2);
    };
    let lease = Duration::from_millis(lease_ms.parse().expect("lease in ms"));
    let options = ClientOptions {
        watchdog_timeout: lease,
        response_timeout: lease,
        name: Some(worker.clone()),
        ..Default::default()
    };
    let client = Client::connect_with(url, options).await?;
    let election = client.election(name)?;
    loop {
        let leadership = match election.campaign(worker, None).await {
            Ok(won) => won.expect("an unbounded campaign leads"),
            Err(err) => {
                log(worker, "error", 0, monotonic_ns());
                eprintln!("{worker}: {err}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        log(worker, "lead", leadership.term(), monotonic_ns());
        loop {
            let at = monotonic_ns();
            if !leadership.is_leader() {
                log(worker, "lost", leadership.term(), at);
                break;
            }
            log(worker, "act", leadership.term(), at);
            tokio::time::sleep(ACT_EVERY).await;
        }
    }
}
