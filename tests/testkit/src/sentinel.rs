//! A primary with replicas watched by Sentinel, all real processes on loopback ports.

use crate::proxy::{Fault, FaultProxy};
use crate::{wait_until, RedisServer, TlsFiles};

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
        SentinelSet::start_set(replicas, sentinels, false, None, &[])
    }

    /// As [`SentinelSet::start`] (or [`SentinelSet::start_tls`] with `tls`), every data node
    /// with the extra `--option value` arguments.
    pub fn start_with(
        replicas: usize,
        sentinels: usize,
        tls: Option<(&TlsFiles, bool)>,
        extra: &[&str],
    ) -> SentinelSet {
        SentinelSet::start_set(replicas, sentinels, false, tls, extra)
    }

    /// As [`SentinelSet::start`], every data node and sentinel also serving TLS (`tls_url`)
    /// with the test certificates of `files` (client certificates required when
    /// `auth_clients`); replication and the sentinels' own connections use TLS, so the
    /// sentinels name the TLS ports. The plain ports stay open on loopback for the kit's own
    /// checks.
    pub fn start_tls(
        replicas: usize,
        sentinels: usize,
        files: &TlsFiles,
        auth_clients: bool,
    ) -> SentinelSet {
        SentinelSet::start_set(replicas, sentinels, false, Some((files, auth_clients)), &[])
    }

    /// As [`SentinelSet::start`], but the replicas replicate through a fault proxy, so a test
    /// can stall replication ([`SentinelSet::stall_replication`]) while the sentinels still
    /// reach every server. The sentinels' failover timeout is two minutes here, so they leave
    /// the replicas' upstream (the proxy, not the primary's own address) alone that long.
    pub fn start_with_replication_proxy(replicas: usize, sentinels: usize) -> SentinelSet {
        SentinelSet::start_set(replicas, sentinels, true, None, &[])
    }

    fn start_set(
        replicas: usize,
        sentinels: usize,
        proxied: bool,
        tls: Option<(&TlsFiles, bool)>,
        common: &[&str],
    ) -> SentinelSet {
        let data_node = |extra: &[&str]| {
            let mut arguments = common.to_vec();
            arguments.extend(extra);
            match tls {
                Some((files, auth_clients)) => {
                    arguments.extend(["--tls-replication", "yes"]);
                    RedisServer::start_tls_with(files, "server", auth_clients, &arguments)
                }
                None => RedisServer::start_with(&arguments),
            }
        };
        let primary = data_node(&[]);
        // What replicas and sentinels reach the primary on: its TLS port over TLS.
        let primary_port = primary.tls_port().unwrap_or(primary.port());
        let replication = proxied.then(|| FaultProxy::start(primary_port));
        let upstream = replication
            .as_ref()
            .map_or(primary_port, FaultProxy::port)
            .to_string();
        let failover_timeout = if proxied { 120_000 } else { 5000 };
        let mut servers = vec![primary];
        for _ in 0..replicas {
            servers.push(data_node(&["--replicaof", "127.0.0.1", &upstream]));
        }
        let primary_port = primary_port.to_string();
        let quorum = (sentinels / 2 + 1).to_string();
        let sentinels = (0..sentinels)
            .map(|_| {
                let config = [
                    format!("sentinel monitor {MASTER_NAME} 127.0.0.1 {primary_port} {quorum}"),
                    format!("sentinel down-after-milliseconds {MASTER_NAME} 1000"),
                    format!("sentinel failover-timeout {MASTER_NAME} {failover_timeout}"),
                    format!("sentinel parallel-syncs {MASTER_NAME} 2"),
                ];
                let config: Vec<&str> = config.iter().map(String::as_str).collect();
                match tls {
                    Some((files, auth_clients)) => {
                        RedisServer::start_sentinel_tls(files, "server", auth_clients, &config)
                    }
                    None => RedisServer::start_sentinel(&config),
                }
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

    /// The `rediss+sentinel://` URL of a set started by `start_tls`: the sentinels' TLS ports.
    pub fn tls_url(&self) -> String {
        let hosts: Vec<String> = self
            .sentinels
            .iter()
            .map(|sentinel| {
                let port = sentinel.tls_port().expect("not started with start_tls");
                format!("127.0.0.1:{port}")
            })
            .collect();
        format!("rediss+sentinel://{}/{MASTER_NAME}", hosts.join(","))
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

    /// The data node on `port` (its plain or, over TLS, its TLS port: what the sentinels name).
    pub fn server(&self, port: u16) -> &RedisServer {
        self.servers
            .iter()
            .find(|server| server.port() == port || server.tls_port() == Some(port))
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
            .find(|server| server.port() == old || server.tls_port() == Some(old))
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
                .find(|server| server.port() == new || server.tls_port() == Some(new))
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
