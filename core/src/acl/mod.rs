//! The least-privilege Redis ACL rule a polylock user needs, as data: the docs, the tests and
//! `polylock check` all read it from here, so that it cannot drift from what the core sends.
//!
//! A rule is for one key prefix (the locks of an application, e.g. `app:`): the names of its
//! locks start with it, and so do the keys and channels Redisson and polylock derive from a
//! name, after their own prefix (`redisson_lock_queue:{app:42}`, `{app:42}:timeout`, ...; see
//! [`crate::keys`]). The commands are those the client sends and those the lock scripts call
//! (found in the script sources at build time), each where the server version has it
//! ([`RedisVersion`], [`rule_for`]).
//!
//! The rule is data (`acl/rules.rs`, which every layer may read); [`check`] tries it with a
//! client's connections, so it sits above the client.

pub(crate) mod rules;

pub use rules::*;

use crate::foundation::redis_errors::{quoted, refusal};

/// One part of the rule that the connecting user lacks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Missing {
    /// The `ACL SETUSER` argument that grants it: `+evalsha`, `~redisson_*:{app:*`, `&...`.
    pub grant: String,
    /// What polylock needs it for.
    pub needed_for: String,
    /// Needed only with an option (`sync_replicas`).
    pub optional: bool,
}

/// What [`check`] found.
#[derive(Debug, Clone, Default)]
pub struct Report {
    pub missing: Vec<Missing>,
    /// On a cluster, the pub/sub mode a client picks there (`sharded` or `broadcast`).
    pub cluster_pubsub: Option<&'static str>,
    /// The server's command set, from its `HELLO` reply (`None`: it did not say); the rule
    /// checked is [`rule_for`] that version (the newest when `None`).
    pub version: Option<RedisVersion>,
}

/// The lock name whose keys and channels [`check`] tries: `<prefix>polylock_acl_probe`.
pub fn probe_name(prefix: &str) -> String {
    format!("{prefix}polylock_acl_probe")
}

static PROBE: std::sync::LazyLock<redis::Script> =
    std::sync::LazyLock::new(|| redis::Script::new(include_str!("probe.lua")));

/// Tries, as the user of `url`, everything [`rule_for`] the server's version grants for the locks under `prefix` (after
/// `options.key_prefix`, as [`rule_under_key_prefix`]), and [`sync_replicas_rule`] (reported
/// as optional), harmlessly: each command the client sends,
/// each command the lock scripts call (on a probe key, left empty), each derived key and
/// channel of the lock `<prefix>polylock_acl_probe`. Needs no admin command (`ACL DRYRUN` needs
/// one, and Redis 6.2 lacks it). An error only when it cannot even connect (a refused `PING` or
/// `CLUSTER SLOTS` is a `Permission` error naming it).
pub async fn check(
    url: &str,
    options: crate::ClientOptions,
    prefix: &str,
) -> crate::Result<Report> {
    options.validate()?;
    crate::settings::tls::install_crypto_provider();
    let (url, prefix) = (url.to_owned(), prefix.to_owned());
    crate::foundation::runtime::runtime()
        .spawn(async move { check_on_runtime(&url, options, &prefix).await })
        .await
        .map_err(|err| crate::Error::connection(format!("check permissions: {err}")))?
}

/// [`check`], on the core's runtime.
async fn check_on_runtime(
    url: &str,
    options: crate::ClientOptions,
    prefix: &str,
) -> crate::Result<Report> {
    use crate::connection::target::{redact, Target};
    let tls = crate::settings::tls::Tls::from_options(&options)?;
    let deployment = Target::parse(url, &tls)?;
    let cluster = matches!(deployment, Target::Cluster { .. });
    let opened = crate::client::open(deployment, &redact(url), &options).await?;
    let _sentinel = StopSentinel(opened.sentinel.clone());
    let mut found = Findings::default();
    let sharded = publishes_sharded(&opened.publish, cluster, &mut found);
    // Under a key prefix every name, and the client records, start with it.
    let key_prefix = options.key_prefix.as_deref().unwrap_or_default();
    let mut probe = Probe::new(
        opened.connection.clone(),
        key_prefix,
        prefix,
        sharded,
        found,
    );
    probe
        .send_noting(redis::cmd("PING"), "connection checks", false)
        .await;
    let version = probe.server_version().await;
    let rule_version = version.unwrap_or(RedisVersion::NEWEST);
    probe.client_commands(rule_version).await;
    let script_loaded = probe.load_scripts().await;
    probe.client_record().await;
    probe.lock_keys(script_loaded).await;
    probe.script_commands_and_channels(rule_version).await;
    // Waiting: subscribing to each channel of a lock (a client that polls never does).
    if !options.wait_mode.is_poll() {
        probe.subscriptions(opened.source, &options).await?;
    }
    probe.sync_replicas().await;
    Ok(Report {
        missing: probe.found.0,
        cluster_pubsub: cluster.then_some(if sharded { "sharded" } else { "broadcast" }),
        version,
    })
}

/// Whether pub/sub is sharded here, as a client finds it (a refused `SPUBLISH` is missing).
fn publishes_sharded(
    publish: &crate::Result<crate::connection::Publish>,
    cluster: bool,
    found: &mut Findings,
) -> bool {
    use crate::connection::Publish;
    match publish {
        Ok(Publish::Broadcast) => false,
        Ok(_) => cluster,
        Err(_) => {
            found.missing("+spublish".into(), "cluster pub/sub (SPUBLISH)", false);
            true
        }
    }
}

/// The parts of the rule found missing, each grant once, in the order found.
#[derive(Default)]
struct Findings(Vec<Missing>);

impl Findings {
    /// Records `grant` unless it is recorded already (several probes may find one grant lacking).
    fn missing(&mut self, grant: String, needed_for: &str, optional: bool) {
        if !self.0.iter().any(|m| m.grant == grant) {
            self.0.push(Missing {
                grant,
                needed_for: needed_for.to_owned(),
                optional,
            });
        }
    }

    /// Records the command `err` says was refused (the `'quoted'` name the server gives).
    fn note(&mut self, err: &redis::RedisError, needed_for: &str, optional: bool) {
        if refusal(err).is_none() {
            return;
        }
        let detail = err.detail().unwrap_or_default();
        match quoted(detail) {
            Some(command) => {
                self.missing(format!("+{}", command.to_lowercase()), needed_for, optional)
            }
            None => self.missing(format!("(refused: {detail})"), needed_for, optional),
        }
    }

    /// Records a refused channel of a lock under `prefix` as the rule's pattern that covers it.
    fn channel(&mut self, prefix: &str, channel: &str) {
        let grant = format!("&{}", covering(channel_patterns(prefix), channel));
        self.missing(grant, "the channels of the locks", false);
    }

    /// Records the subscribe command of waiters (`sharded`: `SSUBSCRIBE`) as refused.
    fn subscribe(&mut self, sharded: bool) {
        let subscribe = if sharded { "+ssubscribe" } else { "+subscribe" };
        self.missing(subscribe.into(), "waiting for a release", false);
    }
}

/// What the steps of [`check_on_runtime`] share: the connection, the probe lock, what is missing.
struct Probe {
    connection: crate::connection::Connection,
    /// `options.key_prefix` (empty without one): the client record starts with it.
    key_prefix: String,
    /// The key prefix and the prefix checked: every name of the probe lock starts with it.
    prefix: String,
    /// The probe lock's name.
    name: String,
    /// The probe key: the name as its own hash tag, left empty.
    key: String,
    /// Every channel derived from the probe lock's name.
    channels: Vec<String>,
    /// The deployment's pub/sub is sharded (`SPUBLISH`, `SSUBSCRIBE`).
    sharded: bool,
    found: Findings,
}

impl Probe {
    /// The probe of the locks under `key_prefix` and `prefix`, on `connection`.
    fn new(
        connection: crate::connection::Connection,
        key_prefix: &str,
        prefix: &str,
        sharded: bool,
        found: Findings,
    ) -> Probe {
        let prefix = format!("{key_prefix}{prefix}");
        let name = probe_name(&prefix);
        Probe {
            connection,
            key_prefix: key_prefix.to_owned(),
            key: format!("{{{name}}}"),
            channels: derived_channels(&name),
            prefix,
            name,
            sharded,
            found,
        }
    }

    /// Sends a command as the client sends it itself (routed by the probe key).
    async fn send(&self, command: redis::Cmd) -> redis::RedisResult<redis::Value> {
        self.connection.query_at(&self.key, command).await
    }

    /// [`Probe::send`], noting the command when it is refused.
    async fn send_noting(&mut self, command: redis::Cmd, needed_for: &str, optional: bool) {
        if let Err(err) = self.send(command).await {
            self.found.note(&err, needed_for, optional);
        }
    }

    /// The server's version (HELLO needs no grant: every user may send it).
    async fn server_version(&self) -> Option<RedisVersion> {
        match self.send(redis::cmd("HELLO").arg(2).clone()).await {
            Ok(reply) => hello_version(&reply),
            Err(_) => None,
        }
    }

    /// The commands the client sends itself besides `PING`, where `version` has them.
    async fn client_commands(&mut self, version: RedisVersion) {
        if version.accepts_grant("client|setinfo") {
            // What the `redis` crate sends on each new connection (its own name, unchanged).
            let setinfo = redis::cmd("CLIENT")
                .arg("SETINFO")
                .arg("LIB-NAME")
                .arg("redis-rs")
                .clone();
            self.send_noting(setinfo, "connecting (the redis crate sends it)", false)
                .await;
        }
        let del = redis::cmd("DEL").arg(&self.key).clone();
        self.send_noting(del, "a semaphore's spent request latches", false)
            .await;
    }

    /// Loads the probe script as the client loads the lock scripts: false when it could not.
    async fn load_scripts(&mut self) -> bool {
        let Err(err) = PROBE
            .prepare_invoke()
            .load_async(&mut self.connection.clone())
            .await
        else {
            return true;
        };
        self.found.note(&err, "loading the lock scripts", false);
        false
    }

    /// The client record: written (then deleted) and read, on a probe record of its own.
    async fn client_record(&mut self) {
        let record = format!(
            "{}{}",
            self.key_prefix,
            crate::foundation::keys::client_record(&self.name)
        );
        let mut write = redis::pipe();
        write
            .cmd("HSET")
            .arg(&record)
            .arg("probe")
            .arg("1")
            .ignore();
        write.cmd("PEXPIRE").arg(&record).arg(1000).ignore();
        write.cmd("HMGET").arg(&record).arg("probe").ignore();
        write.cmd("DEL").arg(&record).ignore();
        let Err(err) = write.query_async::<()>(&mut self.connection.clone()).await else {
            return;
        };
        let needed_for = "the client record (who holds a lock)";
        if refusal(&err).is_some() && err.to_string().contains("key") {
            let grant = format!("~{}{CLIENT_RECORD_PATTERN}", self.key_prefix);
            self.found.missing(grant, needed_for, false);
        } else {
            self.found.note(&err, needed_for, false);
        }
    }

    /// Each key of a lock (one call per key: NOPERM does not say which key).
    async fn lock_keys(&mut self, script_loaded: bool) {
        for key in &derived_keys(&self.name) {
            let mut call = PROBE.prepare_invoke();
            call.key(key).arg("keys");
            let Err(err) = call
                .invoke_async::<redis::Value>(&mut self.connection.clone())
                .await
            else {
                continue;
            };
            if refusal(&err).is_some() && !err.to_string().contains("key") {
                self.found.note(&err, "running the lock scripts", false);
                break;
            }
            if refusal(&err).is_some() {
                let grant = format!("~{}", covering(key_patterns(&self.prefix), key));
                self.found.missing(grant, "the keys of the locks", false);
            } else if !script_loaded {
                break;
            }
        }
    }

    /// Each command the scripts call (where `version` has it), and publishing on each channel.
    async fn script_commands_and_channels(&mut self, version: RedisVersion) {
        // The publish commands only on the channels of a lock: a channel is no key.
        let probed: Vec<&str> = SCRIPT_COMMANDS
            .iter()
            .copied()
            .filter(|command| !matches!(*command, "publish" | "spublish"))
            .filter(|command| version.accepts_grant(command))
            .collect();
        let mut call = PROBE.prepare_invoke();
        call.key(&self.key)
            .arg(if self.sharded { "sharded" } else { "plain" })
            .arg(probed.len())
            .arg(&probed)
            .arg(&self.channels);
        match call
            .invoke_async::<Vec<String>>(&mut self.connection.clone())
            .await
        {
            Ok(refused) => {
                for item in refused {
                    match item.strip_prefix('&') {
                        Some(channel) => self.found.channel(&self.prefix, channel),
                        None => self
                            .found
                            .missing(format!("+{item}"), "the lock scripts", false),
                    }
                }
            }
            Err(err) => self.found.note(&err, "running the lock scripts", false),
        }
    }

    /// Subscribes to each channel of a lock as a waiter does (an error not a refusal ends it).
    async fn subscriptions(
        &mut self,
        source: crate::connection::pubsub::Source,
        options: &crate::ClientOptions,
    ) -> crate::Result<()> {
        let hub = crate::kinds::messages::LockHub::start(
            source,
            crate::connection::Timeouts {
                connect: options.connect_timeout,
                response: options.response_timeout,
            },
            Box::new(|| {}),
            // A probe's subscriptions are nobody's metrics.
            std::sync::Arc::new(crate::metrics::Metrics::new(String::new(), false, 0)),
        )
        .await;
        let failed = match &hub {
            Ok(hub) => {
                let failed = self.subscribe_each(hub).await;
                hub.shutdown();
                failed
            }
            Err(err) if err.kind() == crate::ErrorKind::Permission => {
                self.found.subscribe(self.sharded);
                None
            }
            Err(err) => Some(err.clone()),
        };
        match failed {
            Some(err) => Err(err),
            None => Ok(()),
        }
    }

    /// Subscribes to each channel on `hub`, noting refusals: the first other error, if any.
    async fn subscribe_each(
        &mut self,
        hub: &crate::kinds::messages::LockHub,
    ) -> Option<crate::Error> {
        for channel in &self.channels {
            match hub.subscribe(channel, None).await {
                Ok(_) => {}
                Err(err) if err.kind() == crate::ErrorKind::Permission => {
                    if err.to_string().contains("use a channel") {
                        self.found.channel(&self.prefix, channel);
                    } else {
                        self.found.subscribe(self.sharded);
                        break;
                    }
                }
                Err(err) => return Some(err),
            }
        }
        None
    }

    /// The optional addition for sync_replicas.
    async fn sync_replicas(&mut self) {
        for (command, arguments) in [("INFO", vec!["replication"]), ("WAIT", vec!["0", "0"])] {
            let mut cmd = redis::cmd(command);
            cmd.arg(&arguments);
            self.send_noting(cmd, "sync_replicas", true).await;
        }
    }
}

/// The pattern of `patterns` covering `name` (the grant to report), else `name` itself.
fn covering(patterns: Vec<String>, name: &str) -> String {
    patterns
        .into_iter()
        .find(|pattern| glob_matches(pattern, name))
        .unwrap_or_else(|| name.to_owned())
}

/// Stops a Sentinel client's watch when the check ends, however it ends.
struct StopSentinel(Option<std::sync::Arc<crate::connection::sentinel::Sentinel>>);

impl Drop for StopSentinel {
    fn drop(&mut self) {
        if let Some(sentinel) = &self.0 {
            sentinel.shutdown();
        }
    }
}

/// The version a `HELLO 2` reply gives (its `server` and `version` fields).
fn hello_version(reply: &redis::Value) -> Option<RedisVersion> {
    let text = |value: &redis::Value| match value {
        redis::Value::BulkString(bytes) => Some(String::from_utf8_lossy(bytes).into_owned()),
        redis::Value::SimpleString(text) => Some(text.clone()),
        _ => None,
    };
    let pairs: Vec<(String, String)> = match reply {
        redis::Value::Array(items) => items
            .chunks(2)
            .filter_map(|pair| Some((text(pair.first()?)?, text(pair.get(1)?)?)))
            .collect(),
        redis::Value::Map(items) => items
            .iter()
            .filter_map(|(field, value)| Some((text(field)?, text(value)?)))
            .collect(),
        _ => return None,
    };
    let field = |name: &str| {
        pairs
            .iter()
            .find(|(field, _)| field == name)
            .map(|(_, value)| value.as_str())
    };
    RedisVersion::of_server(field("server").unwrap_or("redis"), field("version")?)
}

/// Every key the kinds derive from the lock `name`, and the name itself.
fn derived_keys(name: &str) -> Vec<String> {
    use crate::foundation::keys;
    vec![
        name.to_owned(),
        keys::lock_waiters(name),
        keys::lock_reservation(name),
        keys::lock_grants(name),
        keys::unlock_latch(name, "r"),
        keys::acquire_latch(name, "r"),
        keys::release_trace(name, "r"),
        keys::fenced_token(name),
        keys::fence(name),
        format!("{}:1", keys::rwlock_timeout_prefix(name, "u:1")),
        keys::rwlock_writers(name),
        keys::rwlock_readers(name),
        keys::rwlock_since(name),
        keys::permit_timeouts(name),
        keys::fair_queue(name),
        keys::fair_timeouts(name),
        keys::fair_seen(name),
        keys::fair_grants(name),
        keys::fifo_line(name),
        keys::fifo_waiter_record(name, "u:1"),
        keys::election_record(name),
        // A count-down latch keeps a key named as its channel, and polylock's mark beside it.
        keys::latch_channel(name),
        keys::latch_mark(name),
    ]
}

/// Every channel the kinds derive from the lock `name`.
fn derived_channels(name: &str) -> Vec<String> {
    use crate::foundation::keys;
    vec![
        keys::lock_channel(name),
        keys::lock_told_channel(name, "u:1"),
        keys::lock_listening_channel(name),
        keys::rwlock_channel(name),
        keys::semaphore_channel(name),
        keys::fair_waiter_channel(name, "u:1"),
        keys::fifo_waiter_channel(name, "u:1"),
        keys::election_channel(name),
        keys::latch_channel(name),
    ]
}

/// Glob match as Redis does it for key and channel patterns, for the literal and `*` parts
/// these patterns use.
fn glob_matches(pattern: &str, text: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == text,
        Some((head, rest)) => {
            let Some(text) = text.strip_prefix(head) else {
                return false;
            };
            (0..=text.len())
                .filter(|i| text.is_char_boundary(*i))
                .any(|i| glob_matches(rest, &text[i..]))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A server's error reply as the `redis` crate hands it over.
    fn reply(line: &str) -> redis::RedisError {
        let value = redis::parse_redis_value(format!("-{line}\r\n").as_bytes()).unwrap();
        value.extract_error().unwrap_err()
    }

    #[test]
    fn refusals_name_the_command_the_key_or_the_channel() {
        let said = |line: &str| refusal(&reply(line)).unwrap_or_default();
        assert!(
            said("NOPERM this user has no permissions to run the 'evalsha' command")
                .starts_with("permission denied: the Redis user may not run EVALSHA (Redis: ")
        );
        // A command whose name holds "key" is still a command.
        assert!(
            said("NOPERM this user has no permissions to run the 'hkeys' command")
                .contains("may not run HKEYS (")
        );
        assert!(said(
            "NOPERM this user has no permissions to access one of the keys used as arguments"
        )
        .contains("may not access a key of this call"));
        assert!(said(
            "NOPERM this user has no permissions to access one of the channels used as arguments"
        )
        .contains("may not use a channel of this call"));
        assert!(said("ERR The user executing the script can't publish to the channel mentioned in the command script: ab12, on @user_script:1.")
            .contains("may not use a channel of this call (the lock's channel or one derived from its name) from a lock script (Redis: The user executing the script can't publish to the channel mentioned in the command)"));
        assert!(said("ERR The user executing the script can't run this command or subcommand script: ab12, on @user_script:1.")
            .contains("may not run a command the lock script calls from a lock script"));
        assert_eq!(refusal(&reply("ERR unknown command 'SPUBLISH'")), None);
        assert_eq!(refusal(&reply("WRONGTYPE Operation against a key")), None);
    }

    /// Every key and channel the kinds derive from a name under the prefix, with and without
    /// the name's own hash tag, falls under the rule's patterns.
    #[test]
    fn the_patterns_cover_every_derived_key_and_channel() {
        for name in ["app:42", "app:{eu}:42"] {
            for key in derived_keys(name) {
                assert!(
                    key_patterns("app:").iter().any(|p| glob_matches(p, &key)),
                    "key {key}"
                );
            }
            for channel in derived_channels(name) {
                assert!(
                    channel_patterns("app:")
                        .iter()
                        .any(|p| glob_matches(p, &channel)),
                    "channel {channel}"
                );
            }
        }
        assert!(!key_patterns("app:")
            .iter()
            .any(|p| glob_matches(p, "other:1")));
        assert!(!key_patterns("app:")
            .iter()
            .any(|p| glob_matches(p, "redisson_lock_queue:{other:1}")));
    }

    /// Every key and channel shape `foundation/keys.rs` names is probed by `check` (and so
    /// covered by the test above): a new `pub fn` there that makes a name fails here until it is
    /// listed in `derived_keys` or `derived_channels`, or below as no shape of its own.
    #[test]
    fn every_key_shape_of_keys_rs_is_probed() {
        // Helpers and prefixes of shapes listed (`tagged`, `suffixed`, `*_prefix`), and names
        // that are no key of a lock (the client record has a rule part of its own).
        const NO_SHAPE: &[&str] = &[
            "tagged",
            "suffixed",
            "lock_told_prefix",
            "acquire_latch_prefix",
            "rwlock_timeout_prefix",
            "fifo_waiter_prefix",
            "fifo_channel_prefix",
            "client_record",
            "owner_client_id",
            "is_auxiliary",
        ];
        let keys_rs = include_str!("../foundation/keys.rs");
        let this = include_str!("mod.rs");
        let listed =
            &this[this.find("fn derived_keys").unwrap()..this.find("fn glob_matches").unwrap()];
        let mut shapes = 0;
        for line in keys_rs.lines() {
            let Some(rest) = line.strip_prefix("pub fn ") else {
                continue;
            };
            let name = &rest[..rest.find('(').unwrap()];
            if NO_SHAPE.contains(&name) {
                continue;
            }
            shapes += 1;
            assert!(
                listed.contains(&format!("keys::{name}(")),
                "keys::{name} is a key or channel shape that `check` does not probe: list it \
                 in derived_keys or derived_channels (and make sure the rule's patterns cover it)"
            );
        }
        assert!(shapes > 25, "only {shapes} shapes found");
    }

    /// The commands the scripts call are found in their sources (`build.rs`), and the rule of
    /// each version grants each one that version has.
    #[test]
    fn the_rule_grants_what_the_scripts_call_where_the_server_has_it() {
        for command in [
            "decr",
            "decrby",
            "hmget",
            "publish",
            "pubsub|numsub",
            "spublish",
        ] {
            assert!(
                SCRIPT_COMMANDS.contains(&command),
                "{command}: {SCRIPT_COMMANDS:?}"
            );
        }
        let v62 = RedisVersion::new(6, 2, 14);
        let v70 = RedisVersion::new(7, 0, 15);
        for version in [v62, v70, RedisVersion::NEWEST] {
            let rule = rule_for(version, "", "app:");
            for command in SCRIPT_COMMANDS.iter().chain(CLIENT_COMMANDS) {
                let granted = rule.contains(&format!("+{command}"));
                assert_eq!(
                    granted,
                    version.accepts_grant(command),
                    "{version}: {command}"
                );
            }
        }
        let has = |version, grant: &str| rule_for(version, "", "app:").contains(&grant.to_owned());
        assert!(!has(v62, "+spublish") && !has(v62, "+ssubscribe") && has(v62, "+pubsub|numsub"));
        assert!(has(v62, "+client|setinfo"));
        assert!(has(v70, "+spublish") && !has(v70, "+client|setinfo"));
        assert!(has(RedisVersion::NEWEST, "+client|setinfo"));
        assert_eq!(rule("app:"), rule_for(RedisVersion::NEWEST, "", "app:"));
        assert_eq!(
            RedisVersion::of_server("valkey", "8.1.8"),
            Some(RedisVersion::new(7, 2, 4))
        );
        assert_eq!(RedisVersion::of_server("redis", "6.2.14"), Some(v62));
    }

    fn rust_sources(dir: &std::path::Path, found: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                rust_sources(&path, found);
            } else if path.extension().is_some_and(|ext| ext == "rs") {
                found.push(path);
            }
        }
    }

    /// Every command the client's own code sends (`cmd("X")`, outside its tests) is in a group
    /// of the rule (or its optional additions), or one the tools alone send: a new one fails
    /// here until it is placed.
    #[test]
    fn every_command_the_client_sends_is_placed_in_the_rule() {
        const CONTAINERS: &[&str] = &["client", "cluster", "script", "pubsub", "config", "object"];
        let placed: Vec<&str> = CLIENT_COMMANDS
            .iter()
            .chain(CLUSTER_COMMANDS)
            .chain(SENTINEL_COMMANDS)
            .chain(SHARDED_PUBSUB_COMMANDS)
            .chain(SCRIPT_COMMANDS)
            .chain(SYNC_REPLICAS_COMMANDS)
            .chain(TOOL_COMMANDS)
            // Asked of the sentinels (without the data user), and the version HELLO (which
            // every user may send) by `check`. A loop link's handshake (`connection/loop_link.rs`):
            // AUTH, which every connection may send, and SELECT for a URL's database other than
            // 0, which the `redis` crate's own connections send as well.
            .chain(&["sentinel", "hello", "auth", "select"])
            .copied()
            .collect();
        let mut files = Vec::new();
        rust_sources(
            &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
            &mut files,
        );
        let mut sent = 0;
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            let text = text.split("#[cfg(test)]\nmod ").next().unwrap();
            for (at, _) in text.match_indices("cmd(\"") {
                let rest = &text[at + 5..];
                let command = rest[..rest.find('"').unwrap()].to_lowercase();
                let command = if CONTAINERS.contains(&command.as_str()) {
                    let after = &rest[rest.find(')').unwrap() + 1..];
                    let sub = after
                        .trim_start()
                        .strip_prefix(".arg(\"")
                        .and_then(|arg| arg.split('"').next())
                        .unwrap_or_else(|| {
                            panic!("{}: {command} without a subcommand", file.display())
                        });
                    format!("{command}|{}", sub.to_lowercase())
                } else {
                    command
                };
                sent += 1;
                assert!(
                    placed.contains(&command.as_str()),
                    "{} sends {command}, which no group of the ACL rule (acl/rules.rs) holds",
                    file.display()
                );
            }
        }
        assert!(sent > 10, "only {sent} commands found");
    }
}
