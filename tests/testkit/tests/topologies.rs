//! The multi-server topologies work, as the redis crate's own cluster and sentinel clients see
//! them: each is started once and taken through its faults in order (the tests of this file
//! run in parallel, so the file costs about as long as the slower topology).

use std::time::Instant;

use polylock_testkit::{start_many, RedisCluster, RedisSentinel, Role};
use redis::cluster::ClusterClient;
use redis::sentinel::{SentinelClient, SentinelServerType};
use redis::Commands;

/// Writes `key` on `primary` and waits until `replicas` replicas have it, so that a failover
/// right after cannot lose it.
fn write_replicated(server: &polylock_testkit::RedisServer, key: &str, value: &str, replicas: i64) {
    let mut connection = server.connection().expect("connect to the primary");
    let _: () = connection.set(key, value).expect("SET on the primary");
    let acknowledged: i64 = redis::cmd("WAIT")
        .arg(replicas)
        .arg(5000)
        .query(&mut connection)
        .expect("WAIT");
    assert_eq!(acknowledged, replicas, "replicas that have {key}");
}

#[test]
fn cluster_serves_through_failover_migration_and_a_killed_primary() {
    let started = Instant::now();
    let mut cluster = RedisCluster::start();
    let nodes = cluster.nodes();
    assert_eq!(nodes.len(), 6, "{nodes:?}");
    assert_eq!(cluster.primaries().len(), 3);
    assert_eq!(cluster.replicas().len(), 3);
    assert!(cluster.url().starts_with("redis+cluster://127.0.0.1:"));
    assert_eq!(cluster.url().matches(',').count(), 5, "{}", cluster.url());
    eprintln!("cluster started in {:?}", started.elapsed());

    let client = ClusterClient::new(cluster.node_urls()).expect("cluster client");
    let mut connection = client.get_connection().expect("connect to the cluster");
    let _: () = connection.set("{failover}key", "before").unwrap();
    let value: String = connection.get("{failover}key").unwrap();
    assert_eq!(value, "before");

    // A manual failover: the replica serves the slot, the client follows the MOVED.
    let step = Instant::now();
    let old_primary = cluster.primary_for_key("{failover}key");
    let replica = cluster.replica_of(old_primary);
    cluster.failover(replica);
    assert_eq!(cluster.primary_for_key("{failover}key"), replica);
    let demoted = cluster
        .nodes()
        .into_iter()
        .find(|node| node.port == old_primary)
        .unwrap();
    assert_eq!(
        (demoted.role, demoted.primary_port),
        (Role::Replica, Some(replica))
    );
    let value: String = connection.get("{failover}key").unwrap();
    assert_eq!(value, "before");
    let _: () = connection.set("{failover}key", "after").unwrap();
    let value: String = cluster
        .server(replica)
        .query(redis::cmd("GET").arg("{failover}key"))
        .unwrap();
    assert_eq!(value, "after", "the write reached the new primary");
    eprintln!("cluster failover in {:?}", step.elapsed());

    // A live slot migration moves the key; the client still reads it.
    let step = Instant::now();
    let _: () = connection.set("{moving}key", "moved").unwrap();
    let slot = cluster.slot_for_key("{moving}key");
    let source = cluster.primary_for_slot(slot);
    let target = *cluster
        .primaries()
        .iter()
        .find(|port| **port != source)
        .unwrap();
    cluster.migrate_slot(slot, target);
    assert_eq!(cluster.primary_for_slot(slot), target);
    let on_target: String = cluster
        .server(target)
        .query(redis::cmd("GET").arg("{moving}key"))
        .unwrap();
    assert_eq!(on_target, "moved");
    let on_source: i64 = cluster
        .server(source)
        .query(redis::cmd("EXISTS").arg("{moving}key"))
        .unwrap_or(-1);
    assert_ne!(on_source, 1, "the key left the source");
    let value: String = connection.get("{moving}key").unwrap();
    assert_eq!(value, "moved");
    eprintln!("cluster slot migration in {:?}", step.elapsed());

    // A killed primary: its replica takes over with the data. A new connection, as the redis
    // crate's sync cluster connection retries a refused connection on the same address rather
    // than reading the slot map again.
    let step = Instant::now();
    let doomed = cluster.primary_for_key("{killed}key");
    let heir = cluster.replica_of(doomed);
    write_replicated(cluster.server(doomed), "{killed}key", "kept", 1);
    cluster.kill(doomed);
    assert_eq!(cluster.primary_for_key("{killed}key"), heir);
    assert!(cluster
        .nodes()
        .iter()
        .any(|node| node.port == doomed && node.failed));
    let mut connection = ClusterClient::new(cluster.node_urls())
        .and_then(|client| client.get_connection())
        .expect("connect to the cluster without the killed node");
    let value: String = connection.get("{killed}key").unwrap();
    assert_eq!(value, "kept");
    let _: () = connection.set("{killed}key", "rewritten").unwrap();
    eprintln!("cluster kill and takeover in {:?}", step.elapsed());

    // Restarted, the killed node rejoins as a replica of its heir.
    let step = Instant::now();
    cluster.restart(doomed);
    let rejoined = cluster
        .nodes()
        .into_iter()
        .find(|node| node.port == doomed)
        .unwrap();
    assert_eq!(
        (rejoined.role, rejoined.primary_port),
        (Role::Replica, Some(heir))
    );
    eprintln!(
        "cluster restart in {:?}; whole test {:?}",
        step.elapsed(),
        started.elapsed()
    );
}

#[test]
fn sentinel_follows_a_failover_and_a_killed_primary() {
    let started = Instant::now();
    let mut deployment = RedisSentinel::start();
    let first_primary = deployment.primary();
    assert_eq!(deployment.replicas().len(), 2);
    assert_eq!(deployment.sentinels().len(), 3);
    assert!(deployment.url().starts_with("redis+sentinel://127.0.0.1:"));
    assert!(deployment
        .url()
        .ends_with(&format!("/{}", deployment.master_name())));
    eprintln!("sentinel started in {:?}", started.elapsed());

    let mut client = SentinelClient::build(
        deployment.sentinel_urls(),
        deployment.master_name().to_owned(),
        None,
        SentinelServerType::Master,
    )
    .expect("sentinel client");
    let mut connection = client.get_connection().expect("connect to the primary");
    let _: () = connection.set("key", "before").unwrap();
    let value: String = connection.get("key").unwrap();
    assert_eq!(value, "before");

    let step = Instant::now();
    write_replicated(deployment.server(first_primary), "key", "before", 2);
    let second_primary = deployment.failover();
    assert_ne!(second_primary, first_primary);
    assert!(
        deployment.replicas().contains(&first_primary),
        "the old primary is a replica now"
    );
    let role: String = deployment.server(second_primary).info("replication")["role"].clone();
    assert_eq!(role, "master");
    let mut connection = client.get_connection().expect("connect to the new primary");
    let value: String = connection.get("key").unwrap();
    assert_eq!(value, "before");
    let _: () = connection.set("key", "after").unwrap();
    eprintln!("sentinel failover in {:?}", step.elapsed());

    let step = Instant::now();
    write_replicated(deployment.server(second_primary), "key", "after", 2);
    let third_primary = deployment.kill_primary();
    assert_ne!(third_primary, second_primary);
    assert_eq!(deployment.replicas().len(), 1);
    let mut connection = client
        .get_connection()
        .expect("connect to the promoted replica");
    let value: String = connection.get("key").unwrap();
    assert_eq!(value, "after");
    let _: () = connection.set("key", "last").unwrap();
    eprintln!(
        "sentinel kill and promotion in {:?}; whole test {:?}",
        step.elapsed(),
        started.elapsed()
    );
}

#[test]
fn start_many_starts_independent_servers() {
    let servers = start_many(3);
    for (index, server) in servers.iter().enumerate() {
        assert_eq!(
            server.command(&["SET", "k", &index.to_string()]).as_deref(),
            Some("+OK")
        );
    }
    for (index, server) in servers.iter().enumerate() {
        assert_eq!(
            server.command(&["GET", "k"]),
            Some(index.to_string()),
            "each has its own data"
        );
    }
}
