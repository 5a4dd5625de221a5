//! A Sentinel deployment of real servers: one primary, its replicas (`--replicaof`) and the
//! sentinels monitoring them, each sentinel with its own config file (sentinels rewrite it).
//! Failovers are driven through the sentinels, as in production. Servers are named by port.

use std::collections::{HashMap, HashSet};

use crate::{wait_for, RedisServer};

/// The master name the sentinels monitor.
pub const MASTER_NAME: &str = "polylock-primary";

/// A running deployment on loopback; every process is killed when it is dropped.
pub struct RedisSentinel {
    /// The primary and its replicas (which one is primary changes with failovers).
    servers: Vec<RedisServer>,
    sentinels: Vec<RedisServer>,
    /// Ports of the servers killed by `kill_primary`.
    killed: HashSet<u16>,
}

impl RedisSentinel {
    /// 1 primary, 2 replicas, 3 sentinels (quorum 2).
    pub fn start() -> RedisSentinel {
        Self::start_with(2, 3)
    }

    /// A primary with `replicas` replicas and `sentinels` sentinels (quorum: a majority of
    /// them); returns once the replicas are in sync and every sentinel knows every replica
    /// and every other sentinel.
    pub fn start_with(replicas: usize, sentinels: usize) -> RedisSentinel {
        // Any of them may become the primary; each starts a full sync at once instead of
        // after the 5 s default delay.
        let primary = RedisServer::start_with(&["--repl-diskless-sync-delay", "0"]);
        let primary_port = primary.port().to_string();
        let mut servers = vec![primary];
        for _ in 0..replicas {
            servers.push(RedisServer::start_with(&[
                "--repl-diskless-sync-delay",
                "0",
                "--replicaof",
                "127.0.0.1",
                &primary_port,
            ]));
        }
        // 1 s until a silent primary counts as down; failover-timeout also spaces out retried
        // elections, so it is short too.
        let quorum = sentinels / 2 + 1;
        let config = format!(
            "sentinel resolve-hostnames no\n\
             sentinel monitor {MASTER_NAME} 127.0.0.1 {primary_port} {quorum}\n\
             sentinel down-after-milliseconds {MASTER_NAME} 1000\n\
             sentinel failover-timeout {MASTER_NAME} 4000\n\
             sentinel parallel-syncs {MASTER_NAME} 1\n"
        );
        let sentinels = (0..sentinels)
            .map(|_| RedisServer::start_with_config(Some(&config), &["--sentinel"]))
            .collect();
        let deployment = RedisSentinel {
            servers,
            sentinels,
            killed: HashSet::new(),
        };
        deployment.wait_until_settled();
        deployment
    }

    pub fn master_name(&self) -> &str {
        MASTER_NAME
    }

    /// `redis+sentinel://127.0.0.1:s1,127.0.0.1:s2,127.0.0.1:s3/<master name>`.
    pub fn url(&self) -> String {
        let sentinels: Vec<String> = self
            .sentinels
            .iter()
            .map(|sentinel| format!("127.0.0.1:{}", sentinel.port()))
            .collect();
        format!("redis+sentinel://{}/{MASTER_NAME}", sentinels.join(","))
    }

    /// `redis://127.0.0.1:s` of every sentinel.
    pub fn sentinel_urls(&self) -> Vec<String> {
        self.sentinels.iter().map(RedisServer::url).collect()
    }

    pub fn sentinels(&self) -> &[RedisServer] {
        &self.sentinels
    }

    /// The port of the current primary, as the first sentinel that answers reports it.
    pub fn primary(&self) -> u16 {
        self.sentinels
            .iter()
            .find_map(|sentinel| self.primary_according_to(sentinel).ok())
            .expect("no sentinel names a primary")
    }

    /// Ports of the running servers that are not the primary.
    pub fn replicas(&self) -> Vec<u16> {
        let primary = self.primary();
        self.live_servers()
            .map(RedisServer::port)
            .filter(|port| *port != primary)
            .collect()
    }

    /// The primary or replica on `port`.
    pub fn server(&self, port: u16) -> &RedisServer {
        self.servers
            .iter()
            .find(|server| server.port() == port)
            .unwrap_or_else(|| panic!("no primary or replica on port {port}"))
    }

    /// SENTINEL FAILOVER: waits until the sentinels name a new primary, it answers as a
    /// primary, and the old primary and the other replicas replicate from it. Returns its port.
    pub fn failover(&mut self) -> u16 {
        let old_primary = self.primary();
        let sentinel = &self.sentinels[0];
        let reply: redis::Value = sentinel
            .query(redis::cmd("SENTINEL").arg("FAILOVER").arg(MASTER_NAME))
            .expect("SENTINEL FAILOVER");
        assert_eq!(reply, redis::Value::Okay, "SENTINEL FAILOVER");
        self.wait_for_new_primary(old_primary, "a SENTINEL FAILOVER")
    }

    /// Kills the primary as a crash would; waits until the sentinels have promoted a replica
    /// and the other replicas replicate from it. Returns the new primary's port.
    pub fn kill_primary(&mut self) -> u16 {
        let old_primary = self.primary();
        self.servers
            .iter_mut()
            .find(|server| server.port() == old_primary)
            .expect("the primary is one of the servers")
            .kill();
        self.killed.insert(old_primary);
        self.wait_for_new_primary(old_primary, "the primary was killed")
    }

    /// Waits until every sentinel names the same running primary, which answers as one with
    /// every other running server as its replica (link up, not syncing), and every sentinel
    /// sees those replicas healthy and knows the other sentinels.
    pub fn wait_until_settled(&self) -> u16 {
        wait_for("the sentinels and replicas to agree on the primary", || {
            self.settled()
        })
    }

    /// Kills every process now (dropping the deployment does the same and removes their
    /// directories).
    pub fn stop(&mut self) {
        for server in self.servers.iter_mut().chain(self.sentinels.iter_mut()) {
            server.kill();
        }
    }

    fn wait_for_new_primary(&self, old_primary: u16, after: &str) -> u16 {
        wait_for(
            &format!("a new primary after {after} (it was {old_primary})"),
            || {
                self.demote_old_primary(old_primary);
                match self.settled()? {
                    primary if primary == old_primary => Err(format!("still {old_primary}")),
                    primary => Ok(primary),
                }
            },
        )
    }

    /// Once a sentinel names a new primary, makes a still running old primary its replica.
    /// The sentinels would do the same, but only some 10-20 s later (they re-check a former
    /// primary's role every 10 s, after 8 s of grace), which would make every failover test
    /// that slow.
    fn demote_old_primary(&self, old_primary: u16) {
        if self.killed.contains(&old_primary) {
            return;
        }
        let new_primary = match self.sentinels.iter().find_map(|sentinel| {
            self.primary_according_to(sentinel)
                .ok()
                .filter(|named| *named != old_primary)
        }) {
            Some(new_primary) => new_primary,
            None => return,
        };
        let old = self.server(old_primary);
        if old.info("replication").get("role").map(String::as_str) == Some("master") {
            let _ = old.command(&["REPLICAOF", "127.0.0.1", &new_primary.to_string()]);
        }
    }

    fn settled(&self) -> Result<u16, String> {
        let mut primary = None;
        for sentinel in &self.sentinels {
            let port = sentinel.port();
            let named = self.primary_according_to(sentinel)?;
            match primary {
                None => primary = Some(named),
                Some(first) if first != named => {
                    return Err(format!(
                        "sentinels disagree: {first} versus {named} (sentinel {port})"
                    ))
                }
                Some(_) => {}
            }
            let master: HashMap<String, String> = sentinel
                .query(redis::cmd("SENTINEL").arg("MASTER").arg(MASTER_NAME))
                .map_err(|error| format!("sentinel {port}: SENTINEL MASTER: {error}"))?;
            if master.get("flags").map(String::as_str) != Some("master") {
                return Err(format!("sentinel {port} sees the primary as {master:?}"));
            }
            let known: Vec<HashMap<String, String>> = sentinel
                .query(redis::cmd("SENTINEL").arg("REPLICAS").arg(MASTER_NAME))
                .map_err(|error| format!("sentinel {port}: SENTINEL REPLICAS: {error}"))?;
            for replica in self.live_servers().map(RedisServer::port) {
                if replica == named {
                    continue;
                }
                // Whom a replica follows is checked on the replica itself below: a sentinel
                // refreshes that only every 10 s.
                let healthy = known.iter().any(|entry| {
                    entry.get("port") == Some(&replica.to_string())
                        && entry.get("flags").map(String::as_str) == Some("slave")
                });
                if !healthy {
                    return Err(format!("sentinel {port} does not know replica {replica} of {named} as healthy: {known:?}"));
                }
            }
            let peers: Vec<HashMap<String, String>> = sentinel
                .query(redis::cmd("SENTINEL").arg("SENTINELS").arg(MASTER_NAME))
                .map_err(|error| format!("sentinel {port}: SENTINEL SENTINELS: {error}"))?;
            if peers.len() + 1 != self.sentinels.len() {
                return Err(format!(
                    "sentinel {port} knows {} other sentinels",
                    peers.len()
                ));
            }
        }
        let primary = primary.ok_or("there are no sentinels")?;
        if self.killed.contains(&primary) {
            return Err(format!("the sentinels still name the killed {primary}"));
        }
        let role = self.server(primary).info("replication");
        let replicas = self.live_servers().count() - 1;
        if role.get("role").map(String::as_str) != Some("master")
            || role.get("connected_slaves") != Some(&replicas.to_string())
        {
            return Err(format!(
                "primary {primary} is not a primary of {replicas} replicas: {role:?}"
            ));
        }
        for replica in self
            .live_servers()
            .filter(|server| server.port() != primary)
        {
            let link = replica.info("replication");
            let following = link.get("role").map(String::as_str) == Some("slave")
                && link.get("master_port") == Some(&primary.to_string())
                && link.get("master_link_status").map(String::as_str) == Some("up")
                && link.get("master_sync_in_progress").map(String::as_str) == Some("0");
            if !following {
                return Err(format!(
                    "{} does not replicate from {primary}: {link:?}",
                    replica.port()
                ));
            }
        }
        Ok(primary)
    }

    fn primary_according_to(&self, sentinel: &RedisServer) -> Result<u16, String> {
        let address: Vec<String> = sentinel
            .query(
                redis::cmd("SENTINEL")
                    .arg("GET-MASTER-ADDR-BY-NAME")
                    .arg(MASTER_NAME),
            )
            .map_err(|error| format!("sentinel {}: {error}", sentinel.port()))?;
        address
            .get(1)
            .and_then(|port| port.parse().ok())
            .ok_or_else(|| format!("sentinel {} names {address:?}", sentinel.port()))
    }

    fn live_servers(&self) -> impl Iterator<Item = &RedisServer> {
        self.servers
            .iter()
            .filter(|server| !self.killed.contains(&server.port()))
    }
}
