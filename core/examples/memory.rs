//! Resident memory of one client holding many locks and of one client with many waiters, and
//! whether it comes back after they are released, round after round.
//!
//! Each round: client A acquires `locks` locks (watchdog leases); client B starts one waiter on
//! each (they subscribe and wait); A releases every lock, each waiter acquires and releases.
//! The process's resident set size (`/proc/self/statm`) is read before the round, with the
//! locks held, with the waiters waiting, and after everything was released.
//!
//! Usage: `memory <redis-url> [locks] [rounds]` (default 10,000 and 10). Prints one line per
//! round and the per-lock and per-waiter cost; it stops if a client still tracks a channel or a
//! hold after the release. Free heap memory is handed back (`malloc_trim`) before each reading,
//! so the figures count memory in use. Beside the resident size it prints the live heap (bytes
//! allocated and not yet freed, counted by this example's allocator): what the clients keep,
//! apart from what the allocator keeps around it. A measuring tool, not a test.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures_util::future::join_all;
use polylock::{AcquireOptions, Client};

extern "C" {
    /// glibc: gives free heap memory back to the system, so the resident size counts what is
    /// in use rather than what the allocator keeps for later.
    fn malloc_trim(pad: usize) -> i32;
}

/// Resident set size in bytes (Linux), after handing free heap memory back.
fn resident() -> u64 {
    // SAFETY: malloc_trim only walks glibc's own heap; any pad is valid.
    unsafe { malloc_trim(0) };
    let statm = std::fs::read_to_string("/proc/self/statm").expect("/proc/self/statm");
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|field| field.parse().ok())
        .expect("resident pages");
    pages * 4096
}

/// The system allocator, counting the bytes live (allocated and not yet freed).
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is passed on unchanged to `System`; the counter only observes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let block = unsafe { System.alloc(layout) };
        if !block.is_null() {
            LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        }
        block
    }

    unsafe fn dealloc(&self, block: *mut u8, layout: Layout) {
        unsafe { System.dealloc(block, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, block: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let moved = unsafe { System.realloc(block, layout, new_size) };
        if !moved.is_null() {
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
            LIVE.fetch_add(new_size, Ordering::Relaxed);
        }
        moved
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn live_heap() -> u64 {
    LIVE.load(Ordering::Relaxed) as u64
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let url = args
        .get(1)
        .expect("usage: memory <redis-url> [locks] [rounds]");
    let count: usize = args.get(2).map_or(10_000, |n| n.parse().expect("a count"));
    let rounds: usize = args.get(3).map_or(10, |n| n.parse().expect("a count"));
    let holder = Client::connect(url).await.expect("connect");
    let waiter = Client::connect(url).await.expect("connect");
    let prefix = format!("polylock:memory:{}", &holder.id()[..8]);
    let names: Vec<String> = (0..count).map(|i| format!("{prefix}:{i}")).collect();

    println!(
        "round | before (MiB) | {count} held | + {count} waiting | after release | live heap after"
    );
    let mut per_lock = Vec::new();
    let mut per_waiter = Vec::new();
    let mut after = Vec::new();
    let mut live_after = Vec::new();
    for round in 1..=rounds {
        let before = resident();
        let held: Vec<_> = names
            .iter()
            .map(|name| holder.lock(name).unwrap())
            .collect();
        for ok in join_all(
            held.iter()
                .map(|lock| lock.acquire(AcquireOptions::new().no_wait())),
        )
        .await
        {
            assert!(
                ok.expect("acquire"),
                "a lock of this run was taken by someone else"
            );
        }
        let holding = resident();

        let waiting: Vec<_> = names
            .iter()
            .map(|name| waiter.lock(name).unwrap())
            .collect();
        let waits = tokio::spawn({
            let waiting = waiting.clone();
            async move {
                let acquired = join_all(waiting.iter().map(|lock| {
                    lock.acquire(AcquireOptions::new().wait(Duration::from_secs(120)))
                }))
                .await;
                for lock in &waiting {
                    lock.release().await.expect("release the waiter's hold");
                }
                acquired
            }
        });
        // Every waiter subscribed: the hub counts two channels per name (the lock's, and the
        // waiter's own).
        while waiter.subscribed_channels() < 2 * count {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let with_waiters = resident();

        for ok in join_all(held.iter().map(|lock| lock.release())).await {
            ok.expect("release");
        }
        for acquired in waits.await.expect("the waiters' task") {
            assert!(acquired.expect("a waiter's acquire"), "a waiter timed out");
        }
        drop(held);
        drop(waiting);
        // Let the hub drop the channels nobody waits on any more (unsubscribing 2 × count
        // channels takes a while on a busy machine; bounded, then asserted below).
        let dropping = std::time::Instant::now();
        while waiter.subscribed_channels() > 0 && dropping.elapsed() < Duration::from_secs(30) {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        let released = resident();
        let live = live_heap();
        // What the clients still track must be nothing, whatever the allocator keeps.
        assert_eq!(waiter.subscribed_channels(), 0, "channels left subscribed");
        assert_eq!(
            holder.watched_locks() + waiter.watched_locks(),
            0,
            "holds left watched"
        );
        println!(
            "{round:>5} | {:>12.1} | {:>9.1} | {:>14.1} | {:>13.1} | {:>15.2}",
            mib(before),
            mib(holding),
            mib(with_waiters),
            mib(released),
            mib(live)
        );
        per_lock.push(holding.saturating_sub(before) as f64 / count as f64);
        per_waiter.push(with_waiters.saturating_sub(holding) as f64 / count as f64);
        after.push(released);
        live_after.push(live);
    }
    let median = |values: &mut Vec<f64>| {
        values.sort_by(f64::total_cmp);
        values[values.len() / 2]
    };
    println!(
        "per held lock: {:.0} bytes; per waiter: {:.0} bytes (medians over {rounds} rounds)",
        median(&mut per_lock),
        median(&mut per_waiter)
    );
    println!(
        "after release: round 1 {:.1} MiB, round {rounds} {:.1} MiB (growth {:+.1} MiB)",
        mib(after[0]),
        mib(after[rounds - 1]),
        mib(after[rounds - 1]) - mib(after[0])
    );
    println!(
        "live heap after release: round 1 {:.2} MiB, round {rounds} {:.2} MiB (growth {:+.3} MiB), \
         highest {:.2} MiB",
        mib(live_after[0]),
        mib(live_after[rounds - 1]),
        mib(live_after[rounds - 1]) - mib(live_after[0]),
        mib(live_after.iter().copied().max().unwrap_or(0))
    );
    holder.close();
    waiter.close();
}
