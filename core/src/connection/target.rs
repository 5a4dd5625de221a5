//! What a URL names: one server, a Redis Cluster (seed nodes), or a primary found through
//! Sentinel. The forms:
//!
//! - `redis://` / `rediss://` / `unix://`: one server, as the `redis` crate reads it;
//! - `redis+cluster://[user:password@]host:port[,host:port...]` (`rediss+cluster://` for TLS);
//! - `redis+sentinel://[user:password@]host:port[,host:port...]/<master-name>[/db]`
//!   (`rediss+sentinel://`: TLS to the sentinels, the primary and the replicas, with the same
//!   CA and client certificate). The credentials are the data nodes'; sentinels are asked
//!   without them.

use redis::{ConnectionInfo, IntoConnectionInfo};

use crate::foundation::error::{Error, Result};
use crate::settings::tls::Tls;

pub(crate) enum Target {
    Single(redis::Client),
    Cluster {
        nodes: Vec<ConnectionInfo>,
        /// The TLS options, for the nodes the cluster client discovers.
        tls: Tls,
    },
    Sentinel {
        sentinels: Vec<ConnectionInfo>,
        master: String,
        /// The primary's (and replicas') credentials, database and TLS.
        node: ConnectionInfo,
        /// The TLS options, for the sentinel client's own check of the primary.
        tls: Tls,
    },
}

/// Hides a password in a URL before it goes into a message.
pub(crate) fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            format!("{}://***@{}", &url[..scheme], &url[at + 1..])
        }
        _ => url.to_owned(),
    }
}

fn bad_url(url: &str, why: impl std::fmt::Display) -> Error {
    Error::invalid_argument(format!("bad Redis URL '{}': {why}", redact(url)))
}

impl Target {
    /// The deployment `url` names, its connections with the `tls` settings.
    pub(crate) fn parse(url: &str, tls_options: &Tls) -> Result<Target> {
        let (scheme, rest) = url
            .split_once("://")
            .ok_or_else(|| bad_url(url, "it has no scheme (redis://, redis+cluster://, ...)"))?;
        let tls = scheme.starts_with("rediss");
        if tls && !cfg!(feature = "tls") {
            return Err(bad_url(
                url,
                format!("{scheme}:// needs polylock's \"tls\" feature, which this build left out"),
            ));
        }
        if tls_options.is_set() && !tls {
            return Err(Error::invalid_argument(format!(
                "TLS options (tls_ca, tls_cert, tls_key, tls_insecure) are set but the URL '{}' \
                 does not use TLS: use rediss:// (rediss+cluster://, rediss+sentinel://)",
                redact(url)
            )));
        }
        match scheme {
            "redis+cluster" | "rediss+cluster" => parse_cluster(url, rest, tls, tls_options),
            "redis+sentinel" | "rediss+sentinel" => parse_sentinel(url, rest, tls, tls_options),
            _ => {
                let info = url
                    .into_connection_info()
                    .map_err(|err| bad_url(url, err))?;
                redis::Client::open(tls_options.apply(info)?)
                    .map(Target::Single)
                    .map_err(|err| bad_url(url, err))
            }
        }
    }
}

/// `[user:password@]` and the rest.
fn split_credentials(rest: &str) -> (Option<&str>, &str) {
    match rest.rfind('@') {
        Some(at) => (Some(&rest[..at]), &rest[at + 1..]),
        None => (None, rest),
    }
}

/// `host:port,host:port` as single-server URLs of `scheme`, with `credentials`.
fn node_infos(
    url: &str,
    hosts: &str,
    credentials: Option<&str>,
    tls: bool,
    db: &str,
    tls_options: &Tls,
) -> Result<Vec<ConnectionInfo>> {
    let scheme = if tls { "rediss" } else { "redis" };
    let mut infos = Vec::new();
    for host in hosts.split(',') {
        if host.is_empty() || !host.contains(':') {
            return Err(bad_url(
                url,
                format!("each node must be host:port, got '{host}'"),
            ));
        }
        let node = match credentials {
            Some(credentials) => format!("{scheme}://{credentials}@{host}/{db}"),
            None => format!("{scheme}://{host}/{db}"),
        };
        let info = node
            .into_connection_info()
            .map_err(|err| bad_url(url, err))?;
        infos.push(tls_options.apply(info)?);
    }
    Ok(infos)
}

fn parse_cluster(url: &str, rest: &str, tls: bool, tls_options: &Tls) -> Result<Target> {
    let (credentials, rest) = split_credentials(rest);
    let hosts = rest.trim_end_matches('/');
    if hosts.contains('/') {
        return Err(bad_url(
            url,
            "a cluster has no database number: use redis+cluster://host:port[,host:port...]",
        ));
    }
    if hosts.is_empty() {
        return Err(bad_url(url, "a cluster URL needs at least one host:port"));
    }
    Ok(Target::Cluster {
        nodes: node_infos(url, hosts, credentials, tls, "0", tls_options)?,
        tls: tls_options.clone(),
    })
}

fn parse_sentinel(url: &str, rest: &str, tls: bool, tls_options: &Tls) -> Result<Target> {
    let (credentials, rest) = split_credentials(rest);
    let mut parts = rest.split('/');
    let hosts = parts.next().unwrap_or_default();
    let master = parts.next().unwrap_or_default();
    let db = parts.next().filter(|db| !db.is_empty()).unwrap_or("0");
    if hosts.is_empty() || master.is_empty() || parts.next().is_some_and(|p| !p.is_empty()) {
        return Err(bad_url(
            url,
            "use redis+sentinel://[user:password@]host:port[,host:port...]/<master-name>[/db]",
        ));
    }
    if db.parse::<i64>().is_err() {
        return Err(bad_url(
            url,
            format!("the database must be a number, got '{db}'"),
        ));
    }
    // Sentinels are asked without the data nodes' credentials; over TLS with `rediss+`, as
    // the data nodes (a TLS deployment's sentinels serve TLS, `tls-replication yes`).
    let sentinels = node_infos(url, hosts, None, tls, "0", tls_options)?;
    let node = node_infos(url, "127.0.0.1:0", credentials, tls, db, tls_options)?.remove(0);
    Ok(Target::Sentinel {
        sentinels,
        master: master.to_owned(),
        node,
        tls: tls_options.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(url: &str) -> String {
        match Target::parse(url, &Tls::default()) {
            Err(err) => err.to_string(),
            Ok(_) => panic!("{url} was accepted"),
        }
    }

    #[test]
    fn cluster_urls_name_their_seed_nodes() {
        let Ok(Target::Cluster { nodes, .. }) = Target::parse(
            "redis+cluster://u:p@127.0.0.1:7000,127.0.0.1:7001",
            &Tls::default(),
        ) else {
            panic!("not a cluster");
        };
        assert_eq!(nodes.len(), 2);
        assert_eq!(nodes[1].addr().to_string(), "127.0.0.1:7001");
        assert_eq!(nodes[0].redis_settings().password(), Some("p"));
        assert_eq!(nodes[0].redis_settings().username(), Some("u"));
    }

    #[test]
    fn sentinel_urls_name_sentinels_master_and_db() {
        let Ok(Target::Sentinel {
            sentinels,
            master,
            node,
            ..
        }) = Target::parse(
            "redis+sentinel://:secret@127.0.0.1:26379,127.0.0.1:26380/mymaster/3",
            &Tls::default(),
        )
        else {
            panic!("not sentinel");
        };
        assert_eq!(sentinels.len(), 2);
        assert_eq!(master, "mymaster");
        assert_eq!(node.redis_settings().db(), 3);
        assert_eq!(node.redis_settings().password(), Some("secret"));
    }

    #[cfg(feature = "tls")]
    #[test]
    fn rediss_sentinel_urls_ask_the_sentinels_over_tls_too() {
        let Ok(Target::Sentinel {
            sentinels, node, ..
        }) = Target::parse(
            "rediss+sentinel://127.0.0.1:26379,127.0.0.1:26380/mymaster",
            &Tls::default(),
        )
        else {
            panic!("not sentinel");
        };
        assert!(sentinels
            .iter()
            .all(|sentinel| matches!(sentinel.addr(), redis::ConnectionAddr::TcpTls { .. })));
        assert!(matches!(node.addr(), redis::ConnectionAddr::TcpTls { .. }));
    }

    #[test]
    fn bad_urls_say_what_is_wrong_and_hide_the_password() {
        assert!(message("redis+cluster://").contains("at least one host:port"));
        assert!(message("redis+cluster://127.0.0.1:7000/2").contains("no database number"));
        assert!(message("redis+cluster://127.0.0.1").contains("host:port"));
        let sentinel = message("redis+sentinel://u:hunter2@127.0.0.1:26379");
        assert!(sentinel.contains("<master-name>"), "{sentinel}");
        assert!(!sentinel.contains("hunter2"), "{sentinel}");
        assert!(message("redis+sentinel://127.0.0.1:26379/m/x").contains("must be a number"));
        assert!(message("localhost:6379").contains("no scheme"));
    }
}
