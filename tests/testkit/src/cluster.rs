//! A Redis Cluster of real servers: N primaries with R replicas each, created with
//! `redis-cli --cluster create`, and the faults a test needs: killing a node (its replica takes
//! over), a manual failover, a live slot migration. Nodes are named by their port.

use std::collections::HashSet;
use std::process::Command;

use crate::{wait_for, RedisServer};

/// Every cluster node's arguments. A 2 s node timeout replaces a killed primary within a few
/// seconds yet does not fail a live node on a busy machine; validity factor 0 lets any replica
/// take over however long it was cut off; no replica migration keeps the layout a test set up;
/// a full sync starts at once instead of after the 5 s default delay.
const NODE_ARGS: &[&str] = &[
    "--repl-diskless-sync-delay",
    "0",
    "--cluster-enabled",
    "yes",
    "--cluster-config-file",
    "nodes.conf",
    "--cluster-node-timeout",
    "2000",
    "--cluster-replica-validity-factor",
    "0",
    "--cluster-allow-replica-migration",
    "no",
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Primary,
    Replica,
}

/// One node as the cluster sees it (a line of CLUSTER NODES).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterNode {
    pub port: u16,
    pub id: String,
    pub role: Role,
    /// The port of the primary a replica follows.
    pub primary_port: Option<u16>,
    /// The slot ranges a primary serves, as CLUSTER NODES writes them: `0-5460`, `7000`.
    pub slots: Vec<String>,
    /// The cluster agreed that the node is down (flag `fail`).
    pub failed: bool,
}

impl ClusterNode {
    pub fn serves_slot(&self, slot: u16) -> bool {
        self.slots.iter().any(|range| {
            let (first, last) = range.split_once('-').unwrap_or((range, range));
            match (first.parse::<u16>(), last.parse::<u16>()) {
                (Ok(first), Ok(last)) => (first..=last).contains(&slot),
                _ => false,
            }
        })
    }
}

/// A running cluster on loopback; every node is killed when it is dropped.
pub struct RedisCluster {
    servers: Vec<RedisServer>,
    /// Ports of the nodes killed by `kill` (and not restarted).
    killed: HashSet<u16>,
}

impl RedisCluster {
    /// 3 primaries with 1 replica each.
    pub fn start() -> RedisCluster {
        Self::start_with(3, 1)
    }

    /// `primaries` primaries (at least 3) with `replicas_per_primary` replicas each; returns
    /// once every node reports `cluster_state:ok`, all agree on the slot map and every replica
    /// replicates.
    pub fn start_with(primaries: usize, replicas_per_primary: usize) -> RedisCluster {
        assert!(
            primaries >= 3,
            "redis-cli --cluster create needs 3 primaries or more"
        );
        let servers: Vec<RedisServer> = (0..primaries * (1 + replicas_per_primary))
            .map(|_| RedisServer::start_with(NODE_ARGS))
            .collect();
        let mut create = Command::new("redis-cli");
        create.arg("--cluster").arg("create");
        for server in &servers {
            create.arg(format!("127.0.0.1:{}", server.port()));
        }
        create
            .arg("--cluster-replicas")
            .arg(replicas_per_primary.to_string())
            .arg("--cluster-yes");
        let output = create
            .output()
            .expect("redis-cli did not run; is it installed?");
        assert!(
            output.status.success(),
            "redis-cli --cluster create failed:\n{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        let cluster = RedisCluster {
            servers,
            killed: HashSet::new(),
        };
        wait_for(
            &format!(
                "a new cluster of {primaries} primaries with {replicas_per_primary} replicas each"
            ),
            || {
                let nodes = cluster.settled()?;
                let primary_ports: Vec<u16> = nodes
                    .iter()
                    .filter(|node| node.role == Role::Primary)
                    .map(|node| node.port)
                    .collect();
                let complete = primary_ports.len() == primaries
                    && primary_ports.iter().all(|primary| {
                        nodes
                            .iter()
                            .filter(|node| node.primary_port == Some(*primary))
                            .count()
                            == replicas_per_primary
                    });
                if complete {
                    Ok(())
                } else {
                    Err(format!("layout {nodes:?}"))
                }
            },
        );
        cluster
    }

    /// `redis+cluster://127.0.0.1:p1,127.0.0.1:p2,...`: every running node as a seed.
    pub fn url(&self) -> String {
        let seeds: Vec<String> = self
            .live_servers()
            .map(|server| format!("127.0.0.1:{}", server.port()))
            .collect();
        format!("redis+cluster://{}", seeds.join(","))
    }

    /// `redis://127.0.0.1:p` of every running node (the seeds for a cluster client that takes
    /// a list of node URLs).
    pub fn node_urls(&self) -> Vec<String> {
        self.live_servers().map(RedisServer::url).collect()
    }

    /// The nodes as a running node sees them (killed ones included, marked `failed`).
    pub fn nodes(&self) -> Vec<ClusterNode> {
        let server = self.live_servers().next().expect("every node was killed");
        let text: String = server
            .query(redis::cmd("CLUSTER").arg("NODES"))
            .expect("CLUSTER NODES");
        parse_nodes(&text).unwrap_or_else(|error| panic!("{error}"))
    }

    /// Ports of the running primaries.
    pub fn primaries(&self) -> Vec<u16> {
        self.live_nodes_with(Role::Primary)
    }

    /// Ports of the running replicas.
    pub fn replicas(&self) -> Vec<u16> {
        self.live_nodes_with(Role::Replica)
    }

    /// The node on `port` (for commands, `pause`, `kill_clients`...).
    pub fn server(&self, port: u16) -> &RedisServer {
        self.servers
            .iter()
            .find(|server| server.port() == port)
            .unwrap_or_else(|| panic!("no cluster node on port {port}"))
    }

    /// The hash slot of `key` (CLUSTER KEYSLOT).
    pub fn slot_for_key(&self, key: &str) -> u16 {
        let server = self.live_servers().next().expect("every node was killed");
        server
            .query(redis::cmd("CLUSTER").arg("KEYSLOT").arg(key))
            .expect("CLUSTER KEYSLOT")
    }

    /// The port of the primary serving `key`'s slot.
    pub fn primary_for_key(&self, key: &str) -> u16 {
        self.primary_for_slot(self.slot_for_key(key))
    }

    /// The port of the primary serving `slot`.
    pub fn primary_for_slot(&self, slot: u16) -> u16 {
        let nodes = self.nodes();
        nodes
            .iter()
            .find(|node| node.role == Role::Primary && !node.failed && node.serves_slot(slot))
            .map(|node| node.port)
            .unwrap_or_else(|| panic!("no primary serves slot {slot}: {nodes:?}"))
    }

    /// The port of a running replica of `primary`.
    pub fn replica_of(&self, primary: u16) -> u16 {
        let nodes = self.nodes();
        nodes
            .iter()
            .find(|node| node.primary_port == Some(primary) && !self.killed.contains(&node.port))
            .map(|node| node.port)
            .unwrap_or_else(|| panic!("primary {primary} has no running replica: {nodes:?}"))
    }

    /// Kills the node on `port` as a crash would, then waits until the cluster marks it failed,
    /// a replica has taken over its slots if it was a primary, and the cluster is ok again.
    pub fn kill(&mut self, port: u16) {
        self.server_mut(port).kill();
        self.killed.insert(port);
        wait_for(
            &format!("the cluster to mark node {port} failed and replace it if it was a primary"),
            || self.settled().map(drop),
        );
    }

    /// Starts a killed node again on its port with its old nodes.conf: it rejoins (a former
    /// primary as a replica of the node that took over). Waits until the cluster agrees.
    pub fn restart(&mut self, port: u16) {
        self.server_mut(port).restart();
        self.killed.remove(&port);
        wait_for(&format!("restarted node {port} to rejoin"), || {
            self.settled().map(drop)
        });
    }

    /// A manual failover (CLUSTER FAILOVER sent to `replica`): waits until `replica` is a
    /// primary, its old primary (if running) replicates from it, and the cluster agrees.
    pub fn failover(&mut self, replica: u16) {
        let old_primary = self
            .nodes()
            .into_iter()
            .find(|node| node.port == replica)
            .and_then(|node| node.primary_port)
            .unwrap_or_else(|| panic!("node {replica} is not a replica"));
        let reply: redis::Value = self
            .server(replica)
            .query(redis::cmd("CLUSTER").arg("FAILOVER"))
            .expect("CLUSTER FAILOVER");
        assert_eq!(reply, redis::Value::Okay, "CLUSTER FAILOVER on {replica}");
        let old_primary_runs = !self.killed.contains(&old_primary);
        wait_for(
            &format!("replica {replica} to take over from primary {old_primary}"),
            || {
                let nodes = self.settled()?;
                let role_of = |port: u16| nodes.iter().find(|node| node.port == port);
                let promoted = role_of(replica).is_some_and(|node| node.role == Role::Primary);
                let demoted = !old_primary_runs
                    || role_of(old_primary).is_some_and(|node| node.primary_port == Some(replica));
                if promoted && demoted {
                    Ok(())
                } else {
                    Err(format!("{nodes:?}"))
                }
            },
        );
    }

    /// Moves `slot` with its keys to primary `to` while the cluster serves it, the way
    /// `redis-cli --cluster reshard` does: IMPORTING on the target, MIGRATING on the source,
    /// MIGRATE of every key, then SETSLOT NODE on every primary. Waits until all nodes agree.
    pub fn migrate_slot(&mut self, slot: u16, to: u16) {
        wait_for("the cluster to agree before a slot migration", || {
            self.settled().map(drop)
        });
        let nodes = self.nodes();
        let from = self.primary_for_slot(slot);
        if from == to {
            return;
        }
        let id_of = |port: u16| {
            nodes
                .iter()
                .find(|node| node.port == port && node.role == Role::Primary)
                .map(|node| node.id.clone())
                .unwrap_or_else(|| panic!("node {port} is not a primary: {nodes:?}"))
        };
        let (from_id, to_id) = (id_of(from), id_of(to));
        let setslot = |port: u16, state: &str, id: &str| {
            let reply: redis::Value = self
                .server(port)
                .query(
                    redis::cmd("CLUSTER")
                        .arg("SETSLOT")
                        .arg(slot)
                        .arg(state)
                        .arg(id),
                )
                .unwrap_or_else(|error| {
                    panic!("CLUSTER SETSLOT {slot} {state} on {port}: {error}")
                });
            assert_eq!(
                reply,
                redis::Value::Okay,
                "CLUSTER SETSLOT {slot} {state} on {port}"
            );
        };
        setslot(to, "IMPORTING", &from_id);
        setslot(from, "MIGRATING", &to_id);
        loop {
            let keys: Vec<Vec<u8>> = self
                .server(from)
                .query(
                    redis::cmd("CLUSTER")
                        .arg("GETKEYSINSLOT")
                        .arg(slot)
                        .arg(100),
                )
                .expect("CLUSTER GETKEYSINSLOT");
            if keys.is_empty() {
                break;
            }
            let reply: redis::Value = self
                .server(from)
                .query(
                    redis::cmd("MIGRATE")
                        .arg("127.0.0.1")
                        .arg(to)
                        .arg("")
                        .arg(0)
                        .arg(5000)
                        .arg("KEYS")
                        .arg(&keys),
                )
                .unwrap_or_else(|error| panic!("MIGRATE of slot {slot} to {to}: {error}"));
            assert_eq!(reply, redis::Value::Okay, "MIGRATE of slot {slot} to {to}");
        }
        // The target first, so that it owns the slot before the source redirects to it.
        setslot(to, "NODE", &to_id);
        setslot(from, "NODE", &to_id);
        for other in self.primaries() {
            if other != to && other != from {
                setslot(other, "NODE", &to_id);
            }
        }
        wait_for(
            &format!("the cluster to agree that {to} serves slot {slot}"),
            || {
                let nodes = self.settled()?;
                let owner = nodes
                    .iter()
                    .find(|node| node.role == Role::Primary && node.serves_slot(slot));
                match owner {
                    Some(node) if node.port == to => Ok(()),
                    other => Err(format!("slot {slot} is served by {other:?}")),
                }
            },
        );
    }

    /// Waits until every running node reports `cluster_state:ok`, all see the same nodes,
    /// roles and slots (killed nodes marked failed, nothing in handshake or migration), and
    /// every running replica's link to its primary is up.
    pub fn wait_until_settled(&self) {
        wait_for("the cluster to agree", || self.settled().map(drop));
    }

    /// Kills every node now (dropping the cluster does the same and removes their directories).
    pub fn stop(&mut self) {
        for server in &mut self.servers {
            server.kill();
        }
    }

    fn settled(&self) -> Result<Vec<ClusterNode>, String> {
        let mut agreed: Option<(u16, String)> = None;
        for server in self.live_servers() {
            let port = server.port();
            let info: String = server
                .query(redis::cmd("CLUSTER").arg("INFO"))
                .map_err(|error| format!("node {port}: CLUSTER INFO: {error}"))?;
            if !info
                .lines()
                .any(|line| line.trim_end() == "cluster_state:ok")
            {
                return Err(format!("node {port} is not ok: {info}"));
            }
            let text: String = server
                .query(redis::cmd("CLUSTER").arg("NODES"))
                .map_err(|error| format!("node {port}: CLUSTER NODES: {error}"))?;
            let view = comparable_view(&text)?;
            match &agreed {
                None => agreed = Some((port, view)),
                Some((first, first_view)) if *first_view != view => {
                    return Err(format!(
                        "nodes {first} and {port} disagree:\n{first_view}\n-- versus --\n{view}"
                    ))
                }
                Some(_) => {}
            }
        }
        let (_, view) = agreed.ok_or("every node was killed")?;
        let nodes = parse_nodes(&view)?;
        for node in &nodes {
            let killed = self.killed.contains(&node.port);
            if node.failed != killed {
                return Err(format!(
                    "node {} is {} yet marked {}: {view}",
                    node.port,
                    if killed { "killed" } else { "running" },
                    if node.failed { "failed" } else { "not failed" },
                ));
            }
            if node.role == Role::Replica && !killed {
                let link = self.server(node.port).info("replication");
                if link.get("master_link_status").map(String::as_str) != Some("up") {
                    return Err(format!("replica {} is not linked: {link:?}", node.port));
                }
            }
        }
        for server in self.live_servers() {
            if !nodes.iter().any(|node| node.port == server.port()) {
                return Err(format!("node {} is missing: {view}", server.port()));
            }
        }
        Ok(nodes)
    }

    fn live_servers(&self) -> impl Iterator<Item = &RedisServer> {
        self.servers
            .iter()
            .filter(|server| !self.killed.contains(&server.port()))
    }

    fn live_nodes_with(&self, role: Role) -> Vec<u16> {
        self.nodes()
            .into_iter()
            .filter(|node| node.role == role && !self.killed.contains(&node.port))
            .map(|node| node.port)
            .collect()
    }

    fn server_mut(&mut self, port: u16) -> &mut RedisServer {
        self.servers
            .iter_mut()
            .find(|server| server.port() == port)
            .unwrap_or_else(|| panic!("no cluster node on port {port}"))
    }
}

/// CLUSTER NODES reduced to what all nodes must agree on, one sorted line per node:
/// `<id> <port> <flags without myself> <primary id> <slots>`. An error while a node is still
/// being met, only suspected down (`fail?`), or a slot is migrating.
fn comparable_view(text: &str) -> Result<String, String> {
    let mut lines = Vec::new();
    for line in text.lines().filter(|line| !line.trim().is_empty()) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.len() < 8 {
            return Err(format!("unreadable CLUSTER NODES line {line:?}"));
        }
        let flags: Vec<&str> = fields[2]
            .split(',')
            .filter(|flag| *flag != "myself")
            .collect();
        if let Some(unsettled) = flags
            .iter()
            .find(|flag| matches!(**flag, "handshake" | "noaddr" | "fail?"))
        {
            return Err(format!("a node is in state {unsettled}: {line}"));
        }
        if fields[8..].iter().any(|slot| slot.starts_with('[')) {
            return Err(format!("a slot is migrating: {line}"));
        }
        // The same 9+ columns as CLUSTER NODES (so `parse_nodes` reads it); the columns each
        // node fills in for itself (ping times, epoch, link state) are blanked.
        lines.push(format!(
            "{} {} {} {} - - - - {}",
            fields[0],
            fields[1],
            flags.join(","),
            fields[3],
            fields[8..].join(" ")
        ));
    }
    lines.sort();
    Ok(lines.join("\n"))
}

/// The nodes of a CLUSTER NODES reply.
fn parse_nodes(text: &str) -> Result<Vec<ClusterNode>, String> {
    let mut rows = Vec::new();
    for line in text.lines().filter(|line| !line.trim().is_empty()) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let port = fields
            .get(1)
            .and_then(|address| address.split('@').next())
            .and_then(|address| address.rsplit(':').next())
            .and_then(|port| port.parse::<u16>().ok())
            .ok_or_else(|| format!("unreadable CLUSTER NODES line {line:?}"))?;
        let flags: Vec<&str> = fields[2].split(',').collect();
        let role = if flags.contains(&"master") {
            Role::Primary
        } else {
            Role::Replica
        };
        rows.push((
            fields[0].to_owned(),
            port,
            role,
            fields[3].to_owned(),
            flags.contains(&"fail"),
            fields[8..]
                .iter()
                .map(|slot| slot.to_string())
                .collect::<Vec<_>>(),
        ));
    }
    let port_of = |id: &str| rows.iter().find(|row| row.0 == id).map(|row| row.1);
    Ok(rows
        .iter()
        .map(|(id, port, role, primary_id, failed, slots)| ClusterNode {
            port: *port,
            id: id.clone(),
            role: *role,
            primary_port: if *role == Role::Replica {
                port_of(primary_id)
            } else {
                None
            },
            slots: slots.clone(),
            failed: *failed,
        })
        .collect())
}
