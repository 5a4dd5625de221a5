//! `polylock check --permissions --console`: what the connecting Redis user lacks of the
//! read-only rule `polylock console` needs to look (docs/console.md): `-@all +@read
//! +@connection +evalsha +eval +script|load +time +cluster|slots +role` (on a Cluster also
//! `+spublish` on the pub/sub probe channel) on the names shown, the keys beside them and the
//! client records, and no other channel. Two passes, both harmless (reads, and a one-line
//! script loaded):
//! - the console's own reads, as it runs them, through a polylock client (any deployment):
//!   connecting, the SCAN of the names and of the client records, the records' HMGET, and the
//!   inspection script on a probe name;
//! - on a one-server URL, each command the console sends or its script calls, alone, with
//!   harmless arguments on a probe key, so that every missing part is listed at once (the
//!   inspection script stops at its first refusal, and calls `GET`, `HGETALL`, `LRANGE`,
//!   `ZRANGE` only for the kinds of key it meets).

use std::time::Duration;

use redis::aio::MultiplexedConnection;
use serde::Serialize;

use crate::client_records;
use crate::inspect::read_state;
use polylock_cli_common::block_on;
use polylock_cli_common::error::{CliError, CliResult};
use polylock_cli_common::raw;

/// The commands of the rule docs/console.md gives, as `ACL SETUSER` arguments.
const CONSOLE_RULE: &[&str] = &[
    "-@all",
    "+@read",
    "+@connection",
    "+evalsha",
    "+eval",
    "+script|load",
    "+time",
];

/// The name (after the prefixes) whose keys the check reads: nothing is there.
const PROBE_NAME: &str = "polylock_console_probe";

/// A one-line script, loaded and run to try `SCRIPT LOAD`, `EVALSHA` and `EVAL`.
const TRIVIAL_SCRIPT: &str = "return 1";

/// One part of the rule the user lacks.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Missing {
    /// The `ACL SETUSER` argument that grants it (`+scan`, `~app:*`).
    pub grant: String,
    pub needed_for: String,
}

#[derive(Debug, Default, Serialize)]
pub struct Report {
    pub missing: Vec<Missing>,
    /// Each command was also tried alone (a one-server URL).
    pub each_command_tried: bool,
    /// Refusals that name no command or key (a script's call refused, on Redis 7.0): reported
    /// only when nothing else explains them.
    #[serde(skip)]
    unnamed: Vec<Missing>,
}

impl Report {
    fn missing(&mut self, grant: String, needed_for: &str) {
        if !self.missing.iter().any(|missing| missing.grant == grant) {
            self.missing.push(Missing {
                grant,
                needed_for: needed_for.to_owned(),
            });
        }
    }

    /// Notes a refusal in `message` (a NOPERM reply, or a script's call refused): the command
    /// it names, or the key patterns `keys` when it is a key it refuses (a refusal does not say
    /// which key).
    fn note(&mut self, message: &str, keys: &[String], needed_for: &str) -> bool {
        let text = message.to_lowercase();
        let refused = text.contains("noperm")
            || text.contains("no permissions")
            || text.contains("can't run")
            || text.contains("permissions to run");
        if !refused {
            return false;
        }
        match quoted_command(&text) {
            Some(command) => self.missing(format!("+{command}"), needed_for),
            None if text.contains("key") => {
                for pattern in keys {
                    self.missing(format!("~{pattern}"), needed_for);
                }
            }
            None => self.unnamed.push(Missing {
                grant: format!("(refused: {message})"),
                needed_for: needed_for.to_owned(),
            }),
        }
        true
    }

    /// The report, with the unnamed refusals when nothing named explains them.
    fn finish(mut self) -> Report {
        if self.missing.is_empty() {
            self.missing = std::mem::take(&mut self.unnamed);
        }
        self
    }
}

/// The command a refusal names: `... to run the 'scan' command` -> `scan`; a subcommand's as
/// the rule names it (`script|load`).
fn quoted_command(text: &str) -> Option<String> {
    let end = text.rfind("' command")?;
    let start = text[..end].rfind('\'')? + 1;
    Some(text[start..end].replace(' ', "|"))
}

pub fn run(url: &str, key_prefix: Option<&str>, prefix: &str, json: bool) -> CliResult<()> {
    let report = block_on(check(url, key_prefix, prefix))?;
    let shown = format!("{}{prefix}", key_prefix.unwrap_or_default());
    let rule = rule(url, &shown, key_prefix.unwrap_or_default());
    if json {
        let json = serde_json::json!({
            "url": raw::redact(url),
            "prefix": shown,
            "console": true,
            "missing": report.missing,
            "each_command_tried": report.each_command_tried,
            "rule": rule,
        });
        println!("{json}");
    } else {
        println!(
            "polylock check --permissions --console on {} for the names under '{shown}':",
            raw::redact(url)
        );
        for missing in &report.missing {
            println!(
                "  missing  {:<28} for {}",
                missing.grant, missing.needed_for
            );
        }
        if url.contains("+cluster://") {
            println!("  (on a cluster of Redis 6.2, leave +spublish out of the rule: it has none)");
        }
        if !report.each_command_tried {
            println!(
                "  (the console's reads only: each command alone is tried on a one-server URL)"
            );
        }
        if report.missing.is_empty() {
            println!("  nothing missing: this user may look at the locks in polylock console");
        } else {
            let grants: Vec<String> = report
                .missing
                .iter()
                .map(|missing| format!("'{}'", missing.grant))
                .collect();
            println!("  grant it: ACL SETUSER <user> {}", grants.join(" "));
            println!(
                "  the whole rule: ACL SETUSER <user> on >PASSWORD {}",
                rule.join(" ")
            );
        }
    }
    if report.missing.is_empty() {
        Ok(())
    } else {
        let grants: Vec<&str> = report.missing.iter().map(|m| m.grant.as_str()).collect();
        Err(CliError::Failed(format!(
            "the Redis user lacks {} part(s) of the rule polylock console needs: {}",
            grants.len(),
            grants.join(" ")
        )))
    }
}

/// The console's rule on the deployment of `url` for the names under `shown` (key prefix and
/// prefix), the keys beside them, and the client records.
fn rule(url: &str, shown: &str, key_prefix: &str) -> Vec<String> {
    // The console publishes and subscribes to nothing: no channel.
    let mut rule = vec!["resetkeys".to_owned(), "resetchannels".to_owned()];
    if shown.is_empty() {
        rule.push("~*".to_owned()); // every key (Redis refuses patterns after `~*`)
    } else {
        let names = polylock::acl::key_patterns(shown);
        rule.extend(names.iter().map(|pattern| format!("~{pattern}")));
        rule.push(format!(
            "~{key_prefix}{}",
            polylock::acl::CLIENT_RECORD_PATTERN
        ));
    }
    rule.extend(CONSOLE_RULE.iter().map(|part| part.to_string()));
    // What the client reads to find the nodes: the slot map on a cluster, the role of the node
    // a Sentinel names (both read-only, and harmless elsewhere).
    let deployment = polylock::acl::CLUSTER_COMMANDS
        .iter()
        .chain(polylock::acl::SENTINEL_COMMANDS);
    rule.extend(deployment.map(|command| format!("+{command}")));
    if url.contains("+cluster://") {
        // A client learns at connect whether the cluster has sharded pub/sub: one SPUBLISH on
        // the probe channel (Redis 7.0+; Redis 6.2 has no SPUBLISH to grant).
        rule.push("+spublish".to_owned());
        rule.push(format!("&{}", polylock::acl::PROBE_CHANNEL));
    }
    rule
}

async fn check(url: &str, key_prefix: Option<&str>, prefix: &str) -> CliResult<Report> {
    let mut report = Report::default();
    let key_prefix = key_prefix.unwrap_or_default();
    let shown = format!("{key_prefix}{prefix}");
    // The names; with the keys beside them (queues, time-outs), which the inspection reads.
    let names = vec![format!("{shown}*")];
    let lock_keys = polylock::acl::key_patterns(&shown);
    let records = vec![format!(
        "{key_prefix}{}",
        polylock::acl::CLIENT_RECORD_PATTERN
    )];
    let no_key: Vec<String> = Vec::new();
    // The console's reads, as it runs them.
    let client = match raw::client(url, Some(key_prefix).filter(|p| !p.is_empty())).await {
        Ok(client) => Some(client),
        Err(err) if report.note(&err.to_string(), &no_key, "connecting") => None,
        Err(err) => return Err(err),
    };
    if let Some(client) = &client {
        if let Err(err) = client.scan_names(&format!("{prefix}*")).await {
            report.note(&err.to_string(), &names, "listing the names (SCAN)");
        }
        let read = client_records::read(client, None::<Vec<&str>>).await;
        if let Err(err) = read {
            let needed_for = "the client records (SCAN, HMGET)";
            report.note(&err.to_string(), &records, needed_for);
        }
        let probe = format!("{prefix}{PROBE_NAME}");
        if let Err(err) = read_state(client, &probe).await {
            let needed_for = "reading a lock (one of these keys: a refusal does not say which)";
            report.note(&err.to_string(), &lock_keys, needed_for);
        }
        client.shutdown().await;
    }
    // Each command alone, where a plain connection reaches the server.
    if let Some(mut connection) = plain_connection(url).await {
        report.each_command_tried = true;
        let probe_key = format!("{shown}{PROBE_NAME}");
        let on_probe = |name: &str, args: &[&str]| {
            let mut command = redis::cmd(name);
            command.arg(&probe_key).arg(args);
            command
        };
        let mut record = redis::cmd("HMGET");
        record
            .arg(format!("{key_prefix}polylock:client:{PROBE_NAME}"))
            .arg("name");
        let sha = redis::Script::new(TRIVIAL_SCRIPT).get_hash().to_owned();
        let script = "the inspection script";
        // (the command, what the console needs it for, the key patterns of its key)
        let tries = [
            (
                words(&["SCAN", "0", "COUNT", "1"]),
                "listing the names and records",
                &no_key,
            ),
            (record, "the client records", &records),
            (
                words(&["SCRIPT", "LOAD", TRIVIAL_SCRIPT]),
                "loading the inspection script",
                &no_key,
            ),
            (
                words(&["EVALSHA", &sha, "0"]),
                "reading a lock (the inspection script)",
                &no_key,
            ),
            (
                words(&["EVAL", TRIVIAL_SCRIPT, "0"]),
                "reading a lock (the script, not loaded)",
                &no_key,
            ),
            (words(&["TIME"]), script, &no_key),
            (on_probe("TYPE", &[]), script, &names),
            (on_probe("PTTL", &[]), script, &names),
            (on_probe("HGETALL", &[]), script, &names),
            (on_probe("GET", &[]), script, &names),
            (on_probe("LRANGE", &["0", "0"]), script, &names),
            (on_probe("ZRANGE", &["0", "0"]), script, &names),
        ];
        for (command, needed_for, keys) in tries {
            let reply: redis::RedisResult<redis::Value> =
                command.query_async(&mut connection).await;
            if let Err(err) = reply {
                report.note(&err.to_string(), keys, needed_for);
            }
        }
    }
    Ok(report.finish())
}

/// A command of `words` (its name first).
fn words(words: &[&str]) -> redis::Cmd {
    let mut command = redis::cmd(words[0]);
    command.arg(&words[1..]);
    command
}

/// A plain connection for a one-server URL (`redis://`, `rediss://`); `None` otherwise, or
/// when it cannot be made (the client's reads said why).
async fn plain_connection(url: &str) -> Option<MultiplexedConnection> {
    if !(url.starts_with("redis://") || url.starts_with("rediss://")) {
        return None;
    }
    tokio::time::timeout(Duration::from_secs(7), raw::connect(url))
        .await
        .ok()?
        .ok()
}
