//! The ACL rule as data (re-exported by [`crate::acl`]): below the connections, which send
//! their pub/sub probe on [`PROBE_CHANNEL`].

/// Commands the client sends itself on every deployment: `PING` (connection checks), the lock
/// scripts (`EVALSHA`, and `SCRIPT LOAD` when the server does not know a script yet), `DEL`
/// (the client record at close), `GET` (a count-down
/// latch's count), waiting for wake-ups (`SUBSCRIBE`), the client record (`HSET`, `PEXPIRE`;
/// `HMGET` to read holders' records), and `CLIENT SETINFO`, which the `redis` crate sends on
/// every new connection (its cluster client has no way to leave it out; the server ignores
/// the answer, but a refusal lands in `ACL LOG`). Redis 7.0 has no `CLIENT SETINFO` and
/// takes no grant of it: [`rule_for`] leaves it out there ([`RedisVersion::accepts_grant`]).
pub const CLIENT_COMMANDS: &[&str] = &[
    "ping",
    "evalsha",
    "script|load",
    "del",
    "get",
    "subscribe",
    "unsubscribe",
    "hset",
    "pexpire",
    "hmget",
    "client|setinfo",
];

/// The key pattern of the client records (`polylock:client:<client-id>`), whatever the lock
/// prefix: a client writes its own, and reads those of the holders it names. Without it locks
/// work, but nobody can tell which program holds them.
pub const CLIENT_RECORD_PATTERN: &str = "polylock:client:*";

/// Commands the client sends on a Redis Cluster: the slot map (`CLUSTER SLOTS`).
pub const CLUSTER_COMMANDS: &[&str] = &["cluster|slots"];

/// Commands the client sends to a Sentinel deployment's data nodes (as the data user): `ROLE`,
/// to make sure the node a Sentinel named is the primary (read only).
pub const SENTINEL_COMMANDS: &[&str] = &["role"];

/// Commands the client sends only for the tools (`polylock inspect`'s listing of locks and
/// client records: `SCAN`), never for a lock; not in the rule.
pub const TOOL_COMMANDS: &[&str] = &["scan"];

/// Sharded pub/sub (Redis 7.0+; [`rule_for`] leaves it out before): on a cluster the client waits with `SSUBSCRIBE` and the scripts
/// publish with `SPUBLISH`, as Redisson does there; at connect the client sends one `SPUBLISH`
/// to [`PROBE_CHANNEL`] to learn whether the cluster has it.
pub const SHARDED_PUBSUB_COMMANDS: &[&str] = &[
    "ssubscribe",
    "sunsubscribe",
    "spublish",
    "pubsub|shardnumsub",
];

// `SCRIPT_COMMANDS`: every command the lock scripts call, as `build.rs` finds them in the
// script sources (`redis.call('x', ...)`, with the subcommand where ACL rules name one).
include!(concat!(env!("OUT_DIR"), "/script_commands.rs"));

/// The optional addition for `sync_replicas`: `WAIT` after each write, and `INFO replication`
/// (at most once a second per primary) to learn how many replicas to wait for.
pub const SYNC_REPLICAS_COMMANDS: &[&str] = &["wait", "info"];

/// Formerly the optional `RESTORE` grant. polylock no longer sends `RESTORE` (a free lock is
/// written with `HSET` and `PEXPIRE`): nothing to add to [`rule`].
#[deprecated(note = "polylock no longer sends RESTORE: acl::rule is enough, with nothing added")]
pub const RESTORE_COMMANDS: &[&str] = &[];

/// The channel of the connect-time `SPUBLISH` on a cluster (nobody listens on it): its answer
/// tells whether the cluster has sharded pub/sub and the user may use it.
pub const PROBE_CHANNEL: &str = "polylock_pubsub_probe";

/// The key patterns of the locks named `<prefix>...`: the names (and fenced data keys), the
/// keys suffixed to a name (`{name}:timeout`, read levels), and the keys Redisson and polylock
/// keep beside a name, for names without and with their own hash tag. Redisson's are
/// `redisson_*{<prefix>*`, not `redisson_*:{...`: a count-down latch keeps a key named as its
/// channel, `redisson_countdownlatch__channel__{name}`, with no `:` before the brace (and the
/// brace even when the name has a hash tag of its own).
pub fn key_patterns(prefix: &str) -> Vec<String> {
    vec![
        format!("{prefix}*"),
        format!("{{{prefix}*"),
        format!("redisson_*{{{prefix}*"),
        format!("redisson_*:{prefix}*"),
        format!("polylock_*:{{{prefix}*"),
        format!("polylock_*:{prefix}*"),
    ]
}

/// The channel patterns of the locks named `<prefix>...`: Redisson's channels
/// (`redisson_lock__channel:{name}`, `redisson_rwlock:{name}`, `redisson_sc:{name}`, a fair
/// waiter's own, the count-down latch's `redisson_countdownlatch__channel__{name}`) and
/// polylock's (`polylock_lock_told:{name}:...`, `polylock_lock_listening:...`), and the probe
/// channel.
pub fn channel_patterns(prefix: &str) -> Vec<String> {
    vec![
        format!("redisson_*{{{prefix}*"),
        format!("redisson_*:{prefix}*"),
        format!("polylock_*:{{{prefix}*"),
        format!("polylock_*:{prefix}*"),
        PROBE_CHANNEL.to_owned(),
    ]
}

/// Formerly the `+restore` grant to add to [`rule`]; now empty, as polylock no longer sends
/// `RESTORE`.
#[deprecated(note = "polylock no longer sends RESTORE: acl::rule is enough, with nothing added")]
pub fn restore_rule() -> Vec<String> {
    Vec::new()
}

/// The Redis command set a server offers, as the rule needs to know it: the Redis version, or
/// for Valkey the Redis version it is compatible with (7.2.4, which it reports to scripts and
/// as `redis_version`). Every Valkey has what Redis 7.2 has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RedisVersion {
    pub major: u32,
    pub minor: u32,
    pub patch: u32,
}

impl RedisVersion {
    pub const fn new(major: u32, minor: u32, patch: u32) -> RedisVersion {
        RedisVersion {
            major,
            minor,
            patch,
        }
    }

    /// Redis 7.2 and later, and every Valkey: every command the rule may name exists.
    pub const NEWEST: RedisVersion = RedisVersion::new(7, 2, 0);

    /// From a server's name and version as `HELLO` or `INFO server` give them (`redis`
    /// `6.2.14`, `valkey` `8.1.8`). `None` for a version that is not `major.minor[.patch]`.
    pub fn of_server(server: &str, version: &str) -> Option<RedisVersion> {
        let mut numbers = version.trim().split('.').map(|n| n.parse::<u32>().ok());
        let (major, minor) = (numbers.next()??, numbers.next()??);
        let patch = numbers.next().flatten().unwrap_or(0);
        if server.eq_ignore_ascii_case("valkey") {
            return Some(RedisVersion::new(7, 2, 4));
        }
        Some(RedisVersion::new(major, minor, patch))
    }

    /// `SSUBSCRIBE`, `SPUBLISH`, `PUBSUB SHARDNUMSUB`: Redis 7.0.
    pub fn has_sharded_pubsub(self) -> bool {
        self >= RedisVersion::new(7, 0, 0)
    }

    /// `redis.acl_check_cmd` in scripts (Redis 7.0). polylock's scripts no longer ask it.
    #[deprecated(note = "polylock's scripts no longer ask redis.acl_check_cmd")]
    pub fn has_acl_check_in_scripts(self) -> bool {
        self >= RedisVersion::new(7, 0, 0)
    }

    /// Whether `ACL SETUSER` on this version takes the grant `+command` (as a rule names it:
    /// `spublish`, `client|setinfo`); it refuses the whole rule for one it does not know
    /// (`Unknown command or category name in ACL`). Sharded pub/sub came with Redis 7.0.
    /// `CLIENT SETINFO` came with 7.2; Redis 7.0 refuses a grant of it, but Redis 6.x takes
    /// any subcommand name under a command it has (and needs the grant: it checks the rule
    /// before it finds it has no such subcommand, so without the grant every connection's
    /// `CLIENT SETINFO` is a refusal in `ACL LOG`).
    pub fn accepts_grant(self, command: &str) -> bool {
        let v70 = RedisVersion::new(7, 0, 0);
        match command {
            "spublish" | "ssubscribe" | "sunsubscribe" | "pubsub|shardnumsub" => self >= v70,
            "client|setinfo" => self < v70 || self >= RedisVersion::new(7, 2, 0),
            _ => true,
        }
    }
}

impl std::fmt::Display for RedisVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// The commands the rule grants on `version`: the client's, a cluster's, sharded pub/sub, and
/// the scripts', each only where it exists.
pub fn commands_for(version: RedisVersion) -> Vec<&'static str> {
    let mut commands: Vec<&str> = CLIENT_COMMANDS
        .iter()
        .chain(CLUSTER_COMMANDS)
        .chain(SENTINEL_COMMANDS)
        .chain(SHARDED_PUBSUB_COMMANDS)
        .chain(SCRIPT_COMMANDS)
        .copied()
        .filter(|command| version.accepts_grant(command))
        .collect();
    commands.sort_unstable();
    commands.dedup();
    commands
}

/// The `ACL SETUSER <user>` arguments (after the user name, before `on` and the password) that
/// allow exactly what polylock needs for the locks named `<prefix>...`, on one server or a
/// cluster of Redis 7.2+ or Valkey: `resetkeys resetchannels -@all +ping ... ~app:* ...
/// &redisson_*{app:* ...`. For another version, [`rule_for`].
pub fn rule(prefix: &str) -> Vec<String> {
    rule_for(RedisVersion::NEWEST, "", prefix)
}

/// [`rule`] for clients with `ClientOptions::key_prefix` `key_prefix` (empty: none), on Redis
/// 7.2+ or Valkey: see [`rule_for`].
pub fn rule_under_key_prefix(key_prefix: &str, prefix: &str) -> Vec<String> {
    rule_for(RedisVersion::NEWEST, key_prefix, prefix)
}

/// The rule for servers of `version`, for clients with `ClientOptions::key_prefix`
/// `key_prefix` (empty: none): every name, and with it every key and channel, starts with
/// `key_prefix` then `prefix`, and the client records are `<key_prefix>polylock:client:*`.
/// It grants only what `ACL SETUSER` of `version` takes (no sharded pub/sub before 7.0, no
/// `CLIENT SETINFO` on 7.0 and 7.1): [`RedisVersion::accepts_grant`].
pub fn rule_for(version: RedisVersion, key_prefix: &str, prefix: &str) -> Vec<String> {
    let prefix = &format!("{key_prefix}{prefix}");
    let mut args = vec![
        "resetkeys".to_owned(),
        "resetchannels".to_owned(),
        "-@all".to_owned(),
    ];
    args.extend(
        commands_for(version)
            .iter()
            .map(|command| format!("+{command}")),
    );
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

/// The rule as one `ACL SETUSER` line for `user` with password `password` (for the docs), on
/// Redis 7.2+ or Valkey.
pub fn setuser_line(user: &str, password: &str, prefix: &str) -> String {
    setuser_line_for(RedisVersion::NEWEST, user, password, prefix)
}

/// [`setuser_line`] for servers of `version` ([`rule_for`]).
pub fn setuser_line_for(version: RedisVersion, user: &str, password: &str, prefix: &str) -> String {
    let mut line = format!("ACL SETUSER {user} on >{password}");
    for arg in rule_for(version, "", prefix) {
        line.push(' ');
        if arg.contains(['{', '*', '&', '~', '|']) {
            line.push_str(&format!("'{arg}'"));
        } else {
            line.push_str(&arg);
        }
    }
    line
}
