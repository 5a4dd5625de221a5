//! A primary with replicas watched by Sentinel, all real processes on loopback ports.

use crate::proxy::{Fault, FaultProxy};
use crate::{wait_until, RedisServer};

/// The master name the sentinels monitor.
pub const MASTER_NAME: &str = "polylock-primary";

pub struct SentinelSet {
    /// Data nodes: the first starts as the primary.
    pub servers: Vec<RedisServer>,
    pub sentinels: Vec<RedisServer>,
    /// The proxy the replicas replicate through, if they do.
    replication: Option<FaultProxy>,
}

impl SentinelSet {
    /// One primary, `replicas` replicas and `sentinels` sentinels (quorum: a majority).
    pub fn start(replicas: usize, sentinels: usize) -> SentinelSet {
        SentinelSet::start_set(replicas, sentinels, false)
    }

    /// As [`SentinelSet::start`], but the replicas replicate through a fault proxy, so a test
    /// can stall replication ([`SentinelSet::stall_replication`]) while the sentinels still
    /// reach every server. The sentinels' failover timeout is two minutes here, so they leave
    /// the replicas' upstream (the proxy, not the primary's own address) alone that long.
    pub fn start_with_replication_proxy(replicas: usize, sentinels: usize) -> SentinelSet {
        SentinelSet::start_set(replicas, sentinels, true)
    }

    fn start_set(replicas: usize, sentinels: usize, proxied: bool) -> SentinelSet {
        let primary = RedisServer::start();
        let replication = proxied.then(|| FaultProxy::start(primary.port()));
        let upstream = replication
            .as_ref()
            .map_or(primary.port(), FaultProxy::port)
            .to_string();
        let failover_timeout = if proxied { 120_000 } else { 5000 };
        let mut servers = vec![primary];
        for _ in 0..replicas {
            servers.push(RedisServer::start_with(&[
                "--replicaof",
                "127.0.0.1",
                &upstream,
            ]));
        }
        let primary_port = servers[0].port().to_string();
        let quorum = (sentinels / 2 + 1).to_string();
        let sentinels = (0..sentinels)
            .map(|_| {
                RedisServer::start_sentinel(&[
                    &format!("sentinel monitor {MASTER_NAME} 127.0.0.1 {primary_port} {quorum}"),
                    &format!("sentinel down-after-milliseconds {MASTER_NAME} 1000"),
                    &format!("sentinel failover-timeout {MASTER_NAME} {failover_timeout}"),
                    &format!("sentinel parallel-syncs {MASTER_NAME} 2"),
                ])
            })
            .collect();
        let set = SentinelSet {
            servers,
            sentinels,
            replication,
        };
        set.wait_settled(replicas);
        set
    }

    pub fn url(&self) -> String {
        let hosts: Vec<String> = self
            .sentinels
            .iter()
            .map(|sentinel| format!("127.0.0.1:{}", sentinel.port()))
            .collect();
        format!("redis+sentinel://{}/{MASTER_NAME}", hosts.join(","))
    }

    /// The port of the primary the first answering sentinel names.
    pub fn primary_port(&self) -> u16 {
        for sentinel in &self.sentinels {
            let Ok(mut connection) = sentinel.connection() else {
                continue;
            };
            let answer: redis::RedisResult<Option<(String, u16)>> = redis::cmd("SENTINEL")
                .arg("get-master-addr-by-name")
                .arg(MASTER_NAME)
                .query(&mut connection);
            if let Ok(Some((_, port))) = answer {
                return port;
            }
        }
        panic!("no sentinel names a primary");
    }

    pub fn server(&self, port: u16) -> &RedisServer {
        self.servers
            .iter()
            .find(|server| server.port() == port)
            .expect("a data node of this set")
    }

    /// Stops the replication stream (started with [`SentinelSet::start_with_replication_proxy`]):
    /// whatever the primary takes from now on never reaches a replica, and a replica promoted
    /// now lacks it, as when a primary fails before replicating. The replicas still answer the
    /// sentinels, so one can be promoted.
    pub fn stall_replication(&self) {
        self.replication
            .as_ref()
            .expect("started with start_with_replication_proxy")
            .set(Fault::BlackHole);
    }

    /// `SENTINEL FAILOVER`; waits until another primary serves and knows itself primary.
    pub fn failover(&self) -> u16 {
        let old = self.primary_port();
        let reply = self.sentinels[0].command(&["SENTINEL", "FAILOVER", MASTER_NAME]);
        assert_eq!(reply.as_deref(), Some("+OK"), "SENTINEL FAILOVER");
        self.wait_new_primary(old)
    }

    /// Kills the primary (a crash); waits until the sentinels promoted a replica.
    pub fn kill_primary(&mut self) -> u16 {
        let old = self.primary_port();
        self.servers
            .iter_mut()
            .find(|server| server.port() == old)
            .expect("the primary is ours")
            .kill();
        self.wait_new_primary(old)
    }

    fn wait_new_primary(&self, old: u16) -> u16 {
        let mut new = old;
        wait_until("a new primary", || {
            new = self.primary_port();
            let role = self
                .servers
                .iter()
                .find(|server| server.port() == new)
                .and_then(|server| server.command(&["ROLE"]));
            if new != old && role.as_deref() == Some("*3") {
                let master = self
                    .server(new)
                    .command(&["INFO", "replication"])
                    .unwrap_or_default();
                if master.contains("role:master") {
                    return Ok(());
                }
            }
            Err(format!("primary {new}, role {role:?}"))
        });
        new
    }

    fn wait_settled(&self, replicas: usize) {
        let primary = &self.servers[0];
        wait_until(
            "the replicas to sync and every sentinel to see them",
            || {
                let info = primary
                    .command(&["INFO", "replication"])
                    .unwrap_or_default();
                if !info.contains(&format!("connected_slaves:{replicas}")) {
                    return Err(info);
                }
                for replica in &self.servers[1..] {
                    let info = replica
                        .command(&["INFO", "replication"])
                        .unwrap_or_default();
                    if !info.contains("master_link_status:up") {
                        return Err(format!("replica {}: {info}", replica.port()));
                    }
                }
                for sentinel in &self.sentinels {
                    let Ok(mut connection) = sentinel.connection() else {
                        return Err(format!("sentinel {} down", sentinel.port()));
                    };
                    let master: redis::RedisResult<Vec<String>> = redis::cmd("SENTINEL")
                        .arg("MASTER")
                        .arg(MASTER_NAME)
                        .query(&mut connection);
                    let fields = master.map_err(|err| err.to_string())?;
                    let field = |name: &str| {
                        fields
                            .iter()
                            .position(|f| f == name)
                            .and_then(|i| fields.get(i + 1))
                            .cloned()
                            .unwrap_or_default()
                    };
                    if field("num-slaves") != replicas.to_string()
                        || field("num-other-sentinels") != (self.sentinels.len() - 1).to_string()
                    {
                        return Err(format!(
                            "sentinel {} sees {} replicas, {} other sentinels",
                            sentinel.port(),
                            field("num-slaves"),
                            field("num-other-sentinels")
                        ));
                    }
                }
                Ok(())
            },
        );
    }
}
