//! The operator's commands (`inspect`, `watch`, `force-unlock`) on a Redis Cluster and through
//! Sentinel: the same URL forms as the client's, names spread over every primary.

use std::process::Command;

use polylock_testkit::{Cluster, SentinelSet};

const BINARY: &str = env!("CARGO_BIN_EXE_polylock");

/// Runs `polylock ARGS -u URL`; the exit code, stdout and stderr.
fn polylock(url: &str, args: &[&str]) -> (i32, String, String) {
    let output = Command::new(BINARY)
        .args(args)
        .args(["-u", url])
        .env_remove("POLYLOCK_REDIS_URL")
        .output()
        .expect("run polylock");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// A reentrant lock as Redisson and polylock keep it: owner field -> hold count, with a lease.
fn hold(server: &polylock_testkit::RedisServer, name: &str, owner: &str) {
    assert_eq!(
        server.command(&["HSET", name, owner, "1"]).as_deref(),
        Some(":1")
    );
    assert_eq!(
        server.command(&["PEXPIRE", name, "60000"]).as_deref(),
        Some(":1")
    );
}

/// The names `watch --once --json` lists.
fn watched(url: &str) -> Vec<String> {
    let (code, stdout, stderr) = polylock(url, &["watch", "--once", "--json"]);
    assert_eq!(code, 0, "{stderr}");
    let refresh: serde_json::Value = serde_json::from_str(stdout.trim()).expect("one JSON line");
    let mut names: Vec<String> = refresh["locks"]
        .as_array()
        .expect("locks")
        .iter()
        .map(|lock| lock["name"].as_str().expect("a name").to_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn inspect_watch_and_force_unlock_see_locks_on_every_primary_of_a_cluster() {
    let cluster = Cluster::start(3, 1);
    let url = cluster.url();
    // Names until every primary holds one.
    let mut names: Vec<String> = Vec::new();
    let mut primaries = std::collections::HashSet::new();
    for n in 0.. {
        let name = format!("orders:{n}");
        if primaries.insert(cluster.primary_for_key(&name)) {
            names.push(name);
        }
        if primaries.len() == 3 {
            break;
        }
    }
    for name in &names {
        hold(
            cluster.node(cluster.primary_for_key(name)),
            name,
            "6f1c0d3e-5a7b-4c2d-9e8f-0a1b2c3d4e5f:1",
        );
    }

    assert_eq!(watched(&url), names);
    let (code, stdout, stderr) = polylock(&url, &["inspect", &names[2], "--json"]);
    assert_eq!(code, 0, "{stderr}");
    let state: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(
        state["holders"][0]["owner"], "6f1c0d3e-5a7b-4c2d-9e8f-0a1b2c3d4e5f:1",
        "{state}"
    );

    let (code, _, stderr) = polylock(&url, &["force-unlock", &names[1], "--yes"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        cluster
            .node(cluster.primary_for_key(&names[1]))
            .command(&["EXISTS", &names[1]])
            .as_deref(),
        Some(":0")
    );
    assert_eq!(watched(&url), [names[0].clone(), names[2].clone()]);

    // A polylock client's record (a key of its own slot, on some primary) names it, and its
    // metrics reach watch.
    let options = polylock::ClientOptions {
        name: Some("cluster-worker".into()),
        ..polylock::ClientOptions::default()
    };
    let client = polylock::runtime()
        .block_on(polylock::Client::connect_with(&url, options))
        .expect("connect");
    let lock = client.lock("named:1").expect("lock");
    let now = polylock::AcquireOptions::new().wait(std::time::Duration::ZERO);
    assert!(polylock::runtime()
        .block_on(lock.acquire(now))
        .expect("acquire"));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let (code, stdout, stderr) = polylock(&url, &["watch", "named:*", "--once", "--json"]);
        assert_eq!(code, 0, "{stderr}");
        let refresh: serde_json::Value = serde_json::from_str(stdout.trim()).expect("JSON");
        let named = &refresh["locks"][0];
        let holder = &named["holders"][0];
        if holder["client_name"] == "cluster-worker"
            && holder["held_for_ms"].is_u64()
            && named["metrics"]["holds"] == 1
        {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{refresh}");
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    polylock::runtime()
        .block_on(lock.release())
        .expect("release");
}

#[test]
fn inspect_and_watch_follow_sentinel_to_the_primary() {
    let set = SentinelSet::start(1, 1);
    hold(
        set.server(set.primary_port()),
        "jobs:7",
        "6f1c0d3e-5a7b-4c2d-9e8f-0a1b2c3d4e5f:1",
    );
    assert_eq!(watched(&set.url()), ["jobs:7"]);
    let (code, stdout, stderr) = polylock(&set.url(), &["inspect", "jobs:7"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains("6f1c0d3e-5a7b-4c2d-9e8f-0a1b2c3d4e5f:1"),
        "{stdout}"
    );
}
