//! A Redis Cluster of real redis-server processes on loopback ports: primaries with replicas,
//! created with `redis-cli --cluster create`, with the operations the deployment tests need
//! (kill a primary and wait for its replica to take over, fail over by hand, move a slot).

use crate::{wait_until, RedisServer, TlsFiles};

/// A cluster node's arguments: a short node timeout, any replica may take over.
const NODE_ARGUMENTS: [&str; 8] = [
    "--cluster-enabled",
    "yes",
    "--cluster-config-file",
    "nodes.conf",
    "--cluster-node-timeout",
    "1000",
    "--cluster-replica-validity-factor",
    "0",
];

pub struct Cluster {
    pub nodes: Vec<RedisServer>,
}

/// One line of `CLUSTER NODES`.
#[derive(Debug, Clone)]
pub struct NodeInfo {
    pub id: String,
    pub port: u16,
    pub primary: bool,
    pub failed: bool,
    /// The id of the primary it replicates (replicas).
    pub replicates: Option<String>,
    pub slots: Vec<(u16, u16)>,
}

impl Cluster {
    /// `primaries` primaries with `replicas` replicas each, every slot covered, every node
    /// agreeing on the slot map.
    pub fn start(primaries: usize, replicas: usize) -> Cluster {
        Cluster::start_with(primaries, replicas, &[])
    }

    /// As [`Cluster::start`], every node with the extra `--option value` arguments after the
    /// kit's own (a later value of an option wins).
    pub fn start_with(primaries: usize, replicas: usize, extra: &[&str]) -> Cluster {
        let count = primaries * (replicas + 1);
        let mut arguments = NODE_ARGUMENTS.to_vec();
        arguments.extend_from_slice(extra);
        let nodes: Vec<RedisServer> = (0..count)
            .map(|_| RedisServer::start_with(&arguments))
            .collect();
        Cluster::create(nodes, primaries, replicas)
    }

    /// As [`Cluster::start`], every node also serving TLS (`tls_url`) with the test
    /// certificates of `files` (client certificates required when `auth_clients`), the cluster
    /// bus and replication over TLS (`tls-cluster`, `tls-replication`): TLS clients are told
    /// the nodes' TLS ports. The plain ports stay open on loopback for the kit's own checks.
    pub fn start_tls(
        primaries: usize,
        replicas: usize,
        files: &TlsFiles,
        auth_clients: bool,
    ) -> Cluster {
        Cluster::start_tls_with(primaries, replicas, files, auth_clients, &[])
    }

    /// As [`Cluster::start_tls`], with extra arguments as [`Cluster::start_with`] takes them.
    pub fn start_tls_with(
        primaries: usize,
        replicas: usize,
        files: &TlsFiles,
        auth_clients: bool,
        extra: &[&str],
    ) -> Cluster {
        let count = primaries * (replicas + 1);
        let mut arguments = NODE_ARGUMENTS.to_vec();
        arguments.extend(["--tls-cluster", "yes", "--tls-replication", "yes"]);
        arguments.extend_from_slice(extra);
        let nodes: Vec<RedisServer> = (0..count)
            .map(|_| RedisServer::start_tls_with(files, "server", auth_clients, &arguments))
            .collect();
        Cluster::create(nodes, primaries, replicas)
    }

    /// The `rediss+cluster://` URL of a cluster started by `start_tls`: every node's TLS port.
    pub fn tls_url(&self) -> String {
        let hosts: Vec<String> = self
            .nodes
            .iter()
            .map(|node| {
                let port = node.tls_port().expect("not started with start_tls");
                format!("127.0.0.1:{port}")
            })
            .collect();
        format!("rediss+cluster://{}", hosts.join(","))
    }

    fn create(nodes: Vec<RedisServer>, primaries: usize, replicas: usize) -> Cluster {
        let mut create = std::process::Command::new(crate::cli_program());
        create.arg("--cluster").arg("create");
        for node in &nodes {
            create.arg(format!("127.0.0.1:{}", node.port()));
        }
        let output = create
            .args(["--cluster-replicas", &replicas.to_string(), "--cluster-yes"])
            .output()
            .expect("redis-cli (POLYLOCK_REDIS_CLI) is installed with redis-server");
        assert!(
            output.status.success(),
            "redis-cli --cluster create failed: {}",
            String::from_utf8_lossy(&output.stdout)
        );
        let cluster = Cluster { nodes };
        cluster.wait_settled(primaries, primaries * replicas);
        cluster
    }

    /// `primaries` primaries without replicas, each started with the extra `--option value`
    /// arguments, every slot covered, made with `CLUSTER ADDSLOTSRANGE` and `CLUSTER MEET`
    /// only: `redis-cli --cluster create` needs `INFO`, which a server started with it renamed
    /// away (as managed services do) does not answer.
    pub fn start_primaries_with(primaries: usize, extra: &[&str]) -> Cluster {
        let mut args = vec![
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            "nodes.conf",
            "--cluster-node-timeout",
            "1000",
        ];
        args.extend_from_slice(extra);
        let nodes: Vec<RedisServer> = (0..primaries)
            .map(|_| RedisServer::start_with(&args))
            .collect();
        const SLOTS: usize = 16384;
        for (i, node) in nodes.iter().enumerate() {
            let first = (i * SLOTS / primaries).to_string();
            let last = ((i + 1) * SLOTS / primaries - 1).to_string();
            let reply = node.command(&["CLUSTER", "ADDSLOTSRANGE", &first, &last]);
            assert_eq!(
                reply.as_deref(),
                Some("+OK"),
                "ADDSLOTSRANGE {first} {last}"
            );
        }
        for node in &nodes[1..] {
            let port = nodes[0].port().to_string();
            let reply = node.command(&["CLUSTER", "MEET", "127.0.0.1", &port]);
            assert_eq!(reply.as_deref(), Some("+OK"), "CLUSTER MEET");
        }
        let cluster = Cluster { nodes };
        cluster.wait_settled(primaries, 0);
        cluster
    }

    /// The URL polylock takes: every node as a seed.
    pub fn url(&self) -> String {
        let hosts: Vec<String> = self
            .nodes
            .iter()
            .map(|node| format!("127.0.0.1:{}", node.port()))
            .collect();
        format!("redis+cluster://{}", hosts.join(","))
    }

    pub fn node(&self, port: u16) -> &RedisServer {
        self.nodes
            .iter()
            .find(|node| node.port() == port)
            .expect("a node of this cluster")
    }

    fn node_mut(&mut self, port: u16) -> &mut RedisServer {
        self.nodes
            .iter_mut()
            .find(|node| node.port() == port)
            .expect("a node of this cluster")
    }

    /// A live node's view of the cluster.
    pub fn topology(&self) -> Vec<NodeInfo> {
        for node in &self.nodes {
            if let Some(text) = node.command(&["CLUSTER", "NODES"]) {
                if !text.starts_with('-') && !text.is_empty() {
                    return parse_nodes(&text);
                }
            }
        }
        panic!("no cluster node answers CLUSTER NODES");
    }

    pub fn slot_of(&self, key: &str) -> u16 {
        let node = self
            .nodes
            .iter()
            .find(|node| node.is_running())
            .expect("a live node");
        node.int(&["CLUSTER", "KEYSLOT", key]) as u16
    }

    /// The port of the primary serving `key`'s slot.
    pub fn primary_for_key(&self, key: &str) -> u16 {
        self.primary_for_slot(self.slot_of(key))
    }

    pub fn primary_for_slot(&self, slot: u16) -> u16 {
        self.topology()
            .into_iter()
            .find(|node| {
                node.primary
                    && !node.failed
                    && node.slots.iter().any(|(l, h)| *l <= slot && slot <= *h)
            })
            .map(|node| node.port)
            .expect("a primary serves every slot")
    }

    /// A healthy replica of the primary on `primary_port`.
    pub fn replica_of(&self, primary_port: u16) -> u16 {
        let topology = self.topology();
        let primary = topology
            .iter()
            .find(|node| node.port == primary_port)
            .expect("the primary is listed");
        topology
            .iter()
            .find(|node| node.replicates.as_deref() == Some(&primary.id) && !node.failed)
            .map(|node| node.port)
            .expect("the primary has a healthy replica")
    }

    /// Another primary than `port`.
    pub fn other_primary(&self, port: u16) -> u16 {
        self.topology()
            .into_iter()
            .find(|node| {
                node.primary && !node.failed && node.port != port && !node.slots.is_empty()
            })
            .map(|node| node.port)
            .expect("another primary")
    }

    /// Kills the primary on `port` (a crash) and waits until its replica serves its slots.
    pub fn kill_primary(&mut self, port: u16) -> u16 {
        let replica = self.replica_of(port);
        self.node_mut(port).kill();
        wait_until("the replica to be promoted", || {
            let topology = self.live_topology(port);
            let promoted = topology
                .iter()
                .any(|node| node.port == replica && node.primary && !node.slots.is_empty());
            let ok = self.state_ok(port);
            if promoted && ok {
                Ok(())
            } else {
                Err(format!("promoted={promoted} state_ok={ok}"))
            }
        });
        replica
    }

    /// `CLUSTER FAILOVER` on a replica of `primary_port`: waits until it is the primary.
    pub fn failover(&self, primary_port: u16) -> u16 {
        let replica = self.replica_of(primary_port);
        assert_eq!(
            self.node(replica)
                .command(&["CLUSTER", "FAILOVER"])
                .as_deref(),
            Some("+OK")
        );
        wait_until("the manual failover", || {
            let topology = self.topology();
            let done = topology
                .iter()
                .any(|node| node.port == replica && node.primary)
                && self.state_ok(0);
            if done {
                Ok(())
            } else {
                Err(format!("{topology:?}"))
            }
        });
        replica
    }

    /// Moves `slot` with its keys to the primary on `to`, as `redis-cli --cluster reshard`
    /// does: IMPORTING / MIGRATING, MIGRATE each key, then SETSLOT NODE on every primary.
    pub fn migrate_slot(&self, slot: u16, to: u16) {
        let from = self.primary_for_slot(slot);
        assert_ne!(from, to, "slot {slot} already lives on {to}");
        let id_of = |port: u16| self.node(port).command(&["CLUSTER", "MYID"]).unwrap();
        let (from_id, to_id) = (id_of(from), id_of(to));
        let slot_text = slot.to_string();
        let (source, target) = (self.node(from), self.node(to));
        let ok = |reply: Option<String>, what: &str| {
            assert_eq!(reply.as_deref(), Some("+OK"), "{what}");
        };
        ok(
            target.command(&["CLUSTER", "SETSLOT", &slot_text, "IMPORTING", &from_id]),
            "SETSLOT IMPORTING",
        );
        ok(
            source.command(&["CLUSTER", "SETSLOT", &slot_text, "MIGRATING", &to_id]),
            "SETSLOT MIGRATING",
        );
        let mut connection = source.connection().expect("the source node answers");
        loop {
            let keys: Vec<String> = redis::cmd("CLUSTER")
                .arg("GETKEYSINSLOT")
                .arg(slot)
                .arg(100)
                .query(&mut connection)
                .expect("GETKEYSINSLOT");
            if keys.is_empty() {
                break;
            }
            let () = redis::cmd("MIGRATE")
                .arg("127.0.0.1")
                .arg(to)
                .arg("")
                .arg(0)
                .arg(5000)
                .arg("KEYS")
                .arg(&keys)
                .query(&mut connection)
                .expect("MIGRATE");
        }
        // The target first, then the source, then every other primary.
        ok(
            target.command(&["CLUSTER", "SETSLOT", &slot_text, "NODE", &to_id]),
            "SETSLOT NODE on the target",
        );
        ok(
            source.command(&["CLUSTER", "SETSLOT", &slot_text, "NODE", &to_id]),
            "SETSLOT NODE on the source",
        );
        for node in self
            .topology()
            .iter()
            .filter(|node| node.primary && !node.failed)
        {
            if node.port != from && node.port != to {
                let _ = self
                    .node(node.port)
                    .command(&["CLUSTER", "SETSLOT", &slot_text, "NODE", &to_id]);
            }
        }
        wait_until("every node to agree on the moved slot", || {
            for node in self.nodes.iter().filter(|node| node.is_running()) {
                let text = node.command(&["CLUSTER", "NODES"]).unwrap_or_default();
                let owner = parse_nodes(&text).into_iter().find(|info| {
                    info.primary && info.slots.iter().any(|(l, h)| *l <= slot && slot <= *h)
                });
                if owner.map(|info| info.port) != Some(to) {
                    return Err(format!("node {} does not see it yet", node.port()));
                }
            }
            Ok(())
        });
    }

    /// The topology as seen by a live node other than `except`.
    fn live_topology(&self, except: u16) -> Vec<NodeInfo> {
        for node in self
            .nodes
            .iter()
            .filter(|node| node.port() != except && node.is_running())
        {
            if let Some(text) = node.command(&["CLUSTER", "NODES"]) {
                if !text.starts_with('-') {
                    return parse_nodes(&text);
                }
            }
        }
        Vec::new()
    }

    /// Every live node (but `except`) reports `cluster_state:ok`.
    fn state_ok(&self, except: u16) -> bool {
        self.nodes
            .iter()
            .filter(|node| node.port() != except && node.is_running())
            .all(|node| {
                node.command(&["CLUSTER", "INFO"])
                    .is_some_and(|info| info.contains("cluster_state:ok"))
            })
    }

    fn wait_settled(&self, primaries: usize, replicas: usize) {
        wait_until("the new cluster to settle", || {
            if !self.state_ok(0) {
                return Err("cluster_state is not ok everywhere".into());
            }
            for node in &self.nodes {
                let info = parse_nodes(&node.command(&["CLUSTER", "NODES"]).unwrap_or_default());
                let seen_primaries = info
                    .iter()
                    .filter(|n| n.primary && !n.slots.is_empty())
                    .count();
                let seen_replicas = info.iter().filter(|n| n.replicates.is_some()).count();
                if seen_primaries != primaries || seen_replicas != replicas {
                    return Err(format!(
                        "node {} sees {seen_primaries} primaries and {seen_replicas} replicas",
                        node.port()
                    ));
                }
            }
            if replicas == 0 {
                // (Such a cluster's nodes may have INFO renamed away: `start_primaries_with`.)
                return Ok(());
            }
            // A replica copies its primary's writes only once its first sync is done, which a
            // loaded machine (and the primary's diskless-sync delay) can hold back for seconds.
            for node in &self.nodes {
                let info = node.command(&["INFO", "replication"]).unwrap_or_default();
                if info.contains("role:slave") && !info.contains("master_link_status:up") {
                    return Err(format!("replica {} has not synced yet", node.port()));
                }
            }
            Ok(())
        });
    }
}

/// Reads `CLUSTER NODES`.
pub fn parse_nodes(text: &str) -> Vec<NodeInfo> {
    text.lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            if fields.len() < 8 {
                return None;
            }
            let port = fields[1]
                .split('@')
                .next()?
                .rsplit(':')
                .next()?
                .parse()
                .ok()?;
            let flags = fields[2];
            let slots = fields[8..]
                .iter()
                .filter(|range| !range.starts_with('['))
                .filter_map(|range| {
                    let (low, high) = range.split_once('-').unwrap_or((range, range));
                    Some((low.parse().ok()?, high.parse().ok()?))
                })
                .collect();
            Some(NodeInfo {
                id: fields[0].to_owned(),
                port,
                primary: flags.contains("master"),
                failed: flags.contains("fail") && !flags.contains("fail?"),
                replicates: (fields[3] != "-").then(|| fields[3].to_owned()),
                slots,
            })
        })
        .collect()
}
