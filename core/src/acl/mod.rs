//! The least-privilege Redis ACL rule a polylock user needs, as data: the docs, the tests and
//! `polylock check` all read it from here, so that it cannot drift from what the core sends.
//!
//! A rule is for one key prefix (the locks of an application, e.g. `app:`): the names of its
//! locks start with it, and so do the keys and channels Redisson and polylock derive from a
//! name, after their own prefix (`redisson_lock_queue:{app:42}`, `{app:42}:timeout`, ...; see
//! [`crate::keys`]). Written for Redis 7+.
//!
//! The rule is data (`acl/rules.rs`, which every layer may read); [`check`] tries it with a
//! client's connections, so it sits above the client.

pub(crate) mod rules;

pub use rules::*;

use crate::redis_errors::{quoted, refusal};

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
}

/// The lock name whose keys and channels [`check`] tries: `<prefix>polylock_acl_probe`.
pub fn probe_name(prefix: &str) -> String {
    format!("{prefix}polylock_acl_probe")
}

static PROBE: std::sync::LazyLock<redis::Script> =
    std::sync::LazyLock::new(|| redis::Script::new(include_str!("probe.lua")));

/// Tries, as the user of `url`, everything [`rule`] grants for the locks under `prefix` (after
/// `options.key_prefix`, as [`rule_under_key_prefix`]), and [`sync_replicas_rule`] and
/// [`restore_rule`] (reported as optional), harmlessly: each command the client sends,
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
    crate::tls::install_crypto_provider();
    let (url, prefix) = (url.to_owned(), prefix.to_owned());
    crate::runtime()
        .spawn(async move { check_on_runtime(&url, options, &prefix).await })
        .await
        .map_err(|err| crate::Error::connection(format!("check permissions: {err}")))?
}

async fn check_on_runtime(
    url: &str,
    options: crate::ClientOptions,
    prefix: &str,
) -> crate::Result<Report> {
    use crate::connection::target::{redact, Target};
    use crate::connection::Publish;
    let tls = crate::tls::Tls::from_options(&options)?;
    let deployment = Target::parse(url, &tls)?;
    let cluster = matches!(deployment, Target::Cluster { .. });
    let opened = crate::client::open(deployment, &redact(url), &options).await?;
    let _sentinel = StopSentinel(opened.sentinel.clone());
    let connection = opened.connection.clone();
    let mut report = Report::default();
    let mut missing = |grant: String, needed_for: &str, optional: bool| {
        if !report.missing.iter().any(|m| m.grant == grant) {
            report.missing.push(Missing {
                grant,
                needed_for: needed_for.to_owned(),
                optional,
            });
        }
    };
    let sharded = match &opened.publish {
        Ok(Publish::Broadcast) => false,
        Ok(_) => cluster,
        Err(_) => {
            missing("+spublish".into(), "cluster pub/sub (SPUBLISH)", false);
            true
        }
    };
    let cluster_pubsub = cluster.then_some(if sharded { "sharded" } else { "broadcast" });
    // Under a key prefix every name, and the client records, start with it.
    let key_prefix = options.key_prefix.as_deref().unwrap_or_default();
    let prefix = &format!("{key_prefix}{prefix}");
    let name = probe_name(prefix);
    let probe_key = format!("{{{name}}}");

    // Commands the client sends itself.
    let sent = |command: redis::Cmd| {
        let connection = connection.clone();
        let key = probe_key.clone();
        async move { connection.query_at(&key, command).await }
    };
    if let Err(err) = sent(redis::cmd("PING")).await {
        note(&err, &mut missing, "connection checks", false);
    }
    if let Err(err) = sent(redis::cmd("DEL").arg(&probe_key).clone()).await {
        note(
            &err,
            &mut missing,
            "a semaphore's spent request latches",
            false,
        );
    }
    let mut loaded = true;
    if let Err(err) = PROBE
        .prepare_invoke()
        .load_async(&mut connection.clone())
        .await
    {
        loaded = false;
        note(&err, &mut missing, "loading the lock scripts", false);
    }
    // The client record: written (then deleted) and read, on a probe record of its own.
    let record = format!("{key_prefix}{}", crate::keys::client_record(&name));
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
    if let Err(err) = write.query_async::<()>(&mut connection.clone()).await {
        if refusal(&err).is_some() && err.to_string().contains("key") {
            missing(
                format!("~{key_prefix}{CLIENT_RECORD_PATTERN}"),
                "the client record (who holds a lock)",
                false,
            );
        } else {
            note(
                &err,
                &mut missing,
                "the client record (who holds a lock)",
                false,
            );
        }
    }
    // Each key of a lock (one call per key: NOPERM does not say which key).
    let key_names = derived_keys(&name);
    for key in &key_names {
        let mut call = PROBE.prepare_invoke();
        call.key(key).arg("keys");
        if let Err(err) = call
            .invoke_async::<redis::Value>(&mut connection.clone())
            .await
        {
            if refusal(&err).is_some() && !err.to_string().contains("key") {
                note(&err, &mut missing, "running the lock scripts", false);
                break;
            }
            if refusal(&err).is_some() {
                let grant = key_patterns(prefix)
                    .into_iter()
                    .find(|pattern| glob_matches(pattern, key))
                    .unwrap_or_else(|| key.clone());
                missing(format!("~{grant}"), "the keys of the locks", false);
            } else if !loaded {
                break;
            }
        }
    }
    // Each command the scripts call, and publishing on each channel of a lock.
    let channels = derived_channels(&name);
    let mut call = PROBE.prepare_invoke();
    call.key(&probe_key)
        .arg(if sharded { "sharded" } else { "plain" })
        .arg(&channels);
    match call
        .invoke_async::<Vec<String>>(&mut connection.clone())
        .await
    {
        Ok(refused) => {
            for item in refused {
                match item.strip_prefix('&') {
                    Some(channel) => {
                        let grant = channel_patterns(prefix)
                            .into_iter()
                            .find(|pattern| glob_matches(pattern, channel))
                            .unwrap_or_else(|| channel.to_owned());
                        missing(format!("&{grant}"), "the channels of the locks", false);
                    }
                    None if RESTORE_COMMANDS.contains(&item.as_str()) => missing(
                        format!("+{item}"),
                        "one server call fewer per lock acquire",
                        true,
                    ),
                    None => missing(format!("+{item}"), "the lock scripts", false),
                }
            }
        }
        Err(err) => note(&err, &mut missing, "running the lock scripts", false),
    }
    // Waiting: subscribing to each channel of a lock (a client that polls never does).
    if !options.wait_mode.is_poll() {
        let hub = crate::kinds::messages::LockHub::start(
            opened.source,
            crate::connection::Timeouts {
                connect: options.connect_timeout,
                response: options.response_timeout,
            },
            Box::new(|| {}),
            // A probe's subscriptions are nobody's metrics.
            std::sync::Arc::new(crate::metrics::Metrics::new(String::new(), false, 0)),
        )
        .await;
        let subscribe = if sharded { "+ssubscribe" } else { "+subscribe" };
        let mut failed = None;
        match &hub {
            Ok(hub) => {
                for channel in &channels {
                    match hub.subscribe(channel, None).await {
                        Ok(_) => {}
                        Err(err) if err.kind() == crate::ErrorKind::Permission => {
                            if err.to_string().contains("use a channel") {
                                let grant = channel_patterns(prefix)
                                    .into_iter()
                                    .find(|pattern| glob_matches(pattern, channel))
                                    .unwrap_or_else(|| channel.clone());
                                missing(format!("&{grant}"), "the channels of the locks", false);
                            } else {
                                missing(subscribe.into(), "waiting for a release", false);
                                break;
                            }
                        }
                        Err(err) => {
                            failed = Some(err);
                            break;
                        }
                    }
                }
                hub.shutdown();
            }
            Err(err) if err.kind() == crate::ErrorKind::Permission => {
                missing(subscribe.into(), "waiting for a release", false)
            }
            Err(err) => failed = Some(err.clone()),
        }
        if let Some(err) = failed {
            return Err(err);
        }
    }
    // The optional addition for sync_replicas.
    for (command, arguments) in [("INFO", vec!["replication"]), ("WAIT", vec!["0", "0"])] {
        let mut cmd = redis::cmd(command);
        cmd.arg(&arguments);
        if let Err(err) = sent(cmd).await {
            note(&err, &mut missing, "sync_replicas", true);
        }
    }
    report.cluster_pubsub = cluster_pubsub;
    Ok(report)
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

/// Records the command `err` says was refused (the `'quoted'` name the server gives).
fn note(
    err: &redis::RedisError,
    missing: &mut impl FnMut(String, &str, bool),
    needed_for: &str,
    optional: bool,
) {
    if refusal(err).is_none() {
        return;
    }
    let detail = err.detail().unwrap_or_default();
    match quoted(detail) {
        Some(command) => missing(format!("+{}", command.to_lowercase()), needed_for, optional),
        None => missing(format!("(refused: {detail})"), needed_for, optional),
    }
}

/// Every key the kinds derive from the lock `name`, and the name itself.
fn derived_keys(name: &str) -> Vec<String> {
    use crate::keys;
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
    ]
}

/// Every channel the kinds derive from the lock `name`.
fn derived_channels(name: &str) -> Vec<String> {
    use crate::keys;
    vec![
        keys::lock_channel(name),
        keys::lock_told_channel(name, "u:1"),
        keys::lock_listening_channel(name),
        keys::rwlock_channel(name),
        keys::semaphore_channel(name),
        keys::fair_waiter_channel(name, "u:1"),
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
}
