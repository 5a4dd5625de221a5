//! `--key-prefix` of `inspect`, `watch`, `force-unlock` and `check --permissions`, against a
//! real redis-server: the CLI sees the names as clients with that `key_prefix` see them.

use std::process::Command;
use std::time::Duration;

use polylock::{AcquireOptions, Client};
use polylock_testkit::RedisServer;

const BINARY: &str = env!("CARGO_BIN_EXE_polylock");

/// Runs `polylock ARGS`: (exit code, stdout, stderr).
fn polylock(args: &[&str]) -> (i32, String, String) {
    let output = Command::new(BINARY)
        .args(args)
        .env_remove("POLYLOCK_REDIS_URL")
        .env_remove("POLYLOCK_KEY_PREFIX")
        .output()
        .expect("run polylock");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn json(text: &str) -> serde_json::Value {
    serde_json::from_str(text.trim()).unwrap_or_else(|_| panic!("not JSON: {text}"))
}

fn prefixed_client(url: &str, prefix: &str) -> Client {
    polylock::runtime()
        .block_on(
            Client::builder(url)
                .key_prefix(prefix)
                .connect_timeout(Duration::from_secs(2))
                .connect(),
        )
        .expect("connect")
}

#[test]
fn inspect_watch_and_force_unlock_find_the_names_under_the_prefix() {
    let server = RedisServer::start();
    let url = server.url();
    let client = prefixed_client(&url, "t7:");
    let lock = client.lock("orders:1").unwrap();
    assert!(polylock::runtime()
        .block_on(lock.acquire(AcquireOptions::new().no_wait()))
        .unwrap());

    let (code, out, err) = polylock(&[
        "inspect",
        "orders:1",
        "-u",
        &url,
        "--key-prefix",
        "t7:",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let state = json(&out);
    assert_eq!(state["name"], "orders:1");
    assert_eq!(state["kind"], "plain");
    assert_eq!(state["holders"][0]["owner"], lock.owner());
    // Without the prefix the name is another, free one.
    let (code, out, err) = polylock(&["inspect", "orders:1", "-u", &url, "--json"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(json(&out)["kind"], "none");

    let (code, out, err) = polylock(&[
        "watch",
        "orders:*",
        "-u",
        &url,
        "--key-prefix",
        "t7:",
        "--once",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(json(&out)["locks"][0]["name"], "orders:1", "{out}");

    let (code, _, err) = polylock(&[
        "force-unlock",
        "orders:1",
        "-u",
        &url,
        "--key-prefix",
        "t7:",
        "--yes",
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(server.int(&["EXISTS", "t7:orders:1"]), 0);

    let (code, _, err) = polylock(&["inspect", "orders:1", "-u", &url, "--key-prefix", "{t7}:"]);
    assert_eq!(code, 2, "a bad prefix is a usage error: {err}");
    assert!(err.contains("key_prefix must not contain '{'"), "{err}");
}

#[test]
fn check_permissions_prints_and_checks_the_rule_under_the_key_prefix() {
    let server = RedisServer::start();
    let (code, out, err) = polylock(&[
        "check",
        "--permissions",
        "--key-prefix",
        "t7:",
        "--prefix",
        "app:",
        "--json",
        "-u",
        &server.url(),
    ]);
    assert_eq!(code, 0, "{err}");
    let report = json(&out);
    assert_eq!(report["prefix"], "t7:app:");
    let rule: Vec<String> = report["rule"]
        .as_array()
        .unwrap()
        .iter()
        .map(|arg| arg.as_str().unwrap().to_owned())
        .collect();
    for expected in ["~t7:app:*", "~t7:polylock:client:*", "&redisson_*{t7:app:*"] {
        assert!(
            rule.iter().any(|arg| arg == expected),
            "{expected} not in {rule:?}"
        );
    }
    assert!(!rule.iter().any(|arg| arg == "~app:*"), "{rule:?}");

    // A user with exactly that rule: nothing missing, and a prefixed client locks under it.
    let mut command = vec!["ACL", "SETUSER", "tenant", "on", ">secret"];
    command.extend(rule.iter().map(String::as_str));
    assert_eq!(server.command(&command).as_deref(), Some("+OK"));
    let url = format!("redis://tenant:secret@127.0.0.1:{}", server.port());
    let (code, out, err) = polylock(&[
        "check",
        "--permissions",
        "--key-prefix",
        "t7:",
        "--prefix",
        "app:",
        "--json",
        "-u",
        &url,
    ]);
    assert_eq!(code, 0, "{out} {err}");
    let report = json(&out);
    let missing: Vec<&serde_json::Value> = report["missing"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|missing| !missing["optional"].as_bool().unwrap())
        .collect();
    assert!(missing.is_empty(), "{missing:?}");
    let client = prefixed_client(&url, "t7:");
    let lock = client.fair_lock("app:jobs").unwrap();
    let runtime = polylock::runtime();
    assert!(runtime
        .block_on(lock.acquire(AcquireOptions::new().no_wait()))
        .unwrap());
    runtime.block_on(lock.release()).unwrap();
    // The same user without the key prefix may not touch the unprefixed name.
    let (code, out, _) = polylock(&[
        "check",
        "--permissions",
        "--prefix",
        "app:",
        "--json",
        "-u",
        &url,
    ]);
    assert_eq!(code, 1, "{out}");
}
