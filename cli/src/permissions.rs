//! `polylock check --permissions`: what the connecting Redis user lacks of the ACL rule
//! polylock needs (`polylock::acl::check`, which tries each part harmlessly), and the
//! `ACL SETUSER` arguments that grant it.

use std::time::Duration;

use polylock::acl::Report;
use polylock::ClientOptions;

use polylock_cli_common::block_on;
use polylock_cli_common::error::{CliError, CliResult};
use polylock_cli_common::raw::redact;

pub fn run(url: &str, key_prefix: Option<&str>, prefix: &str, json: bool) -> CliResult<()> {
    let options = ClientOptions {
        connect_timeout: Duration::from_secs(5),
        response_timeout: Duration::from_secs(5),
        key_prefix: key_prefix.map(str::to_owned),
        tls_ca: polylock_cli_common::raw::tls_ca(url),
        ..ClientOptions::default()
    };
    let report = block_on(polylock::acl::check(url, options, prefix))?;
    // The rule for the server's version (HELLO), as the check tried it.
    let version = report
        .version
        .unwrap_or(polylock::acl::RedisVersion::NEWEST);
    let rule = polylock::acl::rule_for(version, key_prefix.unwrap_or_default(), prefix);
    // What the rule is for: the names under both prefixes.
    let shown = format!("{}{prefix}", key_prefix.unwrap_or_default());
    let prefix = shown.as_str();
    let required: Vec<&str> = report
        .missing
        .iter()
        .filter(|missing| !missing.optional)
        .map(|missing| missing.grant.as_str())
        .collect();
    if json {
        print_json(url, prefix, &report, rule);
    } else {
        print_text(url, prefix, &report, &required);
    }
    if required.is_empty() {
        Ok(())
    } else {
        Err(CliError::Failed(format!(
            "the Redis user lacks {} part(s) of the rule polylock needs: {}",
            required.len(),
            required.join(" ")
        )))
    }
}

fn print_json(url: &str, prefix: &str, report: &Report, rule: Vec<String>) {
    let missing: Vec<serde_json::Value> = report
        .missing
        .iter()
        .map(|missing| {
            serde_json::json!({
                "grant": missing.grant,
                "needed_for": missing.needed_for,
                "optional": missing.optional,
            })
        })
        .collect();
    let json = serde_json::json!({
        "url": redact(url),
        "prefix": prefix,
        "cluster_pubsub": report.cluster_pubsub,
        "redis_version": report.version.map(|version| version.to_string()),
        "missing": missing,
        "rule": rule,
    });
    println!("{json}");
}

fn print_text(url: &str, prefix: &str, report: &Report, required: &[&str]) {
    println!(
        "polylock check --permissions on {} for the locks under '{prefix}':",
        redact(url)
    );
    if let Some(mode) = report.cluster_pubsub {
        println!("  cluster pub/sub mode   {mode}");
    }
    for missing in &report.missing {
        let what = if missing.optional {
            "optional"
        } else {
            "missing"
        };
        println!(
            "  {what:<8} {:<28} for {}",
            missing.grant, missing.needed_for
        );
    }
    if required.is_empty() {
        println!("  nothing missing: this user may use every lock kind under '{prefix}'");
    } else {
        let quoted: Vec<String> = required.iter().map(|grant| format!("'{grant}'")).collect();
        println!("  grant it: ACL SETUSER <user> {}", quoted.join(" "));
    }
    if report.missing.iter().any(|missing| missing.optional) {
        println!("  (optional: +wait +info only for sync_replicas)");
    }
}
