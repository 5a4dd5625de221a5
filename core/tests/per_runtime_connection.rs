//! A single server's command connection per calling runtime (issue 44): a call from a task of
//! a multi-thread runtime other than polylock's goes, once that runtime's connection is open, on
//! a connection whose driver runs there. Each case on a real server, seen in `CLIENT LIST`: the
//! connection opens at the first call from such a runtime and carries its scripts; none opens for
//! a current-thread runtime; a runtime shut down closes its connection and a hold taken there is
//! released from elsewhere; at most eight per client; closing the client closes them; a killed
//! one reconnects.

mod common;

use std::time::{Duration, Instant};

use common::*;
use polylock::{AcquireOptions, Client, Lock};
use tokio::runtime::{Builder, Runtime};

const LIMIT: Duration = Duration::from_secs(20);

fn multi_thread() -> Runtime {
    Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn current_thread() -> Runtime {
    Builder::new_current_thread().enable_all().build().unwrap()
}

/// The server's normal connections: id and last command.
fn connections(server: &RedisServer) -> Vec<(String, String)> {
    let list = server
        .command(&["CLIENT", "LIST", "TYPE", "normal"])
        .unwrap();
    list.lines()
        .filter_map(|line| {
            let field = |name: &str| {
                line.split(' ')
                    .find_map(|field| field.strip_prefix(name))
                    .map(str::to_owned)
            };
            Some((field("id=")?, field("cmd=")?))
        })
        // Not the test's own `CLIENT LIST` connection.
        .filter(|(_, cmd)| !cmd.starts_with("client"))
        .collect()
}

/// Polls `check` (every 10 ms, for at most `LIMIT`) until it gives a value; fails naming
/// `what` and the server's last connections if it never does.
fn until<T>(server: &RedisServer, what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + LIMIT;
    loop {
        if let Some(value) = check() {
            return value;
        }
        assert!(
            Instant::now() < deadline,
            "{what}; the server has {:?}",
            connections(server)
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Waits until the server has `count` normal connections besides the test's own.
fn wait_for_connections(server: &RedisServer, count: usize) -> Vec<(String, String)> {
    until(server, &format!("expected {count} connections"), || {
        Some(connections(server)).filter(|now| now.len() == count)
    })
}

fn ids(connections: &[(String, String)]) -> Vec<String> {
    connections.iter().map(|(id, _)| id.clone()).collect()
}

/// The ids in `now` that were not in `before`.
fn opened_since(before: &[String], now: &[(String, String)]) -> Vec<String> {
    ids(now)
        .into_iter()
        .filter(|id| !before.contains(id))
        .collect()
}

/// One acquire and release of `lock`, awaited by a task spawned on `runtime`.
fn cycle_on(runtime: &Runtime, lock: &Lock) {
    let lock = lock.clone();
    runtime
        .block_on(runtime.spawn(async move {
            assert!(lock.acquire(AcquireOptions::new()).await.unwrap());
            lock.release().await.unwrap();
        }))
        .unwrap();
}

/// The client (connected on a runtime of its own, as an application's main would) and the
/// connections it opened: the command connection and the pub/sub one.
fn connected(server: &RedisServer, home: &Runtime) -> (Client, usize) {
    let client = home.block_on(client(server));
    let baseline = connections(server).len();
    (client, baseline)
}

#[test]
fn a_multi_thread_runtime_gets_a_connection_of_its_own_and_a_current_thread_one_does_not() {
    let server = RedisServer::start();
    let home = multi_thread();
    let (client, baseline) = connected(&server, &home);
    let lock = client.lock("orders:1").unwrap();

    // A current-thread runtime: its calls use the client's connection; none opens.
    let single = current_thread();
    for _ in 0..20 {
        single.block_on(async {
            assert!(lock.acquire(AcquireOptions::new()).await.unwrap());
            lock.release().await.unwrap();
        });
    }
    assert_eq!(connections(&server).len(), baseline);

    // A multi-thread runtime: its first call opens one connection there...
    let before = ids(&connections(&server));
    let service = multi_thread();
    cycle_on(&service, &lock);
    let opened = wait_for_connections(&server, baseline + 1);
    let new_id = opened_since(&before, &opened).remove(0);
    // ...which carries that runtime's scripts from then on.
    until(&server, "no script on the new connection", || {
        cycle_on(&service, &lock);
        connections(&server)
            .iter()
            .any(|(id, cmd)| *id == new_id && cmd == "evalsha")
            .then_some(())
    });
    // More calls from there open nothing more.
    for _ in 0..20 {
        cycle_on(&service, &lock);
    }
    assert_eq!(connections(&server).len(), baseline + 1);
    drop(client);
}

#[test]
fn a_runtime_shut_down_closes_its_connection_frees_its_slot_and_its_hold_is_released_elsewhere() {
    let server = RedisServer::start();
    let home = multi_thread();
    let (client, baseline) = connected(&server, &home);
    let lock = client.lock("orders:2").unwrap();

    // Eight runtimes take every slot.
    let mut services: Vec<Runtime> = (0..8).map(|_| multi_thread()).collect();
    for service in &services {
        cycle_on(service, &lock);
    }
    wait_for_connections(&server, baseline + 8);
    // A hold taken on the first, which then shuts down.
    let service = services.remove(0);
    let held = lock.clone();
    service
        .block_on(service.spawn(async move {
            assert!(held.acquire(AcquireOptions::new()).await.unwrap());
        }))
        .unwrap();
    service.shutdown_timeout(Duration::from_secs(5));
    wait_for_connections(&server, baseline + 7);

    // Released from a current-thread runtime, on the client's connection.
    current_thread().block_on(async {
        lock.release().await.unwrap();
        assert!(!lock.is_held());
    });
    // Another runtime gets the slot the shut-down one freed.
    let next = multi_thread();
    cycle_on(&next, &lock);
    wait_for_connections(&server, baseline + 8);
    drop(client);
}

#[test]
fn at_most_eight_runtimes_get_one_and_closing_the_client_closes_them() {
    let server = RedisServer::start();
    let home = multi_thread();
    let (client, baseline) = connected(&server, &home);
    let lock = client.lock("orders:3").unwrap();

    let before = ids(&connections(&server));
    let services: Vec<Runtime> = (0..10).map(|_| multi_thread()).collect();
    for service in &services {
        cycle_on(service, &lock);
    }
    let opened = opened_since(&before, &wait_for_connections(&server, baseline + 8));
    // The ninth and tenth runtimes were refused a slot: more calls open nothing.
    for service in &services {
        for _ in 0..5 {
            cycle_on(service, &lock);
        }
    }
    assert_eq!(connections(&server).len(), baseline + 8);

    // Closing the client closes them.
    client.close();
    until(&server, "still open after close", || {
        let now = ids(&connections(&server));
        opened.iter().all(|id| !now.contains(id)).then_some(())
    });
    drop(client);
}

#[test]
fn a_killed_runtime_connection_reconnects() {
    let server = RedisServer::start();
    let home = multi_thread();
    let (client, baseline) = connected(&server, &home);
    let lock = client.lock("orders:4").unwrap();

    let service = multi_thread();
    let before = ids(&connections(&server));
    let new_id = until(&server, "no connection of its own", || {
        cycle_on(&service, &lock);
        connections(&server)
            .into_iter()
            .find(|(id, cmd)| !before.contains(id) && cmd == "evalsha")
            .map(|(id, _)| id)
    });
    server.command(&["CLIENT", "KILL", "ID", &new_id]);
    // The next calls find it gone; it connects again (one retry), nothing fails.
    for _ in 0..5 {
        cycle_on(&service, &lock);
    }
    let now = wait_for_connections(&server, baseline + 1);
    assert!(now.iter().all(|(id, _)| *id != new_id), "{now:?}");
    drop(client);
}
