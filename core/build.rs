//! Derives the commands the lock scripts call, for the ACL rule (`acl::SCRIPT_COMMANDS`): every
//! `redis.call('x', ...)` / `redis.pcall('x', ...)` in the Lua files under `src/` and in the Lua
//! the Rust sources embed (the pub/sub preludes of `kinds/script.rs`), with the subcommand for
//! the commands that have subcommands (`pubsub|numsub`), as ACL rules name them. Left out: the
//! `polylock check` probe (`src/acl/`), which calls whatever the rule lists. A script that calls
//! a command by a name held in a variable fails the build: the rule could not be derived.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Commands whose ACL grant names a subcommand (`+pubsub|numsub`): their second argument too.
const CONTAINERS: &[&str] = &[
    "pubsub", "script", "client", "cluster", "object", "config", "memory", "function", "xinfo",
    "command", "acl", "latency", "module", "slowlog",
];

fn sources(dir: &Path, found: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|err| panic!("read {}: {err}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if path.is_dir() {
            if name != "acl" {
                sources(&path, found);
            }
        } else if name.ends_with(".lua") || name.ends_with(".rs") {
            found.push(path);
        }
    }
}

/// The quoted word at the start of `text` (after blanks), and the rest after it.
fn quoted(text: &str) -> Option<(String, &str)> {
    let text = text.trim_start();
    let quote = text.chars().next().filter(|c| *c == '\'' || *c == '"')?;
    let rest = &text[1..];
    let end = rest.find(quote)?;
    Some((rest[..end].to_lowercase(), &rest[end + 1..]))
}

fn calls(path: &Path, text: &str, commands: &mut BTreeSet<String>) {
    let lua = path.extension().is_some_and(|ext| ext == "lua");
    for start in ["redis.call(", "redis.pcall("] {
        for (at, _) in text.match_indices(start) {
            let after = &text[at + start.len()..];
            let Some((command, rest)) = quoted(after) else {
                if lua {
                    let line = text[..at].lines().count();
                    panic!(
                        "{}:{line}: a script calls a command by a name held in a variable: \
                         the ACL rule cannot be derived from it (name the command literally)",
                        path.display()
                    );
                }
                continue;
            };
            if CONTAINERS.contains(&command.as_str()) {
                let sub = rest
                    .trim_start()
                    .strip_prefix(',')
                    .and_then(quoted)
                    .map(|(sub, _)| sub)
                    .unwrap_or_else(|| {
                        panic!(
                            "{}: `{command}` without a literal subcommand",
                            path.display()
                        )
                    });
                commands.insert(format!("{command}|{sub}"));
            } else {
                commands.insert(command);
            }
        }
    }
}

fn main() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    println!("cargo:rerun-if-changed=src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let mut commands = BTreeSet::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        calls(file, &text, &mut commands);
    }
    assert!(
        commands.len() > 20,
        "too few script commands found: {commands:?}"
    );
    let mut out = String::from(
        "/// Every command the lock scripts call (derived by `build.rs` from the script \
         sources; the\n/// sharded pub/sub ones only where the server has them).\n\
         pub const SCRIPT_COMMANDS: &[&str] = &[\n",
    );
    for command in &commands {
        out.push_str(&format!("    {command:?},\n"));
    }
    out.push_str("];\n");
    let dest = Path::new(&std::env::var("OUT_DIR").unwrap()).join("script_commands.rs");
    std::fs::write(dest, out).unwrap();
}
