//! A lock script in each of its forms (see [`Publish`]).
//!
//! Scripts reach pub/sub only through three names, which a form's prelude defines in front of
//! the script's text; a form is a prelude, never a rewrite of the text:
//! - `publish(channel, message)`: `PUBLISH`, or `SPUBLISH` on a cluster with sharded pub/sub;
//! - `count_listeners(shared, listening)`: the `PUBSUB NUMSUB` reply for the two channels
//!   (`SHARDNUMSUB` when sharded), or an assumed reply where listeners cannot be counted;
//! - `PUBLISH_COUNTS_EVERY_LISTENER`: whether a publish reply of 0 proves that nobody listens
//!   (see `grant` in `lock_hash.lua`).
//!
//! A test reads every script file and fails on a pub/sub command named anywhere else.

use crate::connection::{Publish, ScriptCall};

const PUBLISH: &str =
    "local function publish(channel, message) return redis.call('publish', channel, message) end";
const SHARDED_PUBLISH: &str =
    "local function publish(channel, message) return redis.call('spublish', channel, message) end";
const COUNT: &str = "local function count_listeners(shared, listening) \
                     return redis.call('pubsub', 'numsub', shared, listening) end";
const SHARDED_COUNT: &str = "local function count_listeners(shared, listening) \
                             return redis.call('pubsub', 'shardnumsub', shared, listening) end";
/// Where listeners cannot be counted, another client is assumed to listen on the first channel.
const ASSUMED_COUNT: &str =
    "local function count_listeners(shared, listening) return {shared, 1, listening, 0} end";

/// Test only (the protocol explorer): a publish is appended to [`EXPLORED_LOG`] for the explorer
/// to deliver, and answers the listener count the explorer keeps in [`EXPLORED_LISTENERS`]
/// (keys outside `KEYS`: the explorer runs one server, not a cluster).
#[cfg(feature = "explorer")]
pub const EXPLORED_LOG: &str = "explorer:published";
#[cfg(feature = "explorer")]
pub const EXPLORED_LISTENERS: &str = "explorer:listeners";
#[cfg(feature = "explorer")]
const EXPLORED_PUBLISH: &str = "local function publish(channel, message)
  redis.call('rpush', 'explorer:published', channel, tostring(message))
  return tonumber(redis.call('hget', 'explorer:listeners', channel) or '0')
end";

/// Test only: what `PUBSUB NUMSUB` answers under the explorer: its own listener counts.
#[cfg(feature = "explorer")]
const EXPLORED_COUNT: &str = "local function count_listeners(shared, listening)
  local function count(channel) return tonumber(redis.call('hget', 'explorer:listeners', channel) or '0') end
  return {shared, count(shared), listening, count(listening)}
end";

/// The prelude of a form: whether publish replies count every listener, then `publish` and
/// `count_listeners`.
fn prelude(publish: Publish) -> String {
    let (counts_every_listener, publish, count) = match publish {
        Publish::Plain => (true, PUBLISH, COUNT),
        Publish::Sharded => (true, SHARDED_PUBLISH, SHARDED_COUNT),
        // A PUBLISH reaches every node's subscribers but counts one node's: no count is
        // trusted, and grants are off.
        Publish::Broadcast => (false, PUBLISH, ASSUMED_COUNT),
        // Counted as on one server (the explorer's real NUMSUB), or as a broadcast cluster
        // counts; delivered by the explorer either way.
        #[cfg(feature = "explorer")]
        Publish::Explored { exact: true } => (true, EXPLORED_PUBLISH, EXPLORED_COUNT),
        #[cfg(feature = "explorer")]
        Publish::Explored { exact: false } => (false, EXPLORED_PUBLISH, ASSUMED_COUNT),
    };
    format!("local PUBLISH_COUNTS_EVERY_LISTENER = {counts_every_listener}\n{publish}\n{count}\n")
}

/// A lock script in its forms: see [`Publish`].
pub(crate) struct LockScript {
    plain: redis::Script,
    sharded: redis::Script,
    broadcast: redis::Script,
    #[cfg(feature = "explorer")]
    explored_exact: redis::Script,
    #[cfg(feature = "explorer")]
    explored_inexact: redis::Script,
}

impl LockScript {
    pub(crate) fn new(text: &str) -> LockScript {
        let form = |publish| redis::Script::new(&format!("{}{text}", prelude(publish)));
        LockScript {
            plain: form(Publish::Plain),
            sharded: form(Publish::Sharded),
            broadcast: form(Publish::Broadcast),
            #[cfg(feature = "explorer")]
            explored_exact: form(Publish::Explored { exact: true }),
            #[cfg(feature = "explorer")]
            explored_inexact: form(Publish::Explored { exact: false }),
        }
    }

    pub(crate) fn prepare_invoke(&'static self, publish: Publish) -> ScriptCall {
        ScriptCall::new(match publish {
            Publish::Plain => &self.plain,
            Publish::Sharded => &self.sharded,
            Publish::Broadcast => &self.broadcast,
            #[cfg(feature = "explorer")]
            Publish::Explored { exact: true } => &self.explored_exact,
            #[cfg(feature = "explorer")]
            Publish::Explored { exact: false } => &self.explored_inexact,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use polylock_testkit::RedisServer;
    use std::path::Path;

    /// The spellings a script would use to reach pub/sub itself (lowercased: Redis takes
    /// command names in any case).
    const PUB_SUB_OUTSIDE_A_FORM: [&str; 7] = [
        "'publish'",
        "\"publish\"",
        "'spublish'",
        "\"spublish\"",
        "'pubsub'",
        "\"pubsub\"",
        "publish_counts_every_listener =",
    ];

    /// A call packs the `EVALSHA` the `redis` crate's invocation would: the hash, the key count,
    /// the keys (a key added after an argument too), then the arguments, each one as written
    /// (numbers in decimal, a grant entry as `<request>:<look>` or empty).
    #[test]
    fn a_call_packs_keys_then_arguments() {
        let script: &'static LockScript = Box::leak(Box::new(LockScript::new("return 1")));
        let request = "0123456789abcdef0123456789abcdef";
        let granting = |grant_look| crate::kinds::AcquireArgs {
            owner: "owner",
            lease_ms: 30_000,
            request,
            will_wait: true,
            grant_look,
            reenters: false,
        };
        let mut call = script.prepare_invoke(Publish::Plain);
        call.key("lock")
            .arg(30_000u64)
            .arg(granting(Some(3)).grant_entry())
            .key("trace")
            .arg(granting(None).grant_entry())
            .arg(None::<u64>)
            .arg("last");
        let expected = redis::cmd("EVALSHA")
            .arg(script.plain.get_hash())
            .arg(2)
            .arg("lock")
            .arg("trace")
            .arg("30000")
            .arg(format!("{request}:3"))
            .arg("")
            .arg("last")
            .get_packed_command();
        assert_eq!(
            String::from_utf8(call.eval_cmd().get_packed_command()).unwrap(),
            String::from_utf8(expected).unwrap()
        );
    }

    fn lua_files(dir: &Path, found: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                lua_files(&path, found);
            } else if path.extension().is_some_and(|ext| ext == "lua") {
                found.push(path);
            }
        }
    }

    /// Every lock script file (the kinds', the engine's) reaches pub/sub only through the names
    /// a form defines: a publish spelled in a script would escape the sharded and broadcast forms.
    /// (Not the probe of `polylock check`, which sends what it probes on purpose, nor
    /// `handles/inspect.lua`, which only reads.)
    #[test]
    fn scripts_reach_pub_sub_only_through_their_form() {
        let mut files = Vec::new();
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        lua_files(&src.join("kinds"), &mut files);
        lua_files(&src.join("engine"), &mut files);
        assert!(files.len() > 20, "the scripts were not found: {files:?}");
        let mut publishers = 0;
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap().to_lowercase();
            for spelling in PUB_SUB_OUTSIDE_A_FORM {
                assert!(
                    !text.contains(spelling),
                    "{} names {spelling} itself: call publish(...) / count_listeners(...) instead",
                    file.display()
                );
            }
            publishers += usize::from(text.contains("publish("));
        }
        assert!(publishers > 10, "only {publishers} scripts publish");
    }

    /// The arguments of the calls that start at `open` (just past a call's `(`), split at its
    /// top-level commas, up to its closing parenthesis (strings and nested calls skipped).
    fn call_arguments(text: &str, open: usize) -> Vec<&str> {
        let (mut depth, mut quote, mut start) = (1, None, open);
        let mut arguments = Vec::new();
        let mut chars = text[open..].char_indices().map(|(at, c)| (open + at, c));
        while let Some((at, c)) = chars.next() {
            match (quote, c) {
                (Some(_), '\\') => {
                    chars.next();
                }
                (Some(q), c) if c == q => quote = None,
                (Some(_), _) => {}
                (None, '\'' | '"') => quote = Some(c),
                (None, '(' | '[' | '{') => depth += 1,
                (None, ')' | ']' | '}') => {
                    depth -= 1;
                    if depth == 0 {
                        arguments.push(&text[start..at]);
                        return arguments;
                    }
                }
                (None, ',') if depth == 1 => {
                    arguments.push(&text[start..at]);
                    start = at + 1;
                }
                _ => {}
            }
        }
        panic!("a call from byte {open} is never closed");
    }

    /// The calls in `text` (to the server, or to `publish`) that hand the server a number
    /// literal, each as `line: argument`. Comments are skipped, and so is `publish`'s definition.
    fn numbers_handed_to_the_server(text: &str) -> Vec<String> {
        let mut found = Vec::new();
        let mut line_start = 0;
        for line in text.split_inclusive('\n') {
            let code = line.split("--").next().unwrap();
            // Spelled without their parenthesis: `build.rs` reads this file for the ACL rule.
            for callee in ["redis.call", "redis.pcall", "publish"].map(|name| format!("{name}(")) {
                for (at, _) in code.match_indices(&callee) {
                    let defined = code[..at].trim_end().ends_with("function");
                    let longer_name = code[..at]
                        .chars()
                        .next_back()
                        .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '.');
                    if defined || longer_name {
                        continue;
                    }
                    for argument in call_arguments(text, line_start + at + callee.len()) {
                        let digits = argument.trim().trim_start_matches('-');
                        if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
                            found.push(format!("{}: {}", line.trim(), argument.trim()));
                        }
                    }
                }
            }
            line_start += line.len();
        }
        found
    }

    /// No script hands the server a Lua number: Redis formats every number a script gives it
    /// with printf (`%.17g`), and the uncontended cycle's three (`HSET ... 1 ... 1`, the unlock
    /// message `0`) took about 6 % of the server's CPU per cycle (bench/NOTES.md). A constant is
    /// written as the string it becomes ('1', '0', '-1'), so the same bytes reach the server.
    #[test]
    fn scripts_give_the_server_no_number_to_format() {
        assert_eq!(
            numbers_handed_to_the_server("publish(c, 1) -- 2\npublish(c, '0', g(0))"),
            ["publish(c, 1) -- 2: 1"],
            "the scan misses a number, or finds one where none is handed over"
        );
        let mut files = Vec::new();
        lua_files(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
            &mut files,
        );
        assert!(files.len() > 20, "the scripts were not found: {files:?}");
        for file in files {
            let found = numbers_handed_to_the_server(&std::fs::read_to_string(&file).unwrap());
            assert!(
                found.is_empty(),
                "{}: write these numbers as strings: {found:#?}",
                file.display()
            );
        }
    }

    fn calls(redis: &RedisServer, stat: &str) -> i64 {
        let info = redis.command(&["INFO", "commandstats"]).unwrap_or_default();
        info.lines()
            .find_map(|line| line.strip_prefix(&format!("cmdstat_{stat}:calls=")))
            .and_then(|rest| rest.split(',').next()?.parse().ok())
            .unwrap_or(0)
    }

    /// Each form's prelude, run on a real server, sends the commands its form promises, and
    /// tells the script whether publish replies count every listener.
    #[test]
    fn each_form_publishes_and_counts_its_own_way() {
        let redis = RedisServer::start();
        let mut connection = redis.connection().unwrap();
        let probe = "return {PUBLISH_COUNTS_EVERY_LISTENER and 1 or 0, publish('c', 'm'), \
                     count_listeners('a', 'b')}";
        let stats = ["publish", "spublish", "pubsub|numsub", "pubsub|shardnumsub"];
        for (publish, counts_every_listener, sent, assumed) in [
            (Publish::Plain, 1, ["publish", "pubsub|numsub"], false),
            (
                Publish::Sharded,
                1,
                ["spublish", "pubsub|shardnumsub"],
                false,
            ),
            (Publish::Broadcast, 0, ["publish", ""], true),
        ] {
            let before: Vec<i64> = stats.iter().map(|stat| calls(&redis, stat)).collect();
            // A call borrows its script for good, as the kinds' statics are.
            let script: &'static LockScript = Box::leak(Box::new(LockScript::new(probe)));
            let reply: (i64, i64, (String, i64, String, i64)) = script
                .prepare_invoke(publish)
                .invoke(&mut connection)
                .unwrap();
            assert_eq!(reply.0, counts_every_listener, "{publish:?}");
            assert_eq!(reply.1, 0, "{publish:?}: nobody listens on c");
            assert_eq!(reply.2 .0, "a");
            assert_eq!(reply.2 .1, i64::from(assumed), "{publish:?}");
            for (stat, before) in stats.iter().zip(before) {
                let expected = before + i64::from(sent.contains(stat));
                assert_eq!(calls(&redis, stat), expected, "{publish:?} and {stat}");
            }
        }
    }
}
