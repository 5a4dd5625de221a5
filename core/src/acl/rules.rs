//! The ACL rule as data (re-exported by [`crate::acl`]): below the connections, which send
//! their pub/sub probe on [`PROBE_CHANNEL`].

/// Commands the client sends itself on every deployment: `PING` (connection checks), the lock
/// scripts (`EVALSHA`, and `SCRIPT LOAD` when the server does not know a script yet), `DEL`
/// (a semaphore's spent request latches, the client record at close), waiting for wake-ups
/// (`SUBSCRIBE`), and the client record (`HSET`, `PEXPIRE`; `HMGET` to read holders' records).
pub const CLIENT_COMMANDS: &[&str] = &[
    "ping",
    "evalsha",
    "script|load",
    "del",
    "subscribe",
    "unsubscribe",
    "hset",
    "pexpire",
    "hmget",
];

/// The key pattern of the client records (`polylock:client:<client-id>`), whatever the lock
/// prefix: a client writes its own, and reads those of the holders it names. Without it locks
/// work, but nobody can tell which program holds them.
pub const CLIENT_RECORD_PATTERN: &str = "polylock:client:*";

/// Commands the client sends on a Redis Cluster: the slot map (`CLUSTER SLOTS`).
pub const CLUSTER_COMMANDS: &[&str] = &["cluster|slots"];

/// Sharded pub/sub (Redis 7+): on a cluster the client waits with `SSUBSCRIBE` and the scripts
/// publish with `SPUBLISH`, as Redisson does there; at connect the client sends one `SPUBLISH`
/// to [`PROBE_CHANNEL`] to learn whether the cluster has it.
pub const SHARDED_PUBSUB_COMMANDS: &[&str] = &[
    "ssubscribe",
    "sunsubscribe",
    "spublish",
    "pubsub|shardnumsub",
];

/// Commands the lock scripts run on the server (Redis checks a script's calls against the
/// user's rule too).
pub const SCRIPT_COMMANDS: &[&str] = &[
    "decrby",
    "del",
    "exists",
    "get",
    "hdel",
    "hexists",
    "hget",
    "hgetall",
    "hincrby",
    "hkeys",
    "hlen",
    "hset",
    "incr",
    "incrby",
    "lindex",
    "lpop",
    "lpos",
    "lpush",
    "lrange",
    "lrem",
    "mget",
    "pexpire",
    "pttl",
    "publish",
    "pubsub|numsub",
    "rename",
    "rpush",
    "set",
    "time",
    "type",
    "zadd",
    "zcard",
    "zcount",
    "zincrby",
    "zpopmin",
    "zrange",
    "zrangebyscore",
    "zrem",
    "zremrangebyscore",
    "zscore",
];

/// The optional addition for `sync_replicas`: `WAIT` after each write, and `INFO replication`
/// (at most once a second per primary) to learn how many replicas to wait for.
pub const SYNC_REPLICAS_COMMANDS: &[&str] = &["wait", "info"];

/// The optional addition that saves a server call per lock cycle: a free reentrant or fair
/// lock's acquire writes the lock hash and its TTL with one `RESTORE` (`kinds/restore.rs`).
/// Without it the script writes them with `HSET` and `PEXPIRE`, and the client, told once,
/// stops trying.
pub const RESTORE_COMMANDS: &[&str] = &["restore"];

/// The channel of the connect-time `SPUBLISH` on a cluster (nobody listens on it): its answer
/// tells whether the cluster has sharded pub/sub and the user may use it.
pub const PROBE_CHANNEL: &str = "polylock_pubsub_probe";

/// The key patterns of the locks named `<prefix>...`: the names (and fenced data keys), the
/// keys suffixed to a name (`{name}:timeout`, read levels), and the keys Redisson and polylock
/// keep beside a name, for names without and with their own hash tag.
pub fn key_patterns(prefix: &str) -> Vec<String> {
    vec![
        format!("{prefix}*"),
        format!("{{{prefix}*"),
        format!("redisson_*:{{{prefix}*"),
        format!("redisson_*:{prefix}*"),
        format!("polylock_*:{{{prefix}*"),
        format!("polylock_*:{prefix}*"),
    ]
}

/// The channel patterns of the locks named `<prefix>...`: Redisson's channels
/// (`redisson_lock__channel:{name}`, `redisson_rwlock:{name}`, `redisson_sc:{name}`, a fair
/// waiter's own) and polylock's (`polylock_lock_told:{name}:...`, `polylock_lock_listening:...`),
/// and the probe channel.
pub fn channel_patterns(prefix: &str) -> Vec<String> {
    vec![
        format!("redisson_*:{{{prefix}*"),
        format!("redisson_*:{prefix}*"),
        format!("polylock_*:{{{prefix}*"),
        format!("polylock_*:{prefix}*"),
        PROBE_CHANNEL.to_owned(),
    ]
}

/// The arguments to add to [`rule`] for the one-call lock write.
pub fn restore_rule() -> Vec<String> {
    RESTORE_COMMANDS
        .iter()
        .map(|command| format!("+{command}"))
        .collect()
}

/// The `ACL SETUSER <user>` arguments (after the user name, before `on` and the password) that
/// allow exactly what polylock needs for the locks named `<prefix>...`, on one server or a
/// cluster, Redis 7+: `resetkeys resetchannels -@all +ping ... ~app:* ... &redisson_*:{app:* ...`.
pub fn rule(prefix: &str) -> Vec<String> {
    rule_under_key_prefix("", prefix)
}

/// [`rule`] for clients with `ClientOptions::key_prefix` `key_prefix` (empty: none): every
/// name, and with it every key and channel, starts with `key_prefix` then `prefix`, and the
/// client records are `<key_prefix>polylock:client:*`.
pub fn rule_under_key_prefix(key_prefix: &str, prefix: &str) -> Vec<String> {
    let prefix = &format!("{key_prefix}{prefix}");
    let mut args = vec![
        "resetkeys".to_owned(),
        "resetchannels".to_owned(),
        "-@all".to_owned(),
    ];
    let mut commands: Vec<&str> = CLIENT_COMMANDS
        .iter()
        .chain(CLUSTER_COMMANDS)
        .chain(SHARDED_PUBSUB_COMMANDS)
        .chain(SCRIPT_COMMANDS)
        .copied()
        .collect();
    commands.sort_unstable();
    commands.dedup();
    args.extend(commands.iter().map(|command| format!("+{command}")));
    args.extend(key_patterns(prefix).iter().map(|key| format!("~{key}")));
    args.push(format!("~{key_prefix}{CLIENT_RECORD_PATTERN}"));
    args.extend(channel_patterns(prefix).iter().map(|c| format!("&{c}")));
    args
}

/// The arguments to add to [`rule`] for `sync_replicas`.
pub fn sync_replicas_rule() -> Vec<String> {
    SYNC_REPLICAS_COMMANDS
        .iter()
        .map(|command| format!("+{command}"))
        .collect()
}

/// The rule as one `ACL SETUSER` line for `user` with password `password` (for the docs).
pub fn setuser_line(user: &str, password: &str, prefix: &str) -> String {
    let mut line = format!("ACL SETUSER {user} on >{password}");
    for arg in rule(prefix) {
        line.push(' ');
        if arg.contains(['{', '*', '&', '~', '|']) {
            line.push_str(&format!("'{arg}'"));
        } else {
            line.push_str(&arg);
        }
    }
    line
}
