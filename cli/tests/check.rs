//! `polylock check` against real deployments the test kit starts: a Sentinel set failed over
//! mid-run with replica sync (no overlap may show), the seed article's failover before the
//! replicas have the lock (an overlap without replica sync, none with it), a cluster failed
//! over by hand, the usage errors, and `--permissions` (the lock rule, and with `--console` the
//! console's read-only rule).

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

/// The seed article's case: replication stalls, a worker takes the lock (on the primary only),
/// and Sentinel promotes a replica that never saw it. The failover starts once a worker's
/// acquire answered, and that worker stays inside until the promotion completed, the other
/// worker entered and its own lost signal fired (`--failover-while-held`): the case happens
/// whatever the machine's speed, and the round says so before its overlaps are judged.
fn failover_before_the_replicas_have_the_lock(sync_replicas: bool) -> serde_json::Value {
    let set = SentinelSet::start_with_replication_proxy(2, 3);
    set.stall_replication();
    let mut args = vec![
        "--workers",
        "2",
        "--duration",
        "120",
        "--hold-ms",
        "0",
        "--failover",
        "--failover-while-held",
    ];
    if sync_replicas {
        args.push("--sync-replicas");
    }
    let (code, report, stderr) = check(&set.url(), &args);
    let round = report["rounds"][0].clone();
    assert!(
        round["failover"]
            .as_str()
            .unwrap_or("")
            .starts_with("SENTINEL FAILOVER"),
        "{report} {stderr}"
    );
    assert!(
        round["failover_completed_after"].as_f64().is_some(),
        "the promotion was never seen: {round}"
    );
    let overlaps = round["overlaps"].as_u64().unwrap();
    assert_eq!(code, if overlaps > 0 { 1 } else { 0 }, "{round} {stderr}");
    round
}

#[test]
fn without_replica_sync_a_failover_before_the_replicas_have_the_lock_shows_an_overlap() {
    let round = failover_before_the_replicas_have_the_lock(false);
    // The case happened: a holder from before the failover was still inside after it.
    assert_eq!(round["sections_across_failover"], 1, "{round}");
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
    // The acquisition the replicas did not take was undone, not kept: nobody held the lock
    // across the failover.
    assert!(round["not_synced"].as_u64().unwrap() >= 1, "{round}");
    assert_eq!(round["sections_across_failover"], 0, "{round}");
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

/// `polylock check --permissions --json` as the user of `url`: the exit code and the report.
fn permissions(url: &str) -> (i32, serde_json::Value) {
    permissions_report(url, &[])
}

/// `polylock check --permissions --prefix app: --json ARGS` as the user of `url`.
fn permissions_report(url: &str, args: &[&str]) -> (i32, serde_json::Value) {
    let output = Command::new(BINARY)
        .args(["check", "--permissions", "--prefix", "app:", "--json"])
        .args(args)
        .args(["-u", url])
        .env_remove("POLYLOCK_REDIS_URL")
        .env_remove("POLYLOCK_KEY_PREFIX")
        .output()
        .expect("run polylock check --permissions");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let report = serde_json::from_str(stdout.trim()).unwrap_or_else(|_| {
        panic!(
            "not JSON: {stdout} {}",
            String::from_utf8_lossy(&output.stderr)
        )
    });
    (output.status.code().unwrap_or(-1), report)
}

/// The grants a report lists as missing, the optional ones marked `?`.
fn grants(report: &serde_json::Value) -> Vec<String> {
    report["missing"]
        .as_array()
        .unwrap()
        .iter()
        .map(|missing| {
            let grant = missing["grant"].as_str().unwrap().to_owned();
            if missing["optional"].as_bool().unwrap() {
                format!("?{grant}")
            } else {
                grant
            }
        })
        .collect()
}

/// The rule polylock needs for the locks under `app:`, as `check --permissions` prints it
/// (`polylock::acl::rule`), asked as the default user of `server` (who may do anything).
fn the_rule(server: &RedisServer) -> Vec<String> {
    let (code, report) = permissions(&server.url());
    assert_eq!(code, 0, "{report}");
    rule_of(&report)
}

/// The `rule` a `check --permissions --json` report gives.
fn rule_of(report: &serde_json::Value) -> Vec<String> {
    report["rule"]
        .as_array()
        .unwrap()
        .iter()
        .map(|arg| arg.as_str().unwrap().to_owned())
        .collect()
}

/// `ACL SETUSER user on >secret <rule> <more>` on `server`.
fn make_user(server: &RedisServer, rule: &[String], user: &str, more: &[&str]) {
    let mut command = vec!["ACL", "SETUSER", user, "on", ">secret"];
    command.extend(rule.iter().map(String::as_str));
    command.extend_from_slice(more);
    assert_eq!(server.command(&command).as_deref(), Some("+OK"));
}

#[test]
fn permissions_lists_what_the_user_lacks_of_the_rule_and_nothing_for_the_rule_itself() {
    let server = RedisServer::start();
    let url = |user: &str| format!("redis://{user}:secret@127.0.0.1:{}", server.port());
    let rule = the_rule(&server);
    assert!(rule.contains(&"+evalsha".to_owned()) && rule.contains(&"~app:*".to_owned()));
    // The rule and its optional addition (sync_replicas): nothing missing.
    make_user(&server, &rule, "full", &["+wait", "+info"]);
    let (code, report) = permissions(&url("full"));
    assert_eq!((code, grants(&report)), (0, vec![]), "{report}");
    // The rule alone: only the optional additions.
    make_user(&server, &rule, "rule", &[]);
    let (code, report) = permissions(&url("rule"));
    assert_eq!(code, 0, "{report}");
    assert_eq!(grants(&report), ["?+info", "?+wait"]);
    // A command of the scripts, SUBSCRIBE, the derived keys and the lock channels taken away.
    make_user(
        &server,
        &rule,
        "partial",
        &[
            "-pexpire",
            "-subscribe",
            "resetkeys",
            "~app:*",
            "~{app:*",
            "resetchannels",
            "&polylock_pubsub_probe",
        ],
    );
    let (code, report) = permissions(&url("partial"));
    assert_eq!(code, 1, "{report}");
    let found = grants(&report);
    for expected in [
        "+pexpire",
        "+subscribe",
        "~redisson_*{app:*",
        "~polylock_*:{app:*",
        "&redisson_*{app:*",
        "&polylock_*:{app:*",
        // The client record's pattern, which `resetkeys` took away too.
        "~polylock:client:*",
    ] {
        assert!(
            found.iter().any(|grant| grant == expected),
            "{expected} not in {found:?}"
        );
    }
    // The text report: each missing part, and the arguments that grant them.
    let output = Command::new(BINARY)
        .args([
            "check",
            "--permissions",
            "--prefix",
            "app:",
            "-u",
            &url("partial"),
        ])
        .env_remove("POLYLOCK_REDIS_URL")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{text}");
    for line in [
        "missing  ~redisson_*{app:*            for the keys of the locks",
        "missing  +pexpire                     for the lock scripts",
        "missing  +subscribe                   for waiting for a release",
        "optional +info                        for sync_replicas",
        "grant it: ACL SETUSER <user> ",
    ] {
        assert!(text.contains(line), "{line:?} not in {text}");
    }
    // Nothing was left behind by the probes.
    assert_eq!(server.command(&["DBSIZE"]).as_deref(), Some(":0"));
    // Any other command refused by ACL: exit code 3 with the core's Permission message.
    make_user(&server, &rule, "no_evalsha", &["-evalsha"]);
    let output = Command::new(BINARY)
        .args(["inspect", "app:1", "--redis", &url("no_evalsha")])
        .env_remove("POLYLOCK_REDIS_URL")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("permission denied: the Redis user may not run EVALSHA"),
        "{stderr}"
    );
}

/// Defect 8 of the safety review: the count-down latch's key and channel
/// (`redisson_countdownlatch__channel__{app:...}`, no `:` before the brace) and its `DECR`.
/// A user with the rule as it was (`redisson_*:{app:*`, no `+decr`) fails the check, naming
/// each; a user with the rule the check prints passes, and then every latch call works.
#[test]
fn permissions_fail_without_the_latch_key_channel_or_decr_and_pass_with_the_rule() {
    let server = RedisServer::start();
    let url = |user: &str| format!("redis://{user}:secret@127.0.0.1:{}", server.port());
    let rule = the_rule(&server);
    assert!(rule.contains(&"~redisson_*{app:*".to_owned()), "{rule:?}");
    assert!(rule.contains(&"+decr".to_owned()), "{rule:?}");
    // The rule with Redisson's keys and channels only as `redisson_*:{app:*`, and no DECR.
    let old: Vec<String> = rule
        .iter()
        .filter(|arg| *arg != "+decr")
        .map(|arg| arg.replace("redisson_*{app:*", "redisson_*:{app:*"))
        .collect();
    make_user(&server, &old, "old", &[]);
    let (code, report) = permissions(&url("old"));
    assert_eq!(code, 1, "{report}");
    let found = grants(&report);
    for expected in ["~redisson_*{app:*", "&redisson_*{app:*", "+decr"] {
        assert!(
            found.iter().any(|grant| grant == expected),
            "{expected} not in {found:?}"
        );
    }
    make_user(&server, &rule, "rule", &[]);
    let (code, report) = permissions(&url("rule"));
    assert_eq!(code, 0, "{report}");
    assert!(
        grants(&report).iter().all(|grant| grant.starts_with('?')),
        "{report}"
    );
    // Nothing was left behind by the probes.
    assert_eq!(server.command(&["DBSIZE"]).as_deref(), Some(":0"));
}

#[test]
fn permissions_on_a_cluster_reports_sharded_pubsub_and_a_refused_spublish() {
    if !polylock_testkit::ServerBuild::configured().has_sharded_pubsub() {
        // Redis 6.2: no sharded pub/sub to report or take away.
        return;
    }
    let cluster = Cluster::start(3, 0);
    let url = |user: &str| {
        cluster.url().replacen(
            "redis+cluster://",
            &format!("redis+cluster://{user}:secret@"),
            1,
        )
    };
    let rule = the_rule(&cluster.nodes[0]);
    for node in &cluster.nodes {
        make_user(node, &rule, "rule", &[]);
        make_user(node, &rule, "no_sharded", &["-spublish", "-ssubscribe"]);
    }
    let (code, report) = permissions(&url("rule"));
    assert_eq!(code, 0, "{report}");
    assert_eq!(report["cluster_pubsub"], "sharded");
    assert_eq!(grants(&report), ["?+info", "?+wait"]);
    let (code, report) = permissions(&url("no_sharded"));
    assert_eq!(code, 1, "{report}");
    let found = grants(&report);
    for expected in ["+spublish", "+ssubscribe"] {
        assert!(
            found.iter().any(|grant| grant == expected),
            "{expected} not in {found:?}"
        );
    }
}

/// `polylock check --permissions --console --prefix app: --json` as the user of `url`.
fn console_permissions(url: &str) -> (i32, serde_json::Value) {
    permissions_report(url, &["--console"])
}

/// The grants a console report lists as missing.
fn console_grants(report: &serde_json::Value) -> Vec<String> {
    let missing = report["missing"].as_array().expect("missing");
    missing
        .iter()
        .map(|missing| missing["grant"].as_str().expect("a grant").to_owned())
        .collect()
}

#[test]
fn console_permissions_pass_with_the_read_only_rule_and_name_what_is_missing() {
    let server = RedisServer::start();
    let url = |user: &str| format!("redis://{user}:secret@127.0.0.1:{}", server.port());
    let (code, report) = console_permissions(&server.url());
    assert_eq!((code, console_grants(&report)), (0, vec![]), "{report}");
    let rule = rule_of(&report);
    for part in ["-@all", "+@read", "+time", "~app:*", "~polylock:client:*"] {
        assert!(rule.iter().any(|p| p == part), "{part} not in {rule:?}");
    }
    // No write command in it: the console only looks.
    make_user(&server, &rule, "viewer", &[]);
    assert!(server
        .command(&["ACL", "DRYRUN", "viewer", "SET", "app:1", "x"])
        .is_some_and(|reply| !reply.starts_with("+OK")));
    let (code, report) = console_permissions(&url("viewer"));
    assert_eq!((code, console_grants(&report)), (0, vec![]), "{report}");
    // A command the inspection script calls, one the console sends, and the records' keys.
    make_user(&server, &rule, "no_time", &["-time"]);
    let (code, report) = console_permissions(&url("no_time"));
    assert_eq!(
        (code, console_grants(&report)),
        (1, vec!["+time".to_owned()]),
        "{report}"
    );
    make_user(&server, &rule, "no_scan", &["-scan", "-lrange"]);
    let (code, report) = console_permissions(&url("no_scan"));
    assert_eq!(code, 1, "{report}");
    let mut found = console_grants(&report);
    found.sort();
    assert_eq!(found, ["+lrange", "+scan"], "{report}");
    make_user(&server, &rule, "no_records", &["resetkeys", "~app:*"]);
    let (code, report) = console_permissions(&url("no_records"));
    assert_eq!(code, 1, "{report}");
    assert!(
        console_grants(&report).contains(&"~polylock:client:*".to_owned()),
        "{report}"
    );
    // The probes wrote nothing. (The check's own client, as the default user, writes its
    // client record, deleted in the background at close: it may outlive the process by its
    // lease.)
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("*")
        .query(&mut server.connection().unwrap())
        .unwrap();
    let written: Vec<&String> = keys
        .iter()
        .filter(|key| !key.starts_with("polylock:client:"))
        .collect();
    assert!(written.is_empty(), "the probes wrote {written:?}");
}

/// On a cluster, the console's client reads the slot map and probes sharded pub/sub when it
/// connects: the console rule has both, and a user without them is told.
#[test]
fn console_permissions_on_a_cluster_name_the_slot_map_and_the_pubsub_probe() {
    if !polylock_testkit::ServerBuild::configured().has_sharded_pubsub() {
        return; // Redis 6.2: no SPUBLISH in the rule
    }
    let cluster = Cluster::start(3, 0);
    let url = |user: &str| {
        cluster.url().replacen(
            "redis+cluster://",
            &format!("redis+cluster://{user}:secret@"),
            1,
        )
    };
    let (code, report) = console_permissions(&cluster.url());
    assert_eq!(code, 0, "{report}");
    let rule = rule_of(&report);
    for part in ["+cluster|slots", "+spublish", "&polylock_pubsub_probe"] {
        assert!(rule.iter().any(|p| p == part), "{part} not in {rule:?}");
    }
    for node in &cluster.nodes {
        make_user(node, &rule, "viewer", &[]);
        make_user(node, &rule, "no_slots", &["-cluster|slots"]);
    }
    let (code, report) = console_permissions(&url("viewer"));
    assert_eq!((code, console_grants(&report)), (0, vec![]), "{report}");
    let (code, report) = console_permissions(&url("no_slots"));
    assert_eq!(code, 1, "{report}");
    assert_eq!(console_grants(&report), ["+cluster|slots"], "{report}");
}
