//! Bounded waits for a topology to reach a state, failing with what was last seen.

use std::time::{Duration, Instant};

/// How long a topology wait (cluster agreement, a failover, sentinel discovery) may take.
pub const WAIT_TIMEOUT: Duration = Duration::from_secs(30);

/// Polls `check` every 50 ms until it returns `Ok`, for at most [`WAIT_TIMEOUT`]; panics with
/// `what` it was waiting for and the last `Err` it saw (why the state was not reached yet).
pub fn wait_for<T>(what: &str, mut check: impl FnMut() -> Result<T, String>) -> T {
    let deadline = Instant::now() + WAIT_TIMEOUT;
    loop {
        match check() {
            Ok(value) => return value,
            Err(seen) if Instant::now() >= deadline => panic!(
                "gave up after {} s waiting for {what}; last saw: {seen}",
                WAIT_TIMEOUT.as_secs()
            ),
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}
