//! `polylock check` against real deployments the test kit starts: a Sentinel set failed over
//! mid-run with replica sync (no overlap may show), the seed article's failover before the
//! replicas have the lock (an overlap without replica sync, none with it), a cluster failed
//! over by hand, and the usage errors.

use std::process::Command;

use polylock_testkit::{Cluster, RedisServer, SentinelSet};

const BINARY: &str = env!("CARGO_BIN_EXE_polylock");

/// How long the mid-run failover checks run and with how many workers: short in `make test`,
/// longer in `make test-deployments` (`POLYLOCK_CHECK_SECONDS`, `POLYLOCK_CHECK_WORKERS`).
fn soak() -> (String, String) {
    let env = |name: &str, default: &str| std::env::var(name).unwrap_or_else(|_| default.into());
    (
        env("POLYLOCK_CHECK_SECONDS", "6"),
        env("POLYLOCK_CHECK_WORKERS", "4"),
    )
}

/// Runs `polylock check ARGS --json` and returns the exit code and the JSON report.
fn check(url: &str, args: &[&str]) -> (i32, serde_json::Value, String) {
    let output = Command::new(BINARY)
        .args(["check", "-u", url, "--json"])
        .args(args)
        .env_remove("POLYLOCK_REDIS_URL")
        .output()
        .expect("run polylock check");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    let report = serde_json::from_str(stdout.trim()).unwrap_or(serde_json::Value::Null);
    (output.status.code().unwrap_or(-1), report, stderr)
}

#[test]
fn with_replica_sync_a_sentinel_failover_mid_run_shows_no_overlap() {
    let set = SentinelSet::start(2, 3);
    let (seconds, workers) = soak();
    let (code, report, stderr) = check(
        &set.url(),
        &[
            "--workers",
            &workers,
            "--duration",
            &seconds,
            "--failover",
            "--sync-replicas",
        ],
    );
    let round = &report["rounds"][0];
    assert_eq!(code, 0, "{report} {stderr}");
    assert_eq!(round["sync_replicas"], true);
    assert!(
        round["failover"]
            .as_str()
            .unwrap_or("")
            .starts_with("SENTINEL FAILOVER"),
        "{round}"
    );
    assert!(round["acquisitions"].as_u64().unwrap() > 10, "{round}");
    assert_eq!(round["overlaps"], 0, "{round}");
}

/// The seed article's case: replication stalls, a worker takes the lock (on the primary only)
/// and stays inside for 6 s, and 1 s into the run Sentinel promotes a replica that never saw
/// it. The other worker may then take the lock there.
fn failover_before_the_replicas_have_the_lock(sync_replicas: bool) -> serde_json::Value {
    let set = SentinelSet::start_with_replication_proxy(2, 3);
    set.stall_replication();
    let mut args = vec![
        "--workers",
        "2",
        "--duration",
        "8",
        "--hold-ms",
        "6000",
        "--failover",
        "--failover-after",
        "1",
    ];
    if sync_replicas {
        args.push("--sync-replicas");
    }
    let (code, report, stderr) = check(&set.url(), &args);
    let round = report["rounds"][0].clone();
    assert!(
        round["acquisitions"].as_u64().unwrap_or(0) >= 1,
        "{report} {stderr}"
    );
    let overlaps = round["overlaps"].as_u64().unwrap();
    assert_eq!(code, if overlaps > 0 { 1 } else { 0 }, "{round} {stderr}");
    round
}

#[test]
fn without_replica_sync_a_failover_before_the_replicas_have_the_lock_shows_an_overlap() {
    let round = failover_before_the_replicas_have_the_lock(false);
    assert!(round["overlaps"].as_u64().unwrap() >= 1, "{round}");
    // The earlier holder learns it lost the lock when its client follows the new primary.
    assert!(
        round["overlaps_told_lost"].as_u64().unwrap() >= 1,
        "{round}"
    );
}

#[test]
fn with_replica_sync_a_failover_before_the_replicas_have_the_lock_shows_none() {
    let round = failover_before_the_replicas_have_the_lock(true);
    assert_eq!(round["overlaps"], 0, "{round}");
    // The acquisition the replicas did not take was undone, not kept.
    assert!(round["not_synced"].as_u64().unwrap() >= 1, "{round}");
}

#[test]
fn a_cluster_failover_mid_run_is_followed_and_reported() {
    let cluster = Cluster::start(3, 1);
    let (seconds, workers) = soak();
    let (code, report, stderr) = check(
        &cluster.url(),
        &["--workers", &workers, "--duration", &seconds, "--failover"],
    );
    let round = &report["rounds"][0];
    assert!(
        round["failover"]
            .as_str()
            .unwrap_or("")
            .starts_with("CLUSTER FAILOVER on replica"),
        "{report} {stderr}"
    );
    assert!(round["acquisitions"].as_u64().unwrap() > 10, "{round}");
    // CLUSTER FAILOVER waits for the replica to catch up: nothing is lost, no overlap.
    assert_eq!(round["overlaps"], 0, "{round}");
    assert_eq!(code, 0, "{stderr}");
}

#[test]
fn failover_on_a_single_server_is_a_usage_error() {
    let server = RedisServer::start();
    let (code, _, stderr) = check(&server.url(), &["--failover", "--duration", "1"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("--failover needs a Sentinel"), "{stderr}");
}
