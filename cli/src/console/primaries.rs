//! The primaries of a Cluster or Sentinel deployment as it tells them now, for the timeline's
//! failovers: the address the sentinels give for the master (`SENTINEL
//! GET-MASTER-ADDR-BY-NAME`, asked without credentials, as a client asks them), or the address
//! of each slot range's primary (`CLUSTER SLOTS`, in the console's rule, asked as the URL's user
//! of the first seed node that answers). One fresh connection per refresh; none for a
//! one-server URL. Plain connections only: over TLS (`rediss+...`) nothing answers, and no
//! failover is noted.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::check::{command_at, failover_target, FailoverTarget};

/// How long the question may hold up a refresh.
const ASK_BOUND: Duration = Duration::from_millis(1500);

/// The primaries' addresses now; `None` for a one-server URL, or when nobody answered in time.
pub async fn primaries(url: &str) -> Option<BTreeSet<String>> {
    if url.starts_with("rediss") {
        return None;
    }
    let target = failover_target(url)?;
    tokio::time::timeout(ASK_BOUND, ask(url, target))
        .await
        .ok()
        .flatten()
}

async fn ask(url: &str, target: FailoverTarget) -> Option<BTreeSet<String>> {
    match target {
        FailoverTarget::Sentinel { hosts, master } => {
            for host in hosts {
                let mut command = redis::cmd("SENTINEL");
                command.arg("GET-MASTER-ADDR-BY-NAME").arg(&master);
                if let Ok(reply) = command_at(&host, &mut command).await {
                    let address: Vec<String> = redis::from_redis_value(reply).ok()?;
                    return Some(BTreeSet::from([address.join(":")]));
                }
            }
            None
        }
        FailoverTarget::Cluster { hosts } => {
            let login = login(url);
            for host in hosts {
                let at = format!("{login}{host}");
                if let Ok(reply) = command_at(&at, redis::cmd("CLUSTER").arg("SLOTS")).await {
                    return slot_primaries(reply);
                }
            }
            None
        }
    }
}

/// `user:password@` of the URL, or nothing.
fn login(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    rest.rsplit_once('@')
        .map_or(String::new(), |(login, _)| format!("{login}@"))
}

/// Each slot range's primary (`[start, end, [host, port, ...], replicas...]`) as `host:port`.
fn slot_primaries(reply: redis::Value) -> Option<BTreeSet<String>> {
    let ranges: Vec<Vec<redis::Value>> = redis::from_redis_value(reply).ok()?;
    ranges
        .into_iter()
        .map(|range| {
            let primary: Vec<redis::Value> = redis::from_redis_value(range.get(2)?.clone()).ok()?;
            let host: String = redis::from_redis_value(primary.first()?.clone()).ok()?;
            let port: i64 = redis::from_redis_value(primary.get(1)?.clone()).ok()?;
            Some(format!("{host}:{port}"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use redis::Value;

    #[test]
    fn the_primaries_are_the_first_node_of_each_slot_range() {
        let node = |host: &str, port: i64| {
            Value::Array(vec![
                Value::BulkString(host.as_bytes().to_vec()),
                Value::Int(port),
                Value::BulkString(b"id".to_vec()),
            ])
        };
        let reply = Value::Array(vec![
            Value::Array(vec![
                Value::Int(0),
                Value::Int(5460),
                node("10.0.0.1", 7000),
                node("10.0.0.4", 7003),
            ]),
            Value::Array(vec![
                Value::Int(5461),
                Value::Int(16383),
                node("10.0.0.2", 7001),
            ]),
        ]);
        assert_eq!(
            slot_primaries(reply),
            Some(BTreeSet::from([
                "10.0.0.1:7000".to_owned(),
                "10.0.0.2:7001".to_owned()
            ]))
        );
        assert_eq!(login("redis+cluster://u:p@h1:1,h2:2"), "u:p@");
        assert_eq!(login("redis+cluster://h1:1"), "");
    }
}
