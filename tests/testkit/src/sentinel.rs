//! A primary with replicas watched by Sentinel, all real processes on loopback ports.

use crate::{wait_until, RedisServer};

/// The master name the sentinels monitor.
pub const MASTER_NAME: &str = "polylock-primary";

pub struct SentinelSet {
    /// Data nodes: the first starts as the primary.
    pub servers: Vec<RedisServer>,
    pub sentinels: Vec<RedisServer>,
}

impl SentinelSet {
    /// One primary, `replicas` replicas and `sentinels` sentinels (quorum: a majority).
    pub fn start(replicas: usize, sentinels: usize) -> SentinelSet {
        let primary = RedisServer::start();
        let upstream = primary.port().to_string();
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
                    &format!("sentinel failover-timeout {MASTER_NAME} 5000"),
                    &format!("sentinel parallel-syncs {MASTER_NAME} 2"),
                ])
            })
            .collect();
        let set = SentinelSet { servers, sentinels };
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
