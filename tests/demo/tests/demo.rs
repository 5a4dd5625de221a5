//! The demo against real redis-servers, run as `polylock-demo` (what `polylock demo` runs) with
//! its Rust workers; the Python and Node workers are run by `make test-demo`.

use std::net::TcpStream;
use std::time::Duration;

use polylock_testkit::{free_port, run_tool, Output, RedisServer};

const BINARY: &str = env!("CARGO_BIN_EXE_polylock-demo");
/// No demo run in these tests may take longer (it is killed, and the test fails).
const RUN_BOUND: Duration = Duration::from_secs(120);

/// Runs `polylock-demo ARGS` with stdin closed (not a terminal) and no POLYLOCK_* variables.
fn demo(args: &[&str]) -> Output {
    demo_with_env(args, &[])
}

fn demo_with_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    run_tool(BINARY, args, env, RUN_BOUND)
}

/// The `sold` column of a language's row in the demo's table.
fn sold_in_table(stdout: &str, language: &str) -> Option<u64> {
    stdout.lines().find_map(|line| {
        let words: Vec<&str> = line.split_whitespace().collect();
        (words.first() == Some(&language))
            .then(|| words.get(2)?.parse().ok())
            .flatten()
    })
}

/// `sold X tickets for N seats`: X.
fn total_sold(stdout: &str) -> u64 {
    stdout
        .lines()
        .find_map(|line| {
            line.strip_prefix("sold ")?
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("no `sold X tickets` line in:\n{stdout}"))
}

/// A ticket sale of `tickets` by 3 Rust workers, with `extra` options, on its own server (kept
/// for the caller to look at); must exit 0.
fn ticket_sale(tickets: &str, extra: &[&str]) -> (RedisServer, Output) {
    let server = RedisServer::start();
    let url = server.url();
    let mut args = vec![
        "--redis",
        &url,
        "--languages",
        "rust",
        "--tickets",
        tickets,
        "--workers",
        "3",
    ];
    args.extend_from_slice(extra);
    let out = demo(&args);
    assert_eq!(
        out.code, 0,
        "{args:?}\nstdout:\n{}\nstderr:\n{}",
        out.stdout, out.stderr
    );
    (server, out)
}

#[test]
fn demo_with_the_lock_sells_exactly_n_tickets() {
    let (server, out) = ticket_sale("30", &[]);
    assert_eq!(
        sold_in_table(&out.stdout, "rust"),
        Some(30),
        "{}",
        out.stdout
    );
    assert_eq!(total_sold(&out.stdout), 30);
    assert!(
        out.stdout.contains("OK: exactly 30 tickets sold"),
        "{}",
        out.stdout
    );
    // The stock key is cleaned up and no lock is left behind.
    assert_eq!(server.int(&["EXISTS", "polylock-demo:tickets:stock"]), 0);
    assert_eq!(server.int(&["EXISTS", "polylock-demo:tickets"]), 0);
}

#[test]
fn demo_with_the_fair_lock_sells_exactly_n_tickets() {
    let (_server, out) = ticket_sale("25", &["--fair"]);
    assert!(out.stdout.contains("under the fair lock"), "{}", out.stdout);
    assert_eq!(
        sold_in_table(&out.stdout, "rust"),
        Some(25),
        "{}",
        out.stdout
    );
}

#[test]
fn demo_without_the_lock_reports_the_sale_as_unlocked() {
    let (_server, out) = ticket_sale("30", &["--no-lock"]);
    assert!(out.stdout.contains("WITHOUT a lock"), "{}", out.stdout);
    assert!(out.stdout.contains("WITHOUT the lock:"), "{}", out.stdout);
    // Lost updates can only add sales: never fewer than the seats.
    let sold = total_sold(&out.stdout);
    assert!(sold >= 30, "{}", out.stdout);
    assert_eq!(sold_in_table(&out.stdout, "rust"), Some(sold));
    if sold > 30 {
        assert!(
            out.stdout.contains(&format!("oversold by {}", sold - 30)),
            "{}",
            out.stdout
        );
    }
}

#[test]
fn demo_starts_a_private_server_and_stops_it() {
    let out = demo(&["--languages", "rust", "--tickets", "10", "--workers", "1"]);
    assert_eq!(
        out.code, 0,
        "stdout:\n{}\nstderr:\n{}",
        out.stdout, out.stderr
    );
    let port: u16 = out
        .stdout
        .lines()
        .find_map(|line| {
            line.strip_prefix("started a private redis-server on 127.0.0.1:")?
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("no port announced:\n{}", out.stdout));
    assert_eq!(sold_in_table(&out.stdout, "rust"), Some(10));
    assert!(out.stdout.contains("stopped the private redis-server"));
    assert!(
        TcpStream::connect(("127.0.0.1", port)).is_err(),
        "the private redis-server on port {port} still accepts connections"
    );
}

#[test]
fn demo_fails_when_a_requested_language_cannot_run() {
    let server = RedisServer::start();
    let url = server.url();
    let out = demo_with_env(
        &[
            "--redis",
            &url,
            "--languages",
            "rust,python",
            "--tickets",
            "10",
            "--workers",
            "1",
        ],
        &[("POLYLOCK_PYTHON", "/nonexistent/python3")],
    );
    assert_eq!(
        out.code, 1,
        "stdout:\n{}\nstderr:\n{}",
        out.stdout, out.stderr
    );
    assert!(
        out.stderr.contains("python was requested"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("make build-python"), "{}", out.stderr);
}

#[test]
fn demo_skips_a_language_whose_package_is_missing_when_none_were_named() {
    let server = RedisServer::start();
    let url = server.url();
    // A checkout without the worker scripts: Python and Node cannot run, Rust (this binary) can.
    let empty_repo =
        std::env::temp_dir().join(format!("polylock-empty-repo-{}", std::process::id()));
    std::fs::create_dir_all(&empty_repo).unwrap();
    let out = demo_with_env(
        &["--redis", &url, "--tickets", "10", "--workers", "1"],
        &[("POLYLOCK_REPO", empty_repo.to_str().unwrap())],
    );
    let _ = std::fs::remove_dir_all(&empty_repo);
    assert_eq!(
        out.code, 0,
        "stdout:\n{}\nstderr:\n{}",
        out.stdout, out.stderr
    );
    assert!(out.stderr.contains("skipping python"), "{}", out.stderr);
    assert!(out.stderr.contains("skipping node"), "{}", out.stderr);
    // The worker scripts are missing: the message says where the demo looks for them.
    assert!(out.stderr.contains("set POLYLOCK_REPO"), "{}", out.stderr);
    assert_eq!(sold_in_table(&out.stdout, "python"), None, "{}", out.stdout);
    assert_eq!(
        sold_in_table(&out.stdout, "rust"),
        Some(10),
        "{}",
        out.stdout
    );
}

/// `polylock-demo --languages rust --scenario SCENARIO ARGS` on its own server; must exit 0.
fn scenario(name: &str, extra: &[&str]) -> Output {
    let server = RedisServer::start();
    let url = server.url();
    let mut args = vec!["--redis", &url, "--languages", "rust", "--scenario", name];
    args.extend_from_slice(extra);
    let out = demo(&args);
    assert_eq!(
        out.code, 0,
        "{args:?}\nstdout:\n{}\nstderr:\n{}",
        out.stdout, out.stderr
    );
    // The scenario's data keys are cleaned up (lock latches expire by themselves; fencing
    // keeps its token counters, as a fenced lock always does).
    if name != "fencing" {
        assert_eq!(
            server.command(&["KEYS", "polylock-demo:*"]).as_deref(),
            Some("*0"),
            "keys left after {name}"
        );
    }
    out
}

/// The number before `what` on the line that has it: `3 expiries` -> 3.
fn number_before(stdout: &str, what: &str) -> u64 {
    stdout
        .lines()
        .find_map(|line| {
            let words: Vec<&str> = line.split_whitespace().collect();
            let at = words.iter().position(|word| word.starts_with(what))?;
            words
                .get(at.checked_sub(1)?)?
                .trim_end_matches(',')
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("no `N {what}` in:\n{stdout}"))
}

#[test]
fn demo_cache_rebuild_rebuilds_once_per_expiry() {
    let out = scenario(
        "cache-rebuild",
        &["--workers", "3", "--rounds", "2", "--slow-ms", "30"],
    );
    assert_eq!(number_before(&out.stdout, "expiries"), 2, "{}", out.stdout);
    assert_eq!(
        number_before(&out.stdout, "rebuild(s)"),
        2,
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("OK: exactly one rebuild per expiry"),
        "{}",
        out.stdout
    );
}

#[test]
fn demo_cache_rebuild_without_the_lock_reports_the_stampede() {
    let out = scenario(
        "cache-rebuild",
        &[
            "--workers",
            "3",
            "--rounds",
            "2",
            "--slow-ms",
            "30",
            "--no-lock",
        ],
    );
    // Every expiry is rebuilt at least once; without the lock, maybe more often.
    assert!(
        number_before(&out.stdout, "rebuild(s)") >= 2,
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("WITHOUT the lock"), "{}", out.stdout);
}

#[test]
fn demo_read_write_sees_no_disagreement_under_the_lock() {
    let out = scenario("read-write", &["--workers", "3", "--ops", "60"]);
    // `R reads and W writes in ...`
    let summary: Vec<u64> = out
        .stdout
        .lines()
        .find(|line| line.contains(" reads and ") && line.contains(" writes in "))
        .unwrap_or_else(|| panic!("no summary in:\n{}", out.stdout))
        .split_whitespace()
        .filter_map(|word| word.parse().ok())
        .collect();
    let (reads, writes) = (summary[0], summary[1]);
    assert_eq!(reads + writes, 60, "{}", out.stdout);
    assert!(
        out.stdout
            .contains(&format!("OK: zero disagreements in {reads} reads")),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("reader(s) inside at once"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("writers waited"), "{}", out.stdout);
}

#[test]
fn demo_segmented_stock_sells_exactly_the_stock_both_ways() {
    let out = scenario("segmented-stock", &["--tickets", "30", "--segments", "3"]);
    assert!(
        out.stdout
            .contains("OK: both sales sold exactly 30 units: no oversell, no leftover"),
        "{}",
        out.stdout
    );
    let rows: Vec<&str> = out
        .stdout
        .lines()
        .filter(|line| {
            line.starts_with("one lock per segment (3)") || line.starts_with("one global lock")
        })
        .collect();
    assert_eq!(rows.len(), 2, "{}", out.stdout);
    for row in rows {
        let words: Vec<&str> = row.split_whitespace().collect();
        let sold_at = if row.starts_with("one global") { 3 } else { 5 };
        assert_eq!(words[sold_at], "30", "{row}");
        assert_eq!(words[sold_at + 1], "0", "{row}");
    }
    assert!(out.stdout.contains("one global lock: "), "{}", out.stdout);
}

#[test]
fn demo_fencing_refuses_the_stale_write_and_shows_the_lost_update_without_it() {
    let out = scenario("fencing", &["--lease-ms", "100"]);
    assert!(
        out.stdout
            .contains("REFUSED (StaleToken); final value: fast"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("OK: every late write"),
        "{}",
        out.stdout
    );

    let out = scenario("fencing", &["--lease-ms", "100", "--no-fencing"]);
    assert!(
        out.stdout.contains("ACCEPTED; final value: slow"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("LOST UPDATE"), "{}", out.stdout);
}

#[test]
fn demo_refuses_options_of_other_scenarios() {
    for args in [
        vec!["--scenario", "fencing", "--no-lock"],
        vec!["--scenario", "read-write", "--fair"],
        vec!["--no-fencing"],
        vec!["--scenario", "lottery"],
    ] {
        let out = demo(&args);
        assert_eq!(out.code, 2, "{args:?}: {}", out.stderr);
    }
}

#[test]
fn demo_rejects_an_unknown_language() {
    let out = demo(&["--languages", "rust,cobol"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr.contains("unknown language 'cobol'"),
        "{}",
        out.stderr
    );
}

#[test]
fn bad_urls_are_usage_errors_and_unreachable_servers_connection_errors() {
    for url in [
        "not-a-url",
        "http://127.0.0.1:6379",
        "redis://127.0.0.1:notaport",
    ] {
        let out = demo(&["--languages", "rust", "--redis", url]);
        assert_eq!(out.code, 2, "{url}: {}", out.stderr);
        assert!(
            out.stderr.contains("bad Redis URL"),
            "{url}: {}",
            out.stderr
        );
    }
    let url = format!("redis://127.0.0.1:{}", free_port());
    let out = demo(&["--languages", "rust", "--redis", &url]);
    assert_eq!(out.code, 3, "{}", out.stderr);
    assert!(out.stderr.contains("cannot reach Redis"), "{}", out.stderr);
}

#[test]
fn help_shows_examples_and_the_url_option() {
    let out = demo(&["--help"]);
    assert_eq!(out.code, 0);
    assert!(out.stdout.contains("Examples:"), "{}", out.stdout);
    assert!(out.stdout.contains("--redis"), "{}", out.stdout);
}
